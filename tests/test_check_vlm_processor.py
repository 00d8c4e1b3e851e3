"""`check` VI665: rows with images/videos/audio while verl 0.9.1's hf_processor builds no processor for the model.

Real cases (round 55): Gemma 3 (verl#6341: Gemma3Processor has no case in hf_processor's match), Kimi-VL from PR
#1639's example (verl#1428: KimiVLProcessor), and a saved Qwen2.5-VL checkpoint folder with the tokenizer but no
preprocessor_config.json (hiyouga/EasyR1#48, a verl fork).

The oracle is verl's own code, on CPU: hf_processor (utils/tokenizer/tokenizer.py:182-251) on tiny model folders
built here gives None for a processor class its match lacks (LlavaProcessor) and for a folder without processor
files, and RLHFDataset with that None stops on a media row (rl_dataset.py:323). check reports VI665 on the same
folders and stays clean on a folder whose processor class verl keeps, on text-only rows, and on a catalogued VLM.
The table the rule reads is regenerated from hf_processor's match and compared with the committed one.
"""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path

import pytest

from test_data_content import _check, _parquet, row

ROOT = Path(__file__).resolve().parent.parent
PROMPT = [{"role": "user", "content": "<image>Find x."}]
VL_CONFIG = {"model_type": "qwen2_5_vl", "architectures": ["Qwen2_5_VLForConditionalGeneration"],
             "hidden_size": 896, "num_hidden_layers": 2, "num_attention_heads": 14, "num_key_value_heads": 2,
             "intermediate_size": 4864, "vocab_size": 151936, "vision_config": {"depth": 2, "hidden_size": 64}}


def _png() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (4, 4), (0, 0, 255)).save(out, format="PNG")
    return out.getvalue()


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "<|im_end|>": 1, "<image>": 2, "<|image_pad|>": 3, "x": 4}
    t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", eos_token="<|im_end|>", pad_token="[UNK]")
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    return tok


def _no_processor_folder(tmp_path: Path) -> Path:
    """A saved VLM checkpoint folder: config.json and the tokenizer, no preprocessor_config.json."""
    folder = tmp_path / "vl_ckpt"
    _tokenizer().save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps(VL_CONFIG))
    return folder


def _llava_folder(tmp_path: Path) -> Path:
    """A model folder whose processor is LlavaProcessor (transformers builds it offline)."""
    from transformers import LlavaConfig, LlavaProcessor
    from transformers.models.clip.image_processing_clip import CLIPImageProcessor

    folder = tmp_path / "llava"
    LlavaProcessor(image_processor=CLIPImageProcessor(), tokenizer=_tokenizer(), patch_size=14,
                   chat_template="{{ 'x' }}").save_pretrained(folder)
    LlavaConfig().save_pretrained(folder)
    return folder


def _kept_folder(tmp_path: Path) -> Path:
    """A Qwen2.5-VL folder as the hub ships it: preprocessor_config.json naming Qwen2_5_VLProcessor."""
    folder = _no_processor_folder(tmp_path)
    (folder / "preprocessor_config.json").write_text(json.dumps(
        {"processor_class": "Qwen2_5_VLProcessor", "image_processor_type": "Qwen2VLImageProcessor", "patch_size": 14}))
    return folder


def _verl_processor(folder: Path):
    from verl.utils.tokenizer import hf_processor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return hf_processor(str(folder))


def _data(tmp_path: Path, media: bool) -> Path:
    rows = [row(i, prompt=PROMPT if media else [{"role": "user", "content": "Find x."}], ds="hiyouga/geometry3k",
                gt="3") for i in range(4)]
    if media:
        png = _png()
        rows = [dict(r, images=[{"bytes": png, "path": None}]) for r in rows]
    return _parquet(tmp_path / ("media.parquet" if media else "text.parquet"), rows)


def _hits(data: Path, model: str, *extra: str):
    report = _check(data, data, f"actor_rollout_ref.model.path={model}", *extra)
    return [f.problem for f in report.findings if f.problem.rule == "VI665"]


@pytest.mark.verl
def test_regenerating_gives_the_committed_table():
    from helpers_scripts import regenerated

    committed = (ROOT / "wizard" / "check" / "data" / "verl_processor_cases.json").read_text("utf-8")
    assert regenerated("verl_processor_cases") == committed


@pytest.mark.verl
def test_verl_builds_no_processor_and_its_dataset_stops_on_media(tmp_path):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    assert _verl_processor(_no_processor_folder(tmp_path)) is None
    assert _verl_processor(_llava_folder(tmp_path)) is None  # "Unsupported processor type: LlavaProcessor"
    cfg = OmegaConf.create({"max_prompt_length": 512, "image_key": "images", "filter_overlong_prompts": False})
    ds = RLHFDataset(data_files=[str(_data(tmp_path, media=True))], tokenizer=_tokenizer(), config=cfg, processor=None)
    with pytest.raises(AssertionError, match="processor is needed"):
        ds[0]


