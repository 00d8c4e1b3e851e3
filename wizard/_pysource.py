"""Reading a Python file the user names (a reward function, a tool) without importing it: the text, bounded, parsed
with ast. One reader for `check`'s rules and the planner (which chooses DAPO's filter metric from what a reward
function returns); only the standard library."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

REWARD_FILE_BYTES = 4 << 20  # a reward function file, not a data file


def parse_module(path: Path, limit: int = 1 << 20) -> Any:
    """A Python file the config names (a reward function, a tool), read as text up to `limit` bytes and parsed with
    ast, never imported; None when it is larger or cannot be read. A SyntaxError is raised for the caller to report
    (check's VI871) or to pass over."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:
            return None
        return ast.parse(data.decode("utf-8", errors="replace"))
    except (OSError, RecursionError, MemoryError, ValueError):
        return None


def parse_reward_file(path: Path) -> ast.Module | None:
    """A reward function's file parsed (bounded at REWARD_FILE_BYTES); None when it cannot be read or parsed."""
    try:
        return parse_module(path, REWARD_FILE_BYTES)
    except SyntaxError:
        return None


def top_level_function(path: Path, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The top-level function `name` of a Python file, read as text (bounded) and parsed, never imported; None when
    the file cannot be read or parsed or `name` is not a plain top-level def (an alias, a partial, a class)."""
    tree = parse_reward_file(path)
    if tree is None:
        return None
    found = [n for n in tree.body if getattr(n, "name", None) == name or
             (isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets))]
    last = found[-1] if found else None  # the binding Python's import sees
    return last if isinstance(last, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def own_returns(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The function's own return statements (not those of functions or classes defined inside it)."""
    out: list[ast.Return] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _const(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def returned_keys(path: Path, name: str) -> tuple[set[str], list[int]] | None:
    """(the keys every `return` of the top-level function `name` can give, their lines) when each return is a dict
    literal with constant string keys (no **unpacking); None otherwise (a number, a variable, a call, a generator,
    no return, a file that cannot be read)."""
    fn = top_level_function(path, name)
    if fn is None or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for s in fn.body for n in ast.walk(s)):
        return None
    returns = own_returns(fn)
    keys: set[str] = set()
    for ret in returns:
        value = ret.value
        if not isinstance(value, ast.Dict) or any(_const(k) is None for k in value.keys):
            return None
        keys |= {_const(k) for k in value.keys}  # type: ignore[misc]
    return (keys, [r.lineno for r in returns]) if returns else None


def _number(node: ast.AST | None) -> bool:
    """A numeric literal (an int, a float, a bool), signed or not, or float(...) / int(...) of anything."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, complex)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("float", "int")


def returns_number(path: Path, name: str) -> bool:
    """Whether every `return` of the top-level function `name` gives a number as written (a numeric literal or a
    float()/int() call); False when any return is something else or cannot be told."""
    fn = top_level_function(path, name)
    if fn is None or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for s in fn.body for n in ast.walk(s)):
        return False
    returns = own_returns(fn)
    return bool(returns) and all(_number(r.value) for r in returns)
