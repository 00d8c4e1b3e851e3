"""VI936: which rows data.val_max_samples keeps, as verl 0.9.1 draws them (paths under site-packages/verl).

Every PPO-family entry point builds its validation set with `create_rl_dataset(data.val_files, config.data, ...,
max_samples=data.val_max_samples)` from the same `config.data` as the training set (trainer/ppo/v1/trainer_base.py:
718-725; ray_trainer.py:387-392 with trainer.use_v1=False; main_ppo_v0.py:207-213; experimental/one_step_off_policy/
main_ppo.py:84-85; experimental/fully_async_policy/fully_async_rollouter.py:393-398). RLHFDataset concatenates the
files in the order given (utils/dataset/rl_dataset.py:169-179) and then subsamples by the *training* flag
`self.shuffle = config.get("shuffle", False)` (:156): with data.shuffle=False it keeps `np.arange(max_samples)`, the
first max_samples rows (:185-192); with data.shuffle=True it draws `np.random.default_rng(data.seed)` (:186-189).
data.validation_shuffle is read only by the validation dataloader's order (trainer_base.py:756) and never reaches the
subsample (real case verl#7824). So:

- warning: data.shuffle=False and the head slice ends before a later file of data.val_files begins (row counts read
  here from the parquet footer / JSONL lines): that file's rows, usually a whole benchmark or data_source, are never
  validated and its val-core metrics never appear.
- info: data.shuffle=False otherwise (one file, or counts unknown): the subset is the file's first rows, not a draw.
- info: data.shuffle=True with data.seed null (legacy_data.yaml:71): an unseeded generator draws a different subset at
  every launch, so validation scores of a relaunched or resumed run are on other prompts.
"""

from __future__ import annotations

from wizard.check.rules.context import Ctx, Facts, local_path
from wizard.check.shellargs import PLACEHOLDER

MAX, FILES, SHUFFLE, SEED = "data.val_max_samples", "data.val_files", "data.shuffle", "data.seed"
VAL_SHUFFLE = "data.validation_shuffle"
ENTRIES = ("ppo", "one_step_off", "fully_async")  # each builds its val set with create_rl_dataset(max_samples=...)
SUBSAMPLE = "utils/dataset/rl_dataset.py:156, 185-192"


def _file_rows(c: Ctx, files: list[str], keep: int) -> list[int] | None:
    """Rows of each val file counted here (a JSONL's count may stop past `keep`: enough to place the head slice),
    or None when one cannot be counted."""
    from wizard._io import count_file_rows

    counts = []
    for path in files:
        local = local_path(c, path) if isinstance(path, str) and PLACEHOLDER not in path else None
        if local is None or not local.is_file() or local.suffix not in (".parquet", ".jsonl"):
            return None
        rows = count_file_rows(str(local), keep)
        if rows is None:
            return None
        counts.append(rows)
    return counts


def _dropped(files: list[str], rows: list[int], keep: int) -> list[str]:
    """The files that start at or after row `keep` of the concatenation: the head slice holds none of them."""
    out, start = [], 0
    for path, n in zip(files, rows, strict=True):
        if start >= keep and n > 0:
            out.append(f"{path} ({n} rows from row {start})")
        start += n
    return out


def rule_val_subset(c: Ctx, f: Facts) -> None:
    keep = c.int(MAX)
    if getattr(c.src, "entry", "ppo") not in ENTRIES or keep is None or keep <= 0 or c.unknown(MAX, SHUFFLE, FILES):
        return
    value = c.v(FILES)
    files = [value] if isinstance(value, str) else list(value) if isinstance(value, list) else []
    if c.v(SHUFFLE) is False:
        rows = _file_rows(c, files, keep) if files else None
        if rows is not None and sum(rows) <= keep:
            return  # verl subsamples only when max_samples < the rows (rl_dataset.py:185): all are validated
        dropped = _dropped(files, rows, keep) if rows is not None and len(files) > 1 else []
        if dropped:
            c.add("VI936", "warning", (MAX, SHUFFLE, FILES),
                  f"{MAX}={keep} with {SHUFFLE}=False keeps the first {keep} rows of the concatenated {FILES} "
                  f"({SUBSAMPLE}: the subsample reads the training flag data.shuffle, and {VAL_SHUFFLE} never "
                  f"reaches it, verl#7824), so {', '.join(dropped)} is never validated and its val-core metrics "
                  "never appear",
                  f"cut each val file to the rows you want before the run (and drop {MAX}), or set {SHUFFLE}=True "
                  f"with {SEED}=<int> for a fixed random draw (data.shuffle also shuffles the training order)")
        else:
            c.add("VI936", "info", (MAX, SHUFFLE),
                  f"{MAX}={keep} with {SHUFFLE}=False validates the first {keep} rows of {FILES}, not a random "
                  f"draw ({SUBSAMPLE}; {VAL_SHUFFLE} only orders the validation loader, verl#7824)",
                  f"if the file is sorted (by source, difficulty, length), cut a sample of it yourself, or set "
                  f"{SHUFFLE}=True with {SEED}=<int>")
        return
    if c.v(SHUFFLE) is True and c.v(SEED) is None and not c.unknown(SEED):
        c.add("VI936", "info", (MAX, SEED),
              f"{MAX}={keep} with {SHUFFLE}=True and {SEED}=null: verl draws the validation subset with an unseeded "
              f"np.random.default_rng() ({SUBSAMPLE}), a different {keep} prompts at every launch, so the validation "
              "scores of a relaunched or resumed run are not on the same prompts",
              f"set {SEED}=<int> (it also fixes the training order's generator)")
