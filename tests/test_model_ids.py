"""Issue 27 item 5: model ids are checked offline against the catalogue and the local Hugging Face cache: a near
miss gets did-you-mean, an id found nowhere is a warning saying where verl-init looked (VI548)."""

from __future__ import annotations

import wizard
from wizard.intent.answers import make_answers

BASE = dict(nnodes=1, gpus_per_node=8, gpu_memory_gb=80, dataset="gsm8k")


def vi548(tmp_path, monkeypatch, model: str):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "hub" / "models--acme--foo-7b").mkdir(parents=True, exist_ok=True)
    plan = wizard.plan(make_answers({**BASE, "model": model}), base_dir=str(tmp_path))
    return [p for p in plan.findings if p.rule == "VI548"]


def test_near_miss_of_a_catalogue_id_gets_did_you_mean(tmp_path, monkeypatch):
    (p,) = vi548(tmp_path, monkeypatch, "Qwen/Qwen2.5-7B-Instrcut")
    assert p.severity == "warning" and "did you mean Qwen/Qwen2.5-7B-Instruct?" in p.hint
    assert str(tmp_path / "hub") in p.message and "catalog.yaml" in p.message


def test_an_id_found_nowhere_says_where_it_looked(tmp_path, monkeypatch):
    (p,) = vi548(tmp_path, monkeypatch, "acme/bar-7b")
    assert "neither the catalogue" in p.message and str(tmp_path / "hub") in p.message and "did you mean" not in p.hint


def test_known_ids_pass(tmp_path, monkeypatch):
    assert not vi548(tmp_path, monkeypatch, "Qwen/Qwen2.5-7B-Instruct")
    assert not vi548(tmp_path, monkeypatch, "qwen/qwen2.5-7b")  # an alias, any case
    assert not vi548(tmp_path, monkeypatch, "acme/foo-7b")  # in the local cache
