"""VI680 (warning): an SFT run that checkpoints at the end of an epoch and resumes from it (paths under
site-packages/verl, 0.9.1).

verl's SFT trainers (verl.trainer.sft_trainer under torchrun, sft_trainer_ray) resume by default:
trainer/config/sft_trainer_engine.yaml:77 `resume_mode: auto` finds the newest global_step_N under
trainer.default_local_dir (utils/checkpoint/checkpoint_handler.py:196-234). Loading it always restores the
train StatefulDataLoader's state (checkpoint_handler.py:164-166, 170-178: `train_dataloader.load_state_dict`), the
state saved with the checkpoint (:117-123: `train_dataloader.state_dict()`). The trainer then starts at
`start_epoch = global_step // steps_per_epoch` (trainer/sft_trainer.py:341) and calls `set_epoch` (:356-357;
sft_trainer_ray.py:276, 291-292 the same).
A checkpoint written on the last step of an epoch holds an exhausted loader: the trainer has already moved on to the
next epoch, and the restored iterator yields nothing for it, so that whole epoch is skipped without a word and,
when it was the last one, the relaunch exits 0 having trained nothing (real case R46-01, verl#7401; PR#5725 fixed
the same thing for the PPO trainer only, verl PR#7402 / PR#7974 are open for SFT).

An epoch-end checkpoint is written whenever trainer.save_freq is a multiple of steps_per_epoch:
`save_freq: after_each_epoch` is exactly steps_per_epoch (sft_trainer.py:190-192), and a number k hits an epoch end
at every multiple of lcm(k, steps_per_epoch) (is_save_step, sft_trainer.py:414, 441). steps_per_epoch is
len(train_dataloader) (:187): DistributedSampler(drop_last=True) over dp ranks and batches of
data.train_batch_size // dp with drop_last=True (:236-252), i.e. (rows // dp) // (train_batch_size // dp), rows
capped by data.train_max_samples (:204-210). The rule fires where such a checkpoint falls before the run's last step
(the last step's own checkpoint is at an epoch end in every epoch-based run, and resuming after it is done on purpose
by raising total_epochs, which the user sees); a relaunch after any failure past it resumes from it. It needs no data
for after_each_epoch; a numeric save_freq needs the local train files' rows (parquet footer, JSONL lines) and the
world size (torchrun's, or trainer.* for sft_trainer_ray, whose loaders use dp = 1: sft_trainer_ray.py:182).
resume_mode=disable is silent. The test proves the skip with verl's own CheckpointHandler._load_dataloader_state and
torchdata's StatefulDataLoader, built as sft_trainer.py:236-252 builds them.
"""

from __future__ import annotations

from math import gcd
from typing import Any

from wizard.check.rules.context import Ctx, Facts, local_path
from wizard.check.rules.sft_parallel import RAY_ENTRY, _module, sft_sp, sft_world
from wizard.check.shellargs import PLACEHOLDER

MODE, SAVE, EPOCHS, STEPS = "trainer.resume_mode", "trainer.save_freq", "trainer.total_epochs", \
    "trainer.total_training_steps"
TRAIN, TBS, MAX_SAMPLES = "data.train_files", "data.train_batch_size", "data.train_max_samples"
EPOCH_WORD = "after_each_epoch"  # sft_trainer.py:191-192


def _train_rows(c: Ctx, value: Any) -> int | None:
    """Rows in the local train file(s), or None when any cannot be counted here."""
    from wizard.check.rules.files import _count_rows

    paths = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else []
    total = 0
    for path in paths:
        local = local_path(c, path) if isinstance(path, str) and PLACEHOLDER not in path else None
        rows = _count_rows(local, 1 << 62) if local is not None and local.is_file() else None
        if rows is None:
            return None
        total += rows
    return total if paths else None


def steps_per_epoch(rows: int, batch: int, dp: int) -> int:
    """len(train_dataloader) of sft_trainer.py:236-252: every rank gets rows // dp rows (DistributedSampler,
    drop_last=True) in batches of batch // dp (drop_last=True)."""
    per_dp = batch // dp
    return (rows // dp) // per_dp if per_dp > 0 else 0


def _dp(c: Ctx) -> int | None:
    if _module(c) == RAY_ENTRY:
        return 1
    world, sp = sft_world(c), sft_sp(c)
    if world is None:
        return None
    sp = sp if sp and sp > 0 else 1
    return world // sp if world % sp == 0 else None


def _safe_freq(freq: int, per_epoch: int, total: int) -> int | None:
    """The save_freq nearest the user's whose checkpoints never land on an epoch end before the last step."""
    for delta in range(1, per_epoch + 1):
        for k in (freq - delta, freq + delta):
            if 0 < k < total and k * per_epoch // gcd(k, per_epoch) >= total:
                return k
    return None


def rule_sft_epoch_resume(c: Ctx, f: Facts) -> None:
    if c.unknown(MODE, SAVE, EPOCHS, STEPS) or c.v(MODE) not in ("auto", "resume_path"):
        return
    save, epochs, steps = c.v(SAVE), c.int(EPOCHS), c.int(STEPS)
    rows = _train_rows(c, c.v(TRAIN)) if not c.unknown(TRAIN) else None
    cap = c.int(MAX_SAMPLES) if not c.unknown(MAX_SAMPLES) else None
    if rows is not None and cap is not None and 0 < cap < rows:
        rows = cap
    batch, dp = c.int(TBS), _dp(c)
    per_epoch = steps_per_epoch(rows, batch, dp) if rows is not None and batch and dp else None
    total = steps if steps is not None else (per_epoch * epochs if per_epoch and epochs else None)
    if save == EPOCH_WORD:
        if per_epoch and total is not None:
            if per_epoch >= total:
                return  # one epoch (or less): its only epoch-end checkpoint is the last step's
        elif steps is not None or not epochs or epochs < 2:
            return
        first, freq_text = per_epoch, f"{SAVE}={EPOCH_WORD} (= the steps of an epoch, sft_trainer.py:191-192)"
    else:
        freq = c.int(SAVE)
        if not freq or freq <= 0 or not per_epoch or total is None:
            return
        first = freq * per_epoch // gcd(freq, per_epoch)
        if first >= total:
            return
        freq_text = f"{SAVE}={freq} with {per_epoch} steps an epoch ({rows} rows, {TBS}={batch}, dp={dp})"
    at = f"global_step_{first}" if first else "every epoch's end"
    safe = _safe_freq(c.int(SAVE) or per_epoch, per_epoch, total) if per_epoch and total else None
    c.add("VI680", "warning", (SAVE, MODE),
          f"{freq_text} writes a checkpoint at an epoch's end ({at}) and {MODE}={c.v(MODE)} resumes from it: verl "
          "restores that exhausted train dataloader (utils/checkpoint/checkpoint_handler.py:164-178) while the "
          "trainer starts the next epoch (trainer/sft_trainer.py:341, 356-357), so the relaunch skips a whole epoch "
          "without a word, and exits 0 having trained nothing when it was the last (verl#7401)",
          (f"set {SAVE}={safe} (no checkpoint on an epoch's end before the last step)" if safe else
           f"set {SAVE} to a step count that is not a multiple of the steps of an epoch")
          + "; to resume from an epoch-end checkpoint already written, delete its data_<rank>.pt first (verl then "
          "starts that epoch's loader afresh, checkpoint_handler.py:187-194)")
