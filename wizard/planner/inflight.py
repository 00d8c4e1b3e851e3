"""How many micro-batches of activations a Megatron pipeline stage holds at once (the update's 1F1B schedule)."""

from __future__ import annotations

from typing import Optional


def pipeline_in_flight(pp: int, vpp: Optional[int], micro_batches: int) -> float:
    """Micro-batches whose stored activations the first pipeline stage holds at its peak, in units of one micro-batch
    through all of the stage's layers. Megatron-Core's 1F1B schedule (megatron/core/pipeline_parallel/schedules.py,
    NVIDIA/Megatron-LM d98e8a6: forward_backward_pipelining_without_interleaving, :2277-2279, runs
    `pp - rank - 1` warmup forwards, at most the micro-batches there are, then one forward before each backward in
    steady state, :2378) keeps min(PP, M) in flight on rank 0; the last stage one. The interleaved schedule
    (get_pp_rank_microbatches, :953-979, microbatch_group_size_per_vp_stage defaulting to PP) warms up
    2·(PP − rank − 1) + (VPP − 1)·group model-chunk forwards, each over 1/VPP of the stage's layers, at most
    M·VPP of them, then one more before its first backward. `micro_batches` 0: unknown, taken as enough to fill the
    pipeline (Megatron's usual case, M ≥ PP)."""
    if pp <= 1:
        return 1.0
    v = vpp if vpp and vpp > 1 else 1
    if v == 1:
        return float(min(pp, micro_batches) if micro_batches > 0 else pp)
    chunks = 2 * (pp - 1) + (v - 1) * pp + 1
    if micro_batches > 0:
        chunks = min(chunks, micro_batches * v)
    return chunks / v
