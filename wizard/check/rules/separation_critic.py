"""A critic under verl 0.9.1's separation-family trainers (VI951; paths under site-packages/verl).

- VI951 (error): a run that builds a critic (critic.enable=True, or algorithm.adv_estimator=gae with critic.enable
  unset: need_critic, trainer/ppo/utils.py:96-107) launched with verl.experimental.one_step_off_policy.main_ppo or
  verl.experimental.fully_async_policy.fully_async_main. Both trainers subclass SeparateRayPPOTrainer
  (experimental/one_step_off_policy/ray_trainer.py:49, experimental/fully_async_policy/fully_async_trainer.py:54) and
  set use_critic = need_critic(config) (one_step_off ray_trainer.py:98, fully_async_trainer.py:92). Their init_workers
  creates the Ray resource pools first and then the worker classes (experimental/separation/ray_trainer.py:112-113,
  fully_async_trainer.py:493-494), and _create_worker_classes calls _create_critic_class (separation/ray_trainer.py:
  136-138), which accepts critic.strategy == "fsdp" only and reads `critic.model.fsdp_config` (:156-161). The critic's
  model is an HFModelConfig (workers/config/model.py:72-103), which has no fsdp_config field (the critic's engine
  settings are critic.engine, workers/config/critic.py:215-219): strategy fsdp raises AttributeError, any other
  strategy (fsdp2, megatron) raises NotImplementedError("Unknown strategy ..."), in both cases after the GPUs are
  booked and before the first step (real cases: verl#7822, one_step_off with GAE; PR#7969, a fsdp2 critic).
  No critic.* setting avoids it in 0.9.1: the fix is a critic-free estimator on these trainers (grpo, rloo, ...), or
  verl.trainer.main_ppo, whose V1 trainers (trainer/ppo/v1/trainer_base.py:264-268, also under
  trainer.v1.trainer_mode=separate_async, trainer_separate_async.py:44-45) build the critic from critic.engine.
"""

from __future__ import annotations

from wizard.check.rules.context import Ctx, Facts

SEPARATION = {  # entry -> (the verl module it runs, its trainer class: file:line)
    "one_step_off": ("verl.experimental.one_step_off_policy.main_ppo",
                     "experimental/one_step_off_policy/ray_trainer.py:49"),
    "fully_async": ("verl.experimental.fully_async_policy.fully_async_main",
                    "experimental/fully_async_policy/fully_async_trainer.py:54"),
}


def rule_separation_critic(c: Ctx, f: Facts) -> None:
    if c.src.entry not in SEPARATION or c.src.recipe or not f.use_critic:
        return
    if c.unknown("critic.enable") or c.unknown("algorithm.adv_estimator"):
        return
    module, trainer = SEPARATION[c.src.entry]
    strategy = c.v("critic.strategy")
    if strategy == "fsdp":
        what = ("it reads critic.model.fsdp_config, which verl's HFModelConfig has not (workers/config/model.py:"
                "72-103): AttributeError")
    else:
        what = f"it accepts critic.strategy=fsdp only: NotImplementedError(\"Unknown strategy {strategy}\")"
    why = ("critic.enable=True" if c.v("critic.enable") is True
           else f"algorithm.adv_estimator={c.v('algorithm.adv_estimator')}")
    c.add("VI951", "error", ("critic.strategy", "algorithm.adv_estimator", "critic.enable"),
          f"{why} builds a critic under {module} ({trainer}, a SeparateRayPPOTrainer): its _create_critic_class "
          f"(experimental/separation/ray_trainer.py:145-161) fails once the GPUs are booked, as {what} "
          "(verl#7822, PR#7969)",
          "run PPO with a critic through verl.trainer.main_ppo, whose V1 trainers build it from critic.engine "
          "(trainer/ppo/v1/trainer_base.py:264-268; trainer.v1.trainer_mode=separate_async keeps rollout and "
          "training apart), or use a critic-free estimator here (algorithm.adv_estimator=grpo, rloo, ...) with "
          "critic.enable unset or False")
