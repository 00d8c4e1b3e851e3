"""A hub model id (`actor_rollout_ref.model.path=org/name`) whose files are in this machine's Hugging Face cache: `check`
reads them there, as verl's own loads would, with no network (held-out case R4-05: prompts over max_prompt_length
with a hub model, which check counted only for a local folder).

The cache is built here in the layout huggingface_hub writes (models--org--name/refs/main → snapshots/<commit>/),
and huggingface_hub's own `try_to_load_from_cache` is the oracle for what it finds: the same id with no cache entry
gets the old behaviour (catalogue or nothing), and a cache holding only another model changes nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wizard.check.lint import check

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _cache(root: Path, repo: str, files_from: Path, extra: dict[str, str] | None = None) -> Path:
    org, name = repo.split("/")
    base = root / f"models--{org}--{name}"
    snap = base / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    for f in files_from.iterdir():
        if f.is_file():
            shutil.copy(f, snap / f.name)
    for fname, text in (extra or {}).items():
        (snap / fname).write_text(text, encoding="utf-8")
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(COMMIT, encoding="utf-8")
    return snap


@pytest.fixture()
def hub_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants

    root = tmp_path / "hf-cache"
    root.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(root))
    return root


def _long_prompts(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "the answer is " * 60}],
             "reward_model": {"ground_truth": "1", "style": "rule"}} for _ in range(4)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _ids(tmp_path: Path, repo: str, *extra: str) -> set[str]:
    data = _long_prompts(tmp_path / "train.parquet")
    report = check(None, [f"actor_rollout_ref.model.path={repo}", f"data.train_files={data}", f"data.val_files={data}",
                          "data.max_prompt_length=64", "data.filter_overlong_prompts=false", "trainer.nnodes=1",
                          "trainer.n_gpus_per_node=1", "actor_rollout_ref.rollout.name=vllm", *extra],
                   gpu_memory_gb=80)
    return {f.problem.rule for f in report.findings} | {f"why:{f.problem.message}" for f in report.findings
                                                      if f.problem.rule == "VI861"}


def test_the_oracle_finds_the_snapshot(hub_cache, tiny_model):
    from huggingface_hub import try_to_load_from_cache

    snap = _cache(hub_cache, "acme/tiny-chat", tiny_model)
    assert try_to_load_from_cache("acme/tiny-chat", "config.json") == str(snap / "config.json")
    assert try_to_load_from_cache("acme/other", "config.json") is None


def test_a_cached_hub_model_is_read_like_a_local_folder(tmp_path, hub_cache, tiny_model):
    assert "VI867" not in _ids(tmp_path, "acme/tiny-chat")  # not cached: nothing to count with
    _cache(hub_cache, "acme/tiny-chat", tiny_model)
    ids = _ids(tmp_path, "acme/tiny-chat")
    assert "VI867" in ids  # its tokenizer counted the prompts
    # its config.json sized it: the memory rules no longer say it is unknown
    assert not [i for i in ids if i.startswith("why:") and "not in verl-init's model catalogue" in i], ids


def test_another_cached_model_changes_nothing(tmp_path, hub_cache, tiny_model):
    _cache(hub_cache, "acme/tiny-chat", tiny_model)
    assert "VI867" not in _ids(tmp_path, "acme/not-cached")


def test_custom_code_in_the_cache_needs_trust_remote_code(tmp_path, hub_cache, tiny_model):
    config = json.loads((tiny_model / "config.json").read_text())
    config.update(model_type="tiny_custom_lm", auto_map={"AutoConfig": "configuration_tiny.TinyCustomConfig"})
    _cache(hub_cache, "acme/custom-lm", tiny_model, {"config.json": json.dumps(config)})
    assert "VI886" in _ids(tmp_path, "acme/custom-lm")
    assert "VI886" not in _ids(tmp_path, "acme/custom-lm", "actor_rollout_ref.model.trust_remote_code=true")
