"""The `verl-init check` rules VI410-VI499: ID -> (title, what it checks / where verl checks it).

Part of wizard.check.catalog.RULES (which merges this table), kept apart only to keep each module short. The
VI6xx and VI9xx ranges of the check's rules are full; VI401-VI409 are the planner's role rules
(wizard/check/rule_index.py), so the check's rules continue at VI410.
"""

from __future__ import annotations

RULES_4XX: dict[str, tuple[str, str]] = {
    "VI426": ("norm_adv_by_std_in_grpo=False that the estimator never reads",
              "algorithm.norm_adv_by_std_in_grpo=False (Dr.GRPO) with an estimator verl 0.9.1 never passes it to and "
              "that still divides by a standard deviation (grpo_vectorized, gdpo, reinforce_plus_plus, "
              "reinforce_plus_plus_baseline: ray_trainer.py:235-279, core_algos.py:334-357); verl's own "
              "compute_advantage gives the same advantages for True and False (warning; fix: adv_estimator=grpo)"),
    "VI427": ("rejection sampling whose rejected responses still set the group baseline",
              "algorithm.rollout_correction.rollout_rs outside bypass mode with an estimator whose group baseline "
              "counts every row: rejection only zeroes response_mask (rollout_corr_helper.py:412) before "
              "compute_advantage (v1/trainer_base.py:1764-1775), so a rejected response still shifts its siblings' "
              "advantages (warning; fix: bypass_mode=True or an estimator that excludes masked rows)"),
}
