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


def class_method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The method `name` of class `cls` in a parsed module (AssertionError when verl's source has none)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                    return item
    raise AssertionError(f"{cls}.{name} not in verl's source")
