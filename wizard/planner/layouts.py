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
