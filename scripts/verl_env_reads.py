#!/usr/bin/env python3
"""Regenerate wizard/check/data/verl_env_reads.json: the environment variables verl's own code reads.

    python scripts/verl_env_reads.py            # from the installed verl's source
    python scripts/verl_env_reads.py --check    # exit 1 if the shipped table is stale

Walks every module of the installed verl with `ast` (nothing is imported) and records each variable named by a
literal in `os.environ.get("X")`, `os.getenv("X")`, `os.environ["X"]` (read), `os.environ.setdefault("X", ...)` and
`"X" in os.environ`, with the files that read it. VI829 (wizard.check.rules.launchenv) names such a variable when a
launch script exports it before `ray job submit`, where it never reaches the job (verl#1853: TENSORBOARD_DIR).
Variables only verl's tests read (PYTEST_*) are left out.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_env_reads.json"
CALLS = {"os.environ.get", "os.getenv", "os.environ.setdefault", "environ.get", "getenv"}


def _read(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
            and ast.unparse(node.func) in CALLS:
        value = node.args[0].value
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and ast.unparse(node.value) == "os.environ" \
            and isinstance(node.slice, ast.Constant):
        value = node.slice.value
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
            and ast.unparse(node.comparators[0]) == "os.environ" and isinstance(node.left, ast.Constant):
        value = node.left.value
    else:
        return None
    return value if isinstance(value, str) and value and not value.startswith("PYTEST_") else None


def build() -> dict[str, object]:
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("verl is not installed")
    root = Path(list(spec.submodule_search_locations)[0])
    reads: dict[str, set[str]] = defaultdict(set)
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            name = _read(node)
            if name is not None:
                reads[name].add(path.relative_to(root.parent).as_posix())
    return {"verl_version": importlib.metadata.version("verl"),
            "reads": {name: sorted(files) for name, files in sorted(reads.items())}}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
