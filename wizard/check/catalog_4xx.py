"""The `verl-init check` rules VI410-VI499: ID -> (title, what it checks / where verl checks it).

Part of wizard.check.catalog.RULES (which merges this table), kept apart only to keep each module short. The
VI6xx and VI9xx ranges of the check's rules are full; VI401-VI409 are the planner's role rules
(wizard/check/rule_index.py), so the check's rules continue at VI410.
"""

from __future__ import annotations

RULES_4XX: dict[str, tuple[str, str]] = {
    "VI438": ("update epochs below 1: the role never trains", "actor_rollout_ref.actor.ppo_epochs (or critic.ppo_epochs "
              "when a critic trains) < 1: verl passes it as the update's epochs (ray_trainer.py:1364/1391, "
              "v1/trainer_base.py:1811/1853) and make_iterator loops range(epochs) (utils/tensordict_utils.py:608), "
              "so no mini-batch trains, silently; set it ≥ 1"),
    "VI439": ("run budget below 1: the trainer never enters its loop", "trainer.total_epochs < 1 (PPO V1 and legacy, "
              "SFT) or trainer.total_training_steps < 1 (PPO V1): fit's loop (v1/trainer_base.py:467, "
              "ray_trainer.py:1465, sft_trainer.py:356) is never entered, so the job exits 0 with no training step"),
}
