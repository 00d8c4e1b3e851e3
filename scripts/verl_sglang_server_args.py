#!/usr/bin/env python3
"""Which SGLang ServerArgs verl 0.9.1 sets itself: writes wizard/check/data/verl_sglang_server_args.json, read by
check's VI664.

    python scripts/verl_sglang_server_args.py           # regenerate the table from the installed verl
    python scripts/verl_sglang_server_args.py --check   # exit 1 when the committed table differs

SGLangHttpServer.launch_server (workers/rollout/sglang_rollout/async_sglang_server.py:266-424) reads
`engine_kwargs.sglang` (:276), pops the keys verl consumes itself (attention_backend, mm_attention_backend,
custom_weight_loader: :277-282), builds `args = {...}` from verl's own config (:314-341) and spreads `**engine_kwargs`
last in that literal (:340), so an engine_kwargs key that repeats one of the literal's keys replaces verl's value
(mem_fraction_static from rollout.gpu_memory_utilization, tp_size from the rollout's TP x DP, ...). The keys verl
writes afterwards (`args[k] = ...`, `args.update({...})`: LoRA, CPU weight backup, multi-node, metrics, MTP) replace
the user's value instead. The table is read from that function with ast: each literal key with the expression verl
gives it and the verl config key it comes from (`self.config.X` -> the rollout section's X, `self.model_config.X` ->
the model's X), the later writes with their lines, and the popped keys.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_sglang_server_args.json"
SERVER = "workers/rollout/sglang_rollout/async_sglang_server.py"


def _source_key(value: ast.expr) -> str | None:
    """`rollout.X` for self.config.X / self.config.get("X"), `model.X` for self.model_config.X, else None."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "get" \
            and ast.unparse(value.func.value) == "self.config" and value.args \
            and isinstance(value.args[0], ast.Constant):
        return f"rollout.{value.args[0].value}"
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Attribute) \
            and isinstance(value.value.value, ast.Name) and value.value.value.id == "self":
        owner = value.value.attr
        if owner == "config":
            return f"rollout.{value.attr}"
        if owner == "model_config":
            return f"model.{value.attr}"
    return None


def launch_server(tree: ast.Module) -> ast.AsyncFunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "SGLangHttpServer":
            for item in node.body:
                if isinstance(item, ast.AsyncFunctionDef) and item.name == "launch_server":
                    return item
    raise LookupError("SGLangHttpServer.launch_server not found")


def args_literal(fn: ast.AsyncFunctionDef) -> ast.Dict:
    """The `args = {...}` literal that launch_server hands to ServerArgs."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == "args" and isinstance(node.value, ast.Dict):
            return node.value
    raise LookupError("args = {...} not found in launch_server")


def _later_writes(fn: ast.AsyncFunctionDef) -> dict[str, int]:
    """Keys written into args after the literal: args["k"] = ... and args.update({"k": ...}), first line each."""
    out: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == "args" \
                        and isinstance(t.slice, ast.Constant):
                    out.setdefault(t.slice.value, node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "args" \
                and node.args and isinstance(node.args[0], ast.Dict):
            for k in node.args[0].keys:
                if isinstance(k, ast.Constant):
                    out.setdefault(k.value, node.lineno)
    return dict(sorted(out.items()))


def _popped(fn: ast.AsyncFunctionDef) -> list[str]:
    return sorted({n.args[0].value for n in ast.walk(fn) if isinstance(n, ast.Call)
                   and isinstance(n.func, ast.Attribute) and n.func.attr == "pop"
                   and ast.unparse(n.func.value) == "engine_kwargs" and n.args
                   and isinstance(n.args[0], ast.Constant)})


def build_from(tree: ast.Module) -> dict[str, Any]:
    fn = launch_server(tree)
    lit = args_literal(fn)
    spread = next(i for i, k in enumerate(lit.keys) if k is None and ast.unparse(lit.values[i]) == "engine_kwargs")
    before: dict[str, Any] = {}
    for k, v in zip(lit.keys[:spread], lit.values[:spread]):
        if isinstance(k, ast.Constant):
            before[k.value] = {"expr": ast.unparse(v), "from": _source_key(v), "line": v.lineno}
    return {"file": SERVER, "function": f"SGLangHttpServer.launch_server:{fn.lineno}",
            "literal": f"{lit.lineno}-{lit.end_lineno}", "spread_line": lit.values[spread].lineno,
            "replaced_by_engine_kwargs": before, "set_after": _later_writes(fn), "popped": _popped(fn)}


def build() -> dict[str, Any]:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    root = Path(list(spec.submodule_search_locations)[0])
    text = (root / SERVER).read_text(encoding="utf-8")
    version = (root / "version" / "version").read_text(encoding="utf-8").strip() \
        if (root / "version" / "version").is_file() else "unknown"
    return {"verl": version, **build_from(ast.parse(text))}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
