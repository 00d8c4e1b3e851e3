"""Memory per GPU, per role, per phase, for verl's colocated hybrid engine, in GiB (2^30 bytes, what torch and
nvidia-smi count); and the choices that make a plan fit (rollout TP, gpu_memory_utilization, offload, sequence
parallel, token budget, Megatron TP/PP, Megatron full recompute: wizard.planner.layout_search tries them).

Four phases take turns on each GPU in one verl step (verl/trainer/ppo/ray_trainer.py, workers/engine_workers.py):
- rollout: the engine is awake and reserves `gpu_memory_utilization × card` (weights + KV cache); the training
  roles keep what is not offloaded;
- weight sync: before each rollout verl loads the actor's (offloaded) weights back onto the GPU to hand them to
  the engine while the engine holds its reservation (engine_workers.py:update_weights);
- log-prob: forward passes of the actor (old log-probs) and of the reference, each with its weights on the GPU
  (an offloaded reference is loaded for its own pass), with the logits of one log-prob micro-batch;
- update: the actor's weights, gradients and Adam states (verl's engine loads offloaded state back for every
  update, workers/engine/base.py), the activations and logits of one training micro-batch; the critic's update
  takes its own turn when offloaded.

Every constant below names its source: verl 0.9.1's code (file under site-packages/verl) or a measurement
(the case IDs of tests/data/reference/memory-calibration.json, with their URLs there). The measured peaks are
torch's max_memory_reserved: what the caching allocator holds, i.e. live tensors plus the allocator's own
reserve (reserved − allocated, 12–48 GiB in those logs), and without the CUDA context. The estimate is therefore
`allocated + allocator reserve`, plus the CUDA context for the verdict against the card.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

from wizard.planner import fusedhead, inflight
from wizard.planner.megatron_lora import megatron_lora_params, megatron_lora_per_gpu  # noqa: F401 (re-exported)
from wizard.planner.shapes import ModelShape
from wizard.verlspec import arithmetic as rc
from wizard.verlspec.hardware import capacity_gib

GIB = float(1 << 30)
GB = 1e9

# -- constants, each with its source ---------------------------------------------------------------------------
# verl 0.9.1 loads the actor, the reference and the critic for FSDP in fp32 (engine/fsdp.yaml `model_dtype: fp32`,
# trainer/config/_generated_ppo_trainer.yaml lines 37, 245, 564; workers/engine/fsdp/transformer_impl.py
# _build_module), also the frozen LoRA base; FSDP's mixed precision gathers each unit in bf16 for compute.
FSDP_WEIGHT_BYTES = 4
# Megatron keeps bf16 weights, an fp32 gradient buffer (utils/megatron_utils.py: grad_reduce_in_fp32=True) and,
# with the distributed optimizer (engine/megatron.yaml use_distributed_optimizer: True), fp32 master weights and
# Adam m, v sharded over every data- and context-parallel rank: 12 B per parameter over all GPUs of the model.
MEGATRON_WEIGHT_BYTES, MEGATRON_GRAD_BYTES, MEGATRON_OPTIM_BYTES = 2, 4, 12
# A MoE's routed experts are sharded over EP × ETP × PP instead of TP × PP (Megatron-Core expert parallel), and the
# distributed optimizer shards their fp32 master weights and Adam states over the expert-data-parallel group
# (world / (EP × ETP × PP)), the dense parts' over the data-parallel group (world / (TP × PP), context-parallel
# ranks included): both come to 12 B × parameters / world (megatron/core/optimizer/__init__.py builds one
# DistributedOptimizer per group; verl's megatron engine, workers/engine/megatron/transformer_impl.py, uses it).
# Megatron's own CPU optimizer (override_optimizer_config.optimizer_cpu_offload with optimizer_offload_fraction f,
# a HybridDeviceOptimizer) keeps the share f of those states in host memory for good; verl's optimizer_offload
# moves the rest out between updates (utils/megatron_utils.py offload_megatron_optimizer / load_megatron_optimizer).
# The precision-aware optimizer (optim.use_precision_aware_optimizer) keeps Adam's m and v, and with main_grads_dtype
# bf16 the gradient buffer, in the dtypes it names (utils/megatron/optimizer.py:188; transformer_impl.py:455), fp32 masters.
# torch.optim.AdamW: m and v in the weights' dtype (fp32): 8 B per trained parameter (tests/test_memory.py checks).
ADAM_BYTES = 8
# Logits per token and vocabulary entry in a training micro-batch: the bf16 logits (2 B) the loss keeps for
# backward, their fp32 copy for log-softmax (4 B), the entropy's fp32 softmax (4 B) and the fp32 gradient that
# flows back (4 B) (verl/utils/torch_functional.py logprobs_from_logits, entropy_from_logits; workers/utils/losses.py).
# 14 B also fits the measured peaks best (D01–D10: every estimate within ±20 %; benchmarks/memory_calibration.md).
LOGIT_BYTES_TRAIN = 14
# verl 0.9.1 computes the entropy in the update only with entropy_coeff != 0 or actor.calculate_entropy
# (trainer/ppo/ray_trainer.py:1336; FSDP workers/engine/fsdp/transformer_impl.py:1397, Megatron
# workers/engine/megatron/transformer_impl.py:1214). The calibration runs D01–D10 all had entropy_coeff 0.001, so
# without it FSDP's update drops the entropy's fp32 softmax (4 B of the 14). Megatron's update without entropy holds
# the bf16 logits (2 B) and vocab_parallel_cross_entropy's fp32 upcast, saved as the softmax for backward, where
# the gradient is computed in place (4 B; megatron/core/tensor_parallel/cross_entropy.py).
ENTROPY_SOFTMAX_BYTES = 4
MEGATRON_LOGIT_BYTES_NO_ENTROPY = 6
# A MoE layer's router logits, fp32 per expert and token (verl's MoE scripts set moe_router_dtype=fp32), kept for the
# router's softmax/top-k backward. The routed experts' activations are counted with the layer's dense 34·hidden
# (Korthikanti et al.) and the active experts' working set: counting each of the top-k token copies the grouped
# GEMMs keep (fc1 input, fc1 output, fc2 input) would put Qwen3-30B-A3B at EP 8 with 10240-token micro-batches
# (tests/data/reference/moe-memory-cases.json M01, a run verl ships as tested on 8×H20) ~25 GiB over the card;
# no measured MoE peak says which is right, so the dense count is kept and the band covers the rest.
ROUTER_LOGIT_BYTES = 4
# Forward-only passes (old log-probs, reference): bf16 logits, their fp32 copy, the entropy's fp32 softmax.
LOGIT_BYTES_FORWARD = 10
# Activations stored per layer and token: with gradient checkpointing (FSDP, verl's default; Megatron with
# recompute_granularity=full) each layer's bf16 input, 2·hidden bytes. Megatron's default recomputes only the
# core attention (engine/megatron.yaml recompute_modules: [core_attn]): 34·hidden bytes per layer and token split
# over TP with sequence parallel (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
# Transformer Models", table 2). The layer being recomputed holds (10·hidden + 4·intermediate) bf16 values.
CHECKPOINT_BYTES_PER_HIDDEN, SELECTIVE_BYTES_PER_HIDDEN = 2, 34
# Without dynamic batching a micro-batch holds micro × sequences; with remove-padding (verl's default
# use_remove_padding) it holds their real tokens. Assumed: prompts and responses fill half of
# max_prompt_length + max_response_length on average (GSM8K/MATH runs D01–D10 fit ±20 % with it; a batch of
# full-length responses costs up to twice the activations, which the upper end of the band shows).
MEAN_FILL = 0.5
# The caching allocator's reserve above live tensors (reserved − allocated), as a share of the largest activation +
# logits working set: measured 12–48 GiB against working sets of 20–45 GiB (D01–D10 notes: max_memory_allocated vs
# max_memory_reserved). The phases around the rollout carry the last update's reserve: verl empties the cache before
# it resumes the engine (engine_workers.py:769), yet the 7B runs (D04, D10) peak 15–25 % above engine reservation +
# fp32 shard, which that reserve accounts for (kept until a verl 0.9.1 log with per-phase peaks says otherwise).
ALLOCATOR_RESERVE = 0.25
# Outside torch's allocator (not in the measured peaks), on the card: the CUDA context (~0.5 GiB), the rollout engine's
# CUDA graphs (outside gpu_memory_utilization, ~0.5 GiB) and NCCL's communicator buffers (~0.5 GiB, none on one GPU).
CUDA_CONTEXT_GIB = 1.5
SINGLE_GPU_CONTEXT_GIB = 1.0
# What a sleeping rollout engine keeps during training: vLLM's sleep mode offloads its weights and discards its KV
# cache (verl calls it when rollout.free_cache_engine is true); its allocator handles and buffers stay. Assumed,
# not measured: the runs above log only whole-run peaks.
ENGINE_ASLEEP_GIB = 0.5
# What the engine's reservation spends besides weights and KV cache: the activations of its profiling forward pass
# over max_num_batched_tokens (vLLM sizes the KV cache as reservation − weights − that peak). Assumed for the
# KV-cache count only (kv_cache_sequences, VI862); it does not change the phases' totals.
ENGINE_OVERHEAD_GIB = 1.5
# The band of uncertainty: the calibration keeps every estimate within ±20 % of the measured peak.
BAND = 0.20
MIN_KV_SEQS = 8  # planner policy: a useful KV cache holds at least this many full sequences (or the replica batch)
PHASES = ("rollout", "weight sync", "log-prob", "update")


@dataclass(frozen=True)
class Layout:
    """Everything the estimate depends on (one GPU's view). `gpu_gb` is the card's nominal size as the user
    gives it (80 for an H100); the estimate works in what the card reports (verlspec.hardware.capacity_gib)."""

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
    megatron_cp: int = 1
    megatron_ep: int = 1  # expert parallel: MoE experts split over EP × ETP ranks instead of TP
    megatron_etp: Optional[int] = None  # expert tensor parallel (None: as TP, Megatron's default)
    megatron_vpp: Optional[int] = None  # virtual pipeline stages: the interleaved warmup (pipeline_in_flight)
    pp_micro_batches: int = 0  # update micro-batches per mini-batch per DP rank (0: unknown, ≥ PP): pipeline_in_flight
    recompute: bool = False  # Megatron recompute_granularity=full
    checkpointing: bool = True  # FSDP model.enable_gradient_checkpointing (verl's default: true)
    train_tokens: int = 0  # tokens per training micro-batch per GPU (before the SP/CP split): a budget, or micro × seq
    logprob_tokens: int = 0  # tokens per forward-only micro-batch per GPU
    static_micro: bool = False  # token counts are micro-batch × max length (no dynamic batching): MEAN_FILL applies
    offload_params: bool = False
    offload_optimizer: bool = False
    ref_resident: bool = False  # a reference model whose weights stay on the GPU between its passes
    use_ref: bool = False
    lora_rank: int = 0
    # Megatron LoRA synced as adapters (model.lora.merge false) to an engine that loaded the real base weights
    # (rollout.load_format not dummy): each weight sync exports only the adapters and leaves offloaded frozen weights
    # in host memory (workers/engine/megatron/transformer_impl.py:1035-1044, engine_workers.py:673)
    lora_adapter_sync: bool = False
    critic: Optional[ModelShape] = None
    critic_offload: Optional[bool] = None  # None: as the actor
    # the critic's own activation settings (critic.megatron.override_transformer_config.recompute_granularity, critic.model.
    # enable_gradient_checkpointing; None: as the actor's, what the planner writes)
    critic_recompute: Optional[bool] = None
    critic_checkpointing: Optional[bool] = None
    critic_tokens: int = 0  # tokens per critic micro-batch, both passes (its engine's one budget); 0: the actor's
    replica_batch: int = 1  # sequences one rollout replica generates per step
    reward: Optional[ModelShape] = None  # a reward model served beside the policy
    reward_gmu: float = 0.0  # share of each GPU its engine reserves (0: no colocated reward model)
    reward_tp: int = 1
    reward_seq_len: int = 0  # the reward model's longest sequence (a judge's prompt + verdict); 0: seq_len
    # the reward model's engine sleeps outside its own turn (reward_model.rollout.free_cache_engine: verl 0.9.1's
    # reward loop wakes it only to score a batch, experimental/reward_loop/reward_loop.py compute_rm_score, after the
    # policy's rollout); False counts both engines awake together (the planner's conservative assumption)
    reward_free_cache: bool = False
    free_cache_engine: bool = True
    host_memory_gb: Optional[float] = None
    gpu_type: Optional[str] = None  # pins the card's reported capacity when its nominal size matches gpu_gb
    image_share: float = 0.0  # vision-language model: share of the tokens that are image tokens (vision tower activations)
    rollout_dp: int = 1  # the rollout engine's data_parallel_size: vLLM splits a MoE's experts over TP × DP
    optimizer_cpu_fraction: float = 0.0  # Megatron optimizer_cpu_offload × optimizer_offload_fraction (states on the host)
    # FSDP2 / fsdp_turbo with fsdp_config.offload_policy: torch's CPUOffloadPolicy keeps the sharded fp32 weights, their
    # gradients and Adam states on the host and steps the optimizer there; only gathered units reach the GPU
    fsdp_cpu_policy: bool = False
    # the actor's fsdp_config.fsdp_size: below the GPU count, verl builds a (ddp × fsdp) mesh (hybrid sharding:
    # workers/engine/fsdp/utils.py:47-52 create_device_mesh) and shards over fsdp_size GPUs only; 0 or -1: every GPU
    fsdp_size: int = 0
    grad_bytes: int = MEGATRON_GRAD_BYTES  # Megatron's gradient buffer per parameter (2 with a bf16 main_grads_dtype)
    optim_bytes: int = MEGATRON_OPTIM_BYTES  # Megatron's fp32 master + Adam m + v per parameter (precision-aware dtypes)
    update_entropy: bool = True  # the update computes the entropy (entropy_coeff != 0 or actor.calculate_entropy)
    fused_logits: bool = False  # model.use_fused_kernels as verl runs it: no whole logits (wizard.planner.fusedhead)
    # a rollout runs between training steps (verl empties the allocator's cache around it, engine_workers.py
    # update_weights); False: training passes only (verl's workers driven without a rollout, as the GPU measurement)
    rollout_between_steps: bool = True
    # one-step-off / fully async: the engine on GPUs of its own (rollout.nnodes × n_gpus_per_node), none on these
    rollout_elsewhere: bool = False
    # FSDP actor with fsdp_config.use_no_sync_for_gradient_accumulation=True (YAML default false, engine/fsdp.yaml:61):
    # no reduce-scatter on non-final micro-batches (workers/engine/fsdp/transformer_impl.py:692-721), so each GPU keeps
    # the whole model's gradients unsharded in the fp32 reduce dtype (:394-398) until the last one (DEFERRED_GRAD_BYTES)
    deferred_grad_sync: bool = False


@dataclass(frozen=True)
class Term:
    """One amount of memory on one GPU in one phase: who holds it (`role`: actor, reference, critic, rollout,
    reward model, runtime) and what it is (`part`), in GiB."""

    role: str
    part: str
    gib: float

    @property
    def label(self) -> str:
        return f"{self.role}: {self.part}"

    @property
    def gb(self) -> float:  # the same amount in GB (1e9 bytes)
        return self.gib * GIB / GB


@dataclass
class Estimate:
    gpu_gb: float  # nominal card size as given
    capacity_gib: float = 0.0  # what the card reports
    phases: dict[str, tuple[Term, ...]] = field(default_factory=dict)
    full_length: dict[str, tuple[Term, ...]] = field(default_factory=dict)  # the phases with full-length sequences
    kv_seqs: float = 0.0  # full sequences the KV cache holds per rollout replica GPU
    host_gb_per_node: float = 0.0
    host_memory_gb: Optional[float] = None
    reward_kv_seqs: Optional[float] = None
    sync_kv_gib: float = 0.0  # the engine's KV share counted in the weight sync (verl 0.9.1 resumes it after)
    # per phase: what verl logs as perf/max_memory_allocated_gb and perf/max_memory_reserved_gb (GiB, full-length
    # sequences), its passes' own; where the training passes' coefficients came from
    verl_metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    passes: dict[str, Any] = field(default_factory=dict)
    coefficients: str = ""
    basis: str = "analytic"  # what decides the log-prob and update totals: "traced" passes or the "analytic" model
    layout: Optional[Layout] = None

    # -- per phase ----------------------------------------------------------------------------------------------
    def phase_gib(self, phase: str) -> float:
        return sum(t.gib for t in self.phases.get(phase, ()))

    def band(self, phase: str) -> tuple[float, float]:
        """(low, high) GiB: ±BAND around the estimate; the high end also covers micro-batches of full-length
        sequences (without dynamic batching)."""
        est = self.phase_gib(phase)
        full = sum(t.gib for t in self.full_length.get(phase, ()))
        return est * (1 - BAND), max(est * (1 + BAND), full)

    def gib(self, phase: str, role: str, part: str) -> float:
        """One term's GiB (0 when the estimate has no such term)."""
        return sum(t.gib for t in self.phases.get(phase, ()) if t.role == role and t.part == part)

    def table(self, phase: str) -> dict[str, float]:
        return {t.label: t.gib for t in self.phases.get(phase, ())}

    @property
    def peak_phase(self) -> str:
        # a tie goes to the update: a log-prob phase keeping the update's reservation holds it because the update made it
        return max(self.phases, key=lambda p: (round(self.phase_gib(p), 6), p == "update")) if self.phases else "rollout"

    @property
    def peak_gib(self) -> float:
        return max((self.phase_gib(p) for p in self.phases), default=0.0)

    # -- verdict ------------------------------------------------------------------------------------------------
    @property
    def host_fits(self) -> bool:
        return self.host_memory_gb is None or self.host_gb_per_node <= 0.9 * self.host_memory_gb

    @property
    def tight_phases(self) -> dict[str, float]:
        """Phases whose band reaches over the card → GiB by which its high end does."""
        return {p: round(self.band(p)[1] - self.capacity_gib, 2) for p in self.phases
                if self.band(p)[1] > self.capacity_gib}

    @property
    def sync_uncertain(self) -> bool:
        """The weight sync is over the card only by the engine's KV cache, which the measured runs (verl ≈0.4) held
        during the sync and verl 0.9.1 resumes after it: not a refusal, a "tight" naming the phase."""
        cap = self.capacity_gib + 1e-9
        sync = self.phase_gib("weight sync")
        return sync > cap and sync - self.sync_kv_gib <= cap and all(
            self.phase_gib(p) <= cap for p in self.phases if p != "weight sync")

    @property
    def verdict(self) -> str:
        """"does not fit" when a phase's estimate is over the card (or the KV cache cannot hold one sequence, or
        the host memory is short); "tight" when only the band's high end of some phase is, or the weight sync only
        by the KV cache verl 0.9.1 resumes after it; else "fits"."""
        if self.kv_seqs < 1 or not self.host_fits:
            return "does not fit"
        if self.peak_gib > self.capacity_gib + 1e-9 and not self.sync_uncertain:
            return "does not fit"
        return "tight" if self.tight_phases else "fits"

    @property
    def fits(self) -> bool:
        return self.verdict != "does not fit"

    @property
    def plan_verdict(self) -> str:
        """The verdict the planner plans on: a weight sync over the card by the KV cache (sync_uncertain) is not
        planned on, whichever verl holds it; `check` only warns about it (verdict "tight")."""
        return "does not fit" if self.sync_uncertain else self.verdict

    def verdict_line(self) -> str:
        """One sentence: the verdict, the deciding phase and by how much."""
        cap = self.capacity_gib
        p = self.peak_phase
        head = f"peak {self.peak_gib:.1f} GiB ({p} phase) of {cap:.1f} GiB per GPU"
        if self.verdict == "does not fit":
            if self.kv_seqs < 1:
                return f"{head}: does not fit, the rollout engine's reservation cannot hold one full sequence's KV cache"
            if not self.host_fits:
                return f"{head}: does not fit, offloaded state needs {self.host_gb_per_node:.0f} GB of host memory per node"
            return f"{head}: does not fit, the {p} phase is {self.peak_gib - cap:.1f} GiB over"
        if self.verdict == "tight" and self.sync_uncertain:
            return (f"{head}: tight, the weight sync is {self.peak_gib - cap:.1f} GiB over if the engine's KV cache is "
                    "held during it (as in the measured verl ≈0.4 runs); verl 0.9.1 resumes it after the sync")
        if self.verdict == "tight":
            worst = max(self.tight_phases, key=lambda k: self.tight_phases[k])
            return (f"{head}: tight, the {worst} phase may reach {self.band(worst)[1]:.1f} GiB at the band's high end, "
                    f"{self.tight_phases[worst]:.1f} GiB over the card")
        return f"{head}: fits (every phase's band stays under the card)"

    # -- back-compatible views (GB = 1e9 bytes) -------------------------------------------------------------------
    @property
    def peak_gb(self) -> float:
        return self.peak_gib * GIB / GB

    @property
    def budget_gb(self) -> float:
        return self.capacity_gib * GIB / GB

    @property
    def rollout_gb(self) -> float:
        return self.phase_gib("rollout") * GIB / GB

    @property
    def training_gb(self) -> float:
        return max(self.phase_gib("log-prob"), self.phase_gib("update")) * GIB / GB

    @property
    def rollout(self) -> dict[str, float]:
        """The rollout phase as label → GiB."""
        return self.table("rollout")

    @property
    def margin(self) -> float:
        return BAND

    def gb(self, phase: str, role: str, part: str) -> float:
        """One term's GB; phase "training" is the update."""
        return self.gib("update" if phase == "training" else phase, role, part) * GIB / GB

    def roles(self) -> dict[str, float]:
        """Role → GiB per GPU at that role's peak over the phases."""
        order = list(dict.fromkeys(t.role for terms in self.phases.values() for t in terms))
        return {role: round(max(sum(t.gib for t in terms if t.role == role) for terms in self.phases.values()), 2)
                for role in order}

    def as_dict(self) -> dict[str, object]:
        return {
            "unit": "GiB",
            "verdict": self.verdict,
            "fits": self.fits,
            "summary": self.verdict_line(),
            "peak_gib_per_gpu": round(self.peak_gib, 2),
            "peak_phase": self.peak_phase,
            "gpu_memory_gb": self.gpu_gb,
            "capacity_gib_per_gpu": round(self.capacity_gib, 2),
            "band": BAND,
            "tight": self.tight_phases,
            "phases": {p: {"total_gib": round(self.phase_gib(p), 2), "band_gib": [round(x, 2) for x in self.band(p)],
                           "terms": {k: round(v, 2) for k, v in self.table(p).items()},
                           **({"verl_metrics": self.verl_metrics[p]} if p in self.verl_metrics else {})}
                       for p in self.phases},
            "roles": self.roles(),
            "kv_cache_sequences": round(self.kv_seqs, 1),
            "host_gb_per_node": round(self.host_gb_per_node, 1),
            "verl_metrics": self.verl_metrics,
            "coefficients": self.coefficients,
            "basis": self.basis,
        }


# -- working sets ----------------------------------------------------------------------------------------------


def _split(L: Layout) -> int:
    """How many GPUs share one micro-batch's tokens: Ulysses SP (FSDP) or context parallel (Megatron)."""
    return L.megatron_cp if L.megatron else L.sp


def _tokens(L: Layout, tokens: int, *, full: bool = False) -> float:
    """Tokens one GPU holds for a micro-batch of `tokens` (a budget, or micro × max length)."""
    fill = 1.0 if (full or not L.static_micro) else MEAN_FILL
    return tokens * fill / _split(L)


def _stored_bytes_per_token(s: ModelShape, L: Layout) -> tuple[float, float]:
    """(what the layers of one GPU keep for backward, the working set of the layer being computed) per token of a
    training micro-batch: the transformer body's share, the same whether a vocabulary head or a value head sits on
    top of it."""
    tp = L.megatron_tp if L.megatron else 1
    layers = math.ceil(s.layers / L.megatron_pp) if L.megatron else s.layers
    inter = s.moe_intermediate * max(s.active_experts, 1) if s.experts else s.intermediate
    working = (10 * s.hidden + 4 * inter) * 2 / tp
    if L.megatron:
        per_layer = s.hidden * (CHECKPOINT_BYTES_PER_HIDDEN if L.recompute else SELECTIVE_BYTES_PER_HIDDEN) / tp
    else:  # without gradient checkpointing every layer keeps the working set a recompute would rebuild
        per_layer = s.hidden * CHECKPOINT_BYTES_PER_HIDDEN if L.checkpointing else working
    return layers * per_layer + _router_bytes_per_token(s, L), working


def _flight(L: Layout) -> float:
    return inflight.pipeline_in_flight(L.megatron_pp, L.megatron_vpp, L.pp_micro_batches) if L.megatron else 1.0


def train_bytes_per_token(s: ModelShape, L: Layout) -> float:
    """Activations + logits per token of a training micro-batch on one GPU (PP > 1: the busier stage, inflight.py)."""
    tp = L.megatron_tp if L.megatron else 1
    stored, working = _stored_bytes_per_token(s, L)
    if L.fused_logits:
        logits = fusedhead.for_layout(s, L, train=True)[0]
    elif L.update_entropy:
        logits = s.vocab * LOGIT_BYTES_TRAIN / tp
    else:
        logits = s.vocab * (MEGATRON_LOGIT_BYTES_NO_ENTROPY if L.megatron else LOGIT_BYTES_TRAIN - ENTROPY_SOFTMAX_BYTES) / tp
    return max(_flight(L) * stored, stored + logits) + working + _vision_bytes_per_token(s, L, train=True)


def _router_bytes_per_token(s: ModelShape, L: Layout) -> float:
    """The router logits every MoE layer keeps (fp32 per expert; split over TP with sequence parallel)."""
    if not s.experts:
        return 0.0
    tp = L.megatron_tp if L.megatron else 1
    layers = math.ceil(s.moe_layers / L.megatron_pp) if L.megatron else s.moe_layers
    return layers * s.experts * ROUTER_LOGIT_BYTES / tp


def _vision_bytes_per_token(s: ModelShape, L: Layout, *, train: bool) -> float:
    """A vision-language model's vision tower activations, spread over all tokens (image_share of them are image
    tokens; the tower is not split by TP or SP here)."""
    return L.image_share * s.vision_act_bytes_per_token(train)


def forward_bytes_per_token(s: ModelShape, L: Layout) -> float:
    tp = L.megatron_tp if L.megatron else 1
    inter = s.moe_intermediate * max(s.active_experts, 1) if s.experts else s.intermediate
    logits = fusedhead.for_layout(s, L, train=False)[0] if L.fused_logits else s.vocab * LOGIT_BYTES_FORWARD / tp
    return (10 * s.hidden + 4 * inter) * 2 / tp + logits + _vision_bytes_per_token(s, L, train=False)


def critic_layout(L: Layout) -> Layout:
    """The layout the critic's update runs in: the actor's parallelism (verl builds the critic's engine on the same
    GPUs with the same Megatron TP/PP here), its own recompute and gradient checkpointing settings."""
    return replace(L, recompute=L.recompute if L.critic_recompute is None else L.critic_recompute,
                   checkpointing=L.checkpointing if L.critic_checkpointing is None else L.critic_checkpointing,
                   lora_rank=0)


def _critic_bytes_per_token(c: ModelShape, L: Layout) -> float:
    """The critic's update per token: the same transformer body as a policy of its shape (its activations with or
    without recompute, split over Megatron TP, PP micro-batches in flight) under a value head, not the vocabulary's
    logits (verl/utils/model.py load_valuehead_model; the Megatron critic's value head is one output, megatron
    engine's forward with value=True). `L` is the actor's layout; critic_layout applies the critic's settings."""
    stored, working = _stored_bytes_per_token(c, critic_layout(L))
    return _flight(L) * stored + working


# -- parameters per GPU ----------------------------------------------------------------------------------------


def megatron_params_per_gpu(s: ModelShape, L: Layout) -> tuple[float, float]:
    """(parameters on the busiest GPU, parameters whose optimizer states it holds) for Megatron.

    Dense parts (attention, norms, router, shared experts, dense MLPs) over TP × PP; with PP > 1 the first and last
    stages also hold the input embedding and the output layer whole over TP (a tied embedding is kept on both);
    routed experts over EP × ETP × PP (ETP unset = TP, Megatron's default). The distributed optimizer shards each
    part's states over its data-parallel group: world / (TP × PP) for dense parts, world / (EP × ETP × PP) for
    experts."""
    tp, pp, n = L.megatron_tp, L.megatron_pp, L.n_gpus
    etp = L.megatron_etp or tp
    experts = s.routed_expert_params
    embed = s.vocab * s.hidden  # one embedding table
    body = s.params - experts - s.embed_params()
    if pp > 1:  # the busiest stage: its share of the layers and one vocabulary table
        dense = body / (tp * pp) + embed / tp
    else:
        dense = (body + s.embed_params()) / tp
    expert = experts / (L.megatron_ep * etp * pp)
    dense_dp = max(1.0, n / (tp * pp))
    expert_dp = max(1.0, n / (L.megatron_ep * etp * pp))
    return dense + expert, dense / dense_dp + expert / expert_dp


def rollout_weight_bytes(s: ModelShape, L: Layout) -> float:
    """bf16 weights on one rollout GPU: dense parts over the engine's TP; a MoE's routed experts over TP × DP (vLLM's
    fused MoE splits experts over TP × DP whether or not expert parallel is on: verl's rollout.yaml
    expert_parallel_size note, workers/config/rollout.py:295 EP = TP × DP)."""
    experts = s.routed_expert_params
    return 2 * (s.params - experts) / L.rollout_tp + 2 * experts / (L.rollout_tp * max(1, L.rollout_dp))


# -- the estimate ----------------------------------------------------------------------------------------------


def estimate(s: ModelShape, L: Layout) -> Estimate:
    full = _estimate(s, L, full=False)
    long = _estimate(s, L, full=True) if L.static_micro else full
    if L.static_micro:
        full.full_length = dict(long.phases)
    # verl's own per-pass peaks, with full-length sequences (a static micro-batch of max-length sequences)
    full.verl_metrics, full.passes, full.basis = long.verl_metrics, long.passes, long.basis
    return full


@dataclass
class _State:
    """One GPU's training state (bytes) that every phase of the estimate draws on."""

    weights: float = 0.0
    grads: float = 0.0
    optim: float = 0.0
    gather: float = 0.0
    biggest: float = 0.0
    ref_weights: float = 0.0
    sync_weights: float = 0.0
    host: float = 0.0
    has_ref: bool = False
    ref_res: float = 0.0
    critic_w: float = 0.0
    critic_g: float = 0.0
    critic_o: float = 0.0
    critic_tok: float = 0.0
    critic_tokens: float = 0.0  # the critic's micro-batch tokens on one GPU (0: the actor's)
    critic_off: bool = False

    @property
    def critic_res(self) -> float:
        return 0.0 if self.critic_off else self.critic_w + self.critic_o


def fsdp_shards(L: Layout) -> int:
    """GPUs the FSDP actor shards its state over: fsdp_size where it is below the GPU count, else every GPU."""
    return L.fsdp_size if 0 < L.fsdp_size < L.n_gpus else L.n_gpus


def _actor_state(s: ModelShape, L: Layout) -> _State:
    """The actor's weights, gradients, Adam states per GPU. FSDP shards over every GPU (fsdp_size=-1; Ulysses SP
    only splits the data: workers/engine/fsdp/transformer_impl.py builds the mesh over the whole world), or over
    fsdp_size of them (fsdp_shards). Megatron over TP × PP, Adam over all GPUs."""
    P, n, gpn = s.params, L.n_gpus, L.gpus_per_node
    st = _State()
    if L.megatron:
        per_gpu, optim_params = megatron_params_per_gpu(s, L)
        st.weights = MEGATRON_WEIGHT_BYTES * per_gpu
        st.grads = L.grad_bytes * per_gpu
        optim_all = L.optim_bytes * optim_params
        st.optim = optim_all * (1 - L.optimizer_cpu_fraction)  # Megatron's CPU optimizer keeps its share on the host
        st.host += (optim_all - st.optim) * gpn
        st.ref_weights = MEGATRON_WEIGHT_BYTES * per_gpu
    else:
        shards = fsdp_shards(L)
        st.weights = FSDP_WEIGHT_BYTES * P / shards
        trained = s.lora_params(L.lora_rank) if L.lora_rank else P
        st.grads = 4 * trained / shards
        st.optim = ADAM_BYTES * trained / shards
        # the unit being computed and the prefetched one (FSDP's default backward prefetch), gathered in bf16 (mixed
        # precision param_dtype); the embedding / LM head is the largest unit
        st.gather = 2 * 2 * max(s.layer_params(), s.vocab * s.hidden)
        # the largest tensor the weight sync gathers whole, in fp32 (engine's get_per_tensor_param .full_tensor())
        st.biggest = FSDP_WEIGHT_BYTES * s.vocab * s.hidden
        st.ref_weights = FSDP_WEIGHT_BYTES * P / n
    st.sync_weights = st.weights  # what the weight sync loads onto the GPU (all weights, unless LoRA syncs adapters)
    if L.fsdp_cpu_policy and not L.megatron:
        # CPUOffloadPolicy (workers/engine/fsdp/transformer_impl.py:458-463, fsdp_turbo_impl.py:55-60 in verl 0.9.1):
        # the shards live on the host, the weight sync stages one tensor at a time (get_per_tensor_param_shard)
        st.host += (st.weights + st.grads + st.optim) * gpn
        st.weights = st.grads = st.optim = st.sync_weights = 0.0
    if L.megatron and L.lora_rank:
        # LoRA through Megatron-Bridge's PEFT (workers/config/megatron_peft.py): the frozen base stays bf16, sharded as
        # above; the adapters (lora.dtype null: the model's bf16) are the only parameters that require gradients, so
        # Megatron's DDP gives only them an fp32 gradient buffer and the distributed optimizer only their fp32 master
        # copy and Adam m, v (PEFT freezes the base before the DDP wrap: utils/megatron_utils.py:389-403).
        adapters = megatron_lora_per_gpu(s, L)
        st.weights += MEGATRON_WEIGHT_BYTES * adapters
        st.grads = MEGATRON_GRAD_BYTES * adapters
        st.optim = MEGATRON_OPTIM_BYTES * megatron_lora_params(s, L.lora_rank) / n
        st.sync_weights = MEGATRON_WEIGHT_BYTES * adapters if (L.lora_adapter_sync and L.offload_params) else st.weights
    st.host += ((st.weights if L.offload_params else 0) + (st.optim if L.offload_optimizer else 0)) * gpn
    # the reference: with LoRA verl computes it with the actor's adapters off (ray_trainer.py:360 ref_in_actor).
    # verl's FSDP reference is always CPU-offloaded (transformer_impl.py:422-463): never resident
    st.has_ref = L.use_ref and not L.lora_rank
    resident = L.ref_resident and L.megatron
    st.ref_res = st.ref_weights if (st.has_ref and resident) else 0.0
    if st.has_ref and not resident:
        st.host += st.ref_weights * gpn
    # the critic: fp32 weights + Adam between its updates (12 B/param), + fp32 gradients during them (16 B)
    st.critic_off = L.offload_params if L.critic_offload is None else L.critic_offload
    if L.critic is not None:
        C = L.critic.params
        shard = (L.megatron_tp * L.megatron_pp) if L.megatron else n
        st.critic_w = (MEGATRON_WEIGHT_BYTES if L.megatron else FSDP_WEIGHT_BYTES) * C / shard
        st.critic_g = 4 * C / shard
        st.critic_o = (MEGATRON_OPTIM_BYTES if L.megatron else ADAM_BYTES) * C / (n if L.megatron else shard)
        st.critic_tok = _critic_bytes_per_token(L.critic, L)
        if st.critic_off:
            st.host += (st.critic_w + st.critic_o) * gpn
    return st


def _estimate(s: ModelShape, L: Layout, *, full: bool) -> Estimate:
    e = Estimate(gpu_gb=L.gpu_gb, capacity_gib=capacity_gib(L.gpu_gb, L.gpu_type), host_memory_gb=L.host_memory_gb,
                 layout=L)
    st = _actor_state(s, L)
    resident_w = 0.0 if L.offload_params else st.weights
    resident_o = 0.0 if L.offload_optimizer else st.optim
    # gradients are freed after each update (EngineTrainModeCtx zero_grad_on_exit=True, workers/engine/base.py:312)
    # in FSDP; Megatron's gradient buffer is allocated for the model's life unless the parameters are offloaded.
    resident_g = st.grads if (L.megatron and not L.offload_params) else 0.0
    resident = resident_w + resident_o + resident_g

    # -- working sets -----------------------------------------------------------------------------------------
    t_train = _tokens(L, L.train_tokens, full=full)
    t_fwd = _tokens(L, L.logprob_tokens, full=full)
    acts = t_train * train_bytes_per_token(s, L) + (fusedhead.for_layout(s, L, train=True)[1] if t_train else 0.0)
    fwd = t_fwd * forward_bytes_per_token(s, L) + (fusedhead.for_layout(s, L, train=False)[1] if t_fwd else 0.0)
    st.critic_tokens = _tokens(L, L.critic_tokens, full=True)  # a token budget: packed, not mean-filled
    critic_acts = (st.critic_tokens or t_train) * st.critic_tok
    reserve = ALLOCATOR_RESERVE * max(acts, fwd, critic_acts)
    carried = ALLOCATOR_RESERVE * max(acts, critic_acts)  # what the last update leaves cached into the next sync

    engine = L.gmu * e.capacity_gib * GIB  # on the rollout's GPUs: these, unless it has its own (rollout_elsewhere)
    here = 0.0 if L.rollout_elsewhere else engine
    reward_engine = L.reward_gmu * e.capacity_gib * GIB
    # the engines on these GPUs during training: asleep (rollout.free_cache_engine, verl's default, frees weights
    # and KV cache), else awake with their whole reservation
    sleeping = (0 if L.rollout_elsewhere else 1) + (1 if L.reward_gmu else 0)
    asleep = ENGINE_ASLEEP_GIB * GIB * sleeping if L.free_cache_engine else here + reward_engine
    asleep_term = ("rollout", "asleep" if L.free_cache_engine else "engine awake (free_cache_engine=false)", asleep)
    context = CUDA_CONTEXT_GIB if L.n_gpus > 1 else SINGLE_GPU_CONTEXT_GIB

    def terms(*items: tuple[str, str, float]) -> tuple[Term, ...]:
        return tuple(Term(r, p, b / GIB) for r, p, b in items if b > 0) + (Term("runtime", "CUDA context + NCCL", context),)

    resident_critic = [("critic", "weights + Adam (not offloaded)", st.critic_res)] if L.critic is not None else []
    resident_ref = [("reference", "weights (not offloaded)", st.ref_res)] if st.has_ref else []
    _rollout_phases(e, L, st, terms, here, reward_engine, resident, resident_ref + resident_critic, carried)
    # log-prob and update: the analytic model (Megatron, or FSDP without traced coefficients); FSDP's passes traced
    # from the model's architecture replace them when every trained model has coefficients (e.basis "traced")
    _analytic_training_phases(e, L, st, terms, resident_w, resident_o, resident_g, fwd, acts, critic_acts,
                              resident_ref + resident_critic, asleep_term, reserve)
    if not L.megatron:
        import sys

        from wizard.planner.phasemem import fsdp_training_phases

        fsdp_training_phases(e, s, L, st, terms, t_train, t_fwd, asleep_term, sys.modules[__name__])
        if deferred_grad_gib(s, L):
            e.phases["update"] += (Term("actor", DEFERRED_GRAD_PART, deferred_grad_gib(s, L)),)
    _kv_cache(e, s, L, st, engine, reward_engine)
    return e


# Deferred FSDP gradient sync (Layout.deferred_grad_sync): torch keeps one unsharded accumulated gradient per
# parameter in the reduce dtype, fp32 in verl, on every rank whatever the world size (verl PR#7458's measurement:
# 4 B per parameter at 1, 2, 4 and 8 ranks), beside the sharded state, through all but the last micro-batch.
DEFERRED_GRAD_BYTES = 4
DEFERRED_GRAD_PART = "unsharded fp32 gradients (deferred gradient sync)"


def deferred_grad_gib(s: ModelShape, L: Layout) -> float:
    """GiB per GPU the deferred gradient sync adds to the FSDP actor's update; 0 when it does not run (off,
    Megatron, CPUOffloadPolicy, or one micro-batch per mini-batch: nothing to defer)."""
    if not L.deferred_grad_sync or L.megatron or L.fsdp_cpu_policy or L.pp_micro_batches == 1:
        return 0.0
    trained = s.lora_params(L.lora_rank) if L.lora_rank else s.params
    return DEFERRED_GRAD_BYTES * trained / GIB


def _rollout_phases(e: Estimate, L: Layout, st: _State, terms: Callable, engine: float, reward_engine: float,
                    resident: float, others: list, carried: float) -> None:
    """The phases with the rollout engine awake: rollout and the weight sync before it."""
    # a reward model's engine that sleeps outside its turn: asleep beside the policy's engine; its own turn (the
    # policy's engine asleep) counts where it reserves more than the policy's
    if bool(L.reward_gmu) and L.reward_free_cache:
        reward_beside = ("reward model", "asleep (its engine wakes for its own turn)", ENGINE_ASLEEP_GIB * GIB)
        reward_turn = [("reward model", "its own turn (above the policy's engine)", reward_engine - engine)]
    else:
        reward_beside, reward_turn = ("reward model", "engine reservation", reward_engine), []
    reservation = ("rollout", "engine reservation (gpu_memory_utilization × card)", engine)
    # rollout: the engines awake, the training state that is not offloaded beside them
    e.phases["rollout"] = terms(reservation, reward_beside, *reward_turn,
                                ("actor", "resident (not offloaded)", resident), *others,
                                ("runtime", "allocator reserve", carried))
    # weight sync (engine_workers.py:update_weights): the actor's weights on the GPU (loaded when offloaded) and
    # the largest gathered tensor, beside the engine. verl 0.9.1 resumes the engine's weights first and its KV
    # cache after the offload; the measured runs D04–D10 (7B–72B, peak in this phase) fit the whole reservation
    # held (estimates −16 … +16 % of the measured peaks), so the whole reservation is counted.
    resident_w = 0.0 if L.offload_params else st.weights
    e.phases["weight sync"] = terms(reservation, reward_beside,
                                    ("actor", "weights loaded for the sync", st.sync_weights + resident - resident_w),
                                    ("actor", "largest tensor gathered for the sync", st.biggest), *others,
                                    ("runtime", "allocator reserve", carried))


def _analytic_training_phases(e: Estimate, L: Layout, st: _State, terms: Callable, resident_w: float,
                              resident_o: float, resident_g: float, fwd: float, acts: float, critic_acts: float,
                              others: list, asleep_term: tuple, reserve: float) -> None:
    """log-prob and update from the analytic per-token bytes (Megatron: its engine is not traced)."""
    resident = resident_w + resident_o + resident_g
    # log-prob: the actor's pass and the reference's pass; offloaded roles take turns, each with its weights loaded
    actor_own = st.weights if L.offload_params else 0.0
    ref_own = st.ref_weights if (st.has_ref and not st.ref_res) else 0.0
    own_role = "reference" if ref_own > actor_own else "actor"
    e.phases["log-prob"] = terms(("actor", "resident (not offloaded)", resident), *others,
                                 (own_role, "weights loaded for its own pass", max(actor_own, ref_own)),
                                 ("actor", "gathered layers", st.gather),
                                 ("actor", "activations + logits (forward)", fwd), asleep_term,
                                 ("runtime", "allocator reserve", reserve))
    # update: the actor's full training state, one micro-batch's activations and logits
    update = [("actor", "weights", st.weights), ("actor", "gradients", st.grads), ("actor", "optimizer states", st.optim),
              ("actor", "gathered layers", st.gather), ("actor", "activations + logits", acts), *others, asleep_term,
              ("runtime", "allocator reserve", reserve)]
    e.phases["update"] = terms(*update)
    if L.critic is not None:
        # the critic's own update: with offload, the actor is swapped out while it runs
        actor_kept = resident if st.critic_off else st.weights + st.optim + resident_g
        critic_turn = (st.critic_w + st.critic_g + st.critic_o + critic_acts + actor_kept + st.ref_res + st.gather
                       + asleep_term[2] + reserve)
        above = critic_turn - sum(b for _, _, b in update)
        if above > 0:
            e.phases["update"] = terms(*update, ("critic", "its update (above the actor's)", above))
    e.verl_metrics = {p: {"max_memory_allocated_gb": round(sum(t.gib for t in e.phases[p] if t.role not in
                                                               ("runtime", "rollout")), 2),
                          "max_memory_reserved_gb": round(sum(t.gib for t in e.phases[p] if t.role != "rollout"
                                                              and t.part != "CUDA context + NCCL"), 2)}
                      for p in ("log-prob", "update")}
    e.coefficients = "analytic (Megatron engine: not traced)"


def _kv_cache(e: Estimate, s: ModelShape, L: Layout, st: _State, engine: float, reward_engine: float) -> None:
    """The KV cache the reservation holds beyond the bf16 weights, and the host memory per node."""
    engine_weights = rollout_weight_bytes(s, L)
    kv_room = engine - engine_weights - ENGINE_OVERHEAD_GIB * GIB
    e.kv_seqs = max(0.0, kv_room / s.cache_bytes_per_seq(L.rollout_tp, L.seq_len))
    # verl 0.9.1 resumes only the engine's weights for the sync and its KV cache after the actor is offloaded
    # (engine_workers.py:782, 823): the part of the reservation beyond the weights may not be held in this phase
    e.sync_kv_gib = max(0.0, engine - engine_weights) / GIB if L.free_cache_engine else 0.0
    if L.reward is not None and L.reward_gmu:
        r_room = reward_engine - 2 * L.reward.params / L.reward_tp - ENGINE_OVERHEAD_GIB * GIB
        r_seq = L.reward_seq_len or L.seq_len
        e.reward_kv_seqs = max(0.0, r_room / L.reward.cache_bytes_per_seq(L.reward_tp, r_seq))
        e.kv_seqs = min(e.kv_seqs, e.reward_kv_seqs)
    host = st.host + engine_weights * L.gpus_per_node  # a sleeping engine keeps its weights in host memory
    e.host_gb_per_node = host / GB


def reward_engine_share(reward: ModelShape, gpu_gb: float, seq_len: int, tp: int = 1, seqs: int = MIN_KV_SEQS) -> float:
    """gpu_memory_utilization a reward model's engine needs: its bf16 weights at TP `tp`, the engine's overhead and
    a KV cache for `seqs` full sequences, as a share of the card, rounded up to 0.05."""
    need = 2 * reward.params / tp + ENGINE_OVERHEAD_GIB * GIB + seqs * reward.cache_bytes_per_seq(tp, seq_len)
    return math.ceil(need / (capacity_gib(gpu_gb) * GIB) * 20) / 20


def reward_layout(reward: ModelShape, gpu_gb: float, seq_len: int, gpus_per_node: int) -> tuple[int, float]:
    """(TP, gpu_memory_utilization) for a reward model's engine beside the policy: the smallest TP (a power of two
    inside a node that splits its attention heads, ModelShape.engine_tp_ok) at which its share stays ≤ 0.3 of the
    card, else the largest such TP, with that share."""
    sizes = [t for t in rc.pow2_divisors(gpus_per_node) if reward.engine_tp_ok(t)] or [1]
    tp = next((t for t in sizes if reward_engine_share(reward, gpu_gb, seq_len, t) <= 0.3), sizes[-1])
    return tp, reward_engine_share(reward, gpu_gb, seq_len, tp)


@dataclass
class Decision:
    layout: Layout
    estimate: Estimate
    reasons: dict[str, str]
