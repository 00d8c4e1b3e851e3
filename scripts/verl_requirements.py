#!/usr/bin/env python3
"""Regenerate wizard/check/data/verl_requirements.json: what verl's code requires of config values, read from its source.

    python scripts/verl_requirements.py            # from the installed verl's source
    python scripts/verl_requirements.py --check    # exit 1 if the shipped table is stale

Walks verl's modules with `ast` (nothing imported) and keeps three kinds of statement about keys of one config node
(the *siblings* of a mapping such as `reward_kwargs.overlong_buffer_cfg` or `actor.megatron`):

- `assert <test>` and `if <test>: raise ...`: the test (negated for raise) must hold;
- `x / cfg.k`, `x // cfg.k`, `x % cfg.k`: `cfg.k` must not be 0;
- a key passed to a call inside `if cfg.g:` whose verl default is null: it is required when `g` holds
  (`if engine_config.use_dist_checkpointing: load(..., engine_config.dist_checkpointing_path)`).

Each is kept with the `if` conditions around it; one with none is kept only when it names an absolute key (rooted at
a top-level section such as `config.data`) in a module of one scope (an entry point, a trainer mode, an engine),
because a bare assert in a shared module may sit on a path only some runs take (only ones on the same node's keys: a statement under any other
condition is left out, as it cannot be judged from the config) and the file's scope (scripts/verl_readers.py).
Local names and `self.x = ...` attributes are followed back to the config chain they were read from. The rule
(wizard.check.rules.requirements, VI892/VI893) evaluates each on the user's config, on every node that has the
keys, and reports only where the user set one of them.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import verl_readers as vr  # noqa: E402 - the walk's helpers and scopes are shared

OUT = ROOT / "wizard" / "check" / "data" / "verl_requirements.json"
OPS = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}
FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "==", "!=": "!="}
NEGATE = {">": "<=", ">=": "<", "<": ">=", "<=": ">", "==": "!=", "!=": "==", "truthy": "falsy", "falsy": "truthy",
          "is None": "not None", "not None": "is None"}


class _Unknown(Exception):
    """A condition that is not about one config node's keys."""


