"""How many prompts verl's overlong filter drops, counted at plan time with the model's own tokenizer.

verl 0.9.1 (utils/dataset/rl_dataset.py, RLHFDataset.maybe_filter_out_long_prompts) keeps a row only when
`len(tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)) <= max_prompt_length`
(a template that raises counts as too long), when data.filter_overlong_prompts is on, as verl-init sets it.
It does so for the train and the validation file at start-up; the train dataloader then drops the last
incomplete batch (drop_last=True) and fails with "Train dataloader is empty!" below one batch, and an empty
validation set fails as a batch of size 0.

Only with a local tokenizer (the model is a local folder with tokenizer files, and `transformers` is
installed: the optional extra `tokenizer`) and local data. Reading is streamed and bounded (rows, seconds);
nothing is downloaded. Prompts of a local data file are built as data/prepare_data.py builds them
(dataprep.prompt_of), and split as it splits them (dataprep.held_out).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

from wizard.planner import dataprep

MAX_ROWS = 200_000  # prompts tokenized at most
MAX_SECONDS = 30.0  # wall clock for the whole count
MAX_JSON_BYTES = 256 << 20  # a .json array is read whole: only up to this size
BATCH = 256
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


@dataclass(frozen=True)
class Count:
    """The outcome for one file. `complete`: every row was read (the counts are exact); else `enough` says the
    rows read already prove at least `needed` training rows survive."""

    path: str
    complete: bool
    enough: bool
    rows: int  # rows read that become examples (prepare_data.py's skips not counted)
    train: int  # of those, training rows (after the validation split, when the file is split)
    train_kept: int  # training rows within max_prompt_length
    val: int
    val_kept: int
    kth_length: int  # the shortest max_prompt_length that keeps `needed` training rows (0: unknown)
    note: str = ""  # why the count stopped, when it did
    train_refused: int = 0  # training rows the chat template raises on (counted as too long by verl's filter)


def local_tokenizer(model: str) -> Optional[str]:
    """The model's folder when it is local and holds tokenizer files, else None."""
    path = os.path.expanduser(model.replace("${oc.env:HOME}", "~"))
    if not os.path.isdir(path):
        return None
    return path if any(os.path.isfile(os.path.join(path, f)) for f in TOKENIZER_FILES) else None


# Where a chat template can be: the tokenizer's config, its own file (transformers >= 4.43 saves chat_template.jinja),
# the processor's (chat_template.json, which verl's HFModelConfig also reads through hf_processor)
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
MAX_TOKENIZER_CONFIG_BYTES = 4 << 20


def has_chat_template(folder: Any) -> Optional[bool]:
    """Whether a model folder holds a chat template anywhere verl's loads look; None when it cannot be read."""
    from pathlib import Path

    from wizard._io import UnsafeInput, read_user_file, safe_json

    folder = Path(folder)
    if any((folder / name).is_file() for name in TEMPLATE_FILES):
        return True
    try:
        doc = safe_json(read_user_file(str(folder / "tokenizer_config.json"), MAX_TOKENIZER_CONFIG_BYTES))
    except (OSError, ValueError, UnsafeInput):
        return None
    return bool(doc.get("chat_template")) if isinstance(doc, dict) else None


_TOKENIZERS: dict[tuple[str, int], tuple[Any, str]] = {}
_COUNTS: dict[tuple[Any, ...], Count] = {}  # the wizard plans many times per walk: count each file once


def _stamp(path: str) -> int:
    try:
        st = os.stat(path)
        return st.st_mtime_ns ^ st.st_size
    except OSError:
        return 0


def load_tokenizer(folder: str) -> tuple[Any, str]:
    """(tokenizer, "") or (None, why not): from the local folder only, never the hub (cached per folder)."""
    key = (os.path.abspath(folder), _stamp(folder))
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = _load_tokenizer(folder)
    return _TOKENIZERS[key]


def _load_tokenizer(folder: str) -> tuple[Any, str]:
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        return None, "transformers is not installed (pip install 'verl-init[tokenizer]')"
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(folder, local_files_only=True), ""
    except Exception as exc:  # noqa: BLE001 - a broken folder is a note, not a crash
        return None, f"its tokenizer does not load ({type(exc).__name__})"


def _rows(path: str) -> Iterator[dict]:
    """The rows of a .jsonl / .json / .csv / .parquet file or a saved `datasets` folder, streamed (a .json array is read whole, bounded)."""
    lower = path.lower()
    if lower.endswith(".jsonl"):
        import json

        from wizard._io import LineTooLong, bounded_lines

        with open(path, "rb") as fh:
            for line in bounded_lines(fh):
                if isinstance(line, LineTooLong):
                    raise ValueError(str(line))
                if line.strip():
                    yield json.loads(line)
    elif lower.endswith(".json"):
        import json

        if os.path.getsize(path) > MAX_JSON_BYTES:
            raise ValueError(f"a .json file over {MAX_JSON_BYTES >> 20} MiB is not read whole")
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        if isinstance(doc, dict):
            lists = [v for v in doc.values() if isinstance(v, list)]
            doc = lists[0] if len(lists) == 1 else []
        yield from doc
    elif lower.endswith(".csv"):
        import csv

        with open(path, encoding="utf-8", newline="") as fh:
            yield from csv.DictReader(fh)
    elif lower.endswith(".parquet") or os.path.isdir(path):  # a parquet file, or a save_to_disk folder
        from wizard._parquet import any_batches

        for batch in any_batches(path, BATCH):  # decoded bytes capped per batch and per value
            yield from batch.to_pylist()


