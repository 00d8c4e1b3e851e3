"""The arithmetic verl applies to a config, as small pure functions over plain numbers.

The single home of verl's batch and layout arithmetic: the planner (wizard.planner.pipeline) derives
a config with these functions, `verl-init check` (wizard.check.rules) evaluates them on the keys of an
existing config, `verify` (wizard.verify.harness) replays verl's worker-time asserts with them, the smoke
run (wizard.smoketest.geometry) scales a bundle with them and the wizard's questions offer values that
pass them. Each function names the verl 0.9.1 line it mirrors. Only the standard library is imported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def data_parallel_size(n_gpus: int, *, megatron: bool = False, sp: int = 1, tp: int = 1, pp: int = 1,
                       cp: int = 1) -> int | None:
    """Training data-parallel ranks: n_gpus / SP (FSDP) or n_gpus / (TP·PP·CP) (Megatron); None if it does not divide.
    verl: engine_workers.py:264 (`engine.get_data_parallel_size()`), utils/config.py:103 (megatron)."""
    group = tp * pp * cp if megatron else sp
    if group < 1 or n_gpus < 1 or n_gpus % group:
        return None
    return n_gpus // group


def effective_sp(actor_sp: int | None, engine_sp: int | None) -> int:
    """Ulysses SP the FSDP engine uses: the deprecated `actor.ulysses_sequence_parallel_size` wins when > 1,
    else `actor.fsdp_config.ulysses_sequence_parallel_size` (workers/config/actor.py:327-329)."""
    if actor_sp and actor_sp > 1:
        return int(actor_sp)
    return int(engine_sp or 1)


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending (none for n < 1)."""
    if n < 1:
        return []
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def nearest(candidates: Iterable[int], target: int, k: int = 2) -> list[int]:
    """The k candidates nearest to target (ties: the smaller first), ascending."""
    return sorted(sorted(set(candidates), key=lambda c: (abs(c - target), c))[:k])


def largest_divisor_at_most(n: int, cap: int) -> int:
    return max(d for d in divisors(n) if d <= max(1, cap))


def pow2_divisors(n: int) -> list[int]:
    """The powers of two that divide n, ascending."""
    out, t = [], 1
    while t <= n:
        if n % t == 0:
            out.append(t)
        t *= 2
    return out


def lcm(values: Iterable[int]) -> int:
    out = 1
    for v in values:
        out = out * v // math.gcd(out, v)
    return out


