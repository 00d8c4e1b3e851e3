"""verl's own config tree, composed by Hydra (only when verl and hydra are installed; imported lazily)."""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wizard.check.entrypoints import CONFIGS, PPO_TREES, verl_config_dir
from wizard.check.items import Item, bundle_doc
from wizard.check.source import Source, write_yaml


def compose_verl(src: Source, items: list[Item], engine: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Hydra composition with verl's own tree: (resolved config, base tree for key checks). `${oc.env:X}` reads
    nothing of verl-init's environment: it resolves to the placeholder UNSET_X (a value the run's environment gives)."""
    with _no_host_env():
        return _compose_verl(src, items, engine)


@contextlib.contextmanager
def _no_host_env() -> Iterator[None]:
    from omegaconf import OmegaConf
    from omegaconf.basecontainer import BaseContainer

    from wizard.check.shellargs import PLACEHOLDER

    old = BaseContainer._resolvers.get("oc.env")

    def env(key: str, default: Any = None) -> str:
        return f"{PLACEHOLDER}{key}"

    OmegaConf.register_new_resolver("oc.env", env, replace=True)
    try:
        yield
    finally:
        if old is not None:
            BaseContainer._resolvers["oc.env"] = old
        else:
            OmegaConf.clear_resolver("oc.env")


def _compose_verl(src: Source, items: list[Item], engine: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    overrides = []
    for it in items:
        if it.override is None or not it.apply:
            continue
        op = "" if it.plus_to_plain else it.op
        text = src.overrides[it.override]
        body = text[len(it.op):] if it.op and text.startswith(it.op) else text
        overrides.append(op + body)
    name = src.config_name if src.config_name in CONFIGS else "ppo_trainer"
    if engine != "dp" and src.yaml_path is None and name in PPO_TREES:
        overrides.insert(0, f"model_engine={engine}")
    GlobalHydra.instance().clear()
    try:
        if src.yaml_path is not None and src.yaml_defaults:
            # the user's own file: Hydra merges its keys (typos included) exactly as main_ppo does; a
            # `pkg://verl.trainer.config` search path is read as the files it names (Hydra would import verl,
            # torch with it, only to find that folder)
            with tempfile.TemporaryDirectory() as tmp:
                write_yaml(Path(tmp) / "cfg.yaml", _file_searchpath(src.yaml_path, src))
                with initialize_config_dir(config_dir=tmp, version_base=None):
                    cfg = compose(config_name="cfg", overrides=overrides)
        elif src.yaml_path is not None:
            with tempfile.TemporaryDirectory() as tmp:
                write_yaml(Path(tmp) / "cfg.yaml", bundle_doc(src, items, only_valid=True, with_overrides=False,
                                                              engine=engine))
                with initialize_config_dir(config_dir=tmp, version_base=None):
                    cfg = compose(config_name="cfg", overrides=overrides)
        else:
            with initialize_config_dir(config_dir=str(config_dir_of(name)), version_base=None):
                cfg = compose(config_name=name, overrides=[*_searchpath(name), *overrides])
        return OmegaConf.to_container(cfg, resolve=True), {}  # type: ignore[return-value]
    finally:
        GlobalHydra.instance().clear()


_VERL_PKG = ("pkg://verl.trainer.config", "pkg://verl/trainer/config")


def _verl_relative(entry: str) -> bool:
    """`file://verl/trainer/config`, as verl's recipe YAMLs name verl's tree (recipe/dapo/config/dapo_trainer.yaml):
    Hydra reads a relative file:// path from the working folder, a verl checkout's root where the recipe runs. Away
    from one (no such folder here) it is the installed verl's tree."""
    body = entry[len("file://"):] if entry.startswith("file://") else ""
    return bool(body) and not os.path.isabs(body) and body.rstrip("/").endswith("verl/trainer/config") \
        and not (Path.cwd() / body).is_dir()


