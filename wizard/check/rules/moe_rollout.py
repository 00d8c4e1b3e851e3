"""VI430 / VI431: a MoE rollout whose weight sync or expert-load metrics verl 0.9.1 cannot serve.

VI430 (warning): a bf16 MoE model served by vLLM on an SM100-family card (B200, GB200, B300: compute capability
10.x, wizard.verlspec.hardware.GPU_COMPUTE_CAPABILITY) with vLLM's MoE backend left to vLLM. verl 0.9.1's `vllm`
extra pins vllm==0.24.0 (its METADATA), whose unquantized-MoE oracle puts the FlashInfer TRT-LLM backend first on
non-Hopper CUDA; that backend converts w13/w2 into a 4-D block layout once, at load. verl's standard weight sync then
feeds checkpoint-format tensors straight into the live parameters (workers/rollout/vllm_rollout/utils.py:405
`model.load_weights(param_updates)`, :353 process_weights_after_loading once at the end), so the expert
weight_loader meets a 4-D tensor and raises "shard_dim=0 is not a valid data dimension for a 3D tensor" at the first
sync, after the GPUs are booked (verl#7978; the fix, verl PR#7987, is not in 0.9.1). verl already knows the layout
problem: its delta_sharded path forces moe_backend='triton' for a MoE model (vllm_async_server.py:1142, :1177).
Not judged: an FP8/other rollout.quantization (another load path), moe_backend=triton, the delta_sharded backend.

VI431 (warning): rollout.moe_load_balance_metrics_interval > 0 (rollout.yaml:341, default 0) where verl never gets
the routes it counts. Only the V1 trainer reads the interval (trainer/ppo/v1/trainer_base.py:1882), and it counts
the batch's routed_experts, which the vLLM / SGLang server returns only with rollout.enable_rollout_routing_replay=
True (vllm_async_server.py:451, async_sglang_server.py:404). Without them verl logs one "Skipping rollout MoE
load-balance metrics" line (trainer/ppo/metric_utils.py:308) and no rollout/moe/* metric ever appears (verl
PR#6853 added the metrics; its review made the missing-routes case a one-time warning).

Every line cited comes from verl's source: wizard/check/data/verl_moe_rollout.json, written by
scripts/verl_moe_rollout.py.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import M, R, Ctx, Facts, model_shape
from wizard.verlspec.hardware import compute_capability_of_gpu_type

SM100_MAJOR = 10  # the FlashInfer TRT-LLM MoE kernels' family (B200/GB200 10.0, B300 10.3)
MOE_BACKEND = f"{R}.engine_kwargs.vllm.moe_backend"
SAFE_BACKEND = "triton"  # the backend verl's delta_sharded path forces for a MoE (checkpoint-layout experts)
CKPT_BACKEND = f"{R}.checkpoint_engine.backend"
INTERVAL = f"{R}.moe_load_balance_metrics_interval"
CAPTURE = f"{R}.enable_rollout_routing_replay"


@cache
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_moe_rollout.json").read_text(encoding="utf-8")
    return json.loads(text)


def at(name: str) -> str:
    """`file.py:line` for each file the table records for `name`."""
    return ", ".join(f"{rel.rsplit('/', 1)[-1]}:{line}" for rel, line in table()["lines"][name].items())


def _version(text: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in str(text).split(".")[:2])
    except ValueError:
        return ()


def rule_moe_blackwell_sync(c: Ctx, f: Facts) -> None:
    """VI430."""
    found = compute_capability_of_gpu_type(getattr(c.hw, "gpu_type", None))
    pin = (table().get("vllm_pin") or {}).get("version")
    if found is None or found[1][0] != SM100_MAJOR or _version(pin) < (0, 24):
        return
    if c.unknown(f"{R}.name", f"{R}.quantization", MOE_BACKEND, CKPT_BACKEND) or c.v(f"{R}.name") != "vllm":
        return
    if c.v(f"{R}.quantization") not in (None, "", "null") or c.v(CKPT_BACKEND) == "delta_sharded":
        return
    backend = c.v(MOE_BACKEND)
    if backend is not None and str(backend).lower() == SAFE_BACKEND:
        return
    shape, _ = model_shape(c, f"{M}.path")
    if not getattr(shape, "experts", 0):
        return
    name, (major, minor) = found
    c.add("VI430", "warning", (f"{M}.path", MOE_BACKEND),
          f"{MOE_BACKEND}={backend if backend is not None else 'unset'} with the bf16 MoE {c.v(f'{M}.path')} "
          f"({shape.experts} experts) on {c.hw.gpu_type} ({name}: SM{major}{minor}) with vLLM {pin} (verl's pin): vLLM "
          "picks its FlashInfer TRT-LLM MoE backend, which re-lays the expert weights out in 4-D, and verl's weight "
          f"sync loads checkpoint-format tensors into them ({at('sync_load_weights')}), so the first sync raises "
          "ValueError 'shard_dim=0 is not a valid data dimension' after the GPUs are booked (verl#7978)",
          f"set ++{MOE_BACKEND}={SAFE_BACKEND}, the backend verl itself forces for MoE weight updates "
          f"({at('delta_sharded_forces_triton')})",
          fix=Fix(set={"++" + MOE_BACKEND: SAFE_BACKEND}))


def rule_moe_lb_metrics(c: Ctx, f: Facts) -> None:
    """VI431."""
    interval = c.int(INTERVAL)
    if interval is None or interval <= 0 or c.unknown(INTERVAL, CAPTURE, "trainer.use_v1"):
        return
    if c.v("trainer.use_v1") is False:
        c.add("VI431", "warning", (INTERVAL, "trainer.use_v1"),
              f"{INTERVAL}={interval} with trainer.use_v1=False: only the V1 trainer reads the interval "
              f"({at('metrics_interval_read')}), so no rollout/moe/* metric is logged",
              "remove the interval, or run the V1 trainer (trainer.use_v1=True, verl's default)")
        return
    if c.v(CAPTURE) is True:
        return
    c.add("VI431", "warning", (INTERVAL, CAPTURE),
          f"{INTERVAL}={interval} with {CAPTURE}=False: the metrics count the rollout's routed_experts, which the "
          f"rollout server returns only with {CAPTURE}=True ({at('rollout_capture')}); verl logs one 'Skipping "
          f"rollout MoE load-balance metrics' line ({at('metrics_skip_without_routes')}) and no rollout/moe/* "
          "metric ever appears",
          f"set {CAPTURE}=True (the routes also feed router replay R3), or remove the interval",
          fix=Fix(set={CAPTURE: True}))
