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
- VI688 (warning): Nsight GPU-metrics sampling (gpu-metrics-devices, or the older gpu-metrics-device) in
  worker_nsight_options with more than one GPU a node. The trainers copy worker_nsight_options whole into the worker
  group (trainer/ppo/v1/trainer_base.py:292-302, ray_trainer.py:857-866) and the worker group gives every worker actor
  the same Ray runtime_env {"nsight": options} (single_controller/ray/base.py:658-662): one `nsys profile` per worker
  process, several to a node. GPU metrics are sampled per GPU by one nsys session at a time (Nsight Systems user
  guide, "GPU Metrics"), so on a node with several workers the sessions collide and the workers fail to start under
  nsys, after the resource pools are booked (verl#2438). Metrics belong on a one-process launch (the controller's
  controller_nsight_options) or a run with one GPU a node.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

NSYS = "global_profiler.global_tool_config.nsys"
END = f"{NSYS}.worker_nsight_options.capture-range-end"
WORKER_OPTIONS = f"{NSYS}.worker_nsight_options"
# nsys CLI switches that turn GPU-metrics sampling on (--gpu-metrics-devices; older nsys: --gpu-metrics-device)
GPU_METRICS_SWITCHES = ("gpu-metrics-devices", "gpu-metrics-device")
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


def rule_nsys_gpu_metrics(c: Ctx, f: Facts) -> None:
    steps = c.v("global_profiler.steps")
    if c.v("global_profiler.tool") != "nsys" or not isinstance(steps, list) or not steps:
        return
    per_node = c.int("trainer.n_gpus_per_node")
    if per_node is None or per_node < 2 or c.v("trainer.device") not in (None, "cuda"):
        return
    for switch in GPU_METRICS_SWITCHES:
        key = f"{WORKER_OPTIONS}.{switch}"
        value = c.v(key)
        if value is None or str(value).strip().lower() == "none":
            continue
        c.add("VI688", "warning", (key, "trainer.n_gpus_per_node"),
              f"{key}={value}: verl starts every worker process under its own nsys with these options "
              f"(single_controller/ray/base.py:658-662), {per_node} a node, and GPU metrics are sampled by one nsys "
              "session per GPU at a time, so the workers fail to start under nsys (verl#2438)",
              f"drop {key} (put GPU metrics on a one-GPU-a-node run or in "
              f"{NSYS}.controller_nsight_options)", fix=Fix(delete=[key]))
