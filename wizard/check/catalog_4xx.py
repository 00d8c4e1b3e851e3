"""The `verl-init check` rules VI410-VI499: ID -> (title, what it checks / where verl checks it).

Part of wizard.check.catalog.RULES (which merges this table), kept apart only to keep each module short. The
VI6xx and VI9xx ranges of the check's rules are full; VI401-VI409 are the planner's role rules
(wizard/check/rule_index.py), so the check's rules continue at VI410.
"""

from __future__ import annotations

RULES_4XX: dict[str, tuple[str, str]] = {
    "VI422": ("LoRA on the critic under the FSDP engine", "critic.model.lora_rank > 0 with critic.strategy "
              "fsdp/fsdp2: verl 0.9.1 wraps the critic's token-classification value model with peft "
              "TaskType.CAUSAL_LM (workers/engine/fsdp/transformer_impl.py:359-368), which needs "
              "prepare_inputs_for_generation: AttributeError when the critic worker builds its model (verl#4620)"),
}
