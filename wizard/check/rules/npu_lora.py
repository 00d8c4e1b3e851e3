"""LoRA served by vLLM-Ascend (trainer.device=npu or an Ascend --gpu-type, rollout.name=vllm) with a rank wider
than a packed layer's slice on one rollout TP rank (paths under site-packages/verl).

- VI674 (error): verl 0.9.1 starts the rollout server with enable_lora and max_lora_rank =
  get_vllm_max_lora_rank(rank) (workers/rollout/vllm_rollout/vllm_async_server.py:418-432; the rank rounded up to
  vLLM's allowed ranks, vllm_rollout/utils.py:83-102; wizard.verlspec.algorithms.VLLM_LORA_RANKS), and vLLM warms
  up a dummy adapter on every LoRA-capable layer, whatever the trainer's target_modules. On Ascend the expand step
  runs vllm-ascend's fused sgmv_expand kernel, which checks `x.size(1) <= slice_size`: the adapter rank must not
  exceed any output slice of a packed layer on one TP rank, or the engine dies at start with "RuntimeError: hidden
  in should be smaller than hidden out" (verl PR#7921: Qwen3.5-2B, LoRA rank 32 at rollout TP=2 against the
  8-wide Gated DeltaNet in_proj_ba slices, num_v_heads 16 / 2; vllm-ascend#10562, #14728). The packed layers and
  their slices per TP rank, from the model's config.json (vLLM's packed_modules_mapping of the families):
  qkv_proj (q: heads x head_dim / TP; k, v: max(kv_heads / TP, 1) x head_dim, vLLM replicating KV heads when TP
  exceeds them), gate_up_proj (intermediate / TP, dense MLPs), and on hybrid Gated DeltaNet models in_proj_qkvz
  (key heads x key dim / TP twice, value heads x value dim / TP twice) and in_proj_ba (value heads / TP twice).
  NVIDIA's punica kernels have no such check, so the rule is Ascend-only.
"""

from __future__ import annotations

from typing import Any

from wizard.check.rules.context import M, R, Ctx, Facts
from wizard.check.rules.npu import on_ascend
from wizard.verlspec.algorithms import VLLM_LORA_RANKS


def served_rank(rank: int) -> int | None:
    """verl's get_vllm_max_lora_rank: the smallest of vLLM's allowed ranks >= rank (None past the largest)."""
    return next((r for r in VLLM_LORA_RANKS if rank <= r), None)


def packed_slices(shape: Any, tp: int) -> dict[str, int]:
    """Each packed layer's narrowest output slice on one of `tp` ranks ({} when the shape lacks the numbers)."""
    out: dict[str, int] = {}
    if shape.heads and shape.head_dim and not shape.kv_lora_rank:
        kv = max(shape.kv_heads // tp, 1) * shape.head_dim if shape.kv_heads else 0
        q = shape.heads * shape.head_dim // tp
        out["qkv_proj"] = min(v for v in (q, kv) if v) if (q or kv) else 0
    if shape.intermediate and not shape.experts:
        out["gate_up_proj"] = shape.intermediate // tp
    if shape.linear_layers and shape.linear_v_heads:
        out["in_proj_ba"] = shape.linear_v_heads // tp
        dims = [shape.linear_k_heads * shape.linear_k_dim // tp, shape.linear_v_heads * shape.linear_v_dim // tp]
        out["in_proj_qkvz"] = min(d for d in dims if d) if any(dims) else 0
    return {k: v for k, v in out.items() if v > 0}


def rule_npu_lora_slices(c: Ctx, f: Facts, shape: Any) -> None:
    where = on_ascend(c)
    rank = f.lora_vllm
    if where is None or not rank or shape is None or c.v(f"{R}.name") != "vllm":
        return
    if shape.source not in ("local", "catalogue"):
        return  # a shape guessed from the name lacks the layers that matter (a hybrid's Gated DeltaNet)
    tp = c.int(f"{R}.tensor_model_parallel_size") or 1
    served = served_rank(rank)
    slices = packed_slices(shape, tp)
    if served is None or not slices:
        return  # VI856 reports a rank vLLM cannot serve at all
    layer, width = min(slices.items(), key=lambda kv: kv[1])
    if served <= width:
        return
    key = f"{M}.lora.rank" if c.int(f"{M}.lora.rank") else f"{M}.lora_rank"
    fits = [r for r in VLLM_LORA_RANKS if r <= width and r >= 8] or [r for r in VLLM_LORA_RANKS if r <= width]
    c.add("VI674", "error", (key, f"{R}.tensor_model_parallel_size"),
          f"{key}={rank} (vLLM max_lora_rank {served}) on Ascend ({where}) with {R}.tensor_model_parallel_size={tp}: "
          f"{shape.name}'s packed {layer} is {width} wide per TP rank, and vllm-ascend's sgmv_expand refuses an "
          f"adapter wider than a slice ('hidden in should be smaller than hidden out') when the rollout engine "
          f"starts (verl PR#7921)",
          f"set {key} to {fits[-1] if fits else 'a rank'} or lower" +
          (f", or lower {R}.tensor_model_parallel_size" if tp > 1 else ""))
