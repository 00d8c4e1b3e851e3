"""Key rules, applied while the tree is resolved: unknown keys (VI801), `+` on keys verl ignores, already
has or a dataclass rejects (VI802-VI804), legacy reward keys (VI805), and value types (VI808).

Which `+key` is an error and which a warning follows verl's conversion of config nodes: a node with a `_target_`
that verl converts (DATACLASS_ROOTS) goes through omega_conf_to_dataclass — `hydra.utils.instantiate`
(verl/utils/config.py:48-50: the dataclass's __init__ raises TypeError on an unexpected keyword) or
`OmegaConf.structured(cls)` merged with the node (config.py:60-64: a key the dataclass lacks is refused) — so an
unknown key there fails at start (VI804, error); a key under a plain mapping is carried along and never read (VI802,
warning with a did-you-mean from difflib). The same holds for a key an older verl had (key_history.json) added back
with `+`: inside such a node it is VI804, not "ignored" (e.g. +actor_rollout_ref.rollout.skip_rollout: RolloutConfig
raises omegaconf's ConfigKeyError); one that moved (the history's `renamed`, e.g. rollout.update_weights_bucket_
megabytes -> rollout.checkpoint_engine.update_weights_bucket_megabytes, which verl 0.9.1's own assertion still
names, vllm_rollout/bucketed_weight_transfer.py:141-143) is VI801 with the new key.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from wizard.check.envreads import env_hint
from wizard.check.items import Item
from wizard.check.overrides import format_value
from wizard.check.report import Fix
from wizard.check.shellargs import PLACEHOLDER
from wizard.check.tree import NOTHING, flatten, lookup
from wizard.verlspec.history import key_history, renamed
from wizard.verlspec.keys import (DATACLASS_ROOTS, EXTRA_FREE_FORM, LEGACY_IMPLIED, LEGACY_MISMAPPED, LEGACY_ROOTS,
                                  dataclass_fields, drift, legacy_target, migrated)


def _is_free_form(base: dict[str, Any], parts: list[str], dataclasses_: dict[str, Any]) -> bool:
    from wizard.verify.harness import _FREE_FORM

    node: Any = base
    for i, part in enumerate(parts[:-1]):
        if part in _FREE_FORM or part in EXTRA_FREE_FORM:
            return True
        if not isinstance(node, dict):
            return False
        target = node.get("_target_")
        if isinstance(target, str) and part in dataclasses_.get(target, {}).get("free_form", []):
            return True
        if part not in node:
            return False
        node = node[part]
        if node == {} or node is None:
            return True
    return False


def _dataclass_of(base: dict[str, Any], parts: list[str]) -> tuple[str | None, str | None]:
    """The nearest `_target_` class above a missing key and the path of that node."""
    node: Any = base
    best: tuple[str | None, str | None] = (None, None)
    path: list[str] = []
    for part in parts[:-1]:
        if isinstance(node, dict) and isinstance(node.get("_target_"), str):
            best = (node["_target_"], ".".join(path))
        if not isinstance(node, dict) or part not in node:
            break
        node = node[part]
        path.append(part)
    else:
        if isinstance(node, dict) and isinstance(node.get("_target_"), str):
            best = (node["_target_"], ".".join(path))
    return best


def _built_class(base: dict[str, Any], items: list[Item], parts: list[str],
                 dcs: dict[str, Any]) -> tuple[str | None, str | None]:
    """`_dataclass_of`, where the user's (a recipe's) own dataclass replaces verl's: then it is not verl's table."""
    target, node = _dataclass_of(base, parts)
    own = _own_target(items, node)
    return (own if own is not None and own not in dcs else target), node


def _own_target(items: list[Item], node: str | None) -> str | None:
    """The `_target_` the user's (or a recipe's) YAML sets on `node`, e.g. the SPPO recipe's
    actor_rollout_ref.actor._target_: recipe.sppo.config.SPPOActorConfig, a subclass of verl's FSDPActorConfig with its
    own fields; verl builds that class: engine_workers.py:593 calls omega_conf_to_dataclass(self.config.actor) with no type, which
    instantiates `_target_` (verl 0.9.1 utils/config.py:42-50)."""
    if node is None:
        return None
    key = f"{node}._target_" if node else "_target_"
    value = next((y.value for y in items if y.key == key), None)
    return value if isinstance(value, str) else None


# Nodes verl hands on as a plain DictConfig typed as their `_target_` dataclass, whose readers take a field the YAML
# does not list with .get: main_ppo passes `algorithm` to compute_advantage (config: AlgoConfig, ray_trainer.py:187-
# 194; V1 at v1/trainer_base.py:1784), and the estimators read e.g. gdpo_reward_keys / gdpo_reward_weights there
# (core_algos.py:413, 435), fields of AlgoConfig (trainer/config/algorithm.py:672-673) that ppo_trainer.yaml lacks.
TYPED_NODES = ("algorithm",)

def _typed_field(node: str | None, target: str | None, parts: list[str], dcs: dict[str, Any]) -> bool:
    """A field of a TYPED_NODES node's dataclass, set directly under the node."""
    return node in TYPED_NODES and target in dcs and len(parts) == len(node.split(".")) + 1 and \
        parts[-1] in dcs[target]["fields"]


