#!/usr/bin/env python3
"""What verl's FSDP checkpoint manager writes into a checkpoint's actor/critic folder: writes
wizard/check/data/verl_ckpt_layout.json, read by check's VI737 (wizard/check/rules/ckpt_model_path.py).

    python scripts/verl_ckpt_layout.py           # regenerate the table from the installed verl's source
    python scripts/verl_ckpt_layout.py --check   # exit 1 when the committed table differs

Read with ast, nothing imported. verl 0.9.1, utils/checkpoint/fsdp_checkpoint_manager.py:
- the model shards, os.path.join(local_path, f"model_world_size_{self.world_size}_rank_{self.rank}.pt") (:213, :316),
  turned into a glob (each formatted field a `*`);
- the other names joined onto local_path: "huggingface" (config and tokenizer only unless save_contents has
  hf_model, :373-392, :422-462) and "fsdp_config.json" (:410).
The Megatron folders (model/dist_ckpt, model/huggingface) are in wizard/check/data/verl_merger.json
(scripts/verl_merger.py).
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
OUT = ROOT / "wizard" / "check" / "data" / "verl_ckpt_layout.json"
FSDP = "utils/checkpoint/fsdp_checkpoint_manager.py"


def _verl() -> Path:
    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


def _glob(node: ast.JoinedStr) -> str:
    return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)


def build() -> dict[str, Any]:
    tree = ast.parse((_verl() / FSDP).read_text(encoding="utf-8"))
    shards: set[str] = set()
    names: set[str] = set()
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "os.path.join" and len(call.args) == 2
                and ast.unparse(call.args[0]) == "local_path"):
            continue
        arg = call.args[1]
        if isinstance(arg, ast.JoinedStr) and _glob(arg).startswith("model_"):
            shards.add(_glob(arg))
        elif isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            names.add(arg.value)
    assert shards and {"huggingface", "fsdp_config.json"} <= names, (shards, names)
    return {"fsdp_model_shards": sorted(shards), "fsdp_config": "fsdp_config.json", "hf_subfolder": "huggingface",
            "source": FSDP}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    raise SystemExit(main())