def workers_smoke_sequences(update_micros: Iterable[int], infer_micros: Iterable[int], ranks: int, n: int,
                            whole: Iterable[int] = ()) -> int:
    """Sequences per rank for `smoke --engine verl-workers`: at least two of the largest update micro-batch (so
    gradients accumulate) and one whole log-prob micro-batch; a multiple of every fixed micro-batch size in `whole`
    (verl splits a rank's batch into whole micro-batches: workers/engine/utils.py:123; token budgets need not
    divide), with sequences × ranks a multiple of n (whole prompt groups, as data.train_batch_size × rollout.n)."""
    ups, infs = list(update_micros), list(infer_micros)
    unit = lcm(whole)
    k = unit * -(-max(2 * max(ups), max(infs, default=1)) // unit)
    while (k * ranks) % max(1, n):
        k += unit
    return k


def batch_multiple(dp: int, actor_mini_samples: int, critic_mini_samples: int | None = None) -> int:
    """verl pads every step's batch to a multiple of lcm(dp, mini·n[, critic mini·n]) (trainer_base.py:1589)."""
    terms = [dp, actor_mini_samples] + ([critic_mini_samples] if critic_mini_samples else [])
    return lcm(t for t in terms if t > 0)


def padded_batch(samples: int, multiple: int) -> int:
    """Samples per step after verl's upsampling with padding sequences (upsample_batch_to_divisible_size)."""
    return -(-samples // multiple) * multiple if multiple > 0 else samples


@dataclass(frozen=True)
class Split:
    """How one update's samples spread over data-parallel ranks and micro-batches."""

    samples: int  # mini-batch prompts × n
    per_rank: int | None  # None when the ranks cannot share it evenly
    micro_ok: bool | None  # None without a micro-batch size (dynamic batching)


def update_split(mini: int, n: int, dp: int, micro: int | None) -> Split:
    """engine_workers.py:264 (mini·n % dp) and engine/utils.py:123 (per-rank % micro)."""
    samples = mini * n
    per_rank = samples // dp if dp > 0 and samples % dp == 0 else None
    micro_ok = None if micro is None or per_rank is None else (micro > 0 and per_rank % micro == 0)
    return Split(samples, per_rank, micro_ok)


def mini_batch(prompts: int, updates: int) -> int | None:
    """Prompts per optimizer update: ppo_mini_batch_size = train_batch_size / updates; None when the
    updates cannot be equal (verl would run a last, smaller mini-batch: ppo_epochs × ceil)."""
    return prompts // updates if updates > 0 and prompts % updates == 0 else None


def mini_multiple(dp: int, n: int) -> int:
    """The smallest step of mini-batch prompts m for which m·n splits over dp ranks (engine_workers.py:264):
    every valid mini-batch is a multiple of dp / gcd(dp, n)."""
    return dp // math.gcd(dp, n) if dp > 0 and n > 0 else 1


def splits_evenly(prompts: int, n: int, ranks: int) -> bool:
    """prompts × n samples share evenly over `ranks` (the workers' mini-batch assert, validate_config's minimal batch)."""
    return ranks > 0 and (prompts * n) % ranks == 0


@dataclass(frozen=True)
class Ranks:
    """What verl's batch checks read besides the step's prompts, updates and samples per prompt."""

    dp: int  # training data-parallel ranks (data_parallel_size)
    n_gpus: int
    megatron: bool = False
    dynamic: bool = True  # use_dynamic_bsz: micro-batches packed by token budget
    micro: int | None = None  # ppo_micro_batch_size_per_gpu when it is a given answer (fixed micro-batches)


# The checks `batch_checks` names, each with the verl 0.9.1 line that asserts it.
BATCH_CHECKS = {
    "equal_updates": "verl-init's updates_per_step: ppo_mini_batch_size = prompts_per_step / updates_per_step",
    "mini_split": "engine_workers.py:264 (mini-batch × n % data-parallel size, with or without dynamic batching)",
    "minimal_batch": "utils/config.py:115-127 (train_batch_size × n % n_gpus; FSDP without dynamic batching only)",
    "micro_split": "engine/utils.py:123 (samples per rank per update % ppo_micro_batch_size_per_gpu)",
}


def batch_checks(prompts: int, updates: int, n: int, r: Ranks) -> tuple[str, ...]:
    """The single predicate of verl's step-batch arithmetic: the names (BATCH_CHECKS) of the checks that
    prompts_per_step, updates_per_step and samples_per_prompt fail on layout `r`; empty when verl accepts them.

    Exactly verl's asserts and no more: validate_config's minimal batch is skipped under dynamic batching
    (utils/config.py:103, `if not use_dynamic_bsz`), and verl pads the step batch to lcm(dp, mini·n) itself
    (trainer_base.py:1589), so a step batch need not divide over the GPUs then. With Megatron's fixed micro-batches
    the minimal batch is dp × micro (utils/config.py:115), which holds whenever the micro-batch divides each rank's
    share of an update (micro_split) because P·n = updates × dp × per_rank."""
    out: list[str] = []
    mini = mini_batch(prompts, updates) if prompts > 0 and n > 0 else None
    if mini is None:
        return ("equal_updates",)
    if not r.dynamic and not r.megatron and r.n_gpus > 0 and not splits_evenly(prompts, n, minimal_batch(r.n_gpus)):
        out.append("minimal_batch")
    split = update_split(mini, n, r.dp, None if r.dynamic else r.micro) if r.dp > 0 else None
    if split is not None and split.per_rank is None:
        out.append("mini_split")
    elif split is not None and split.micro_ok is False:
        out.append("micro_split")
    return tuple(out)


def batch_candidates(prompts: int, updates: int, n: int, r: Ranks, key: str, *, min_n: int = 1) -> list[int]:
    """Values of one of prompts_per_step / updates_per_step / samples_per_prompt (`key`) that pass every batch check
    with the other two held, nearest first (ties: the smaller first). The search reaches far enough to always
    find values above: P = U·n_gpus·micro·k and n = n_gpus·micro·k pass every check."""
    unit = max(r.n_gpus, 1) * max(r.micro or 1, 1)
    if key == "prompts_per_step":
        pool = range(1, prompts + 2 * max(updates, 1) * unit + 1)
        ok = [p for p in pool if p != prompts and not batch_checks(p, updates, n, r)]
        target = prompts
    elif key == "updates_per_step":
        ok = [u for u in divisors(prompts) if u != updates and not batch_checks(prompts, u, n, r)]
        target = updates
    elif key == "samples_per_prompt":
        pool = range(max(min_n, 1), n + 2 * unit + 1)
        ok = [m for m in pool if m != n and not batch_checks(prompts, updates, m, r)]
        target = n
    else:
        raise ValueError(f"not a batch answer: {key}")
    return sorted(ok, key=lambda v: (abs(v - target), v))


@dataclass(frozen=True)
class StepBatch:
    """A step's batch as verl's trainer forms it."""

    multiple: int  # lcm(dp, mini·n[, critic mini·n]) (trainer_base.py:1589)
    samples: int  # train_batch_size × n, padded up to `multiple`
    per_rank: int  # samples each data-parallel rank scores per step (log-prob passes, engine/utils.py:123)
    padding: int  # padding sequences verl adds every step


def step_batch(tbs: int, n: int, dp: int, mini: int, critic_mini: int | None = None) -> StepBatch:
    """train_batch_size × n upsampled to lcm(dp, mini·n[, critic mini·n]), then split over dp ranks."""
    multiple = batch_multiple(dp, mini * n, critic_mini * n if critic_mini else None)
    padded = padded_batch(tbs * n, multiple)
    return StepBatch(multiple, padded, padded // dp if dp > 0 else 0, padded - tbs * n)


def minimal_batch(n_gpus: int, *, megatron: bool = False, megatron_dp: int = 0, micro: int = 0) -> int:
    """validate_config's minimal batch (utils/config.py:115): n_gpus, or Megatron dp × micro_per_gpu."""
    return megatron_dp * micro if megatron else n_gpus


def rollout_world(tp: int, dp: int = 1, pp: int = 1) -> int:
    return tp * dp * pp


def rollout_layout(n_gpus: int, gpus_per_node: int, tp: int, dp: int = 1, pp: int = 1,
                   engine: str = "vllm") -> list[str]:
    """What verl's workers assert about the rollout layout (empty when it is fine):
    engine_workers.py:659 (n_gpus % world), replica.py:113 (a multi-node replica fills whole nodes) and, for the
    vLLM server only, vllm_async_server.py:385 (DP > 1 needs gpus_per_node % TP == 0)."""
    w = rollout_world(tp, dp, pp)
    out = []
    if w < 1 or n_gpus % w:
        out.append(f"rollout world size {w} (TP {tp} × DP {dp} × PP {pp}) does not divide the {n_gpus} GPUs")
    if w > gpus_per_node and w % gpus_per_node:
        out.append(f"a replica of {w} GPUs spans nodes of {gpus_per_node} without filling them")
    if engine != "vllm":
        return out
    if dp > 1 and gpus_per_node % tp:
        out.append(f"with rollout data parallel, TP {tp} must divide the {gpus_per_node} GPUs per node")
    elif dp > 1 and w < gpus_per_node:
        # vllm_async_server.py:388-392: data_parallel_size_local = gpus_per_node // TP, and the server's workers
        # (min(gpus_per_node, world), replica.py:113) must number data_parallel_size_local × TP
        out.append(f"with rollout data parallel, a replica of {w} GPUs must fill its {gpus_per_node}-GPU node")
    return out


def rollout_dp_options(n_gpus: int, gpus_per_node: int, tp: int, experts: int) -> list[int]:
    """Rollout data_parallel_size values for a MoE model served with rollout TP `tp`, least first: 1, and each
    DP > 1 whose replica (TP × DP GPUs, expert parallel EP = TP × DP: workers/config/rollout.py:294) passes
    verl's layout asserts (rollout_layout) and spreads at most one GPU per expert. A dense model has only 1."""
    if experts <= 0 or tp < 1:
        return [1]
    return [1] + [d for d in range(2, n_gpus // tp + 1)
                  if tp * d <= experts and not rollout_layout(n_gpus, gpus_per_node, tp, d)]


def valid_rollout_tp(n_gpus: int, gpus_per_node: int) -> list[int]:
    """Rollout TP values (DP = PP = 1) that keep each replica inside a node or on whole nodes."""
    inside = [t for t in range(1, gpus_per_node + 1) if gpus_per_node % t == 0]
    across = [gpus_per_node * k for k in range(2, n_gpus // max(gpus_per_node, 1) + 1)
              if n_gpus % (gpus_per_node * k) == 0]
    return inside + across


def attention_tp_problem(tp: int, heads: int, kv_heads: int | None = None) -> str | None:
    """What a rollout engine asserts when it splits attention over tensor_model_parallel_size `tp`, None when fine.
    vLLM and SGLang build every attention layer's QKVParallelLinear with `divide(total_num_heads, tp)`, and with
    `divide(tp, total_num_kv_heads)` when tp ≥ the KV heads (each rank holds one replicated KV head) else
    `divide(total_num_kv_heads, tp)`; `divide` asserts the division is exact (vllm/model_executor/layers/linear.py
    QKVParallelLinear.__init__; sglang python/sglang/srt/layers/linear.py:1103-1114). vLLM also refuses the query
    heads up front ("Total number of attention heads (28) must be divisible by tensor parallel size (8)",
    vllm/config/model.py ModelConfig.verify_with_parallel_config). `kv_heads` None: latent attention (MLA), whose
    KV is not split by heads."""
    if tp <= 1 or heads < 1:
        return None
    if heads % tp:
        return f"the {heads} attention heads do not split over tensor_model_parallel_size={tp}"
    if kv_heads and (kv_heads % tp if tp < kv_heads else tp % kv_heads):
        return (f"the {kv_heads} KV heads neither split over tensor_model_parallel_size={tp} nor replicate evenly "
                f"across it")
    return None


def attention_tp_sizes(heads: int, kv_heads: int | None, candidates: Iterable[int]) -> list[int]:
    """The candidates a rollout engine can split the attention over (attention_tp_problem), ascending."""
    return sorted(t for t in set(candidates) if attention_tp_problem(t, heads, kv_heads) is None)


def token_split(engine: str, *, ulysses: int = 1, context_parallel: int = 1, veomni_ulysses: int = 1) -> int:
    """The factor verl multiplies `*_max_token_len_per_gpu` by before packing micro-batches (engine/utils.py:111,
    `max_token_len_per_gpu * sp_size`), as each engine sets `sp_size`: FSDP its Ulysses SP
    (fsdp/transformer_impl.py:726), Megatron its context-parallel size (megatron/transformer_impl.py:836),
    VeOmni its Ulysses size (veomni/transformer_impl.py:417)."""
    factor = {"megatron": context_parallel, "veomni": veomni_ulysses}.get(engine, ulysses)
    return max(int(factor or 1), 1)


def min_token_budget(seq_len: int, sp: int = 1) -> int:
    """Smallest `*_max_token_len_per_gpu` that holds one full sequence (seqlen_balancing.py:384: budget × SP ≥ seq)."""
    return -(-seq_len // max(sp, 1))



# -- the smoke run's scaled-down copy of a bundle's batch geometry ---------------------------------

SMOKE_MAX_DP = 8  # data-parallel ranks the cpu miniature emulates at most (each one a loop inside its role process)


def smoke_dp(dp: int, cap: int = SMOKE_MAX_DP) -> int:
    """The data-parallel size the cpu smoke emulates: the bundle's own when it is at most `cap`, else its largest
    divisor at most `cap` (so that every size that divides over the smoke's ranks also divides over the bundle's
    rank groups of that size)."""
    return largest_divisor_at_most(dp, cap) if dp > 0 else 1


def scaled_micro(per_rank: int, bundle_micro: int, bundle_per_rank: int) -> tuple[int, str]:
    """A fixed micro-batch size for `per_rank` samples per rank (engine/utils.py:123 asserts per_rank % micro == 0),
    as close to the bundle's as the smaller batch allows: the bundle's own size when it divides; else the bundle's
    number of micro-batches per rank when that divides; else the largest divisor of per_rank below the bundle's
    size. Returns (micro, how)."""
    if per_rank < 1:
        return 1, "no samples"
    if bundle_micro > 0 and per_rank % bundle_micro == 0:
        return bundle_micro, "the bundle's size"
    count = bundle_per_rank // bundle_micro if bundle_micro > 0 and bundle_per_rank >= bundle_micro else 0
    if count > 0 and per_rank % count == 0:
        return per_rank // count, f"the bundle's {count} micro-batch(es) per rank"
    size = largest_divisor_at_most(per_rank, bundle_micro if bundle_micro > 0 else per_rank)
    return size, f"the largest size ≤ the bundle's {bundle_micro} that divides {per_rank}"


@dataclass(frozen=True)
class MegatronGrid:
    """A Megatron training layout as verl's engine hands it to megatron-core's initialize_model_parallel
    (workers/engine/megatron/transformer_impl.py:271-280): TP, PP, CP, EP, ETP (None: megatron-core takes TP) and
    VPP (None: no interleaved schedule); `first`/`last`: layers of the first and last pipeline stages when the layers
    do not split evenly over PP (override_transformer_config.num_layers_in_first/last_pipeline_stage), else None."""

    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int | None = None
    vpp: int | None = None
    first: int | None = None
    last: int | None = None

    def stage_layers(self, layers: int) -> int:
        """Layers of the largest pipeline stage."""
        if self.first is None and self.last is None:
            return -(-layers // max(self.pp, 1))
        ends = [x for x in (self.first, self.last) if x is not None]
        left = self.pp - len(ends)
        middle = (layers - sum(ends)) // left if left > 0 else 0
        return max(ends + [middle])

    @property
    def dense(self) -> int:
        """Ranks one copy of the dense model spans: TP·PP·CP (parallel_state.py `model_size`)."""
        return self.tp * self.pp * self.cp

    @property
    def expert_tp(self) -> int:
        """ETP as megatron-core uses it: `expert_tensor_parallel_size = tensor_model_parallel_size` when None."""
        return self.tp if self.etp is None else self.etp

    @property
    def expert_group(self) -> int:
        """Consecutive ranks that share one MoE layer's experts: ETP·EP (megatron-core's expert order tp-ep-dp-pp)."""
        return self.expert_tp * self.ep

    @property
    def expert_grid(self) -> int:
        """ETP·EP·PP (parallel_state.py `expert_tensor_model_pipeline_parallel_size`)."""
        return self.expert_group * self.pp

    def data_parallel(self, world: int) -> int | None:
        """Dense data-parallel ranks world / (TP·PP·CP); None when it does not divide."""
        return data_parallel_size(world, megatron=True, tp=self.tp, pp=self.pp, cp=self.cp)

    def expert_data_parallel(self, world: int) -> int | None:
        """Expert data-parallel ranks world / (ETP·EP·PP); None when it does not divide."""
        g = self.expert_grid
        return world // g if g > 0 and world % g == 0 else None


# What megatron-core (and verl-init's topology rule) asserts about a Megatron layout, each with its source line.
# megatron-core is not pinned by verl 0.9.1 (`megatron-core` in its [megatron] extra); the lines are those of
# NVIDIA/Megatron-LM tag core_v0.15.0 (the same checks stand in core_v0.13.0 … core_v0.17.0).
MEGATRON_CHECKS = {
    "dense_grid": "parallel_state.py:697 world_size % (TP·PP·CP) (verl's validate_config too: utils/config.py:110)",
    "expert_grid": "parallel_state.py:743-752 world_size % (ETP·EP·PP), ETP None → TP",
    "interleaved": "parallel_state.py:703-706 virtual_pipeline_model_parallel_size needs PP > 1",
    "layers": "transformer_block.py:155-177 num_layers % PP, then (num_layers / PP) % VPP (an even split); with "
              "num_layers_in_first/last_pipeline_stage set, the layers left % the stages left (transformer_block.py:"
              "106-133, transformer_config.py:1085-1140)",
    "dense_ep": "transformer_config.py:808 expert_model_parallel_size > 1 needs num_moe_experts",
    "experts": "moe/moe_layer.py:64 num_moe_experts % EP",
    "heads": "transformer_config.py:743 num_attention_heads % TP",
    "kv_heads": "transformer_config.py:758 num_query_groups (KV heads) % TP",
    "tp_node": "verl-init's topology: a TP group (consecutive ranks) stays inside a node's NVLink domain",
    "expert_node": "verl-init's topology: an ETP·EP group (consecutive ranks, expert order tp-ep-dp-pp) stays inside a node",
}


def megatron_checks(world: int, g: MegatronGrid, *, gpus_per_node: int | None = None, layers: int | None = None,
                    heads: int | None = None, kv_heads: int | None = None,
                    experts: int | None = None) -> dict[str, str]:
    """The checks (MEGATRON_CHECKS) layout `g` fails on `world` GPUs, each with its message; empty when fine.
    The model's counts are checked only when given (`experts=0`: a dense model; None: unknown)."""
    out: dict[str, str] = {}
    if g.dense < 1 or world % g.dense:
        out["dense_grid"] = f"TP×PP×CP = {g.tp}×{g.pp}×{g.cp} = {g.dense} does not divide the {world} GPUs"
    if g.ep > 1 or g.etp is not None:
        if g.expert_grid < 1 or world % g.expert_grid:
            out["expert_grid"] = (f"the expert grid ETP×EP×PP = {g.expert_tp}×{g.ep}×{g.pp} = {g.expert_grid} does not "
                                  f"divide the {world} GPUs")
    if g.vpp is not None and g.pp <= 1:
        out["interleaved"] = (f"virtual_pipeline_model_parallel_size={g.vpp} needs pipeline_model_parallel_size > 1 "
                              "(interleaved schedule)")
    chunks = g.pp * (g.vpp or 1)
    if layers is not None and (g.first is not None or g.last is not None):
        ends = [x for x in (g.first, g.last) if x is not None]
        left, rest = g.pp - len(ends), layers - sum(ends)
        if g.vpp is not None or min(ends) < 1 or left < 0 or rest < left or (left > 0 and rest % left) or (left == 0 and rest):
            out["layers"] = (f"the {layers} layers do not split into first {g.first} + last {g.last} layers and "
                             f"{max(left, 0)} equal middle stage(s)")
    elif layers is not None and chunks > 1 and layers % chunks:
        out["layers"] = (f"the {layers} layers do not split into PP×VPP = {chunks} equal pipeline chunks" if g.vpp
                         else f"the {layers} layers do not split into PP = {g.pp} equal pipeline stages")
    if experts == 0 and g.ep > 1:
        out["dense_ep"] = f"expert_model_parallel_size={g.ep} for a dense model (no experts to spread)"
    elif experts and g.ep > 1 and experts % g.ep:
        out["experts"] = f"the {experts} experts do not spread evenly over expert_model_parallel_size={g.ep}"
    if heads is not None and heads % g.tp:
        out["heads"] = f"the {heads} attention heads do not split over tensor_model_parallel_size={g.tp}"
    if kv_heads is not None and kv_heads % g.tp:
        out["kv_heads"] = f"the {kv_heads} KV heads (query groups) do not split over tensor_model_parallel_size={g.tp}"
    if gpus_per_node is not None:
        if g.tp > gpus_per_node or gpus_per_node % g.tp:
            out["tp_node"] = f"a TP group of {g.tp} GPUs does not fit inside a node of {gpus_per_node}"
        if (g.ep > 1 or g.etp is not None) and (g.expert_group > gpus_per_node or gpus_per_node % g.expert_group):
            out["expert_node"] = (f"an expert group ETP×EP = {g.expert_tp}×{g.ep} = {g.expert_group} GPUs does not fit "
                                  f"inside a node of {gpus_per_node}")
    return out


def megatron_layout(world: int, tp: int, pp: int, cp: int = 1, ep: int = 1, etp: int | None = None,
                    vpp: int | None = None, *, layers: int | None = None, experts: int | None = None) -> list[str]:
    """What Megatron-core asserts about a training layout when verl's engine calls initialize_model_parallel
    (verl workers/engine/megatron/transformer_impl.py:272; megatron/core/parallel_state.py), empty when fine:
    the dense grid TP·PP·CP divides the world (also verl's validate_config, utils/config.py:110); the expert grid
    ETP·EP·PP divides the world (ETP defaults to TP); an interleaved schedule (VPP set) needs PP > 1; each
    pipeline stage holds a whole number of layer chunks (layers over PP·VPP, given `layers`, for an even split);
    the experts spread evenly over EP (given `experts`). The messages of `megatron_checks`, in that order."""
    found = megatron_checks(world, MegatronGrid(tp, pp, cp, ep, etp, vpp), layers=layers, experts=experts or None)
    return [found[k] for k in ("dense_grid", "expert_grid", "interleaved", "layers", "experts") if k in found]


def uneven_split(layers: int, pp: int) -> tuple[int, int] | None:
    """(first, last) stage layers for `layers` over `pp` stages when they do not split evenly, as verl's 235B example
    sets them (94 layers over PP 8: 11 + 6 × 12 + 11): equal first and last stages, the middle stages as even as
    megatron-core requires ((layers − first − last) % (PP − 2), transformer_block.py:128-133), the largest stage as
    small as possible; None when the split is even, PP < 2 or no such split exists."""
    if pp < 2 or layers % pp == 0 or layers < pp:
        return None
    if pp == 2:
        return -(-layers // 2), layers // 2
    best: tuple[int, int] | None = None
    for f in range(1, layers // 2 + 1):
        rest = layers - 2 * f
        if rest >= pp - 2 and rest % (pp - 2) == 0:
            size = max(f, rest // (pp - 2))
            if best is None or size < best[0] or (size == best[0] and f > best[1]):
                best = (size, f)
    return (best[1], best[1]) if best is not None else None


def megatron_grids(world: int, gpus_per_node: int, *, layers: int | None = None, heads: int | None = None,
                   kv_heads: int | None = None, experts: int | None = None, tp: int | None = None,
                   pp: int | None = None, cp: int | None = None, ep: int | None = None, etp: int | None = None,
                   vpp: int | None = None, max_pp: int = 32) -> list[MegatronGrid]:
    """Every Megatron layout on `world` GPUs (nodes of `gpus_per_node`) that passes every check of
    `megatron_checks`, with the given sizes held, least model parallelism first: context parallel last (CP = 1
    layouts before any CP > 1: CP is for sequences whose activations fit no other way), then the dense grid TP·PP
    ascending (ties: less PP), then the expert group ETP·EP ascending. Derived values: TP a power of two inside a
    node, CP a power of two with TP·CP inside a node, PP up to `max_pp`, EP dividing the experts with ETP = 1
    (whole experts on each rank, as verl's MoE examples run them) for a MoE model, EP = 1 and ETP unset for a dense
    one; no VPP unless given."""
    tps = [tp] if tp is not None else pow2_divisors(gpus_per_node)
    pps = [pp] if pp is not None else [p for p in range(1, max_pp + 1) if world % p == 0]
    cps = [cp] if cp is not None else pow2_divisors(gpus_per_node)
    moe = bool(experts)
    if ep is not None:
        eps = [ep]
    else:
        eps = [e for e in divisors(experts or 1) if e <= gpus_per_node] if moe else [1]
    out: list[MegatronGrid] = []
    for t in tps:
        for p in pps:
            for c in cps:
                if cp is None and (t * c > gpus_per_node or gpus_per_node % (t * c)):
                    continue
                for e in eps:
                    x = etp if etp is not None else (1 if moe else None)
                    ends = uneven_split(layers, p) if layers is not None and vpp is None else None
                    g = MegatronGrid(t, p, c, e, x, vpp, *(ends or (None, None)))
                    if not megatron_checks(world, g, gpus_per_node=gpus_per_node, layers=layers, heads=heads,
                                           kv_heads=kv_heads, experts=experts):
                        out.append(g)
    return sorted(out, key=lambda g: (g.cp, g.dense, g.pp, g.first is not None, g.expert_group, g.tp))


@dataclass(frozen=True)
class TurnBudget:
    """How verl's tool agent loop spends `rollout.response_length` over a conversation (tool_agent_loop.py)."""

    response_length: int  # every assistant and tool token after the prompt (tool_agent_loop.py:195 truncates there)
    turns: int  # max_assistant_turns
    tool_replies: int  # tool replies that fit between those turns (one after each assistant turn but the last)
    tool_tokens: int  # tool_replies × max_tool_response_length: masked out of the loss, but in the sequence
    assistant_tokens: int  # what is left for the model's own tokens, all turns together
    per_turn: int  # assistant_tokens // turns


def turn_budget(response_length: int, turns: int, tool_response_length: int) -> TurnBudget:
    """The worst case of one multi-turn rollout: every assistant turn but the last calls the tool, and each tool reply
    is cut to `max_tool_response_length` characters (tool_agent_loop.py:499-500), counted here as that many tokens
    (an upper bound: a token holds at least one character). Tool replies are
    part of the response (response_mask 0: tool_agent_loop.py:386-397) and generation stops once the response reaches
    `response_length` (:290, :394): what the tools use, the model cannot."""
    replies = max(turns - 1, 0)
    tool_tokens = replies * tool_response_length
    left = response_length - tool_tokens
    return TurnBudget(response_length, turns, replies, tool_tokens, left, left // turns if turns else left)


def placement_groups(node_gpus: Sequence[int], size: int) -> int:
    """verl's placement groups of `size` GPUs (one per trainer node, STRICT_PACK: each on one node,
    single_controller/ray/base.py:131-160) that nodes of `node_gpus` GPUs hold."""
    return sum(n // size for n in node_gpus) if size > 0 else 0

