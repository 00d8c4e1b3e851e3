"""The installed verl's source, for tests whose oracle reads it (found without importing verl)."""

from __future__ import annotations

import ast
import functools
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


def verl_function(rel: str, name: str, **namespace):
    """verl's own function `name` from its source file at `rel`, compiled alone (decorators and annotations dropped),
    with `namespace` as its globals: verl's code as the oracle where importing its module needs what is not here."""
    tree = verl_tree(rel)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    fn.decorator_list = []
    fn.returns = None
    for a in fn.args.args + fn.args.kwonlyargs:
        a.annotation = None
    module = ast.Module(body=[fn], type_ignores=[])
    ns = {"Any": object, **namespace}
    exec(compile(ast.fix_missing_locations(module), str(verl_root() / rel), "exec"), ns)  # noqa: S102 - verl's own code
    return ns[name]


@functools.lru_cache(maxsize=None)
def distillation_error(overrides: tuple[str, ...]) -> BaseException | None:
    """What verl's DistillationConfig raises (None when it builds) for verl's ppo_trainer with these overrides: the
    config is composed by Hydra and built with verl's omega_conf_to_dataclass, as verl's trainer builds it."""
    import warnings

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import InstantiationException

    from verl.utils.config import omega_conf_to_dataclass
    from wizard.check.entrypoints import verl_config_dir

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=list(overrides))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            omega_conf_to_dataclass(cfg.distillation)
    except InstantiationException as exc:  # Hydra's instantiate wraps what the dataclass raised
        return exc.__cause__
    return None
