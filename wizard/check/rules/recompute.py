"""Megatron activation recompute settings (VI616, VI626).

verl 0.9.1 reads `<role>.megatron.override_transformer_config.recompute_granularity / recompute_method /
recompute_num_layers / recompute_modules` from its Megatron engine config (trainer/config/engine/megatron.yaml:73-87;
defaults null, null, null, ["core_attn"]) and checks none of them: McoreEngineConfig leaves override_transformer_config
alone and the engine copies every key onto the Megatron-Bridge provider unchanged
(workers/engine/megatron/transformer_impl.py:371-372), then finalises it (:399-411). The checks run later, in the Ray
worker, after the GPUs are booked:

- VI616 (error): megatron-core's TransformerConfig.__post_init__ (core_v0.18.2
  megatron/core/transformer/transformer_config.py:1544-1600) raises when recompute_granularity is not full/selective
  (:1545), recompute_method is not block/uniform (:1552), granularity `full` has no recompute_method (:1556-1560) or
  no recompute_num_layers (:1562-1567), granularity `selective` has a recompute_num_layers (:1568-1574), or a
  `selective` recompute_modules entry is outside megatron-core's allowed set (:1586-1601). A user who writes only
  `recompute_granularity=full` (the one key most guides mention) hits the second of these.
- VI626: with multi-token prediction (model.mtp.enable and mtp.enable_train) verl patches megatron-core's MTP layer
  with its own checkpointed forward (utils/megatron_utils.py:1884-1906, called at transformer_impl.py:590-591); under
  full recompute it asserts `recompute_num_layers == 1` for recompute_method=uniform (models/mcore/mtp_patch.py:541-542,
  an AssertionError at the first training step: error) and for recompute_method=block only warns and runs the MTP
  layer without a checkpoint (:544-546: the memory full recompute was meant to save is not saved there: warning).
  megatron-core's own MTP layer behaves the same (core_v0.18.2 multi_token_prediction.py:1217-1229). verl#7346.

Both rules read the PPO roles (actor, a reference with settings of its own, critic) and verl's SFT trainer with
`engine=megatron` (the same MegatronEngine, its keys under engine.override_transformer_config and model.mtp).

The accepted values come from wizard/check/data/mcore_recompute.json, written by scripts/mcore_recompute.py from the
installed verl's megatron.yaml and mtp_patch.py and from megatron-core's transformer_config.py.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from wizard.check.rules.context import A, M, REF, Ctx, Facts, join_or

TABLE = Path(__file__).resolve().parent.parent / "data" / "mcore_recompute.json"


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(TABLE.read_text(encoding="utf-8"))


def _roles(c: Ctx, f: Facts) -> list[tuple[str, str, str | None]]:
    """(role, megatron config prefix, model prefix whose mtp block the engine reads or None)."""
    if c.src.entry == "sft":  # sft_trainer_engine.yaml: engine@engine, the model under model (sft_trainer_engine.yaml)
        megatron = c.v("engine.strategy") == "megatron" or str(c.v("engine._target_") or "").endswith(
            "McoreEngineConfig")
        return [("SFT model", "engine", "model")] if megatron else []
    roles: list[tuple[str, str, str | None]] = [("actor", f"{A}.megatron", M)] if f.megatron else []
    ref_keys = [f"{REF}.megatron.override_transformer_config.{k}" for k in
                ("recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules")]
    if f.use_ref and c.v(f"{REF}.strategy") == "megatron" and any(c.set_by_user(k) for k in ref_keys):
        roles.append(("reference", f"{REF}.megatron", None))  # otherwise it follows the actor's (megatron_ref.yaml:23)
    if f.use_critic and c.v("critic.strategy") == "megatron":
        roles.append(("critic", "critic.megatron", None))
    return roles


def mcore_problems(granularity: Any, method: Any, num_layers: Any, modules: Any) -> list[tuple[str, str]]:
    """(problem, megatron-core line key) for the values TransformerConfig.__post_init__ rejects; [] when accepted."""
    mc = table()["megatron_core"]
    if granularity is None:
        return []
    if granularity not in mc["granularities"]:
        return [(f"recompute_granularity={granularity!r} is none of {join_or(mc['granularities'])}",
                 "recompute_granularity")]
    out: list[tuple[str, str]] = []
    if method is not None and method not in mc["methods"]:
        out.append((f"recompute_method={method!r} is none of {join_or(mc['methods'])}", "recompute_method"))
    elif method is None and granularity != "selective":
        out.append((f"recompute_granularity={granularity} needs recompute_method {join_or(mc['methods'])} (it is "
                    "unset)", "full_needs_method"))
    if granularity != "selective" and num_layers is None:
        out.append((f"recompute_granularity={granularity} needs recompute_num_layers (it is unset)",
                    "full_needs_num_layers"))
    elif granularity == "selective" and num_layers is not None:
        out.append((f"recompute_granularity=selective takes no recompute_num_layers (it is {num_layers})",
                    "selective_no_num_layers"))
    if granularity == "selective" and isinstance(modules, (list, tuple)):
        bad = sorted(set(map(str, modules)) - set(mc["selective_modules"]))
        if bad:
            out.append((f"recompute_modules {bad} are not among megatron-core's {join_or(mc['selective_modules'])}",
                        "recompute_modules"))
    return out


def mtp_verdict(granularity: Any, method: Any, num_layers: Any) -> tuple[str, str] | None:
    """('error'|'warning', what verl's MTP checkpointed forward does) for full recompute, or None when it
    checkpoints the MTP layer as asked (or recompute is not full)."""
    if granularity != "full":
        return None
    mtp = table()["verl"]["mtp"]
    if method in mtp["checkpointed"]:
        want = mtp["checkpointed"][method]
        if num_layers != want["recompute_num_layers"]:
            return ("error", f"asserts recompute_num_layers == {want['recompute_num_layers']} for recompute_method="
                             f"{method} at the first training step (models/mcore/mtp_patch.py:{want['line']})")
        return None
    if method in mtp["skipped"]:
        return ("warning", f"warns 'recompute_method == {method!r} is not supported for MTP yet. Skipping recompute.'"
                           f" and runs the MTP layer without a checkpoint (models/mcore/mtp_patch.py:"
                           f"{mtp['skipped'][method]['line']})")
    return None  # other methods: VI616 already names them


def rule_recompute(c: Ctx, f: Facts) -> None:
    """VI616 / VI626 for each Megatron role (module docstring)."""
    mc = table()["megatron_core"]
    for role, prefix, model in _roles(c, f):
        otc = f"{prefix}.override_transformer_config"
        keys = {k: f"{otc}.recompute_{k}" for k in ("granularity", "method", "num_layers", "modules")}
        if c.unknown(*keys.values()):
            continue
        g, m, n, mods = (c.v(keys[k]) for k in ("granularity", "method", "num_layers", "modules"))
        problems = mcore_problems(g, m, n, mods)
        if problems:
            where = ", ".join(f":{mc['lines'][line]}" for _, line in problems)
            hint = (f"set {keys['method']}=uniform and {keys['num_layers']}=1 (verl's own Megatron examples), or "
                    f"remove {keys['granularity']}" if g == "full" else
                    f"remove {keys['num_layers']} and {keys['method']} (selective recomputes recompute_modules in "
                    "every layer)" if g == "selective" else f"set {keys['granularity']} to full or selective")
            c.add("VI616", "error", [keys["granularity"], keys["method"], keys["num_layers"]],
                  f"{role} Megatron: {'; '.join(p for p, _ in problems)}: megatron-core's TransformerConfig raises "
                  f"when the worker finalises the model provider, after the GPUs are booked ({mc['version']} "
                  f"{mc['file']}{where}; verl passes override_transformer_config through unchecked, "
                  "transformer_impl.py:371-372)", hint)
            continue
        if model is None or c.v(f"{model}.mtp.enable") is not True or c.v(f"{model}.mtp.enable_train") is not True:
            continue
        verdict = mtp_verdict(g, m, n)
        if verdict is None:
            continue
        severity, what = verdict
        c.add("VI626", severity, [keys["method"], keys["num_layers"], f"{model}.mtp.enable"],
              f"{role} Megatron with MTP ({model}.mtp.enable_train) and {keys['granularity']}=full, "
              f"recompute_method={m}, recompute_num_layers={n}: verl's MTP checkpointed forward {what}",
              f"set {keys['method']}=uniform and {keys['num_layers']}=1 (the MTP layer is one checkpoint unit)")
