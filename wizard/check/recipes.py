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
from dataclasses import dataclass, field
from collections.abc import Sequence
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
    # the modules it imports (relative ones as `.x` / `..x`, resolved by imported_at_launch)
    imports: tuple[str, ...] = ()


def module_of(parts: Sequence[str]) -> Optional[str]:
    """The dotted module of a file's path parts from its last `recipe` folder on (…/recipe/dapo/main_dapo.py →
    recipe.dapo.main_dapo), or None outside one."""
    if "recipe" not in parts[:-1] or not parts[-1].endswith(".py"):
        return None
    k = len(parts) - 1 - list(parts)[::-1].index("recipe")
    return ".".join([*parts[k:-1], parts[-1][:-3]])


def package_dir(main: RecipeMain, module: str) -> Path:
    """The recipe's own package, `recipe/<name>/` (`recipe/` itself for a module directly in it), whose code says
    which keys the recipe reads."""
    return main.file.parents[max(len(module.split(".")) - 3, 0)]


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
    imports = tuple(dict.fromkeys(
        [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        + ["." * n.level + (n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        + ["." * n.level + ((n.module + ".") if n.module else "") + a.name for n in ast.walk(tree)
           if isinstance(n, ast.ImportFrom) for a in n.names]))
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and _is_hydra_main(deco.func):
                given = {k.arg: k.value.value for k in deco.keywords
                         if isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
                return RecipeMain(path, given.get("config_path"), given.get("config_name"), migrates, imports)
    return RecipeMain(path, None, None, migrates, imports)


def imported_at_launch(module: str, imports: Sequence[str]) -> set[str]:
    """The modules `python -m module` runs before its code reaches verl: its parent packages (`recipe`,
    `recipe.dynamo`: their __init__), itself, and what it imports directly (a relative import resolved against its
    package; `from a import b` counts a and a.b, b may be a module)."""
    parts = module.split(".")
    out = {".".join(parts[:k]) for k in range(1, len(parts) + 1)}
    for name in imports:
        level = len(name) - len(name.lstrip("."))
        if level:
            base = parts[:len(parts) - level]
            name = ".".join([*base, name[level:]]) if name[level:] else ".".join(base)
        out.add(name)
    return out


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _is_hydra_main(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "main" and isinstance(func.value, ast.Name) and func.value.id == "hydra"
    return isinstance(func, ast.Name) and func.id == "main"


# bounds of reading a recipe's own code for the keys it reads
MAX_RECIPE_FILES = 400
MAX_WALK = 20_000
MAX_VERL_MODULES = 60  # verl modules a recipe imports, read one level deep
MAX_RECIPE_BYTES = 16 << 20


# verl's registries a recipe can add names to, and the key each name is then a value of: the decorator or call that
# registers, with the module its `register` comes from where the name alone is ambiguous (verl 0.9.1:
# experimental/agent_loop/agent_loop.py `register`, workers/reward_manager/registry.py `register`,
# trainer/ppo/core_algos.py `register_adv_est` and `register_policy_loss`, workers/rollout/replica.py
# `RolloutReplicaRegistry.register` with workers/rollout/base.py `_ROLLOUT_REGISTRY`)
REGISTRY_KEYS = {
    "agent_loop": "actor_rollout_ref.rollout.agent.default_agent_loop",
    "reward_manager": "reward.reward_manager.name",
    "adv_estimator": "algorithm.adv_estimator",
    "policy_loss": "actor_rollout_ref.actor.policy_loss.loss_mode",
    "rollout": "actor_rollout_ref.rollout.name",
}
_DECORATORS = {"register_adv_est": "adv_estimator", "register_policy_loss": "policy_loss"}
_REGISTER_FROM = {"agent_loop": "agent_loop", "reward_manager": "reward_manager"}  # `register` imported from …


@dataclass
class RecipeReads:
    """The config reads of a recipe's own code: access chains (`config.async_training.staleness_threshold`,
    `cfg.get("x")`, `getattr(c, "y")`) and every attribute or key name it uses, each with its first file:line;
    the string values it compares a chain with (`loss_mode == "gvpo"`, through a local alias) and the names it
    registers in verl's registries (REGISTRY_KEYS)."""

    chains: dict[tuple[str, ...], str]
    names: dict[str, str]
    compared: dict[tuple[str, ...], dict[str, str]] = field(default_factory=dict)
    registered: dict[str, dict[str, str]] = field(default_factory=dict)

    def accepts(self, key: str, value: str) -> Optional[str]:
        """Where the recipe's code registers `value` for `key` or compares `key` with it (a chain that ends in the
        key's last two names, or its only one); None where it does neither."""
        for kind, k in REGISTRY_KEYS.items():
            if k == key and value in self.registered.get(kind, {}):
                return self.registered[kind][value]
        parts = tuple(key.split("."))
        for chain, values in self.compared.items():
            common = 0
            while common < min(len(chain), len(parts)) and chain[-1 - common] == parts[-1 - common]:
                common += 1
            if value in values and common >= min(2, len(parts)):
                return values[value]
        return None

    def reads(self, key: str, common: frozenset[str] = frozenset()) -> Optional[str]:
        """Where the recipe's code reads `key`, or None: a chain whose tail is the key or one of its nodes (at least
        two names of it, or the whole of a one-name key), else the key's last name used anywhere in the code (a
        reference kept on an object: `self.acfg = config.actor_rollout_ref.actor; ... self.acfg.sppo_eta`) where
        that name is not one of
        `common` (names verl's own tree uses, `enable` or `len`, which say nothing of this key)."""
        parts = tuple(key.split("."))
        for chain, where in self.chains.items():
            for i in range(len(chain)):
                tail = chain[i:]
                if len(tail) >= min(2, len(parts)) and parts[:len(tail)] == tail:
                    return where
        return None if parts[-1] in common else self.names.get(parts[-1])


def access_chain(node: ast.AST) -> Optional[list[str]]:
    """Names of an access chain, outermost last: `a.b.get("c")["d"]` → [a, b, c, d], `getattr(a, "b.c")` → [a, b, c];
    None when the node is not one. (scripts/verl_readers.py reads verl's own source with it too.)"""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        inner = access_chain(node.value)
        return None if inner is None else inner + [node.attr]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        inner = access_chain(node.value)
        return None if inner is None else inner + node.slice.value.split(".")
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("get", "pop", "setdefault"):
        inner = access_chain(node.func.value)
        return None if inner is None else inner + [node.args[0].value]
    if isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
            and isinstance(node.args[1].value, str) and _name(node.func) in ("getattr", "hasattr", "select"):
        inner = access_chain(node.args[0])
        return None if inner is None else inner + node.args[1].value.split(".")
    return None


def _python_files(folder: Path) -> list[Path]:
    """The package's .py files, in order, at most MAX_RECIPE_FILES of them; the walk stops after MAX_WALK entries
    (a recipe is a few dozen files; a folder of thousands is not one) and never follows a link."""
    import os

    found: list[Path] = []
    seen = 0
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        seen += len(dirs) + len(files)
        found += [Path(top) / f for f in sorted(files) if f.endswith(".py")]
        if seen > MAX_WALK or len(found) >= MAX_RECIPE_FILES:
            break
    return found[:MAX_RECIPE_FILES]


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a module or function, not those of the functions defined in it (each is a scope of its own)."""
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _aliases(nodes: list[ast.AST]) -> dict[str, list[str]]:
    """`x = config.reward` (or `x = config.get("reward") or {}`) in one scope: x → its chain."""
    out: dict[str, list[str]] = {}
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value.values[0] if isinstance(node.value, ast.BoolOp) else node.value
            ch = access_chain(value)
            if ch and len(ch) >= 2 and ch[0] != node.targets[0].id:
                out[node.targets[0].id] = ch
    return out


def _strings(node: ast.AST) -> list[str]:
    """The string constants of a literal: "a", or ("a", "b") / ["a", "b"] / {"a", "b"}."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _registrations(tree: ast.AST, rel: str, found: dict[str, dict[str, str]]) -> None:
    """Names a file registers in verl's registries (REGISTRY_KEYS): `@register("x")` where `register` comes from
    verl's agent-loop or reward-manager package, `@register_adv_est("x")`, `@register_policy_loss("x")`,
    `RolloutReplicaRegistry.register("x", ...)` and `_ROLLOUT_REGISTRY[("x", mode)] = ...`."""
    register_kind = next((kind for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
                          and node.module.startswith("verl.") and any(a.name == "register" for a in node.names)
                          for part, kind in _REGISTER_FROM.items() if part in node.module), None)
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, (ast.Call, ast.Assign))), key=lambda n: n.lineno):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            kind = (_DECORATORS.get(name) or (register_kind if name == "register" and not owner else None)
                    or ("rollout" if name == "register" and owner == "RolloutReplicaRegistry" else None))
            for value in _strings(node.args[0])[:1] if kind else []:
                found.setdefault(kind, {}).setdefault(value, f"{rel}:{node.lineno}")
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript) \
                and getattr(node.targets[0].value, "id", "") == "_ROLLOUT_REGISTRY":
            for value in _strings(node.targets[0].slice)[:1]:
                found.setdefault("rollout", {}).setdefault(value, f"{rel}:{node.lineno}")


def _comparisons(nodes: list[ast.AST], alias: dict[str, list[str]], rel: str,
                 compared: dict[tuple[str, ...], dict[str, str]]) -> None:
    """`chain == "x"`, `"x" == chain`, `chain in ("x", "y")` in one scope, a local alias followed back."""
    for node in nodes:
        if not isinstance(node, ast.Compare) or len(node.comparators) != 1 \
                or not isinstance(node.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
            continue
        left, right = node.left, node.comparators[0]
        for side, literal in ((left, right), (right, left)):
            ch = [side.id] if isinstance(side, ast.Name) else access_chain(side)
            values = _strings(literal)
            if not ch or not values:
                continue
            if ch[0] in alias:
                ch = alias[ch[0]] + ch[1:]
            tail = tuple(ch[1:]) if len(ch) >= 2 else tuple(ch)
            for value in values:
                compared.setdefault(tail, {}).setdefault(value, f"{rel}:{node.lineno}")


def _collect(tree: ast.AST, rel: str, chains: dict[tuple[str, ...], str], names: dict[str, str],
             found: Optional[RecipeReads] = None) -> set[str]:
    """Add a parsed file's access chains (a local alias followed back to what it was read from, within its
    function) and names, and into `found` its compared values and registrations; return the verl modules it
    imports."""
    imported: set[str] = set()
    if found is not None:
        _registrations(tree, rel, found.registered)
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    for scope in scopes:
        nodes = _own_nodes(scope)
        alias = _aliases(nodes)
        if found is not None:
            _comparisons(nodes, alias, rel, found.compared)
        for node in nodes:
            if isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
                ch = access_chain(node)
                if ch and ch[0] in alias:
                    ch = alias[ch[0]] + ch[1:]
                if ch and len(ch) >= 2:
                    chains.setdefault(tuple(ch[1:]), f"{rel}:{node.lineno}")  # the root variable's name dropped
                    for name in ch[1:]:
                        names.setdefault(name, f"{rel}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("verl.") \
                    and not node.level:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names if a.name.startswith("verl."))
    return imported


def _verl_file(module: str) -> Optional[Path]:
    """The installed verl's source of `module` (verl.experimental.x → .../verl/experimental/x.py or its package's
    __init__.py), found on disk without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(list(spec.submodule_search_locations)[0]).joinpath(*module.split(".")[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def recipe_reads(folder: Path, root: Path) -> RecipeReads:
    """What the Python files under `folder` (a recipe's own package) read, and the verl modules they import (a
    recipe built on verl's fully async trainer reads async_training.* through it), parsed, never imported, bounded in
    files and bytes; citations relative to `root`, or verl/... for verl's files."""
    from wizard._io import UnsafeInput, read_user_file

    chains: dict[tuple[str, ...], str] = {}
    names: dict[str, str] = {}
    found = RecipeReads(chains, names)
    budget = MAX_RECIPE_BYTES
    modules: set[str] = set()
    files: list[tuple[Path, str]] = [(p, "") for p in _python_files(folder)]
    k = 0
    while k < len(files) and budget > 0:
        path, verl_rel = files[k]
        k += 1
        try:
            data = read_user_file(str(path), min(MAX_RECIPE_SOURCE, budget))
            tree = ast.parse(data.decode("utf-8", errors="replace"))
        except (UnsafeInput, OSError, SyntaxError, ValueError, RecursionError):
            continue
        budget -= len(data)
        rel = verl_rel or (path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix())
        imported = _collect(tree, rel, chains, names, None if verl_rel else found)
        if verl_rel:
            continue  # verl's modules are read one level deep: what the recipe imports, not what they import
        for module in sorted(imported - modules)[:MAX_VERL_MODULES - len(modules)]:
            modules.add(module)
            verl_file = _verl_file(module)
            if verl_file is not None:
                files.append((verl_file, "verl/" + "/".join(module.split(".")[1:]) + ".py"))
    return found
