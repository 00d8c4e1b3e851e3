"""Hydra overrides of a shell script that launches `verl.trainer.main_ppo`, read without running it.

What is understood (the patterns verl's own example scripts use):

- line continuations (`\\` + newline), comments, single / double / `$'...'` quotes, heredocs (skipped);
- variables with literal values, `export`/`declare`/`local`/`readonly`, `${VAR}`, `${VAR:-default}`,
  `${VAR-default}`, `${VAR:=default}`, `${VAR:+alt}`, `${#VAR}`, `${VAR,,}`/`${VAR^^}`, `${VAR#pat}`/
  `${VAR%pat}` (and `##`/`%%`), `${VAR/pat/rep}`;
- `$((...))` integer arithmetic (C semantics: `/` truncates toward zero);
- bash arrays: `ARR=(a "b c")`, `ARR+=(d)`, `"${ARR[@]}"`, `${ARR[*]}`, `${ARR[N]}`, `${#ARR[@]}`;
- `~` at the start of a word; the launch command anywhere on a pipeline (`... | tee log`), after a
  launcher (`"${LAUNCH[@]}" -m verl.trainer.main_ppo`, `ray job submit -- python3 -m ...`) and with
  Hydra's `--config-path/-cp`, `--config-name/-cn`, `--config-dir/-cd` flags;
- the "folder of this script" idioms (`$(dirname "$0")`, `$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)`,
  `$(realpath "$0")`, ...), which depend only on the script's own path.

Nothing is guessed. A value the script takes from its environment (unless given in `env`), from a
command substitution, from a positional parameter, or assigned inside an `if`/`case`/loop/function or
after `&&`/`||` is *unresolved*: it appears as `UNSET_<NAME>` in the override (the convention of
shared/reference/verl-examples.json) and is listed with its reason in `Extraction.unresolved`.
Only the standard library is used.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

PLACEHOLDER = "UNSET_"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?)=")
_OPS = (";;&", ";;", ";&", "&&", "||", "|&", ">>", "<<<", "<<-", "<<", ">&", "&>>", "&>", "<&", "<>", ">|",
        ";", "&", "|", "(", ")", "<", ">")
_REDIRECTS = {">>", "<<<", ">&", "&>>", "&>", "<&", "<>", ">|", "<", ">"}
_SEPARATORS = {";", "&", "\n", ";;", ";;&", ";&", "(", ")"}
_CHAINS = {"&&", "||"}
_PIPES = {"|", "|&"}
_OPEN = {"if", "case", "for", "while", "until", "select", "{"}
_CLOSE = {"fi", "esac", "done", "}"}
_LEADING = {"then", "do", "else", "elif", "!"}
_DECLARE = {"export", "declare", "typeset", "local", "readonly"}
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


# --- tokens ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tok:
    kind: str  # word | op | nl | array | fd
    text: str
    line: int
    items: tuple[str, ...] = ()  # array literal elements (raw words)
    append: bool = False


class _Lexer:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.line = 1
        self.heredocs: list[tuple[str, bool]] = []

    def error(self, what: str) -> ShellSyntaxError:
        return ShellSyntaxError(f"line {self.line}: {what}")

    def tokens(self) -> list[_Tok]:
        out: list[_Tok] = []
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\\" and s.startswith("\\\n", self.i):
                self.i += 2
                self.line += 1
            elif c in " \t\r":
                self.i += 1
            elif c == "\n":
                out.append(_Tok("nl", "\n", self.line))
                self.i += 1
                self.line += 1
                self._skip_heredocs()
            elif c == "#":
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
            elif c in ";&|()<>":
                op = next(o for o in _OPS if s.startswith(o, self.i))
                self.i += len(op)
                out.append(_Tok("op", op, self.line))
                if op in ("<<", "<<-"):
                    self._heredoc(op == "<<-")
            else:
                line = self.line
                m = _ASSIGN.match(s, self.i)
                if m and s.startswith("(", m.end()) and not m.group(2):
                    self.i = m.end() + 1
                    out.append(_Tok("array", m.group(1), line, tuple(self._array()), append=bool(m.group(3))))
                    continue
                word = self._word()
                if word.isdigit() and self.i < len(s) and s[self.i] in "<>":
                    out.append(_Tok("fd", word, line))
                else:
                    out.append(_Tok("word", word, line))
        out.append(_Tok("nl", "\n", self.line))
        return out

    def _heredoc(self, strip_tabs: bool) -> None:
        s = self.s
        while self.i < len(s) and s[self.i] in " \t":
            self.i += 1
        word = self._word()
        self.heredocs.append((word.replace("'", "").replace('"', "").replace("\\", ""), strip_tabs))

    def _skip_heredocs(self) -> None:
        s = self.s
        while self.heredocs:
            delim, strip_tabs = self.heredocs.pop(0)
            while self.i < len(s):
                end = s.find("\n", self.i)
                end = len(s) if end < 0 else end
                text = s[self.i:end]
                self.i = min(len(s), end + 1)
                self.line += 1
                if (text.lstrip("\t") if strip_tabs else text) == delim:
                    break

    def _array(self) -> list[str]:
        s = self.s
        items: list[str] = []
        while True:
            if self.i >= len(s):
                raise self.error("unterminated array ( ... )")
            c = s[self.i]
            if c == "\\" and s.startswith("\\\n", self.i):
                self.i += 2
                self.line += 1
            elif c in " \t\r":
                self.i += 1
            elif c == "\n":
                self.i += 1
                self.line += 1
            elif c == "#":
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
            elif c == ")":
                self.i += 1
                return items
            else:
                items.append(self._word())

    def _word(self) -> str:
        s = self.s
        start_line = self.line
        buf: list[str] = []
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r\n;&|()<>":
                break
            if c == "\\":
                if s.startswith("\\\n", self.i):
                    self.i += 2
                    self.line += 1
                    continue
                buf.append(s[self.i:self.i + 2])
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    self.line = start_line
                    raise self.error("unterminated single quote")
                buf.append(s[self.i:end + 1])
                self.line += s.count("\n", self.i, end)
                self.i = end + 1
            elif c == '"':
                buf.append(self._double())
            elif c == "`":
                buf.append(self._backtick())
            elif c == "$":
                buf.append(self._dollar())
            else:
                buf.append(c)
                self.i += 1
        return "".join(buf)

    def _double(self) -> str:
        s = self.s
        start = self.i
        self.i += 1
        parts = ['"']
        while self.i < len(s):
            c = s[self.i]
            if c == '"':
                self.i += 1
                parts.append('"')
                return "".join(parts)
            if c == "\\":
                if s.startswith("\\\n", self.i):
                    self.i += 2
                    self.line += 1
                    continue
                parts.append(s[self.i:self.i + 2])
                self.i += 2
            elif c == "$":
                parts.append(self._dollar())
            elif c == "`":
                parts.append(self._backtick())
            else:
                if c == "\n":
                    self.line += 1
                parts.append(c)
                self.i += 1
        self.i = start
        raise self.error("unterminated double quote")

    def _backtick(self) -> str:
        s = self.s
        j = self.i + 1
        while j < len(s) and s[j] != "`":
            j += 2 if s[j] == "\\" else 1
        if j >= len(s):
            raise self.error("unterminated backquote")
        text = s[self.i:j + 1]
        self.line += text.count("\n")
        self.i = j + 1
        return text

    def _dollar(self) -> str:
        s = self.s
        if s.startswith("$((", self.i):
            return self._balanced(3, "(", ")", closing=2)
        if s.startswith("$(", self.i):
            return self._balanced(2, "(", ")")
        if s.startswith("${", self.i):
            return self._balanced(2, "{", "}")
        if s.startswith("$'", self.i):
            j = self.i + 2
            while j < len(s) and s[j] != "'":
                j += 2 if s[j] == "\\" else 1
            if j >= len(s):
                raise self.error("unterminated $'...'")
            text = s[self.i:j + 1]
            self.i = j + 1
            return text
        self.i += 1
        return "$"

    def _balanced(self, skip: int, open_: str, close: str, closing: int = 1) -> str:
        """From `$(`/`${`/`$((` to its match, quote-aware; returns the raw text."""
        s = self.s
        start, depth, j = self.i, 1, self.i + skip
        if closing == 2:
            depth = 2
        while j < len(s):
            c = s[j]
            if c == "\\":
                j += 2
                continue
            if c == "'" and open_ == "(":
                end = s.find("'", j + 1)
                j = (end if end >= 0 else len(s)) + 1
                continue
            if c == '"':
                k = j + 1
                while k < len(s) and s[k] != '"':
                    k += 2 if s[k] == "\\" else 1
                j = k + 1
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    text = s[start:j + 1]
                    self.line += text.count("\n")
                    self.i = j + 1
                    return text
            j += 1
        raise self.error(f"unterminated {s[start:start + skip]}")


# --- expansion -------------------------------------------------------------------------------------


class _Expander:
    """Expands one word with the variables known at that point; collects what stays unresolved."""

    def __init__(self, state: _State) -> None:
        self.st = state
        self.refs: list[Unresolved] = []
        self.passthrough = False

    def fields(self, raw: str) -> list[str]:
        """A word as a command argument: 0..n fields (arrays, word splitting of unquoted expansions)."""
        if re.fullmatch(r'"\$(?:\{[@*]\}|[@*])"', raw):
            self.passthrough = True
            return []
        m = re.fullmatch(r'"\$\{([A-Za-z_][A-Za-z0-9_]*)\[@\]\}"', raw)
        if m:  # "${ARR[@]}" alone: one field per element, none for an empty array
            vals, _, _ = self._dollar(raw[1:-1], 0)
            return vals
        return self._expand(raw, split=True)

    def string(self, raw: str) -> str:
        """A word in assignment context: no word splitting, one string."""
        return " ".join(self._expand(raw, split=False))

    def _expand(self, raw: str, split: bool) -> list[str]:
        fields = [""]
        present = False
        brk = False  # an unquoted expansion ended in blanks: the next text starts a new field

        def lit(text: str) -> None:
            nonlocal present, brk
            if brk:
                fields.append("")
                brk = False
            fields[-1] += text
            if len(fields[-1]) > MAX_VALUE_CHARS:
                raise ShellLimitError(f"a word expands to more than {MAX_VALUE_CHARS} characters", self.st.line)
            present = True

        def unquoted(vals: list[str]) -> None:
            nonlocal brk, present
            text = " ".join(vals)
            if not split:
                lit(text)
                return
            parts = text.split()
            if not parts:
                if text and fields[-1]:
                    brk = True
                return
            if text[:1].isspace() and (fields[-1] or brk):
                brk = True
            lit(parts[0])
            fields.extend(parts[1:])
            brk = text[-1:].isspace()

        i = 0
        if raw.startswith("~") and (len(raw) == 1 or raw[1] in "/:"):
            home = self.st.lookup("HOME")
            lit(self._text(home) if home else self._unset("HOME", "the home folder of the machine that runs it"))
            i = 1
        while i < len(raw):
            c = raw[i]
            if c == "'":
                end = raw.index("'", i + 1)
                lit(raw[i + 1:end])
                i = end + 1
            elif c == '"':
                lit("")
                i = self._in_double(raw, i + 1, fields)
            elif c == "\\":
                lit(raw[i + 1:i + 2])
                i += 2
            elif raw.startswith("$'", i):
                end = i + 2
                while raw[end] != "'":
                    end += 2 if raw[end] == "\\" else 1
                lit(_ansi_c(raw[i + 2:end]))
                i = end + 1
            elif c in "$`":
                if split and raw[i:] in ("$@", "$*", "${@}", "${*}") and not fields[-1] and not present:
                    self.passthrough = True
                    return []
                vals, i, _ = self._dollar(raw, i)
                unquoted(vals)
            else:
                lit(c)
                i += 1
        if not present:
            return []
        return fields

    def _in_double(self, raw: str, i: int, fields: list[str]) -> int:
        while raw[i] != '"':
            c = raw[i]
            if c == "\\" and raw[i + 1] in '$`"\\':
                fields[-1] += raw[i + 1]
                i += 2
            elif c in "$`":
                for special in ("${@}", "$@", "${*}", "$*"):
                    if raw.startswith(special, i):
                        self.passthrough = True
                        i += len(special)
                        break
                else:
                    vals, i, is_list = self._dollar(raw, i)
                    if is_list:
                        if vals:
                            fields[-1] += vals[0]
                            fields.extend(vals[1:])
                    else:
                        fields[-1] += " ".join(vals)
            else:
                fields[-1] += c
                i += 1
        return i + 1

    def _dollar(self, raw: str, i: int) -> tuple[list[str], int, bool]:
        """The `$...` or backquote at raw[i]: (values, next index, is a "${ARR[@]}" list)."""
        if raw[i] == "`":
            end = raw.index("`", i + 1)
            return [self._cmd(raw[i + 1:end])], end + 1, False
        if raw.startswith("$((", i):
            end = _match(raw, i + 1, "(", ")")
            return [self._arith(raw[i + 3:end - 1])], end + 1, False
        if raw.startswith("$(", i):
            end = _match(raw, i + 1, "(", ")")
            return [self._cmd(raw[i + 2:end])], end + 1, False
        if raw.startswith("${", i):
            end = _match(raw, i + 1, "{", "}")
            vals, is_list = self._param(raw[i + 2:end])
            return vals, end + 1, is_list
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9#?$!\-]").match(raw, i + 1)
        if not m:
            return ["$"], i + 1, False
        return [self._scalar(m.group(0))], m.end(), False

    def _unset(self, name: str, reason: str) -> str:
        self.refs.append(Unresolved(name, reason, self.st.line))
        return PLACEHOLDER + name

    def _text(self, var: _Var) -> str:
        self.refs.extend(var.refs)
        if isinstance(var.value, list):
            return var.value[0] if var.value else ""
        return var.value

    def _scalar(self, name: str) -> str:
        if name.isdigit():
            if name == "0":
                if self.st.script is None:
                    return self._unset("SCRIPT", "the script's own path ($0) was not given")
                return self.st.script
            return self._unset(f"ARG{name}", f"positional parameter ${name}: an argument of the script")
        if name in "#?$!-":
            return self._unset("SPECIAL", f"${name} is only known at run time")
        var = self.st.lookup(name)
        if var is None:
            return self._unset(name, "not set in the script: taken from the environment")
        return self._text(var)

    def _param(self, body: str) -> tuple[list[str], bool]:
        """${...}: (values, is an "@" list)."""
        m = re.fullmatch(r"#([A-Za-z_][A-Za-z0-9_]*)(\[[@*]\])?", body)
        if m:
            var = self.st.lookup(m.group(1))
            if var is None:
                return [self._unset(m.group(1), "not set in the script: taken from the environment")], False
            self.refs.extend(var.refs)
            if m.group(2):
                return [str(len(var.value) if isinstance(var.value, list) else 1)], False
            return [str(len(self._text(var)))], False
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*])(\[([^\]]*)\])?", body)
        if not m:
            return [self._unset("EXPANSION", f"unsupported expansion ${{{body}}}")], False
        name, index, rest = m.group(1), m.group(3), body[m.end():]
        if name in ("@", "*"):
            self.passthrough = True
            return [], True
        if name == "BASH_SOURCE" and index in ("0", None):
            value: Text | None = self._scalar("0")
        elif name.isdigit():
            value = self._scalar(name)
        else:
            var = self.st.lookup(name)
            value = None
            if var is not None:
                self.refs.extend(var.refs)
                value = var.value
        if index is not None and value is not None and name != "BASH_SOURCE":
            items = value if isinstance(value, list) else [value]
            if index in ("@", "*"):
                if not rest:
                    return (list(items), True) if index == "@" else ([" ".join(items)], False)
                value = " ".join(items)
            else:
                k_text = self._arith(index)
                if not re.fullmatch(r"-?\d+", k_text):
                    return [k_text], False
                k = int(k_text)
                value = items[k] if -len(items) <= k < len(items) else None
        elif isinstance(value, list):
            value = value[0] if value else ""
        if not rest:
            if value is None:
                return [self._unset(name, "not set in the script: taken from the environment")], False
            return [str(value)], False
        op = re.match(r":?[-=+?]|,,|\^\^|,|\^|##|#|%%|%|//|/", rest)
        if not op:
            return [self._unset(name, f"unsupported expansion ${{{body}}}")], False
        word, kind = rest[op.end():], op.group(0)
        if kind in (":-", "-", ":=", "=", ":?", "?"):
            if value is not None and not (kind.startswith(":") and value == ""):
                return [str(value)], False
            if kind.endswith("?"):
                return [self._unset(name, f"required by the script (${{{body}}}) and not set")], False
            before = len(self.refs)
            default = self.string(word)
            if kind.endswith("="):
                self.st.vars[name] = _Var(default, tuple(self.refs[before:]))
            return [default], False
        if kind in (":+", "+"):
            present = value is not None and (kind == "+" or value != "")
            return [self.string(word) if present else ""], False
        if value is None:
            return [self._unset(name, "not set in the script: taken from the environment")], False
        value = str(value)
        if kind in (",,", ","):
            return [value.lower() if kind == ",," else value[:1].lower() + value[1:]], False
        if kind in ("^^", "^"):
            return [value.upper() if kind == "^^" else value[:1].upper() + value[1:]], False
        pattern = self.string(word)
        if kind in ("#", "##"):
            cuts = [k for k in range(len(value) + 1) if fnmatch.fnmatchcase(value[:k], pattern)]
            return [value[(max(cuts) if kind == "##" else min(cuts)):] if cuts else value], False
        if kind in ("%", "%%"):
            cuts = [k for k in range(len(value) + 1) if fnmatch.fnmatchcase(value[k:], pattern)]
            return [value[:(min(cuts) if kind == "%%" else max(cuts))] if cuts else value], False
        pat, _, rep = pattern.partition("/")
        if any(ch in pat for ch in "*?["):
            return [self._unset(name, f"pattern substitution ${{{body}}} is not evaluated")], False
        return [value.replace(pat, rep) if kind == "//" else value.replace(pat, rep, 1)], False

    def _cmd(self, body: str) -> str:
        """Command substitution: only the "folder of this script" idioms are evaluated, nothing is run."""
        text = " ".join(body.replace("\\\n", " ").split())
        src = r'(?:"\$\{BASH_SOURCE\[0\]\}"|\$\{BASH_SOURCE\[0\]\}|"\$\{BASH_SOURCE\}"|"\$BASH_SOURCE"|\$BASH_SOURCE|"\$0"|\$0)'
        dirname = rf"dirname (?:-- )?{src}"
        script = self.st.script
        if re.fullmatch(r"pwd(?: -[PL])?", text):
            return self.st.pwd()
        if script is not None:
            if re.fullmatch(dirname, text):
                return posixpath.dirname(script) or "."
            if re.fullmatch(rf'cd (?:-- )?"?\$\({dirname}\)"? ?(?:&&|;) ?pwd(?: -P)?', text):
                return os.path.dirname(os.path.abspath(script))
            if re.fullmatch(rf"(?:realpath|readlink -f) {src}", text):
                return os.path.abspath(script)
            if re.fullmatch(rf'dirname "?\$\((?:realpath|readlink -f) {src}\)"?', text):
                return os.path.dirname(os.path.abspath(script))
        return self._unset("CMD", f"command substitution $({text}) is not run")

    def _arith(self, expr: str) -> str:
        """$((...)): integer arithmetic; an unknown variable makes the result unresolved."""
        before = len(self.refs)
        text = self.string(expr) if ("$" in expr or "`" in expr) else expr
        if len(self.refs) > before:
            return PLACEHOLDER + self.refs[-1].name

        def value_of(m: re.Match[str]) -> str:
            var = self.st.lookup(m.group(0))
            if var is None:
                raise _Unknown(m.group(0))
            v = self._text(var).strip()
            if PLACEHOLDER in v:
                raise _Unknown(m.group(0))
            if re.fullmatch(r"-?\d+", v):
                return v
            return f"({_eval_int(re.sub(r'[A-Za-z_][A-Za-z0-9_]*', value_of, v))})"

        try:
            return str(_eval_int(re.sub(r"[A-Za-z_][A-Za-z0-9_]*", value_of, text)))
        except _Unknown as exc:
            return self._unset(exc.name, f"used in $(({expr.strip()})) and not set in the script")
        except (SyntaxError, ValueError, ZeroDivisionError, TypeError, RecursionError) as exc:
            return self._unset("ARITH", f"$(({expr.strip()})) cannot be evaluated ({type(exc).__name__})")


class _Unknown(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _match(s: str, i: int, open_: str, close: str) -> int:
    """Index of the bracket that closes the one at s[i] (quote-aware)."""
    depth, j = 0, i
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "'" and open_ == "(":
            j = s.index("'", j + 1) + 1
            continue
        if c == '"':
            k = j + 1
            while s[k] != '"':
                k += 2 if s[k] == "\\" else 1
            j = k + 1
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    raise ShellSyntaxError(f"unbalanced {open_}{close} in {s!r}")


def _ansi_c(body: str) -> str:
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


def _div(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("division by 0")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _i64(v: int) -> int:
    """bash arithmetic is signed 64-bit with wraparound (intmax_t)."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def _pow(a: int, b: int) -> int:
    if b < 0:
        raise ValueError("exponent less than 0")
    return _i64(pow(a, b, 1 << 64))


