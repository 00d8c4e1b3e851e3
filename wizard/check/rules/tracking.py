"""Experiment trackers across restarts (paths under site-packages/verl 0.9.1):

- VI987 (info): trainer.resume_mode=auto (set in the launch) or resume_path with the wandb logger, and neither
  WANDB_RUN_ID nor WANDB_RESUME in the launch's environment. Every trainer opens its logger with verl's Tracking
  (trainer/ppo/v1/trainer_base.py:423, ray_trainer.py:1419, experimental/separation/ray_trainer.py:293,
  one_step_off_policy/ray_trainer.py:275, fully_async_policy/fully_async_trainer.py:128, trainer/sft_trainer.py:313,
  sft_trainer_ray.py:248), which calls `wandb.init(project=..., name=experiment_name, entity=..., config=...,
  settings=...)` with no id= and no resume= (utils/tracking.py:85; the deprecated `tracking` backend takes the same
  branch, :76). wandb then makes a new run on every launch unless WANDB_RUN_ID (with WANDB_RESUME=allow/must) says
  which one to continue. A relaunch that resumes global_step_N (trainer_base.py:850-877) so opens a second W&B run
  with the same name whose steps start at N, and the curves are split across runs (real case verl#2783). An info: a
  run that is never relaunched loses nothing. resume_mode=auto is verl's default (ppo_trainer.yaml:187,
  sft_trainer_engine.yaml:77): only a launch that names it (the user plans restarts) is told.
"""

from __future__ import annotations

from wizard.check.rules.context import Ctx, Facts, script_text

MODE, PATH, LOGGER = "trainer.resume_mode", "trainer.resume_from_path", "trainer.logger"
WANDB_BACKENDS = ("wandb", "tracking")  # utils/tracking.py:76: both reach wandb.init
RESUME_VARS = ("WANDB_RUN_ID", "WANDB_RESUME")


def _loggers(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def _names_resume(c: Ctx) -> bool:
    """WANDB_RUN_ID or WANDB_RESUME anywhere the launch can set it: --env, the script's exports (bash's run),
    the script's text (the static reader keeps no exports), a runtime env's env_vars in the config or a job submit."""
    if any(n in c.env for n in RESUME_VARS):
        return True
    if any(k.rsplit(".", 1)[-1] in RESUME_VARS for k in c.res.flat):
        return True
    ex = c.src.extraction
    if ex is None:
        return False
    if any(n in ex.env_names for n in RESUME_VARS) or any(n in w for w in ex.via for n in RESUME_VARS):
        return True
    text = script_text(c)
    return text is None or any(n in text for n in RESUME_VARS)  # unread: say nothing


def rule_wandb_resume(c: Ctx, f: Facts) -> None:
    if c.unknown(MODE, LOGGER) or getattr(c.src, "entry", "ppo") in ("generation", "eval"):
        return
    mode = c.v(MODE)
    if not (mode == "resume_path" or (mode == "auto" and (c.set_by_user(MODE) or c.set_by_user(PATH)))):
        return
    backends = [b for b in _loggers(c.v(LOGGER)) if b in WANDB_BACKENDS]
    if not backends or _names_resume(c):
        return
    name = c.v("trainer.experiment_name")
    c.add("VI987", "info", (MODE, LOGGER),
          f"{MODE}={mode} with the {backends[0]} logger: each relaunch resumes the checkpoint's step, but verl calls "
          f"wandb.init with the project and name={name!r} only, no id= or resume= (utils/tracking.py:85), and no "
          "WANDB_RUN_ID/WANDB_RESUME reaches it: every launch opens a new W&B run of that name whose x-axis starts at "
          "the resumed step, so the curves are split across runs (verl#2783)",
          "to continue one W&B run, export WANDB_RUN_ID=<an id unique in the project, the same on every relaunch> "
          "and WANDB_RESUME=allow before the launch (with `ray job submit`, in the runtime env's env_vars); "
          "wandb.init reads both")
