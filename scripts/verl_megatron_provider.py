#!/usr/bin/env python3
"""The Megatron-Bridge provider settings verl's Megatron engine forces before the user's
override_transformer_config: writes wizard/check/data/verl_megatron_provider.json, read by check's VI927.

    python scripts/verl_megatron_provider.py           # regenerate the table with the installed verl
    python scripts/verl_megatron_provider.py --check   # exit 1 when the committed table differs

verl 0.9.1's MegatronEngine builds the model through Megatron-Bridge (vanilla_mbridge=False, the default): it fills a
dict `provider_overrides` with literal settings (workers/engine/megatron/transformer_impl.py:354-370, among them
moe_router_load_balancing_type="none"), then copies override_transformer_config over it key by key (:371-372), so a
setting of the user's wins only when the user names that very key. The table records every literal constant of that
dict with its line, whether the user's overrides are copied after it, and the legacy config converter's load-balancing
types (models/mcore/config_converter.py), each with its line.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_megatron_provider.json"


def _verl() -> Path:
    import verl

    return Path(verl.__file__).parent


def provider_overrides(tree: ast.AST) -> tuple[dict, int, bool]:
    """The literal entries of `provider_overrides = {...}`, its line, and whether a later
    `for key, value in override_transformer_config.items(): provider_overrides[key] = value` copies the user's keys."""
    assign = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict)
                  and any(isinstance(t, ast.Name) and t.id == "provider_overrides" for t in n.targets))
    entries = {}
    for k, v in zip(assign.value.keys, assign.value.values):
        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant):
            entries[k.value] = {"value": v.value, "line": k.lineno}
    user_after = None
    for n in ast.walk(tree):
        if (isinstance(n, ast.For) and isinstance(n.iter, ast.Call) and n.lineno > assign.lineno
                and ast.unparse(n.iter) == "override_transformer_config.items()"
                and any(isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == "provider_overrides[key]"
                        for s in n.body)):
            user_after = n.lineno
    return entries, assign.lineno, user_after


def converter_types(tree: ast.AST) -> list[dict]:
    """Every moe_router_load_balancing_type=<constant> keyword of the legacy converter, with its function and line."""
    found = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for kw in (k for k in ast.walk(fn) if isinstance(k, ast.keyword)):
            if kw.arg == "moe_router_load_balancing_type" and isinstance(kw.value, ast.Constant):
                found.append({"function": fn.name, "value": kw.value.value, "line": kw.value.lineno})
    return sorted(found, key=lambda d: d["line"])


def build() -> dict:
    root = _verl()
    impl = "workers/engine/megatron/transformer_impl.py"
    entries, line, user_after = provider_overrides(ast.parse((root / impl).read_text(encoding="utf-8")))
    conv = "models/mcore/config_converter.py"
    return {"computed_by": f"verl/{impl} provider_overrides (MegatronEngine, Megatron-Bridge path); verl/{conv}",
            "provider_overrides": entries, "provider_overrides_line": line,
            "user_overrides_copied_at_line": user_after,
            "legacy_converter": converter_types(ast.parse((root / conv).read_text(encoding="utf-8")))}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
