"""Rule stage of the data: where verl reads it, the data rules (VI510-VI518), enough rows for one batch (VI519), the
model's context (VI604) and the plan-time data facts (wizard.planner.datafacts).
"""

from __future__ import annotations

import os
from typing import Optional

from wizard.intent.answers import BUILTIN_DATASETS, DATA_SUFFIXES, SAVED_DATASET, Answers, local_dataset
from wizard.intent.errors import Findings
from wizard.planner import dataprep
from wizard.planner.stages.batches import batch_ok
from wizard.planner.state import Build, Confirm, confirmed, refuse, resolve_path, Source


# Where the bundle's data/prepare_data.py writes (bundle-relative: run.sh launches verl from the bundle).
DATASET_DEFAULTS = {
    "gsm8k": ("data/train.parquet", "data/val.parquet"),
    "math": ("data/train.parquet", "data/val.parquet"),
}


def data(b: Build) -> None:
    from wizard.planner import datafacts, dataschema, modelcheck

    dataschema.apply(b)  # first: the local file's columns decide the mapping (may update b.a)
    modelcheck.check(b)  # model ids known in the catalogue or the local hub cache (offline)
    a, f, shape, seq = b.a, b.f, b.shape, b.seq

    datafacts.paths(b)  # first: the data paths as the bundle names them (b.stored)
    b.train_files, b.val_files = _data_files(a, b.base, f, b.stored)
    datafacts.pods(b)
    if not _enough_rows(b):
        datafacts.overlong_prompts(b, lambda p: batch_ok(b, p, b.updates))
    if shape is not None and shape.source == "name":
        moe = (f" (a MoE of {shape.active_params / 1e9:.1f}B active, the name's; {shape.active_experts} routed "
               "experts a token assumed)" if shape.experts else "")
        f.warning("VI308", ("model", "model_params_b"),
                  f"{a.model!r} is not in the catalogue: its shape is estimated from the {shape.params_b:.1f}B in its "
                  f"name{moe}",
                  "give a local model folder (config.json is read) for an exact memory estimate")
    if shape is not None and shape.max_pos and seq > shape.max_pos:
        f.error("VI604", ("max_prompt_length", "max_response_length"),
                f"prompt + response = {seq} tokens exceeds the model's context of {shape.max_pos}",
                f"keep max_prompt_length + max_response_length ≤ {shape.max_pos}")


def _enough_rows(b: Build) -> bool:
    """verl's train dataloader drops the last incomplete batch (drop_last=True) and trains rows // train_batch_size
    steps (trainer/ppo/v1/trainer_base.py): a local file with fewer training rows than prompts_per_step trains 0
    steps, and verl stops with "Train dataloader is empty!". Counted where the file is here; data/prepare_data.py
    holds out max(1, round(rows × val_fraction)) rows for validation (its split_file)."""
    a, P = b.a, b.prompts
    if not P:
        return False
    if a.train_files:
        path, held_out = resolve_path(a.train_files, b.base), 0.0
    elif a.dataset not in BUILTIN_DATASETS:
        path, held_out = resolve_path(a.dataset, b.base), a.val_fraction
    else:
        return False
    from wizard._io import count_file_rows
    from wizard._parquet import saved_dataset

    if not os.path.isfile(path) and not saved_dataset(path):
        return False

    rows = count_file_rows(path, P + max(1, round(P * held_out)) + 1)
    if rows is None:
        return False
    val = min(rows - 1, max(1, round(rows * held_out))) if held_out > 0 and rows >= 2 else 0
    train = rows - val
    if train >= P:
        return False
    candidates = [p for p in range(min(train, P), 0, -1) if batch_ok(b, p, b.updates)]

    def rows_hint(ok: Confirm) -> str:
        fits = confirmed(ok, "prompts_per_step", candidates, k=1)
        return (f"use prompts_per_step={fits[0]} (the largest that fits and divides evenly), or more data" if fits
                else "use more data")

    refuse(b, "VI519", ("prompts_per_step", "dataset" if not a.train_files else "train_files"),
           f"{path} gives {train} training row(s)" + (f" ({rows} rows, {val} held out for validation)" if val else "")
           + f", fewer than prompts_per_step={P}: verl drops the incomplete batch and trains 0 steps", rows_hint)
    return True


