"""The full config verl would build from a `Source`: with verl installed (`--defaults auto|verl`) composed
by Hydra from verl's tree (wizard.check.verltree), else from the snapshot of verl's defaults
(wizard.check.tree). Key and type problems (wizard.check.rules.keys) are reported on the way.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from wizard.check.entrypoints import ENTRIES, PPO_TREES
from wizard.check.items import Item, user_items
from wizard.check.rules.keys import type_problems, validate_keys
from wizard.check.shellargs import PLACEHOLDER
from wizard.check.source import Source
from wizard.check.tree import NOTHING, delete_key, flatten, resolve_snapshot, set_key, snapshot_tree
from wizard.check.verltree import compose_verl, group_selections, verl_available, verl_base
from wizard.intent.errors import UserError
from wizard.verlspec.keys import ENGINES


@dataclass
class Resolved:
    """The resolved config (flat dotted keys), verl's resolved defaults, the settings the user chose, the
    model_engine, and how it was resolved ("verl" or "snapshot")."""

    flat: dict[str, Any]
    defaults_flat: dict[str, Any]
    user: dict[str, Item]
    engine: str
    mode: str


def _snapshot_matches_installed(engine: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    from wizard.verlspec.keys import load_snapshot

    try:
        installed = version("verl")
    except PackageNotFoundError:
        return False
    snap = load_snapshot()
    return snap.get("verl_version") == installed and engine in snap.get("engines", {})


def _lenient(add: Callable[..., None], src: Source) -> Callable[..., None]:
    """`add` that keeps key-unknown findings (VI801/VI802/VI804) back, counted: with the config missing, the keys
    it defines are unknown for want of it, not by mistake (issue 26 item 4: one finding, never a cascade)."""
    skipped: list[str] = []

    def wrapped(rule: str, severity: str, keys: Any, message: str, hint: str = "", fix: Any = None) -> None:
        if rule in ("VI801", "VI802", "VI804") and keys:
            skipped.extend(keys)
            return
        add(rule, severity, keys, message, hint, fix=fix)

    wrapped.skipped = skipped  # type: ignore[attr-defined]
    return wrapped


def _recipe_reader(src: Source, base_flat: Mapping[str, Any]) -> Callable[[str], str | None] | None:
    """Where a recipe's own code reads a key (wizard.check.recipes.recipe_reads over its package), for a recipe
    whose source is here; None otherwise."""
    if src.recipe_dir is None:
        return None
    from wizard.check.recipes import recipe_reads

    found = src.recipe_code = recipe_reads(src.recipe_dir, src.recipe_dir.parent.parent)
    common = frozenset(k.rsplit(".", 1)[-1] for k in base_flat)
    return lambda key: found.reads(key, common)


def resolve(src: Source, mode: str, add: Callable[..., None], env: Mapping[str, str]) -> Resolved:
    """Resolve with `mode` auto | verl | snapshot; `add(rule, severity, keys, message, hint, fix=None)` takes the
    problems found on the way (input, keys, types, Hydra's own errors)."""
    items, engine, problems = user_items(src)
    for p in problems:
        add(p.rule, p.severity, p.keys, p.message, p.hint)
    use_verl = mode == "verl" or (mode == "auto" and verl_available())
    if mode == "verl" and not verl_available():
        raise UserError("--defaults verl: verl (and hydra) are not importable", "pip install 'verl==0.9.1', or use "
                        "--defaults snapshot", rule="VI800")
    if engine not in ENGINES:
        add("VI809", "error", ("model_engine",), f"model_engine={engine} is not one of verl's engines",
            f"use one of {', '.join(ENGINES)}")
        engine = "dp"
    # verl's default tree: the shipped snapshot when it was taken from the very verl installed (it matches key for
    # key, tests/test_check_defaults.py), which spares a second Hydra composition; else Hydra composes it
    if src.config_name.endswith("megatron_trainer") and engine == "dp":
        engine = "megatron"
    own_tree = src.yaml_path is None and src.config_name not in PPO_TREES  # another entry point's config
    if own_tree and not use_verl:
        raise UserError(f"--config-name={src.config_name}: verl-init's snapshot holds only main_ppo's trees",
                        "install verl (0.9.1) so check composes that config with Hydra", rule="VI800",
                        keys=("--config-name",))
    composed: tuple[str, ...] = ()
    if own_tree:
        # another entry point's tree composed with the user's group selections, as Hydra would (`engine=megatron`
        # under sft_trainer brings engine.tensor_model_parallel_size)
        composed = group_selections(items, src.config_name)
        try:
            base = verl_base(engine, src.config_name, composed)
        except Exception:  # an option Hydra cannot compose here: the default group, as before (VI800 says so)
            composed, base = (), verl_base(engine, src.config_name)
    else:
        base = verl_base(engine) if use_verl and not _snapshot_matches_installed(engine) else snapshot_tree(engine)
    if use_verl:
        base = dict(base)
    base_flat = flatten(base)
    critic_hint = None
    for it in items:
        if it.key == "critic.enable":
            critic_hint = bool(it.value)
        if it.key == "algorithm.adv_estimator" and critic_hint is None:
            critic_hint = it.value == "gae"
    if src.config_missing is not None:
        add = _lenient(add, src)
    # keys the entry point's own code reads outside its tree (main_generation_server's +data.output_path)
    outside = {k for e in ENTRIES if e.name == src.entry for k, _ in e.reads_outside}
    selected = {g.split("=", 1)[0] for g in composed}  # composed into the base tree, and passed on to Hydra below
    validate_keys([it for it in items if it.key not in outside and it.key not in selected], base, add, critic_hint,
                  migrates_legacy_reward="fully_async_main.py:237" if src.entry == "fully_async"
                  else src.migrates_legacy_reward, read_elsewhere=_recipe_reader(src, base_flat),
                  legacy_reward=src.entry not in ("eval", "sft"))
    if src.config_missing is not None:
        skipped = getattr(add, "skipped", [])
        add("VI891", "warning", ("--config-path", "--config-name"),
            f"config {src.config_missing} is not here, so the keys it adds are unknown: checked against verl's "
            f"{src.config_name} (guessed from its name)"
            + (f"; {len(skipped)} key(s) not in that tree left unchecked ({', '.join(skipped[:5])}"
               f"{', ...' if len(skipped) > 5 else ''})" if skipped else ""),
            "check on the machine that holds the recipe's config, or pass --workdir to the folder "
            + ("that holds recipe/ (a verl checkout with verl-recipe as its submodule)" if src.recipe
               else "--config-path is relative to"))
    type_problems(items, base_flat, add, base, entry=src.entry)
    defaults_resolved, _ = resolve_snapshot(base, env)
    tree: dict[str, Any] | None = None
    mode_used = "snapshot"
    if use_verl:
        try:
            tree, _ = compose_verl(src, items, engine)
            mode_used = "verl"
        except Exception as exc:  # noqa: BLE001 - Hydra's errors: report and resolve without it
            msg = " ".join(str(exc).split())[:300]
            add("VI801", "error", (), f"Hydra cannot compose this config: {type(exc).__name__}: {msg}",
                "fix the keys above; the other rules ran on verl-init's own resolution")
    if tree is None:
        raw = copy.deepcopy(base)
        for it in items:
            if not it.apply or it.key.split(".")[0] == "hydra" or it.key in selected:
                continue
            if it.op == "~":
                delete_key(raw, it.key)
            else:
                set_key(raw, it.key, it.value)
        tree, failures = resolve_snapshot(raw, env)
        for body, why in failures.items():
            if PLACEHOLDER in why or "environment variable" in why:
                continue
            add("VI808", "error", (), f"interpolation ${{{body}}} cannot be resolved: {why}",
                "point it at an existing key")
    defaults_flat = flatten(defaults_resolved)
    full_dump = src.yaml_path is not None and not src.yaml_defaults

    def chosen(it: Item) -> bool:
        """Set by the user. In a full dump (a YAML without `defaults`, e.g. Hydra's .hydra/config.yaml) only
        values that differ from verl's defaults, and not ones that follow another key by interpolation."""
        if not full_dump or it.override is not None:
            return True
        raw = base_flat.get(it.key, NOTHING)
        if isinstance(raw, str) and "${" in raw:
            return False
        return raw is NOTHING or defaults_flat.get(it.key, NOTHING) != it.value

    user = {it.key: it for it in items if it.apply and it.op != "~" and it.key.split(".")[0] != "hydra" and chosen(it)}
    return Resolved(flatten(tree), defaults_flat, user, engine, mode_used)