_INT_OPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: _div, ast.FloorDiv: _div, ast.Mod: lambda a, b: a - b * _div(a, b), ast.Pow: _pow,
    ast.LShift: lambda a, b: a << (b & 63), ast.RShift: lambda a, b: a >> (b & 63), ast.BitAnd: lambda a, b: a & b,
    ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b,
}
_CMP_OPS = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
            ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}


def _eval_int(text: str) -> int:
    """A bash integer expression (no assignments, increments or ?:), evaluated without eval()."""
    if len(text) > MAX_EXPR_CHARS:
        raise ValueError(f"arithmetic expression longer than {MAX_EXPR_CHARS} characters")
    if re.search(r"\?|(?<![=!<>])=(?!=)|\+\+|--", text):
        raise ValueError("assignment, increment or ?: is not supported")
    py = re.sub(r"!(?!=)", " not ", text.replace("&&", " and ").replace("||", " or ")).strip()
    try:
        tree = ast.parse(py or "0", mode="eval")
    except (RecursionError, MemoryError):
        raise ValueError("arithmetic nested too deeply") from None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
            return _i64(int(_INT_OPS[type(node.op)](ev(node.left), ev(node.right))))
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            ops = {ast.USub: _i64(-v), ast.UAdd: v, ast.Invert: ~v, ast.Not: int(not v)}
            if type(node.op) in ops:
                return ops[type(node.op)]
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP_OPS:
            return int(_CMP_OPS[type(node.ops[0])](ev(node.left), ev(node.comparators[0])))
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return int(all(vals) if isinstance(node.op, ast.And) else any(vals))
        raise ValueError("unsupported arithmetic")

    try:
        return ev(tree)
    except RecursionError:
        raise ValueError("arithmetic nested too deeply") from None


