"""`check` VI640: a data row whose media column (data.image_key / video_key / audio_key) holds one item, not a list
(real case verl#837: Geometry3K-style rows with one {bytes, path} image dict per row, 'int' object has no attribute
'width'). verl 0.9.1 indexes the cell as a list (RLHFDataset._build_messages, utils/dataset/rl_dataset.py:315-335);
with data.filter_overlong_prompts on, its length filter swallows the error and drops the row (rl_dataset.py:206-244).

The oracle is verl's own `_build_messages`, called on each planted row: check reports VI640 exactly for the rows
verl's method raises on because of the cell's shape, and stays clean on the list-shaped controls.
"""

from __future__ import annotations

import copy
import io
from types import SimpleNamespace

import pytest

from test_data_content import _check, _parquet, row

PROMPT = [{"role": "user", "content": "<image>What is the angle?"}]


def _png() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (4, 4), (255, 0, 0)).save(out, format="PNG")
    return out.getvalue()


def _cells() -> dict[str, tuple[str, object, bool]]:
    """name -> (column, cell, faulty)."""
    png = _png()
    return {
        "one_image_dict": ("images", {"bytes": png, "path": None}, True),
        "one_image_path": ("images", "/data/img0.png", True),
        "one_video_path": ("videos", "/data/clip.mp4", True),
        "image_list": ("images", [{"bytes": png, "path": None}], False),
        "image_path_list": ("images", ["/data/img0.png"], False),
    }


def _verl_refuses(prompt: list[dict], column: str, cell: object) -> bool:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    me = SimpleNamespace(image_key="images", video_key="videos", audio_key="audios", processor=object())
    try:
        RLHFDataset._build_messages(me, copy.deepcopy({"prompt": prompt, column: cell}), key="prompt")
    except Exception:  # noqa: BLE001 - any raise is what the length filter swallows
        return True
    return False


@pytest.mark.parametrize("name", sorted(_cells()))
def test_vi640_matches_verls_own_build_messages(tmp_path, name):
    column, cell, faulty = _cells()[name]
    prompt = [{"role": "user", "content": "<video>Describe it."}] if column == "videos" else PROMPT
    assert _verl_refuses(prompt, column, cell) is faulty  # the oracle: verl raises exactly on the faulty shapes
    rows = [dict(row(i, prompt=prompt, ds="hiyouga/geometry3k", gt="3"), **{column: cell}) for i in range(3)]
    train = _parquet(tmp_path / "train.parquet", rows)
    hits = [f.problem for f in _check(train, train).findings if f.problem.rule == "VI640"]
    assert bool(hits) is faulty, [h.message for h in hits]
    if faulty:
        assert all(f"data.{column[:-1]}_key" in h.keys for h in hits)
        assert any(repr(column) in h.message and "not a list" in h.message for h in hits)


def test_vi640_follows_the_configured_key(tmp_path):
    """data.image_key=pictures: the 'pictures' cell is read, the unread 'images' column is not."""
    rows = [dict(row(i, prompt=PROMPT, ds="hiyouga/geometry3k", gt="3"), pictures={"bytes": _png(), "path": None})
            for i in range(2)]
    train = _parquet(tmp_path / "train.parquet", rows)
    assert "VI640" not in {f.problem.rule for f in _check(train, train).findings}
    hits = [f.problem for f in _check(train, train, "data.image_key=pictures").findings if f.problem.rule == "VI640"]
    assert hits and "'pictures'" in hits[0].message


# --- the SFT trainer: MultiTurnSFTDataset indexes the cell as a list too (multiturn_sft_dataset.py:255-288) ---

SFT_MESSAGES = [{"role": "user", "content": "<image>What is the angle?"}, {"role": "assistant", "content": "30"}]


def _sft_parquet(path, cell) -> str:
    import datasets

    datasets.Dataset.from_list([{"messages": SFT_MESSAGES, "images": cell}] * 2).to_parquet(str(path))
    return str(path)


def _verl_sft_refuses(path: str, monkeypatch) -> bool:
    """verl's MultiTurnSFTDataset._build_messages on the row as its loader reads it (pandas, pyarrow dtypes:
    multiturn_sft_dataset.py:147). process_image (qwen_vl_utils, not installed here) comes after the indexing this
    rule is about: it is replaced by the identity."""
    import pandas as pd
    from verl.utils.dataset import multiturn_sft_dataset as sft

    monkeypatch.setattr(sft, "process_image", lambda image, image_patch_size=None: image)
    example = pd.read_parquet(path, dtype_backend="pyarrow").iloc[0].to_dict()
    me = SimpleNamespace(messages_key="messages", image_key="images", video_key="videos", processor=object(),
                         image_patch_size=14)
    try:
        sft.MultiTurnSFTDataset._build_messages(me, example)
    except Exception:  # noqa: BLE001 - KeyError / AssertionError: the first batch stops
        return True
    return False


@pytest.mark.parametrize("faulty", [True, False])
def test_vi640_sft_matches_verls_sft_dataset(tmp_path, monkeypatch, faulty):
    from wizard.check.lint import check

    png = {"bytes": _png(), "path": None}
    data = _sft_parquet(tmp_path / "train.parquet", png if faulty else [png])
    assert _verl_sft_refuses(data, monkeypatch) is faulty  # the oracle
    script = tmp_path / "sft.sh"
    script.write_text("#!/bin/bash\ntorchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer "
                      f"data.train_files={data} data.messages_key=messages model.path=Qwen/Qwen2.5-VL-3B-Instruct "
                      "trainer.logger=[console]\n")
    hits = [f.problem for f in check(str(script), env={"HOME": "/root"}).findings if f.problem.rule == "VI640"]
    assert bool(hits) is faulty, [h.message for h in hits]
    if faulty:
        assert "MultiTurnSFTDataset" in hits[0].message and "data.image_key" in hits[0].keys
