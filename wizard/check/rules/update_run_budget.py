"""VI439 (error): a run budget below 1, so the trainer never enters its training loop (paths under site-packages/verl
0.9.1).

Each trainer's `fit` guards its outer loop with the run budget (the loop headers are read from verl's source into
wizard/check/data/update_epochs.json["loops"] by scripts/update_epochs_table.py):

- PPO V1 (trainer.use_v1, true by default, trainer/config/ppo_trainer.yaml:232): `while current_epoch <
  trainer.total_epochs and global_steps <= total_training_steps` (trainer/ppo/v1/trainer_base.py:467), with
  total_training_steps = steps_per_epoch * total_epochs unless trainer.total_training_steps is set (:767-771) and
  global_steps starting at 1 (:454). total_epochs < 1 or total_training_steps < 1 leaves the loop unentered.
- legacy PPO (trainer.use_v1=False): `for epoch in range(current_epoch, trainer.total_epochs)`
  (trainer/ppo/ray_trainer.py:1465): total_epochs < 1 trains nothing.
- SFT (sft_trainer / sft_trainer_ray): `for epoch in range(start_epoch, trainer.total_epochs)`
  (trainer/sft_trainer.py:356): total_epochs < 1 trains nothing.

No config class or validate_config bounds these keys, so the job books its GPUs, builds every worker (and runs the
initial validation), then returns with exit 0 having taken no step. The same class as VI438 and verl PR #7924
(real cases R98-02..04): a zero count verl accepts. A non-integer is VI808's.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts
from wizard.check.rules.update_epochs import table

EPOCHS, STEPS = "trainer.total_epochs", "trainer.total_training_steps"


def _below_one(c: Ctx, key: str) -> int | None:
    value = c.v(key)
    if c.unknown(key) or isinstance(value, bool) or not isinstance(value, int) or value >= 1:
        return None
    return value


def _loop(c: Ctx) -> str | None:
    entry = getattr(c.src, "entry", "ppo")
    if entry == "sft":
        return "sft"
    if entry == "ppo":
        return "legacy" if c.v("trainer.use_v1") is False else "v1"
    return None


def rule_run_budget(c: Ctx, f: Facts) -> None:
    name = _loop(c)
    if name is None:
        return
    loop = table()["loops"][name]
    where = f"{loop['file']}:{loop['line']}"
    header = f"while {loop['test']}" if loop["kind"] == "while" else f"for epoch in {loop['test']}"
    epochs = _below_one(c, EPOCHS)
    steps = _below_one(c, STEPS) if name == "v1" else None
    for key, value in ((EPOCHS, epochs), (STEPS, steps)):
        if value is None:
            continue
        c.add("VI439", "error", (key,),
              f"{key}={value}: verl's training loop `{header}` ({where}) is never entered, so "
              "the job starts every worker and exits 0 without a single training step",
              f"set {key} ≥ 1 (or leave {STEPS} unset to train total_epochs epochs)",
              fix=Fix(delete=[key]) if key == STEPS else Fix(set={key: 1}))