# --- the interpreter -------------------------------------------------------------------------------


def _launch_index(words: list[str]) -> int | None:
    """Index of the first argument after the main_ppo module or script, or None."""
    for k, w in enumerate(words):
        if w == MODULE and k > 0 and words[k - 1] == "-m":
            return k + 1
        if w == "-m" + MODULE:
            return k + 1
        if w.endswith("verl/trainer/main_ppo.py") or w == "main_ppo.py":
            return k + 1
    return None


_VALUE_FLAGS = {"--cfg", "-c", "--package", "-p", "--experimental-rerun"}


def _split_launch(launch: Launch) -> None:
    """Hydra's own flags (config path/name/dir, --cfg job, ...) apart from the overrides."""
    args = launch.args
    k = 0
    while k < len(args):
        a = args[k]
        flag, eq, value = a.partition("=")
        if flag in _HYDRA_FLAGS:
            if not eq:
                value = args[k + 1] if k + 1 < len(args) else ""
                k += 1
            setattr(launch, _HYDRA_FLAGS[flag], value)
        elif a.startswith("-"):
            if a in _VALUE_FLAGS:
                k += 1
        else:
            launch.overrides.append(a)
        k += 1


def extract(text: str, *, script_path: str | None = None, env: Mapping[str, str] | None = None) -> Extraction:
    """Read a launch script; return the main_ppo command's Hydra overrides and what stays unresolved.

    `script_path` resolves `$0`/`${BASH_SOURCE[0]}` and the folder idioms; `env` holds the environment
    variables to assume (nothing from the real environment is read unless it is passed here).
    Raises ShellLimitError when the script would pass one of the reader's bounds.
    """
    if len(text) > MAX_SCRIPT_CHARS:
        raise ShellLimitError(f"the script is longer than {MAX_SCRIPT_CHARS} characters", 1)
    try:
        return _extract(text, script_path, env)
    except (RecursionError, MemoryError):
        raise ShellLimitError("expansions nested too deeply", 0) from None


