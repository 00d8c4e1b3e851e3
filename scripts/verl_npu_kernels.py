#!/usr/bin/env python3
"""Which of verl's fused-kernel paths compile verl's own Triton kernels, and the tile sizes those kernels are tuned
for: writes wizard/check/data/verl_npu_kernels.json, read by check's VI672 (fused Triton kernels on Ascend NPUs).

    python scripts/verl_npu_kernels.py           # regenerate the table from the installed verl's source
    python scripts/verl_npu_kernels.py --check   # exit 1 when the committed table differs

Read with ast, nothing imported (the kernels import triton):
- verl/utils/kernel/kernels.py: every `@triton.autotune(configs=[triton.Config({...}, num_stages=, num_warps=)])`
  kernel and its configs (verl 0.9.1: efficient_entropy_kernel_general_mainloop at :183-188, one config
  BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=32, num_stages=3; no device branch anywhere in the file);
- verl/models/transformers/monkey_patch.py patch_forward_with_backends: the fused_kernels_backend values it accepts
  (:246) and the one that swaps in forward_with_triton_backend (:282), whose forward calls
  verl.utils.kernel.linear_cross_entropy (dense_common.py:157,189);
- verl/trainer/config/model/hf_model.yaml: use_fused_kernels' and impl_backend's defaults (:61, :68);
- verl/models/mcore/model_forward_fused.py: the Megatron engine's fused forward, which imports linear_cross_entropy
  unconditionally (:35), so a Megatron run with use_fused_kernels always reaches the Triton kernels.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main, verl_root  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_npu_kernels.json"
KERNELS = "utils/kernel/kernels.py"
PATCH = "models/transformers/monkey_patch.py"
HF_MODEL = "trainer/config/model/hf_model.yaml"
MCORE_FUSED = "models/mcore/model_forward_fused.py"


def _autotune_configs(tree: ast.Module) -> dict[str, list[dict[str, int]]]:
    """kernel name -> its triton.autotune configs (the Config dict's entries plus num_stages / num_warps)."""
    out: dict[str, list[dict[str, int]]] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for deco in fn.decorator_list:
            if not (isinstance(deco, ast.Call) and ast.unparse(deco.func).endswith("autotune")):
                continue
            configs = next((kw.value for kw in deco.keywords if kw.arg == "configs"), None)
            rows = []
            for cfg in getattr(configs, "elts", []):
                if not isinstance(cfg, ast.Call) or not cfg.args or not isinstance(cfg.args[0], ast.Dict):
                    continue
                row = {ast.literal_eval(k): ast.literal_eval(v) for k, v in zip(cfg.args[0].keys, cfg.args[0].values)}
                row |= {kw.arg: ast.literal_eval(kw.value) for kw in cfg.keywords if kw.arg}
                rows.append(row)
            out[fn.name] = rows
    return out


def _backends(tree: ast.Module) -> tuple[list[str], list[str]]:
    """patch_forward_with_backends: the backends it accepts, and those that get forward_with_triton_backend."""
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "patch_forward_with_backends")
    accepted: list[str] = []
    triton: list[str] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Compare) and ast.unparse(node.left) == "fused_kernels_backend":
            for op, right in zip(node.ops, node.comparators):
                if isinstance(op, ast.NotIn) and isinstance(right, (ast.List, ast.Tuple)):
                    accepted = sorted(ast.literal_eval(right))
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                ast.unparse(node.test.left) == "fused_kernels_backend" and isinstance(node.test.ops[0], ast.Eq):
            body = " ".join(ast.unparse(s) for s in node.body)
            if "forward_with_triton_backend_function" in body:
                triton.append(ast.literal_eval(node.test.comparators[0]))
    return accepted, sorted(triton)


def build() -> dict[str, Any]:
    verl = verl_root()
    kernels_src = (verl / KERNELS).read_text(encoding="utf-8")
    accepted, triton = _backends(ast.parse((verl / PATCH).read_text(encoding="utf-8")))
    hf = yaml.safe_load((verl / HF_MODEL).read_text(encoding="utf-8"))
    mcore = (verl / MCORE_FUSED).read_text(encoding="utf-8")
    return {
        "sources": [KERNELS, PATCH, HF_MODEL, MCORE_FUSED],
        "autotune": _autotune_configs(ast.parse(kernels_src)),
        "kernels_mention_npu": "npu" in kernels_src.lower(),
        "accepted_backends": accepted,
        "triton_backends": triton,
        "default_use_fused_kernels": hf["use_fused_kernels"],
        "default_impl_backend": hf["fused_kernel_options"]["impl_backend"],
        "megatron_fused_imports_triton_kernel":
            "from verl.utils.kernel.linear_cross_entropy import linear_cross_entropy" in mcore,
    }


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
