#!/usr/bin/env python3
"""Which keys of an SFT message verl 0.9.1's MultiTurnSFTDataset reads: writes
wizard/check/data/verl_sft_message_keys.json, read by check's VI739.

    python scripts/verl_sft_message_keys.py           # regenerate the table from the installed verl
    python scripts/verl_sft_message_keys.py --check   # exit 1 when the committed table differs

The table is the set of constant keys the dataset's code takes from a message dict: `message["k"]` and
`message.get("k")` on a name `message` / `msg` in verl/utils/dataset/multiturn_sft_dataset.py (ast, nothing imported),
plus the keys its _process_single_message builds the loss mask from (the comparisons inside its
`if message[...] == ...` tests, multiturn_sft_dataset.py:230-240). Any other field a message carries reaches only the
chat template, never the loss mask.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_sft_message_keys.json"
SOURCE = "utils/dataset/multiturn_sft_dataset.py"
NAMES = {"message", "msg"}


def _key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in NAMES:
        s = node.slice
        return s.value if isinstance(s, ast.Constant) and isinstance(s.value, str) else None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name) and node.func.value.id in NAMES and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.args[0].value
    return None


def _from(root: Path) -> dict[str, Any]:
    tree = ast.parse((root / SOURCE).read_text(encoding="utf-8"))
    read = sorted({k for node in ast.walk(tree) if (k := _key(node))})
    mask_keys: set[str] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name == "_process_single_message":
            for test in (n.test for n in ast.walk(fn) if isinstance(n, ast.If)):
                mask_keys |= {k for n in ast.walk(test) if (k := _key(n))}
    return {"source": SOURCE, "read": read, "loss_mask_from": sorted(mask_keys)}


def build() -> dict[str, Any]:
    return from_installed_verl(_from)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