def _extract(text: str, script_path: str | None, env: Mapping[str, str] | None) -> Extraction:
    tokens = _Lexer(text).tokens()
    state = _State(vars={}, env=dict(env or {}), script=script_path)
    result = Extraction(launch=None, script=script_path)
    blocks: list[str] = []  # open if/case/loop/{ }/subshell blocks

    def run(cmd: list[_Tok], chained: bool) -> None:
        clean: list[_Tok] = []
        skip = False
        for t in cmd:  # drop redirections and their targets
            if skip:
                skip = False
            elif t.kind == "fd":
                pass
            elif t.kind == "op" and t.text in _REDIRECTS or t.kind == "op" and t.text in ("<<", "<<-"):
                skip = True
            else:
                clean.append(t)
        while clean and clean[0].kind == "word" and clean[0].text in _LEADING:
            clean = clean[1:]
        if clean and clean[0].kind == "word" and clean[0].text in _CLOSE:
            if blocks:
                blocks.pop()
            clean = clean[1:]
        if not clean:
            return
        first = clean[0]
        if first.kind == "word" and first.text in _OPEN:
            blocks.append(first.text)
            return
        if first.kind == "word" and first.text == "function" or (
                len(clean) >= 3 and clean[1].kind == "op" and clean[1].text == "("):
            if any(t.kind == "word" and t.text == "{" for t in clean):
                blocks.append("{")
            return
        conditional = chained or bool(blocks)
        state.line = first.line
        k = 0
        while k < len(clean) and (clean[k].kind == "array" or (clean[k].kind == "word" and _ASSIGN.match(clean[k].text))):
            k += 1
        prefix, rest = clean[:k], clean[k:]
        if not rest:  # plain assignments change the script's variables
            for t in prefix:
                if t.kind == "array":
                    _assign_array(state, t, conditional)
                else:
                    _assign(state, t.text, conditional, t.line)
            return
        # VAR=x cmd ...: the assignment is for that one command only
        head = rest[0].text if rest[0].kind == "word" else ""
        if head in _DECLARE:
            for t in rest[1:]:
                if t.kind == "array":
                    _assign_array(state, t, conditional)
                elif t.kind == "word" and _ASSIGN.match(t.text):
                    _assign(state, t.text, conditional, t.line)
            return
        if head == "unset":
            for t in rest[1:]:
                if t.kind == "word" and not t.text.startswith("-"):
                    state.vars.pop(t.text, None)
            return
        if head in ("source", "."):
            result.notes.append(f"line {rest[0].line}: `{head} ...` is not followed; what it sets stays unresolved")
            return
        raw = [t.text for t in rest if t.kind == "word"]
        if head != "cd" and not any("main_ppo" in w or "$" in w for w in raw):
            return
        exp = _Expander(state)
        words: list[str] = []
        for w in raw:
            words.extend(exp.fields(w))
        if head == "cd":
            if conditional:
                return  # a cd inside a subshell, branch or function does not move the launch
            if len(words) < 2 or PLACEHOLDER in words[1]:
                result.workdir = None
            else:
                base = result.workdir or (os.path.dirname(os.path.abspath(script_path)) if script_path else os.getcwd())
                result.workdir = os.path.normpath(os.path.join(base, os.path.expanduser(words[1])))
            state.cwd = result.workdir
            return
        start = _launch_index(words)
        if start is None:
            return
        if result.launch is not None:
            result.notes.append(f"line {first.line}: another main_ppo launch; only the first (line "
                                f"{result.launch.line}) is read")
            return
        launch = Launch(line=first.line, args=words[start:], passthrough=exp.passthrough, conditional=conditional)
        _split_launch(launch)
        result.launch = launch
        seen: set[tuple[str, str]] = set()
        for ref in exp.refs:
            if (ref.name, ref.reason) not in seen and any(ref.placeholder in a for a in launch.args):
                seen.add((ref.name, ref.reason))
                result.unresolved.append(ref)
        if conditional:
            result.notes.append(f"line {first.line}: the launch is inside a conditional block or function")
        if launch.passthrough:
            result.notes.append(f"line {first.line}: the script forwards its own arguments (\"$@\"); "
                                "give them after -- to check them too")

    cmd: list[_Tok] = []
    chained = False
    for tok in tokens:
        if tok.kind == "op" and tok.text in _CHAINS:
            run(cmd, chained)
            cmd, chained = [], True
        elif tok.kind == "op" and tok.text in _PIPES:
            run(cmd, chained)
            cmd = []
        elif tok.kind == "op" and tok.text == "(" and cmd and cmd[-1].kind == "word":
            cmd.append(tok)  # name() function definition
        elif tok.kind == "op" and tok.text == ")" and cmd and cmd[-1].kind == "op" and cmd[-1].text == "(":
            cmd.append(tok)
        elif tok.kind == "nl" or (tok.kind == "op" and tok.text in _SEPARATORS):
            run(cmd, chained)
            cmd = []
            if tok.text == "(":
                blocks.append("(")  # a subshell: what it assigns does not reach the script
            elif tok.text == ")" and blocks and blocks[-1] == "(":
                blocks.pop()  # inside `case`, `)` only ends a pattern
            if tok.kind == "nl" or tok.text in (";", "&", ";;"):
                chained = False
        else:
            cmd.append(tok)
    run(cmd, chained)
    return result


