#!/usr/bin/env python3
"""Which rollout.quantization values each of verl's rollout servers accepts: writes
wizard/check/data/verl_rollout_quantization.json, read by check's VI639.

    python scripts/verl_rollout_quantization.py           # regenerate the table from the installed verl's source
    python scripts/verl_rollout_quantization.py --check   # exit 1 when the committed table differs

verl's RolloutConfig types quantization as any string (workers/config/rollout.py:261); each engine's server checks the
value only when it launches, inside the rollout worker. This walks each server module with `ast` (nothing is
imported) and records, per engine (the rollout.name that selects the module):

- "accepted": the values that do not raise. Two shapes occur in verl 0.9.1: `if quantization == "fp8": ... else:
  raise ValueError(...)` (SGLang, TensorRT-LLM) and `_SUPPORTED = [...]; if quantization not in _SUPPORTED: raise`
  (vLLM);
- "line": the line of that `raise`;
- "qat_bypass": whether the check sits in the `elif` of an `if` on the QAT config (vLLM's _apply_quantization: with
  rollout.qat.enable the quantization key is not read).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_rollout_quantization.json"
SERVERS = {
    "sglang": "workers/rollout/sglang_rollout/async_sglang_server.py",
    "vllm": "workers/rollout/vllm_rollout/vllm_async_server.py",
    "trtllm": "workers/rollout/trtllm_rollout/trtllm_async_server.py",
}
NAME = "quantization"


def _raise_line(body: list[ast.stmt]) -> int | None:
    for stmt in body:
        if isinstance(stmt, ast.Raise):
            return stmt.lineno
    return None


def _lists(fn: ast.AST) -> dict[str, list[str]]:
    """`X = ["a", "b"]` assignments of string lists in a function."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(fn):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.List, ast.Tuple, ast.Set))
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts)):
            out[node.targets[0].id] = [e.value for e in node.value.elts]
    return out


def _check(node: ast.If, lists: dict[str, list[str]]) -> tuple[list[str], int] | None:
    """(accepted values, raise line) for the two shapes of the server-side check."""
    t = node.test
    if not (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == NAME and len(t.ops) == 1):
        return None
    op, right = t.ops[0], t.comparators[0]
    if isinstance(op, ast.Eq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
        line = _raise_line(node.orelse)
        return ([right.value], line) if line else None
    if isinstance(op, ast.NotIn) and isinstance(right, ast.Name) and right.id in lists:
        line = _raise_line(node.body)
        return (sorted(lists[right.id]), line) if line else None
    return None


def _qat_parents(tree: ast.AST) -> set[int]:
    """ids of statements that sit in the `else` branch of an `if` whose test reads a QAT setting."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "qat" in ast.unparse(node.test):
            for sub in node.orelse:
                out |= {id(n) for n in ast.walk(sub)}
    return out


def scan(path: Path) -> dict:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    qat = _qat_parents(tree)
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        lists = _lists(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.If):
                got = _check(node, lists)
                if got:
                    return {"accepted": got[0], "line": got[1], "function": fn.name, "qat_bypass": id(node) in qat}
    raise SystemExit(f"{path}: no rollout.quantization check found")


def build_from(root: Path) -> dict:
    return {"servers": {name: {"file": rel.rsplit("/", 1)[1], **scan(root / rel)} for name, rel in SERVERS.items()}}


def build() -> dict:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    raise SystemExit(table_main(__doc__, build, OUT))
