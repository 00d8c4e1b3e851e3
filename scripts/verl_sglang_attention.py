#!/usr/bin/env python3
"""The SGLang attention backend verl 0.9.1 picks itself, and the model families it treats as hybrid GDN: writes
wizard/check/data/verl_sglang_attention.json, read by check's VI958 / VI959 (SGLang attention backend the card
refuses).

    python scripts/verl_sglang_attention.py           # regenerate the table from the installed verl's source
    python scripts/verl_sglang_attention.py --check   # exit 1 when the committed table differs

Read with ast, nothing imported (the server imports sglang and torch):
- verl/workers/rollout/sglang_rollout/async_sglang_server.py, SGLangHttpServer.launch_server: the key it pops from
  `engine_kwargs.sglang` (`attention_backend = engine_kwargs.pop("attention_backend", None)`, :277) and the chain
  under `if attention_backend is None:` (:289-297): "aiter" when `torch.version.hip is not None`, "flashinfer" when
  `version.parse(sglang.__version__) >= version.parse("0.5.12")`, else "fa3". No branch looks at the card or the
  model, and the value goes to SGLang's ServerArgs (:332), so SGLang never auto-selects a backend under verl.
- verl/models/transformers/npu_patch.py NPU_PATCHES (:411-421): the model types whose patch replaces a gated RMSNorm
  (`...RMSNormGated.forward`), i.e. the GatedDeltaNet families (qwen3_next, qwen3_5, qwen3_5_moe in 0.9.1);
- verl/utils/flops_counter.py _count_qwen3_5_layer_types (:271-283): verl's own test for a GDN layer,
  `layer_type == "linear_attention"` in config.layer_types.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_sglang_attention.json"
SERVER = "workers/rollout/sglang_rollout/async_sglang_server.py"
NPU_PATCH = "models/transformers/npu_patch.py"
FLOPS = "utils/flops_counter.py"


def _func(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    return next(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name)


def _assigned(stmts: list[ast.stmt], var: str) -> str | None:
    for s in stmts:
        if isinstance(s, ast.Assign) and [ast.unparse(t) for t in s.targets] == [var] \
                and isinstance(s.value, ast.Constant):
            return s.value.value
    return None


def _defaults(fn: ast.AST) -> dict[str, Any]:
    """The `if attention_backend is None:` chain: each branch's test and the backend it assigns."""
    popped = None
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "attention_backend" \
                and isinstance(node.value, ast.Call) and ast.unparse(node.value.func).endswith(".pop"):
            popped = {"key": ast.literal_eval(node.value.args[0]), "line": node.lineno,
                      "from": ast.unparse(node.value.func.value)}
    block = next(n for n in ast.walk(fn) if isinstance(n, ast.If)
                 and ast.unparse(n.test) == "attention_backend is None")
    branches, node = [], block.body[0]
    while isinstance(node, ast.If):
        branches.append({"test": ast.unparse(node.test), "backend": _assigned(node.body, "attention_backend"),
                         "line": node.lineno})
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
        else:
            branches.append({"test": "else", "backend": _assigned(node.orelse, "attention_backend"),
                             "line": node.orelse[0].lineno if node.orelse else node.lineno})
            break
    rocm = next(b["backend"] for b in branches if "torch.version.hip" in b["test"])
    newer = next(b for b in branches if "sglang.__version__" in b["test"])
    threshold = next(ast.literal_eval(c.args[0]) for c in ast.walk(ast.parse(newer["test"]))
                     if isinstance(c, ast.Call) and ast.unparse(c.func).endswith("parse")
                     and isinstance(c.args[0], ast.Constant))
    older = next(b["backend"] for b in branches if b["test"] == "else")
    return {"popped": popped, "default_lines": [block.lineno, max(b["line"] for b in branches)],
            "branches": branches, "rocm": rocm, "sglang_from": threshold, "newer": newer["backend"], "older": older}


def _gdn_model_types(tree: ast.Module) -> list[str]:
    """NPU_PATCHES entries whose patch function replaces a `*RMSNormGated.forward` (GatedDeltaNet's gated norm)."""
    table = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                 and [ast.unparse(t) for t in n.targets] == ["NPU_PATCHES"])
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    out = []
    for k, v in zip(table.keys, table.values):
        fn = fns.get(ast.unparse(v))
        gated = fn is not None and any(isinstance(s, ast.Assign) and
                                       ast.unparse(s.targets[0]).endswith("RMSNormGated.forward") for s in ast.walk(fn))
        if gated:
            out.append(ast.literal_eval(k))
    return sorted(out)


def _gdn_layer_type(tree: ast.Module) -> str:
    fn = _func(tree, "_count_qwen3_5_layer_types")
    for node in ast.walk(fn):
        if isinstance(node, ast.Compare) and ast.unparse(node.left) == "layer_type" and \
                isinstance(node.comparators[0], ast.Constant) and "linear" in node.comparators[0].value:
            return node.comparators[0].value
    raise ValueError("no linear-attention layer type in _count_qwen3_5_layer_types")


def _build(verl: Path) -> dict[str, Any]:
    server = ast.parse((verl / SERVER).read_text(encoding="utf-8"))
    return {
        "sources": [SERVER, NPU_PATCH, FLOPS],
        "launch_server": _defaults(_func(server, "launch_server")),
        "gdn_model_types": _gdn_model_types(ast.parse((verl / NPU_PATCH).read_text(encoding="utf-8"))),
        "gdn_layer_type": _gdn_layer_type(ast.parse((verl / FLOPS).read_text(encoding="utf-8"))),
    }


def build() -> dict[str, Any]:
    return from_installed_verl(_build)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
