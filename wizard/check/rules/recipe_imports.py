"""A recipe (`python3 -m recipe.<name>.main_<name>`, verl-recipe checked out as verl's `recipe/`) whose own code
imports verl modules or names the installed verl does not have.

verl-recipe's recipes are written against one verl each: verl-recipe#86 pins every recipe's verl in its
REQUIRED_VERL.txt ("the main worker APIs in verl [are] going to be deprecated and affect many recipes"), and PRIME,
SPIN and SPPO are pinned to verl bcb6386 (205 commits before v0.8.0). verl 0.9.1 (paths under site-packages/verl/)
no longer has verl/workers/fsdp_workers.py, megatron_workers.py nor verl/workers/sharding_manager/ (verl commit
620cf8beb "remove legacy fsdp_workers.py and megatron_workers.py"; workers/ holds engine_workers.py, config/,
engine/, rollout/, ...), and verl/trainer/ppo/reward.py defines get_custom_reward_fn, resolve_reward_manager_cls,
load_reward_manager and extract_reward only (reward.py:50-160: no compute_reward / compute_reward_async). The
recipes import them: sppo/sppo_ray_trainer.py:43 `from verl.trainer.ppo.reward import compute_reward,
compute_reward_async` (imported by main_sppo.py:29: ImportError before Hydra reads a key), sppo/sppo_worker.py:27,
prime/prime_fsdp_workers.py:44-45, prime/main_prime.py:77, spin/fsdp_workers.py:50-51 `from
verl.workers.fsdp_workers import ...` (ModuleNotFoundError, inside the TaskRunner once Ray is up for the imports
made in a function).

- VI627: an `import verl.x` / `from verl.x import y` in the recipe package's own files where the installed verl has
  no module verl.x (no verl/x.py, no verl/x/__init__.py) or verl.x neither defines nor imports y at its top level
  and has no submodule y. The installed verl is the table: its files are looked up and parsed (ast), never imported.
  Error when the import runs at launch (at the top level of the launched module or of a recipe module it imports at
  its top level, transitively); warning when it sits in a function or a module the launch does not import at start
  (it fails when that code runs: the strategy's worker class, a helper). Imports under `try:` with an ImportError
  (or broader) handler and under `if TYPE_CHECKING:` are skipped, as is a module that defines `__getattr__` or
  star-imports (its names cannot be told). Nothing is said when verl is not installed here.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

from wizard.check.rules.context import Ctx, Facts, parse_module

MAX_SOURCE = 1 << 20  # one module of verl or of the recipe
_CATCHES = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _verl_root() -> Optional[Path]:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def _module_file(root: Path, module: str) -> Optional[Path]:
    """verl.a.b → root/a/b.py or root/a/b/__init__.py (root is site-packages/verl); None when neither is there."""
    parts = module.split(".")[1:]
    if not parts:
        return root / "__init__.py"
    base = root.joinpath(*parts)
    for candidate in (base.parent / f"{parts[-1]}.py", base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _parse(path: Path) -> Optional[ast.Module]:
    """A module's source parsed (bounded), never imported; None when it cannot be read or parsed (a recipe file that
    does not parse stops its own launch with SyntaxError: not this rule's to say)."""
    try:
        return parse_module(path, MAX_SOURCE)
    except SyntaxError:
        return None


def _names(path: Path) -> Optional[set[str]]:
    """The names a module binds at its top level (defs, classes, assignments, imports); None when they cannot be
    told (unreadable, a star import, a module-level __getattr__)."""
    tree = _parse(path)
    if tree is None:
        return None
    out: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            if node.name == "__getattr__":
                return None
        elif isinstance(node, ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            out |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            stack.extend(ast.iter_child_nodes(node))
        elif hasattr(ast, "TryStar") and isinstance(node, ast.TryStar):
            stack.extend(ast.iter_child_nodes(node))
    return out


def _missing(root: Path, module: str, name: Optional[str]) -> Optional[str]:
    """What of `from module import name` (`import module` for name None) the installed verl lacks, as text; None
    when it is there or cannot be told."""
    file = _module_file(root, module)
    if file is None:
        return f"module {module}"
    if name is None or (file.name == "__init__.py" and _module_file(root, f"{module}.{name}") is not None):
        return None
    names = _names(file)
    if names is None or name in names:
        return None
    return f"{name} from {module}"


def _guarded(node: ast.Try) -> bool:
    for handler in node.handlers:
        if handler.type is None:
            return True
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(t, ast.Name) and t.id in _CATCHES for t in types):
            return True
    return False


