"""What a string answer may hold, and how a user's value is shown back.

Answers travel into YAML that OmegaConf resolves (verl_config.yaml), shell scripts, Markdown and the
terminal. The renderer quotes each slot; this module refuses what no quoting makes safe everywhere:

- control characters (C0 incl. NUL and newline, DEL, C1, U+2028/U+2029, bidi overrides) and lone
  surrogates (bytes that were not UTF-8): they forge output lines, are dropped by bash (NUL) or
  reorder what a reader sees. The two prose answers (`instruction`, `system_prompt`), which only
  land in data/prepare_data.py as Python literals, may hold newlines and tabs.
- OmegaConf syntax: `${...}` is an interpolation (`${oc.env:WANDB_API_KEY}` resolves a secret into
  the config; `a${b` makes a config verl cannot load) and the exact string `???` means "missing".
- `~user/...`: expanded with os.path.expanduser for path answers (never joined to the working
  folder); an unknown user is refused. `~/...` stays home-relative (the planner writes
  `${oc.env:HOME}/...`, resolved on the machine that runs verl).

Only the standard library is imported here.
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

# C0 (incl. NUL, TAB, LF, CR), DEL, C1 (incl. NEL), U+2028/2029, bidi embeddings/overrides/isolates,
# lone surrogates (undecodable bytes from argv or files read with surrogateescape).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_PROSE_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

# Free text that never reaches OmegaConf, a shell word or a terminal line unescaped.
PROSE_FIELDS = frozenset({"instruction", "system_prompt"})
# Answers that name local files or folders (model-like ones only when they start with "~", "/", ".").
PATH_FIELDS = frozenset({"model", "critic_model", "reward_model", "dataset", "train_files", "val_files",
                         "reward_function", "resume_from_path", "checkpoint_dir"})

MAX_SHOWN = 120


def shown(value: Any) -> str:
    """A user's value as error messages show it: Python's repr (control characters escaped), capped."""
    text = repr(value)
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 5] + "…" + text[-4:]


def one_line(text: str) -> str:
    """Any text as one terminal line: non-printable characters (newline, NUL, ESC, U+2028 ...) escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in text)


class TextRefused(ValueError):
    """A string answer that no slot can hold safely; `message` and `hint` as Problem takes them."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.message = message
        self.hint = hint


def _control_problem(value: str, pattern: "re.Pattern[str]") -> Optional[TextRefused]:
    m = pattern.search(value)
    if m is None:
        return None
    ch = m.group()
    if "\ud800" <= ch <= "\udfff":
        return TextRefused(f"is not valid UTF-8 text (undecodable byte at position {m.start()})",
                           "write the value in UTF-8")
    return TextRefused(f"contains control character {shown(ch)} at position {m.start()}",
                       "answers are one line of plain text: remove newlines, NUL, escape and other control characters")


def check_text(key: str, value: str) -> None:
    """Raise TextRefused when a string answer of `key` cannot be placed safely (see the module doc)."""
    prose = key in PROSE_FIELDS
    problem = _control_problem(value, _PROSE_CONTROL if prose else _CONTROL)
    if problem is not None:
        raise problem
    if prose:
        return
    if "${" in value:
        raise TextRefused("contains '${', which OmegaConf (verl's config loader) would resolve as an interpolation",
                          "write the literal value without '${' (for your home folder write ~/...)")
    if value == "???":
        raise TextRefused("is '???', which OmegaConf reads as a missing value", "write the actual value")


def expand_user_home(key: str, value: str) -> str:
    """`~user/...` (and a bare `~`) in a path answer, expanded; `~/...` kept (home of the machine that runs verl)."""
    if key not in PATH_FIELDS:
        return value
    if key == "reward_function":
        path, sep, name = value.rpartition(":")
        return expand_user_home("train_files", path) + sep + name if sep else value
    if not value.startswith("~") or value.startswith("~/"):
        return value
    expanded = os.path.expanduser(value)
    if expanded.startswith("~"):
        user = value[1:].split("/", 1)[0]
        raise TextRefused(f"names the home folder of user {shown(user)}, who does not exist on this machine",
                          "write the absolute path (or ~/... for your own home folder)")
    return expanded


def out_problem(out: str) -> Optional[TextRefused]:
    """Why an output folder name is refused (control characters, undecodable bytes, empty), or None."""
    if out.strip() == "":
        return TextRefused(f"is empty ({shown(out)})", "name a folder, e.g. --out runs/my-run")
    problem = _control_problem(out, _CONTROL)
    if problem is None:
        return None
    return TextRefused(f"{problem.message} ({shown(out)})",
                       "name the folder without newlines or control characters (a trailing newline from $(...) "
                       "or a pasted path is the usual cause)" if not problem.hint.startswith("write the value")
                       else "choose a folder name in UTF-8")
