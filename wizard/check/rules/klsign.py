"""A KL coefficient below zero, which verl 0.9.1 applies as given (paths under site-packages/verl).

- VI942 (warning): actor.kl_loss_coef < 0 with actor.use_kl_loss, or algorithm.kl_ctrl.kl_coef < 0 with
  algorithm.use_kl_in_reward. Neither the actor's config (workers/config/actor.py:175, its __post_init__ :195-262
  checks batch sizes and loss_agg_mode only) nor the KL controller (trainer/ppo/core_algos.py:193-211
  get_kl_controller asserts only the adaptive horizon; FixedKLController :177-181 keeps the value) looks at the sign.
  The actor adds `kl_loss * config.kl_loss_coef` to the loss it minimises (workers/utils/losses.py:132-140), so a
  negative coefficient rewards moving away from the reference model; the reward penalty is
  `token_level_scores - beta * kld` (trainer/ppo/ray_trainer.py:100-106, apply_kl_penalty, which V1 calls at
  trainer/ppo/v1/trainer_base.py:1755-1757), so a negative beta pays the policy for every token it drifts. actor/kl_loss
  and actor/reward_kl_penalty are logged as usual and grow: the DeepScaleR 8k run trained with kl_loss_coef=-0.001
  (rllm#111). A warning, not an error: the run works, and a deliberate divergence bonus is conceivable.
  A coefficient set while its KL term is off is VI843's.
"""

from __future__ import annotations

from wizard.check.rules.context import A, Ctx, Facts


def rule_negative_kl_coef(c: Ctx, f: Facts) -> None:
    """VI942: a KL term that is on, with a negative coefficient."""
    if c.src.recipe:
        return  # a recipe's own loss may read the coefficient otherwise
    terms = (
        (f"{A}.use_kl_loss", f"{A}.kl_loss_coef",
         "the actor minimises policy_loss + kl_loss × kl_loss_coef (workers/utils/losses.py:132-140), so it is pushed "
         "away from the reference model"),
        ("algorithm.use_kl_in_reward", "algorithm.kl_ctrl.kl_coef",
         "the reward becomes token_level_scores - kl_coef × KL (trainer/ppo/ray_trainer.py:100-106, apply_kl_penalty), "
         "so every token that drifts from the reference is paid for"),
    )
    for flag, key, effect in terms:
        if c.unknown(flag, key) or c.v(flag) is not True:
            continue
        coef = c.num(key)
        if coef is None or coef >= 0:
            continue
        c.add("VI942", "warning", (key, flag),
              f"{key}={coef:g} with {flag}=True: verl applies the coefficient with its sign (no check in "
              f"workers/config/actor.py or trainer/ppo/core_algos.py:193-211), and {effect}; the KL metrics grow "
              "instead of staying bounded (rllm#111: DeepScaleR's 8k run had kl_loss_coef=-0.001)",
              f"set {key}={-coef:g} (a KL penalty is a positive coefficient), or turn {flag} off")
