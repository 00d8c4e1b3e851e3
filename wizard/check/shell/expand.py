"""Expansion of one shell word with the variables known at that point (parameters, arrays, `$((...))`, the
"folder of this script" command substitutions); what stays unknown becomes an UNSET_<NAME> placeholder."""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re

from wizard.check.shell.arith import _eval_int
from wizard.check.shell.lex import LOOP_STEPS
from wizard.check.shell.model import (MAX_COMMAND_CHARS, MAX_COMMAND_WORDS, MAX_VALUE_CHARS, PLACEHOLDER, ShellLimitError,
                                      ShellSyntaxError, Text, Unresolved, _State, _Var)


_DQ_PLAIN = re.compile(r'[^"\\$`]+')  # a run of characters that stand for themselves inside "..."
_PLAIN = re.compile(r"[^'\"\\$`]+")  # ... and outside quotes (a word holds no blank)
ARITH_STEPS = 256  # one variable's value evaluated inside $((...)) (a parse and an evaluation)
_SCALAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9#?$!\-]")


class _Fields:
    """The fields one word expands to, the last one built from pieces (joined once: no quadratic copying),
    counted against the command's bounds as they grow."""

    def __init__(self, exp: _Expander) -> None:
        self.exp = exp
        self.done: list[str] = []
        self.cur: list[str] = []
        self.n = 0  # characters in the current field
        exp.grow(1, 0)

    def add(self, text: str) -> None:
        self.cur.append(text)
        self.n += len(text)
        if self.n > MAX_VALUE_CHARS:
            raise ShellLimitError(f"a word expands to more than {MAX_VALUE_CHARS} characters", self.exp.st.line)
        self.exp.grow(0, len(text))

    def new(self, first: list[str] = ()) -> None:  # type: ignore[assignment]
        """End the current field; `first` are whole fields after it, the last of which goes on growing."""
        self.done.append("".join(self.cur))
        self.cur, self.n = [], 0
        if first:
            self.exp.grow(len(first), sum(map(len, first)))
            self.done.extend(first[:-1])
            self.cur, self.n = [first[-1]], len(first[-1])
        else:
            self.exp.grow(1, 0)

    def result(self) -> list[str]:
        return self.done + ["".join(self.cur)]


