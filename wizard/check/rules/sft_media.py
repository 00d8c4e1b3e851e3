"""VI640 for verl's SFT trainer: a data row whose media cell (data.image_key, default "images"; data.video_key,
default "videos") holds one item instead of a list (the PPO side lives in wizard/check/rules/datacontent.py).

verl 0.9.1's MultiTurnSFTDataset reads the file with pandas (utils/dataset/multiturn_sft_dataset.py:147) and, in
_build_messages, takes `example[image_key]` as the row's list of images whenever the column is present
(multiturn_sft_dataset.py:255-257): the n-th <image> placeholder takes images[n] (:275-277; KeyError 0 on an
{bytes, path} dict, the first character of a path string) and the method asserts that every item was used
(:287-288; a dict's len is its key count). __getitem__ calls it for every sample (:291-293), so the first batch
holding such a row stops the run, after the model has loaded. The SFT trainer has no length filter to swallow it.
The image/video keys are read with config.get (multiturn_sft_dataset.py:104-105): sft_trainer_engine.yaml has no
such keys, so a launch sets them as +data.image_key.
"""

from __future__ import annotations

from wizard.check.rules.context import Ctx, Facts, local_data_files
from wizard.check.rules.datacontent import SAMPLE_ROWS, file_rows, not_a_list


def _keys(c: Ctx) -> dict[str, str]:
    return {kind: key for kind in ("image", "video")
            if isinstance(key := c.v(f"data.{kind}_key", f"{kind}s"), str)}


def _first_single(path, keys: dict[str, str]) -> tuple[int, str, str, object] | None:
    """(row, kind, column, cell) of the first row whose media cell is not a list, within SAMPLE_ROWS rows."""
    for n, row in enumerate(file_rows(path)):
        if n >= SAMPLE_ROWS:
            return None
        for kind, key in keys.items():
            if not_a_list(row.get(key)):
                return n, kind, key, row.get(key)
    return None


def rule_sft_media_cells(c: Ctx, f: Facts) -> None:
    keys = _keys(c)
    for key, path, local in local_data_files(c, (".parquet",)):
        try:
            hit = _first_single(local, keys)
        except Exception:  # noqa: BLE001 - a file pyarrow cannot read is verl's loader's business
            continue
        if hit is None:
            continue
        n, kind, column, cell = hit
        shape = (f"one {{{', '.join(sorted(map(str, cell)))}}} dict" if isinstance(cell, dict) else
                 f"one {type(cell).__name__} value")
        c.add("VI640", "error", (key, f"data.{kind}_key"),
              f"{path} row {n}: the {column!r} column (data.{kind}_key) holds {shape} per row, not a list of "
              f"{kind}s; verl's MultiTurnSFTDataset indexes it as a list and asserts every item was used "
              "(utils/dataset/multiturn_sft_dataset.py:255-288): KeyError or AssertionError at the first batch "
              "holding the row, after the model has loaded",
              f"write the column as a list, one item per <{kind}> placeholder: {column}=[item]")
