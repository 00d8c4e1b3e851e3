#!/usr/bin/env python3
"""What verl 0.9.1's Megatron engine sends the rollout for a LoRA run: writes wizard/check/data/verl_vlm_lora_sync.json,
read by check's VI666.

    python scripts/verl_vlm_lora_sync.py           # regenerate the table from the installed verl
    python scripts/verl_vlm_lora_sync.py --check   # exit 1 when the committed table differs

model.lora (trainer/config/model/hf_model.yaml) holds the `freeze_*` switches of Megatron-Bridge's VLMLoRA (type
vlm_lora): VLMLoRA.freeze_model sets requires_grad=False only on the modules whose switch is True, so a False one
trains that module's base weights in full. verl hands the whole block to Megatron-Bridge's create_peft
(workers/config/megatron_peft.py). The Megatron engine's get_per_tensor_param (workers/engine/megatron/
transformer_impl.py) syncs adapters only once the base weights are in the rollout (`adapter_only = base_sync_done and
non_merge_lora_sync`, then `bridge.export_adapter_weights`) unless lora.merge is set. The table is read from the YAML
(the freeze_* keys, their defaults, lora.type's and lora.merge's defaults and lines) and, with ast, from
get_per_tensor_param (the lines of the adapter_only assignment and of the export_adapter_weights call).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_vlm_lora_sync.json"
YAML = "trainer/config/model/hf_model.yaml"
ENGINE = "workers/engine/megatron/transformer_impl.py"


def lora_block(text: str) -> dict[str, Any]:
    """The lora: block's scalar keys of hf_model.yaml: {key: (value, line)}."""
    import yaml

    out: dict[str, Any] = {}
    inside = False
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            inside = line.rstrip() == "lora:"
            continue
        if inside and line.startswith("  ") and not line.startswith("   ") and ":" in line:
            key, _, rest = line.strip().partition(":")
            out[key] = (yaml.safe_load(rest.split(" #")[0]) if rest.strip() else None, no)
    if not out:
        raise LookupError(f"no lora: block in {YAML}")
    return out


def per_tensor_param(tree: ast.Module) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "get_per_tensor_param":
            return node
    raise LookupError(f"get_per_tensor_param not found in {ENGINE}")


def sync_lines(fn: ast.FunctionDef) -> dict[str, int]:
    adapter_only = export = None
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "adapter_only" for t in node.targets):
            src = ast.unparse(node.value)
            if "base_sync_done" in src and "non_merge_lora_sync" in src:
                adapter_only = node.lineno
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "export_adapter_weights":
            export = node.lineno
    if adapter_only is None or export is None:
        raise LookupError("get_per_tensor_param no longer syncs adapters only after the base sync")
    return {"adapter_only_line": adapter_only, "export_adapter_line": export}


def build_from(root: Path) -> dict[str, Any]:
    block = lora_block((root / YAML).read_text(encoding="utf-8"))
    freeze = {k: {"default": v, "line": no} for k, (v, no) in sorted(block.items()) if k.startswith("freeze_")}
    if not freeze:
        raise LookupError(f"no freeze_* keys under lora: in {YAML}")
    engine = sync_lines(per_tensor_param(ast.parse((root / ENGINE).read_text(encoding="utf-8"))))
    return {"yaml": YAML, "engine": ENGINE, "freeze": freeze,
            "type_default": block["type"][0], "type_line": block["type"][1],
            "merge_default": block["merge"][0], "merge_line": block["merge"][1], **engine}


def build() -> dict[str, Any]:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    raise SystemExit(table_main(__doc__, build, OUT))
