"""The `verl-init check` rules VI410-VI499: ID -> (title, what it checks / where verl checks it).

Part of wizard.check.catalog.RULES (which merges this table), kept apart only to keep each module short. The
VI6xx and VI9xx ranges of the check's rules are full; VI401-VI409 are the planner's role rules
(wizard/check/rule_index.py), so the check's rules continue at VI410.
"""

from __future__ import annotations

RULES_4XX: dict[str, tuple[str, str]] = {
    "VI410": ("fully async optimizer built before the run's length, on Megatron or VeOmni", "fully_async_main with "
              "a Megatron (or MindSpeed) or VeOmni actor/critic and no optim.total_training_steps (Megatron: nor "
              "optim.lr_decay_steps): the trainer's workers build the optimizer in init_workers "
              "(fully_async_main.py:78, :155) before set_total_train_steps (:90-92), so Megatron-core's "
              "OptimizerParamScheduler gets lr_decay_steps=-1 and asserts lr_decay_steps > 0 "
              "(utils/megatron/optimizer.py:239-257; verl#6987), and VeOmni lays its schedule over -1 steps "
              "(workers/engine/veomni/transformer_impl.py:286-297; verl#6683)"),
}
