"""The layout search of the memory planner (wizard.planner.memory's estimate, tried layout by layout): the first
layout, least offload and least model parallelism first, whose memory verdict is acceptable.

For each offload setting, Megatron grid and sequence-parallel size the search tries the layout as verl runs it by
default and then, for Megatron, the same layout with full activation recompute (`Layout.recompute`: each layer keeps
only its bf16 input, 2·hidden bytes per token instead of the selective recompute's 34·hidden, memory.py
CHECKPOINT_BYTES_PER_HIDDEN / SELECTIVE_BYTES_PER_HIDDEN). Recompute costs one more forward pass of the update
(steptime.py: 4/3 of its compute); offload costs host transfers every step and more parallelism costs communication:
the search takes recompute before either, and the planner then times the layout without recompute against it
(stages/fit.py _fastest, layouts.rank_layouts), so that the faster by predicted step time is planned.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Optional

from wizard.planner.memory import (ALLOCATOR_RESERVE, BAND, ENGINE_OVERHEAD_GIB, GIB, MIN_KV_SEQS, Decision, Layout,
                                   estimate, rollout_weight_bytes, train_bytes_per_token)
from wizard.planner.shapes import ModelShape
from wizard.verlspec import arithmetic as rc
from wizard.verlspec.hardware import capacity_gib


def _gmu_range(s: ModelShape, L: Layout, other_gib: float, headroom: float = 1 + BAND) -> tuple[float, float]:
    """(lowest useful, highest that fits) gpu_memory_utilization for this rollout TP; `other_gib` is what the
    largest engine-awake phase holds besides the engine."""
    cap = capacity_gib(L.gpu_gb, L.gpu_type)
    per_seq = s.cache_bytes_per_seq(L.rollout_tp, L.seq_len)
    want = min(MIN_KV_SEQS, max(1, L.replica_batch))
    weights = rollout_weight_bytes(s, L)
    # verl's rule of thumb: the reservation holds the bf16 weights twice (the rest is KV cache)
    low = max(2 * weights, weights + ENGINE_OVERHEAD_GIB * GIB + want * per_seq) / GIB / cap
    high = (cap / headroom - other_gib) / cap - L.reward_gmu
    return low, high


def recompute_options(base: Layout, allow: bool = True) -> list[bool]:
    """Full recompute off, then on: Megatron only (verl's FSDP engine checkpoints every layer already,
    model.enable_gradient_checkpointing); `allow` False keeps the layout's own setting."""
    return [False, True] if base.megatron and allow and not base.recompute else [base.recompute]


def _with_tokens(s: ModelShape, lay: Layout, *, cap: float, headroom: float, token_cap: int,
                 min_gpu_tokens: int) -> Optional[Layout]:
    """`lay` with as many training tokens as fit (with the band) in the update phase, up to `token_cap`; None when
    not one full sequence (or `min_gpu_tokens` per GPU) fits."""
    probe = estimate(s, replace(lay, train_tokens=0, logprob_tokens=0, gmu=0.0, static_micro=False))
    fixed = probe.phase_gib("update")
    per_tok = train_bytes_per_token(s, lay) * (1 + ALLOCATOR_RESERVE)
    room = (cap / headroom - fixed) * GIB
    split = lay.megatron_cp if lay.megatron else lay.sp  # tokens per micro-batch before the SP/CP split
    max_tokens = int(room / per_tok * split) if room > 0 else 0
    if max_tokens < lay.seq_len or max_tokens // split < min_gpu_tokens:
        return None
    tokens = min(token_cap, max_tokens)
    return replace(lay, train_tokens=tokens, logprob_tokens=min(2 * tokens, max_tokens))


