"""The installed verl's source, for tests whose oracle reads it (found without importing verl)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path


def verl_root() -> Path:
    """The folder of the installed verl package."""
    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


def verl_tree(rel: str) -> ast.Module:
    """verl's module at `rel` (a path under verl/), parsed."""
    return ast.parse((verl_root() / rel).read_text(encoding="utf-8"))
