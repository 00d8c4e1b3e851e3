"""A recipe's own entry point (`python3 -m recipe.dapo.main_dapo`): where its source is and which config its
`@hydra.main` composes, read from the file without running it.

verl-recipe is checked out as verl's `recipe/` folder and its recipes run from the verl checkout's root
(verl-recipe README "Usage"; recipe/dapo/run_dapo_qwen2.5_32b.sh launches `python3 -m recipe.dapo.main_dapo`).
Each recipe's main declares its tree as verl's do, `@hydra.main(config_path="config", config_name="dapo_trainer",
version_base=None)` (recipe/dapo/main_dapo.py:114), a config_path relative to the declaring file, which a
`--config-path` on the command line replaces (Hydra: "relative to the Python file declaring @hydra.main()").
The file is parsed (ast), never imported: a recipe's code runs only when the user runs it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# a recipe's main is a few hundred lines; past this it is not read
MAX_RECIPE_SOURCE = 1 << 20


@dataclass(frozen=True)
class RecipeMain:
    file: Path  # the module's source
    config_path: Optional[str]  # as its @hydra.main gives them (None: not a literal, or not declared)
    config_name: Optional[str]
    # the line where it calls verl's migrate_legacy_reward_impl (experimental/reward_loop/reward_loop.py), which maps
    # the legacy reward_model.* keys onto reward.* (recipe/dapo/main_dapo.py:117); 0 where it does not
    migrates_legacy_reward: int = 0


def module_file(module: str, bases: list[Path]) -> Optional[Path]:
    """The source of `module` (recipe.dapo.main_dapo → recipe/dapo/main_dapo.py) under the first of `bases` that
    holds it (the launch's working folder, the script's folder and the folders above it, the current one)."""
    rel = Path(*module.split(".")).with_suffix(".py")
    for base in bases:
        candidate = base / rel
        if candidate.is_file():
            return candidate
    return None


def hydra_main(path: Path) -> RecipeMain:
    """The config_path and config_name literals of the first `@hydra.main(...)` (or `@main(...)` imported from
    hydra) in `path`; None for either where the file does not give it as a string (or is not read: too large, not
    Python)."""
    from wizard._io import UnsafeInput, read_user_file

    try:
        source = read_user_file(str(path), MAX_RECIPE_SOURCE)
        tree = ast.parse(source.decode("utf-8", errors="replace"), filename=str(path))
    except (UnsafeInput, OSError, SyntaxError, ValueError, RecursionError):
        return RecipeMain(path, None, None)
    migrates = next((n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
                     and _name(n.func) == "migrate_legacy_reward_impl"), 0)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and _is_hydra_main(deco.func):
                given = {k.arg: k.value.value for k in deco.keywords
                         if isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
                return RecipeMain(path, given.get("config_path"), given.get("config_name"), migrates)
    return RecipeMain(path, None, None, migrates)


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _is_hydra_main(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "main" and isinstance(func.value, ast.Name) and func.value.id == "hydra"
    return isinstance(func, ast.Name) and func.id == "main"
