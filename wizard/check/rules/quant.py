"""VI990 (error): an FP8 rollout whose tensor-parallel shards do not split into verl's 128×128 FP8 blocks.

With rollout.quantization=fp8 verl asks the engine for block-wise FP8 with `weight_block_size: [128, 128]`
(vLLM: workers/rollout/vllm_rollout/vllm_async_server.py:1244-1256; SGLang: sglang_rollout/async_sglang_server.py:302-337).
The engines then refuse, while the rollout server loads the model, a row-parallel layer whose input slice per TP rank is
not a multiple of the block (vLLM's validate_fp8_block_shape, model_executor/layers/quantization/utils/fp8_utils.py:
`input_size_per_partition % block_k != 0` for `tp_size > 1`, "Weight input_size_per_partition = … is not divisible by
weight quantization block_k = 128"; SGLang's FP8 layers carry the same check), and a fused-MoE expert whose
intermediate slice is not (Fp8MoEMethod.create_weights). The row-parallel layers of a decoder are o_proj (input
heads × head_dim) and the MLP's down_proj (input intermediate_size), each split over the rollout's TP size; the
experts' intermediate size is split the same way when expert parallelism is off (vllm#52997, verl#6112: Qwen2.5-14B's
13824 / 8 = 1728 = 13.5 blocks). Only a model shape with its own sizes (catalogue or local config.json) is judged.
"""

from __future__ import annotations

from typing import Any

from wizard.check.rules.context import R, Ctx, Facts, divisors, join_or, nearest

BLOCK = 128  # verl's FP8 weight_block_size, both dimensions (vllm_async_server.py:1254)


def fp8_misfits(shape: Any, tp: int, ep: int = 1) -> list[str]:
    """The row-parallel slices (and MoE expert slices) at this TP size that are not whole 128-blocks."""
    if tp <= 1:
        return []
    out = []
    rows = []
    if not shape.kv_lora_rank and shape.heads % tp == 0 and shape.layers > shape.linear_layers:
        rows.append(("o_proj", shape.heads * shape.head_dim))
    if not shape.experts or shape.dense_layers:
        rows.append(("down_proj", shape.intermediate))
    if shape.experts and shape.moe_intermediate and ep <= 1:
        rows.append(("the experts' down_proj", shape.moe_intermediate))
    for name, size in rows:
        if size % tp == 0 and (size // tp) % BLOCK:
            out.append(f"{name} {size} / TP {tp} = {size // tp}")
    return out


def rule_fp8_blocks(c: Ctx, f: Facts, shape: Any) -> None:
    key = f"{R}.tensor_model_parallel_size"
    if shape is None or shape.source not in ("catalogue", "local") or c.v(f"{R}.quantization") != "fp8" or \
            c.v(f"{R}.name") not in ("vllm", "sglang") or c.unknown(key):
        return
    tp = c.int(key) or 1
    ep = c.int(f"{R}.expert_parallel_size") or 1
    misfits = fp8_misfits(shape, tp, ep)
    if not misfits:
        return
    inside = divisors(f.gpn) if f.gpn else [1, 2, 4, 8]
    valid = [t for t in inside if not fp8_misfits(shape, t, ep) and shape.heads % t == 0]
    c.add("VI990", "error", (key, f"{R}.quantization"),
          f"FP8 rollout of {shape.name} at {key.rsplit('.', 1)[1]}={tp}: verl asks for 128×128 FP8 blocks "
          f"(vllm_async_server.py:1254) and {'; '.join(misfits)} is not a multiple of 128: the engine refuses the "
          "model when the rollout server loads it (\"Weight input_size_per_partition … is not divisible by weight "
          "quantization block_k = 128\")",
          f"use a rollout TP of {join_or(nearest(valid, tp))}" if valid else
          f"turn FP8 off ({R}.quantization=null) for this model")
