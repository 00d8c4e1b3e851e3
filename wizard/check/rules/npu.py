"""Settings verl 0.9.1 accepts on Ascend NPUs (trainer.device=npu, or an Ascend --gpu-type) that then fail on the
NPUs, after Ray has placed the workers (paths under site-packages/verl).

- VI672 (error): fused kernels that reach verl's own Triton kernels. With use_fused_kernels=True verl patches the
  model's forward (models/transformers/monkey_patch.py:246-282): fused_kernel_options.impl_backend=triton swaps in
  forward_with_triton_backend, which calls verl.utils.kernel.linear_cross_entropy (dense_common.py:157,189); the
  Megatron engine's fused forward always does (models/mcore/model_forward_fused.py:35,110; engine
  megatron/transformer_impl.py:522-531 keeps it on when use_remove_padding is on and the model is no value model;
  trainer/config/model/hf_model.yaml:66-68 "Megatron only supports triton"). Those kernels carry one autotune
  config each, tuned for NVIDIA shared memory, with no device branch (utils/kernel/kernels.py:183-188:
  efficient_entropy_kernel_general_mainloop, BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=32, num_stages=3).
  triton-ascend places a block's tiles in the AI core's Unified Buffer, 192 KiB on Atlas A2/A3 (910B): the fp32
  accumulator alone is 128 KiB and the staged bf16 input tiles add 72 KiB, so the compile stops with "ub overflow,
  requires 8577280 bits while 1572864 bits available" (verl#7950, 910B, CANN 9.0). The table of kernels, configs
  and backends is wizard/check/data/verl_npu_kernels.json, written from verl's source by
  scripts/verl_npu_kernels.py. impl_backend=torch (the default) and liger take the torch forward and are fine.
- VI673 (error): the Megatron engine with virtual pipeline stages (megatron.virtual_pipeline_model_parallel_size > 1)
  while use_mbridge keeps its default True (workers/config/engine.py:208). On NPU verl registers MindSpeed's engine
  for megatron (workers/engine/mindspeed/transformer_impl.py:56,90) and builds the VPP chunks through mbridge
  (megatron/transformer_impl.py:353-363); that pair is not supported on Ascend and fails with "IndexError: too many
  indices for tensor of dimension 3" (verl#4815, Qwen3-8B; verl's Ascend guide,
  docs/ascend_tutorial/feature_support/npu_advance_features.md:209-210: "use_mbridge and VPP are not supported
  together; verl enables mbridge by default, so set use_mbridge=False with VPP"). verl itself does not refuse it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from wizard.check.rules.context import M, Ctx, Facts
from wizard.verlspec.hardware import accelerator_of_gpu_type

# The Unified Buffer of one Atlas A2/A3 (910B) AI core: triton-ascend's "1572864 bits available" (verl#7950)
ASCEND_UB_BYTES = 1572864 // 8
BF16, FP32 = 2, 4


@lru_cache(maxsize=1)
def kernel_table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_npu_kernels.json").read_text(encoding="utf-8")
    return json.loads(text)


def on_ascend(c: Ctx) -> str | None:
    """How the config says it runs on Ascend NPUs ('trainer.device=npu' or the --gpu-type), else None."""
    if str(c.v("trainer.device") or "").lower() == "npu":
        return "trainer.device=npu"
    if c.hw.gpu_type and accelerator_of_gpu_type(c.hw.gpu_type) == "ascend":
        return f"--gpu-type {c.hw.gpu_type}"
    return None


def tile_bytes(cfg: dict[str, int]) -> int:
    """A matmul block's Unified Buffer need: the fp32 accumulator plus num_stages copies of the bf16 input tiles."""
    m, n, k = cfg.get("BLOCK_SIZE_M", 0), cfg.get("BLOCK_SIZE_N", 0), cfg.get("BLOCK_SIZE_K", 0)
    if not k:
        return 0
    return m * n * FP32 + cfg.get("num_stages", 1) * (m + n) * k * BF16


def worst_kernel() -> tuple[str, dict[str, int], int] | None:
    """The Triton kernel of verl's fused path whose tuned block needs the most Unified Buffer, when it overflows."""
    table = kernel_table()
    if table["kernels_mention_npu"]:
        return None  # verl grew a device branch: its configs may no longer be the NVIDIA ones
    rows = [(name, cfg, tile_bytes(cfg)) for name, cfgs in table["autotune"].items() for cfg in cfgs]
    # the forward kernel first among equals: the log-prob pass compiles it before any backward (verl#7950 names it)
    worst = max(rows, key=lambda r: (r[2], "backward" not in r[0]), default=None)
    return worst if worst and worst[2] > ASCEND_UB_BYTES else None


