"""Tokens of a shell script: words (quotes, `$(...)`, `${...}` kept raw), operators, array literals; heredocs skipped."""

from __future__ import annotations

import re
from dataclasses import dataclass

from wizard.check.shell.model import Budget, ShellSyntaxError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]\s]*\])?(\+?)=")  # a subscript holds no blank
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
_BLANKS = re.compile(r"[ \t\r]+")
_WORD_RUN = re.compile(r"[^ \t\r\n;&|()<>\\'\"`$]+")  # characters that stand for themselves in a word
_DQ_RUN = re.compile(r'[^"\\$`]+')  # ... inside "..."
_BALANCED_SPECIAL = re.compile(r"""[\\'"(){}]""")
_DQ_END = re.compile(r'[\\"]')
_BACKTICK_END = re.compile(r"[\\`]")
# What the budget charges (wizard.check.shell.model.Budget: a step is about one simple Python operation)
TOKEN_STEPS = 16  # a token: the loop that finds it, the _Tok made, the command loop that visits it
LOOP_STEPS = 8  # one turn of a scanning loop (a regex search, a slice, a few comparisons)


@dataclass(frozen=True)
class _Tok:
    kind: str  # word | op | nl | array | fd
    text: str
    line: int
    items: tuple[str, ...] = ()  # array literal elements (raw words)
    append: bool = False


class _Lexer:
    """One pass over the script. Each token and each run of characters scanned is charged to the budget."""

    def __init__(self, text: str, budget: Budget | None = None) -> None:
        self.s = text
        self.i = 0
        self.line = 1
        self.heredocs: list[tuple[str, bool]] = []
        self.budget = budget if budget is not None else Budget()

    def error(self, what: str) -> ShellSyntaxError:
        return ShellSyntaxError(f"line {self.line}: {what}")

    def _charge(self, steps: int) -> None:
        self.budget.line = self.line
        self.budget.charge(steps)

    def tokens(self) -> list[_Tok]:
        out: list[_Tok] = []
        s = self.s
        while self.i < len(s):
            self._charge(TOKEN_STEPS)
            c = s[self.i]
            if c == "\\" and s.startswith("\\\n", self.i):
                self.i += 2
                self.line += 1
            elif c in " \t\r":
                self.i = _BLANKS.match(s, self.i).end()  # type: ignore[union-attr]
            elif c == "\n":
                out.append(_Tok("nl", "\n", self.line))
                self.i += 1
                self.line += 1
                self._skip_heredocs()
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
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
        m = _BLANKS.match(s, self.i)
        if m:
            self.i = m.end()
        word = self._word()
        self.heredocs.append((word.replace("'", "").replace('"', "").replace("\\", ""), strip_tabs))

    def _skip_heredocs(self) -> None:
        s = self.s
        pending, self.heredocs = self.heredocs, []
        for delim, strip_tabs in pending:
            while self.i < len(s):
                end = s.find("\n", self.i)
                end = len(s) if end < 0 else end
                self._charge(LOOP_STEPS + ((end - self.i) >> 6))
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
            self._charge(TOKEN_STEPS)
            c = s[self.i]
            if c == "\\" and s.startswith("\\\n", self.i):
                self.i += 2
                self.line += 1
            elif c in " \t\r":
                self.i = _BLANKS.match(s, self.i).end()  # type: ignore[union-attr]
            elif c == "\n":
                self.i += 1
                self.line += 1
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
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
            self._charge(LOOP_STEPS)
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
                m = _WORD_RUN.match(s, self.i)
                end = m.end() if m else self.i + 1
                buf.append(s[self.i:end])
                self.i = end
        self.budget.copy(sum(map(len, buf)))
        return "".join(buf)

    def _double(self) -> str:
        s = self.s
        start = self.i
        self.i += 1
        parts = ['"']
        while self.i < len(s):
            self._charge(LOOP_STEPS)
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
                m = _DQ_RUN.match(s, self.i)
                end = m.end() if m else self.i + 1
                self.line += s.count("\n", self.i, end)
                parts.append(s[self.i:end])
                self.i = end
        self.i = start
        raise self.error("unterminated double quote")

    def _backtick(self) -> str:
        s = self.s
        j = self.i + 1
        while True:
            m = _BACKTICK_END.search(s, j)
            self._charge(LOOP_STEPS)
            if m is None:
                raise self.error("unterminated backquote")
            if s[m.start()] == "`":
                j = m.start()
                break
            j = m.start() + 2
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
                self._charge(LOOP_STEPS)
                j += 2 if s[j] == "\\" else 1
            if j >= len(s):
                raise self.error("unterminated $'...'")
            text = s[self.i:j + 1]
            self.i = j + 1
            return text
        self.i += 1
        return "$"

    def _balanced(self, skip: int, open_: str, close: str, closing: int = 1) -> str:
        """From `$(`/`${`/`$((` to its match, quote-aware; returns the raw text. The scan jumps between the
        characters that matter."""
        s = self.s
        start, depth, j = self.i, 1, self.i + skip
        if closing == 2:
            depth = 2
        while True:
            m = _BALANCED_SPECIAL.search(s, j)
            self._charge(LOOP_STEPS)
            if m is None:
                break
            j = m.start()
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
                while True:
                    q = _DQ_END.search(s, k)
                    self._charge(LOOP_STEPS)
                    if q is None or s[q.start()] == '"':
                        k = len(s) if q is None else q.start()
                        break
                    k = q.start() + 2
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


def raw_words(text: str, budget: Budget | None = None) -> list[tuple[str, int]]:
    """Every word of the script as written (quotes and expansions kept raw), array elements included, with its
    line; comments and heredoc bodies are not words. Raises ShellSyntaxError / ShellLimitError as the reader does."""
    out: list[tuple[str, int]] = []
    for tok in _Lexer(text, budget).tokens():
        if tok.kind == "word":
            out.append((tok.text, tok.line))
        elif tok.kind == "array":
            out.extend((item, tok.line) for item in tok.items)
    return out