def _assign(state: _State, text: str, conditional: bool, line: int) -> None:
    m = _ASSIGN.match(text)
    if not m:
        return
    name, index, append = m.group(1), m.group(2), bool(m.group(3))
    if conditional:
        state.vars[name] = _Var(PLACEHOLDER + name,
                                (Unresolved(name, f"assigned inside a conditional at line {line}", line),))
        return
    state.line = line
    exp = _Expander(state)
    value = exp.string(text[m.end():])
    refs = tuple(exp.refs)
    old_len = len(state.vars[name].value) if name in state.vars and isinstance(state.vars[name].value, str) else 0
    if len(value) + (old_len if append else 0) > MAX_VALUE_CHARS:
        raise ShellLimitError(f"${name} would hold more than {MAX_VALUE_CHARS} characters", line)
    old = state.lookup(name)
    if index:
        items: list[str] = list(old.value) if old and isinstance(old.value, list) else ([str(old.value)] if old else [])
        k_text = exp.string(index[1:-1])
        try:
            k = _eval_int(k_text)
        except (ValueError, SyntaxError):
            state.vars[name] = _Var(PLACEHOLDER + name, (Unresolved(name, f"array index {index} at line {line}", line),))
            return
        items.extend([""] * (k + 1 - len(items)))
        items[k] = value
        state.vars[name] = _Var(items, (old.refs if old else ()) + refs)
    elif append and old is not None:
        if isinstance(old.value, list):
            first = (old.value[0] if old.value else "") + value
            state.vars[name] = _Var([first] + list(old.value[1:]), old.refs + refs)
        else:
            state.vars[name] = _Var(old.value + value, old.refs + refs)
    else:
        state.vars[name] = _Var(value, refs)


