"""The static shell reader's data: what a launch script yields (Extraction, Launch, Unresolved), its errors and
bounds, and the variables known while reading (wizard.check.shellargs is the entry point)."""

from __future__ import annotations

import os
import time
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
    """The launch command (main_ppo or another verl entry point, wizard.check.entrypoints): its line and its
    arguments after the module, expanded."""

    line: int
    args: list[str]
    module: str = MODULE  # the entry point's module
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
    # from bash's own run (wizard.check.bashtrace) only: the launcher and its words before the entry point, and the
    # names of the variables exported to the launch
    via: list[str] = field(default_factory=list)
    env_names: list[str] = field(default_factory=list)
    temp_env: dict[str, str] = field(default_factory=dict)  # bashtrace.TRACED_VALUES as exported to the launch: values
    # commands after the launch whose name is a Hydra override (`+a.b=1 \\` ...): the launch command ended before
    # them; (line, that first word, how many override words the command holds). The static reader's only.
    stray: list[tuple[int, str, int]] = field(default_factory=list)

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


# Bounds of the static reader: no script verl users write comes near them. They are counted while the reader
# expands (never after), so a hostile script stops at the first one it passes, with a line naming it.
MAX_VALUE_CHARS = 1 << 20  # one variable's value (an array: all its items) or one expanded word
MAX_ARRAY_ITEMS = 100_000  # items of one array
MAX_COMMAND_WORDS = 1 << 18  # words of one command, expanded (check takes at most 20,000 overrides after)
MAX_EXPR_CHARS = 10_000  # one $(( )) expression
MAX_SCRIPT_CHARS = 4 << 20
MAX_COMMAND_CHARS = 16 << 20  # all the words of one command, expanded
MAX_HELD_BYTES = 64 << 20  # every variable together (the reader's memory: each array item counts 64 bytes more)
MAX_STEPS = 16_000_000  # the reader's work, in steps of about one simple Python operation (64 characters copied)
TIME_S = 5.0  # CPU seconds, as the sandboxed reader (wizard.check.bashtrace.TIMEOUT_S); the reader does no I/O
ITEM_BYTES = 64


class Budget:
    """What reading one script may spend: steps and CPU time, and the bytes its variables hold. Charged as the
    reader goes; the first bound passed raises ShellLimitError naming it. CPU time (not wall time): the reader
    never waits, and a busy machine must not turn a legitimate script into a refused one."""

    def __init__(self, seconds: float = TIME_S, steps: int = MAX_STEPS) -> None:
        self.deadline = time.process_time() + seconds
        self.seconds = seconds
        self.max_steps = steps
        self.steps = 0
        self._clock_at = 1 << 16
        self.held = 0
        self.line = 0

    def charge(self, steps: int) -> None:
        self.steps += steps
        if self.steps > self.max_steps:
            raise ShellLimitError(f"reading the script takes more than {self.max_steps} steps (the static reader's "
                                  "bound on work)", self.line)
        if self.steps >= self._clock_at:
            self._clock_at = self.steps + (1 << 16)
            if time.process_time() > self.deadline:
                raise ShellLimitError(f"reading the script takes more than {self.seconds:g} s of CPU", self.line)

    def copy(self, chars: int) -> None:
        """`chars` characters copied (at C speed): one step per 64."""
        self.charge(1 + (chars >> 6))

    def hold(self, delta: int) -> None:
        self.held += delta
        if self.held > MAX_HELD_BYTES:
            raise ShellLimitError(f"the script's variables would hold more than {MAX_HELD_BYTES >> 20} MiB", self.line)


# --- values ----------------------------------------------------------------------------------------

Text = Union[str, list[str]]  # noqa: UP007 - a runtime alias (3.9-compatible spelling)


@dataclass(frozen=True)
class _Var:
    value: Text
    refs: tuple[Unresolved, ...] = ()
    chars: int = field(default=-1, compare=False)  # characters of the value (all items of an array), computed once

    def __post_init__(self) -> None:
        if self.chars < 0:
            object.__setattr__(self, "chars", sum(map(len, self.value)) if isinstance(self.value, list)
                               else len(self.value))

    @property
    def size(self) -> int:
        """Bytes it holds, as the budget counts them."""
        return self.chars + ITEM_BYTES * (len(self.value) if isinstance(self.value, list) else 1)


@dataclass
class _State:
    vars: dict[str, _Var]
    env: Mapping[str, str]
    script: str | None
    line: int = 0
    cwd: str | None = None  # after a top-level `cd DIR`
    budget: Budget = field(default_factory=Budget)

    def set(self, name: str, var: _Var) -> None:
        """Assign a script variable, counting what it holds against the budget."""
        old = self.vars.get(name)
        self.budget.line = self.line
        if isinstance(var.value, list):
            self.budget.charge(1 + len(var.value))  # the items were copied and measured
            if len(var.value) > MAX_ARRAY_ITEMS:
                raise ShellLimitError(f"array {name} would hold more than {MAX_ARRAY_ITEMS} items", self.line)
            if var.chars > MAX_VALUE_CHARS:
                raise ShellLimitError(f"array {name} would hold more than {MAX_VALUE_CHARS} characters", self.line)
        elif len(var.value) > MAX_VALUE_CHARS:
            raise ShellLimitError(f"${name} would hold more than {MAX_VALUE_CHARS} characters", self.line)
        self.budget.hold(var.size - (old.size if old is not None else 0))
        self.vars[name] = var

    def unset(self, name: str) -> None:
        old = self.vars.pop(name, None)
        if old is not None:
            self.budget.hold(-old.size)

    def charge(self, steps: int) -> None:
        self.budget.line = self.line
        self.budget.charge(steps)

    def copy(self, chars: int) -> None:
        self.budget.line = self.line
        self.budget.copy(chars)

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

