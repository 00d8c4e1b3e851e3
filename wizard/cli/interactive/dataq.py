"""The data questions of a local file (or a `datasets` save_to_disk folder), from its schema
(wizard.planner.dataschema): the chat column is offered as a choice (messages_field), the question and answer columns
default to what the schema maps and list the file's columns; the per-row columns verl reads (image_key,
data_source_field, agent_name_field: wizard.planner.rowfields) are asked when the file has a column for them, with
that column offered; a column the file lacks is refused the moment it is typed, naming the file's columns."""

from __future__ import annotations

import os
from typing import Any, Optional

from wizard.cli.interactive.qcore import Context
from wizard.intent.answers import BUILTIN_DATASETS, DATA_SUFFIXES, SAVED_DATASET, local_dataset

_SCHEMAS: dict[tuple[str, float], Any] = {}


def _path(ctx: Context) -> Optional[str]:
    ds = str(ctx.get("dataset"))
    if not local_dataset(ds, ctx.base_dir):
        return None
    path = os.path.join(ctx.base_dir, os.path.expanduser(ds))
    return path if os.path.isfile(path) or os.path.isdir(path) else None


def schema(ctx: Context) -> Any:
    """The local dataset's schema, or None (not a local file, or unreadable)."""
    from wizard.planner.dataschema import read_schema

    path = _path(ctx)
    if path is None:
        return None
    try:
        key = (os.path.abspath(path), os.path.getmtime(path))
        if key not in _SCHEMAS:
            _SCHEMAS[key] = read_schema(path)
        return _SCHEMAS[key]
    except Exception:  # noqa: BLE001 - unreadable here: the plan says why
        return None


def has_chat(ctx: Context) -> bool:
    s = schema(ctx)
    return s is not None and bool(s.of("chat"))


def chat_choices(ctx: Context) -> list[tuple[Any, str]]:
    s = schema(ctx)
    return [(c, "a chat (list of {role, content}): every message and its role kept") for c in (s.of("chat") if s else [])]


def asks_question(ctx: Context) -> bool:
    """question_field is asked for a local file whose prompt is not a chat column."""
    return local_dataset(str(ctx.get("dataset")), ctx.base_dir) and not ctx.get("messages_field")


def _inferred(ctx: Context, key: str) -> Optional[str]:
    from wizard.planner.dataschema import infer

    s = schema(ctx)
    if s is None:
        return None
    given = {k for k in ("question_field", "messages_field", "answer_field") if k in ctx.answers}
    mapping, _ = infer(s, given - {key})
    return mapping.fields.get(key) if mapping is not None else None


def default_question(ctx: Context) -> Optional[str]:
    return _inferred(ctx, "question_field")


def default_answer(ctx: Context) -> Optional[str]:
    return _inferred(ctx, "answer_field")


def columns_note(ctx: Context) -> Optional[str]:
    s = schema(ctx)
    return f"the file's columns: {s.listing()}" if s is not None else None


def check_column(value: Any, ctx: Context) -> Optional[str]:
    s = schema(ctx)
    if s is None or str(value) in s.columns:
        return None
    return f"the file has no column {value!r} (its columns: {s.listing()}) [VI546]"


def check_dataset(value: Any, ctx: Context) -> Optional[str]:
    """The dataset answer: a built-in name, or a local data file / save_to_disk folder that exists here."""
    text = str(value)
    if text in BUILTIN_DATASETS:
        return None
    path = os.path.join(ctx.base_dir, os.path.expanduser(text))
    if not text.lower().endswith(DATA_SUFFIXES) and not local_dataset(text, ctx.base_dir):
        return (f"gsm8k, math, geo3k, codecontests, a local {'/'.join(DATA_SUFFIXES)} file or {SAVED_DATASET} (got "
                f"{text!r}" + (": a folder without state.json or dataset_dict.json" if os.path.isdir(path) else "")
                + ") [VI510]")
    from wizard._parquet import saved_dataset

    if not os.path.isfile(path) and not saved_dataset(path):
        return (f"no file {text!r} here ({os.path.normpath(os.path.abspath(path))}) — give the path of an existing "
                f"{'/'.join(DATA_SUFFIXES)} file (relative to {ctx.base_dir}), or gsm8k / math [VI539]")
    return None


# --- the per-row columns (wizard.planner.rowfields) ----------------------------------------------------------


def offers(key: str) -> Any:
    """`when` of a per-row column's question: the file has a column named as verl's preprocessing names it."""
    def when(ctx: Context) -> bool:
        from wizard.planner.rowfields import OFFERS, offered

        s = schema(ctx)
        return s is not None and any(c.lower() in OFFERS[key] for c in offered(s, key))
    return when


def offered_column(key: str) -> Any:
    """`default` of a per-row column's question: the file's column that fits it best."""
    def default(ctx: Context) -> Optional[str]:
        from wizard.planner.rowfields import offered

        s = schema(ctx)
        fits = offered(s, key) if s is not None else []
        return fits[0] if fits else None
    return default


def offered_note(key: str) -> Any:
    def note(ctx: Context) -> Optional[str]:
        from wizard.planner.rowfields import KIND, READS, offered

        s = schema(ctx)
        fits = offered(s, key) if s is not None else []
        return f"{READS[key]}; the file's {KIND[key]} columns: {', '.join(fits) or 'none'}" if s is not None else None
    return note


def check_image_column(value: Any, ctx: Context) -> Optional[str]:
    """image_key: refused when the file has image columns and this is none of its columns."""
    s = schema(ctx)
    return check_column(value, ctx) if s is not None and s.of("images") else None
