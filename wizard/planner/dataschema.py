"""The local data file's schema decides the column mapping (issue 27 item 1).

`read_schema(path)` reads a .parquet / .jsonl / .json / .csv file's (or a save_to_disk folder's) columns, what each holds (a chat: a list of
{role, content}; text; a number; images; other) and its first rows, bounded (parquet decoding capped by
wizard._parquet, JSONL lines by wizard._io, at most SAMPLE rows). `apply(b)` (the planner's `_data` stage calls it
first) then:
- refuses a named column the file lacks, at once, with the file's columns (VI546);
- with no mapping given, maps an unambiguous file from its schema (the prompt: its one chat column, else its one
  question-like text column; the answer: its one answer-like column) and says so in PLAN.md (facts["data_mapping"]);
  an ambiguous one is refused naming the candidates (VI547).
`b` is the planner's working state (wizard.planner.state.Build), typed loosely: this module does not import
the pipeline.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional

SAMPLE = 64  # rows read to learn the columns (parquet: its footer names them all)
MAX_JSON_BYTES = 64 << 20
# names a question / an answer column goes by in public datasets (verl's examples/data_preprocess, the hub)
QUESTION_NAMES = ("question", "problem", "prompt", "query", "instruction", "input", "content", "text")
ANSWER_NAMES = ("answer", "solution", "ground_truth", "reference", "target", "output", "label", "final_answer",
                "response")
ROLES = ("system", "user", "assistant", "tool")
ROW_FIELDS = ("data_source_field", "agent_name_field")  # per-row columns verl reads (wizard.planner.rowfields)


@dataclass
class Schema:
    path: str
    columns: dict[str, str] = field(default_factory=dict)  # name -> chat | text | number | images | other
    rows: list[dict[str, Any]] = field(default_factory=list)  # the first rows, as stored

    def of(self, kind: str) -> list[str]:
        return [c for c, k in self.columns.items() if k == kind]

    def listing(self) -> str:
        return ", ".join(f"{c} ({k})" for c, k in self.columns.items()) or "none"


def is_chat(value: Any) -> bool:
    if isinstance(value, str) and value.strip().startswith("["):  # a csv cell's JSON chat
        try:
            value = json.loads(value)
        except ValueError:
            return False
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(m, dict) and m.get("role") in ROLES and "content" in m for m in value)


def _kind(values: list[Any]) -> str:
    seen = [v for v in values if v is not None and not (isinstance(v, float) and v != v)]
    if not seen:
        return "other"
    if all(is_chat(v) for v in seen):
        return "chat"
    if all(isinstance(v, (list, tuple)) and all(isinstance(x, (dict, bytes, str)) for x in v) for v in seen) and \
            any(isinstance(x, dict) and ("bytes" in x or "path" in x) for v in seen for x in v):
        return "images"
    if all(isinstance(v, bool) is False and isinstance(v, (int, float)) for v in seen):
        return "number"
    if all(isinstance(v, str) for v in seen):
        return "text"
    return "other"


def _first_rows(path: str) -> list[dict[str, Any]]:
    lower = path.lower()
    rows: list[dict[str, Any]] = []
    if lower.endswith(".parquet") or os.path.isdir(path):  # a parquet file, or a save_to_disk folder
        from wizard._parquet import any_batches

        for batch in any_batches(path, SAMPLE):
            rows.extend(batch.to_pylist()[:SAMPLE - len(rows)])
            if len(rows) >= SAMPLE:
                break
    elif lower.endswith(".jsonl"):
        from wizard._io import LineTooLong, bounded_lines

        with open(path, "rb") as fh:
            for line in bounded_lines(fh):
                if isinstance(line, LineTooLong) or not line.strip():
                    continue
                value = json.loads(line)
                if isinstance(value, dict):
                    rows.append(value)
                if len(rows) >= SAMPLE:
                    break
    elif lower.endswith(".json"):
        if os.path.getsize(path) > MAX_JSON_BYTES:
            raise ValueError(f"a .json file over {MAX_JSON_BYTES >> 20} MiB is not read whole")
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        if isinstance(doc, dict):
            lists = [v for v in doc.values() if isinstance(v, list)]
            doc = lists[0] if len(lists) == 1 else [doc]
        rows = [r for r in doc[:SAMPLE] if isinstance(r, dict)]
    elif lower.endswith(".csv"):
        import csv

        with open(path, encoding="utf-8", newline="") as fh:
            for i, row in enumerate(csv.DictReader(fh)):
                if i >= SAMPLE:
                    break
                rows.append(dict(row))
    return rows


def read_schema(path: str) -> Schema:
    """The file's columns, what each holds, and its first rows (raises OSError / ValueError when unreadable)."""
    rows = _first_rows(path)
    names: list[str] = []
    if os.path.isdir(path):
        from wizard._parquet import saved_schema_names

        names = saved_schema_names(path)
    elif path.lower().endswith(".parquet"):
        import pyarrow.parquet as pq

        names = list(pq.ParquetFile(path).schema_arrow.names)
    for r in rows:
        names.extend(k for k in r if k not in names)
    return Schema(path, {n: _kind([r.get(n) for r in rows]) for n in names}, rows)