class _Expander:
    """Expands one word with the variables known at that point; collects what stays unresolved. One expander
    serves one command: the words and characters of all its fields are counted against the bounds."""

    def __init__(self, state: _State) -> None:
        self.st = state
        self.refs: list[Unresolved] = []
        self.passthrough = False
        self.words = 0
        self.chars = 0

    def grow(self, words: int, chars: int) -> None:
        """The command gains `words` fields and `chars` characters."""
        self.words += words
        self.chars += chars
        self.st.copy(chars)
        if self.words > MAX_COMMAND_WORDS:
            raise ShellLimitError(f"a command expands to more than {MAX_COMMAND_WORDS} words", self.st.line)
        if self.chars > MAX_COMMAND_CHARS:
            raise ShellLimitError(f"a command expands to more than {MAX_COMMAND_CHARS >> 20} MiB", self.st.line)

    def fields(self, raw: str) -> list[str]:
        """A word as a command argument: 0..n fields (arrays, word splitting of unquoted expansions)."""
        self.st.charge(1 + len(raw))
        if re.fullmatch(r'"\$(?:\{[@*]\}|[@*])"', raw):
            self.passthrough = True
            return []
        m = re.fullmatch(r'"\$\{([A-Za-z_][A-Za-z0-9_]*)\[@\]\}"', raw)
        if m:  # "${ARR[@]}" alone: one field per element, none for an empty array
            vals, _, _ = self._dollar(raw[1:-1], 0)
            self.grow(len(vals), sum(map(len, vals)))
            return vals
        return self._expand(raw, split=True)

    def string(self, raw: str) -> str:
        """A word in assignment context: no word splitting, one string."""
        return " ".join(self._expand(raw, split=False))

    def _expand(self, raw: str, split: bool) -> list[str]:
        self.st.charge(1 + len(raw))
        fields = _Fields(self)
        present = False
        brk = False  # an unquoted expansion ended in blanks: the next text starts a new field

        def lit(text: str) -> None:
            nonlocal present, brk
            if brk:
                fields.new()
                brk = False
            fields.add(text)
            present = True

        def unquoted(vals: list[str]) -> None:
            nonlocal brk, present
            text = " ".join(vals)
            if not split:
                lit(text)
                return
            room = MAX_COMMAND_WORDS - self.words
            parts = text.split(None, room)
            self.st.copy(len(text))
            if len(parts) > room:
                raise ShellLimitError(f"a command expands to more than {MAX_COMMAND_WORDS} words", self.st.line)
            if not parts:
                if text and fields.n:
                    brk = True
                return
            if text[:1].isspace() and (fields.n or brk):
                brk = True
            lit(parts[0])
            if len(parts) > 1:
                fields.new(parts[1:])
            brk = text[-1:].isspace()

        i = 0
        if raw.startswith("~") and (len(raw) == 1 or raw[1] in "/:"):
            home = self.st.lookup("HOME")
            lit(self._text(home) if home else self._unset("HOME", "the home folder of the machine that runs it"))
            i = 1
        while i < len(raw):
            c = raw[i]
            if c == "'":
                end = raw.find("'", i + 1)
                if end < 0:
                    raise ShellSyntaxError(f"line {self.st.line}: unterminated single quote")
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
                while end < len(raw) and raw[end] != "'":
                    end += 2 if raw[end] == "\\" else 1
                if end >= len(raw):
                    raise ShellSyntaxError(f"line {self.st.line}: unterminated $'...'")
                lit(_ansi_c(raw[i + 2:end], self.st.line))
                i = end + 1
            elif c in "$`":
                if split and raw[i:] in ("$@", "$*", "${@}", "${*}") and not fields.n and not present:
                    self.passthrough = True
                    return []
                vals, i, _ = self._dollar(raw, i)
                unquoted(vals)
            else:
                m = _PLAIN.match(raw, i)
                lit(m.group(0) if m else c)
                i = m.end() if m else i + 1
        if not present:
            return []
        return fields.result()

    def _in_double(self, raw: str, i: int, fields: _Fields) -> int:
        while True:
            if i >= len(raw):
                raise ShellSyntaxError(f"line {self.st.line}: unterminated double quote")
            c = raw[i]
            if c == '"':
                return i + 1
            if c == "\\" and raw[i + 1:i + 2] in ('$', '`', '"', '\\'):
                fields.add(raw[i + 1])
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
                            fields.add(vals[0])
                            if len(vals) > 1:
                                fields.new(vals[1:])
                    else:
                        fields.add(" ".join(vals))
            elif c == "\\":
                fields.add(c)
                i += 1
            else:
                m = _DQ_PLAIN.match(raw, i)
                fields.add(m.group(0))
                i = m.end()

    def _dollar(self, raw: str, i: int) -> tuple[list[str], int, bool]:
        """The `$...` or backquote at raw[i]: (values, next index, is a "${ARR[@]}" list)."""
        if raw[i] == "`":
            end = raw.find("`", i + 1)
            if end < 0:
                raise ShellSyntaxError(f"line {self.st.line}: unterminated backquote")
            return [self._cmd(raw[i + 1:end])], end + 1, False
        if raw.startswith("$((", i):
            end = _match(raw, i + 1, "(", ")", self.st)
            return [self._arith(raw[i + 3:end - 1])], end + 1, False
        if raw.startswith("$(", i):
            end = _match(raw, i + 1, "(", ")", self.st)
            return [self._cmd(raw[i + 2:end])], end + 1, False
        if raw.startswith("${", i):
            end = _match(raw, i + 1, "{", "}", self.st)
            vals, is_list = self._param(raw[i + 2:end])
            return vals, end + 1, is_list
        m = _SCALAR.match(raw, i + 1)
        if not m:
            return ["$"], i + 1, False
        return [self._scalar(m.group(0))], m.end(), False

    def _unset(self, name: str, reason: str) -> str:
        self.refs.append(Unresolved(name, reason, self.st.line))
        return PLACEHOLDER + name

    def _text(self, var: _Var) -> str:
        self.st.charge(1 + len(var.refs))
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
            self.st.charge(1 + len(var.refs))
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
                self.st.charge(1 + len(var.refs))
                self.refs.extend(var.refs)
                value = var.value
        if index is not None and value is not None and name != "BASH_SOURCE":
            items = value if isinstance(value, list) else [value]
            if index in ("@", "*"):
                if not rest:
                    self.st.charge(1 + len(items))
                    self.st.copy(0 if index == "@" else sum(map(len, items)))
                    return (list(items), True) if index == "@" else ([" ".join(items)], False)
                self.st.copy(sum(map(len, items)))
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
                self.st.set(name, _Var(default, tuple(dict.fromkeys(self.refs[before:]))))
            return [default], False
        if kind in (":+", "+"):
            present = value is not None and (kind == "+" or value != "")
            return [self.string(word) if present else ""], False
        if value is None:
            return [self._unset(name, "not set in the script: taken from the environment")], False
        value = str(value)
        self.st.copy(len(value))
        if kind in (",,", ","):
            return [value.lower() if kind == ",," else value[:1].lower() + value[1:]], False
        if kind in ("^^", "^"):
            return [value.upper() if kind == "^^" else value[:1].upper() + value[1:]], False
        pattern = self.string(word)
        if kind in ("#", "##", "%", "%%"):
            return [self._trim(name, body, value, kind, pattern)], False
        pat, _, rep = pattern.partition("/")
        if any(ch in pat for ch in "*?["):
            return [self._unset(name, f"pattern substitution ${{{body}}} is not evaluated")], False
        if not pat:  # bash leaves the value as it is
            return [value], False
        count = value.count(pat) if kind == "//" else min(1, value.count(pat))
        if len(value) + count * (len(rep) - len(pat)) > MAX_VALUE_CHARS:
            raise ShellLimitError(f"${{{body}}} expands to more than {MAX_VALUE_CHARS} characters", self.st.line)
        self.st.copy(len(value) + count * len(rep))
        return [value.replace(pat, rep) if kind == "//" else value.replace(pat, rep, 1)], False

    def _trim(self, name: str, body: str, value: str, kind: str, pattern: str) -> str:
        """${V#pat} ${V##pat} ${V%pat} ${V%%pat}: the shortest/longest matching prefix/suffix removed. Each candidate
        tried is charged its length; a trim too costly for the budget stops reading like any other bound."""
        rx = re.compile(fnmatch.translate(pattern))
        prefix = kind.startswith("#")
        longest = len(kind) == 2
        n = len(value)
        cost = 1 + len(pattern) // 8
        # the shortest prefix/suffix for # and %, the longest for ## and %%: tried from that end, the first match wins
        order = range(n + 1) if prefix != longest else range(n, -1, -1)
        for k in order:
            size = k if prefix else n - k
            self.st.copy(size * cost)
            if rx.match(value, 0, k) if prefix else rx.match(value, k):
                return value[k:] if prefix else value[:k]
        return value

    def _cmd(self, body: str) -> str:
        """Command substitution: only the "folder of this script" idioms are evaluated, nothing is run."""
        self.st.copy(4 * len(body))
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
            self.st.charge(ARITH_STEPS + len(m.group(0)))
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
        except ShellLimitError:
            raise
        except (SyntaxError, ValueError, ZeroDivisionError, TypeError, RecursionError) as exc:
            return self._unset("ARITH", f"$(({expr.strip()})) cannot be evaluated ({type(exc).__name__})")


