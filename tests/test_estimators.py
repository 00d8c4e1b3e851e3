"""VI847: rollout.n=1 with an estimator that compares a prompt's samples. What each estimator then does is verl's own
answer: scripts/verl_estimators.py runs verl's compute_advantage (compiled from trainer/ppo/ray_trainer.py) on a
batch of one sample per prompt, and check reads the table (wizard/check/data/verl_estimators.json).

The arithmetic the table must agree with, from verl's code: GRPO gives a group of one mean 0 and std 1, so the
advantage is the raw score; vectorized RLOO multiplies by (count > 1) (core_algos.py, compute_rloo_vectorized_...),
so every advantage is 0 (real case verl PR #7581); Pass@k GRPO raises on a group of one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules import roles

ROOT = Path(__file__).resolve().parent.parent
BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "trainer.nnodes=1",
        "trainer.n_gpus_per_node=8", "actor_rollout_ref.rollout.n=1"]


def _vi847(adv: str) -> list:
    report = check(None, BASE + [f"algorithm.adv_estimator={adv}"])
    return [f.problem for f in report.findings if f.problem.rule == "VI847"]


@pytest.mark.verl
def test_regenerating_gives_the_committed_table():
    from helpers_scripts import regenerated

    assert regenerated("verl_estimators") == \
        (ROOT / "wizard" / "check" / "data" / "verl_estimators.json").read_text(encoding="utf-8")


def test_the_table_agrees_with_the_arithmetic_in_verls_code():
    got = roles.estimator_outcomes()
    assert got["grpo"] == {"1": "raw", "4": "relative"}  # mean 0, std 1 for a group of one
    assert got["rloo_vectorized"] == {"1": "zero", "4": "relative"}  # × (count > 1)
    assert got["grpo_passk"]["1"].startswith("raises: ValueError") and got["grpo_passk"]["4"] == "relative"
    assert got["reinforce_plus_plus"]["1"] == "relative"  # whitened over the batch: no group needed


@pytest.mark.slow
def test_check_says_what_verl_does_with_one_sample():
    [zero] = _vi847("rloo_vectorized")
    assert zero.severity == "error" and "advantage of 0" in zero.message
    [raises] = _vi847("grpo_passk")
    assert raises.severity == "error" and "Pass@k requires at least 2 samples" in raises.message
    [raw] = _vi847("grpo")
    assert raw.severity == "warning" and "raw score" in raw.message
    assert not _vi847("reinforce_plus_plus")


def test_the_rule_reads_the_table(monkeypatch):
    """A planted outcome is what check reports: grpo said to give zeros becomes an error."""
    table = {**roles.estimator_outcomes(), "grpo": {"1": "zero", "4": "relative"}}
    monkeypatch.setattr(roles, "estimator_outcomes", lambda: table)
    [planted] = _vi847("grpo")
    assert planted.severity == "error" and "advantage of 0" in planted.message