def _data_files(a: Answers, base: str, f: Findings, stored: Optional[dict[str, str]] = None,
                ) -> tuple[tuple[str, str, Source], tuple[str, str, Source]]:
    """Where verl reads the data (data/prepare_data.py writes it by default) and the VI5xx data rules.
    `stored`: data paths as the bundle names them (relative to it), where they differ from the answers."""
    stored = stored or {}
    ds = a.dataset
    builtin = ds in BUILTIN_DATASETS
    if not builtin and not local_dataset(ds, base):
        f.error("VI510", ("dataset",), f"dataset must be gsm8k, math, geo3k, codecontests, a local data file or "
                f"{SAVED_DATASET} (got {ds!r})",
                f"use gsm8k, math, geo3k, codecontests, a {'/'.join(DATA_SUFFIXES)} path, or the folder "
                "Dataset.save_to_disk wrote (it holds state.json, or dataset_dict.json)")
        return ("", "", "answer"), ("", "", "answer")
    for key in ("train_files", "val_files"):
        value = getattr(a, key)
        if value and value.lower().endswith(".csv"):
            f.error("VI511", (key,), f"verl reads parquet, json and jsonl but not csv ({key}={value!r})",
                    f"set dataset={value} and leave {key} unset: data/prepare_data.py converts it to parquet; "
                    "or point it at a .parquet/.jsonl file in verl's schema")
    if builtin:
        stray = dataprep.local_only_keys_given(a)
        if stray:
            f.error("VI516", tuple(stray), f"{', '.join(stray)} only apply to a local data file, not dataset={ds}",
                    f"remove {' and '.join(stray)}; {ds} has its own columns and a test split")
    if a.messages_field and "question_field" in a.model_fields_set:
        f.error("VI515", ("messages_field", "question_field"),
                "set messages_field (a chat column) or question_field (a question column), not both",
                f"remove question_field to build prompts from {a.messages_field!r}")

    prep = dataprep.resolve(a, base)
    scorer = prep.scorer
    prepared_used = not (a.train_files and a.val_files)
    if a.reward == "rule" and prepared_used and not a.data_source_field:  # per row: wizard.planner.rowfields
        if scorer is None:
            rule_ds = dataprep.RULE_DATA_SOURCE.get(prep.answer_format)
            hint = "use reward=function (the bundle gets reward/reward_fn.py for your answer_format)"
            if rule_ds:
                hint += f", or data_source={rule_ds}"
            f.error("VI513", ("data_source", "reward", "answer_format"),
                    f"data_source={prep.data_source!r} has no scorer in verl's default scoring: every reward step "
                    "would fail with NotImplementedError", hint)
        else:
            expects = dataprep.SCORER_FORMAT.get(scorer)
            if expects is not None and expects != prep.answer_format:
                f.error("VI514", ("answer_format", "data_source", "reward"),
                        f"verl scores data_source={prep.data_source!r} with its {scorer} scorer, which reads "
                        f"answer_format={expects}, but prompts ask for answer_format={prep.answer_format}: "
                        "every reward would be 0",
                        f"set answer_format={expects}, or reward=function to score {prep.answer_format} answers")

    train_default, val_default = DATASET_DEFAULTS.get(ds, (dataprep.PREPARED_TRAIN, dataprep.PREPARED_VAL))
    shown = stored.get("dataset", ds)
    why = f"written by data/prepare_data.py from {shown}"
    if not builtin and a.val_fraction == 0 and a.val_files is None:
        val_default = train_default
        f.warning("VI512", ("val_files", "val_fraction"), "no validation file: validating on the training file",
                  "set val_fraction (e.g. 0.05) or val_files to a held-out split")
    if bool(a.train_files) != bool(a.val_files):
        mine, theirs = ("train_files", "val_files") if a.train_files else ("val_files", "train_files")
        f.warning("VI517", (mine, theirs),
                  f"{mine} is your file but {theirs} is the bundle's {val_default if theirs == 'val_files' else train_default}, "
                  f"written by data/prepare_data.py from {shown}",
                  f"set {theirs} too (val_files=<your train file> validates on the training data)")
    for key in ("train_files", "val_files"):
        _verl_schema(f, key, getattr(a, key), base, stored.get(key))
    train: tuple[str, str, Source] = (
        (stored.get("train_files") or resolve_path(a.train_files, base), "train_files (your answer)", "answer")
        if a.train_files
        else (train_default, why, "default"))
    val: tuple[str, str, Source] = (
        (stored.get("val_files") or resolve_path(a.val_files, base), "val_files (your answer)", "answer")
        if a.val_files
        else (val_default, why, "default"))
    return train, val


def _verl_schema(f: Findings, key: str, value: Optional[str], base: str, shown: Optional[str]) -> None:
    """A train_files/val_files answer is read by verl as it is (the answer is documented as "in verl's schema"):
    verl's RLHFDataset reads example[data.prompt_key] (utils/dataset/rl_dataset.py:313), and the bundle keeps verl's
    default prompt_key 'prompt'. A local file none of whose first rows has that column (a raw question/answer file)
    is a KeyError at the first batch, or, with data.filter_overlong_prompts on, every row filtered out as overlong
    (rl_dataset.py:259-266) and an empty dataloader: refused here, with the file's columns. Unreadable or absent
    files are other rules' business (VI539, prepare_data.py, validate-dataset)."""
    from wizard._parquet import saved_dataset
    from wizard.planner.dataschema import read_schema

    if not value or value.lower().endswith(".csv"):  # csv: VI511
        return
    path = resolve_path(value, base)
    if not os.path.isfile(path) and not saved_dataset(path):
        return
    try:
        schema = read_schema(path)
    except Exception:  # noqa: BLE001 - unreadable here: validate-dataset says why
        return
    if not schema.columns or "prompt" in schema.columns:
        return
    f.error("VI518", (key,),
            f"{key}={shown or value} has no 'prompt' column (its columns: {schema.listing()}): verl reads the file as "
            "it is and would find no prompt in it (rl_dataset.py:313)",
            (f"give it as dataset={value} (data/prepare_data.py converts it; val_fraction holds out validation rows)"
             if key == "train_files" else
             "leave val_files unset and set val_fraction (e.g. 0.05): data/prepare_data.py holds out rows of the dataset")
            + "; or write it in verl's schema (a 'prompt' column of chat messages)")