def _pick(candidates: list[str], preferred: tuple[str, ...]) -> list[str]:
    """The candidates whose name is one of `preferred` (by that order), else all of them."""
    named = sorted((c for c in candidates if c.lower() in preferred), key=lambda c: preferred.index(c.lower()))
    return named or candidates


@dataclass
class Mapping:
    fields: dict[str, str]  # answer key -> column
    why: str


def infer(schema: Schema, given: set[str]) -> tuple[Optional[Mapping], list[tuple[tuple[str, ...], str, str]]]:
    """The mapping for the keys not given, from the schema; or (None, refusals) when a needed one is ambiguous."""
    fields: dict[str, str] = {}
    refusals: list[tuple[tuple[str, ...], str, str]] = []
    why: list[str] = []
    if not ({"question_field", "messages_field"} & given):
        chats = schema.of("chat")
        texts = [c for c, k in schema.columns.items() if c.lower() in QUESTION_NAMES and k not in ("chat", "images")]
        if len(chats) == 1:
            fields["messages_field"] = chats[0]
            why.append(f"the prompt is the chat in {chats[0]!r} (its only chat column; every message and role kept)")
        elif len(chats) > 1:
            refusals.append((("messages_field",), f"the file has {len(chats)} chat columns ({', '.join(chats)})",
                             f"choose one: --set messages_field={chats[0]} (or another of {', '.join(chats)})"))
        elif len(_pick(texts, QUESTION_NAMES)) >= 1:
            best = _pick(texts, QUESTION_NAMES)[0]
            fields["question_field"] = best
            why.append(f"the question is the text in {best!r}")
        else:
            refusals.append((("question_field", "messages_field"),
                             f"no chat column and no question-like text column (columns: {schema.listing()})",
                             "set question_field=<the text column> or messages_field=<a chat column>"))
    if "answer_field" not in given:
        answers = [c for c in schema.columns if c.lower() in ANSWER_NAMES and schema.columns[c] not in ("chat", "images")
                   and c not in fields.values()]
        ranked = _pick(answers, ANSWER_NAMES)
        exact = [c for c in ranked if c.lower() == ranked[0].lower()] if ranked else []
        if len(exact) == 1:
            fields["answer_field"] = exact[0]
            why.append(f"the ground truth comes from {exact[0]!r}")
        elif "messages_field" not in fields and "messages_field" not in given:
            refusals.append((("answer_field",), f"no answer-like column (columns: {schema.listing()})",
                             f"set answer_field=<the column with the reference answers> (e.g. one of "
                             f"{', '.join(list(schema.columns)[:6])})"))
    if refusals:
        return None, refusals
    return Mapping(fields, "; ".join(why)), []


def apply(b: Any) -> None:
    """The planner's hook: check the named columns against the local file, map the rest from its schema."""
    from wizard._parquet import saved_dataset
    from wizard.intent.answers import BUILTIN_DATASETS

    a = b.a
    if a.dataset in BUILTIN_DATASETS or (a.train_files and a.val_files):
        return
    path = os.path.expanduser(a.dataset.replace("${oc.env:HOME}", "~", 1))
    name = getattr(b.written, "dataset", None) or a.dataset  # as the user wrote it
    if not os.path.isfile(path) and not saved_dataset(path):
        return  # VI539 says so
    try:
        schema = read_schema(path)
    except Exception as exc:  # noqa: BLE001 - unreadable here: prepare_data.py / validate-dataset say why
        b.facts["data_mapping"] = f"Columns of {name}: not read ({type(exc).__name__}: {str(exc)[:160]})."
        return
    if not schema.columns:
        return
    given = set(a.model_fields_set) & {"question_field", "answer_field", "messages_field", "image_key",
                                       *ROW_FIELDS}
    for key in sorted(given):
        column = getattr(a, key)
        if column and column not in schema.columns:
            b.f.error("VI546", (key, "dataset"), f"{key}={column!r}: {name} has no column {column!r} "
                      f"(its columns: {schema.listing()})", _suggest(key, schema))
    if any(p.rule == "VI546" for p in b.f.items if p.severity == "error"):
        return
    from wizard.planner import rowfields

    rowfields.check(b, schema, name, given)
    a = b.a  # an image column may have been mapped
    if "messages_field" not in given and "question_field" in given and schema.columns.get(a.question_field) == "chat":
        b.f.error("VI543", ("question_field", "messages_field"),
                  f"question_field={a.question_field!r} holds a chat (a list of {{role, content}}): read as question "
                  "text, the whole conversation would land inside one user message and its roles would be lost",
                  f"set messages_field={a.question_field} and remove question_field (--unset question_field)")
        return
    mapping, refusals = infer(schema, given)
    for keys, message, hint in refusals:
        b.f.error("VI547", (*keys, "dataset"), f"cannot map {name}'s columns by themselves: {message}", hint)
    if mapping is None:
        return
    if mapping.fields:
        b.a = a = a.model_copy(update=mapping.fields)
        b.stored.update(mapping.fields)
    # what PLAN.md says does not depend on whether the mapping was typed or derived (a replay of verl-init.yaml,
    # which records it, writes the same PLAN.md): derived = what the schema maps with nothing given
    own, _ = infer(schema, set())
    used = {k: getattr(a, k) for k in ("messages_field", "question_field", "answer_field") if
            k in a.model_fields_set or k in mapping.fields}
    derived = own is not None and all(own.fields.get(k) == v for k, v in used.items()) and bool(used)
    shown = ", ".join(f"{k}={v}" for k, v in used.items())
    b.facts["data_mapping"] = (f"Columns of the data file (read from it): {schema.listing()}. " + (
        f"Mapped from its schema: {shown} — {own.why}." if derived and own is not None else
        f"Mapping: {shown} (your answers)." if shown else "Mapping: verl-init's defaults.")
        + rowfields.plan_note(b, schema))
    try:
        preview(b, schema)
    except Exception:  # noqa: BLE001 - a preview never stops the plan
        pass