@pytest.mark.verl
@pytest.mark.parametrize("build", [_no_processor_folder, _llava_folder])
def test_planted_folders_draw_vi665(tmp_path, build):
    folder = build(tmp_path)
    assert _verl_processor(folder) is None  # the oracle
    hits = _hits(_data(tmp_path, media=True), str(folder))
    assert len(hits) == 1 and hits[0].severity == "error", hits
    assert "data.image_key" in hits[0].keys and "rl_dataset.py:323" in hits[0].message


def test_tokenizer_path_is_where_verl_loads_the_processor(tmp_path):
    # the model folder is complete, the tokenizer_path (where HFModelConfig loads the processor, model.py:162) is not
    kept = _kept_folder(tmp_path / "a")
    bare = _no_processor_folder(tmp_path / "b")
    hits = _hits(_data(tmp_path, media=True), str(kept), f"actor_rollout_ref.model.tokenizer_path={bare}")
    assert len(hits) == 1 and hits[0].keys[0] == "actor_rollout_ref.model.tokenizer_path", hits


def test_a_catalogued_text_model_on_image_rows_draws_vi665(tmp_path):
    hits = _hits(_data(tmp_path, media=True), "Qwen/Qwen2.5-7B-Instruct")
    assert len(hits) == 1 and "qwen2" in hits[0].message, hits


def test_controls_stay_clean(tmp_path):
    media, text = _data(tmp_path, media=True), _data(tmp_path, media=False)
    assert not _hits(media, str(_kept_folder(tmp_path / "k")))  # a processor class verl keeps
    assert not _hits(media, "Qwen/Qwen2.5-VL-7B-Instruct")  # catalogued qwen2_5_vl -> Qwen2_5_VLProcessor
    assert not _hits(text, str(_no_processor_folder(tmp_path / "t")))  # no media: verl never asks for a processor
    assert not _hits(media, "someorg/unknown-model")  # a model check cannot place: left alone


# --- verl's SFT trainer: the same processor (sft_trainer.py:203), MultiTurnSFTDataset asserts it (:265-269) -------

SFT_MESSAGES = [{"role": "user", "content": "<image>What is the angle?"}, {"role": "assistant", "content": "30"}]


@pytest.mark.verl
@pytest.mark.parametrize("complete", [False, True])
def test_sft_trainer_too(tmp_path, complete):
    from types import SimpleNamespace

    import datasets
    import pandas as pd
    from verl.utils.dataset import multiturn_sft_dataset as sft

    from wizard.check.lint import check

    data = tmp_path / "sft.parquet"
    datasets.Dataset.from_list([{"messages": SFT_MESSAGES, "images": [{"bytes": _png(), "path": None}]}] * 2) \
        .to_parquet(str(data))
    folder = _kept_folder(tmp_path) if complete else _no_processor_folder(tmp_path)
    if not complete:  # the oracle: verl's processor is None and its SFT dataset refuses the row without one
        assert _verl_processor(folder) is None
        example = pd.read_parquet(data, dtype_backend="pyarrow").iloc[0].to_dict()
        me = SimpleNamespace(messages_key="messages", image_key="images", video_key="videos", processor=None,
                             image_patch_size=14)
        with pytest.raises(AssertionError, match="processor is needed"):
            sft.MultiTurnSFTDataset._build_messages(me, example)
    script = tmp_path / "sft.sh"
    script.write_text("#!/bin/bash\ntorchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer "
                      f"data.train_files={data} data.messages_key=messages model.path={folder} "
                      "trainer.logger=[console]\n")
    hits = [f.problem for f in check(str(script), env={"HOME": "/root"}).findings if f.problem.rule == "VI665"]
    assert bool(hits) is not complete, [h.message for h in hits]
    if hits:
        assert hits[0].keys[0] == "model.path" and "multiturn_sft_dataset.py:269" in hits[0].message


def test_a_model_folders_json_is_read_bounded(tmp_path):
    """A model folder's JSON is read at most 4 MiB and never from a FIFO (the brief: every outside read bounded)."""
    import os

    from wizard.check.rules.vlm_processor import _read

    small = tmp_path / "config.json"
    small.write_text('{"model_type": "qwen2_5_vl"}', encoding="utf-8")
    assert _read(small) == {"model_type": "qwen2_5_vl"}
    big = tmp_path / "preprocessor_config.json"
    big.write_text('{"pad": "' + "x" * (5 << 20) + '"}', encoding="utf-8")
    assert _read(big) == {}
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert _read(fifo) == {}  # refused at once, not waited on
