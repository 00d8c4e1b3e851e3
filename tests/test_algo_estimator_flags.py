"""VI426 / VI427: advantage-estimator settings verl 0.9.1 accepts and does not apply (wizard/check/rules/algo_flags.py).

The oracle is verl's own compute_advantage (trainer/ppo/ray_trainer.py:187, compiled from its source by
scripts/verl_algo_estimator_flags.py), called the way the trainers call it:
- verl PR#7893: grpo_vectorized with norm_adv_by_std_in_grpo=False gives the same advantages as with True, still
  divided by the group std; grpo (the control) reads the flag.
- verl PR#6452: with rollout rejection sampling a rejected response keeps its reward in its group's GRPO baseline;
  opo weights each response by its unmasked length, so a rejected row drops out (the control).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers_scripts import load_script
from wizard.check.lint import check
from wizard.check.rules import algo_flags

ROOT = Path(__file__).resolve().parent.parent
BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "trainer.nnodes=1",
        "trainer.n_gpus_per_node=8", "actor_rollout_ref.rollout.n=4"]
RS = ["algorithm.rollout_correction.rollout_rs=seq_sum_k1", "algorithm.rollout_correction.rollout_rs_threshold=2.0",
      "actor_rollout_ref.rollout.calculate_log_probs=True"]


def _found(rule: str, overrides: list[str]) -> list:
    return [f.problem for f in check(None, BASE + overrides).findings if f.problem.rule == rule]


@pytest.fixture(scope="module")
def verl_advantage():
    gen = load_script("verl_algo_estimator_flags")
    compute, _ = gen.verls_compute_advantage()
    return gen, compute


@pytest.mark.verl
def test_regenerating_gives_the_committed_table():
    from helpers_scripts import regenerated

    assert regenerated("verl_algo_estimator_flags") == \
        (ROOT / "wizard" / "check" / "data" / "verl_algo_estimator_flags.json").read_text(encoding="utf-8")


@pytest.mark.verl
def test_verl_ignores_the_flag_in_grpo_vectorized_and_reads_it_in_grpo(verl_advantage):
    import torch

    gen, compute = verl_advantage
    scores, groups = gen._rows()
    vec_on = gen._advantages(compute, "grpo_vectorized", scores, groups, True)
    vec_off = gen._advantages(compute, "grpo_vectorized", scores, groups, False)
    assert torch.allclose(vec_on, vec_off)  # the flag changes nothing (PR#7893)
    tenfold = gen._advantages(compute, "grpo_vectorized", [10 * s for s in scores], groups, False)
    assert torch.allclose(vec_off, tenfold, atol=1e-4)  # and the advantages are still std-normalised
    grpo_off = gen._advantages(compute, "grpo", scores, groups, False)
    assert not torch.allclose(grpo_off, vec_off, atol=1e-3)  # grpo reads it: centred, not divided
    assert torch.allclose(gen._advantages(compute, "grpo", [10 * s for s in scores], groups, False), 10 * grpo_off,
                          atol=1e-4)


@pytest.mark.verl
def test_verl_keeps_a_rejected_rows_reward_in_the_grpo_baseline(verl_advantage):
    gen, compute = verl_advantage
    assert gen.rejected_rows(compute, "grpo") == "leak"  # PR#6452
    assert gen.rejected_rows(compute, "opo") == "excluded"  # length-weighted: a fully masked row weighs 0


def test_the_table_agrees_with_verls_code():
    got = algo_flags.estimator_flags()
    assert got["grpo"] == {"norm_flag": "reads", "rejected_rows": "leak"}
    assert got["grpo_vectorized"]["norm_flag"] == "ignored, scaled"
    assert got["gdpo"]["norm_flag"] == "ignored, scaled"  # hands its own default True to grpo, then whitens
    assert got["rloo"]["norm_flag"] == "ignored, unscaled"  # never divides: False is what it does anyway
    assert "seq_sum_k1" in algo_flags.sequence_rs_options() and "token_k1" not in algo_flags.sequence_rs_options()


def test_vi426_flags_the_ignored_flag_and_fixes_it_to_grpo():
    [hit] = _found("VI426", ["algorithm.adv_estimator=grpo_vectorized", "algorithm.norm_adv_by_std_in_grpo=False"])
    assert hit.severity == "warning" and "grpo_vectorized never reads it" in hit.message
    assert "algorithm.adv_estimator=grpo" in hit.hint


@pytest.mark.parametrize("overrides", [
    ["algorithm.adv_estimator=grpo", "algorithm.norm_adv_by_std_in_grpo=False"],  # grpo reads it (Dr.GRPO)
    ["algorithm.adv_estimator=grpo_vectorized"],  # default True: nothing lost
    ["algorithm.adv_estimator=rloo", "algorithm.norm_adv_by_std_in_grpo=False"],  # rloo never divides anyway
])
def test_vi426_controls_stay_clean(overrides):
    assert not _found("VI426", overrides)


def test_vi427_flags_rejection_with_a_leaking_baseline():
    [hit] = _found("VI427", ["algorithm.adv_estimator=grpo", *RS])
    assert hit.severity == "warning" and "rollout_rs=seq_sum_k1" in hit.message and "bypass_mode=True" in hit.hint


@pytest.mark.parametrize("overrides", [
    ["algorithm.adv_estimator=grpo"],  # no rejection sampling
    ["algorithm.adv_estimator=grpo", *RS, "algorithm.rollout_correction.bypass_mode=True"],  # rejection in the loss
    ["algorithm.adv_estimator=opo", *RS],  # opo drops masked rows from its baseline
    ["algorithm.adv_estimator=grpo", "algorithm.rollout_correction.rollout_rs=token_k1",  # masks tokens, not responses
     "algorithm.rollout_correction.rollout_rs_threshold=2.0", "actor_rollout_ref.rollout.calculate_log_probs=True"],
])
def test_vi427_controls_stay_clean(overrides):
    assert not _found("VI427", overrides)


def test_the_rules_read_the_table(monkeypatch):
    """A planted verdict is what check reports: grpo said to ignore the flag draws VI426."""
    table = {**algo_flags.estimator_flags(), "grpo": {"norm_flag": "ignored, scaled", "rejected_rows": "excluded"}}
    monkeypatch.setattr(algo_flags, "estimator_flags", lambda: table)
    assert _found("VI426", ["algorithm.adv_estimator=grpo", "algorithm.norm_adv_by_std_in_grpo=False"])
    assert not _found("VI427", ["algorithm.adv_estimator=grpo", *RS])
