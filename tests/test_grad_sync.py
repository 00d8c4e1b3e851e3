"""VI956: fsdp_config.use_no_sync_for_gradient_accumulation=True keeps the model's gradients unsharded in fp32 on every
GPU through the update (real case verl PR#7458: a run "failed ... because of the same issue").

Oracles: verl's own FSDP engine context (FSDPEngine._gradient_sync_context, called on CPU with a stand-in module)
turns the reduce-scatter off on non-final micro-batches only when the flag is on; torch's FSDP2 on one CPU rank, with
verl's mixed-precision policy (bf16 params, fp32 reduce), then keeps an fp32 gradient of every parameter's full size,
and none when the sync runs; verl's YAML leaves the flag off while its dataclass defaults it on.
"""

from __future__ import annotations

import contextlib
import socket

import pytest
import yaml

from helpers_verl import verl_root
from wizard.check.lint import check
from wizard.planner import memory
from wizard.planner.shapes import from_catalogue

A = "actor_rollout_ref.actor"
KEY = f"{A}.fsdp_config.use_no_sync_for_gradient_accumulation"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-14B-Instruct",
        "data.train_batch_size=256", "data.max_prompt_length=1024", "data.max_response_length=2048",
        f"{A}.strategy=fsdp2", f"{A}.ppo_mini_batch_size=64", f"{A}.use_dynamic_bsz=True",
        f"{A}.ppo_max_token_len_per_gpu=12288", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
        "actor_rollout_ref.rollout.n=5", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]


@pytest.mark.verl
def test_verls_yaml_leaves_it_off_and_its_dataclass_turns_it_on():
    from verl.workers.config.engine import FSDPEngineConfig

    fsdp = yaml.safe_load((verl_root() / "trainer" / "config" / "engine" / "fsdp.yaml").read_text(encoding="utf-8"))
    assert fsdp["use_no_sync_for_gradient_accumulation"] is False
    assert FSDPEngineConfig().use_no_sync_for_gradient_accumulation is True


@pytest.mark.verl
@pytest.mark.parametrize("flag, last, calls", [(True, False, [False, True]), (True, True, []), (False, False, [])])
def test_verls_engine_defers_the_sync_on_non_final_micro_batches(monkeypatch, flag, last, calls):
    import verl.workers.engine.fsdp.transformer_impl as impl

    seen: list[bool] = []

    class Module:
        def set_requires_gradient_sync(self, value: bool) -> None:
            seen.append(value)

    engine = type("E", (), {})()
    engine.module = Module()
    engine.engine_config = type("C", (), {"use_no_sync_for_gradient_accumulation": flag})()
    monkeypatch.setattr(impl, "fsdp_version", lambda module: 2)
    with impl.FSDPEngine._gradient_sync_context(engine, is_last_micro_batch=last):
        pass
    assert seen == calls


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _retained(defer: bool) -> list[tuple[object, int, int]]:
    """(dtype, kept elements, parameter elements) FSDP2 holds per parameter after one backward."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(0)
    mesh = init_device_mesh("cpu", (1,))
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.Linear(48, 16))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)  # verl's (impl.py:394-398)
    for layer in model:
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    model.set_requires_gradient_sync(not defer)
    model(torch.randn(4, 32)).sum().backward()
    kept = []
    for module in model.modules():
        group = module._get_fsdp_state()._fsdp_param_group if hasattr(module, "_get_fsdp_state") else None
        for p in (group.fsdp_params if group else []):
            grad = p.unsharded_accumulated_grad if defer else None
            if grad is not None:
                kept.append((grad.dtype, grad.numel(), p.sharded_param.numel()))
    return kept


def _fsdp2_kept() -> tuple[list, list]:
    """(deferred, synced) of `_retained`, on a one-rank gloo group of this process."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        return ([(str(d), k, f) for d, k, f in _retained(True)], [(str(d), k, f) for d, k, f in _retained(False)])
    finally:
        dist.destroy_process_group()


