#!/usr/bin/env python3
"""The precision names verl's PrecisionType.to_dtype accepts, and where verl's engines call it: writes
wizard/check/data/verl_precision_names.json, read by check's VI613 and VI614.

    python scripts/verl_precision_names.py           # regenerate the table with the installed verl
    python scripts/verl_precision_names.py --check   # exit 1 when the committed table differs

verl turns every training dtype of its engines into a torch dtype with PrecisionType.to_dtype
(verl/utils/torch_dtypes.py), which knows exactly the entries of HALF_LIST, FLOAT_LIST and BFLOAT_LIST and raises
RuntimeError("unexpected precision: ...") for anything else. The names come from verl's own lists (the torch dtypes
in them dropped: a config holds text or numbers); each is confirmed by calling to_dtype on it. The readers are the
`PrecisionType.to_dtype(...)` calls in verl/workers/engine (found by an ast scan), with the argument as written.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_precision_names.json"
LISTS = {"fp16": "HALF_LIST", "fp32": "FLOAT_LIST", "bf16": "BFLOAT_LIST"}


def names() -> tuple[dict[str, list], str]:
    """dtype → the config values verl maps to it (text and numbers), each checked with verl's to_dtype."""
    import torch
    import verl.utils.torch_dtypes as td

    want = {"fp16": torch.float16, "fp32": torch.float32, "bf16": torch.bfloat16}
    out: dict[str, list] = {}
    for dtype, attr in LISTS.items():
        vals = [v for v in getattr(td, attr) if isinstance(v, (str, int)) and not isinstance(v, bool)]
        assert all(td.PrecisionType.to_dtype(v) == want[dtype] for v in vals), (dtype, vals)
        out[dtype] = sorted(vals, key=lambda v: (isinstance(v, str), str(v)))
    src = Path(td.__file__).read_text(encoding="utf-8").splitlines()
    lines = [i + 1 for i, line in enumerate(src) if line.split("=")[0].strip() in LISTS.values()]
    return out, f"verl/utils/torch_dtypes.py:{min(lines)}-{max(lines)}"


def readers() -> list[str]:
    """`PrecisionType.to_dtype(<arg>)` calls under verl/workers/engine, as file:line <arg>."""
    import verl

    base = Path(verl.__file__).resolve().parent
    out = []
    for path in sorted((base / "workers" / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            fn = node.func if isinstance(node, ast.Call) else None
            if isinstance(fn, ast.Attribute) and fn.attr == "to_dtype" and isinstance(fn.value, ast.Name) \
                    and fn.value.id == "PrecisionType" and node.args:
                out.append(f"verl/{path.relative_to(base).as_posix()}:{node.lineno} {ast.unparse(node.args[0])}")
    return sorted(out, key=lambda r: (r.split(":")[0], int(r.split(":")[1].split()[0])))


def build() -> dict:
    table, where = names()
    return {"computed_by": f"verl's PrecisionType.to_dtype on the entries of its lists ({where})",
            "names": table, "readers": readers()}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
