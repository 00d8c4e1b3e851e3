"""LoRA in the step time (wizard.planner.steptime): the Workload fields of a LoRA run, what its adapters add to the
training passes and to the rollout's decode, and what an unmerged weight sync ships.

- Training: the frozen base computes no weight gradients (its backward is 2 × params × tokens FLOPs, not 4 ×), but
  every adapted module runs peft's adapter beside it, memory-bound elementwise work on the activations. Traced in
  tests/test_steptime_lora.py on peft's own LoRA Linear: per token, a module of `in` inputs and `out` outputs moves
  in + 6·out bf16 elements in the forward (x into lora_A; lora_B's output written, scaled, added: peft
  tuners/lora/layer.py Linear.forward) and 5·in + 4·out in the backward, beside the base layer's.
- Rollout: verl starts vLLM with enable_lora when model.lora.merge is false (verl 0.9.1
  workers/rollout/vllm_rollout/vllm_async_server.py:371-388); vLLM then runs lora_shrink and lora_expand for each
  LoRA layer (vllm/lora/punica_wrapper/punica_gpu.py add_lora_linear), four a decoder layer as vLLM merges them
  (QKV, o, gate_up, down).
- Weight sync: unmerged, verl ships the adapters alone once the engine holds the base (workers/engine_workers.py:
  770-789).

It imports wizard.planner.megatron_lora (the Megatron adapters' count) and the standard library only.
"""

from __future__ import annotations

from typing import Any

from wizard.planner.megatron_lora import megatron_lora_params

# vLLM's LoRA kernels a decoder layer adds (lora_shrink + lora_expand for each of its four LoRA layers), beside the
# dozen kernels of a layer that steptime's DECODE_LAYER_S and EAGER_LAYER_S stand for: each costs as one of those
# (assumed, not fitted; vLLM's kernels are Triton's, launched from Python in eager mode)
LORA_DECODE_KERNELS = 8
LAYER_KERNELS = 12
# peft's adapter traffic per token and adapted module, in elements of its inputs and outputs (traced)
FWD_IN, FWD_OUT, BWD_IN, BWD_OUT = 1, 6, 5, 4


def lora_fields(shape: Any, rank: int, megatron: bool, merge: bool = False) -> dict[str, Any]:
    """A LoRA run's Workload fields on verl's default target modules (FSDP: peft's all-linear, hf_model.yaml
    `target_modules`; Megatron: linear_qkv, linear_proj, linear_fc1, linear_fc2): the adapters' parameters, the
    tensors an unmerged sync ships (lora_A and lora_B of each adapted module: peft's seven a layer, a MoE's q, k, v,
    o, router and its fused experts' gate_up and down wrapped whole; Megatron's four, a MoE's on every expert) and
    the inputs and outputs a token passes through adapters (adapter_io); {} for a full fine-tune or a shape without
    its layers."""
    if not rank or not hasattr(shape, "lora_params"):
        return {}
    experts = int(getattr(shape, "experts", 0) or 0)
    if megatron:
        params, modules = megatron_lora_params(shape, rank), (2 + 2 * experts if experts else 4)
    else:
        params, modules = shape.lora_params(rank), 7
    return {"lora_params": float(params), "adapter_tensors": 0 if merge else 2 * modules * shape.layers,
            "adapter_io": adapter_io(shape, megatron)}


def adapter_io(shape: Any, megatron: bool) -> tuple[float, float]:
    """(Σ inputs, Σ outputs) of the adapted modules one token passes, over all layers: attention's q, k, v, o (Megatron
    fuses q, k, v into linear_qkv) and the MLP's gate, up, down (Megatron: linear_fc1, linear_fc2), a MoE's through
    the experts it routes to (Megatron's adapters on every expert; peft's on transformers' fused experts, a
    ParamWrapper, are not counted). Megatron-Bridge's adapters are taken to move per module what peft's do
    (assumed; only peft's are traced)."""
    h, q, kv = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    experts = int(getattr(shape, "experts", 0) or 0)
    if experts and not megatron:
        mlp_in, mlp_out = 0, 0
    else:
        inter = shape.moe_intermediate * shape.active_experts if experts else shape.intermediate
        mlp_in, mlp_out = (h + inter, 2 * inter + h) if megatron else (2 * h + inter, 2 * inter + h)
    attn_in, attn_out = (h + q, q + 2 * kv + h) if megatron else (3 * h + q, q + 2 * kv + h)
    return float((attn_in + mlp_in) * shape.layers), float((attn_out + mlp_out) * shape.layers)


def adapter_seconds(io: tuple[float, float], tokens: float, bandwidth: float, backward: bool = False) -> float:
    """Seconds of peft's adapter traffic for `tokens` tokens at `bandwidth` bytes/s: the forward's, or the
    backward's."""
    a, b = (BWD_IN, BWD_OUT) if backward else (FWD_IN, FWD_OUT)
    return tokens * 2 * (a * io[0] + b * io[1]) / bandwidth


def adapter_update_seconds(w: Any, tokens: float, bandwidth: float) -> float:
    """The update's adapter traffic: the forward (again with activation recompute) and the backward, every epoch;
    0 for a full fine-tune."""
    if not w.lora_params:
        return 0.0
    fwd = adapter_seconds(w.adapter_io, tokens, bandwidth)
    return (fwd * (2 if w.recompute else 1) + adapter_seconds(w.adapter_io, tokens, bandwidth, True)) * w.ppo_epochs


def lora_assumptions(w: Any, logprob_s: float, update_s: float) -> dict[str, Any]:
    """What a step time names of its LoRA (nothing for a full fine-tune)."""
    if not w.lora_params:
        return {}
    return {"lora_trained_params": round(w.lora_params),
            "lora_weight_sync": "the adapters alone" if w.adapter_tensors else "the merged weights",
            "lora_decode_layer_factor": round(decode_kernel_factor(w), 3),
            "lora_adapter_s": {"old log-prob": round(logprob_s, 1), "update": round(update_s, 1)}}


def decode_kernel_factor(w: Any) -> float:
    """The per-layer decode costs' factor with vLLM's LoRA kernels (an unmerged LoRA), else 1."""
    return 1 + LORA_DECODE_KERNELS / LAYER_KERNELS if w.lora_params and w.adapter_tensors else 1.0


__all__ = ["lora_fields", "adapter_io", "adapter_seconds", "adapter_update_seconds", "decode_kernel_factor",
           "lora_assumptions"]
