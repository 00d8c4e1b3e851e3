"""VI695: a config group of verl's overridden with a plain value (`actor_rollout_ref.rollout.multi_turn=True`).

verl 0.9.1 (paths under verl/): Hydra lets an override replace a whole mapping node with a scalar, and verl's
omega_conf_to_dataclass (utils/config.py) builds the dataclass around it without checking the field's type, so
RolloutConfig.multi_turn (workers/config/rollout.py:225, a MultiTurnConfig) comes out as the bool True. The first
read of one of the group's fields then fails with AttributeError: multi_turn.tool_config_path in every
AgentLoopWorker (experimental/agent_loop/agent_loop.py:526), multi_turn.enable in the trainer's step
(trainer/ppo/ray_trainer.py:1329), after the GPUs are booked. The real case: verl's docs/sglang_multiturn/
multiturn.rst "Basic Configuration" writes `multi_turn: True` (verl PR#7673).

Derived, not tabulated: a key is a group when verl's resolved defaults (the snapshot of verl's own config tree,
wizard/verlspec/verl_defaults.yaml, or the tree composed by the installed verl) hold keys below it. A dataclass
group (one with a `_target_` below it) is an error; another mapping (a dict verl reads keys of) a warning. null
stays allowed: verl's optional groups are null by default and several readers test for None.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts


def _children(c: Ctx, key: str) -> list[str]:
    head = key + "."
    return sorted(k[len(head):] for k in c.res.defaults_flat if k.startswith(head))


def rule_group_scalar(c: Ctx, f: Facts) -> None:
    for key in sorted(c.res.user):
        value = c.res.flat.get(key)
        if value is None or isinstance(value, (dict, list)) or key in c.res.defaults_flat or c.unknown(key):
            continue
        children = _children(c, key)
        if not children:
            continue
        names = [k for k in children if "." not in k and k != "_target_"]
        fields, switch = names[:4], "enable" in names
        dataclass = "_target_" in children
        # a bool on a group with an `enable` switch meant the switch: --fix renames it (multi_turn=True -> .enable)
        fix = Fix(set={f"{key}.enable": value}, delete=[key]) if isinstance(value, bool) and switch \
            else None
        field_ = "enable" if switch else (names[0] if names else "<field>")
        hint = (f"set the group's fields instead, e.g. {key}.{field_}={value}" if isinstance(value, bool)
                else f"set the group's fields instead ({key}.<field>=...)")
        c.add("VI695", "error" if dataclass else "warning", (key,),
              f"{key}={value!r} replaces verl's config group {key} ({', '.join(fields)}, ...) with a plain value: "
              + ("verl builds its dataclass around it unchecked and fails with AttributeError at the first read of "
                 f"{key}.{fields[0] if fields else '<field>'}, in the workers after the GPUs are booked "
                 "(utils/config.py omega_conf_to_dataclass; e.g. agent_loop.py:526 for rollout.multi_turn)"
                 if dataclass else "verl's readers of its keys get no mapping"),
              hint, fix=fix)
