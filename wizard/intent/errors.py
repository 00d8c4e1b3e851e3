"""One error family for everything the user can get wrong.

A :class:`Problem` is one finding of one rule: a stable ID, a severity, the keys it read, what is
wrong and what to do. A :class:`WizardError` carries one or more error problems; the CLI prints
one line per problem and exits non-zero.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Iterable, Literal

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Problem:
    rule: str
    severity: Severity
    keys: tuple[str, ...]
    message: str
    hint: str = ""

    def line(self) -> str:
        """`key: message — hint [RULE]`, the one-line form the CLI prints: a newline or other control character
        in a key or value (a user's string) is shown escaped, so no value can forge a line of output."""
        from wizard.intent.text import one_line

        where = ", ".join(self.keys) if self.keys else "answers"
        text = f"{where}: {self.message}"
        if self.hint:
            text += f" — {self.hint}"
        return one_line(f"{text} [{self.rule}]")

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.rule,
            "severity": self.severity,
            "keys": list(self.keys),
            "message": self.message,
            "hint": self.hint,
        }


class WizardError(Exception):
    """Raised for anything the user can fix: bad answers, impossible plans, files in the way."""

    def __init__(self, problems: Iterable[Problem] | str, hint: str = "", rule: str = "VI000"):
        if isinstance(problems, str):
            problems = [Problem(rule, "error", (), problems, hint)]
        self.problems: list[Problem] = list(problems)
        super().__init__("\n".join(p.line() for p in self.problems))

    @property
    def rules(self) -> list[str]:
        return [p.rule for p in self.problems]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C / SIGTERM caught by a command that knows what it left on disk: `what` says it, truthfully."""

    def __init__(self, what: str, signum: int = 2):
        super().__init__(what)
        self.what = what
        self.signum = signum


class UserError(WizardError):
    """A single problem with a message and a hint (copier's shape)."""

    def __init__(self, message: str, hint: str = "", *, rule: str = "VI000", keys: Iterable[str] = ()):
        super().__init__([Problem(rule, "error", tuple(keys), message, hint)])


@dataclass
class Findings:
    """Collects problems from many rules so the user sees all of them at once."""

    items: list[Problem] = field(default_factory=list)

    def error(self, rule: str, keys: Iterable[str], message: str, hint: str = "") -> None:
        self.items.append(Problem(rule, "error", tuple(keys), message, hint))

    def warning(self, rule: str, keys: Iterable[str], message: str, hint: str = "") -> None:
        self.items.append(Problem(rule, "warning", tuple(keys), message, hint))

    def info(self, rule: str, keys: Iterable[str], message: str, hint: str = "") -> None:
        self.items.append(Problem(rule, "info", tuple(keys), message, hint))

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "error"]

    @property
    def others(self) -> list[Problem]:
        return [p for p in self.items if p.severity != "error"]

    def raise_if_errors(self) -> None:
        if self.errors:
            raise WizardError(self.errors)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else ""