def _missing_field(base: dict[str, Any], parts: list[str], dcs: dict[str, Any],
                   use_critic_hint: bool | None) -> tuple[str, str] | None:
    """(dataclass name, field) when the key sits in a section verl turns into a dataclass (DATACLASS_ROOTS) that
    lacks the field, e.g. +actor_rollout_ref.rollout.update_weights_bucket_megabytes in RolloutConfig; else None."""
    target, node = _dataclass_of(base, parts)
    instantiated = node is not None and any(node == r or node.startswith(r + ".") for r in DATACLASS_ROOTS)
    if node and node.startswith("critic") and use_critic_hint:
        instantiated = True
    if not instantiated or target not in dcs:
        return None
    field_name = parts[len(node.split("."))] if node else parts[0]
    return None if field_name in dcs[target]["fields"] else (target.rsplit(".", 1)[-1], field_name)


def _gone_added(key: str, gone: str, field: tuple[str, str] | None, add: Callable[..., None]) -> None:
    """A key an older verl had, added back with `+`: refused by the dataclass verl builds (VI804), else ignored."""
    if field is not None:
        add("VI804", "error", (key,), f"+{gone}: Hydra adds it, but {field[0]} has no field {field[1]!r}, so verl "
            "fails when it builds the config (omega_conf_to_dataclass: ConfigKeyError)", "remove it",
            fix=Fix(delete=[key]))
    else:
        add("VI802", "warning", (key,), f"+{gone}: Hydra adds it and verl ignores it", "remove it",
            fix=Fix(delete=[key]))


# A misspelling --fix renames: the closest sibling at least this close (difflib's ratio) and clearly closer than
# any other (by RENAME_MARGIN), e.g. ppo_mini_batch_sise → ppo_mini_batch_size (0.95; ppo_micro_batch_size 0.82).
RENAME_RATIO = 0.85
RENAME_MARGIN = 0.1


def _did_you_mean(base: dict[str, Any], key: str) -> tuple[str, bool]:
    """(the key the user probably meant or "", whether it is sure enough for --fix to rename: one misspelled
    segment whose closest sibling is close and unique, and the whole suggested key is in verl's tree)."""
    parts = key.split(".")
    node: Any = base
    for i, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            siblings = [str(s) for s in node] if isinstance(node, dict) else []
            close = difflib.get_close_matches(part, siblings, n=1, cutoff=0.6)
            if close:
                guess = ".".join(parts[:i] + [close[0]] + parts[i + 1:])
                ratios = sorted((difflib.SequenceMatcher(None, s, part).ratio() for s in siblings), reverse=True)
                sure = ratios[0] >= RENAME_RATIO and (len(ratios) < 2 or ratios[1] <= ratios[0] - RENAME_MARGIN) \
                    and lookup(base, guess) is not NOTHING
                return guess, sure
            # the same leaf name elsewhere in the tree (e.g. a key that moved): a guess, never renamed by --fix
            leaf = parts[-1]
            moved = [k for k in flatten(base) if k.endswith("." + leaf) and k.split(".")[0] == parts[0]]
            return (moved[0] if len(moved) == 1 else ""), False
        node = node[part]
    return "", False


DID_YOU_MEAN = 200


def _present(key: str, base: dict[str, Any], items: list[Item]) -> bool:
    """Whether `key` is in the tree an override lands in: verl's, or what the user's YAML adds to it."""
    return lookup(base, key) is not NOTHING or any(
        it.override is None and (it.key == key or it.key.startswith(key + ".")) for it in items)


