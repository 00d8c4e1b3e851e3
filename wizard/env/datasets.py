"""`verl-init validate-dataset`: check data files against what verl 0.9.1 reads, before a run.

RL files (`--type rl`, read by verl's RLHFDataset and reward loop):
  VI520 error    the file cannot be read (missing, unsupported format, bad JSON line)
  VI521 error    a required column is missing (prompt key, data_source, reward_model)
  VI522 error    the prompt is not a list of {role, content} chat messages with allowed roles
  VI523 error    reward_model.ground_truth is missing or empty
  VI524 error    ground_truth is not text (verl's scorers compare text: every reward would be 0)
  VI525 error    data_source is missing or empty
  VI526 error    data_source has no scorer in verl's default scoring and no custom function was given
  VI527 error    the tokenizer's chat template fails on the prompt (verl drops or crashes on the row)
  VI528 warning  prompts longer than max_prompt_length (what verl does with them is spelled out)
With --agent tool (multi-turn tool calling, verl's tool agent loop):
  VI566 warning  a row has no agent_name: it runs the config's default agent loop (single_turn_agent unless set)
  VI567 error    a row's extra_info.tools_kwargs lacks the --tool-name tool's create_kwargs (a warning without
                 --tool-name when tools_kwargs is missing): the tool gets no ground truth
  VI568 warning  agent_name is not one of verl's agent loops (single_turn_agent, tool_agent)
  VI586 error    a code row (data_source codecontests, apps, codeforces, taco) whose ground_truth is not test cases
                 verl's code scorer can run (it would score every response 0 without running it)
  VI529 warning  duplicate prompts within a file
  VI530 warning  prompts shared between files (train/validation overlap)
  VI531 error    the file has no rows, or no row survives verl's overlong filter
  VI532 warning  extra_info.index is missing (verl uses index 0 for every row)
  VI533 warning  the prompt ends with an assistant message (the reference answer may be in the prompt)
  VI534 info     no tokenizer given: chat template and token lengths not checked
  VI543 error    a message's content is itself a JSON chat (a chat column read as question text)
  VI544 error    the prompt is empty or whitespace
  VI545 error    a system message that is not the first message
Preference files (`--type preference`, verl's RMDataset):
  VI535 error    chosen / rejected is missing or empty
  VI536 error    chosen and rejected are the same text
  VI537 error    prompt / chosen / rejected is not text (RMDataset tokenizes them as plain text)
Usage:
  VI538 error    the --model-dir tokenizer cannot be loaded (exit 2, one line)
With --image-key (a vision-language model's data.image_key):
  VI574 error    the image column is missing, or a row's value is not a list of images
  VI575 error    an image is neither {"bytes": ...} nor a path, or its bytes do not decode as an image
  VI576 error    the prompt's <image> placeholders do not match the row's images (verl asserts it: rl_dataset.py:381)

Files are streamed: parquet in row batches (pyarrow `iter_batches`), jsonl line by line, so memory
stays bounded by the batch size plus 12 bytes per row (a prompt hash and a length); only a `.json`
array has to be loaded whole. Rows are numbered from 0, as `datasets` and pandas number them.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

from wizard.env.datareader import (  # noqa: F401 - re-exported: tests and callers import them from here
    BUCKET_BITS, HIST_CAP, MAX_JSON_BYTES, _hash, _HashStore, _image_problem, _is_chat, _iter_batches, _schema, _short,
    _type_name,
)
from wizard.env.datareport import format_report, load_tokenizer  # noqa: F401 - re-exported
from wizard._parquet import DecodeCapExceeded, saved_dataset
from wizard.intent.errors import UserError
from wizard.planner import datacontent
from wizard.planner.dataprep import CODE_DATA_SOURCES, scorer_for, test_cases_problem

ROLES = ("system", "user", "assistant", "tool")
AGENT_LOOPS = ("single_turn_agent", "tool_agent")  # verl 0.9.1's registered agent loops (agent_loop.py:470)
RL_SUFFIXES = (".parquet", ".jsonl", ".json")
BATCH_ROWS = 2048
SHOW = 5  # example rows kept per finding

# (rule, severity) of every check, for the docs and the --json output
RULES: dict[str, tuple[str, str]] = {
    "VI520": ("error", "file cannot be read"),
    "VI521": ("error", "required column missing"),
    "VI522": ("error", "prompt is not a list of chat messages"),
    "VI523": ("error", "ground truth missing or empty"),
    "VI524": ("error", "ground truth is not text"),
    "VI525": ("error", "data_source missing or empty"),
    "VI526": ("error", "data_source has no scorer"),
    "VI527": ("error", "chat template fails"),
    "VI528": ("warning", "prompt longer than max_prompt_length"),
    "VI529": ("warning", "duplicate prompts"),
    "VI530": ("warning", "prompts shared between files"),
    "VI531": ("error", "no usable rows"),
    "VI532": ("warning", "extra_info.index missing"),
    "VI533": ("warning", "prompt ends with an assistant message"),
    "VI534": ("info", "token lengths not checked"),
    "VI535": ("error", "chosen/rejected missing or empty"),
    "VI536": ("error", "chosen equals rejected"),
    "VI537": ("error", "preference field is not text"),
    "VI538": ("error", "tokenizer cannot be loaded"),
    "VI574": ("error", "image column missing or not a list"),
    "VI575": ("error", "image malformed or not decodable"),
    "VI576": ("error", "<image> placeholders do not match the images"),
    "VI566": ("warning", "agent_name missing (multi-turn)"),
    "VI567": ("error", "tools_kwargs missing (multi-turn)"),
    "VI568": ("warning", "agent_name not a verl agent loop"),
    "VI586": ("error", "code row's test cases unreadable by verl's code scorer"),
    **datacontent.RULES,
}


@dataclass
class Finding:
    """One rule on one file: how many rows broke it, the first few with their exact problem."""

    rule: str
    severity: str
    file: str
    message: str
    hint: str = ""
    count: int = 0
    examples: list[tuple[Optional[int], str]] = field(default_factory=list)  # (row, problem)

    def add(self, row: Optional[int], detail: str) -> None:
        self.count += 1
        if len(self.examples) < SHOW:
            self.examples.append((row, detail))

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.rule, "severity": self.severity, "file": self.file, "message": self.message,
            "hint": self.hint, "count": self.count,
            "examples": [{"row": r, "problem": d} for r, d in self.examples],
        }


@dataclass
class FileSummary:
    path: str
    rows: int = 0
    columns: dict[str, str] = field(default_factory=dict)
    data_sources: Counter = field(default_factory=Counter)
    length_unit: str = "chars"
    lengths: dict[str, int] = field(default_factory=dict)  # p50 p90 p99 max
    overlong: int = 0
    kept_by_verl: Optional[int] = None  # rows left after verl's overlong filter

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "rows": self.rows, "columns": self.columns,
            "data_sources": {k: {"rows": v, "scorer": scorer_for(k)} for k, v in self.data_sources.items()},
            "prompt_length": {"unit": self.length_unit, **self.lengths}, "overlong": self.overlong,
            "rows_after_verl_filter": self.kept_by_verl,
        }


@dataclass
class Report:
    kind: str
    options: dict[str, Any]
    files: list[FileSummary] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "type": self.kind, "options": self.options,
                "files": [f.as_dict() for f in self.files], "findings": [f.as_dict() for f in self.findings]}


@dataclass
class Options:
    kind: str = "rl"
    prompt_key: str = "prompt"
    max_prompt_length: int = 512
    tokenizer: Any = None  # a loaded tokenizer, or None
    tokenizer_name: Optional[str] = None
    reward_function: Optional[str] = None
    filter_overlong_prompts: bool = True
    chosen_key: str = "chosen"
    rejected_key: str = "rejected"
    batch_rows: int = BATCH_ROWS
    image_key: Optional[str] = None  # data.image_key of a vision-language model's data: its images are checked
    agent: str = "single_turn"  # tool: rows for verl's tool agent loop (agent_name, extra_info.tools_kwargs)
    tool_name: Optional[str] = None  # the tool whose create_kwargs each row must carry


# ---------------------------------------------------------------------------------------------
# one file (reading: wizard.env.datareader; the human report and the tokenizer: wizard.env.datareport)


class _FileCheck:
    def __init__(self, path: str, opts: Options):
        self.path = path
        self.name = path
        self.opts = opts
        self.summary = FileSummary(path)
        self.findings: dict[tuple[str, str], Finding] = {}
        self.seen_columns: set[str] = set()
        # Memory per row stays at 8 bytes (a prompt hash, in row order; 0 = a row without a prompt) plus a
        # histogram of prompt lengths whose size depends on the longest prompt, not on the number of rows.
        self.hashes = _HashStore()  # uint64 per row, row order, in blocks of 1 Mi rows
        self.length_hist: Any = None  # numpy int64: rows per length (lengths ≥ HIST_CAP count at HIST_CAP)
        self.length_max = 0
        self.measured = 0
        self.row0 = 0
        self.col_kinds: dict[str, dict[type, str]] = {}  # JSON: the value types seen per column
        self.ds_rows: dict[str, list[int]] = {}  # first rows of each data_source
        self.chat_columns: set[str] = set()  # columns that hold chat message lists (for --prompt-key hints)
        self._batch_hashes: list[int] = []

    def finding(self, rule: str, message: str, hint: str = "", severity: Optional[str] = None) -> Finding:
        key = (rule, message)
        if key not in self.findings:
            self.findings[key] = Finding(rule, severity or RULES[rule][0], self.name, message, hint)
        return self.findings[key]

    # -- per row (RL) ---------------------------------------------------------------------------
    def check_rl_row(self, row_no: int, row: dict[str, Any]) -> Optional[list[dict[str, Any]]]:
        """Schema checks of one row; returns the chat messages when the prompt is usable."""
        o = self.opts
        key = o.prompt_key
        prompt = row.get(key)
        chat: Optional[list[dict[str, Any]]] = None
        if prompt is None:
            self.finding("VI521", f"{key!r} is missing or null",
                         f"every row needs {key!r}: a list of {{role, content}} messages").add(row_no, "no prompt")
        elif isinstance(prompt, str):
            self.finding("VI522", f"{key!r} is a string, not a list of chat messages",
                         "verl drops such rows when filter_overlong_prompts=True (the chat template fails) and "
                         "fails on them otherwise; write [{\"role\": \"user\", \"content\": ...}] "
                         "(data/prepare_data.py does)").add(row_no, _short(prompt))
        elif not isinstance(prompt, list) or not prompt:
            self.finding("VI522", f"{key!r} is not a non-empty list of chat messages",
                         "write [{\"role\": \"user\", \"content\": ...}]").add(row_no, _short(prompt))
        else:
            problem = None
            for i, m in enumerate(prompt):
                if not isinstance(m, dict):
                    problem = f"message {i} is {_type_name(m)}, not a {{role, content}} mapping"
                elif m.get("role") not in ROLES:
                    problem = f"message {i} has role {m.get('role')!r}; allowed: {', '.join(ROLES)}"
                elif not isinstance(m.get("content"), str):
                    problem = f"message {i} content is {_type_name(m.get('content'))}, not text"
                if problem:
                    break
            if problem:
                self.finding("VI522", f"{key!r} has a malformed chat message",
                             f"each message is {{\"role\": one of {', '.join(ROLES)}, \"content\": text}}"
                             ).add(row_no, problem)
            else:
                chat = prompt
                for rule, detail in datacontent.chat_problems(prompt):  # what the prompt says (VI543-VI545)
                    self.finding(rule, f"{key!r}: {datacontent.MESSAGES[rule]}", datacontent.HINTS[rule]).add(row_no, detail)
                if prompt[-1].get("role") == "assistant":
                    self.finding("VI533", f"{key!r} ends with an assistant message",
                                 "the reply the policy should write may be in its prompt; end prompts with the user turn"
                                 ).add(row_no, _short(prompt[-1].get("content")))
        if prompt is not None:
            self._remember(row_no, prompt)

        ds = row.get("data_source")
        if not isinstance(ds, str) or not ds.strip():
            self.finding("VI525", "data_source is missing or empty",
                         "verl's reward loop reads data_source on every row to pick the scorer").add(
                row_no, "null" if ds is None else _short(ds))
        else:
            self.summary.data_sources[ds] += 1
            first = self.ds_rows.setdefault(ds, []) if len(self.ds_rows) < 1000 else []
            if len(first) < SHOW:
                first.append(row_no)

        rm = row.get("reward_model")
        if not isinstance(rm, dict):
            self.finding("VI523", "reward_model is missing or not a mapping",
                         "write reward_model = {\"style\": \"rule\", \"ground_truth\": \"...\"}").add(
                row_no, "null" if rm is None else _short(rm))
        else:
            gt = rm.get("ground_truth")
            code_row = ds in CODE_DATA_SOURCES and gt is not None
            if code_row:  # verl's code scorers take JSON text or a mapping of test cases
                why = test_cases_problem(gt)
                if why is not None:
                    self.finding("VI586", "a code row's reward_model.ground_truth is not test cases verl's code "
                                 "scorer can run", "write JSON text of {\"inputs\": [stdin, ...], \"outputs\": "
                                 "[stdout, ...]} (same lengths, at least one case; fn_name or assert_case optional): "
                                 "verl scores every response to this row 0 without running it").add(row_no, why)
            if gt is None:
                self.finding("VI523", "reward_model.ground_truth is missing",
                             "verl's scorers compare the response with ground_truth: without it every reward is 0"
                             ).add(row_no, "null")
            elif isinstance(gt, str):
                if not gt.strip():
                    self.finding("VI523", "reward_model.ground_truth is empty",
                                 "verl's scorers compare the response with ground_truth: an empty one never matches"
                                 ).add(row_no, repr(gt))
            elif not (code_row and isinstance(gt, dict)):
                custom = o.reward_function is not None
                self.finding("VI524", f"reward_model.ground_truth is {_type_name(gt)}, not text",
                             "verl's scorers compare extracted answer text with ground_truth, so every reward "
                             "would be 0: store it as a string (e.g. '72')" if not custom else
                             "your reward function receives it as is; verl's own scorers expect text",
                             severity="warning" if custom else "error").add(row_no, _short(gt))

        extra = row.get("extra_info")
        if not isinstance(extra, dict) or extra.get("index") is None:
            self.finding("VI532", "extra_info.index is missing",
                         "verl reports index 0 for every such row; write extra_info = {\"split\": ..., \"index\": n}"
                         ).add(row_no, "no extra_info" if not isinstance(extra, dict) else "no index")
        if o.image_key:
            self.check_images(row_no, row, chat)
        if o.agent == "tool":
            self.check_agent_row(row_no, row, extra)
        return chat

    def check_images(self, row_no: int, row: dict[str, Any], chat: Optional[list[dict[str, Any]]]) -> None:
        """A vision-language row: its images well-formed and decodable, one per <image> placeholder in the prompt
        (verl's RLHFDataset._build_messages pairs them in order and asserts the counts match)."""
        key = self.opts.image_key or ""
        images = row.get(key)
        if key not in row:
            return  # a missing column is one file-level finding (_required_columns)
        if images is None:
            images = []
        if not isinstance(images, (list, tuple)):
            self.finding("VI574", f"{key!r} is {_type_name(images)}, not a list of images",
                         "write a list per row, e.g. [{\"bytes\": <PNG bytes>}] (data/prepare_data.py does)").add(
                row_no, _short(images))
            return
        for i, image in enumerate(images):
            problem = _image_problem(image)
            if problem:
                self.finding("VI575", f"{key!r} holds an image that {problem}",
                             "store each image as {\"bytes\": <PNG/JPEG bytes>} or a path; data/prepare_data.py "
                             "reads paths and bytes and writes bytes").add(row_no, f"image {i}")
        if chat is None:
            return
        placeholders = sum(m.get("content", "").count("<image>") for m in chat if isinstance(m.get("content"), str))
        if placeholders != len(images):
            zero = not images
            what = ("<image> placeholders but the row has no images" if zero else
                    f"a different number of <image> placeholders than {key!r} has images")
            self.finding("VI576", f"the prompt has {what}",
                         "put one <image> in the prompt per image, in order (verl asserts it: rl_dataset.py:381)" if not zero
                         else "verl leaves the placeholder as text and the model sees no image: add the image or drop it",
                         severity="warning" if zero else None).add(row_no, f"{placeholders} placeholder(s), {len(images)} image(s)")

    def check_agent_row(self, row_no: int, row: dict[str, Any], extra: Any) -> None:
        """Multi-turn tool rows (verl 0.9.1): agent_name picks the agent loop (experimental/agent_loop/agent_loop.py:
        610-612, else rollout.agent.default_agent_loop); extra_info.tools_kwargs[tool]["create_kwargs"] reaches the
        tool's create() (utils/dataset/rl_dataset.py:403-410, experimental/agent_loop/tool_agent_loop.py:485-486)."""
        o = self.opts
        name = row.get("agent_name")
        if name is None:
            self.finding("VI566", "agent_name is missing",
                         "the row runs rollout.agent.default_agent_loop (single_turn_agent unless the config sets "
                         "tool_agent): write agent_name = \"tool_agent\" (verl-init's data/prepare_data.py does with "
                         "agent=tool)").add(row_no, "no agent_name")
        elif name not in AGENT_LOOPS:
            self.finding("VI568", f"agent_name is not one of verl's agent loops ({', '.join(AGENT_LOOPS)})",
                         "verl asserts the name is registered (agent_loop.py:678) unless your agent_loop_config_path "
                         "registers it").add(row_no, _short(name))
        kwargs = extra.get("tools_kwargs") if isinstance(extra, dict) else None
        if o.tool_name:
            entry = kwargs.get(o.tool_name) if isinstance(kwargs, dict) else None
            create = entry.get("create_kwargs") if isinstance(entry, dict) else None
            if not isinstance(create, dict) or not create:
                self.finding("VI567", f"extra_info.tools_kwargs has no {o.tool_name!r} create_kwargs",
                             f"the tool gets no per-row state (e.g. the ground truth): write extra_info.tools_kwargs = "
                             f"{{\"{o.tool_name}\": {{\"create_kwargs\": {{\"ground_truth\": ...}}}}}}").add(
                    row_no, "no tools_kwargs" if not isinstance(kwargs, dict) else f"keys: {sorted(kwargs)[:5]}")
        elif not isinstance(kwargs, dict) or not kwargs:
            self.finding("VI567", "extra_info.tools_kwargs is missing or empty",
                         "stateful tools get their per-row state from it (verl logs a warning per row when "
                         "need_tools_kwargs is set); pass --tool-name NAME to require one tool's create_kwargs",
                         severity="warning").add(row_no, "no tools_kwargs")

    # -- per row (preference) ---------------------------------------------------------------------
    def check_pref_row(self, row_no: int, row: dict[str, Any]) -> Optional[str]:
        o = self.opts
        texts: dict[str, Optional[str]] = {}
        for col in (o.prompt_key, o.chosen_key, o.rejected_key):
            value = row.get(col)
            if value is None:
                rule = "VI521" if col == o.prompt_key else "VI535"
                self.finding(rule, f"{col!r} is missing or null",
                             f"every preference row needs {o.prompt_key!r}, {o.chosen_key!r} and {o.rejected_key!r}"
                             ).add(row_no, "null")
                texts[col] = None
            elif not isinstance(value, str):
                self.finding("VI537", f"{col!r} is {_type_name(value)}, not text",
                             "verl's RMDataset tokenizes prompt, chosen and rejected as plain text; "
                             "render chats to text with the chat template first").add(row_no, _short(value))
                texts[col] = None
            elif not value.strip():
                rule = "VI521" if col == o.prompt_key else "VI535"
                self.finding(rule, f"{col!r} is empty", "an empty text gives the reward model nothing to compare"
                             ).add(row_no, repr(value))
                texts[col] = None
            else:
                texts[col] = value
        c, r = texts[o.chosen_key], texts[o.rejected_key]
        if c is not None and c == r:
            self.finding("VI536", f"{o.chosen_key!r} and {o.rejected_key!r} are the same text",
                         "a pair with no difference teaches the reward model nothing; drop or fix it").add(row_no, _short(c))
        prompt = texts[o.prompt_key]
        if prompt is not None:
            self._remember(row_no, prompt)
        return prompt

    # -- bookkeeping ----------------------------------------------------------------------------
    def _remember(self, row_no: int, prompt: Any) -> None:
        self._batch_hashes[row_no - self.row0] = _hash(prompt) or 1  # 0 marks rows without a prompt

    def run(self) -> None:
        import numpy as np

        o, saved = self.opts, saved_dataset(self.path)  # a save_to_disk folder: typed arrow columns, as parquet's
        if not os.path.isfile(self.path) and not saved:
            self.finding("VI520", "file not found", "check the path")
            return
        lower = ".parquet" if saved else self.path.lower()
        if o.kind == "preference" and not lower.endswith(".parquet"):
            self.finding("VI520", "verl's RMDataset reads parquet only",
                         "write the pairs to a .parquet file")
            return
        if not lower.endswith(RL_SUFFIXES):
            hint = ("convert it with the bundle's data/prepare_data.py (it reads .csv) or write .parquet"
                    if lower.endswith(".csv") else "use a .parquet, .jsonl or .json file")
            self.finding("VI520", f"verl reads .parquet, .jsonl and .json files, not {os.path.splitext(lower)[1] or 'this'}",
                         hint)
            return
        try:
            schema = _schema(self.path)
        except Exception as exc:  # noqa: BLE001 - a broken footer, not parquet at all, ...
            self.finding("VI520", "not a readable parquet file", "re-write the file").add(None, f"{type(exc).__name__}: {exc}")
            return
        if schema is not None:
            self.summary.columns = dict(schema)
            self.seen_columns = set(schema)
            self.chat_columns = {c for c, t in schema.items() if "list<" in t and "role" in t and "content" in t}

        try:
            for rows, unreadable in _iter_batches(self.path, o.batch_rows):
                for row_no, why in unreadable:
                    self.finding("VI520", "row cannot be read", "fix the line").add(self.row0 + row_no, why)
                self._batch(rows)
        except DecodeCapExceeded as exc:  # past a cap: one line, exit 2 (nothing more is read)
            raise UserError(str(exc), "split the values, or check where the file came from", rule="VI520") from None
        except (ValueError, OSError) as exc:
            self.finding("VI520", "file cannot be read", "check that it is the format its name says").add(
                None, f"{type(exc).__name__}: {str(exc)[:200]}")
            return
        if self.summary.rows:
            self._required_columns()
        self._finish(np)

    def _required_columns(self) -> None:
        """File-level check of required columns; replaces the per-row 'missing' findings."""
        o = self.opts
        required = ([o.prompt_key, "data_source", "reward_model"] if o.kind == "rl"
                    else [o.prompt_key, o.chosen_key, o.rejected_key])
        for col in [c for c in required if c not in self.seen_columns]:
            hint = f"every row needs {col!r}"
            if col == o.prompt_key:
                chats = sorted(self.chat_columns)
                if chats:
                    hint = f"the chat messages look like they are in {chats[0]!r}: pass --prompt-key {chats[0]}" + (
                        f" (and set data.prompt_key={chats[0]} in verl)" if o.kind == "rl" else "")
                elif o.kind == "rl":
                    hint = "build the prompt column with the bundle's data/prepare_data.py"
            # one file-level finding replaces the per-row ones about the same column
            for k in [k for k in self.findings if k[1].startswith(f"{col!r} is missing")]:
                del self.findings[k]
            if col == "reward_model":
                for k in [k for k in self.findings if k[1].startswith("reward_model is missing")]:
                    del self.findings[k]
            if col == "data_source":
                for k in [k for k in self.findings if k[1].startswith("data_source is missing")]:
                    del self.findings[k]
            cols = ", ".join(sorted(self.seen_columns)) or "none"
            self.finding("VI521", f"column {col!r} not found (columns: {cols})", hint).count = self.summary.rows
        if o.kind == "rl" and o.image_key and o.image_key not in self.seen_columns:
            cols = ", ".join(sorted(self.seen_columns)) or "none"
            self.finding("VI574", f"image column {o.image_key!r} not found (columns: {cols})",
                         "pass --image-key with the column holding the images (verl's data.image_key), or prepare the "
                         "data with the bundle's data/prepare_data.py").count = self.summary.rows

    def _batch(self, rows: list[Optional[dict[str, Any]]]) -> None:
        import numpy as np

        o = self.opts
        self._batch_hashes = [0] * len(rows)
        chats: list[tuple[int, Any]] = []
        json_rows = not self.path.lower().endswith(".parquet")
        for i, row in enumerate(rows):
            row_no = self.row0 + i
            if row is None:  # unreadable: already reported (VI520)
                continue
            if json_rows:  # JSON rows may differ in keys and types: learn the columns as they come
                for k, v in row.items():
                    kinds = self.col_kinds.setdefault(k, {})
                    if type(v) not in kinds:
                        kinds[type(v)] = _type_name(v)
                        self.summary.columns[k] = "|".join(sorted(set(kinds.values())))
                        if k not in self.chat_columns and _is_chat(v):
                            self.chat_columns.add(k)
                self.seen_columns.update(row)
            if o.kind == "rl":
                chat = self.check_rl_row(row_no, row)
                if chat is not None:
                    chats.append((row_no, chat))
            else:
                text = self.check_pref_row(row_no, row)
                if text is not None:
                    chats.append((row_no, text))
        self.row0 += len(rows)
        self.summary.rows = self.row0
        if self._batch_hashes:
            self.hashes.extend(np.asarray(self._batch_hashes, dtype=np.uint64))
        self._batch_hashes = []
        self._measure(chats)

    def _measure(self, items: list[tuple[int, Any]]) -> None:
        """Token lengths as verl's overlong filter counts them (chat template + generation prompt)."""
        import numpy as np

        o = self.opts
        if not items:
            return
        tok = o.tokenizer
        if tok is None:
            lengths = [len(v) if isinstance(v, str) else sum(len(m["content"]) for m in v) for _, v in items]
            self._count_lengths(np.asarray(lengths, dtype=np.int64))
            return
        rows: list[int] = []
        texts: list[str] = []
        for row_no, value in items:
            if o.kind == "preference":
                rows.append(row_no)
                texts.append(value)
                continue
            try:
                rendered = tok.apply_chat_template(value, add_generation_prompt=True, tokenize=False)
            except Exception as exc:  # noqa: BLE001 - jinja errors, template exceptions, ...
                self.finding("VI527", "the tokenizer's chat template fails on this prompt",
                             "verl counts such rows as too long and drops them (or fails without the filter); "
                             "fix the messages or the template").add(row_no, f"{type(exc).__name__}: {exc}"[:200])
                continue
            rows.append(row_no)
            texts.append(rendered)
        if not texts:
            return
        ids = tok(texts, add_special_tokens=o.kind == "preference", return_attention_mask=False)["input_ids"]
        counts = np.asarray([len(x) for x in ids], dtype=np.int64)
        self._count_lengths(counts)
        limit = o.max_prompt_length
        for row_no, n in zip(rows, counts.tolist(), strict=True):
            if n > limit:
                self.summary.overlong += 1
                self._overlong().add(row_no, f"{n} tokens > max_prompt_length={limit}")

    def _count_lengths(self, lengths: Any) -> None:
        import numpy as np

        if not len(lengths):
            return
        self.measured += len(lengths)
        self.length_max = max(self.length_max, int(lengths.max()))
        counts = np.bincount(np.minimum(lengths, HIST_CAP))
        if self.length_hist is None:
            self.length_hist = counts
        else:
            if len(counts) > len(self.length_hist):
                counts[:len(self.length_hist)] += self.length_hist
                self.length_hist = counts
            else:
                self.length_hist[:len(counts)] += counts

    def percentile(self, q: float) -> int:
        """np.percentile(lengths, q, method="higher") from the histogram: the length at sorted position
        ceil(q/100 × (n − 1)); exact below HIST_CAP."""
        import numpy as np

        k = int(np.ceil(q / 100 * (self.measured - 1)))
        cum = np.cumsum(self.length_hist)
        value = int(np.searchsorted(cum, k, side="right"))
        return self.length_max if value >= HIST_CAP else value

    def _overlong(self) -> Finding:
        o = self.opts
        if o.kind == "preference":
            what = ("verl's RMDataset cuts prompt + response at max_length, so the responses of these rows "
                    "are cut off entirely")
        elif o.filter_overlong_prompts:
            what = ("with data.filter_overlong_prompts=True (verl-init's setting) verl drops these rows "
                    "when it loads the file")
        else:
            what = ("with data.filter_overlong_prompts=False verl keeps them and the agent loop left-truncates "
                    "them to rollout.prompt_length (their beginning is lost; data.truncation is not applied "
                    "to RL prompts in verl 0.9.1)")
        return self.finding("VI528", f"prompts longer than max_prompt_length={o.max_prompt_length} tokens",
                            f"{what}; raise max_prompt_length or shorten them")

    def _finish(self, np: Any) -> None:
        o = self.opts
        s = self.summary
        if s.rows == 0:
            self.finding("VI531", "the file has no rows", "verl cannot train on an empty dataset")
        if self.measured:
            s.length_unit = "tokens" if o.tokenizer is not None else "chars"
            s.lengths = {f"p{q}": self.percentile(q) for q in (50, 90, 99)}
            s.lengths["max"] = self.length_max
        if o.tokenizer is not None and o.kind == "rl" and o.filter_overlong_prompts and s.rows:
            # verl keeps rows whose templated prompt fits; failing templates count as too long
            s.kept_by_verl = self.measured - s.overlong
            if s.kept_by_verl == 0 and not self._has_error_except("VI528"):
                self.finding("VI531", "no row survives verl's overlong filter: the dataset would be empty",
                             f"raise max_prompt_length (longest prompt: {s.lengths.get('max', 0)} tokens)"
                             ).count = s.rows
        if o.kind == "rl" and o.reward_function is None:
            for ds, n in sorted(s.data_sources.items()):
                if scorer_for(ds) is None:
                    f = self.finding("VI526", f"data_source {ds!r} has no scorer in verl's default scoring",
                                     "rewards fail with NotImplementedError at the first step: use a known "
                                     "data_source (e.g. openai/gsm8k) or a custom reward function "
                                     "(pass --reward-function FILE.py:NAME here)")
                    f.count = n
                    f.examples = [(r, f"data_source {ds!r}") for r in self.ds_rows.get(ds, [])]
        self._duplicates(np)

    def _has_error_except(self, rule: str) -> bool:
        return any(f.severity == "error" and f.rule != rule for f in self.findings.values())

    def _duplicates(self, np: Any) -> None:
        if not len(self.hashes):
            return
        # Exact on the 64-bit hashes, one slice of hash values at a time (BUCKETS by the top bits): the rows of
        # a slice and their hashes are sorted together, so the extra memory is ~16 bytes per row of one slice
        # (a fraction of a byte a row over the file), never a sorted copy of the whole column.
        count = 0
        shown: list[tuple[int, int]] = []  # (repeat row, first row), the SHOW smallest repeat rows
        width = 1 << (64 - BUCKET_BITS)
        for bucket in range(1 << BUCKET_BITS):
            lo = np.uint64(max(bucket * width, 1))  # 0 marks rows without a prompt
            hi = np.uint64(min((bucket + 1) * width - 1, (1 << 64) - 1))
            rows_parts, hash_parts = [], []
            for start, part in self.hashes.blocks():
                sel = np.flatnonzero((part >= lo) & (part <= hi))
                rows_parts.append(sel + start)
                hash_parts.append(part[sel])
            rows = np.concatenate(rows_parts)
            if len(rows) < 2:
                continue
            hc = np.concatenate(hash_parts)
            order = np.argsort(hc, kind="stable")  # stable: within equal hashes, rows stay ascending
            hs, rs = hc[order], rows[order]
            same = np.flatnonzero(hs[1:] == hs[:-1]) + 1
            if not len(same):
                continue
            starts = np.flatnonzero(np.r_[True, hs[1:] != hs[:-1]])  # first row of each run of equal hashes
            first_of = rs[starts[np.searchsorted(starts, same, side="right") - 1]]
            dup_rows = rs[same]
            count += len(same)
            pick = np.argsort(dup_rows, kind="stable")[:SHOW]
            shown = sorted(shown + [(int(dup_rows[j]), int(first_of[j])) for j in pick])[:SHOW]
        if not count:
            return
        f = self.finding("VI529", "duplicate prompts", "each repeat is trained on more often; drop repeats")
        f.examples = [(row, f"same prompt as row {first}") for row, first in shown]
        f.count = count

    def unique_hashes(self) -> tuple[Any, Any]:
        import numpy as np

        rows = np.concatenate([np.flatnonzero(part) + start for start, part in self.hashes.blocks()] or
                               [np.zeros(0, dtype=np.int64)])
        if not len(rows):
            return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
        uniq, first = np.unique(self.hashes.take(rows), return_index=True)
        return uniq, rows[first]


def _overlap(a: _FileCheck, b: _FileCheck) -> Optional[Finding]:
    """Rows of b whose prompt is also in a. Memory: b's distinct hashes (the smaller, validation file) and one
    block of a at a time."""
    import numpy as np

    ub, first_b = b.unique_hashes()
    if not len(ub) or not len(a.hashes):
        return None
    first_a = np.full(len(ub), -1, dtype=np.int64)  # for each of b's hashes, its first row in a
    for start, part in a.hashes.blocks():
        pos = np.searchsorted(ub, part)
        pos[pos >= len(ub)] = 0
        hit = np.flatnonzero((ub[pos] == part) & (part != 0))
        if not len(hit):
            continue
        where = pos[hit]
        fresh = first_a[where] < 0
        # the first row of a block for each value: np.unique keeps the first index of each
        vals, idx = np.unique(where[fresh], return_index=True)
        first_a[vals] = hit[fresh][idx] + start
    shared = first_a >= 0
    if not shared.any():
        return None
    count = 0
    examples: list[tuple[int, int]] = []
    for start, part in b.hashes.blocks():
        pos = np.searchsorted(ub, part)
        pos[pos >= len(ub)] = 0
        hit = np.flatnonzero((ub[pos] == part) & (part != 0) & shared[pos])
        count += len(hit)
        for j in hit[:SHOW - len(examples)].tolist() if len(examples) < SHOW else []:
            examples.append((j + start, int(first_a[pos[j]])))
    f = Finding("VI530", "warning", b.name,
                f"prompts also in {a.name} (train/validation overlap)",
                "validation scores on seen prompts are inflated; remove them from one file")
    f.count = count
    f.examples = [(row, f"same prompt as row {ra} of {a.name}") for row, ra in examples]
    return f


# ---------------------------------------------------------------------------------------------


def validate(paths: list[str], opts: Options) -> Report:
    """Check every file; findings carry rule IDs, severities, row numbers and the exact problem."""
    report = Report(opts.kind, {
        "prompt_key": opts.prompt_key, "max_prompt_length": opts.max_prompt_length,
        "tokenizer": opts.tokenizer_name, "reward_function": opts.reward_function,
        "filter_overlong_prompts": opts.filter_overlong_prompts,
        **({"image_key": opts.image_key} if opts.image_key else {}),
    })
    checks = []
    for path in paths:
        check = _FileCheck(path, opts)
        check.run()
        checks.append(check)
        report.files.append(check.summary)
        report.findings.extend(check.findings.values())
    for i, a in enumerate(checks):
        for b in checks[i + 1:]:
            f = _overlap(a, b)
            if f is not None:
                report.findings.append(f)
    if opts.tokenizer is None and opts.kind == "rl":
        report.findings.append(Finding("VI534", "info", "", "no --model-dir: chat template and token lengths not "
                                       "checked (lengths below are characters)",
                                       "pass --tokenizer <model folder or hub id> to count tokens as verl does"))
    order = {"error": 0, "warning": 1, "info": 2}
    report.findings.sort(key=lambda f: (order[f.severity], f.file, f.rule))
    return report


def main(args: list[str]) -> int:
    """`verl-init validate-dataset` (called by wizard.cli.app)."""
    import argparse

    p = argparse.ArgumentParser(
        prog="verl-init validate-dataset",
        description="Check data files against what verl 0.9.1 reads: schema, ground truth, scorers, chat template, token lengths, duplicates and train/validation overlap. Exit 1 on errors.")
    p.add_argument("files", nargs="+", metavar="FILE", help=".parquet, .jsonl or .json files (e.g. train then val), "
                   "or `datasets` save_to_disk folders")
    p.add_argument("--model-dir", dest="tokenizer", metavar="DIR",
                   help="model folder (or hub id) whose tokenizer and chat template to use, as in verify and smoke")
    p.add_argument("--tokenizer", dest="tokenizer", help=argparse.SUPPRESS)  # its first name, still accepted
    p.add_argument("--max-prompt-length", type=int, default=512, metavar="N",
                   help="data.max_prompt_length in tokens (default 512, as verl and verl-init)")
    p.add_argument("--prompt-key", default="prompt", metavar="KEY", help="data.prompt_key (default prompt)")
    p.add_argument("--type", dest="kind", choices=("rl", "preference"), default="rl",
                   help="rl: verl's RLHFDataset rows; preference: prompt/chosen/rejected pairs (RMDataset)")
    p.add_argument("--reward-function", metavar="FILE.py:NAME",
                   help="the run uses a custom reward function, so any data_source is scored")
    p.add_argument("--no-filter-overlong-prompts", dest="filter_overlong", action="store_false",
                   help="the run sets data.filter_overlong_prompts=False (verl-init sets True)")
    p.add_argument("--image-key", metavar="KEY",
                   help="data.image_key of a vision-language model's data: check each row's images and <image> placeholders")
    p.add_argument("--agent", choices=("single_turn", "tool"), default="single_turn",
                   help="tool: rows for multi-turn tool calling (agent_name, extra_info.tools_kwargs)")
    p.add_argument("--tool-name", metavar="NAME",
                   help="with --agent tool: every row's tools_kwargs must carry NAME's create_kwargs "
                        "(e.g. calc_gsm8k_reward)")
    p.add_argument("--show", type=int, default=0, metavar="N",
                   help="print the first N rows as the model will see them: the prompt after the chat template "
                        "(--model-dir's; else the messages as they are) and the ground truth the scorer gets")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    ns = p.parse_args(args)
    if ns.max_prompt_length < 1:
        p.error("--max-prompt-length must be at least 1")

    tokenizer = load_tokenizer(ns.tokenizer) if ns.tokenizer else None
    opts = Options(kind=ns.kind, prompt_key=ns.prompt_key, max_prompt_length=ns.max_prompt_length,
                   tokenizer=tokenizer, tokenizer_name=ns.tokenizer, reward_function=ns.reward_function,
                   filter_overlong_prompts=ns.filter_overlong, image_key=ns.image_key,
                   agent=ns.agent, tool_name=ns.tool_name)
    if ns.tool_name and ns.agent != "tool":
        p.error("--tool-name needs --agent tool")
    report = validate(ns.files, opts)
    if ns.show > 0 and not ns.json:
        from wizard.env.datareport import show_rows
        print(show_rows(ns.files[0], ns.show, opts.prompt_key, tokenizer, ns.tokenizer))
    if ns.json:
        print(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        print(format_report(report))
    return 0 if report.ok else 1

