"""Megatron full activation recompute, when the planner's layout has it (wizard.planner.layout_search.choose tries
it right after the same layout without it; stages/fit.py _fastest times it against the layout found without it).

The keys: verl 0.9.1's Megatron engine config has `override_transformer_config` with recompute_granularity,
recompute_method and recompute_num_layers, all null by default (trainer/config/engine/megatron.yaml:71-87;
recompute_modules [core_attn] is the selective default the memory model counts otherwise). The engine copies the
mapping (workers/engine/megatron/transformer_impl.py:295) into megatron-core's TransformerConfig: through
mbridge's set_extra_args (:332, vanilla_mbridge) or as Megatron-Bridge provider overrides (:371-372, then
apply_overrides_and_finalize :399-402); the critic's engine reads critic.megatron.override_transformer_config the
same way (trainer/config/_generated_ppo_megatron_trainer.yaml:610-615). The reference takes the actor's mapping
(ref/megatron_ref.yaml:23 `${oc.select:actor_rollout_ref.actor.megatron.override_transformer_config,{}}`) and
only runs forward passes, where Megatron recomputes nothing: it needs no keys of its own. megatron-core's
TransformerConfig requires recompute_method with granularity full; `uniform` with recompute_num_layers 1
checkpoints every layer's input, what memory.py counts (CHECKPOINT_BYTES_PER_HIDDEN per layer and token), and is
the hint `check` gives (VI860, wizard/check/rules/memory.py _recompute_roles).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from wizard.planner.state import Build
from wizard.verlspec.keys import PRE

RECOMPUTE = {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}
_WHY = {"recompute_granularity": "full activation recompute: each layer keeps only its input and recomputes the "
                                 "rest in backward",
        "recompute_method": "uniform: checkpoint every chunk of recompute_num_layers layers (megatron-core needs a "
                            "method with granularity full)",
        "recompute_num_layers": "1: every layer's input is the checkpoint (what the memory estimate counts)"}


_OVER = {"does not fit": "the update is over", "tight": "the update's band (+20 %, full-length sequences) is over",
         "fits": "the update also fits"}


def on(b: Build) -> bool:
    """The plan's layout has Megatron full recompute."""
    return bool(b.megatron and b.decision is not None and b.decision.layout.recompute)


def actor_keys(b: Build) -> None:
    """The actor's three override_transformer_config keys (the reference takes them through oc.select)."""
    if not on(b):
        return
    note = summary(b)
    b.facts["megatron_recompute"] = note
    note["critic"] = bool(b.algo.critic)
    for k, v in RECOMPUTE.items():
        why = f"{_WHY[k]}; {note['why']}" if k == "recompute_granularity" else _WHY[k]
        b.s.set(f"{PRE}.actor.megatron.override_transformer_config.{k}", v, why)


def critic_keys(b: Build) -> None:
    """The critic's keys, with the actor's: its engine reads its own mapping (memory.py _critic_bytes_per_token)."""
    if not on(b):
        return
    for k, v in RECOMPUTE.items():
        b.s.set(f"critic.megatron.override_transformer_config.{k}", v, f"as the actor: {_WHY[k]}")


def _step_seconds(b: Build, decision: Any) -> Optional[Any]:
    """The predicted step (wizard.planner.layouts.layout_step) of `decision` for the plan's workload."""
    from wizard.planner.layouts import layout_step

    a = b.a
    if a.gpu_type == "cpu" or b.shape is None:
        return None
    return layout_step(b.shape, decision, prompts=a.prompts_per_step, n=b.n, max_prompt=a.max_prompt_length,
                       max_response=a.max_response_length, response_mean=a.response_length_mean,
                       gpu_type=a.gpu_type, mini_batches=a.updates_per_step, has_critic=bool(b.algo.critic),
                       dynamic=b.dynamic, filter_groups=bool(b.algo.filter_groups))


def summary(b: Build) -> dict[str, Any]:
    """Why recompute is on (PLAN.md, the keys' reason): the update phase with and without it at the plan's layout and
    budgets, the memory it saves and its step-time cost; `without` the layout the search found without it."""
    from wizard.planner.memory import Decision, estimate

    d = b.decision
    assert d is not None and b.shape is not None
    plain_est = estimate(b.shape, replace(d.layout, recompute=False))
    with_gib, without_gib = d.estimate.phase_gib("update"), plain_est.phase_gib("update")
    cap = d.estimate.capacity_gib  # the update phase's own verdict without recompute
    update_without = ("does not fit" if without_gib > cap else "tight" if plain_est.band("update")[1] > cap
                      else "fits")
    out: dict[str, Any] = {
        "update_gib": round(with_gib, 1), "update_without_gib": round(without_gib, 1),
        "saved_gib": round(without_gib - with_gib, 1), "capacity_gib": round(cap, 1),
        "verdict_without": update_without, "without": b.facts.get("recompute_without"),
        "step_s": None, "extra_update_s": None}
    fast, slow = _step_seconds(b, d), _step_seconds(b, Decision(replace(d.layout, recompute=False), plain_est, {}))
    if fast is not None and slow is not None:
        out["step_s"] = round(fast.step_s, 1)
        out["extra_update_s"] = round(fast.phases.get("update actor", 0.0) - slow.phases.get("update actor", 0.0), 1)
    held = (f"the update holds {with_gib:.1f} GiB per GPU with it, {without_gib:.1f} GiB without "
            f"({out['saved_gib']:g} GiB of activations saved; without it {_OVER[out['verdict_without']]} the "
            f"{out['capacity_gib']:g} GiB card)")
    if out["without"]:
        alt = f"; without recompute the planner needs {out['without']}, predicted slower"
    else:
        alt = "; without it no layout verl-init can choose fits with the ±20 % band under the card"
    out["why"] = held + alt
    return out


def plan_line(fx: dict[str, Any]) -> Optional[str]:
    """PLAN.md's line on recompute (renderer: megatron_layout_lines), or None when it is off."""
    r = fx.get("megatron_recompute")
    if not r:
        return None
    cost = (f" It costs one more forward pass in every update: about {r['extra_update_s']:g} s of a predicted "
            f"{r['step_s']:g} s step." if r.get("extra_update_s") is not None else
            " It costs one more forward pass in every update (about a third more update compute).")
    return ("Activation recompute: on (megatron.override_transformer_config.recompute_granularity=full, "
            f"recompute_method=uniform, recompute_num_layers=1, {'actor and critic' if r.get('critic') else 'actor'}; "
            "the reference takes the actor's): "
            f"{r['why']}." + cost)