def _lengths(tok: Any, chats: list[Any]) -> list[int]:
    """Token counts as verl's filter takes them; a prompt the template rejects counts as too long (-1)."""
    out = []
    for chat in chats:
        try:
            ids = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            if isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], (list, tuple)):
                ids = ids[0]
            out.append(len(ids))
        except Exception:  # noqa: BLE001 - verl: "Error processing one of the samples, skipping..."
            out.append(-1)
    return out


def count(path: str, tok: Any, max_prompt_length: int, needed: int, *, prep: Optional[dataprep.DataPrep] = None,
          val_fraction: float = 0.0, seed: int = 0, total_rows: Optional[int] = None,
          prompt_key: str = "prompt") -> Count:
    """_count, remembered per file version, tokenizer and settings (complete or early-stopped counts only)."""
    key = (os.path.abspath(path), _stamp(path), id(tok), max_prompt_length, needed, prep, val_fraction, seed,
           total_rows, prompt_key)
    if key in _COUNTS:
        return _COUNTS[key]
    result = _count(path, tok, max_prompt_length, needed, prep=prep, val_fraction=val_fraction, seed=seed,
                    total_rows=total_rows, prompt_key=prompt_key)
    if result.complete or result.enough:
        if len(_COUNTS) > 64:
            _COUNTS.clear()
        _COUNTS[key] = result
    return result


def _count(path: str, tok: Any, max_prompt_length: int, needed: int, *, prep: Optional[dataprep.DataPrep] = None,
           val_fraction: float = 0.0, seed: int = 0, total_rows: Optional[int] = None,
           prompt_key: str = "prompt") -> Count:
    """Count the prompts of `path` longer than max_prompt_length. `prep`: the file is a local data file that
    data/prepare_data.py turns into train/val (prompts built, rows skipped and split as it does); None: a file
    in verl's schema, read as it is (the `prompt_key` column). Stops early once `needed` training rows are certain to
    survive (`total_rows`, the file's row count, bounds the validation share), or at MAX_ROWS / MAX_SECONDS."""
    start = time.monotonic()
    held_max = 0
    if prep is not None and val_fraction > 0:
        held_max = max(1, round(total_rows * val_fraction)) if total_rows is not None else -1
    lengths: list[int] = []
    short = 0
    pending: list[Any] = []

    def flush() -> None:
        nonlocal short
        got = _lengths(tok, pending)
        lengths.extend(got)
        short += sum(1 for n in got if 0 <= n <= max_prompt_length)
        pending.clear()

    def partial(note: str, enough: bool) -> Count:
        return Count(path, False, enough, len(lengths), 0, 0, 0, 0, 0, note)

    try:
        for row in _rows(path):
            if prep is not None:
                try:
                    pending.append(dataprep.prompt_of(row if isinstance(row, dict) else {}, prep))
                except dataprep.Skip:
                    continue
            else:
                pending.append(row.get(prompt_key) if isinstance(row, dict) else None)
            if len(pending) >= BATCH:
                flush()
                if held_max >= 0 and short >= needed + held_max:
                    return partial("", True)
                if len(lengths) >= MAX_ROWS:
                    return partial(f"stopped after {len(lengths)} rows", False)
                if time.monotonic() - start > MAX_SECONDS:
                    return partial(f"stopped after {MAX_SECONDS:g} s ({len(lengths)} rows)", False)
        flush()
    except (OSError, ValueError, UnicodeDecodeError, ImportError) as exc:
        return partial(f"the file could not be read ({type(exc).__name__})", False)
    except Exception as exc:  # noqa: BLE001 - pyarrow errors and the like: a note, never a crash
        return partial(f"the file could not be read ({type(exc).__name__})", False)

    val_ids = dataprep.held_out(len(lengths), val_fraction, seed) if prep is not None else set()
    train = [n for i, n in enumerate(lengths) if i not in val_ids]
    val = [lengths[i] for i in sorted(val_ids)]
    fits = sorted(n for n in train if n >= 0)
    kth = fits[needed - 1] if 0 < needed <= len(fits) else 0
    return Count(path, True, True, len(lengths), len(train),
                 sum(1 for n in train if 0 <= n <= max_prompt_length), len(val),
                 sum(1 for n in val if 0 <= n <= max_prompt_length), kth, train_refused=sum(1 for n in train if n < 0))
