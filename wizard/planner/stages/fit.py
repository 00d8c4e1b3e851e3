"""Rule stages of memory: the model's shape, the layout whose memory peak fits (wizard.planner.layout_search.choose; VI311,
VI601, VI602, VI605, VI606; VI320 when it splits a Gated DeltaNet model with Ulysses) and the final plan's verdict
(VI607).
"""

from __future__ import annotations

from typing import Any, Optional

from wizard.intent.answers import Answers
from wizard.planner import genrm
from wizard.planner.layout_search import choose
from wizard.planner.memory import Decision, Layout, reward_layout
from wizard.planner.shapes import ModelShape, resolve_shape
from wizard.planner.stages.layout import (LINK_LEVELS, MEGATRON_ANSWERS, group_level, megatron_grids, megatron_options,
                                         rollout_dp_options, rollout_ep, rollout_tp_options)
from wizard.planner.stages.vision import image_share
from wizard.planner.state import MICRO_TOKEN_BUDGET, Build, round_up
from wizard.verlspec import arithmetic as rc
from wizard.verlspec.arithmetic import pow2_divisors


def memory_fit(b: Build) -> None:
    """Model shape, parallel layout and memory fit (wizard.planner.memory)."""
    a, f, given, n_gpus = b.a, b.f, b.given, b.n_gpus
    b.seq = seq = a.max_prompt_length + a.max_response_length
    b.dynamic = dynamic = a.dynamic_batch if a.dynamic_batch is not None else not b.megatron
    try:
        b.shape = shape = resolve_shape(a.model, a.model_params_b)
    except (OSError, ValueError) as exc:  # a local folder whose config.json is unreadable or not a model config
        f.error("VI601", ("model",), f"cannot read the model folder's config.json: {exc}",
                "give a model folder with a Hugging Face config.json, or set model_params_b")
        b.shape = shape = None
    # one model size everywhere: the shape's (PLAN.md, the memory estimate and the facts agree)
    b.facts["model_params_b"] = round(shape.params_b, 2) if shape else None
    b.facts["model_size_source"] = shape.source if shape else "unknown"
    if shape is None:
        f.error("VI601", ("model", "model_params_b"),
                f"cannot size {a.model!r}: not in the catalogue, not a local folder, no size in its name",
                "give a local model folder (only config.json is read) or set model_params_b (e.g. 7)")
    if b.algo.critic:
        b.critic_shape = shape if b.critic_model == a.model else resolve_shape(b.critic_model)
        if b.critic_shape is None:
            f.error("VI601", ("critic_model",), f"cannot size critic_model {b.critic_model!r}",
                    "give a local model folder or a catalogue model as critic_model")
    b.tp_options = tp_options = rollout_tp_options(a, n_gpus, f, shape)
    rollout_dp_options(a, shape, n_gpus, tp_options, f)
    b.mp_options = mp_options = megatron_options(a, shape, n_gpus, f) if b.megatron else [rc.MegatronGrid()]
    fit_args = (b.critic_shape, n_gpus, seq, dynamic, b.megatron, b.use_ref, b.n, given)
    decision = None
    if not f.errors and shape is not None:
        topology = b.topology
        if topology is not None:
            fast = [t for t in tp_options if group_level(topology, t) < 3]
            # Megatron's TP groups and expert groups (consecutive ranks) on fast links too, when such layouts fit
            fast_mp = [g for g in mp_options if group_level(topology, g.tp) < 3 and group_level(topology, g.expert_group) < 3]
            if (fast and len(fast) < len(tp_options)) or (fast_mp and len(fast_mp) < len(mp_options)):
                decision = fit(a, shape, *fit_args, fast or tp_options, fast_mp or mp_options)
        if decision is None:
            decision = fit(a, shape, *fit_args, tp_options, mp_options)
        if decision is not None and topology is not None and group_level(topology, decision.layout.rollout_tp) >= 3:
            f.warning("VI311", ("rollout_tp",),
                      f"rollout_tp={decision.layout.rollout_tp} groups GPUs across a "
                      f"{LINK_LEVELS[group_level(topology, decision.layout.rollout_tp)]}: slower tensor-parallel traffic",
                      "nothing smaller fits; more GPUs per NVLink domain or a smaller model would avoid it")
        unlimited = None
        if decision is None and a.host_memory_gb is not None:
            unlimited = fit(a, shape, *fit_args, tp_options, mp_options, host_limit=False)
        if unlimited is not None:
            f.error("VI605", ("host_memory_gb", "offload"),
                    f"fitting the GPUs needs offloaded training state: {unlimited.estimate.host_gb_per_node:.0f} GB of host "
                    f"memory per node, more than 90% of host_memory_gb={a.host_memory_gb:g}",
                    "use more nodes, LoRA, or nodes with more host memory")
        elif decision is None and (culprit := _explicit_culprit(a, shape, *fit_args)) is not None:
            knob, freed = culprit
            f.error("VI606", (knob,),
                    f"{knob}={getattr(a, knob)} does not fit {a.gpus_per_node} × {a.gpu_memory_gb:g} GB GPUs "
                    "(peak memory over the budget in every layout with it)",
                    f"remove it and verl-init chooses {_describe(knob, freed)}")
        elif decision is None:
            f.error("VI602", ("model", "nnodes", "gpus_per_node", "gpu_memory_gb"),
                    f"{shape.name} ({shape.params_b:.1f}B, {a.algorithm}{', LoRA' if a.lora_rank else ''}) does not fit "
                    f"{a.nnodes}×{a.gpus_per_node} × {a.gpu_memory_gb:g} GB GPUs with any layout or offload verl-init can choose",
                    _suggest(a, shape, *fit_args))
    if decision is not None and not f.errors:
        decision = _fastest(b, decision, tp_options, mp_options)
    b.decision = decision
    _, b.reward_tp, b.reward_gmu = reward_engine(a, seq, a.gpus_per_node)
    if decision is not None:
        lay = decision.layout
        b.sp, b.dp = lay.sp, lay.dp
        chosen = (lay.megatron_tp, lay.megatron_pp, lay.megatron_cp, lay.megatron_ep, lay.megatron_etp, lay.megatron_vpp)
        b.grid = next((g for g in mp_options if (g.tp, g.pp, g.cp, g.ep, g.etp, g.vpp) == chosen),
                      rc.MegatronGrid(*chosen)) if b.megatron else rc.MegatronGrid()
        b.rtp, b.gmu, b.offload, b.rdp = lay.rollout_tp, lay.gmu, lay.offload_params, lay.rollout_dp
    else:
        b.grid = mp_options[0] if mp_options else rc.MegatronGrid()
        b.dp = rc.data_parallel_size(n_gpus, megatron=b.megatron, sp=b.sp, tp=b.grid.tp, pp=b.grid.pp,
                                     cp=b.grid.cp) or 0
        b.rtp = tp_options[0] if tp_options else 0
        b.rdp = a.rollout_dp or 1
        b.gmu = a.gpu_memory_utilization or 0.6
        b.offload = bool(a.offload)
    b.mtp, b.mpp = b.grid.tp, b.grid.pp
    if b.sp > 1 and not b.megatron and shape is not None and shape.linear_layers:
        # the checker's VI907: verl 0.9.1 splits Gated DeltaNet layers over Ulysses ranks with flash-linear-attention's
        # context-parallel kernels and raises NotImplementedError without them (models/transformers/qwen3_5.py:168-172)
        f.warning("VI320", ("sequence_parallel", "model"),
                  f"sequence_parallel={b.sp} on {shape.name}: verl splits its {shape.linear_layers} Gated DeltaNet layers "
                  "with flash-linear-attention's context-parallel kernels (fla.ops.cp); without them the workers raise "
                  "NotImplementedError at the first pass",
                  "install a flash-linear-attention with context-parallel support on the GPU machines (verl PR #6660 "
                  "validated 0.5.1; `verl-init doctor` shows the version), or shorten max_response_length so that one "
                  "GPU holds a sequence")
    rollout_ep(b)
    b.facts.update(dp=b.dp, sequence_parallel=b.sp, megatron_tp=b.mtp, megatron_pp=b.mpp, megatron_cp=b.grid.cp,
                   megatron_ep=b.grid.ep, megatron_etp=b.grid.etp, megatron_vpp=b.grid.vpp,
                   megatron_first=b.grid.first, megatron_last=b.grid.last,
                   megatron_expert_dp=b.grid.expert_data_parallel(n_gpus) if b.megatron else None,
                   rollout_tp=b.rtp, rollout_dp=b.rdp, rollout_ep=b.rep, moe_experts=shape.experts if shape else 0,
                   offload=b.offload,
                   rollout_replicas=n_gpus // (b.rtp * b.rdp) if b.rtp and n_gpus % (b.rtp * b.rdp) == 0 else 0)


_VERDICTS = ("fits", "tight", "does not fit")


def _fastest(b: Build, decision: Decision, tp_options: list[int], mp_options: list[rc.MegatronGrid]) -> Decision:
    """Among the layouts that fit, the fastest by predicted step time (wizard.planner.layouts.rank_layouts): every
    other rollout TP (its least-offload layout), offload forced on, and dynamic batching flipped when the user
    left those open; a decision with Megatron full recompute against the layout found without it (the incumbent);
    b.facts["layout_ranking"] names the runner-up (PLAN.md)."""
    from wizard.planner.layouts import describe, layout_step, rank_layouts

    a, shape = b.a, b.shape
    topology = b.topology
    if a.gpu_type == "cpu":  # no step time to rank by (steptime_plan.of_plan)
        return decision

    def refit(tps: list[int], dynamic: bool, offload: Optional[bool] = None,
              recompute: bool = True) -> Optional[Decision]:
        answers = a if offload is None else a.model_copy(update={"offload": offload})
        args = (b.critic_shape, b.n_gpus, b.seq, dynamic, b.megatron, b.use_ref, b.n, b.given)
        return fit(answers, shape, *args, tps, fast_mp, recompute=recompute)

    # on a probed topology, as memory_fit: TP and expert groups on fast links where such layouts exist
    fast = [t for t in tp_options if topology is None or group_level(topology, t) < 3] or tp_options
    fast_mp = [g for g in mp_options if topology is None or (group_level(topology, g.tp) < 3 and group_level(
        topology, g.expert_group) < 3)] or mp_options
    alternatives: list[tuple[Optional[Decision], bool]] = [
        (refit([t], b.dynamic), b.dynamic) for t in fast if t != decision.layout.rollout_tp]
    if a.offload is None and not decision.layout.offload_params:
        alternatives.append((refit([decision.layout.rollout_tp], b.dynamic, offload=True), b.dynamic))
    flip = a.dynamic_batch is None and a.micro_batch_per_gpu is None and a.max_tokens_per_gpu is None
    if flip:
        alternatives.append((refit([decision.layout.rollout_tp], not b.dynamic), not b.dynamic))

    def step(d: Decision, dynamic: bool):
        return layout_step(shape, d, prompts=a.prompts_per_step, n=b.n, max_prompt=a.max_prompt_length,
                           max_response=a.max_response_length, response_mean=a.response_length_mean,
                           gpu_type=a.gpu_type, mini_batches=a.updates_per_step, has_critic=bool(b.algo.critic),
                           dynamic=dynamic, filter_groups=bool(b.algo.filter_groups))

    default = b.dynamic
    # speed never buys a worse verdict: a layout that is only "tight" does not compete with one that "fits"
    worst = _VERDICTS.index(decision.estimate.verdict)
    alternatives = [x for x in alternatives if x[0] is not None and _VERDICTS.index(x[0].estimate.verdict) <= worst]
    incumbent = decision
    if decision.layout.recompute:
        # Megatron full recompute (layout_search.choose tries it before offload and more parallelism): the layout
        # the search finds without it (offload, more model parallelism) is the incumbent, and recompute is planned
        # only when predicted SWITCH_SHARE faster, or when nothing fits without it
        plain = refit([decision.layout.rollout_tp], b.dynamic, recompute=False)
        if plain is not None and _VERDICTS.index(plain.estimate.verdict) <= worst:
            incumbent = plain
            alternatives.append((decision, b.dynamic))
            if flip:  # the layout without recompute with dynamic batching flipped, as the one with it
                other = refit([decision.layout.rollout_tp], not b.dynamic, recompute=False)
                if other is not None and _VERDICTS.index(other.estimate.verdict) <= worst:
                    alternatives.append((other, not b.dynamic))
    dynamic = b.dynamic
    chosen, b.dynamic, ranking = rank_layouts(incumbent, b.dynamic, alternatives, step)
    if chosen.layout.recompute:  # PLAN.md names the layout without recompute (wizard.planner.recompute.summary)
        b.facts["recompute_without"] = describe(incumbent, dynamic) if not incumbent.layout.recompute else None
    b.facts["layout_ranking"] = ranking
    if chosen.layout.rollout_tp != incumbent.layout.rollout_tp:  # verl_keys.rollout_keys says why
        b.facts["rollout_tp_by_time"] = incumbent.layout.rollout_tp
    if b.dynamic != default:
        b.facts["dynamic_by_time"] = "(the faster by predicted step time: PLAN.md's Time and cost)"
    return chosen


def memory_verdict(b: Build) -> None:
    """The final plan's memory verdict (wizard.planner.memory): "tight" is a warning naming the phase and by how
    much, as `check` says of the same config (its VI860 warning)."""
    mem = b.decision.estimate if b.decision is not None else None
    if mem is None or b.f.errors or mem.verdict != "tight":
        return
    phase = max(mem.tight_phases, key=lambda p: mem.tight_phases[p])
    high = mem.band(phase)[1]
    given = [k for k in ("gpu_memory_utilization", "max_tokens_per_gpu", "micro_batch_per_gpu", "offload", "rollout_tp")
             if k in b.given]
    b.f.warning("VI607", tuple(given) or ("gpu_memory_gb",),
                f"memory is tight in the {phase} phase: {mem.phase_gib(phase):.1f} GiB per GPU estimated, up to {high:.1f} GiB "
                f"at the band's high end, {high - mem.capacity_gib:.1f} GiB over the {mem.capacity_gib:.1f} GiB card",
                ("lower gpu_memory_utilization or offload" if phase in ("rollout", "weight sync") else
                 "lower the token budget / micro-batch") + (f" (set by you: {', '.join(given)})" if given else ""))


# The reward model's engine reservation when its model cannot be sized: a share of each GPU beside the policy's
# engine. vLLM refuses to start when util × GPU memory is not free, so policy + reward reservations + what training
# keeps resident must stay under the GPU (tests/test_algorithms.py writes that sum out).
REWARD_MODEL_GMU = 0.2


def fit(a: Answers, shape: ModelShape, critic: Optional[ModelShape], n_gpus: int, seq: int, dynamic: bool,
        megatron: bool, use_ref: bool, n: int, given: set[str], tp_options: list[int],
        mp_options: list[rc.MegatronGrid], *, nnodes: Optional[int] = None, lora_rank: Optional[int] = None,
        gpus_per_node: Optional[int] = None, any_offload: bool = False,
        host_limit: bool = True, recompute: bool = True) -> Optional[Decision]:
    """The least-offload, least-parallel layout whose memory peak fits (wizard.planner.layout_search.choose;
    `recompute` False: no Megatron layout with full recompute).
    With other hardware (nnodes/gpus_per_node), every layout of that hardware is considered."""
    gpn = gpus_per_node or a.gpus_per_node
    n_all = gpn * (nnodes or a.nnodes)
    other_hw = n_all != n_gpus or gpn != a.gpus_per_node
    if "sequence_parallel" in given or megatron:
        sp_options = [a.sequence_parallel] if not other_hw else [1]
    else:
        sp_options = [d for d in pow2_divisors(gpn) if shape.heads % d == 0 and shape.kv_heads % d == 0]
    if dynamic:
        token_cap = a.max_tokens_per_gpu or round_up(3 * seq, 1024)
    elif a.micro_batch_per_gpu is not None:
        token_cap = a.micro_batch_per_gpu * seq
    else:
        token_cap = max(MICRO_TOKEN_BUDGET, seq)
    if other_hw:
        tp_options = pow2_divisors(gpn)
        mp_options = megatron_grids(a, shape, n_all, gpn, free=tuple(MEGATRON_ANSWERS)) if megatron else [rc.MegatronGrid()]
    reward, reward_tp, reward_gmu = reward_engine(a, seq, gpn)
    rank = a.lora_rank if lora_rank is None else lora_rank
    base = Layout(
        gpu_gb=a.gpu_memory_gb, n_gpus=n_all, gpus_per_node=gpn, seq_len=seq, rollout_tp=1, gmu=0.0, dp=1,
        megatron=megatron, use_ref=use_ref, ref_resident=megatron,
        lora_rank=rank, lora_adapter_sync=megatron and rank > 0, critic=critic,  # (_lora_keys: merge off, safetensors)
        host_memory_gb=a.host_memory_gb if host_limit else None, static_micro=not dynamic, gpu_type=a.gpu_type,
        reward=reward, reward_tp=reward_tp, reward_gmu=reward_gmu,
        reward_seq_len=genrm.judge_seq(a) if a.reward == "genrm" else 0,
        # a colocated reward engine (classifier or judge) sleeps outside its own turn
        # (reward.reward_model.rollout.free_cache_engine, which the plan sets true: reward_keys, genrm.keys), as
        # `check` counts it
        reward_free_cache=a.reward in ("model", "genrm"),
        image_share=image_share(a, shape, seq),
        update_entropy=False,  # the plan writes actor.entropy_coeff=0 (_actor keys): the update computes no entropy
    )
    offload = [False, True] if (a.offload is None or any_offload) else [a.offload]
    experts = shape.experts or 0

    def rollout_dps(tp: int) -> list[int]:
        options = rc.rollout_dp_options(n_all, gpn, tp, experts)
        if a.rollout_dp is not None and not other_hw:
            return [a.rollout_dp] if a.rollout_dp in options else []
        return options

    kw = dict(tp_options=tp_options, gmu_fixed=None if any_offload else a.gpu_memory_utilization, rollout_dps=rollout_dps,
              sp_options=sp_options, token_cap=token_cap, mp_options=mp_options, batch_samples=a.prompts_per_step * n,
              recompute=recompute)
    # a layout whose every phase fits with the band first; one that is only tight (the band's high end over the
    # card) is the fallback
    for accept in (("fits",), ("fits", "tight")):
        if len(offload) > 1:
            # A layout whose GPUs fit activations for less than two sequences trains slowly: offload (which frees
            # the rollout phase, and lets an offloaded actor and critic take turns) is preferred to it; the cramped
            # layout is the fallback.
            roomy = choose(shape, base, offload_options=offload, min_gpu_tokens=min(token_cap, 2 * seq), accept=accept, **kw)
            if roomy is not None:
                return roomy
        d = choose(shape, base, offload_options=offload, accept=accept, **kw)
        if d is not None:
            return d
    return None


def reward_engine(a: Answers, seq: int, gpn: int) -> tuple[Optional[ModelShape], int, float]:
    """The reward model's engine beside the policy (reward=model): its shape, TP and share of each GPU, sized
    from the model (wizard.planner.memory.reward_layout); a model verl-init cannot size gets REWARD_MODEL_GMU."""
    if a.reward == "genrm":
        return genrm.engine(a, gpn)
    if a.reward != "model":
        return None, 1, 0.0
    try:
        reward = resolve_shape(a.reward_model) if a.reward_model else None
    except (OSError, ValueError):  # an unreadable local config.json: sized like an unknown model
        reward = None
    if reward is None:
        return None, 1, REWARD_MODEL_GMU
    tp, gmu = reward_layout(reward, a.gpu_memory_gb, seq, gpn)
    return reward, tp, gmu


_FREEABLE = ("gpu_memory_utilization", "rollout_tp", "rollout_dp", "offload", "sequence_parallel", "megatron_tp", "megatron_pp",
             "megatron_cp", "megatron_ep", "megatron_etp", "megatron_vpp", "max_tokens_per_gpu", "micro_batch_per_gpu")


def _explicit_culprit(a: Answers, shape: ModelShape, critic: Optional[ModelShape], n_gpus: int, seq: int,
                      dynamic: bool, megatron: bool, use_ref: bool, n: int,
                      given: set[str]) -> Optional[tuple[str, Decision]]:
    """An explicit answer without which the plan would fit: the user's value, not the hardware, is the problem."""
    for knob in _FREEABLE:
        if knob not in given or getattr(a, knob) is None:
            continue
        update: dict[str, Any] = {knob: 1 if knob == "sequence_parallel" else None}
        freed_a = a.model_copy(update=update)
        freed_given = given - {knob}
        tps = pow2_divisors(a.gpus_per_node) if freed_a.rollout_tp is None else [freed_a.rollout_tp]
        mps = megatron_grids(freed_a, shape, n_gpus) if megatron else [rc.MegatronGrid()]
        d = fit(freed_a, shape, critic, n_gpus, seq, dynamic, megatron, use_ref, n, freed_given, tps, mps)
        if d is not None:
            return knob, d
    return None


def _describe(knob: str, d: Decision) -> str:
    lay = d.layout
    return {
        "gpu_memory_utilization": f"gpu_memory_utilization={lay.gmu:g}",
        "rollout_tp": f"rollout_tp={lay.rollout_tp}",
        "rollout_dp": f"rollout_dp={lay.rollout_dp}",
        "offload": f"offload={str(lay.offload_params).lower()}",
        "sequence_parallel": f"sequence_parallel={lay.sp}",
        "megatron_tp": f"megatron_tp={lay.megatron_tp}",
        "megatron_pp": f"megatron_pp={lay.megatron_pp}",
        "megatron_cp": f"megatron_cp={lay.megatron_cp}",
        "megatron_ep": f"megatron_ep={lay.megatron_ep}",
        "megatron_etp": f"megatron_etp={lay.megatron_etp}",
        "megatron_vpp": f"megatron_vpp={lay.megatron_vpp}",
        "max_tokens_per_gpu": f"a token budget of {lay.train_tokens}",
        "micro_batch_per_gpu": f"micro-batches of {max(1, lay.train_tokens // lay.seq_len)}",
    }[knob]


def _suggest(a: Answers, shape: ModelShape, critic: Optional[ModelShape], n_gpus: int, seq: int, dynamic: bool,
             megatron: bool, use_ref: bool, n: int, given: set[str]) -> str:
    """What would fit instead: more GPUs, LoRA, or a smaller model (each checked with the same estimate)."""
    from wizard.planner.shapes import from_params

    gpn = a.gpus_per_node
    options = []

    def fits(sh: ModelShape, **kw: Any) -> Optional[Decision]:
        return fit(a, sh, None if critic is None else sh if critic is shape else critic, n_gpus, seq, dynamic,
                   megatron, use_ref, n, given, pow2_divisors(gpn),
                   megatron_grids(a, sh, n_gpus, free=tuple(MEGATRON_ANSWERS)) if megatron else [rc.MegatronGrid()],
                   any_offload=True, **kw)

    hardware = [(1, g) for g in (2, 4, 8) if g > gpn] + [(k, max(gpn, 8)) for k in (2, 4, 8, 16, 32, 64)]
    for nodes, g in hardware:
        if nodes * g <= n_gpus:
            continue
        d = fits(shape, nnodes=nodes, gpus_per_node=g)
        if d:
            options.append(f"needs ≥ {nodes}×{g} × {a.gpu_memory_gb:g} GB GPUs"
                           + (" with offload" if d.layout.offload_params else ""))
            break
    if not a.lora_rank and not (megatron and shape.vision) and fits(shape, lora_rank=32):
        options.append(f"or LoRA rank 32 on these {n_gpus} GPU(s)")
    lo, hi = 0.05, shape.params_b
    if fits(from_params(lo, "answer")):
        for _ in range(10):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fits(from_params(mid, "answer")) else (lo, mid)
        options.append(f"or a model of ≤ {lo:.1f}B parameters on these GPUs")
    if not any(o.startswith("needs") for o in options):
        options.insert(0, f"no number of {a.gpu_memory_gb:g} GB GPUs fits it: use GPUs with more memory")
    if len(options) == 1:
        options.append("or shorten max_prompt_length/max_response_length")
    return ", ".join(options)