class _Unknown(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


_SPECIAL = re.compile(r"""[\\'"(){}]""")
_IN_DQ = re.compile(r'[\\"]')


def _match(s: str, i: int, open_: str, close: str, st: _State) -> int:
    """Index of the bracket that closes the one at s[i] (quote-aware). The scan jumps from one special character
    to the next; each is a step of the budget."""
    depth, j, steps = 0, i, 0
    try:
        while True:
            m = _SPECIAL.search(s, j)
            steps += LOOP_STEPS
            if m is None:
                break
            j = m.start()
            c = s[j]
            if c == "\\":
                j += 2
            elif c == "'" and open_ == "(":
                end = s.find("'", j + 1)
                if end < 0:
                    break
                j = end + 1
            elif c == '"':
                k = j + 1
                while True:
                    q = _IN_DQ.search(s, k)
                    steps += LOOP_STEPS
                    if q is None:
                        k = len(s)
                        break
                    if s[q.start()] == '"':
                        k = q.start()
                        break
                    k = q.start() + 2
                j = k + 1
            else:
                if c == open_:
                    depth += 1
                elif c == close:
                    depth -= 1
                    if depth == 0:
                        return j
                j += 1
    finally:
        st.charge(steps + ((j - i) >> 6))
    raise ShellSyntaxError(f"line {st.line}: unbalanced {open_}{close}")


def _ansi_c(body: str, line: int) -> str:
    try:
        return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError as exc:
        raise ShellSyntaxError(f"line {line}: bad escape in $'...' ({exc.reason})") from None
