"""The on-policy distillation teacher pool (real case verl PR#6358: the multi-teacher example wired
distillation.nnodes to the trainer's node count): check's VI973. The oracle is verl's own DistillationConfig, built
from the resolved `distillation` section as the trainer builds it (omega_conf_to_dataclass,
trainer/ppo/v1/trainer_base.py:360), over verl's own Hydra tree: every case first asserts what verl does with it."""

from __future__ import annotations


import pytest

from helpers_verl import distillation_error
from wizard.check.lint import check
from wizard.check.rules.distill import pool_problem

pytestmark = pytest.mark.verl  # verl's config class is the oracle

A = "actor_rollout_ref.actor"
BASE = ["algorithm.adv_estimator=grpo", "data.train_files=/d/train.parquet", "data.val_files=/d/val.parquet",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=4", f"{A}.ppo_mini_batch_size=8", f"{A}.use_dynamic_bsz=True",
        "data.train_batch_size=16", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
        "distillation.teacher_key=data_source", "distillation.distillation_loss.loss_mode=k1",
        "distillation.distillation_loss.use_policy_gradient=True", "distillation.distillation_loss.use_task_rewards=False"]
T = "distillation.teacher_models"


def _teacher(name: str, key: str, replicas: int | None = None, **inference: int) -> list[str]:
    out = [f"+{T}.{name}.key={key}", f"+{T}.{name}.model_path=Qwen/Qwen3-32B", f"+{T}.{name}.inference.name=vllm"]
    out += [f"+{T}.{name}.num_replicas={replicas}"] if replicas is not None else []
    return out + [f"+{T}.{name}.inference.{k}={v}" for k, v in inference.items()]


def _pool(gpn: int, nnodes: int, enabled: bool = True) -> list[str]:
    return [f"distillation.enabled={enabled}", f"distillation.n_gpus_per_node={gpn}", f"distillation.nnodes={nnodes}"]


# PR#6358 as first posted: two teachers of 1 replica × TP 2 (4 GPUs), the pool 4 × NNODES=2
PR6358 = [*_pool(4, 2), *_teacher("gsm8k", "openai/gsm8k", 1, tensor_model_parallel_size=2),
          *_teacher("geo3k", "hiyouga/geometry3k", 1, tensor_model_parallel_size=2)]
SINGLE = [f"{T}.teacher_model.model_path=Qwen/Qwen3-32B", f"{T}.teacher_model.inference.tensor_model_parallel_size=2"]
# one teacher of 2 replicas × TP 1 × DP 2, one of 1 replica with the TP left to RolloutConfig's default (2): 6 GPUs
MIXED = [*_teacher("a", "openai/gsm8k", 2, tensor_model_parallel_size=1, data_parallel_size=2),
         *_teacher("b", "hiyouga/geometry3k", 1)]


def _verl_says(overrides: tuple[str, ...]) -> str:
    """'ok', or the message of what verl's DistillationConfig raises, for verl's ppo_trainer with these overrides."""
    cause = distillation_error(overrides)
    if cause is None:
        return "ok"
    assert isinstance(cause, ValueError), cause
    return str(cause)


def _vi973(overrides: list[str]):
    report = check(None, overrides, defaults="snapshot", env={"HOME": "/nonexistent-home"})
    return [f for f in report.findings if f.problem.rule == "VI973"]


def test_pr6358_teacher_pool_twice_the_teachers_is_an_error_fixed_by_the_pools_own_nodes():
    verl = _verl_says(tuple(BASE + PR6358))
    assert verl.startswith("Sum of teacher (num_replicas * per_replica_world_size) (4) must match"), verl
    [one] = _vi973(BASE + PR6358)
    assert one.problem.severity == "error" and one.problem.keys[:2] == ("distillation.n_gpus_per_node",
                                                                         "distillation.nnodes")
    assert "4 GPUs" in one.problem.message and "= 8 GPUs" in one.problem.message
    assert "distillation.py:281-286" in one.problem.message and "trainer_base.py:360" in one.problem.message
    assert one.fix is not None and one.fix.set == {"distillation.nnodes": 1}
    # the control: the fix verl's PR adopted (distillation.nnodes=1) is what verl accepts, and check is silent
    fixed = [o.replace("distillation.nnodes=2", "distillation.nnodes=1") for o in BASE + PR6358]
    assert _verl_says(tuple(fixed)) == "ok"
    assert _vi973(fixed) == []


def test_a_single_teachers_replica_must_divide_the_pool():
    bad = [*BASE, *_pool(3, 1), *SINGLE]
    verl = _verl_says(tuple(bad))
    assert verl.startswith("Single teacher's per_replica_world_size (2) must divide"), verl
    [one] = _vi973(bad)
    assert "does not divide" in one.problem.message and "distillation.py:300-305" in one.problem.message
    good = [*BASE, *_pool(4, 1), *SINGLE]  # verl sets num_replicas = 4 // 2 itself
    assert _verl_says(tuple(good)) == "ok" and _vi973(good) == []


@pytest.mark.parametrize(("gpn", "nnodes"), [(3, 2), (6, 1), (8, 1), (4, 1)])
def test_teachers_defaults_count_as_verl_counts_them(gpn, nnodes):
    """A `+` teacher leaves num_replicas and the parallel sizes to the dataclasses' defaults: 2 × (1·2) + 1 × (2·1)
    = 6 GPUs. check's arithmetic (the pure function and the finding) agrees with verl's class on every pool."""
    overrides = [*BASE, *_pool(gpn, nnodes), *MIXED]
    verl_ok = _verl_says(tuple(overrides)) == "ok"
    assert verl_ok == (gpn * nnodes == 6)
    assert (_vi973(overrides) == []) == verl_ok


def test_distillation_off_is_not_checked():
    off = [*BASE, *[o.replace("enabled=True", "enabled=False") for o in PR6358]]
    assert _verl_says(tuple(off)) == "ok"  # DistillationConfig returns before the pool (distillation.py:270-271)
    assert _vi973(off) == []
    assert pool_problem({"distillation.enabled": False}) is None


def test_verls_own_distillation_examples_pass_both():
    """verl's on_policy_distillation_trainer examples (single teacher, TP 2 on 4 GPUs; TP 1 on 1 GPU)."""
    for extra in ([*_pool(4, 1), *SINGLE], [*_pool(1, 1), *SINGLE[:1],
                                             f"{T}.teacher_model.inference.tensor_model_parallel_size=1"]):
        assert _verl_says(tuple(BASE + extra)) == "ok"
        assert _vi973(BASE + extra) == []
