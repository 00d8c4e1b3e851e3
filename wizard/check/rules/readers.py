"""A key the user sets that nothing verl runs for this configuration reads (VI890).

"Who reads what" is wizard/check/data/verl_readers.json, generated from verl's source by scripts/verl_readers.py:
for each config key, the modules that read it (file:line) grouped by *scope*, the configuration under which verl
runs them (an engine for one strategy, a rollout server, a trainer mode, an entry point). A key whose every
reader lies in a scope this configuration does not run is set for nothing: the setting is silently ignored.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

from wizard.check.rules.context import Ctx, Facts
from wizard.check.shellargs import PLACEHOLDER

# What to set instead, where verl has an equivalent for the inactive scope (each read in verl's code):
# Megatron recomputes activations through TransformerConfig's recompute_* fields, which verl passes from
# megatron.override_transformer_config (verl/workers/config/engine.py McoreEngineConfig.override_transformer_config;
# verl/trainer/config/engine/megatron.yaml `override_transformer_config: {recompute_granularity, recompute_method,
# recompute_num_layers}`).
EQUIVALENT: dict[tuple[str, str], str] = {
    ("model.enable_gradient_checkpointing", "megatron"):
        "megatron.override_transformer_config.recompute_granularity=full (with recompute_method=uniform, "
        "recompute_num_layers=1) on the actor/ref/critic",
    ("model.enable_activation_offload", "megatron"):
        "megatron.param_offload / megatron.optimizer_offload (Megatron offloads weights and optimizer, not activations)",
    # Liger is applied only by the FSDP engine (verl/workers/engine/fsdp/transformer_impl.py:307-309); the Megatron
    # engine's memory-saving output head is its fused Triton kernel, read from model.use_fused_kernels
    # (verl/workers/engine/megatron/transformer_impl.py:1258-1276).
    ("model.use_liger", "megatron"):
        "model.use_fused_kernels=True (the Megatron engine's fused output head; Liger is applied by the FSDP engine only)",
}


# Unread keys whose value the running code carries out anyway: the V1 trainer balances every batch without reading
# trainer.balance_batch (trainer/ppo/v1/trainer_base.py:582, outside any condition), so `balance_batch=True` there, as
# in verl's own examples, changes nothing and is worth a note; `False` is still a warning (V1 balances regardless).
DONE_ANYWAY: dict[str, tuple[Any, str]] = {
    "trainer.balance_batch": (True, "the V1 trainer balances every batch without reading it (trainer_base.py:582)"),
}


@functools.lru_cache(maxsize=1)
def readers_table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_readers.json").read_text(encoding="utf-8")
    return json.loads(text)


def _strategy(c: Ctx, key: str) -> str | None:
    if key.startswith("critic."):
        return c.v("critic.strategy")
    if key.startswith("actor_rollout_ref."):
        return c.v("actor_rollout_ref.actor.strategy")
    return None


def scope_active(c: Ctx, scope: str, key: str) -> tuple[bool, list[str]]:
    """(whether verl runs the scope's modules for this config, the keys that decide it)."""
    if scope == "always":
        return True, []
    spec = readers_table()["scopes"][scope]
    deciding: list[str] = []
    for cond in spec["any"]:
        k = cond["key"]
        if k == "@strategy":
            value = _strategy(c, key)
            if value is None:
                return True, []  # a key outside actor/critic: no strategy decides it
            deciding.append("actor_rollout_ref.actor.strategy" if not key.startswith("critic.") else "critic.strategy")
        elif k == "@entry":
            value = getattr(c.src, "entry", "ppo")
            deciding.append("entry point")
        elif k.startswith("@"):  # "@never": verl reads it only to say it is ignored
            continue
        else:
            if k not in c.res.flat:
                return True, deciding  # not in this tree: nothing says the scope is off
            value = c.v(k)
            deciding.append(k)
        if value in cond["in"] or (isinstance(value, str) and ("${" in value or PLACEHOLDER in value)):
            return True, deciding
    return False, deciding


def _free_form(c: Ctx, key: str) -> bool:
    from wizard.check.rules.keys import _is_free_form
    from wizard.verlspec.keys import dataclass_fields, load_snapshot

    engines = load_snapshot()["engines"]
    base = engines.get(c.res.engine) or engines["dp"]
    return _is_free_form(base, key.split("."), dataclass_fields())


def _condition_text(scope: str) -> str:
    spec = readers_table()["scopes"][scope]
    parts = []
    for cond in spec["any"]:
        if cond["key"] == "@orphan":
            parts.append("no configuration: no code of verl imports these modules")
            continue
        if not cond["in"]:
            parts.append("no configuration: verl reads it only to warn that it is ignored")
            continue
        k = {"@strategy": "strategy", "@entry": "entry point"}.get(cond["key"], cond["key"])
        parts.append(f"{k} in {'/'.join(str(v) for v in cond['in'])}" if len(cond["in"]) > 1 else
                     f"{k}={cond['in'][0]}")
    return " or ".join(parts)


_REF = re.compile(r"\$\{(?:oc\.select:)?\s*(\.*)([\w.]+)")


@functools.lru_cache(maxsize=4)
def interpolated_into(engine: str) -> dict[str, set[str]]:
    """key → the keys of verl's tree whose default interpolates it (`forward_max_token_len_per_gpu:
    ${.ppo_max_token_len_per_gpu}`): a key is read wherever a key that copies it is read."""
    from wizard.check.tree import flatten
    from wizard.verlspec.keys import load_snapshot

    engines = load_snapshot()["engines"]
    out: dict[str, set[str]] = {}
    for key, raw in flatten(engines.get(engine) or engines["dp"]).items():
        if not isinstance(raw, str) or "${" not in raw:
            continue
        parent = key.rsplit(".", 1)[0].split(".") if "." in key else []
        for dots, ref in _REF.findall(raw):
            if dots:
                base = parent[:len(parent) - (len(dots) - 1)] if len(dots) > 1 else parent
                ref = ".".join(base + [ref])
            out.setdefault(ref, set()).add(key)
    return out


def _read_here(c: Ctx, key: str, table: dict[str, Any], unread: set[str], depth: int = 0) -> bool:
    """Whether something this configuration runs reads `key`, directly or through a key interpolating it; a key
    the table has no reader for at all counts as read (the walk cannot see every way verl consumes a value)."""
    scopes = table.get(key)
    if scopes is None:
        return key not in unread or depth == 0
    if any(scope_active(c, s, key)[0] for s in scopes):
        return True
    return depth < 3 and any(_read_here(c, src, table, unread, depth + 1)
                             for src in interpolated_into(c.res.engine).get(key, ()))


def rule_unread(c: Ctx, f: Facts) -> None:
    """VI890: every reader of a user-set key is in a scope this configuration does not run. Not for a recipe's own
    entry point: its code (a trainer subclass, its reward manager) may read any key, so "no effect" is unproven."""
    if getattr(c.src, "recipe", None):
        return
    table = readers_table()["keys"]
    unread = set(readers_table()["unread"])
    orphan = readers_table().get("orphan_only", {})  # VI656's (rules/deadkeys.py)
    for key in sorted(c.res.user):
        scopes = table.get(key)
        if not scopes or key in orphan or _free_form(c, key):
            continue
        deciding: list[str] = []
        if _read_here(c, key, table, unread):
            continue
        for s in scopes:
            deciding += [d for d in scope_active(c, s, key)[1] if d not in deciding]
        where = "; ".join(f"{s} ({_condition_text(s)}): {', '.join(v[:2])}" for s, v in sorted(scopes.items()))
        strategy = _strategy(c, key)
        tail = key.split(".", 1)[1] if "." in key else key
        instead = next((v for (suffix, strat), v in EQUIVALENT.items() if tail.endswith(suffix) and strat == strategy), "")
        hint = f"set {instead} instead" if instead else "remove it: verl 0.9.1 ignores it" if set(scopes) == {"ignored"} \
            else \
            f"remove it, or run the configuration that reads it ({', '.join(sorted(scopes))})"
        anyway = DONE_ANYWAY.get(key)
        done = anyway is not None and c.res.flat.get(key) is anyway[0] and c.res.flat.get("trainer.use_v1") is True
        note = f" ({key}={anyway[0]} is what runs anyway: {anyway[1]})" if done and anyway else ""
        c.add("VI890", "info" if done else "warning", (key, *[d for d in deciding if d != "entry point"]),
              f"{key} is read only by modules this configuration does not run, so it has no effect{note} — read by "
              f"{where}", hint)
