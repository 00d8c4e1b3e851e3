"""Expansion of one shell word with the variables known at that point (parameters, arrays, `$((...))`, the
"folder of this script" command substitutions); what stays unknown becomes an UNSET_<NAME> placeholder."""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re

from wizard.check.shell.arith import _eval_int
from wizard.check.shell.model import (MAX_VALUE_CHARS, PLACEHOLDER, ShellLimitError, ShellSyntaxError, Text, Unresolved,
                                      _State, _Var)


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