def _placed(key: str, value: Any, base: dict[str, Any], items: list[Item]) -> dict[str, Any]:
    """{key: value}, with `+` where the key is not in the tree yet."""
    return {key if _present(key, base, items) else "+" + key: value}


def _implied(key: str, value: Any, base: dict[str, Any], items: list[Item]) -> dict[str, Any]:
    """What the legacy key's old reader also set (LEGACY_IMPLIED), where the user has not set it: turning DAPO's
    overlong buffer on by its new key brings max_resp_len = data.max_response_length, as verl 0.4-0.6 passed it."""
    target, source = LEGACY_IMPLIED.get(key, (None, None))
    if target is None or not value or any(it.key == target and it.override is not None for it in items):
        return {}
    if lookup(base, target) not in (NOTHING, None) or any(it.key == target and it.value is not None for it in items):
        return {}
    given = [it.value for it in items if it.key == source]
    return _placed(target, given[-1] if given else lookup(base, source), base, items)


def _legacy_reward_key(it: Item, legacy: str, base: dict[str, Any], items: list[Item], add: Callable[..., None],
                       migrates: str, read_elsewhere: Callable[[str], str | None] | None) -> None:
    """VI805 for a legacy reward key: a warning where the entry point's migrate_legacy_reward_impl (at `migrates`)
    carries it to `legacy`; an error where that migration drops it, where main_ppo ignores it, or where a recipe
    that does not migrate never reads it itself (then nothing: the recipe's code reads it)."""
    key = it.key
    if not migrates and read_elsewhere is not None and read_elsewhere(key):
        return  # verl ignores it and the recipe's own code reads it (recipe/entropy/main_entropy.py:153)
    maps = bool(migrates) and migrated(key)
    if maps:
        why = f"this entry point maps it onto {legacy} ({migrates} calls migrate_legacy_reward_impl); deprecated"
    elif migrates:
        why = (f"this entry point's migrate_legacy_reward_impl ({migrates}) does not carry it to reward.* (verl 0.9.1 "
               "experimental/reward_loop/reward_loop.py:45-88 copies some legacy keys and deletes the rest), so the "
               "setting has no effect")
    elif read_elsewhere is not None:
        why = ("verl 0.9.1 ignores it (the recipe's main does not migrate legacy reward keys) and the recipe's own "
               "code never reads it, so the setting has no effect")
    else:
        why = "verl 0.9.1's main_ppo ignores it, so the setting has no effect"
    read = LEGACY_MISMAPPED.get(key)
    if read is not None:  # the migration's target is never read as this value (keys.py LEGACY_MISMAPPED)
        why = (f"{why}; and {legacy}, where verl's migration copies it (experimental/reward_loop/reward_loop.py:55), "
               f"is not the class verl loads: that is {read} (trainer/ppo/reward.py:96-105, default 'naive')")
        maps, legacy = False, read
    add("VI805", "warning" if maps else "error", (key,), f"{key} is a legacy reward key: {why}",
        f"use {legacy}" + (" (verl's own migration maps it there)" if maps and migrated(key) else ""),
        fix=Fix(set={**_placed(legacy, it.value, base, items), **_implied(key, it.value, base, items)}, delete=[key]))


SPELLING = "check the spelling against `python -m verl.trainer.main_ppo --cfg job`"


