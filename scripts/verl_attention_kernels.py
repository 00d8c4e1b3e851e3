#!/usr/bin/env python3
"""The attention kernel verl's FSDP engine trains a Hugging Face model with, and the model families that kernel does
not fit: writes wizard/check/data/verl_attention_kernels.json, read by check's VI642-VI644
(wizard/check/rules/attention_kernels.py).

    python scripts/verl_attention_kernels.py           # regenerate the table from the installed verl / transformers
    python scripts/verl_attention_kernels.py --check   # exit 1 when the committed table differs

Read with ast, nothing imported from verl or from transformers' model code:
- verl/workers/config/model.py: HFModelConfig's `override_config.get("attn_implementation", <default>)` (verl 0.9.1:
  :185, "flash_attention_2"), the value passed to AutoConfig.from_pretrained, which the FSDP engine's from_pretrained
  receives as `config=` (workers/engine/fsdp/transformer_impl.py:276-280);
- verl/utils/model.py load_valuehead_model: the attn_implementation literal(s) it passes to from_pretrained (0.9.1:
  "flash_attention_2" at :649 and :674, the FSDP critic's load, whatever critic.model.override_config says);
- verl/models/transformers/monkey_patch.py: whether _ulysses_flash_attention_forward (0.9.1: :87) ever names the
  attention sinks (`s_aux` / `sinks`): it does not in 0.9.1, so the per-head sink tensor crosses the head all-to-all
  unsplit;
- transformers/models/*/modeling_*.py: the model types whose attention passes `s_aux=` (learned attention sinks) to
  the attention function (transformers 5.10: gpt_oss, deepseek_v4, openai_privacy_filter), and of those the ones
  whose model classes set `_supports_sdpa = False` (transformers refuses attn_implementation=sdpa for them when the
  model is built: gpt_oss).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_attention_kernels.json"
MODEL_CONFIG = "workers/config/model.py"
UTILS_MODEL = "utils/model.py"
PATCH = "models/transformers/monkey_patch.py"


def _package(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _default_attention(tree: ast.Module) -> tuple[str, int]:
    """The default of `<x>.override_config.get("attn_implementation", <default>)` and its line."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and ast.unparse(node.func.value).endswith("override_config") and len(node.args) == 2
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == "attn_implementation"
                and isinstance(node.args[1], ast.Constant)):
            return str(node.args[1].value), node.lineno
    raise AssertionError(f"no override_config.get('attn_implementation', ...) in verl's {MODEL_CONFIG}")


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    found = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)
    assert found is not None, f"verl has no {name}"
    return found


def _critic_attention(tree: ast.Module) -> dict[str, Any]:
    """The attn_implementation keyword constants load_valuehead_model passes, with their lines."""
    fn = _function(tree, "load_valuehead_model")
    hits = [(kw.value.value, kw.value.lineno) for n in ast.walk(fn) if isinstance(n, ast.Call) for kw in n.keywords
            if kw.arg == "attn_implementation" and isinstance(kw.value, ast.Constant)]
    return {"values": sorted({v for v, _ in hits}), "lines": sorted(line for _, line in hits)}


def _ulysses_reads_sinks(tree: ast.Module) -> dict[str, Any]:
    fn = _function(tree, "_ulysses_flash_attention_forward")
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | \
            {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return {"line": fn.lineno, "reads_sinks": bool(names & {"s_aux", "sinks"})}


def _no_sdpa(tree: ast.Module) -> bool:
    """Whether a class in the modeling file sets `_supports_sdpa = False`."""
    return any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_supports_sdpa" for t in n.targets)
               and isinstance(n.value, ast.Constant) and n.value.value is False for n in ast.walk(tree))


def _sink_model_types(transformers: Path) -> tuple[list[str], list[str]]:
    """Model types (the modeling file's folder) whose code calls an attention function with `s_aux=`, and those of
    them without an sdpa path."""
    out, no_sdpa = [], []
    for path in sorted((transformers / "models").glob("*/modeling_*.py")):
        text = path.read_text(encoding="utf-8")
        if "s_aux" not in text:
            continue
        tree = ast.parse(text)
        if any(isinstance(n, ast.Call) and any(kw.arg == "s_aux" for kw in n.keywords) for n in ast.walk(tree)):
            out.append(path.parent.name)
            if _no_sdpa(tree):
                no_sdpa.append(path.parent.name)
    return sorted(set(out)), sorted(set(no_sdpa))


def build() -> dict[str, Any]:
    verl, transformers = _package("verl"), _package("transformers")
    default, line = _default_attention(_parse(verl / MODEL_CONFIG))
    sinks, no_sdpa = _sink_model_types(transformers)
    return {
        "default_attention": {"value": default, "where": f"{MODEL_CONFIG}:{line}"},
        "critic_attention": {**_critic_attention(_parse(verl / UTILS_MODEL)), "where": UTILS_MODEL},
        "ulysses": {**_ulysses_reads_sinks(_parse(verl / PATCH)), "where": PATCH},
        "sink_model_types": sinks,
        "sink_model_types_without_sdpa": no_sdpa,
    }


if __name__ == "__main__":
    raise SystemExit(table_main(__doc__, build, OUT))
