"""One rule set, two judges: on sampled configs, whenever verl's own checks (validate_config, the config
dataclasses and the worker-time arithmetic, wizard.verify.harness) reject a config, `verl-init check` reports an
error too; and every error verl does not share is one of the rules for what verl accepts but cannot run
well (listed below with the reason)."""

from __future__ import annotations

import random

import pytest

from wizard.check.lint import check, run_verl_checks
from wizard.check.source import load_source

pytestmark = [pytest.mark.verl, pytest.mark.slow]
N = 40

# Errors for configs verl's checks accept:
BEYOND_VERL = {
    "VI820",  # mini-batch > train batch under dynamic batching: verl pads the update with padding sequences
    "VI847",  # grpo with rollout.n=1: no group baseline (now a warning; kept in case a sample still raises it)
    "VI812",  # Ulysses SP that does not divide the attention heads (fails in the model patch at run time)
    "VI838",  # rollout TP that does not divide the attention heads (vLLM/SGLang refuse it when the engine starts)
}


def sample(seed: int) -> list[str]:
    rng = random.Random(seed)
    gpn = rng.choice([1, 2, 4, 8])
    dynamic = rng.random() < 0.4
    out = [
        "algorithm.adv_estimator=grpo", "algorithm.use_kl_in_reward=False",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.actor.use_kl_loss=True", "trainer.logger=[console]", "trainer.nnodes=1",
        f"trainer.n_gpus_per_node={gpn}",
        f"data.train_batch_size={rng.choice([8, 16, 48, 64, 65])}",
        f"actor_rollout_ref.rollout.n={rng.choice([2, 4, 5])}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={rng.choice([3, 8, 16, 32])}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={rng.choice([1, 2, 3, 4, 8])}",
        f"actor_rollout_ref.actor.use_dynamic_bsz={dynamic}",
        "data.max_prompt_length=512", "data.max_response_length=1024",
    ]
    if dynamic:
        budget = rng.choice([1000, 2048, 4096])
        out += [f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={budget}",
                f"actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu={budget}",
                f"actor_rollout_ref.ref.log_prob_max_token_len_per_gpu={budget}"]
    else:
        out += [f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={rng.choice([1, 2, 3, 4])}",
                f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={rng.choice([2, 4, 5])}",
                f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={rng.choice([2, 4])}"]
    return out


@pytest.mark.parametrize("seed", range(N))
def test_lint_errors_whenever_verl_rejects(seed):
    overrides = sample(seed)
    ours = check(None, overrides, defaults="verl")
    theirs = run_verl_checks(load_source(None, overrides))
    if not theirs.ok:
        assert ours.errors, f"verl rejects ({theirs.summary()}) but check finds no error in {overrides}"
    else:
        extra = ours.ids("error") - BEYOND_VERL
        assert not extra, (f"check reports {sorted(extra)} but verl accepts {overrides}",
                           [f.problem.line() for f in ours.errors])


def test_sample_covers_both_outcomes():
    """The sample is not one-sided. Counted with `check` alone (the test above holds it to verl's verdict on every
    seed), in this test, so the count holds whichever pytest-xdist worker ran the sampled tests."""
    seen = {"ok": 0, "reject": 0}
    for seed in range(N):
        seen["reject" if check(None, sample(seed), defaults="verl").errors else "ok"] += 1
    assert seen["ok"] >= 5 and seen["reject"] >= 5, seen


def test_verls_judge_applies_overrides_as_a_launch_does():
    """The judge composes the overrides on the command line, as main_ppo does, not merged into a YAML body (where
    Hydra accepts any new key): a RolloutConfig field the YAML lacks is refused without `+` and accepted with it."""
    key = "actor_rollout_ref.rollout.limit_images"
    base = ["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct"]
    plain = run_verl_checks(load_source(None, [*base, f"{key}=4"]))
    compose = next(c for c in plain.checks if c.name.startswith("hydra compose"))
    assert not compose.ok and "+" + key in compose.detail
    plus = run_verl_checks(load_source(None, [*base, f"+{key}=4"]))
    assert next(c for c in plus.checks if c.name.startswith("hydra compose")).ok


def test_verls_judge_composes_the_fully_async_tree_when_the_launch_names_it():
    """--config-name=fully_async_ppo_trainer: the judge composes that tree (its async_training section included), as
    fully_async_main does, instead of ppo_trainer, where every async_training key is unknown."""
    over = ["--config-name=fully_async_ppo_trainer", "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", "async_training.staleness_threshold=0.5"]
    report = run_verl_checks(load_source(None, over))
    by_name = {c.name.split(" (")[0]: c for c in report.checks}
    assert by_name["hydra compose"].ok, by_name["hydra compose"].detail
    assert by_name["every key exists in verl's tree"].ok, by_name["every key exists in verl's tree"].detail
    typo = run_verl_checks(load_source(None, [*over[:-1], "async_training.staleness_treshold=0.5"]))
    assert not next(c for c in typo.checks if c.name.startswith("hydra compose")).ok  # Hydra refuses the typo