def validate_keys(items: list[Item], base: dict[str, Any], add: Callable[..., None],
                  use_critic_hint: bool | None, migrates_legacy_reward: str = "",
                  read_elsewhere: Callable[[str], str | None] | None = None, legacy_reward: bool = True) -> None:
    """Every user key against verl's tree. `migrates_legacy_reward`: where the entry point maps the legacy reward
    keys onto reward.* itself (verl 0.9.1's fully_async_main.py:237 calls experimental/reward_loop/reward_loop.py
    migrate_legacy_reward_impl, and so do recipes' mains such as recipe/dapo/main_dapo.py; main_ppo does not), so
    they take effect there: deprecated, not ignored. `read_elsewhere`: where a recipe's own code reads a key
    (wizard.check.recipes), for keys verl's tree lacks or ignores: read there, they are the recipe's, not a fault.
    `legacy_reward`: whether the tree is a PPO trainer's, whose reward keys moved under reward.* (main_eval's
    evaluation tree reads custom_reward_function.* where it is: verl 0.9.1 trainer/main_eval.py:35, get_custom_reward_fn)."""
    dcs = dataclass_fields()
    given = {it.key for it in items}
    suggestions = 0  # a did-you-mean search per unknown key, for the first DID_YOU_MEAN of them only
    for it in items:
        key = it.key
        parts = key.split(".")
        if parts[0] == "hydra":
            it.apply = False
            continue
        if len(parts) == 1 and isinstance(base.get(key), dict) and not isinstance(it.value, dict) and it.override is not None:
            it.apply = False
            add("VI800", "info", (key,), f"{key}={it.value} selects a config group, which only Hydra composes",
                "install verl to resolve it exactly; checked against the default group")
            continue
        legacy = legacy_target(key)
        if legacy is not None and parts[0] in LEGACY_ROOTS and legacy_reward:
            if it.value is None and it.override is None:
                continue  # a full dump's legacy nulls
            it.apply = lookup(base, key) is not NOTHING
            if it.op == "~":
                continue
            _legacy_reward_key(it, legacy, base, items, add, migrates_legacy_reward, read_elsewhere)
            continue
        current = lookup(base, key)
        if current is NOTHING and it.override is not None:  # a leaf the user's YAML (a recipe's) adds to verl's tree
            current = next((y.value for y in items if y.override is None and y.key == key), NOTHING)
        exists = current is not NOTHING
        if it.op == "~":
            continue
        if exists:
            # Hydra appends with `+` when the key is absent or null, and merges a mapping or list into what is
            # there (hydra/_internal/config_loader_impl.py, _apply_overrides_to_config); only a set scalar refuses
            if it.op == "+" and it.override is not None and current is not None \
                    and not isinstance(it.value, (dict, list)):
                it.plus_to_plain = True
                add("VI803", "error", (key,), f"+{key}: the key exists, so Hydra refuses to add it "
                    "(`Could not append to config`)", f"drop the +: {key}={format_value(it.value)}",
                    fix=Fix(strip_plus=[key]))
            continue
        new, removed = drift(key)
        span = key_history(key)  # the verl releases (0.3 … 0.9.0) whose config tree had this key
        was = f"{key} existed in verl {span[0]}–{span[1]}" if span else None
        later = renamed(key) if span else None
        if new is None and later is not None:
            new = later
        if new is not None and lookup(base, new) is not NOTHING:
            it.apply = False
            add("VI801", "error", (key,), (f"{was}; verl 0.9.1 calls it {new}" if was else
                                           f"{key} is not in verl 0.9's config tree (moved)"), f"use {new}",
                fix=Fix(set={new: it.value}, delete=[key]))
            continue
        # (a key an earlier tree listed under what is now a free-form mapping, e.g. rollout.engine_kwargs.sglang.*,
        # is passed through to the engine: not gone)
        if (removed or span is not None) and not _is_free_form(base, parts, dcs):
            it.apply = False
            gone = f"{was} and is gone from 0.9.1" if was else f"{key} was removed in verl 0.9"
            if it.op in ("+", "++"):  # Hydra adds it; verl 0.9.1 never reads it, or its dataclass refuses it
                _gone_added(key, gone, _missing_field(base, parts, dcs, use_critic_hint), add)
            else:
                add("VI801", "error", (key,), gone, "remove it", fix=Fix(delete=[key]))
            continue
        if _is_free_form(base, parts, dcs):
            if it.op == "" and it.override is not None:
                it.apply = False
                add("VI801", "error", (key,), f"{key} is not in verl's tree yet: Hydra refuses to set it without +",
                    f"write +{key}={format_value(it.value)}", fix=None)
            continue
        suggestions += 1
        hint, sure = _did_you_mean(base, key) if suggestions <= DID_YOU_MEAN else ("", False)
        dym = env_hint(key, f"did you mean {hint}?" if hint else SPELLING)  # or the variable verl reads for it
        # --fix renames a sure misspelling, unless the right key is given too (which value wins is the user's call)
        # or a mapping would replace a value (or the reverse)
        rename = Fix(set={hint: it.value}, delete=[key]) if sure and hint not in given and \
            isinstance(lookup(base, hint), dict) == isinstance(it.value, dict) else None
        target, node = _built_class(base, items, parts, dcs)
        instantiated = node is not None and any(node == r or node.startswith(r + ".") for r in DATACLASS_ROOTS)
        if node and node.startswith("critic") and use_critic_hint:
            instantiated = True
        if it.op == "" and it.override is not None:
            it.apply = False
            field_name = parts[len(node.split("."))] if node else parts[0]
            if instantiated and target in dcs and field_name in dcs[target]["fields"] and len(parts) == len(node.split(".")) + 1:
                # the dataclass verl builds has the field, its YAML does not list it: Hydra needs the +
                add("VI801", "error", (key,), f"{key} is not in verl's YAML tree, so Hydra refuses the override "
                    f"(`Key ... is not in struct`), though {target.rsplit('.', 1)[-1]} has the field {field_name!r}",
                    f"write +{key}={format_value(it.value)}", fix=None)
            else:
                add("VI801", "error", (key,), f"{key} is not in verl's config tree: Hydra refuses the override "
                    "(`Key ... is not in struct`)", dym, fix=rename)
            continue
        if instantiated and target in dcs:
            field_name = parts[len(node.split("."))] if node else parts[0]
            if field_name not in dcs[target]["fields"]:
                add("VI804", "error", (key,), f"{key}: {target.rsplit('.', 1)[-1]} has no field {field_name!r}; verl "
                    "fails with TypeError when it builds the config", dym, fix=rename)
                continue
        if instantiated or _typed_field(node, target, parts, dcs):
            continue  # a real dataclass field the YAML does not list (built, or read with .get: TYPED_NODES)
        if read_elsewhere is not None and read_elsewhere(key):
            continue  # a key of the recipe's own, read by its code
        if it.override is None:
            add("VI801", "warning" if read_elsewhere is not None else "error", (key,),
                f"{key} is not in verl's config tree: Hydra merges it and verl ignores it"
                + (", and the recipe's own code never names it" if read_elsewhere is not None else ""),
                dym, fix=rename)
        else:
            add("VI802", "warning", (key,), f"+{key} adds a key verl never reads: it is silently ignored"
                + (", and the recipe's own code never names it" if read_elsewhere is not None else ""), dym,
                fix=rename)


