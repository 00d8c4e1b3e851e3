#!/usr/bin/env python3
"""Activation-recompute settings verl and megatron-core accept: writes wizard/check/data/mcore_recompute.json, the
table check's VI616 / VI626 (wizard/check/rules/recompute.py) read.

    python scripts/mcore_recompute.py           # regenerate
    python scripts/mcore_recompute.py --check   # exit 1 when the committed table differs

Two parts, each read from source, never typed in:

- "verl": from the installed verl: the recompute defaults of its Megatron engine config
  (trainer/config/engine/megatron.yaml: recompute_granularity / recompute_method / recompute_num_layers null,
  recompute_modules ["core_attn"]) and the branches of verl's own MTP checkpointed forward
  (models/mcore/mtp_patch.py `_patched_checkpointed_forward`: the recompute_num_layers the `uniform` branch asserts,
  the methods that warn and run without a checkpoint, the ValueError for any other method).
- "megatron_core": from megatron-core's transformer_config.py (TransformerConfig.__post_init__'s recompute block):
  the granularities and methods it accepts and the recompute_modules set `selective` allows. megatron-core is verl's
  [megatron] extra and is not installed here: the file is read from the importable megatron.core, else from the path
  in $MCORE_TRANSFORMER_CONFIG (a copy of a Megatron-LM checkout's megatron/core/transformer/transformer_config.py,
  e.g. `git show core_v0.18.2:megatron/core/transformer/transformer_config.py`), else the committed part is kept
  (so --check then compares the verl part only).
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "mcore_recompute.json"
KEYS = ("recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules")


def _attr(node: ast.AST) -> str | None:
    """'x' for `self.x` / `self.config.x`."""
    return node.attr if isinstance(node, ast.Attribute) else None


def verl_part(root: Path) -> dict[str, Any]:
    import yaml

    eng = yaml.safe_load((root / "trainer" / "config" / "engine" / "megatron.yaml").read_text(encoding="utf-8"))
    otc = eng.get("override_transformer_config") or {}
    defaults = {k: otc.get(k) for k in KEYS}
    src_path = root / "models" / "mcore" / "mtp_patch.py"
    tree = ast.parse(src_path.read_text(encoding="utf-8"))
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_patched_checkpointed_forward"]
    mtp: dict[str, Any] = {"function": "models/mcore/mtp_patch.py:_patched_checkpointed_forward",
                           "checkpointed": {}, "skipped": {}, "other_method": None}
    for node in fn.body:
        if not isinstance(node, ast.If):
            continue
        test = node.test
        if not (isinstance(test, ast.Compare) and _attr(test.left) == "recompute_method"
                and isinstance(test.ops[0], ast.Eq) and isinstance(test.comparators[0], ast.Constant)):
            continue
        method = test.comparators[0].value
        asserts = [s for s in node.body if isinstance(s, ast.Assert)]
        warns = [s for s in ast.walk(node) if isinstance(s, ast.Call) and _attr(s.func) == "warn"]
        if asserts:
            cmp = asserts[0].test
            assert isinstance(cmp, ast.Compare) and _attr(cmp.left) == "recompute_num_layers"
            mtp["checkpointed"][method] = {"recompute_num_layers": cmp.comparators[0].value, "line": asserts[0].lineno}
        elif warns:
            mtp["skipped"][method] = {"line": warns[0].lineno}
    raises = [s for s in fn.body if isinstance(s, ast.Raise)]
    if raises:
        mtp["other_method"] = {"raises": raises[-1].exc.func.id, "line": raises[-1].lineno}  # type: ignore[union-attr]
    return {"defaults": defaults, "mtp": mtp}


def _mcore_source() -> tuple[str, str] | None:
    try:
        import megatron.core
        from megatron.core.transformer import transformer_config as tc

        return Path(tc.__file__).read_text(encoding="utf-8"), f"megatron-core {megatron.core.__version__}"
    except ImportError:
        pass
    path = os.environ.get("MCORE_TRANSFORMER_CONFIG")
    if path and Path(path).is_file():
        return Path(path).read_text(encoding="utf-8"), os.environ.get("MCORE_VERSION", "megatron-core (file)")
    return None


def mcore_part(text: str, version: str) -> dict[str, Any]:
    tree = ast.parse(text)
    allowed: dict[str, list[str]] = {}
    modules: list[str] = []
    lines: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.NotIn) and _attr(node.left) in (
                "recompute_granularity", "recompute_method") and isinstance(node.comparators[0], ast.List):
            name = _attr(node.left)
            allowed.setdefault(name, [e.value for e in node.comparators[0].elts])  # type: ignore[attr-defined]
            lines.setdefault(name, node.lineno)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "allowed_modules"
                                                for t in node.targets) and isinstance(node.value, ast.Set):
            modules = sorted(e.value for e in node.value.elts)  # type: ignore[attr-defined]
            lines["recompute_modules"] = node.lineno
    src = text.splitlines()
    needles = {"full_needs_method": 'recompute_method must be "block" or "uniform"',
               "full_needs_num_layers": "recompute_num_layers must be between",
               "selective_no_num_layers": "recompute_num_layers must be None."}
    for name, needle in needles.items():
        lines[name] = next(i for i, line in enumerate(src, 1) if needle in line)
    return {"version": version, "file": "megatron/core/transformer/transformer_config.py",
            "granularities": allowed["recompute_granularity"], "methods": allowed["recompute_method"],
            "selective_modules": modules, "lines": lines}


def build() -> dict[str, Any]:
    got = _mcore_source()
    if got is not None:
        mcore = mcore_part(*got)
    else:
        mcore = json.loads(OUT.read_text(encoding="utf-8"))["megatron_core"]
    return {"verl": from_installed_verl(verl_part), "megatron_core": mcore}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
