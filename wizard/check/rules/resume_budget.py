"""VI694: a relaunch that resumes a checkpoint already at (or past) the run's step budget (real case verl#6232).

What verl 0.9.1's PPO trainers do with it (site-packages/verl):

- Which checkpoint a relaunch resumes: resume_mode=auto takes the global_step_N that
  default_local_dir/latest_checkpointed_iteration.txt names (utils/checkpoint/checkpoint_manager.py:222-252, read by
  trainer/ppo/v1/trainer_base.py:856-862 and ray_trainer.py:1054-1066); resume_mode=resume_path takes
  resume_from_path. The step restored is N (trainer_base.py:876, ray_trainer.py:1083).
- The budget: trainer.total_training_steps when set, else total_epochs × the batches of an epoch
  (trainer_base.py:767-771, ray_trainer.py:435-449).
- The legacy trainer (trainer.use_v1=False) sets current_epoch = N // len(train_dataloader) (ray_trainer.py:1432),
  adds one to the step before its loop (:1451), enters the epoch loop while current_epoch < total_epochs (:1465) and
  only then tests is_last_step = global_steps >= total_training_steps (:1507): with N ≥ the budget and epochs left it
  trains step N+1, saves global_step_{N+1} (:1704-1712, save_freq > 0) and returns, one step past the budget on every
  relaunch (verl#6232, open in 0.9.1).
- The V1 trainer (trainer_base.py:454, 467) runs its loop only while global_steps ≤ total_training_steps: the
  relaunch validates (val_before_train) and exits 0 without a training step.

Either way the relaunch does not do what a relaunch is for. The rule reads the checkpoint folder only where it exists
on this machine (as VI926 does), and counts the data's rows only when total_training_steps is null.
"""

from __future__ import annotations

from wizard.check.rules.checkpoints import MODE, PATH, resumed_folder
from wizard.check.rules.context import Ctx, Facts, local_path
from wizard.check.shellargs import PLACEHOLDER

STEPS, EPOCHS = "trainer.total_training_steps", "trainer.total_epochs"


def _epoch_batches(c: Ctx) -> int | None:
    """Batches of one epoch (rows // data.train_batch_size, verl's drop_last), from local data files; else None."""
    from wizard.check.rules.files import _count_rows

    batch, value = c.int("data.train_batch_size"), c.v("data.train_files")
    if not batch or value is None or c.unknown("data.train_files"):
        return None
    total = 0
    for path in ([value] if isinstance(value, str) else value if isinstance(value, list) else []):
        local = local_path(c, path) if isinstance(path, str) and PLACEHOLDER not in path else None
        rows = _count_rows(local, 1 << 62) if local is not None and local.is_file() else None
        if rows is None:
            return None
        total += rows
    return total // batch or None


def rule_resume_budget(c: Ctx, f: Facts) -> None:
    if c.src.entry != "ppo" or c.src.recipe or c.unknown(MODE, PATH, "trainer.default_local_dir", STEPS, EPOCHS):
        return
    folder = resumed_folder(c)
    if folder is None or not folder.is_dir():
        return
    step_text = folder.name.rsplit("global_step_", 1)[-1]
    epochs, steps = c.int(EPOCHS), c.int(STEPS)
    if not step_text.isdigit() or not epochs:
        return
    done = int(step_text)
    per_epoch = _epoch_batches(c)
    budget = steps if steps else (per_epoch * epochs if per_epoch else None)
    if budget is None or done < budget:
        return
    how = f"{STEPS}={steps}" if steps else f"{EPOCHS}={epochs} × {per_epoch} batches an epoch = {budget} steps"
    head = (f"{MODE}={c.v(MODE)} resumes {folder} (step {done}) and the run's budget is {how}: ")
    legacy = c.v("trainer.use_v1") is False
    epochs_left = per_epoch is None or done // per_epoch < epochs
    if legacy and epochs_left:
        saves = " and saves global_step_{}".format(done + 1) if (c.int("trainer.save_freq") or 0) > 0 else ""
        what = (f"the legacy trainer adds one to the step before its loop, enters it while epochs remain and only then "
                f"tests the last step (ray_trainer.py:1451, 1465, 1507), so it trains step {done + 1}{saves} past the "
                "budget, one more on every relaunch (verl#6232)")
    else:
        trainer = "the legacy trainer's epoch loop is over" if legacy else "the V1 trainer loops only while the step " \
                  "is within total_training_steps (v1/trainer_base.py:467)"
        what = f"{trainer}: the relaunch only validates (val_before_train) and exits 0 without training a step"
    c.add("VI694", "warning", (MODE, STEPS, EPOCHS),
          head + what,
          f"to train on, raise {STEPS if steps else EPOCHS} so the budget passes step {done}; to start over, give a new "
          f"trainer.default_local_dir or {MODE}=disable")