class Walker:
    def __init__(self, rel: str, scope: str, lines: list[str]) -> None:
        self.rel, self.scope, self.lines = rel, scope, lines
        self.out: list[dict[str, Any]] = []
        self.attrs: dict[str, list[str]] = {}  # self.X → chain
        self.local: dict[str, list[str]] = {}
        self.get_none: set[tuple[str, ...]] = set()  # chains read as `.get(k)` / `.get(k, None)`: absent reads None

    # chains ----------------------------------------------------------------------------------------
    def chain(self, node: ast.AST) -> list[str] | None:
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else None
            inner = self.chain(node.args[0]) if name in ACCESSORS else None
            return inner + ACCESSORS[name] if inner else None
        ch = vr.access_chain(node)
        if ch is None:
            return None
        if ch[0] in self.local:
            ch = self.local[ch[0]] + ch[1:]
        if len(ch) >= 2 and ch[0] == "self" and ch[1] in self.attrs:
            ch = self.attrs[ch[1]] + ch[2:]
        return ch

    def atom(self, node: ast.AST) -> list[tuple[list[str], str, Any]]:
        """[(chain, op, value | ["@", chain])] of a condition; _Unknown when it is not about config chains."""
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            return [a for v in node.values for a in self.atom(v)]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.atom(node.operand)
            if len(inner) != 1:
                raise _Unknown
            ch, op, val = inner[0]
            return [(ch, NEGATE[op], val)]
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right, op = node.left, node.comparators[0], node.ops[0]
            if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value is None:
                ch = self.chain(left)
                if ch and len(ch) >= 2:
                    return [(ch, "is None" if isinstance(op, ast.Is) else "not None", None)]
                raise _Unknown
            if type(op) in OPS:
                sym = OPS[type(op)]
                lc, rc = self.chain(left), self.chain(right)
                num = (int, float)
                if lc and len(lc) >= 2 and isinstance(right, ast.Constant) and isinstance(right.value, num) \
                        and not isinstance(right.value, bool):
                    return [(lc, sym, right.value)]
                if rc and len(rc) >= 2 and isinstance(left, ast.Constant) and isinstance(left.value, num) \
                        and not isinstance(left.value, bool):
                    return [(rc, FLIP[sym], left.value)]
                if lc and rc and len(lc) >= 2 and len(rc) >= 2:
                    return [(lc, sym, ["@", rc])]
            raise _Unknown
        ch = self.chain(node)
        if ch and len(ch) >= 2:
            return [(ch, "truthy", None)]
        raise _Unknown

    # statements ------------------------------------------------------------------------------------
    def record(self, kind: str, line: int, guard: list[Any], tests: list[Any], message: str = "") -> None:
        """Keep a statement about the keys of one config node: siblings, or (where the node is named from a top-level
        section) keys below it, written as paths relative to it (`max_resp_len` against `overlong_buffer_cfg.len`
        under reward.reward_kwargs, reward_manager/dapo.py:42)."""
        atoms = guard + tests
        chains = [a[0] for a in atoms] + [a[2][1] for a in atoms if isinstance(a[2], list)]
        # an atom on the node itself (`cfg is not None` before `cfg.enable`) only says the node is there
        node_only = {tuple(c) for c in chains} & {tuple(c[:-1]) for c in chains}
        if any(tuple(a[0]) in node_only for a in tests):
            return
        guard = [a for a in guard if tuple(a[0]) not in node_only]
        chains = [c for c in chains if tuple(c) not in node_only]
        prefixes = {tuple(c[:-1]) for c in chains}
        if not tests or not prefixes:
            return
        prefix = list(next(iter(prefixes)))
        if len(prefixes) > 1:  # keys of several nodes: only below one node a top-level section names
            prefix = [names[0] for names in zip(*prefixes) if len(set(names)) == 1]
            if not prefix or not any(name in TOP for name in prefix):
                return
        tops = [i for i, name in enumerate(prefix) if name in TOP]
        node = ".".join(prefix[tops[0]:]) if tops else None
        cut = len(prefix)
        conv = lambda a: [".".join(a[0][cut:]), a[1],  # noqa: E731
                          ["@", ".".join(a[2][1][cut:])] if isinstance(a[2], list) else a[2]]
        for t in tests:
            entry = {"where": f"verl/{self.rel}:{line}", "scope": self.scope, "kind": kind,
                     "node": node, "anchor": None if node else prefix[-1],
                     "guard": [conv(g) for g in guard], "test": conv(t), "message": message}
            if t[1] in ("is None", "not None") and tuple(t[0]) in self.get_none:
                entry["absent"] = None  # the key read with .get(k, None): missing from the tree, it is None
            self.out.append(entry)

    def visit_body(self, body: list[ast.stmt], guard: list[Any] | None) -> None:
        for st in body:
            self.visit(st, guard)

    def visit(self, st: ast.stmt, guard: list[Any] | None) -> None:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            saved = dict(self.local)
            self.local = {}
            self.visit_body(st.body, [])
            self.local = saved
            return
        if isinstance(st, ast.ClassDef):
            saved = dict(self.attrs)
            self.attrs = {}
            for sub in ast.walk(st):  # self.X = <chain> anywhere in the class (usually __init__)
                if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                    t = sub.targets[0]
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        ch = self.chain(sub.value)
                        if ch and len(ch) >= 2:
                            self.attrs[t.attr] = ch
                            if _reads_none_when_absent(sub.value):
                                self.get_none.add(tuple(ch))
            self.visit_body(st.body, guard)
            self.attrs = saved
            return
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Attribute) \
                and isinstance(st.targets[0].value, ast.Name) and st.targets[0].value.id == "self":
            ch = self.chain(st.value)
            if ch and len(ch) >= 2:
                self.attrs[st.targets[0].attr] = ch
                if _reads_none_when_absent(st.value):
                    self.get_none.add(tuple(ch))
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            ch = self.chain(st.value)
            if ch and len(ch) >= 2 and ch[0] != st.targets[0].id:
                self.local[st.targets[0].id] = ch
            else:
                self.local.pop(st.targets[0].id, None)
        if guard is not None:
            self.statement(st, guard)
        if isinstance(st, ast.If):
            try:
                inner = guard + self.atom(st.test) if guard is not None else None
            except _Unknown:
                inner = None
            self.visit_body(st.body, inner)
            self.visit_body(st.orelse, None)
            return
        for field in ("body", "orelse", "finalbody", "handlers"):
            sub = getattr(st, field, None)
            if isinstance(sub, list):
                for s in sub:
                    if isinstance(s, ast.stmt):
                        self.visit(s, None if field != "body" or not isinstance(st, (ast.With, ast.AsyncWith))
                                   else guard)
                    elif isinstance(s, ast.ExceptHandler):
                        self.visit_body(s.body, None)

    def statement(self, st: ast.stmt, guard: list[Any]) -> None:
        if isinstance(st, ast.Assert):
            try:
                tests = self.atom(st.test)
            except _Unknown:
                return
            self.record("assert", st.lineno, guard, tests, _text(st.msg))
        elif isinstance(st, ast.If) and st.body and isinstance(st.body[0], ast.Raise) and not st.orelse:
            try:
                cond = self.atom(st.test)
            except _Unknown:
                return
            if len(cond) == 1:  # `if a and b: raise` is `not (a and b)`: not one atom per test
                ch, op, val = cond[0]
                exc = st.body[0].exc
                msg = _text(exc.args[0]) if isinstance(exc, ast.Call) and exc.args else ""
                self.record("raise", st.lineno, guard, [(ch, NEGATE[op], val)], msg)
        for node in ast.walk(st) if not isinstance(st, (ast.If, ast.For, ast.While, ast.With, ast.Try)) else ():
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
                ch = self.chain(node.right)
                if ch and len(ch) >= 2 and not isinstance(node.right, ast.Call):
                    self.record("divide", node.lineno, guard, [(ch, "!=", 0)])
            if isinstance(node, ast.Call) and guard:
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    if isinstance(arg, (ast.Attribute, ast.Subscript)):
                        ch = self.chain(arg)
                        if ch and len(ch) >= 2:
                            self.record("required", node.lineno, guard, [(ch, "not None", None)])