def _fused_path(c: Ctx, f: Facts, sft: bool) -> tuple[str, str, bool] | None:
    """(model prefix, why it reaches verl's Triton kernels, Megatron?) when the training forward compiles them."""
    table = kernel_table()
    prefix = "model" if sft else M
    if c.v(f"{prefix}.use_fused_kernels", table["default_use_fused_kernels"]) is not True:
        return None
    backend = str(c.v(f"{prefix}.fused_kernel_options.impl_backend") or table["default_impl_backend"])
    megatron = str(c.v("engine.strategy") or "") == "megatron" if sft else \
        (f.megatron or str(c.v("model_engine") or "") == "megatron")
    if megatron:
        if c.v(f"{prefix}.use_remove_padding") is False or not table["megatron_fused_imports_triton_kernel"]:
            return None  # the engine turns fused kernels off without remove-padding (transformer_impl.py:526-531)
        return prefix, "the Megatron engine's fused forward (model_forward_fused.py) always runs verl's Triton " \
                       "linear_cross_entropy", True
    if backend in table["triton_backends"]:
        return prefix, f"{prefix}.fused_kernel_options.impl_backend={backend} swaps in forward_with_triton_backend " \
                       "(monkey_patch.py:282), which runs verl's Triton linear_cross_entropy", False
    return None


def rule_npu_fused_kernels(c: Ctx, f: Facts, sft: bool = False) -> None:
    where = on_ascend(c)
    worst = worst_kernel()
    path = _fused_path(c, f, sft) if where and worst else None
    if path is None or worst is None:
        return
    prefix, why, megatron = path
    name, cfg, need = worst
    block = "x".join(str(cfg[k]) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"))
    keep = "" if megatron else (f", or keep it with {prefix}.fused_kernel_options.impl_backend=torch (verl's "
                                "default: the same fused forward in torch)")
    c.add("VI672", "error", (f"{prefix}.use_fused_kernels", f"{prefix}.fused_kernel_options.impl_backend"),
          f"{prefix}.use_fused_kernels=True on Ascend ({where}): {why}, whose kernel {name} is tuned only for "
          f"NVIDIA GPUs (block {block}, num_stages={cfg.get('num_stages', 1)}, utils/kernel/kernels.py): about "
          f"{need // 1024} KiB per block against the NPU core's {ASCEND_UB_BYTES // 1024} KiB Unified Buffer, so "
          f"triton-ascend stops with 'ub overflow' when the first update compiles it (verl#7950)",
          f"set {prefix}.use_fused_kernels=False{keep}")


def rule_npu_sft_fused_kernels(c: Ctx, f: Facts) -> None:
    rule_npu_fused_kernels(c, f, sft=True)


ROLES = ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic")


def rule_npu_mbridge_vpp(c: Ctx, f: Facts) -> None:
    where = on_ascend(c)
    if where is None:
        return
    for role in ROLES:
        if (role.endswith(".ref") and not f.use_ref) or (role == "critic" and not f.use_critic):
            continue  # verl builds no such model: its settings are unread (VI844)
        if c.v(f"{role}.strategy") != "megatron" and not (role != "critic" and str(c.v("model_engine") or "") == "megatron"):
            continue
        vpp = c.int(f"{role}.megatron.virtual_pipeline_model_parallel_size")
        if vpp is None or vpp <= 1 or c.v(f"{role}.megatron.use_mbridge", True) is not True:
            continue
        c.add("VI673", "error", (f"{role}.megatron.virtual_pipeline_model_parallel_size", f"{role}.megatron.use_mbridge"),
              f"{role}.megatron.virtual_pipeline_model_parallel_size={vpp} with {role}.megatron.use_mbridge=True "
              f"(verl's default, workers/config/engine.py:208) on Ascend ({where}): MindSpeed's Megatron engine does "
              f"not support mbridge with virtual pipeline stages and the model build fails with 'IndexError: too many "
              f"indices for tensor of dimension 3' (verl#4815; verl's Ascend guide npu_advance_features.md:209-210)",
              f"set {role}.megatron.use_mbridge=False (keeping VPP), or drop "
              f"{role}.megatron.virtual_pipeline_model_parallel_size")
