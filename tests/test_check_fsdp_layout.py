"""How verl's FSDP engine lays the actor's training state out, as `check` reads it.

FSDP2's CPU offload policy (fsdp_config.offload_policy): torch's CPUOffloadPolicy keeps the sharded fp32 weights,
gradients and Adam states on the host and steps the optimizer there (verl 0.9.1 workers/engine/fsdp/transformer_impl.py
:458-463 for fsdp2, fsdp_turbo_impl.py:55-60), so the update holds none of them on the GPU. FSDP1 (strategy fsdp,
verl's default) never reads the key: its update still holds them. verl's own Qwen3.5-35B-A3B fsdp_turbo example
(tests/test_check_moe.py RW028) fits 8 × 80 GB only this way.

fsdp_size below the GPU count: verl builds a (ddp × fsdp) mesh and shards over fsdp_size GPUs only, replicating
across the rest (workers/engine/fsdp/utils.py:47-52 create_device_mesh), as verl's fully async 7B scripts do
(fsdp_size=8 on 16 to 64 trainer GPUs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wizard.check.lint import check


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    for name in ("train.parquet", "val.parquet"):
        (tmp_path / name).write_bytes(b"PAR1")
    return tmp_path


def _update(data: Path, *extra: str, nodes: int = 1) -> dict[str, float]:
    argv = ["algorithm.adv_estimator=grpo", f"data.train_files={data / 'train.parquet'}",
            f"data.val_files={data / 'val.parquet'}", "data.train_batch_size=64", "data.max_prompt_length=1024",
            "data.max_response_length=2048", "actor_rollout_ref.model.path=Qwen/Qwen2.5-14B-Instruct",
            "actor_rollout_ref.actor.ppo_mini_batch_size=32", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2", "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.gpu_memory_utilization=0.5",
            "trainer.logger=[console]", f"trainer.nnodes={nodes}", "trainer.n_gpus_per_node=8", *extra]
    report = check(None, argv, nnodes=nodes, gpus_per_node=8, gpu_memory_gb=80, defaults="snapshot",
                   env={"HOME": "/nonexistent-home"})
    assert report.memory is not None, [f.problem.line() for f in report.findings]
    est = report.memory
    return {t.part: t.gib for t in est.phases["update"] if t.role == "actor"} | {"host": est.host_gb_per_node}


@pytest.mark.parametrize("strategy", ["fsdp2", "fsdp_turbo"])
def test_the_cpu_offload_policy_keeps_the_training_state_on_the_host(data, strategy):
    on = _update(data, f"actor_rollout_ref.actor.strategy={strategy}", "actor_rollout_ref.actor.fsdp_config.offload_policy=True")
    off = _update(data, f"actor_rollout_ref.actor.strategy={strategy}")
    # 14.8B parameters over 8 GPUs: fp32 weights 4 B, gradients 4 B, Adam 8 B per parameter, each 1/8 per GPU
    assert off["optimizer states"] == pytest.approx(8 * 14.77e9 / 8 / 2**30, rel=0.02)
    assert {"weights", "gradients", "optimizer states"} <= set(off)
    assert not {"weights", "gradients", "optimizer states"} & set(on)
    assert on["host"] > off["host"]


def test_fsdp1_does_not_read_the_offload_policy(data):
    on = _update(data, "actor_rollout_ref.actor.strategy=fsdp", "actor_rollout_ref.actor.fsdp_config.offload_policy=True")
    assert on["optimizer states"] > 0 and on["weights"] > 0


def test_fsdp_size_below_the_gpu_count_shards_over_that_many_gpus_only(data):
    """32 GPUs, fsdp_size 8: each GPU holds 1/8 of the fp32 weights, gradients and Adam states (14.8B parameters:
    4, 4 and 8 bytes each), four times what sharding over all 32 holds. fsdp_size -1 or 32 (the GPU count) is the
    whole world."""
    whole = _update(data, "actor_rollout_ref.actor.strategy=fsdp2", nodes=4)
    hybrid = _update(data, "actor_rollout_ref.actor.strategy=fsdp2", "actor_rollout_ref.actor.fsdp_config.fsdp_size=8",
                     nodes=4)
    same = _update(data, "actor_rollout_ref.actor.strategy=fsdp2", "actor_rollout_ref.actor.fsdp_config.fsdp_size=32",
                   nodes=4)
    assert hybrid["optimizer states"] == pytest.approx(8 * 14.77e9 / 8 / 2**30, rel=0.02)
    assert hybrid["weights"] == pytest.approx(4 * whole["weights"]) and same["weights"] == pytest.approx(whole["weights"])
    assert hybrid["optimizer states"] == pytest.approx(4 * whole["optimizer states"])
