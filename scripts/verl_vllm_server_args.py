#!/usr/bin/env python3
"""Which vLLM engine arguments verl 0.9.1 sets itself around the user's engine_kwargs.vllm: writes
wizard/check/data/verl_vllm_server_args.json, read by check's VI729 (keys written after the spread) and VI600 / VI612
(keys of verl's own literal that the spread replaces).

    python scripts/verl_vllm_server_args.py           # regenerate the table from the installed verl
    python scripts/verl_vllm_server_args.py --check   # exit 1 when the committed table differs

vLLMHttpServer.launch_server (workers/rollout/vllm_rollout/vllm_async_server.py) reads `engine_kwargs.vllm`
(:287-288), builds `args = {...}` with `**engine_kwargs` spread last (:349), and then writes more keys into `args`
(`args["k"] = ...`, `args.update({...})`), some in a branch, some always: `args.update({"enable_expert_parallel":
self.config.expert_parallel_size > 1})` (:402) runs for every launch, so an engine_kwargs.vllm.enable_expert_parallel
that disagrees with rollout.expert_parallel_size is silently replaced. The table is read from that function with ast:
each later key with its line, the expression verl gives it, and whether a branch (if/for/with/try) encloses the write;
each key of the literal before the spread (`replaced_by_engine_kwargs`: the expression and the verl config key it comes
from, `rollout.X` for self.config.X, `model.X` for self.model_config.X); and the keys launch_server pops out of
engine_kwargs before the literal (`popped`: compilation_config, which verl merges itself, :307); and the keys it
writes into engine_kwargs itself before the literal (`written_into_engine_kwargs`: `engine_kwargs["k"] = ...`, with
the `if` that guards the write: limit_mm_per_prompt from rollout.limit_images, :289-290).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path
from verl_sglang_server_args import _popped, _source_key  # noqa: E402 - same ast readers, same folder

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_vllm_server_args.json"
SERVER = "workers/rollout/vllm_rollout/vllm_async_server.py"
BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)


def launch_server(tree: ast.Module) -> ast.AsyncFunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "vLLMHttpServer":
            for item in node.body:
                if isinstance(item, ast.AsyncFunctionDef) and item.name == "launch_server":
                    return item
    raise LookupError("vLLMHttpServer.launch_server not found")


def _writes(stmts: list[ast.stmt], branch: bool, after: int, out: dict[str, dict[str, Any]]) -> None:
    """args["k"] = v and args.update({"k": v}) in these statements (recursing into blocks), after line `after`."""
    for st in stmts:
        if st.lineno > after:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Subscript) \
                    and ast.unparse(st.targets[0].value) == "args" and isinstance(st.targets[0].slice, ast.Constant):
                out.setdefault(st.targets[0].slice.value,
                               {"line": st.lineno, "expr": ast.unparse(st.value), "conditional": branch})
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) \
                    and ast.unparse(st.value.func) == "args.update" and st.value.args \
                    and isinstance(st.value.args[0], ast.Dict):
                for k, v in zip(st.value.args[0].keys, st.value.args[0].values):
                    if isinstance(k, ast.Constant):
                        out.setdefault(k.value, {"line": st.lineno, "expr": ast.unparse(v), "conditional": branch})
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(st, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                _writes(inner, branch or isinstance(st, BRANCHES), after, out)
        for handler in getattr(st, "handlers", []) or []:
            _writes(handler.body, True, after, out)


def _into_engine_kwargs(fn: ast.AsyncFunctionDef, before: int) -> dict[str, dict[str, Any]]:
    """engine_kwargs["k"] = v before line `before`, with the test of the `if` directly around it (or None)."""
    out: dict[str, dict[str, Any]] = {}
    guards = {id(st): node.test for node in ast.walk(fn) if isinstance(node, ast.If) for st in node.body}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and node.lineno < before and isinstance(node.targets[0], ast.Subscript) \
                and ast.unparse(node.targets[0].value) == "engine_kwargs" \
                and isinstance(node.targets[0].slice, ast.Constant):
            test = guards.get(id(node))
            out[node.targets[0].slice.value] = {"line": node.lineno, "expr": ast.unparse(node.value),
                                                "when": ast.unparse(test) if test is not None else None}
    return dict(sorted(out.items()))


def build_from(tree: ast.Module) -> dict[str, Any]:
    fn = launch_server(tree)
    lit = next(n for n in ast.walk(fn) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "args"
               and isinstance(n.value, ast.Dict))
    spread = next(v for k, v in zip(lit.value.keys, lit.value.values) if k is None and ast.unparse(v) == "engine_kwargs")
    after: dict[str, dict[str, Any]] = {}
    _writes(fn.body, False, lit.value.end_lineno or lit.lineno, after)
    before: dict[str, Any] = {}
    for k, v in zip(lit.value.keys, lit.value.values):
        if k is None:
            break
        if isinstance(k, ast.Constant):
            before[k.value] = {"expr": ast.unparse(v), "from": _source_key(v), "line": v.lineno}
    return {"file": SERVER, "function": f"vLLMHttpServer.launch_server:{fn.lineno}",
            "literal": f"{lit.lineno}-{lit.value.end_lineno}", "popped": _popped(fn),
            "replaced_by_engine_kwargs": dict(sorted(before.items())), "spread_line": spread.lineno,
            "set_after": dict(sorted(after.items())), "written_into_engine_kwargs": _into_engine_kwargs(fn, lit.lineno)}


def build() -> dict[str, Any]:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    root = Path(list(spec.submodule_search_locations)[0])
    version = (root / "version" / "version").read_text(encoding="utf-8").strip() \
        if (root / "version" / "version").is_file() else "unknown"
    return {"verl": version, **build_from(ast.parse((root / SERVER).read_text(encoding="utf-8")))}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
