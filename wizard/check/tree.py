"""Config trees as nested dicts: dotted-key access, verl's default tree from the snapshot, and the
interpolation resolver (`${...}`, oc.select, oc.env) used when verl is not installed.

With verl installed OmegaConf resolves interpolations itself (wizard.check.verltree); the two agree on
every key of verl's examples (tests/test_check_examples.py).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from wizard.check.overrides import parse_value
from wizard.check.shellargs import PLACEHOLDER
from wizard.intent.errors import UserError
from wizard.verlspec.keys import MISSING, load_snapshot
NOTHING = object()  # lookup()'s answer for a key the tree does not have


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key → leaf (lists and empty mappings are leaves)."""
    out: dict[str, Any] = {}
    if isinstance(tree, dict) and tree:
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif prefix:
        out[prefix[:-1]] = tree
    return out


def lookup(tree: Any, key: str) -> Any:
    """The value at a dotted key, or NOTHING."""
    node = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return NOTHING
        node = node[part]
    return node


def set_key(tree: dict[str, Any], key: str, value: Any) -> None:
    """Set a dotted key to a copy of value, making the mappings on the way."""
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = copy.deepcopy(value)


def delete_key(tree: dict[str, Any], key: str) -> None:
    """Remove a dotted key where it exists."""
    parts = key.split(".")
    node: Any = tree
    for part in parts[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    if isinstance(node, dict):
        node.pop(parts[-1], None)


def snapshot_tree(engine: str) -> dict[str, Any]:
    """A copy of verl's default tree for one model_engine, from the snapshot (VI809 when it has none)."""
    engines = load_snapshot()["engines"]
    if engine not in engines:
        raise UserError(f"model_engine={engine} is not in verl-init's snapshot of verl's defaults",
                        f"use one of {', '.join(engines)}, or install verl to resolve with its own tree", rule="VI809",
                        keys=("model_engine",))
    return copy.deepcopy(engines[engine])


class _Resolver:
    """OmegaConf's interpolations on a plain tree: ${key}, relative ${.key} / ${..key}, oc.select and oc.env;
    what cannot be resolved is kept as text and listed in `failures`."""

    def __init__(self, tree: dict[str, Any], env: Mapping[str, str]) -> None:
        self.tree, self.env = tree, env
        self.cache: dict[str, Any] = {}
        self.active: set[str] = set()
        self.failures: dict[str, str] = {}

    def resolve_all(self) -> dict[str, Any]:
        out = copy.deepcopy(self.tree)
        for key, value in flatten(self.tree).items():
            if isinstance(value, str) and "${" in value:
                set_key(out, key, self.value_at(key))
        return out

    def value_at(self, key: str) -> Any:
        if key in self.cache:
            return self.cache[key]
        raw = lookup(self.tree, key)
        if raw is NOTHING:
            return NOTHING
        if key in self.active:
            self.failures[key] = "interpolation cycle"
            return raw
        self.active.add(key)
        try:
            parent = key.rsplit(".", 1)[0] if "." in key else ""
            value = self.deep(raw, parent)
        finally:
            self.active.discard(key)
        self.cache[key] = value
        return value

    def deep(self, raw: Any, parent: str) -> Any:
        if isinstance(raw, str) and "${" in raw:
            return self.text(raw, parent)
        if isinstance(raw, dict):
            return {k: self.deep(v, f"{parent}.{k}" if parent else k) for k, v in raw.items()}
        if isinstance(raw, list):
            return [self.deep(v, parent) for v in raw]
        return raw

    def text(self, s: str, parent: str) -> Any:
        pieces: list[Any] = []
        i = 0
        while i < len(s):
            j = s.find("${", i)
            if j < 0:
                pieces.append(s[i:])
                break
            if j > i:
                pieces.append(s[i:j])
            end = _close(s, j + 1)
            pieces.append(self.interp(s[j + 2:end], parent))
            i = end + 1
        if len(pieces) == 1:
            return pieces[0]
        return "".join("null" if p is None else str(p) for p in pieces)

    def absolute(self, key: str, parent: str) -> str:
        if not key.startswith("."):
            return key
        dots = len(key) - len(key.lstrip("."))
        base = parent.split(".") if parent else []
        base = base[:len(base) - (dots - 1)] if dots > 1 else base
        return ".".join(base + [key[dots:]]) if key[dots:] else ".".join(base)

    def interp(self, body: str, parent: str) -> Any:
        body = body.strip()
        if body.startswith("oc.select:"):
            args = _split_args(body[len("oc.select:"):])
            target = self.absolute(args[0].strip(), parent)
            found = self.value_at(target)
            if found is NOTHING or found == MISSING:
                if len(args) < 2:
                    return None
                return self.deep(parse_value(args[1].strip()), parent) if "${" not in args[1] else \
                    self.text(args[1].strip(), parent)
            return found
        if body.startswith("oc.env:"):
            args = _split_args(body[len("oc.env:"):])
            name = args[0].strip()
            if name in self.env:
                return self.env[name]
            if len(args) > 1:
                return parse_value(args[1].strip())
            self.failures[body] = f"environment variable {name} is not set"
            return PLACEHOLDER + name
        if ":" in body.split(".")[0]:
            self.failures[body] = "resolver not supported without verl"
            return "${" + body + "}"
        found = self.value_at(self.absolute(body, parent))
        if found is NOTHING:
            self.failures[body] = f"interpolation key {body!r} not found"
            return "${" + body + "}"
        return found


def _close(s: str, i: int) -> int:
    depth, j = 0, i
    while j < len(s):
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return len(s) - 1


def _split_args(s: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def resolve_snapshot(tree: dict[str, Any], env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(tree with every interpolation resolved, {interpolation: why it failed})."""
    r = _Resolver(tree, env)
    return r.resolve_all(), r.failures