def _assign_array(state: _State, tok: _Tok, conditional: bool) -> None:
    name = tok.text
    if conditional:
        state.vars[name] = _Var([PLACEHOLDER + name],
                                (Unresolved(name, f"array assigned inside a conditional at line {tok.line}", tok.line),))
        return
    state.line = tok.line
    exp = _Expander(state)
    items: list[str] = []
    for raw in tok.items:
        items.extend(exp.fields(raw))
        if len(items) > MAX_ARRAY_ITEMS or sum(map(len, items)) > MAX_VALUE_CHARS:
            raise ShellLimitError(f"array {name} would hold more than {MAX_ARRAY_ITEMS} items or "
                                  f"{MAX_VALUE_CHARS} characters", tok.line)
    old = state.vars.get(name)
    if tok.append and old is not None and isinstance(old.value, list) and len(old.value) + len(items) > MAX_ARRAY_ITEMS:
        raise ShellLimitError(f"array {name} would hold more than {MAX_ARRAY_ITEMS} items", tok.line)
    if tok.append and old is not None:
        prev = old.value if isinstance(old.value, list) else [old.value]
        state.vars[name] = _Var(list(prev) + items, old.refs + tuple(exp.refs))
    else:
        state.vars[name] = _Var(items, tuple(exp.refs))