def _reads_none_when_absent(node: ast.AST) -> bool:
    """`x.get("k")` or `x.get("k", None)`: a missing key reads as None."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
        and len(node.args) in (1, 2) and not node.keywords \
        and (len(node.args) == 1 or (isinstance(node.args[1], ast.Constant) and node.args[1].value is None))


def _text(node: ast.AST | None) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value[:200]
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))[:200]
    return ""


TOP: set[str] = set()
# verl's one-line accessors of a config (`def need_reward_model(config): return config.reward.reward_model.enable`,
# trainer/ppo/utils.py:89-93): a call of one on a config chain reads the chain they return (accessors())
ACCESSORS: dict[str, list[str]] = {}


def accessors(root: Path) -> dict[str, list[str]]:
    """Module-level functions of verl whose body is `return <first parameter>.a.b...` (a docstring aside), by name:
    the chain below the parameter. A name defined twice with different chains is left out."""
    found: dict[str, list[str] | None] = {}
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef) or not fn.args.args:
                continue
            body = [b for b in fn.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
            if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
                continue
            ch = vr.access_chain(body[0].value)
            if ch and len(ch) >= 2 and ch[0] == fn.args.args[0].arg:
                found[fn.name] = ch[1:] if found.get(fn.name, ch[1:]) == ch[1:] else None
    return {k: v for k, v in found.items() if v}


def build() -> dict[str, Any]:
    from importlib.metadata import version

    root = vr.verl_root()
    vr._ENGINE_SCOPES.clear()
    vr._ENGINE_SCOPES.update(vr.engine_scopes(root))
    keys = vr.key_paths()
    TOP.update(k.split(".")[0] for k in keys)
    ACCESSORS.clear()
    ACCESSORS.update(accessors(root))
    defaults_null = _null_defaults()
    found: list[dict[str, Any]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(vr.SKIP):
            continue
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        w = Walker(rel, vr.scope_of(rel, text), text.splitlines())
        w.visit_body(tree.body, None)
        found += w.out
    leaves = {k.rsplit(".", 1)[-1] for k in keys}
    kept = []
    for r in found:
        names = [r["test"][0].rsplit(".", 1)[-1], *(g[0].rsplit(".", 1)[-1] for g in r["guard"])]
        if not all(n in leaves for n in names):
            if r["node"] is None or not r["node"].startswith("reward.reward_kwargs"):
                continue  # not a key of verl's tree (nor of the reward manager's free-form kwargs)
        if r["kind"] == "required" and (not r["guard"] or r["test"][0] not in defaults_null):
            continue  # a key whose default is a value is never None unless set so
        if r["test"][0] in {g[0] for g in r["guard"]}:
            continue  # a test the guard already decides
        if not r["guard"] and (r["node"] is None or r["scope"] == "always"):
            continue  # unguarded inside a function that may run only on some path: judged only where the node and
            # the scope say for sure (an entry point's or trainer mode's own assert on a named key)
        if r not in kept:
            kept.append(r)
    return {"verl_version": version("verl"), "generated_by": "scripts/verl_requirements.py", "requirements": kept}


def _null_defaults() -> set[str]:
    from wizard.check.tree import flatten
    from wizard.verlspec.keys import load_snapshot

    out: set[str] = set()
    for tree in load_snapshot()["engines"].values():
        out.update(k.rsplit(".", 1)[-1] for k, v in flatten(tree).items() if v is None)
    return out


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
