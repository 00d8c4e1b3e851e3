"""Hydra overrides: `key=value`, `+key=value`, `++key=value`, `~key` and the value grammar verl configs use.

`parse_value` gives the Python value OmegaConf would store; `format_value` writes one back (the two round-trip).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass
class Override:
    text: str
    op: str  # "", "+", "++" or "~"
    key: str
    value: Any = None
    has_value: bool = True
    origin: str = "argument"
    index: int = -1  # position in the override list (for --fix)


_OVERRIDE = re.compile(r"^(\+\+|\+|~)?([^=\s]+?)(?:=(.*))?$", re.DOTALL)


def parse_override(text: str, origin: str = "argument", index: int = -1) -> Override | None:
    m = _OVERRIDE.match(text)
    if not m:
        return None
    op, key, raw = m.group(1) or "", m.group(2), m.group(3)
    if raw is None and op != "~":
        return None
    return Override(text, op, key, parse_value(raw) if raw is not None else None, raw is not None, origin, index)


class _ValueParser:
    """The part of Hydra's override grammar verl configs use: null, booleans, numbers, quoted and
    unquoted strings, interpolations, [lists] and {dicts}."""

    def __init__(self, s: str) -> None:
        self.s, self.i = s, 0

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def value(self, nested: bool) -> Any:
        self.ws()
        if self.i >= len(self.s):
            return ""
        c = self.s[self.i]
        if c == "[":
            return self.seq()
        if c == "{":
            return self.mapping()
        if c in "'\"":
            text = self.quoted()
            self.ws()
            if self.i < len(self.s) and not (nested and self.s[self.i] in ",]}"):
                return text + str(self.primitive(nested))  # 'a'b: quoted text glued to more text
            return text
        return self.primitive(nested)

    def quoted(self) -> str:
        q = self.s[self.i]
        self.i += 1
        out = []
        while self.i < len(self.s) and self.s[self.i] != q:
            if self.s[self.i] == "\\" and self.i + 1 < len(self.s) and self.s[self.i + 1] in (q, "\\"):
                self.i += 1
            out.append(self.s[self.i])
            self.i += 1
        self.i += 1
        return "".join(out)

    def primitive(self, nested: bool, stop: str = ",]}") -> Any:
        start, depth = self.i, 0
        while self.i < len(self.s):
            c = self.s[self.i]
            if self.s.startswith("${", self.i):
                depth += 1
                self.i += 2
                continue
            if c == "}" and depth:
                depth -= 1
            elif nested and not depth and c in stop:
                break
            self.i += 1
        return _primitive(self.s[start:self.i].strip())

    def seq(self) -> list[Any]:
        self.i += 1
        out: list[Any] = []
        self.ws()
        if self.s.startswith("]", self.i):
            self.i += 1
            return out
        while self.i < len(self.s):
            out.append(self.value(True))
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("]", self.i):
                self.i += 1
                break
            raise ValueError(f"cannot parse list in {self.s!r}")
        return out

    def mapping(self) -> dict[str, Any]:
        self.i += 1
        out: dict[str, Any] = {}
        self.ws()
        if self.s.startswith("}", self.i):
            self.i += 1
            return out
        while self.i < len(self.s):
            self.ws()
            key = str(self.quoted() if self.s[self.i] in "'\"" else self.primitive(True, stop=":,}"))
            self.ws()
            if not self.s.startswith(":", self.i):
                raise ValueError(f"cannot parse mapping in {self.s!r}")
            self.i += 1
            out[key] = self.value(True)
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("}", self.i):
                self.i += 1
                break
        return out


_INT = re.compile(r"[+-]?\d+(?:_\d+)*")
_FLOAT = re.compile(r"[+-]?(?:\d[\d_]*)?\.?\d*(?:[eE][+-]?\d+)?|[+-]?(?:inf|nan)", re.IGNORECASE)


def _primitive(text: str) -> Any:
    low = text.lower()
    if low == "null":
        return None
    if low in ("true", "false"):
        return low == "true"
    if _INT.fullmatch(text):
        return int(text.replace("_", ""))
    if text and _FLOAT.fullmatch(text) and any(ch.isdigit() for ch in text) or low in ("inf", "-inf", "+inf", "nan"):
        try:
            return float(text.replace("_", ""))
        except ValueError:
            return text
    return text


def parse_value(text: str) -> Any:
    """A Hydra override value as Python (what OmegaConf would store)."""
    s = text.strip()
    if not s:
        return ""
    p = _ValueParser(s)
    try:
        if s[0] in "[{":
            v = p.value(True)
            p.ws()
            if p.i == len(s):
                return v
            return s
        if s[0] in "'\"" and s[-1] == s[0] and len(s) >= 2:
            return p.quoted() if p.i == 0 else s
    except (ValueError, IndexError):
        return s
    return _primitive(s)


_SAFE = re.compile(r"^[A-Za-z0-9_./:@~\-+${}*]+$")


def format_value(v: Any) -> str:
    """Python value → Hydra override text (round-trips through parse_value)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(format_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{format_value(x)}" for k, x in v.items()) + "}"
    s = str(v)
    if _SAFE.match(s) and parse_value(s) == s and not s.startswith(("+", "~")):
        return s
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
