#!/usr/bin/env python3
"""What verl 0.9.1 does on every node of a multi-node run: writes wizard/check/data/verl_multinode.json, read by
check's VI948 (Gloo beside the device backend), VI953 (config files each worker resolves) and VI954 (checkpoint
retention on every rank).

    python scripts/verl_multinode.py           # regenerate the table from the installed verl
    python scripts/verl_multinode.py --check   # exit 1 when the committed table differs

Read with ast from verl's source (never imported):
- gloo: every `f"cpu:gloo,{...}"` backend string verl hands torch.distributed.init_process_group
  (utils/distributed.py): each worker opens a Gloo group beside NCCL/HCCL, and Gloo picks its network interface from
  GLOO_SOCKET_IFNAME, not from NCCL_SOCKET_IFNAME / HCCL_SOCKET_IFNAME;
- resolved_paths: the rollout config keys whose value AgentLoopWorker passes to resolve_config_path
  (experimental/agent_loop/agent_loop.py), with the lines of resolve_config_path (utils/import_utils.py) that try
  only the worker's own working folder and verl's package / project root;
- prune: for each checkpoint manager (utils/checkpoint/*_checkpoint_manager.py) the lines that call
  ensure_checkpoint_capacity / register_checkpoint (both shutil.rmtree old checkpoints,
  utils/checkpoint/checkpoint_manager.py) and whether each call sits under an `if self.rank == 0` guard.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_multinode.json"
DIST = "utils/distributed.py"
AGENT = "experimental/agent_loop/agent_loop.py"
IMPORTS = "utils/import_utils.py"
CKPT = "utils/checkpoint"
PRUNERS = ("ensure_checkpoint_capacity", "register_checkpoint")
ROLLOUT = "actor_rollout_ref.rollout"


def _tree(root: Path, rel: str) -> ast.Module:
    return ast.parse((root / rel).read_text(encoding="utf-8"))


def gloo_backends(tree: ast.Module) -> list[int]:
    """Lines of f-strings that start with "cpu:gloo," (a backend string with a Gloo group for CPU tensors)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant) \
                and str(node.values[0].value).startswith("cpu:gloo,"):
            out.append(node.lineno)
    return sorted(out)


def resolved_keys(tree: ast.Module) -> dict[str, int]:
    """Config keys (under actor_rollout_ref.rollout) whose value reaches resolve_config_path, with the call's line:
    `name = self.rollout_config.<path>` then `resolve_config_path(name)`."""
    sources: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            text = ast.unparse(node.value)
            if text.startswith("self.rollout_config."):
                sources[node.targets[0].id] = ROLLOUT + text[len("self.rollout_config"):]
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "resolve_config_path" \
                and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in sources:
            out[sources[node.args[0].id]] = node.lineno
    return dict(sorted(out.items()))


def _rank0_guard(test: ast.expr) -> bool:
    text = ast.unparse(test).replace(" ", "")
    return "self.rank==0" in text


def prune_calls(tree: ast.Module) -> list[dict[str, Any]]:
    """Each `self.<pruner>(...)` call: its line and whether an enclosing `if` tests self.rank == 0."""
    out: list[dict[str, Any]] = []

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.If):
            inner = guarded or _rank0_guard(node.test)
            for child in node.body:
                visit(child, inner)
            for child in node.orelse:
                visit(child, guarded)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PRUNERS \
                and ast.unparse(node.func.value) == "self":
            out.append({"call": node.func.attr, "line": node.lineno, "rank0_only": guarded})
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        visit(cls, False)
    return sorted(out, key=lambda d: d["line"])


def build_from(root: Path) -> dict[str, Any]:
    imports = _tree(root, IMPORTS)
    resolve = next(n for n in ast.walk(imports) if isinstance(n, ast.FunctionDef) and n.name == "resolve_config_path")
    base = _tree(root, f"{CKPT}/checkpoint_manager.py")
    remove = next(n for n in ast.walk(base) if isinstance(n, ast.FunctionDef) and n.name == "remove_previous_save_local_path")
    prune: dict[str, Any] = {}
    for path in sorted((root / CKPT).glob("*_checkpoint_manager.py")):
        calls = prune_calls(ast.parse(path.read_text(encoding="utf-8")))
        if calls:
            prune[path.name[:-len("_checkpoint_manager.py")]] = {
                "file": f"{CKPT}/{path.name}", "calls": calls,
                "every_rank": any(not c["rank0_only"] for c in calls)}
    return {
        "gloo": [f"{DIST}:{line}" for line in gloo_backends(_tree(root, DIST))],
        "resolved_paths": {key: f"{AGENT}:{line}" for key, line in resolved_keys(_tree(root, AGENT)).items()},
        "resolve_config_path": f"{IMPORTS}:{resolve.lineno}-{resolve.end_lineno}",
        "remove_previous": f"{CKPT}/checkpoint_manager.py:{remove.lineno}-{remove.end_lineno}",
        "prune": prune,
    }


def build() -> dict[str, Any]:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