def _file_searchpath(path: Path, src: Source | None = None) -> dict[str, Any]:
    """The YAML at `path` with its folder and verl's config folder as file:// search paths; with `src`, its
    `defaults:` as the source holds them (a missing recipe config replaced by the tree guessed for it)."""
    from wizard.check.source import read_yaml

    doc = dict(read_yaml(path) or {})
    hydra = dict(doc.get("hydra") or {})
    # a search path without a scheme is a file path to Hydra (hydra/_internal/config_repository.py _get_scheme)
    entries = [str(e) if "://" in str(e) else f"file://{e}" for e in (hydra.get("searchpath") or [])]
    verl_dir = f"file://{verl_config_dir()}"
    entries = [verl_dir if e.rstrip("/") in _VERL_PKG or _verl_relative(e) else _no_import(e, path.parent)
               for e in entries]
    entries = [e for e in entries if e]
    if src is not None and src.config_missing is not None:
        doc["defaults"] = list(src.yaml_defaults)
        entries = [e for e in entries if e != verl_dir] + [verl_dir]
    hydra["searchpath"] = [f"file://{path.parent.resolve()}", *entries]
    doc["hydra"] = hydra
    return doc


def _no_import(entry: str, here: Path) -> str:
    """A search path entry Hydra reads without importing anything: `pkg://a.b` (Hydra would import package `a`, run
    its __init__.py, to find the folder) becomes the file:// folder found by reading the file tree (wizard.planner.
    agent.module_file); an entry that is neither, or a package not found so, is dropped."""
    if entry.startswith("file://"):
        return entry
    if not entry.startswith("pkg://"):
        return ""
    from wizard.planner.agent import installed_folders, module_file

    init = module_file(entry[len("pkg://"):].strip("/").replace("/", "."), [str(here), *installed_folders()])
    return f"file://{init.parent}" if init is not None and init.name == "__init__.py" else ""


def _searchpath(name: str) -> list[str]:
    """For a config outside verl/trainer/config that composes ppo_trainer (fully_async, one_step_off): verl's trainer
    folder as the one search path, read as files. Their own YAMLs name it as `pkg://verl.trainer.config` (Hydra
    would import verl, torch with it) or `file://verl/trainer/config`, which Hydra reads relative to the working
    folder (verl/experimental/one_step_off_policy/config/one_step_off_ppo_trainer.yaml:3): found only when verl runs
    from a source checkout's root."""
    if CONFIGS.get(name, ("", "trainer/config"))[1] == "trainer/config":
        return []
    return [f"hydra.searchpath=[file://{verl_config_dir()}]"]


def config_dir_of(name: str) -> Path:
    """The folder of one of verl's own configs (wizard.check.entrypoints.CONFIGS)."""
    return verl_config_dir().parent.parent / CONFIGS[name][1]


def group_selections(items: Any, name: str) -> tuple[str, ...]:
    """The user's config-group selections for verl's own config `name` (sft_trainer's `engine=megatron`): top-level
    `group=option` overrides where the config's folder or verl's trainer folder has `group/option.yaml`, as Hydra
    would compose them."""
    folders = {config_dir_of(name), verl_config_dir()}
    out = []
    for it in items:
        if it.override is None or "." in it.key or "/" in it.key or not isinstance(it.value, str) or it.op == "~":
            continue
        if any((folder / it.key / f"{it.value}.yaml").is_file() for folder in folders):
            out.append(f"{it.key}={it.value}")
    return tuple(out)


@functools.lru_cache(maxsize=8)
def verl_base(engine: str, name: str = "ppo_trainer", groups: tuple[str, ...] = ()) -> dict[str, Any]:
    """verl's default tree for `name` (one of its own configs) and model_engine, with the user's config-group
    selections `groups` (group_selections), unresolved."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir_of(name)), version_base=None):
            cfg = compose(config_name=name, overrides=([f"model_engine={engine}"] if name in PPO_TREES
                                                       else _searchpath(name)) + list(groups))
        return OmegaConf.to_container(cfg, resolve=False)  # type: ignore[return-value]
    finally:
        GlobalHydra.instance().clear()


def verl_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("verl") is not None and importlib.util.find_spec("hydra") is not None \
            and (verl_config_dir() / "ppo_trainer.yaml").is_file()
    except (ImportError, ValueError):
        return False