def _with_engine(s: ModelShape, lay: Layout, *, tp_options: list[int], gmu_fixed: Optional[float], gmu_target: float,
                 batch_samples: int, headroom: float, accept: tuple[str, ...],
                 rollout_dps: Optional[Callable[[int], list[int]]]) -> Optional[Decision]:
    """The rollout engine beside `lay`: least data parallel first (a MoE's experts spread over TP × DP), then least
    TP, with the gpu_memory_utilization that fits; the first whose verdict is in `accept`."""
    pairs = sorted(((rdp, tp) for tp in tp_options for rdp in (rollout_dps(tp) if rollout_dps else [1])),
                   key=lambda p: p[0])
    for rdp, tp in pairs:
        # each DP rank of a replica is its own engine with TP GPUs and its share of the sequences
        lay_tp = replace(lay, rollout_tp=tp, rollout_dp=rdp,
                         replica_batch=max(1, -(-batch_samples * tp // lay.n_gpus)))
        bare = estimate(s, replace(lay_tp, gmu=0.0, reward_gmu=0.0))
        other = max(bare.phase_gib("rollout"), bare.phase_gib("weight sync"))
        low, high = _gmu_range(s, lay_tp, other, headroom)
        if gmu_fixed is not None:
            gmu = gmu_fixed
        else:
            if high < low:
                continue
            target = 0.85 if lay.offload_params else gmu_target
            gmu = math.floor(min(target, high) * 20) / 20
            if gmu < low:
                gmu = math.floor(high * 100) / 100
        final = replace(lay_tp, gmu=gmu)
        est = estimate(s, final)
        if est.plan_verdict in accept:
            return Decision(final, est, {})
    return None


def choose(s: ModelShape, base: Layout, *, tp_options: list[int], offload_options: list[bool],
           gmu_fixed: Optional[float], sp_options: list[int], token_cap: int,
           mp_options: Optional[list[tuple[int, int] | rc.MegatronGrid]] = None, gmu_target: float = 0.6,
           batch_samples: int = 1, min_gpu_tokens: int = 0, accept: tuple[str, ...] = ("fits",),
           rollout_dps: Optional[Callable[[int], list[int]]] = None, recompute: bool = True) -> Optional[Decision]:
    """The first layout (least offload, smallest model parallelism; for Megatron, full recompute right after the
    same layout without it) whose verdict is in `accept` with a training micro-batch of at least one full sequence
    and `min_gpu_tokens` tokens per GPU, or None. `recompute` False: no layout with Megatron full recompute."""
    grids = [g if isinstance(g, rc.MegatronGrid) else rc.MegatronGrid(*g)
             for g in (mp_options or [(base.megatron_tp, base.megatron_pp)])]
    cap = capacity_gib(base.gpu_gb, base.gpu_type)
    headroom = 1 + BAND if "tight" not in accept else 1.0  # "fits": the band's high end stays under the card
    for offload in offload_options:
        for grid in grids:
            for sp in sp_options:
                dp = rc.data_parallel_size(base.n_gpus, megatron=base.megatron, sp=sp, tp=grid.tp, pp=grid.pp,
                                           cp=grid.cp)
                if not dp:
                    continue
                for full in recompute_options(base, recompute):
                    # a Megatron reference follows the actor's param_offload (verl's ref/megatron_ref.yaml:39) and its
                    # forward-only engine then keeps its weights on the host (megatron/transformer_impl.py:605)
                    lay = replace(base, offload_params=offload, offload_optimizer=offload, sp=sp, dp=dp,
                                  ref_resident=base.ref_resident and not offload, recompute=full,
                                  megatron_tp=grid.tp, megatron_pp=grid.pp, megatron_cp=grid.cp, megatron_ep=grid.ep,
                                  megatron_etp=grid.etp, megatron_vpp=grid.vpp)
                    lay = _with_tokens(s, lay, cap=cap, headroom=headroom, token_cap=token_cap,
                                       min_gpu_tokens=min_gpu_tokens)
                    if lay is None:
                        continue
                    d = _with_engine(s, lay, tp_options=tp_options, gmu_fixed=gmu_fixed, gmu_target=gmu_target,
                                     batch_samples=batch_samples, headroom=headroom, accept=accept,
                                     rollout_dps=rollout_dps)
                    if d is not None:
                        return d
    return None
