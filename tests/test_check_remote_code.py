"""VI886: a local model folder whose config.json needs its own code (auto_map, a model_type transformers does not
know) with actor_rollout_ref.model.trust_remote_code false (real case verl#1412, MiMo-7B with trust_remote_code set
on other keys). The oracle is transformers' own AutoConfig, which verl calls with that flag (workers/config/
model.py:181): it refuses the folder without trust_remote_code and loads it with it; a known model_type loads either
way, and check says nothing about it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wizard.check.lint import check

CODE = ("from transformers import PretrainedConfig\n\n\nclass TinyCustomConfig(PretrainedConfig):\n"
        "    model_type = 'tiny_custom_lm'\n")


def _folder(tmp_path: Path, model_type: str) -> Path:
    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": model_type, "auto_map": {"AutoConfig": "configuration_tiny.TinyCustomConfig"},
        "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 4096}), encoding="utf-8")
    (folder / "configuration_tiny.py").write_text(CODE, encoding="utf-8")
    return folder


def _vi886(folder: Path, *extra: str) -> list:
    report = check(None, [f"actor_rollout_ref.model.path={folder}", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
                          *extra])
    return [f.problem for f in report.findings if f.problem.rule == "VI886"]


def test_transformers_refuses_the_folder_without_the_flag(tmp_path):
    from transformers import AutoConfig

    folder = _folder(tmp_path, "tiny_custom_lm")
    with pytest.raises(ValueError, match="trust_remote_code"):
        AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    assert AutoConfig.from_pretrained(str(folder), trust_remote_code=True).model_type == "tiny_custom_lm"
    known = _folder(tmp_path, "qwen2")  # a leftover auto_map on a model_type transformers has
    assert AutoConfig.from_pretrained(str(known), trust_remote_code=False).model_type == "qwen2"


def test_check_names_the_flag(tmp_path):
    folder = _folder(tmp_path, "tiny_custom_lm")
    [hit] = _vi886(folder)
    assert hit.severity == "error" and hit.keys[0] == "actor_rollout_ref.model.trust_remote_code"
    assert "tiny_custom_lm" in hit.message
    assert not _vi886(folder, "actor_rollout_ref.model.trust_remote_code=true")
    assert not _vi886(_folder(tmp_path, "qwen2"))
