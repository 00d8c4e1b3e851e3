"""The `verl-init check` rules VI410-VI499: ID -> (title, what it checks / where verl checks it).

Part of wizard.check.catalog.RULES (which merges this table), kept apart only to keep each module short. The
VI6xx and VI9xx ranges of the check's rules are full; VI401-VI409 are the planner's role rules
(wizard/check/rule_index.py), so the check's rules continue at VI410.
"""

from __future__ import annotations

RULES_4XX: dict[str, tuple[str, str]] = {
    "VI418": ("training subset drawn without a seed", "data.train_max_samples with data.shuffle=True and data.seed "
              "null: verl 0.9.1 draws the training subset with an unseeded np.random.default_rng() "
              "(utils/dataset/rl_dataset.py:156-157, 185-192) at every launch and rebuilds it before loading a "
              "checkpoint (trainer/ppo/v1/trainer_base.py:228, :392, :893-896), so a resumed run continues the saved "
              "dataloader position over other rows, silently (verl#7816)"),
}