def _imports(tree: ast.Module) -> list[tuple[ast.stmt, bool]]:
    """(import statement, runs at import time) for each import in the module that no ImportError handler guards and
    no `if TYPE_CHECKING:` hides; at import time = not inside a def (a class body runs at import)."""
    out: list[tuple[ast.stmt, bool]] = []
    stack: list[tuple[ast.AST, bool]] = [(n, True) for n in tree.body]
    while stack:
        node, top = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append((node, top))
        elif isinstance(node, ast.Try) and _guarded(node):
            stack.extend((n, top) for n in node.orelse + node.finalbody)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            stack.extend((n, top) for n in node.orelse)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend((n, False) for n in ast.iter_child_nodes(node))
        else:
            stack.extend((n, top) for n in ast.iter_child_nodes(node))
    return out


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute module of a `from` import in `module` (a file's dotted name): relative levels resolved."""
    if not node.level:
        return node.module or ""
    base = module.split(".")[:-node.level] if node.level else []
    return ".".join([*base, node.module] if node.module else base)


def _edges(module: str, tree: ast.Module) -> tuple[list[tuple[str, Optional[str], int, bool]], set[str]]:
    """(verl imports as (module, name or None, line, at import time), recipe modules imported at import time)."""
    verl: list[tuple[str, Optional[str], int, bool]] = []
    local: set[str] = set()
    for node, top in _imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("verl."):
                    verl.append((alias.name, None, node.lineno, top))
                elif alias.name.startswith("recipe.") and top:
                    local.add(alias.name)
            continue
        target = _absolute(module, node)
        if target.startswith("verl."):
            verl += [(target, a.name, node.lineno, top) for a in node.names if a.name != "*"]
        elif (target == "recipe" or target.startswith("recipe.")) and top:
            local |= {target, *(f"{target}.{a.name}" for a in node.names)}
    return verl, local


def rule_recipe_imports(c: Ctx, f: Facts) -> None:
    from wizard.check.recipes import _python_files, module_of

    src = c.src
    root = _verl_root() if src.recipe and src.recipe_dir is not None else None
    if root is None or not Path(src.recipe_dir).is_dir():
        return
    modules: dict[str, tuple[Path, ast.Module]] = {}
    for file in _python_files(Path(src.recipe_dir)):
        name = module_of(file.parts)
        tree = _parse(file) if name else None
        if tree is not None:
            modules[name.removesuffix(".__init__")] = (file, tree)
    edges = {m: _edges(m, tree) for m, (_, tree) in modules.items()}
    parts = src.recipe.split(".")
    at_launch, todo = set(), [".".join(parts[:k]) for k in range(1, len(parts) + 1)]  # its packages run first
    while todo:  # the recipe modules the launch imports before its main runs
        m = todo.pop()
        if m in at_launch or m not in edges:
            continue
        at_launch.add(m)
        todo += sorted(edges[m][1])
    found: dict[str, list[str]] = {"error": [], "warning": []}
    seen: set[tuple[str, str]] = set()
    for m in sorted(edges):
        for module, name, line, top in edges[m][0]:
            what = _missing(root, module, name)
            severity = "error" if top and m in at_launch else "warning"
            if what is None or (what, severity) in seen:
                continue
            seen.add((what, severity))
            found[severity].append(f"{what} ({modules[m][0].name}:{line})")
    version = _verl_version()
    for severity, items in found.items():
        if not items:
            continue
        when = ("when the launch imports it, before training starts" if severity == "error"
                else "when that code runs (inside a function: the worker or trainer the recipe builds once Ray is up)")
        shown = "; ".join(items[:4]) + (f"; and {len(items) - 4} more" if len(items) > 4 else "")
        c.add("VI627", severity, (src.recipe,),
              f"{src.recipe}: the recipe's code imports what verl {version} does not have: {shown}; Python stops with "
              f"ModuleNotFoundError/ImportError {when} (verl 0.9 removed verl/workers/fsdp_workers.py and "
              "sharding_manager/, and trainer/ppo/reward.py's compute_reward; verl-recipe#86)",
              "install the verl the recipe is pinned to (its REQUIRED_VERL.txt, e.g. pip install "
              "verl@git+https://github.com/verl-project/verl.git@<VERL_COMMIT>), or port the recipe to verl "
              f"{version}'s engine workers (verl/workers/engine_workers.py)")


def _verl_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("verl")
    except PackageNotFoundError:
        return "(installed)"
