"""The command line every table generator here shares (scripts/verl_*.py): write the table built from the
installed verl's source, or with --check only compare it with the committed one."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def table_main(doc: str | None, build: Callable[[], Any], out: Path, argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when the committed table differs")
    ns = p.parse_args(argv)
    text = json.dumps(build(), indent=1, sort_keys=True) + "\n"
    if ns.check:
        same = out.is_file() and out.read_text(encoding="utf-8") == text
        print(f"{out.name} is up to date" if same else f"{out.name} is stale: run the script that writes it")
        return 0 if same else 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return 0


def verl_root() -> Path:
    """The installed verl package's folder, found without importing verl."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


def from_installed_verl(build_from: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """`build_from(root)` on the installed verl, under the version it was read from."""
    root = verl_root()
    version = (root / "version" / "version").read_text(encoding="utf-8").strip() \
        if (root / "version" / "version").is_file() else "unknown"
    return {"verl": version, **build_from(root)}


def marker_lines(root: Path, markers: dict[str, dict[str, str]]) -> dict[str, dict[str, int]]:
    """For each name, the line (1-based) of each verl file (relative to `root`) that holds its marker text: the
    file:line a rule cites, read from the installed verl so the citation moves with it."""
    out: dict[str, dict[str, int]] = {}
    for name, files in markers.items():
        out[name] = {}
        for rel, text in files.items():
            lines = (root / rel).read_text(encoding="utf-8").splitlines()
            out[name][rel] = next(i for i, line in enumerate(lines, 1) if text in line)
    return out
