"""Ranking the layouts that fit by predicted step time (wizard.planner.steptime): the planner's choices where
memory allows several values and time decides.

- log-prob micro-batch (fixed micro-batches, Megatron plans): every divisor of the samples a GPU holds per step
  whose log-prob phase fits the memory estimate is a candidate; the step time falls with the number of
  micro-batches (steptime.FORWARD_MICRO_S each, for the actor's and the reference's pass), so the largest that
  fits is the fastest and the next smaller one the runner-up.
- token budget (use_dynamic_bsz): the largest of a few multiples of the default whose update fits.
- the layout itself (rank_layouts, from planner/stages/fit.py): the memory planner's decision against the
  least-offload layout that fits at every other rollout TP, offload forced on, and dynamic batching flipped; each
  is timed with layout_step (its own KV cache, budgets and offload) and the fastest wins when it is SWITCH_SHARE
  faster than the memory planner's.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, replace
from typing import Any, Optional

from wizard.planner import steptime
from wizard.planner.steptime_lora import lora_fields
from wizard.planner.state import round_up


@dataclass(frozen=True)
class Ranked:
    chosen: int
    runner_up: Optional[int]
    seconds_lost: float  # how much slower per step the runner-up is predicted to be
    why: str


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def logprob_micro(shape: Any, layout: Any, per_rank: int, current: int, seq: int, passes: int) -> Ranked:
    """The fastest log-prob micro-batch (sequences per GPU) that keeps the plan's memory verdict "fits".

    `layout`: the memory plan's layout (its logprob_tokens replaced per candidate); `per_rank`: the samples one GPU
    runs per step (every candidate divides it); `current`: the planner's default; `passes`: forward passes that use
    it (the actor's old log-probs, plus the reference's)."""
    from wizard.planner.memory import estimate

    fits = [d for d in _divisors(per_rank) if d <= current
            or estimate(shape, replace(layout, logprob_tokens=d * seq)).plan_verdict == "fits"]
    best = max(fits) if fits else current
    smaller = [d for d in fits if d < best]
    runner = max(smaller) if smaller else None
    lost = (per_rank / runner - per_rank / best) * steptime.FORWARD_MICRO_S * passes if runner else 0.0
    why = (f"the largest log-prob micro-batch whose log-prob phase fits the memory estimate: {per_rank // best} "
           f"micro-batches per data-parallel rank per pass")
    return Ranked(best, runner, lost, why)


# token budgets tried above the planner's default, as multiples of it (rounded down to 1024 tokens)
BUDGET_STEPS = (1.5, 2.0, 3.0, 4.0)


def token_budget(shape: Any, layout: Any, current: int, sp: int, logprob: int, rank_tokens: float,
                 minis: int = 1, pipeline: int = 1) -> Ranked:
    """The fastest token budget per GPU (use_dynamic_bsz) that keeps the plan's memory verdict "fits".

    `layout`: the memory plan's layout; `current`: the planner's default budget per GPU; `sp`: the GPUs that share a
    micro-batch (verl multiplies the budget by them); `logprob`: the log-prob budget per GPU (kept ≥ the training
    budget); `rank_tokens`: tokens one data-parallel rank trains per step (mean lengths); `minis`: its mini-batches,
    each split on its own into ceil(its tokens / budget) micro-batches (steptime.predict): besides multiples of the
    default, the budgets that just hold a mini-batch in one fewer micro-batch are tried. `pipeline`: Megatron's PP,
    whose stages each pay a micro-batch's fixed cost for their share of the layers (steptime.predict)."""
    from wizard.planner.memory import estimate

    minis, pipeline = max(minis, 1), max(pipeline, 1)
    per_mini = rank_tokens / minis / sp

    def micros(t: int) -> int:
        return minis * math.ceil(per_mini / t - 1e-9)

    top = max(current, int(current * BUDGET_STEPS[-1]) // 1024 * 1024)
    splits = {round_up(math.ceil(per_mini / k), 1024) for k in range(1, micros(current) // minis + 1)}
    cands = sorted({current, *(max(current, int(current * k) // 1024 * 1024) for k in BUDGET_STEPS),
                    *(t for t in splits if current < t <= top)})
    fits = [t for t in cands if t == current or estimate(shape, replace(
        layout, train_tokens=t * sp, logprob_tokens=max(t, logprob) * sp)).plan_verdict == "fits"]
    best = max(fits)  # of those with the fewest micro-batches, the largest: headroom for longer-than-mean batches
    slower = [t for t in fits if micros(t) > micros(best)]
    runner = max(slower) if slower else None

    vpp = getattr(layout, "megatron_vpp", None) or 1

    def fixed(t: int) -> float:  # the micro-batches' fixed cost, per pipeline stage over its schedule's slots
        return micros(t) * steptime.TRAIN_MICRO_S / pipeline * steptime.pipeline_slots(micros(t) / minis, pipeline, vpp)

    lost = fixed(runner) - fixed(best) if runner else 0.0
    tried = ", ".join(str(t) for t in cands) if len(cands) <= 8 else f"{len(cands)} tried, {cands[0]} to {cands[-1]},"
    why = (f"the largest budget of {tried} whose update fits the memory estimate "
           f"(fewer micro-batches per update: {micros(best)} per data-parallel rank, {minis} mini-batches)")
    return Ranked(best, runner, max(lost, 0.0), why)


def layout_step(shape: Any, decision: Any, *, prompts: int, n: int, max_prompt: int, max_response: int,
                response_mean: Optional[float], gpu_type: Optional[str], mini_batches: int, has_critic: bool,
                dynamic: bool, filter_groups: bool = False) -> "steptime.StepTime":
    """The predicted step of a memory decision (its layout, KV cache and budgets) for the plan's workload."""
    lay, est = decision.layout, decision.estimate
    seq = lay.seq_len
    mp = lay.megatron_tp * lay.megatron_cp if lay.megatron else lay.sp
    w = steptime.Workload(
        **steptime.shape_fields(shape, lay.rollout_tp), n_gpus=lay.n_gpus, prompts=prompts, n=n,
        train_prompts=prompts, filter_groups=filter_groups, max_prompt=max_prompt, max_response=max_response,
        response_mean=response_mean, gpu_type=gpu_type, gpu_memory_gb=lay.gpu_gb, rollout_tp=lay.rollout_tp,
        rollout_dp=lay.rollout_dp, gmu=lay.gmu, kv_tokens=est.kv_seqs * seq if est.kv_seqs else None,
        gpus_per_node=lay.gpus_per_node, backend="megatron" if lay.megatron else "fsdp", moe=bool(shape.experts),
        dynamic_bsz=dynamic, train_tokens=lay.train_tokens if dynamic else 0,
        logprob_tokens=lay.logprob_tokens if dynamic else 0,
        train_micro=max(lay.train_tokens // seq, 1), logprob_micro=max(lay.logprob_tokens // seq, 1),
        mini_batches=mini_batches, recompute=lay.recompute if lay.megatron else lay.checkpointing,
        model_parallel=mp, pipeline=lay.megatron_pp if lay.megatron else 1,
        virtual_pipeline=(lay.megatron_vpp or 1) if lay.megatron else 1,
        context_parallel=lay.megatron_cp if lay.megatron else 1, expert_parallel=lay.megatron_ep if lay.megatron else 1,
        expert_tp=(lay.megatron_etp or lay.megatron_tp) if lay.megatron else 1, moe_layers=steptime.moe_layers(shape),
        top_k=shape.active_experts, routed_params=shape.routed_expert_params, weight_tensors=shape.checkpoint_tensors(),
        offload_params=lay.offload_params, offload_optimizer=lay.offload_optimizer, has_ref=lay.use_ref,
        has_critic=has_critic, **lora_fields(shape, lay.lora_rank, lay.megatron))
    return steptime.predict(w)


# a layout must be predicted this much faster than the memory planner's choice (least offload, least parallel)
# to replace it: closer than that, the prediction's error decides, and the simpler layout stays
SWITCH_SHARE = 0.03


@dataclass(frozen=True)
class LayoutRanking:
    chosen: str
    runner_up: Optional[str]
    seconds_lost: float  # how much slower per step the runner-up is predicted to be
    why: str  # why the runner-up lost: its phases that are slower
    table: tuple[tuple[str, float], ...]  # every candidate that fits, fastest first: (label, predicted step s)


def describe(decision: Any, dynamic: bool) -> str:
    lay = decision.layout
    return (f"rollout TP {lay.rollout_tp}" + (f" × DP {lay.rollout_dp}" if lay.rollout_dp > 1 else "")
            + (f", Megatron TP {lay.megatron_tp} PP {lay.megatron_pp}" + (f" EP {lay.megatron_ep}" if lay.megatron_ep > 1 else "")
               if lay.megatron else "")
            + (", full recompute" if lay.megatron and lay.recompute else "")
            + (", offload on" if lay.offload_params else ", offload off")
            + (", token budgets" if dynamic else ", fixed micro-batches"))


def _why(loser: "steptime.StepTime", winner: "steptime.StepTime") -> str:
    diffs = sorted(((loser.phases.get(k, 0.0) - winner.phases.get(k, 0.0), k) for k in loser.phases), reverse=True)
    slower = [f"{k} +{d:.0f} s" for d, k in diffs if d >= 0.5][:2]
    return ", ".join(slower) if slower else "about the same in every phase"


def rank_layouts(current: Any, dynamic: bool, alternatives: list[tuple[Any, bool]], step) -> tuple[Any, bool, LayoutRanking]:
    """The fastest of the memory planner's decision and its alternatives that fit (other rollout TPs, offload
    on/off, dynamic batching on/off), by `step(decision, dynamic)` (a StepTime); the planner's own decision stays
    unless another is SWITCH_SHARE faster."""
    seen: dict[str, tuple[Any, bool, Any]] = {describe(current, dynamic): (current, dynamic, step(current, dynamic))}
    for d, dyn in alternatives:
        label = describe(d, dyn)
        if label not in seen:
            seen[label] = (d, dyn, step(d, dyn))
    order = sorted(seen, key=lambda k: seen[k][2].step_s)
    base = seen[describe(current, dynamic)][2].step_s
    best = order[0] if seen[order[0]][2].step_s < (1 - SWITCH_SHARE) * base else describe(current, dynamic)
    rest = [k for k in order if k != best]
    runner = rest[0] if rest else None
    win = seen[best][2]
    lost = seen[runner][2].step_s - win.step_s if runner else 0.0
    why = _why(seen[runner][2], win) if runner else ""
    ranking = LayoutRanking(best, runner, lost, why, tuple((k, round(seen[k][2].step_s, 1)) for k in order))
    return seen[best][0], seen[best][1], ranking
