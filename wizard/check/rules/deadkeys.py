"""A config key verl 0.9.1 declares and no code of verl reads (VI797), or reads only in a module verl never loads
(VI656).

The keys are the `dead` list of wizard/check/data/verl_readers.json, generated from verl's source by
scripts/verl_readers.py (its docstring gives the criterion): the key's leaf is a field of a config dataclass and
occurs nowhere else in verl's code, and that dataclass is never iterated field by field. In verl 0.9.1 these are
rollout.over_sample_rate (workers/config/rollout.py:177-179, documented in trainer/config/rollout/rollout.yaml as
SGLang's early abort of the slowest requests, PR#2929, whose reader is gone), rollout.multi_stage_wake_up
(rollout.py:216), rollout.multi_turn.num_repeat_rollouts (rollout.py:62), megatron.dist_checkpointing_prefix
(workers/config/engine.py:202) and actor.freeze_vision_tower (workers/config/actor.py:161, VI836's own finding).

Reported only when the user sets the key to a value other than verl's default: the default does what verl does.
A key with a rule of its own (OWN_RULE) is left to that rule. A dead key whose value verl carries out anyway is
an info (DONE_ANYWAY): rollout.multi_stage_wake_up=True (as in verl's examples/profile scripts) asks for the weights
to be woken before the KV cache, which the worker's weight sync always does (workers/engine_workers.py:782 resumes
the weights, :823 the KV cache after the sync). VI890 (keys only an inactive module reads) never
sees these keys: they have no reader at all.

VI656: the `orphan_only` map of the same table (scripts/verl_readers.py orphan_only): keys whose only readers lie in
modules no code of verl imports or names, so verl never runs them. In verl 0.9.1 that is
rollout.multi_turn.tokenization_sanity_check_mode and use_inference_chat_template (workers/config/rollout.py:59-60),
read only by workers/rollout/schemas.py (AsyncRolloutRequest, :117-118, :390, :606-663), the request object of the
SGLang multi-turn rollout verl removed: the tool agent loop (experimental/agent_loop/tool_agent_loop.py) reads
neither, so a user who tunes the sanity check for a Qwen3 template (real case verl#2165) gets no check at all and no
word about it. Reported for any value the user sets (the default too: it names a check that never runs).
"""

from __future__ import annotations

from typing import Any

from wizard.check.rules.context import Ctx, Facts
from wizard.check.rules.readers import readers_table

OWN_RULE = {
    "actor_rollout_ref.actor.freeze_vision_tower": "VI836",
}
_STAGED = ("the worker always wakes the engine in stages: the weights before the sync, the KV cache after it "
           "(workers/engine_workers.py:782, :823)")
DONE_ANYWAY: dict[str, tuple[Any, str]] = {
    "actor_rollout_ref.rollout.multi_stage_wake_up": (True, _STAGED),
    "reward.reward_model.rollout.multi_stage_wake_up": (True, _STAGED),
}


def _differs(value: Any, default: Any) -> bool:
    if isinstance(value, (int, float)) and isinstance(default, (int, float)) and not isinstance(value, bool) \
            and not isinstance(default, bool):
        return float(value) != float(default)
    return value != default


def rule_dead_keys(c: Ctx, f: Facts) -> None:
    if getattr(c.src, "recipe", None):
        return  # a recipe's own code may read any key
    dead = readers_table().get("dead", {})
    for key in sorted(c.res.user):
        if key not in dead or key in OWN_RULE or c.unknown(key):
            continue
        value, default = c.v(key), c.res.defaults_flat.get(key)
        if not _differs(value, default):
            continue
        where = ", ".join(dead[key]["declared"])
        anyway = DONE_ANYWAY.get(key)
        done = anyway is not None and value is anyway[0]
        note = f"; what it asks for happens anyway: {anyway[1]}" if done and anyway else \
            f", so the run behaves as with the default {default!r}"
        c.add("VI797", "info" if done else "warning", (key,),
              f"{key}={value} has no effect: verl {readers_table().get('verl_version', '0.9.1')} declares it "
              f"({where}) but no code of verl reads it{note}",
              f"remove {key}")


def rule_orphan_keys(c: Ctx, f: Facts) -> None:
    """VI656: a key the user sets whose every reader is a verl module nothing loads."""
    if getattr(c.src, "recipe", None):
        return  # a recipe's own code may read any key
    orphan = readers_table().get("orphan_only", {})
    version = readers_table().get("verl_version", "0.9.1")
    for key in sorted(c.res.user):
        if key not in orphan or c.unknown(key):
            continue
        value, default = c.v(key), c.res.defaults_flat.get(key)
        where = ", ".join(orphan[key]["read_in"])
        modules = sorted({w.rsplit(":", 1)[0] for w in orphan[key]["read_in"]})
        c.add("VI656", "warning" if _differs(value, default) else "info", (key,),
              f"{key}={value} has no effect: only {where} reads it, and no code of verl {version} imports "
              f"{' or '.join(modules)}, so what it sets never runs",
              f"remove {key}; nothing in verl {version} does what it names")
