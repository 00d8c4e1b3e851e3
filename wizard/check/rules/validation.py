"""When the trainers validate, as verl 0.9.1's training loops decide it (paths under site-packages/verl):

- VI985 (error): trainer.val_only=True with trainer.val_before_train=False. Every PPO-family trainer reads val_only
  only inside its `if val_before_train:` block, after the first validation: trainer/ppo/v1/trainer_base.py:439-448
  (main_ppo's default V1 trainer), trainer/ppo/ray_trainer.py:1438-1446 (trainer.use_v1=False),
  experimental/separation/ray_trainer.py:310-316 and experimental/one_step_off_policy/ray_trainer.py:290-296 (the
  one-step-off entry point). With val_before_train=False fit() goes on to the training loop
  (trainer_base.py:450-467): nothing is validated and a full run starts, checkpoints and logger runs included
  (real case verl#5483). The fully async entry point never reads val_only (experimental/fully_async_policy/: no read;
  fully_async_main.py:112-113 validates before training under val_before_train, then trains): there val_only=True
  trains whatever val_before_train says. No other code of verl reads the key.
- VI986 (error): verl's SFT loop (trainer/sft_trainer.py:412-420; trainer/sft_trainer_ray.py:352-360) computes
  `global_step % test_freq` and `global_step % save_freq` on every step before it tests either for > 0, so
  trainer.test_freq=0 or trainer.save_freq=0 stops the run at step 1 with ZeroDivisionError; and its validation test
  `is_last_step and self.val_dataloader is not None or (self.test_freq > 0 and is_valid_step)` binds as
  `(... and ...) or (...)`, so with data.val_files null (no val loader, sft_trainer.py:211-222, 255-270) a test_freq
  > 0 (or after_each_epoch: the steps of an epoch, :195-196) enters `for val_data in self.val_dataloader` at step
  test_freq: TypeError: 'NoneType' object is not iterable, after test_freq paid steps and before that step's
  checkpoint (real case verl#7545; PR#7548, closed, would have guarded both). The PPO trainers test `test_freq > 0`
  first (trainer_base.py:491-492, ray_trainer.py:1727-1728), so this is the SFT loop's alone.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

VAL_ONLY, BEFORE = "trainer.val_only", "trainer.val_before_train"
TEST_FREQ, SAVE_FREQ, VAL_FILES = "trainer.test_freq", "trainer.save_freq", "data.val_files"
TOTAL = "trainer.total_training_steps"
PPO_READS = {"ppo": "trainer/ppo/v1/trainer_base.py:439-448; ray_trainer.py:1438-1446 with trainer.use_v1=False",
             "one_step_off": "experimental/one_step_off_policy/ray_trainer.py:290-296"}
SFT_LOOP = "trainer/sft_trainer.py:412-420, sft_trainer_ray.py:352-360"


def rule_val_only(c: Ctx, f: Facts) -> None:
    entry = getattr(c.src, "entry", "ppo")
    if c.src.recipe is not None or c.unknown(VAL_ONLY, BEFORE) or c.v(VAL_ONLY) is not True:
        return  # a recipe's own trainer may read it another way
    if entry == "fully_async":
        c.add("VI985", "error", (VAL_ONLY,),
              f"{VAL_ONLY}=True on the fully async entry point: none of its code reads val_only (its trainer's fit, "
              "experimental/fully_async_policy/fully_async_trainer.py:498, has no such test; "
              f"fully_async_main.py:112-113 validates under {BEFORE}, then trains): the job runs the full training, "
              "checkpoints included",
              "to only validate, launch verl.trainer.main_ppo with the same model, data.val_files, "
              f"{VAL_ONLY}=True and {BEFORE}=True")
        return
    if entry not in PPO_READS or c.v(BEFORE) is not False:
        return
    c.add("VI985", "error", (BEFORE, VAL_ONLY),
          f"{VAL_ONLY}=True with {BEFORE}=False: verl reads val_only only inside the `if val_before_train:` block, "
          f"after the first validation ({PPO_READS[entry]}), so nothing is validated and fit() goes on to the "
          f"training loop (trainer_base.py:450-467): a full run of trainer.total_epochs starts on the model you "
          "meant to score, with its checkpoints and logger runs",
          f"set {BEFORE}=True: verl validates once and returns", fix=Fix(set={BEFORE: True}))


def _freq(value: object) -> int | None:
    """A frequency as verl's SFT loop uses it: an int (None for a text, a bool, None)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def rule_sft_loop(c: Ctx, f: Facts) -> None:
    if c.unknown(TEST_FREQ, SAVE_FREQ):
        return
    test, save = c.v(TEST_FREQ), c.v(SAVE_FREQ)
    for key, value, line in ((TEST_FREQ, test, 413), (SAVE_FREQ, save, 414)):
        if _freq(value) == 0:
            c.add("VI986", "error", (key,),
                  f"{key}=0 in verl's SFT trainer: its loop computes `global_step % {key.split('.')[1]}` on every "
                  f"step before testing for > 0 (trainer/sft_trainer.py:{line}, sft_trainer_ray.py:{line - 60}): "
                  "ZeroDivisionError at step 1",
                  f"set {key}=-1 to turn it off" + (" (the last step is saved whatever save_freq says, "
                                                    "sft_trainer.py:441)" if key == SAVE_FREQ else ""),
                  fix=Fix(set={key: -1}))
    if c.unknown(VAL_FILES) or c.v(VAL_FILES):
        return
    every = _freq(test)
    if test == "after_each_epoch":
        when = "the end of the first epoch (after_each_epoch: the steps of an epoch, sft_trainer.py:195-196)"
    elif every is not None and every > 0:
        total = _freq(c.v(TOTAL))
        if total is not None and 0 < total < every:
            return  # the run ends before the first periodic validation step
        when = f"step {every}"
    else:
        return
    given = "null" if c.v(VAL_FILES) is None else repr(c.v(VAL_FILES))
    c.add("VI986", "error", (TEST_FREQ, VAL_FILES),
          f"{TEST_FREQ}={test} with {VAL_FILES}={given}: verl's SFT trainer builds no validation loader "
          f"(sft_trainer.py:211-222, 255-270) but its loop enters validation on every test_freq step whatever the "
          f"loader is ({SFT_LOOP}: `is_last_step and val_dataloader is not None or (test_freq > 0 and "
          f"is_valid_step)`): TypeError 'NoneType' object is not iterable at {when}, after the steps before it are "
          "paid and before that step's checkpoint (verl#7545)",
          f"set {TEST_FREQ}=-1 (there is nothing to validate), or give {VAL_FILES} a held-out file",
          fix=Fix(set={TEST_FREQ: -1}))
