#!/usr/bin/env python3
"""Which config keys verl's PPO trainers pass as the update `epochs` count: writes
wizard/check/data/update_epochs.json, read by check's VI438 (wizard/check/rules/update_epochs.py).

    python scripts/update_epochs_table.py           # regenerate the table from the installed verl's source
    python scripts/update_epochs_table.py --check   # exit 1 when the committed table differs

Walks the trainer sources with `ast` (nothing is imported). In every function of verl/trainer/ppo/ray_trainer.py and
verl/trainer/ppo/v1/trainer_base.py it records each config key that reaches an update's epoch count: a keyword
argument `epochs=<expr>` or a dict entry `"epochs": <expr>`, where <expr> is `self.config.<path>` or a local name
assigned from one in the same function. The role is the key's first part ("critic" or "actor_rollout_ref.actor").
It also records where the training worker consumes the count: the `for _ in range(epochs)` loop of
verl/utils/tensordict_utils.py:make_iterator, which yields no mini-batch at all when epochs < 1.

For check's VI439 it records the outer training loop of each trainer's `fit` (LOOPS): the source text and line of
the first `while` test or `for ... in range(...)` that reads `total_epochs` (V1's `while current_epoch <
total_epochs and global_steps <= total_training_steps`, the legacy PPO and SFT trainers' `range(start,
total_epochs)`), so the test can evaluate verl's own loop condition at the run budget a launch sets.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "update_epochs.json"
SOURCES = ("trainer/ppo/ray_trainer.py", "trainer/ppo/v1/trainer_base.py")
CONSUMER = "utils/tensordict_utils.py"
LOOPS = {"v1": "trainer/ppo/v1/trainer_base.py", "legacy": "trainer/ppo/ray_trainer.py", "sft": "trainer/sft_trainer.py"}


def _config_path(node: ast.AST) -> str | None:
    """`self.config.a.b.c` → "a.b.c"."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if len(parts) >= 2 and parts[-1] == "config" and isinstance(node, ast.Name) and node.id == "self":
        return ".".join(reversed(parts[:-1]))
    return None


def _epoch_keys(func: ast.AST) -> list[tuple[str, int]]:
    """(config key, line) for each `epochs=` / `"epochs":` in one function whose value is a config key."""
    local: dict[str, str] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            path = _config_path(node.value)
            if path:
                local[node.targets[0].id] = path
    found: list[tuple[str, int]] = []

    def resolve(expr: ast.AST) -> str | None:
        return _config_path(expr) or (local.get(expr.id) if isinstance(expr, ast.Name) else None)

    for node in ast.walk(func):
        values: list[ast.AST] = []
        if isinstance(node, ast.keyword) and node.arg == "epochs":
            values.append(node.value)
        elif isinstance(node, ast.Dict):
            values += [v for k, v in zip(node.keys, node.values)
                       if isinstance(k, ast.Constant) and k.value == "epochs"]
        for v in values:
            key = resolve(v)
            if key:
                found.append((key, v.lineno))
    return found


def _consumer_line(tree: ast.AST) -> int | None:
    """The line of `for _ in range(epochs)` inside make_iterator."""
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef) and func.name == "make_iterator":
            for node in ast.walk(func):
                if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
                        isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range" and \
                        any(isinstance(a, ast.Name) and a.id == "epochs" for a in node.iter.args):
                    return node.lineno
    return None


def _fit_loop(source: str) -> dict[str, Any] | None:
    """{"line", "kind", "test"} of the first loop in `fit` whose header reads total_epochs."""
    tree = ast.parse(source)
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef) and func.name == "fit":
            for node in ast.walk(func):
                head = node.test if isinstance(node, ast.While) else node.iter if isinstance(node, ast.For) else None
                if head is not None and "total_epochs" in ast.unparse(head):
                    return {"line": node.lineno, "kind": "while" if isinstance(node, ast.While) else "for",
                            "test": ast.unparse(head)}
    return None


def build_from(root: Path) -> dict[str, Any]:
    keys: dict[str, list[str]] = {}
    for rel in SOURCES:
        tree = ast.parse((root / rel).read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for key, line in _epoch_keys(func):
                    keys.setdefault(key, []).append(f"{rel}:{line}")
    consumer = _consumer_line(ast.parse((root / CONSUMER).read_text(encoding="utf-8")))
    loops = {name: {"file": rel, **(_fit_loop((root / rel).read_text(encoding="utf-8")) or {})}
             for name, rel in LOOPS.items()}
    return {"keys": {k: sorted(set(v)) for k, v in sorted(keys.items())},
            "consumer": f"{CONSUMER}:{consumer}" if consumer else None, "loops": loops}


def build() -> dict[str, Any]:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