# Words an entry point's code takes in place of a number (read from verl 0.9.1): the SFT trainers turn
# trainer.save_freq / test_freq "after_each_epoch" into the steps of an epoch (trainer/sft_trainer.py:191-196,
# trainer/sft_trainer_ray.py:231-236); main_ppo compares them with numbers, so there it stays an error.
NUMBER_WORDS = {"sft": {"trainer.save_freq": ("after_each_epoch",), "trainer.test_freq": ("after_each_epoch",)}}


def type_problems(items: list[Item], base_flat: dict[str, Any], add: Callable[..., None],
                  base: dict[str, Any] | None = None, entry: str = "ppo") -> None:
    cache: dict[str, Any] = {}
    words = NUMBER_WORDS.get(entry, {})

    def float_field(key: str) -> bool:
        """verl's config dataclass types the field float, whatever its YAML default looks like (top_p: 1)."""
        if base is None:
            return False
        if "dcs" not in cache:
            cache["dcs"] = dataclass_fields()
        dcs = cache["dcs"]
        parts = key.split(".")
        target, node = _dataclass_of(base or {}, parts + ["_"])
        if target not in dcs or node is None:
            return False
        rest = parts[len(node.split(".")) if node else 0:]
        return len(rest) == 1 and rest[0] in dcs[target].get("floats", [])

    for it in items:
        if not it.apply or it.op == "~" or it.key not in base_flat:
            continue
        default, v = base_flat[it.key], it.value
        if isinstance(v, str) and ("${" in v or PLACEHOLDER in v or v in words.get(it.key, ())):
            continue
        if isinstance(default, bool):
            if not isinstance(v, bool):
                add("VI808", "error", (it.key,), f"{it.key}={v!r} is not a boolean", "use true or false")
        elif isinstance(default, (int, float)) and not isinstance(default, bool):
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                add("VI808", "error", (it.key,), f"{it.key}={v!r} is not a number (verl's default is {default!r}); "
                    "Hydra accepts it and verl fails later with a TypeError", f"give a number like {default!r}")
            elif isinstance(default, int) and isinstance(v, float) and not v.is_integer() and not float_field(it.key):
                add("VI808", "error", (it.key,), f"{it.key}={v!r} must be a whole number", f"e.g. {int(v)}")
