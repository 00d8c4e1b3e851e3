"""VI418: data.train_max_samples drawn at random without a seed, as verl 0.9.1 draws it (paths under
site-packages/verl).

Every PPO-family entry point builds its training set with `create_rl_dataset(data.train_files, config.data, ...,
max_samples=data.train_max_samples)` (trainer/ppo/v1/trainer_base.py:708-716; ray_trainer.py:379-384 with
trainer.use_v1=False; main_ppo_v0.py:205; experimental/one_step_off_policy/main_ppo.py:82;
experimental/fully_async_policy/fully_async_rollouter.py:391). RLHFDataset reads `shuffle` and `seed` from that
config (utils/dataset/rl_dataset.py:156-157) and, when max_samples is below the row count, keeps
`np.random.default_rng(*((seed,) if seed is not None else ())).choice(total, max_samples)` (:185-192): with
data.shuffle=True (legacy_data.yaml's default) and data.seed null (its default) the generator is seeded from OS
entropy, a different subset at every launch. The subset is not saved in a checkpoint: the trainer rebuilds the dataset
(trainer_base.py:228) before it loads the checkpoint (:392) and restores the saved dataloader position, data.pt, into
the new loader (:893-896; fully_async_rollouter.py:718-721 the same), so a resumed run continues with the sampler's
saved indices over other rows: prompts already trained on come back and others are never seen, with no message (real
case verl#7816, fix PR verl#7819 not in 0.9.1). The validation side of the same draw is VI936's.

- warning: the run saves checkpoints (trainer.save_freq > 0) and resumes (trainer.resume_mode not disable).
- info: otherwise: the subset still changes between launches, so two runs of one script train on different prompts.
Nothing when the local training files hold no more rows than the cap (verl subsamples only below it, :185), when
data.shuffle is False (the first rows, the same at every launch) or data.seed is set. `--fix` sets data.seed=42.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts
from wizard.check.rules.val_subset import ENTRIES, _file_rows

MAX, FILES, SHUFFLE, SEED = "data.train_max_samples", "data.train_files", "data.shuffle", "data.seed"
SAVE, RESUME = "trainer.save_freq", "trainer.resume_mode"
SEED_FIX = 42  # any int: it seeds both the subsample (rl_dataset.py:187) and the sampler (trainer/ppo/utils.py:160-162)
DRAW = "utils/dataset/rl_dataset.py:156-157, 185-192"


def _resumes(c: Ctx) -> bool:
    save = c.int(SAVE)
    return bool(save and save > 0) and c.v(RESUME) != "disable" and not c.unknown(SAVE, RESUME)


def rule_train_subset(c: Ctx, f: Facts) -> None:
    keep = c.int(MAX)
    if getattr(c.src, "entry", "ppo") not in ENTRIES or keep is None or keep <= 0 or c.unknown(MAX, SHUFFLE, SEED):
        return
    if c.v(SHUFFLE) is not True or c.v(SEED) is not None:
        return
    value = c.v(FILES)
    files = [value] if isinstance(value, str) else list(value) if isinstance(value, list) else []
    rows = _file_rows(c, files, keep + 1) if files and not c.unknown(FILES) else None
    if rows is not None and sum(rows) <= keep:
        return  # no subsample: verl keeps every row when max_samples is not below the count (rl_dataset.py:185)
    hint = (f"set {SEED}=<int> (e.g. {SEED}=42): the subset (and the shuffle order) is then the same at every "
            f"launch and on resume; or cut the training file to the rows you want and drop {MAX}")
    if _resumes(c):
        c.add("VI418", "warning", (MAX, SEED, RESUME),
              f"{MAX}={keep} with {SHUFFLE}=True and {SEED}=null: verl 0.9.1 draws the training subset with an "
              f"unseeded np.random.default_rng() ({DRAW}) at every launch and rebuilds it before loading a checkpoint "
              "(trainer_base.py:228, :392), so a resumed run applies the saved dataloader position (data.pt) to "
              "other rows: trained prompts repeat and others are never seen, silently (verl#7816)", hint,
              fix=Fix(set={SEED: SEED_FIX}))
    else:
        c.add("VI418", "info", (MAX, SEED),
              f"{MAX}={keep} with {SHUFFLE}=True and {SEED}=null: verl 0.9.1 draws a different {keep}-row training "
              f"subset at every launch (unseeded np.random.default_rng(), {DRAW}), so two runs of this script "
              "train on different prompts (and a resume would continue on other rows, verl#7816)", hint,
              fix=Fix(set={SEED: SEED_FIX}))
