#!/usr/bin/env python3
"""Which checkpoint-engine backend names verl 0.9.1 registers: writes wizard/check/data/verl_ckpt_backends.json, read
by check's VI705.

    python scripts/verl_ckpt_backends.py           # regenerate the table from the installed verl
    python scripts/verl_ckpt_backends.py --check   # exit 1 when the committed table differs

Every engine under verl/checkpoint_engine/ registers itself with `@CheckpointEngineRegistry.register("NAME")`
(base.py:246 naive, nccl_checkpoint_engine.py:119, hccl_checkpoint_engine.py:103 — also "nccl", nixl :238,
kimi_checkpoint_engine.py:222 "kimi_ckpt_engine", mooncake :38, delta_checkpoint_engine.py:222 "delta_sharded");
`CheckpointEngineRegistry.get(backend)` raises "Checkpoint engine X not registered" for any other name
(base.py:84-99). The table is read from those modules with ast (never imported: most need cupy / zmq / mooncake):
each registered name with the file and line that registers it, the module stem a name differs from (hccl -> nccl,
kimi -> kimi_ckpt_engine, delta -> delta_sharded: names a user writes from the file or from verl's own config comment,
workers/config/rollout.py:132 "naive, nccl, nixl, hccl"), and the lines where verl resolves the backend.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_ckpt_backends.json"
FOLDER = "checkpoint_engine"
WORKER = "workers/engine_workers.py"
SUFFIX = "_checkpoint_engine"


def registrations(tree: ast.Module) -> list[tuple[str, int]]:
    """(name, line) of each `@CheckpointEngineRegistry.register("name")` class decorator in a module."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for dec in node.decorator_list:
            if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "register" \
                    and ast.unparse(dec.func.value) == "CheckpointEngineRegistry" and dec.args \
                    and isinstance(dec.args[0], ast.Constant) and isinstance(dec.args[0].value, str):
                out.append((dec.args[0].value, dec.lineno))
    return out


def _calls(tree: ast.Module, attr: str) -> list[int]:
    """Lines of `CheckpointEngineRegistry.<attr>(...)` calls."""
    return sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                  and n.func.attr == attr and ast.unparse(n.func.value) in ("CheckpointEngineRegistry", "cls"))


def build_from(root: Path) -> dict[str, Any]:
    registered: dict[str, list[str]] = {}
    stems: dict[str, str] = {}
    for path in sorted((root / FOLDER).glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, line in registrations(tree):
            registered.setdefault(name, []).append(f"{FOLDER}/{path.name}:{line}")
            stem = path.stem[:-len(SUFFIX)] if path.stem.endswith(SUFFIX) else None
            if stem and stem != name:
                stems[stem] = name
    base = ast.parse((root / FOLDER / "base.py").read_text(encoding="utf-8"))
    worker = ast.parse((root / WORKER).read_text(encoding="utf-8"))
    get_def = next(n for n in ast.walk(base) if isinstance(n, ast.FunctionDef) and n.name == "get")
    return {"registered": registered, "module_names": stems,
            "get": f"{FOLDER}/base.py:{get_def.lineno}-{get_def.end_lineno}",
            "worker_new": [f"{WORKER}:{line}" for line in _calls(worker, "new")],
            "manager_get": [f"{FOLDER}/base.py:{line}" for line in _calls(base, "get")]}


def build() -> dict[str, Any]:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
