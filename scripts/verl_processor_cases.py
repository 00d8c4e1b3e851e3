#!/usr/bin/env python3
"""Which multimodal processors verl 0.9.1's hf_processor keeps: writes wizard/check/data/verl_processor_cases.json,
read by check's VI665.

    python scripts/verl_processor_cases.py           # regenerate the table from the installed verl
    python scripts/verl_processor_cases.py --check   # exit 1 when the committed table differs

hf_processor (utils/tokenizer/tokenizer.py:182-251) builds AutoProcessor.from_pretrained(path) (:196), returns None
when that is a tokenizer (:200-201), then matches processor.__class__.__name__ (:208) against a fixed list of class
names and raises ValueError for any other (`case _:`, :235-236). Its own `except Exception` (:242-246) turns that
ValueError, and any failure to load the processor, into `processor = None` with only a warning. HFModelConfig keeps
that None (workers/config/model.py:162), the trainer hands it to RLHFDataset (trainer/ppo/v1/trainer_base.py:706),
and RLHFDataset asserts a processor for every row with an image, video or audio (utils/dataset/rl_dataset.py:323).
The table is read from that `match` with ast: the class names of its cases and the lines of the match and of `case _`.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_processor_cases.json"
TOKENIZER = "utils/tokenizer/tokenizer.py"


def hf_processor(tree: ast.Module) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "hf_processor":
            return node
    raise LookupError("hf_processor not found")


def class_match(fn: ast.FunctionDef) -> ast.Match:
    """The `match processor.__class__.__name__:` statement."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Match) and ast.unparse(node.subject) == "processor.__class__.__name__":
            return node
    raise LookupError("match processor.__class__.__name__ not found in hf_processor")


def _names(pattern: ast.pattern) -> list[str]:
    if isinstance(pattern, ast.MatchValue) and isinstance(pattern.value, ast.Constant) \
            and isinstance(pattern.value.value, str):
        return [pattern.value.value]
    if isinstance(pattern, ast.MatchOr):
        return [n for p in pattern.patterns for n in _names(p)]
    return []


def build_from(tree: ast.Module) -> dict[str, Any]:
    fn = hf_processor(tree)
    match = class_match(fn)
    kept: dict[str, int] = {}
    wildcard = None
    for case in match.cases:
        if isinstance(case.pattern, ast.MatchAs) and case.pattern.pattern is None:
            raises = any(isinstance(n, ast.Raise) for n in ast.walk(case))
            wildcard = {"line": case.pattern.lineno, "raises": raises}
            continue
        for name in _names(case.pattern):
            kept.setdefault(name, case.pattern.lineno)
    handler = next((h for n in ast.walk(fn) if isinstance(n, ast.Try) for h in n.handlers
                    if h.type is not None and ast.unparse(h.type) == "Exception"), None)
    return {"file": TOKENIZER, "function": f"hf_processor:{fn.lineno}", "match": f"{match.lineno}-{match.end_lineno}",
            "kept": kept, "other": wildcard,
            "none_on_error": f"{handler.lineno}-{handler.end_lineno}" if handler is not None else None}


def build() -> dict[str, Any]:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    root = Path(list(spec.submodule_search_locations)[0])
    text = (root / TOKENIZER).read_text(encoding="utf-8")
    version = (root / "version" / "version").read_text(encoding="utf-8").strip() \
        if (root / "version" / "version").is_file() else "unknown"
    return {"verl": version, **build_from(ast.parse(text))}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
