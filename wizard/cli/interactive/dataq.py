"""The data questions of a local file, from the file's schema (wizard.planner.dataschema): the chat column is offered
as a choice (messages_field), the question and answer columns default to what the schema maps and list the file's
columns; a column the file lacks is refused the moment it is typed, naming the file's columns."""

from __future__ import annotations

import os
from typing import Any, Optional

from wizard.cli.interactive.qcore import Context
from wizard.intent.answers import BUILTIN_DATASETS, DATA_SUFFIXES

_SCHEMAS: dict[tuple[str, float], Any] = {}


def _path(ctx: Context) -> Optional[str]:
    ds = str(ctx.get("dataset"))
    if ds in BUILTIN_DATASETS or not ds.lower().endswith(DATA_SUFFIXES):
        return None
    path = os.path.join(ctx.base_dir, os.path.expanduser(ds))
    return path if os.path.isfile(path) else None


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
    ds = str(ctx.get("dataset"))
    local = ds not in BUILTIN_DATASETS and ds.lower().endswith(DATA_SUFFIXES)
    return local and not ctx.get("messages_field")


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
