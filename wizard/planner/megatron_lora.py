"""LoRA adapters of a Megatron actor: their parameters in all (Megatron-Bridge's fused layer names) and per GPU
(split like their layers). wizard.planner.memory counts their weights, gradients and optimizer states."""

from __future__ import annotations

from typing import Any


def megatron_lora_params(s: Any, rank: int) -> int:
    """LoRA parameters Megatron-Bridge adds on verl's default model.lora.target_modules (linear_qkv, linear_proj,
    linear_fc1, linear_fc2: wizard.verlspec.lora.MEGATRON_TARGET_MODULES), each adapter rank × (in + out) of its
    layer under Megatron's fused names: QKV (hidden → q + 2 kv), the attention output (q → hidden), the gated MLP's
    fused gate+up (hidden → 2 × intermediate) and its down projection (intermediate → hidden); a MoE's adapters on
    every expert's fc1/fc2 (the router excluded, as verl's default does)."""
    return sum(_megatron_lora_split(s, rank))


def _megatron_lora_split(s: Any, rank: int) -> tuple[int, int]:
    """(dense, expert) LoRA parameters of megatron_lora_params."""
    h, q, kv = s.hidden, s.heads * s.head_dim, s.kv_heads * s.head_dim
    attention = (h + q + 2 * kv) + (q + h)
    if s.experts:
        return rank * attention * s.layers, rank * s.experts * (2 * h + 3 * s.moe_intermediate) * s.layers
    return rank * (attention + (2 * h + 3 * s.intermediate)) * s.layers, 0


def megatron_lora_per_gpu(s: Any, L: Any) -> float:
    """LoRA parameters per GPU: the dense layers' adapters split like their layers over TP × PP, the experts' over
    EP × ETP × PP."""
    dense, expert = _megatron_lora_split(s, L.lora_rank)
    etp = L.megatron_etp or L.megatron_tp
    return dense / (L.megatron_tp * L.megatron_pp) + expert / (L.megatron_ep * etp * L.megatron_pp)


__all__ = ["megatron_lora_params", "megatron_lora_per_gpu"]
