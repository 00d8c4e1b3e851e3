"""`check` VI878 on the placeholders of a vision/video/audio row (real case verl#841: Geometry3K-style rows whose
prompt has no `<image>` for the row's image). verl 0.9.1 pairs the n-th `<image>` of the prompt's string contents
with the n-th item of data.image_key, in a row with any media, and asserts the counts (RLHFDataset._build_messages,
utils/dataset/rl_dataset.py:313-383); with data.filter_overlong_prompts on it drops such a row silently.

The oracle is verl's own `_build_messages`, called on each row: check reports VI878 for a row exactly when verl's
method raises. The cases are the class, not one row: too few, too many, none, several messages, video and audio
keys, a structured content list (verl pairs nothing in it), a text-only row that mentions "<image>" (verl keeps it as
text).
"""

from __future__ import annotations

import copy
import io
from pathlib import Path
from types import SimpleNamespace

import pytest

from test_data_content import _check, _parquet, row


def _png() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (4, 4), (255, 0, 0)).save(out, format="PNG")
    return out.getvalue()


USER = "user"

CASES = {
    "one_for_one": ([{"role": USER, "content": "<image>What is the angle?"}], {"images": 1}),
    "missing_placeholder": ([{"role": USER, "content": "What is the angle?"}], {"images": 1}),
    "two_placeholders_one_image": ([{"role": USER, "content": "<image><image>Compare."}], {"images": 1}),
    "split_over_messages": ([{"role": "system", "content": "<image>"}, {"role": USER, "content": "and <image>"}],
                            {"images": 2}),
    "text_only_mentions_image": ([{"role": USER, "content": "What does <image> mean in HTML?"}], {}),
    "video_without_placeholder": ([{"role": USER, "content": "Describe it."}], {"videos": 1}),
    "video_with_placeholder": ([{"role": USER, "content": "<video>Describe it."}], {"videos": 1}),
    "image_and_audio_one_short": ([{"role": USER, "content": "<image><audio>"}], {"images": 1, "audios": 2}),
}


def _media(counts: dict[str, int]) -> dict[str, list | None]:
    """Every media column, None where the row has none (pyarrow takes a table's columns from its first row)."""
    png = _png()
    items = {"images": {"bytes": png}, "videos": "/data/clip.mp4", "audios": "/data/a.wav"}
    return {key: [items[key]] * counts[key] if counts.get(key) else None for key in items}


def _verl_refuses(prompt: list[dict], media: dict[str, list]) -> bool:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    me = SimpleNamespace(image_key="images", video_key="videos", audio_key="audios", processor=object())
    example = copy.deepcopy({"prompt": prompt, **{k: v for k, v in media.items() if v is not None}})  # verl edits it
    try:
        RLHFDataset._build_messages(me, example, key="prompt")
    except AssertionError:
        return True
    return False


@pytest.mark.verl
@pytest.mark.parametrize("case", sorted(CASES))
def test_check_flags_a_row_exactly_when_verl_refuses_it(tmp_path, case):
    prompt, counts = CASES[case]
    media = _media(counts)
    refuses = _verl_refuses(prompt, media)
    rows = [{**row(0, prompt=[{"role": USER, "content": "What is 2+3?"}]), **_media({})}, {**row(1, prompt=prompt), **media}]
    train = _parquet(tmp_path / "train.parquet", rows)
    val = _parquet(tmp_path / "val.parquet", [row(0)])
    hits = [f.problem for f in _check(train, val).findings if f.problem.rule == "VI878"]
    assert bool(hits) == refuses, (case, refuses, [h.message for h in hits])
    if hits:
        assert "row 1" in hits[0].message and "rl_dataset.py:381-383" in hits[0].message
        assert "[VI576]" in hits[0].hint


@pytest.mark.verl
def test_the_class_has_both_outcomes():
    """The cases are not one-sided: verl's own method refuses some and accepts others."""
    refused = {case for case, (prompt, counts) in CASES.items() if _verl_refuses(prompt, _media(counts))}
    assert refused == {"missing_placeholder", "two_placeholders_one_image", "video_without_placeholder",
                       "image_and_audio_one_short"}


@pytest.mark.verl
def test_a_structured_content_list_has_no_placeholders_to_pair(tmp_path):
    """A message whose content is already a list of parts is skipped by verl (rl_dataset.py:325-327), so its image
    is never paired and verl's final count refuses the row; check counts the same way."""
    prompt = [{"role": USER, "content": [{"type": "image"}, {"type": "text", "text": "What is the angle?"}]}]
    media = _media({"images": 1})
    assert _verl_refuses(prompt, media)
    train = _parquet(tmp_path / "train.parquet", [{**row(0, prompt=prompt), **media}])
    hits = [f.problem for f in _check(train, train).findings if f.problem.rule == "VI878"]
    assert hits and "0 <image> placeholder(s)" in hits[0].message


def test_a_renamed_image_key_is_followed(tmp_path):
    prompt = [{"role": USER, "content": "What is the angle?"}]
    png = _png()
    train = _parquet(tmp_path / "train.parquet", [{**row(0, prompt=prompt), "pictures": [{"bytes": png}]}])
    assert "VI878" not in {f.problem.rule for f in _check(train, train).findings}  # data.image_key=images: unread
    hits = [f.problem for f in _check(train, train, "data.image_key=pictures").findings if f.problem.rule == "VI878"]
    assert hits and "'pictures'" in hits[0].message
