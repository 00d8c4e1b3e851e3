"""Ranking the layouts that fit by predicted step time (wizard.planner.steptime): the planner's choices where
memory allows several values and time decides.

- log-prob micro-batch (fixed micro-batches, Megatron plans): every divisor of the samples a GPU holds per step
  whose log-prob phase fits the memory estimate is a candidate; the step time falls with the number of
  micro-batches (steptime.FORWARD_MICRO_S each, for the actor's and the reference's pass), so the largest that
  fits is the fastest and the next smaller one the runner-up.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from wizard.planner import steptime


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


def token_budget(shape: Any, layout: Any, current: int, sp: int, logprob: int, rank_tokens: float) -> Ranked:
    """The fastest token budget per GPU (use_dynamic_bsz) that keeps the plan's memory verdict "fits".

    `layout`: the memory plan's layout; `current`: the planner's default budget per GPU; `sp`: the GPUs that share a
    micro-batch (verl multiplies the budget by them); `logprob`: the log-prob budget per GPU (kept ≥ the training
    budget); `rank_tokens`: tokens one data-parallel rank trains per step (mean lengths), for the seconds lost."""
    from wizard.planner.memory import estimate

    cands = sorted({current, *(max(current, int(current * k) // 1024 * 1024) for k in BUDGET_STEPS)})
    fits = [t for t in cands if t == current or estimate(shape, replace(
        layout, train_tokens=t * sp, logprob_tokens=max(t, logprob) * sp)).plan_verdict == "fits"]
    best = max(fits)
    smaller = [t for t in fits if t < best]
    runner = max(smaller) if smaller else None
    lost = (rank_tokens / (runner * sp) - rank_tokens / (best * sp)) * steptime.TRAIN_MICRO_S if runner else 0.0
    why = (f"the largest budget of {', '.join(str(t) for t in cands)} whose update fits the memory estimate "
           "(fewer micro-batches per update)")
    return Ranked(best, runner, max(lost, 0.0), why)