def extract_file(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> Extraction:
    p = Path(path)
    with open(p, "rb") as fh:
        data = fh.read(MAX_SCRIPT_CHARS + 1)
    return extract(data.decode("utf-8", errors="replace"), script_path=str(p), env=env)


def looks_like_script(text: str) -> bool:
    """A shell script rather than YAML: a shebang, or a main_ppo launch line."""
    head = text.lstrip()[:200]
    return head.startswith("#!") or bool(re.search(r"(?m)^[^#\n]*(-m\s+verl\.trainer\.main_ppo|main_ppo\.py)", text))


def adopt_traced(ex: Extraction, module: str, args: list[str], needed: Sequence[str] = ()) -> None:
    """Take the argument vector bash really passed to main_ppo (wizard.check.bashtrace) as the launch.

    Where this reader marked a value as taken from the environment (UNSET_X) and bash, with X unset,
    expanded the same argument to that value with X empty, the marked value is kept: it says where the
    value comes from. Every other argument is bash's (branches, arrays, functions as bash ran them)."""
    static = {a.partition("=")[0]: a for a in (ex.launch.args if ex.launch else []) if PLACEHOLDER in a}
    merged = []
    for arg in args:
        key = arg.partition("=")[0]
        mine = static.get(key)
        if mine is not None and re.sub(PLACEHOLDER + r"[A-Za-z0-9_]*", "", mine) == arg:
            merged.append(mine)
        else:
            merged.append(arg)
    line = ex.launch.line if ex.launch else 0
    launch = Launch(line=line, args=merged, passthrough=bool(ex.launch and ex.launch.passthrough),
                    conditional=bool(ex.launch and ex.launch.conditional))
    _split_launch(launch)
    text = " ".join(merged)
    ex.unresolved = [u for u in ex.unresolved if u.placeholder in text]
    known = {u.name for u in ex.unresolved}
    for name in needed:
        if name not in known:
            ex.unresolved.append(Unresolved(name, "the script stops without it (set -u or ${X:?})", line))
    ex.notes = [n for n in ex.notes if "conditional" not in n and "another main_ppo launch" not in n]
    ex.notes.append(f"read as bash runs it (in a sandbox, commands stubbed): {module}"
                    + (f" at line {line}" if line else ""))
    ex.launch = launch