def test_torch_fsdp2_keeps_full_fp32_gradients_only_when_the_sync_is_deferred():
    """Run in a child process: torch.distributed's process group and FSDP2's CPU mesh are process-wide state, and
    left in the test worker they broke a later test's subprocess-based sandbox stand-in (seen in the quick loop)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import torch

    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_grad_sync as t; "
            "print(json.dumps(t._fsdp2_kept()))")
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True,
                         timeout=600, check=True)
    deferred, synced = json.loads(out.stdout.strip().splitlines()[-1])
    assert synced == []
    assert len(deferred) == 4 and all(d == str(torch.float32) and kept == full for d, kept, full in deferred)
    assert memory.DEFERRED_GRAD_BYTES == torch.finfo(torch.float32).bits // 8


def _hits(*extra: str, gpu_gb: float | None = 80):
    kw = {"gpu_memory_gb": gpu_gb} if gpu_gb else {}
    return [f for f in check(None, [*BASE, *extra], **kw).findings if f.problem.rule in ("VI956", "VI860")]


def test_check_errors_when_deferred_gradients_take_the_update_over_the_card():
    found = {f.problem.rule: f for f in _hits(f"{KEY}=True")}
    hit = found["VI956"]
    assert hit.problem.severity == "error" and f"{KEY}=True" in hit.problem.message
    assert "55.0 GiB" in hit.problem.message and "update" in hit.problem.message
    assert hit.fix is not None and hit.fix.set == {KEY: False}
    assert "update phase" in found["VI860"].problem.message and "deferred gradient sync" in found["VI860"].problem.message
    assert KEY in found["VI860"].problem.hint


def test_check_notes_it_without_the_gpu_memory():
    (hit,) = _hits(f"{KEY}=True", gpu_gb=None)
    assert hit.problem.rule == "VI956" and hit.problem.severity == "info" and "--gpu-memory-gb" in hit.problem.message


@pytest.mark.parametrize("extra", [
    [],  # verl's YAML default: synchronise every micro-batch
    [f"{KEY}=False"],
    [f"{KEY}=True", f"{A}.ppo_mini_batch_size=8"],  # one micro-batch per mini-batch: nothing deferred
    [f"{KEY}=True", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct"],  # fits with room to spare
])
def test_valid_controls_stay_clean(extra):
    assert _hits(*extra) == []


def test_estimate_term_is_four_bytes_per_trained_parameter():
    shape = from_catalogue("Qwen/Qwen2.5-14B-Instruct")
    base = memory.Layout(gpu_gb=80, n_gpus=8, gpus_per_node=8, seq_len=3072, rollout_tp=2, gmu=0.4, dp=8,
                         train_tokens=12288, logprob_tokens=12288, pp_micro_batches=5)
    on = memory.replace(base, deferred_grad_sync=True)
    assert memory.deferred_grad_gib(shape, on) == pytest.approx(4 * shape.params / memory.GIB)
    assert memory.estimate(shape, on).phase_gib("update") == pytest.approx(
        memory.estimate(shape, base).phase_gib("update") + 4 * shape.params / memory.GIB)
    assert memory.deferred_grad_gib(shape, memory.replace(on, pp_micro_batches=1)) == 0.0
    assert memory.deferred_grad_gib(shape, memory.replace(on, megatron=True)) == 0.0
    assert memory.deferred_grad_gib(shape, memory.replace(on, lora_rank=32)) == pytest.approx(
        4 * shape.lora_params(32) / memory.GIB)


def test_the_critics_flag_is_checked_too():
    critic = ["algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-14B-Instruct"]
    (hit,) = [f for f in _hits(*critic, "critic.fsdp.use_no_sync_for_gradient_accumulation=True", gpu_gb=None)
              if f.problem.rule == "VI956"]
    assert hit.problem.keys[0] == "critic.fsdp.use_no_sync_for_gradient_accumulation" and "critic" in hit.problem.message
    assert not [f for f in _hits(*critic, gpu_gb=None) if f.problem.rule == "VI956"]
