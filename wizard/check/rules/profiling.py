"""Profiler rules of verl 0.9.1 (paths under site-packages/verl).

- VI976 (warning): Nsight Systems in whole-step mode (global_profiler.tool=nsys, global_tool_config.nsys.discrete=False,
  verl's default) with worker_nsight_options.capture-range-end left null (its default). The trainers hand the
  options to every worker group when global_profiler.steps is set (trainer/ppo/v1/trainer_base.py:292-301,
  ray_trainer.py:857-866), and the worker group fills a null end with `repeat-shutdown:{6 * len(steps)}`
  (single_controller/ray/base.py:466-467). In whole-step mode a worker opens one cudaProfilerStart/Stop range per
  start_profile (utils/profiler/nvtx_profile.py:147-153), and the trainer calls start_profile once a profiled step,
  or once per run of consecutive steps with profile_continuous_steps (trainer_base.py:1400-1445,
  ray_trainer.py:1472-1476, 1752-1756). nsys then waits for ranges that never come: no report is written after the
  profiled steps, only when the worker processes exit, if ever (verl#4920). verl's own YAML says
  `n = len(profile_steps)` for whole-step profiling (trainer/config/ppo_trainer.yaml:407-411).
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

NSYS = "global_profiler.global_tool_config.nsys"
END = f"{NSYS}.worker_nsight_options.capture-range-end"
VERL_RANGES_PER_STEP = 6  # single_controller/ray/base.py:467: the end verl assumes for a null capture-range-end


def profiled_ranges(steps: list[int], continuous: bool) -> int:
    """cudaProfilerStart/Stop ranges one worker opens in whole-step mode: one per profiled step, or one per run of
    consecutive steps when profile_continuous_steps merges them (trainer_base.py:1400-1445)."""
    ordered = sorted(set(steps))
    if not continuous:
        return len(ordered)
    return sum(1 for i, s in enumerate(ordered) if i == 0 or ordered[i - 1] != s - 1)


def rule_nsys_range(c: Ctx, f: Facts) -> None:
    steps = c.v("global_profiler.steps")
    if c.v("global_profiler.tool") != "nsys" or not isinstance(steps, list) or not steps:
        return
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        return
    if c.v(f"{NSYS}.discrete") is not False or c.unknown(END) or c.v(END) is not None:
        return
    ranges = profiled_ranges(steps, c.v("global_profiler.profile_continuous_steps") is True)
    waits = VERL_RANGES_PER_STEP * len(steps)
    c.add("VI976", "warning", (END, "global_profiler.tool", "global_profiler.steps", f"{NSYS}.discrete"),
          f"nsys whole-step profiling of steps {steps} with capture-range-end null: verl sets it to "
          f"repeat-shutdown:{waits} (single_controller/ray/base.py:466-467), but each worker opens only {ranges} "
          "profiler range(s) in whole-step mode (utils/profiler/nvtx_profile.py:147-153), so nsys writes no report "
          "after the profiled steps, only when the workers exit",
          f"set {END}=repeat-shutdown:{ranges} (verl's YAML: n = len(profile_steps) for whole-step profiling), or "
          f"{NSYS}.discrete=True for one report per task",
          fix=Fix(set={END: f"repeat-shutdown:{ranges}"}))
