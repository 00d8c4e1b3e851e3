"""Memory per GPU, per role, per phase, for verl's colocated hybrid engine; and the choices that
make a plan fit (rollout TP, gpu_memory_utilization, offload, sequence parallel, token budget,
Megatron TP/PP).

Two phases share each GPU. Rollout: the engine reserves `gpu_memory_utilization × memory` for
bf16 weights + KV cache while the training roles keep what is not offloaded. Training: the engine
sleeps (verl frees its cache), the actor holds fp32 weights + gradients + Adam states (sharded by
FSDP over data-parallel ranks, by TP×PP for Megatron with a distributed optimizer), the
reference bf16 weights, the critic like the actor, plus activations (gradient checkpointing on),
the logits tensor (tokens × vocab × 4 bytes, twice) and FSDP's gathered layers. The peak of the two
phases must stay under the GPU's memory less a safety margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from wizard.planner.shapes import ModelShape
from wizard.verlspec import arithmetic as rc

GB = 1e9
SAFETY_MARGIN = 0.08  # share of GPU memory never planned for (allocator fragmentation, spikes)
CUDA_CONTEXT_GB = 1.5  # CUDA context, NCCL buffers, allocator slack
ENGINE_OVERHEAD_GB = 1.5  # rollout engine activations / CUDA graphs inside its reservation
ENGINE_ASLEEP_GB = 0.5  # what a sleeping rollout engine keeps during training
MIN_KV_SEQS = 8  # a useful KV cache holds at least this many full sequences (or the whole replica batch)


@dataclass(frozen=True)
class Layout:
    """Everything the estimate depends on (one GPU's view)."""

    gpu_gb: float
    n_gpus: int
    gpus_per_node: int
    seq_len: int
    rollout_tp: int
    gmu: float
    dp: int
    sp: int = 1
    megatron: bool = False
    megatron_tp: int = 1
    megatron_pp: int = 1
    train_tokens: int = 0  # tokens per training micro-batch per GPU (before SP split)
    logprob_tokens: int = 0  # tokens per forward-only micro-batch per GPU
    offload_params: bool = False
    offload_optimizer: bool = False
    ref_resident: bool = False  # a reference model whose bf16 weights stay on the GPU
    use_ref: bool = False
    lora_rank: int = 0
    critic: Optional[ModelShape] = None
    replica_batch: int = 1  # sequences one rollout replica generates per step
    reward_gmu: float = 0.0  # share of each GPU a colocated reward-model engine reserves (0: no reward model)
    host_memory_gb: Optional[float] = None
    image_share: float = 0.0  # vision-language model: share of the tokens that are image tokens (vision tower activations)


@dataclass(frozen=True)
class Term:
    """One amount of memory on one GPU in one phase: who holds it (`role`: actor, reference, critic,
    rollout, runtime) and what it is (`part`), in GB (1e9 bytes)."""

    role: str
    part: str
    gb: float

    @property
    def label(self) -> str:
        return f"{self.role}: {self.part}"


def _table(terms: tuple[Term, ...]) -> dict[str, float]:
    return {t.label: t.gb for t in terms}


@dataclass
class Estimate:
    gpu_gb: float
    rollout_terms: tuple[Term, ...] = ()
    training_terms: tuple[Term, ...] = ()
    kv_seqs: float = 0.0  # full sequences the KV cache holds per rollout replica GPU
    host_gb_per_node: float = 0.0
    host_memory_gb: Optional[float] = None
    margin: float = SAFETY_MARGIN

    @property
    def rollout(self) -> dict[str, float]:
        """The rollout phase as label → GB (for display; the terms are typed)."""
        return _table(self.rollout_terms)

    @property
    def training(self) -> dict[str, float]:
        """The training phase as label → GB (for display; the terms are typed)."""
        return _table(self.training_terms)

    def gb(self, phase: str, role: str, part: str) -> float:
        """One term's GB (0 when the estimate has no such term)."""
        terms = self.rollout_terms if phase == "rollout" else self.training_terms
        return sum(t.gb for t in terms if t.role == role and t.part == part)

    @property
    def rollout_gb(self) -> float:
        return sum(t.gb for t in self.rollout_terms)

    @property
    def training_gb(self) -> float:
        return sum(t.gb for t in self.training_terms)

    @property
    def peak_gb(self) -> float:
        return max(self.rollout_gb, self.training_gb)

    @property
    def budget_gb(self) -> float:
        return self.gpu_gb * (1 - self.margin)

    @property
    def host_fits(self) -> bool:
        return self.host_memory_gb is None or self.host_gb_per_node <= 0.9 * self.host_memory_gb

    @property
    def fits(self) -> bool:
        return self.peak_gb <= self.budget_gb + 1e-9 and self.kv_seqs >= 1 and self.host_fits

    def roles(self) -> dict[str, float]:
        """Role → GB per GPU at that role's peak (the larger of its two phases)."""
        order = list(dict.fromkeys(t.role for t in (*self.rollout_terms, *self.training_terms)))
        return {role: round(max(sum(t.gb for t in terms if t.role == role)
                                for terms in (self.rollout_terms, self.training_terms)), 2) for role in order}

    def as_dict(self) -> dict[str, object]:
        return {
            "fits": self.fits,
            "peak_gb_per_gpu": round(self.peak_gb, 2),
            "gpu_memory_gb": self.gpu_gb,
            "budget_gb_per_gpu": round(self.budget_gb, 2),
            "safety_margin": self.margin,
            "phases": {
                "rollout": {k: round(v, 2) for k, v in self.rollout.items()},
                "training": {k: round(v, 2) for k, v in self.training.items()},
            },
            "roles": self.roles(),
            "kv_cache_sequences": round(self.kv_seqs, 1),
            "host_gb_per_node": round(self.host_gb_per_node, 1),
        }


def _act_bytes_per_token(s: ModelShape, *, train: bool, tp: int = 1, layers: Optional[int] = None) -> float:
    """Activations per token: checkpointed layer inputs (bf16) for every layer + one layer's working set,
    and the logits tensor (fp32; twice in training for log-softmax and its gradient)."""
    n_layers = s.layers if layers is None else layers
    inter = s.moe_intermediate * max(s.active_experts, 1) if s.experts else s.intermediate
    working = (10 * s.hidden + 4 * inter) * 2 / tp
    stored = n_layers * s.hidden * 2 / tp if train else 0.0
    logits = s.vocab * 4 * (2 if train else 1.5) / tp
    return stored + working + logits


def _vision_bytes_per_token(s: ModelShape, L: Layout, *, train: bool) -> float:
    """A vision-language model's vision tower activations, spread over all tokens (image_share of them are image
    tokens; the tower is not split by TP or SP here)."""
    return L.image_share * s.vision_act_bytes_per_token(train)


def estimate(s: ModelShape, L: Layout) -> Estimate:
    P = s.params
    e = Estimate(gpu_gb=L.gpu_gb, host_memory_gb=L.host_memory_gb)
    host = 0.0
    gpn = L.gpus_per_node

    # -- training state per GPU -----------------------------------------------------------------
    # Offload in verl 0.9 is between phases: the engine's context switch (workers/engine/base.py) loads the
    # parameters, gradients and optimizer states back onto the GPU for every update, so the training phase
    # holds the full sharded state either way; offload only frees the GPU during rollout.
    # FSDP shards over every GPU (fsdp_size=-1; Ulysses SP only splits the data: verl's engine builds its FSDP
    # mesh over the whole world, workers/engine/fsdp/transformer_impl.py); Megatron over TP × PP (+ DP for Adam).
    fsdp = L.n_gpus
    if L.megatron:
        mp = L.megatron_tp * L.megatron_pp
        weights = 2 * P / mp
        grads = 4 * P / mp
        optim = 12 * P / (mp * L.dp)
        gather = 0.0
        host += (6 * P / mp if L.offload_params else 0) * gpn + (12 * P / (mp * L.dp) if L.offload_optimizer else 0) * gpn
    elif L.lora_rank:
        weights = 2 * P / fsdp  # frozen base in bf16, sharded
        adapters = s.lora_params(L.lora_rank)
        grads = 4 * adapters / fsdp
        optim = 12 * adapters / fsdp
        gather = 2 * 2 * max(s.layer_params(), s.vocab * s.hidden)
        host += (2 * P / fsdp if L.offload_params else 0) * gpn
    else:
        weights = 4 * P / fsdp  # fp32 master weights
        grads = 4 * P / fsdp
        optim = 8 * P / fsdp  # Adam m and v
        gather = 2 * 2 * max(s.layer_params(), s.vocab * s.hidden)  # bf16 unit + prefetch
        host += ((8 * P / fsdp if L.offload_params else 0) + (8 * P / fsdp if L.offload_optimizer else 0)) * gpn
    resident_weights = 0.0 if L.offload_params else weights  # what stays on the GPU while the engine rolls out
    resident_optim = 0.0 if L.offload_optimizer else optim

    tp_act = L.megatron_tp if L.megatron else 1
    layers_here = math.ceil(s.layers / L.megatron_pp) if L.megatron else s.layers
    train_tokens = L.train_tokens / (L.sp if not L.megatron else 1)
    acts = train_tokens * (_act_bytes_per_token(s, train=True, tp=tp_act, layers=layers_here)
                           + _vision_bytes_per_token(s, L, train=True))
    fwd_tokens = L.logprob_tokens / (L.sp if not L.megatron else 1)
    fwd = fwd_tokens * (_act_bytes_per_token(s, train=False, tp=tp_act, layers=layers_here)
                        + _vision_bytes_per_token(s, L, train=False))

    ref = 0.0
    if L.use_ref and not L.lora_rank:
        if L.ref_resident:
            ref = 2 * P / (L.megatron_tp * L.megatron_pp if L.megatron else fsdp)
        else:
            host += 2 * P / (L.megatron_tp * L.megatron_pp if L.megatron else fsdp) * gpn

    critic_state = critic_resident = critic_acts = 0.0
    if L.critic is not None:
        C = L.critic.params
        shard = (L.megatron_tp * L.megatron_pp) if L.megatron else fsdp
        critic_state = 8 * C / shard + 8 * C / shard  # weights + gradients, Adam states
        critic_resident = (0 if L.offload_params else 8 * C / shard) + (0 if L.offload_optimizer else 8 * C / shard)
        critic_acts = train_tokens * (L.critic.layers * L.critic.hidden * 2 + (10 * L.critic.hidden + 4 * L.critic.intermediate) * 2)
        host += (8 * C / shard * gpn if L.offload_params else 0) + (8 * C / shard * gpn if L.offload_optimizer else 0)

    # With offload the roles take turns: the critic is in host memory while the actor updates and the other
    # way round; without it both training states stay on the GPU.
    train_peak_compute = max(acts + grads, fwd, 0.0 if critic_resident < critic_state else critic_acts)
    backward_peaks = train_peak_compute == acts + grads  # else a forward-only pass or the critic's update is larger
    training = [
        Term("actor", "weights", weights / GB),
        Term("actor", "gradients", grads / GB if backward_peaks else 0.0),
        Term("actor", "optimizer states", optim / GB),
        Term("actor", "activations + logits", (max(acts, fwd) if backward_peaks else train_peak_compute) / GB),
        Term("actor", "gathered layers", gather / GB),
    ]
    if L.use_ref and not L.lora_rank:
        training.append(Term("reference", "weights", ref / GB))
    if L.critic is not None:
        training.append(Term("critic", "weights + optimizer", critic_resident / GB))
    training.append(Term("rollout", "asleep", ENGINE_ASLEEP_GB))
    if L.reward_gmu:
        training.append(Term("reward model", "engine asleep", ENGINE_ASLEEP_GB))
    training.append(Term("runtime", "CUDA context", CUDA_CONTEXT_GB))
    if L.critic is not None and critic_resident < critic_state:
        turn = (critic_state + critic_acts + resident_weights + resident_optim) / GB + ENGINE_ASLEEP_GB + CUDA_CONTEXT_GB
        so_far = sum(t.gb for t in training)
        if turn > so_far:  # the critic's own update, with the actor swapped out, is the larger moment
            training.append(Term("critic", "its update, actor swapped out (above the actor's)", turn - so_far))
    e.training_terms = tuple(training)

    # -- rollout phase --------------------------------------------------------------------------
    rollout = [
        Term("rollout", "engine reservation", L.gmu * L.gpu_gb),
        *([Term("reward model", "engine reservation", L.reward_gmu * L.gpu_gb)] if L.reward_gmu else []),
        Term("actor", "resident (not offloaded)", (resident_weights + resident_optim) / GB),
    ]
    if L.use_ref and not L.lora_rank:
        rollout.append(Term("reference", "weights", ref / GB))
    if L.critic is not None:
        rollout.append(Term("critic", "weights + optimizer", critic_resident / GB))
    rollout.append(Term("runtime", "CUDA context", CUDA_CONTEXT_GB))
    e.rollout_terms = tuple(rollout)

    engine_weights = 2 * P / L.rollout_tp
    kv_room = L.gmu * L.gpu_gb * GB - engine_weights - ENGINE_OVERHEAD_GB * GB
    e.kv_seqs = max(0.0, kv_room / (s.kv_bytes_per_token(L.rollout_tp) * L.seq_len))
    host += 2 * P / L.rollout_tp * gpn  # sleeping engine keeps its weights in host memory
    e.host_gb_per_node = host / GB
    return e


# ---------------------------------------------------------------------------------------------


@dataclass
class Decision:
    layout: Layout
    estimate: Estimate
    reasons: dict[str, str]


def _gmu_range(s: ModelShape, L: Layout, resident_gb: float) -> tuple[float, float]:
    """(lowest useful, highest that fits) gpu_memory_utilization for this rollout TP."""
    per_seq = s.kv_bytes_per_token(L.rollout_tp) * L.seq_len
    want = min(MIN_KV_SEQS, max(1, L.replica_batch))
    weights = 2 * s.params / L.rollout_tp
    # verl's rule of thumb: the reservation holds the bf16 weights twice (the rest is KV cache)
    low = max(2 * weights, weights + ENGINE_OVERHEAD_GB * GB + want * per_seq) / GB / L.gpu_gb
    high = (L.gpu_gb * (1 - SAFETY_MARGIN) - resident_gb - CUDA_CONTEXT_GB) / L.gpu_gb - L.reward_gmu
    return low, high


def choose(s: ModelShape, base: Layout, *, tp_options: list[int], offload_options: list[bool],
           gmu_fixed: Optional[float], sp_options: list[int], token_cap: int,
           mp_options: Optional[list[tuple[int, int]]] = None, gmu_target: float = 0.6,
           batch_samples: int = 1, min_gpu_tokens: int = 0) -> Optional[Decision]:
    """The first layout (least offload, smallest model parallelism) that fits a training micro-batch of one
    full sequence and at least `min_gpu_tokens` tokens of activations per GPU, or None."""
    mp_options = mp_options or [(base.megatron_tp, base.megatron_pp)]
    for offload in offload_options:
        for mtp, mpp in mp_options:
            for sp in sp_options:
                dp = rc.data_parallel_size(base.n_gpus, megatron=base.megatron, sp=sp, tp=mtp, pp=mpp)
                if not dp:
                    continue
                lay = replace(base, offload_params=offload, offload_optimizer=offload, sp=sp, dp=dp,
                              megatron_tp=mtp, megatron_pp=mpp)
                # training tokens: as many as fit, up to the cap, at least one full sequence
                probe = estimate(s, replace(lay, train_tokens=0, logprob_tokens=0, gmu=0.0))
                fixed = probe.training_gb - probe.gb("training", "actor", "activations + logits")
                per_tok_train = _act_bytes_per_token(s, train=True, tp=mtp if base.megatron else 1,
                                                     layers=math.ceil(s.layers / mpp) if base.megatron else None)
                per_tok_train += _vision_bytes_per_token(s, lay, train=True)
                room = (lay.gpu_gb * (1 - SAFETY_MARGIN) - fixed) * GB
                split = sp if not base.megatron else 1
                max_tokens = int(room / per_tok_train * split) if room > 0 else 0
                if max_tokens < base.seq_len or max_tokens // split < min_gpu_tokens:
                    continue
                tokens = min(token_cap, max_tokens)
                lay = replace(lay, train_tokens=tokens, logprob_tokens=min(2 * tokens, max_tokens))
                for tp in tp_options:
                    lay_tp = replace(lay, rollout_tp=tp, replica_batch=max(1, -(-batch_samples * tp // base.n_gpus)))
                    resident = estimate(s, replace(lay_tp, gmu=0.0, reward_gmu=0.0)).rollout_gb - CUDA_CONTEXT_GB
                    low, high = _gmu_range(s, lay_tp, resident)
                    if gmu_fixed is not None:
                        gmu = gmu_fixed
                    else:
                        if high < low:
                            continue
                        target = 0.85 if offload else gmu_target
                        gmu = math.floor(min(target, high) * 20) / 20
                        if gmu < low:
                            gmu = math.floor(high * 100) / 100
                    final = replace(lay_tp, gmu=gmu)
                    est = estimate(s, final)
                    if est.fits:
                        return Decision(final, est, {})
    return None
