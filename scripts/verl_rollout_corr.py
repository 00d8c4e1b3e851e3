#!/usr/bin/env python3
"""What verl's rollout correction accepts and which trainers run its bypass loss: writes
wizard/check/data/verl_rollout_corr.json, read by check's VI941 and VI943.

    python scripts/verl_rollout_corr.py           # regenerate the table from the installed verl's source
    python scripts/verl_rollout_corr.py --check   # exit 1 when the committed table differs

Reads verl's source with `ast` (nothing is imported):

- `rs_options` / `rs_token_level`: the sets SUPPORTED_ROLLOUT_RS_OPTIONS and TOKEN_LEVEL_ROLLOUT_RS_OPTIONS of
  verl/trainer/ppo/rollout_corr_helper.py, the names compute_rollout_rejection_mask accepts in
  algorithm.rollout_correction.rollout_rs (anything else raises ValueError there, in the first training step).
- `bypass_loss_callers`: every call of rollout_corr_helper.apply_bypass_mode under verl/, the one function that
  switches actor.policy_loss.loss_mode to "bypass_mode" and hands it algorithm.rollout_correction (where rollout_is,
  rollout_rs, loss_type and rollout_is_batch_normalize are read in bypass mode).
- `v1_bypass_branches`: the places of verl/trainer/ppo/v1/ that read `bypass_mode` and what they do instead.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_rollout_corr.json"
HELPER = "verl/trainer/ppo/rollout_corr_helper.py"


def _verl_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec and spec.origin, "verl is not installed"
    return Path(spec.origin).parent


def _string_set(tree: ast.Module, name: str) -> tuple[list[str], int]:
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == name and isinstance(node.value, ast.Set):
            return sorted(e.value for e in node.value.elts if isinstance(e, ast.Constant)), node.lineno
    raise AssertionError(f"{name} not found in {HELPER}")


def _calls(tree: ast.AST, name: str) -> list[int]:
    return sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Name) and n.func.id == name)
        or (isinstance(n.func, ast.Attribute) and n.func.attr == name)))


def _bypass_reads(tree: ast.AST) -> list[tuple[str, int]]:
    """(function, line) of each `.get("bypass_mode", ...)` in a module."""
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for n in ast.walk(fn):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args
                    and isinstance(n.args[0], ast.Constant) and n.args[0].value == "bypass_mode"):
                out.append((fn.name, n.lineno))
    return out


def build() -> dict[str, Any]:
    verl = _verl_dir()
    helper = ast.parse((verl.parent / HELPER).read_text(encoding="utf-8"))
    options, line = _string_set(helper, "SUPPORTED_ROLLOUT_RS_OPTIONS")
    token, token_line = _string_set(helper, "TOKEN_LEVEL_ROLLOUT_RS_OPTIONS")
    callers, branches = [], []
    for path in sorted(verl.rglob("*.py")):
        rel = path.relative_to(verl.parent).as_posix()
        if "/tests/" in rel:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "bypass_mode" not in text:
            continue
        tree = ast.parse(text)
        callers += [f"{rel}:{n}" for n in _calls(tree, "apply_bypass_mode")]
        if rel.startswith("verl/trainer/ppo/v1/"):
            branches += [f"{rel}:{n} {fn}" for fn, n in _bypass_reads(tree)]
    return {
        "source": HELPER,
        "rs_options": options,
        "rs_options_at": f"{HELPER}:{line}",
        "rs_token_level": token,
        "rs_token_level_at": f"{HELPER}:{token_line}",
        "bypass_loss_callers": callers,
        "v1_bypass_branches": branches,
        "v1_runs_bypass_loss": any(c.startswith("verl/trainer/ppo/v1/") for c in callers),
    }


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