def _suggest(key: str, schema: Schema) -> str:
    if key == "messages_field":
        chats = schema.of("chat")
        return f"use one of its chat columns: {', '.join(chats)}" if chats else "the file has no chat column: set question_field"
    if key == "question_field":
        chats = schema.of("chat")
        texts = schema.of("text")
        if chats:
            return f"its prompt is the chat in {chats[0]!r}: set messages_field={chats[0]} (and --unset question_field)"
        return f"use one of its text columns: {', '.join(texts)}" if texts else "check the file"
    if key in ("image_key", *ROW_FIELDS):
        from wizard.planner.rowfields import KIND, offered

        fits = offered(schema, key)
        return (f"use one of its {KIND[key]} columns: {', '.join(fits)}" if fits else
                f"the file has no {KIND[key]} column for it: leave {key} unset")
    return f"use one of: {', '.join(schema.columns)}"


PREVIEW_ROWS = 1  # rows PLAN.md shows as the model will see them


def templated(chat: list[dict[str, Any]], model: str) -> tuple[str, str]:
    """(the prompt text after the chat template, which template): the model's own tokenizer when it is a local
    folder, else the messages as they are (verl applies the model's template at load time)."""
    from wizard.planner import overlong

    folder = overlong.local_tokenizer(model)
    tok, why = (None, "the model is not a local folder") if folder is None else overlong.load_tokenizer(folder)
    if tok is not None and getattr(tok, "chat_template", None):
        try:
            return tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False), f"{model}'s chat template"
        except Exception as exc:  # noqa: BLE001 - the template refuses the messages: say so
            why = f"its chat template fails: {type(exc).__name__}"
    text = "\n".join(f"<{m['role']}> {m['content']}" for m in chat)
    return text, f"the messages as they are ({why}; verl applies {model}'s chat template when it loads them)"


def preview(b: Any, schema: Schema) -> None:
    """PLAN.md: the first row as prepare_data.py will write it — the prompt after the chat template and the
    ground truth the scorer gets."""
    from wizard.planner import dataprep

    prep = dataprep.resolve(b.a, b.base)
    for i, row in enumerate(schema.rows[:8]):
        try:
            chat = dataprep.prompt_of(row, prep)
            answer = row.get(prep.answer_field)
            if answer in (None, "") and prep.messages_field:
                raw = dataprep._chat_of(row.get(prep.messages_field), prep.messages_field)
                answer = next((m["content"] for m in reversed(raw) if m["role"] == "assistant"), "")
            truth = dataprep._ground_truth(answer if isinstance(answer, str) else json.dumps(answer) if
                                           isinstance(answer, (list, dict)) else str(answer), prep.extract)
        except dataprep.Skip:
            continue
        own = row.get(prep.data_source_field) if prep.data_source_field else None
        source = own.strip() if isinstance(own, str) and own.strip() else prep.data_source
        text, how = templated(chat, b.a.model)
        shown = text if len(text) <= 1500 else text[:1500] + " …"
        b.facts["data_preview"] = (f"Row {i} as the model will see it ({how}):\n\n```text\n{shown}\n```\n\n"
                                   f"Ground truth the scorer gets: `{truth}` (data_source `{source}`).")
        return
