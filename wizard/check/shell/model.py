"""The static shell reader's data: what a launch script yields (Extraction, Launch, Unresolved), its errors and
bounds, and the variables known while reading (wizard.check.shellargs is the entry point)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Union

PLACEHOLDER = "UNSET_"
MODULE = "verl.trainer.main_ppo"
_HYDRA_FLAGS = {"--config-path": "config_path", "-cp": "config_path", "--config-name": "config_name",
                "-cn": "config_name", "--config-dir": "config_dir", "-cd": "config_dir"}


@dataclass(frozen=True)
class Unresolved:
    """A value the script does not fix by itself."""

    name: str
    reason: str
    line: int

    @property
    def placeholder(self) -> str:
        return PLACEHOLDER + self.name

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "placeholder": self.placeholder, "reason": self.reason, "line": self.line}


@dataclass
class Launch:
    """The `main_ppo` command: its line and its arguments after the module, expanded."""

    line: int
    args: list[str]
    overrides: list[str] = field(default_factory=list)
    config_path: str | None = None
    config_name: str | None = None
    config_dir: str | None = None
    passthrough: bool = False  # "$@" / "$*": the script forwards its own arguments
    conditional: bool = False  # inside an if/case/loop/function


@dataclass
class Extraction:
    launch: Launch | None
    unresolved: list[Unresolved] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    workdir: str | None = None  # a top-level `cd DIR` before the launch (DIR resolved)
    script: str | None = None

    @property
    def overrides(self) -> list[str]:
        return list(self.launch.overrides) if self.launch else []

    @property
    def unresolved_names(self) -> list[str]:
        return sorted({u.name for u in self.unresolved})

    def as_dict(self) -> dict[str, object]:
        la = self.launch
        return {
            "script": self.script,
            "line": la.line if la else None,
            "overrides": self.overrides,
            "config_flags": ([f"--config-path={la.config_path}"] if la and la.config_path else [])
            + ([f"--config-name={la.config_name}"] if la and la.config_name else [])
            + ([f"--config-dir={la.config_dir}"] if la and la.config_dir else []),
            "passthrough": bool(la and la.passthrough),
            "unresolved": [u.as_dict() for u in self.unresolved],
            "workdir": self.workdir,
            "notes": list(self.notes),
        }


class ShellSyntaxError(ValueError):
    """The script cannot be tokenised (an unterminated quote, `$(`, `${` or array)."""


class ShellLimitError(ValueError):
    """Reading the script would pass one of the bounds below (a hostile or runaway script)."""

    def __init__(self, what: str, line: int) -> None:
        super().__init__(f"line {line}: {what}")
        self.line = line


# Bounds of the static reader: no script verl users write comes near them.
MAX_VALUE_CHARS = 1 << 20  # one variable's value or one expanded word
MAX_ARRAY_ITEMS = 100_000
MAX_EXPR_CHARS = 10_000  # one $(( )) expression
MAX_SCRIPT_CHARS = 4 << 20


# --- values ----------------------------------------------------------------------------------------

Text = Union[str, list[str]]  # noqa: UP007 - a runtime alias (3.9-compatible spelling)


@dataclass(frozen=True)
class _Var:
    value: Text
    refs: tuple[Unresolved, ...] = ()


@dataclass
class _State:
    vars: dict[str, _Var]
    env: Mapping[str, str]
    script: str | None
    line: int = 0
    cwd: str | None = None  # after a top-level `cd DIR`

    def pwd(self) -> str:
        """The folder the script runs in: after a `cd`, that folder; else the script's own folder (the usual
        way verl's example scripts are launched; `verl-init check --workdir` overrides it)."""
        if self.cwd:
            return self.cwd
        if "PWD" in self.env:
            return str(self.env["PWD"])
        return os.path.dirname(os.path.abspath(self.script)) if self.script else os.getcwd()

    def lookup(self, name: str) -> _Var | None:
        if name in self.vars:
            return self.vars[name]
        if name in self.env:
            return _Var(str(self.env[name]))
        if name == "PWD":
            return _Var(self.pwd())
        return None

