"""`algorithm.*` rules of verl 0.9.1's PPO trainers: what the KL controller, the rollout correction and the
advantage estimator need from the rest of the config (paths under site-packages/verl).

- VI978 (error / warning): the adaptive KL controller's horizon counts samples, not steps. With
  algorithm.use_kl_in_reward and kl_ctrl.type=adaptive the trainers build an AdaptiveKLController
  (trainer/ppo/v1/trainer_base.py:126-127, ray_trainer.py:365) and apply_kl_penalty updates it once per batch with
  n_steps = the batch's rows, prompts × rollout.n (ray_trainer.py:96, 112; V1 calls it at trainer_base.py:1755).
  The update is `value *= 1 + clip(kl/target - 1, -0.2, 0.2) * n_steps / horizon` (trainer/ppo/core_algos.py:164-174),
  and get_kl_controller asserts only horizon > 0 (core_algos.py:193-211). So one update moves the coefficient by up
  to ±0.2 × rows / horizon. Where that reaches 1 (horizon ≤ 0.2 × rows) the first step, whose KL is ~0 because the
  actor starts as the reference, leaves the coefficient zero or negative: the reward then pays for drifting from
  the reference (error). Where the horizon is below one batch of samples the coefficient swings by more than the
  controller's own ±0.2 clip each step (warning). V1 splits a step into trainer.v1.<mode>.parameter_sync_step
  updates of train_batch_size / parameter_sync_step prompts each (trainer_base.py:533-552).
- VI979 (error): algorithm.rollout_correction asks for importance weights (rollout_is), rejection (rollout_rs) or
  bypass_mode while actor_rollout_ref.rollout.calculate_log_probs=False. The rollout returns log-probs only with it
  (experimental/agent_loop/agent_loop.py:595, 1072-1073; trainer/ppo/v1/agent_loop_tq.py:69) and the V1 trainer
  fetches them only with it (trainer_base.py:1662-1663). Every trainer applies the decoupled correction only
  `if "rollout_log_probs" in batch` (trainer_base.py:1765-1771, ray_trainer.py:1651-1658,
  experimental/separation/ray_trainer.py:603-612), with no message otherwise: no IS weights, no rejection, no
  rollout_corr/ metrics. Bypass mode takes rollout_log_probs as old_log_probs and raises at the first step
  (trainer/ppo/rollout_corr_helper.py:1131-1135; V1 reads the field at trainer_base.py:1640-1647).
- VI980 (error): algorithm.adv_estimator=remax on a trainer that never generates ReMax's greedy baseline.
  compute_remax_outcome_advantage requires reward_baselines (core_algos.py:734-741), and compute_advantage passes
  it only `if "reward_baselines" in data.batch` (ray_trainer.py:248-259, which V1 delegates to at
  v1/utils.py:167-176). Only the legacy trainer's fit (ray_trainer.py:1493-1535, main_ppo with trainer.use_v1=False,
  main_ppo.py:183-192) and the separation trainer's _fit_generate (experimental/separation/ray_trainer.py:418-460)
  put it in the batch. The V1 trainer (trainer.use_v1=true, the default, ppo_trainer.yaml:232) never does
  (V1's _compute_advantage selects no such field, trainer_base.py:1743-1787), nor do one_step_off's and fully_async's
  own _fit_generate (one_step_off_policy/ray_trainer.py:385, fully_async_trainer.py:643): the first advantage
  computation raises TypeError: missing 'reward_baselines' (verl#3089 for the legacy loop, since fixed there).
- VI774 (info): an adaptive KL controller on a run that resumes. The trainers build it with value = kl_coef
  (core_algos.py:160-163, get_kl_controller) when they start, and neither their _save_checkpoint nor their
  _load_checkpoint names it (trainer/ppo/v1/trainer_base.py:850-1000, ray_trainer.py:983-1110): each restart goes
  back to kl_coef, whatever the coefficient had become (verl#2653).
- VI775 (info): a policy loss summed over tokens (loss_agg_mode token-sum or seq-mean-token-sum). verl's agg_loss
  sums each response's token losses there without dividing by a length (core_algos.py:1176-1193), so the loss and its
  gradient grow with the response length, up to max_response_length times token-mean's (verl's default), at the
  same lr and grad_clip. Dr.GRPO's aggregation, seq-mean-token-sum-norm, sums the same way but divides by a
  constant (the response horizon or loss_scale_factor, :1189-1193), which keeps it at token-mean's scale (verl#957).
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import R, Ctx, Facts

KL = "algorithm.kl_ctrl"
RC = "algorithm.rollout_correction"
PROPORTIONAL_CLIP = 0.2  # core_algos.py:172: np.clip(current_kl / target - 1, -0.2, 0.2)


def _updates_per_step(c: Ctx) -> int:
    """How many kl_ctrl updates one training step makes: V1 samples parameter_sync_step mini-batches a step and
    computes the advantage (and the KL penalty) for each (trainer_base.py:533-552); the legacy trainer one."""
    if c.v("trainer.use_v1") is False:
        return 1
    mode = c.v("trainer.v1.trainer_mode")
    sync = c.int(f"trainer.v1.{mode}.parameter_sync_step") if isinstance(mode, str) else None
    return sync if sync and sync > 0 else 1


def kl_update_swing(rows: int, horizon: float) -> float:
    """The most one AdaptiveKLController.update moves the coefficient, as a fraction of it: clip × n_steps / horizon
    (core_algos.py:172-174)."""
    return PROPORTIONAL_CLIP * rows / horizon


def rule_kl_horizon(c: Ctx, f: Facts) -> None:
    if c.src.entry != "ppo" or c.src.recipe:
        return
    if c.v("algorithm.use_kl_in_reward") is not True or c.v(f"{KL}.type") != "adaptive":
        return
    if c.unknown(f"{KL}.horizon", f"{KL}.kl_coef", "data.train_batch_size", f"{R}.n"):
        return
    horizon, coef = c.num(f"{KL}.horizon"), c.num(f"{KL}.kl_coef")
    if horizon is None or horizon <= 0 or coef is None or not f.tbs or not f.n:  # horizon ≤ 0: verl asserts
        return
    updates = _updates_per_step(c)
    rows = f.tbs // updates * f.n
    swing = kl_update_swing(rows, horizon)
    keys = (f"{KL}.horizon", f"{KL}.type", "data.train_batch_size", f"{R}.n")
    per_update = f"the batch's {rows} samples ({f.tbs}{f' / {updates}' if updates > 1 else ''} prompts × n={f.n})"
    hint = (f"the horizon counts samples, not steps: set {KL}.horizon ≥ {rows} (one batch), K × {rows} for a horizon "
            f"of K steps (verl's default is 10000), or {KL}.type=fixed")
    if swing >= 1:
        after = coef * (1 - swing)
        c.add("VI978", "error", keys,
              f"{KL}.horizon={horizon:g} with the adaptive KL controller: verl updates it with n_steps = {per_update} "
              f"(trainer/ppo/ray_trainer.py:96,112), and each update multiplies the coefficient by 1 ± 0.2 × "
              f"{rows}/{horizon:g} = 1 ± {swing:.3g} (core_algos.py:172-174). The first step's KL is ~0 (the actor "
              f"starts as the reference), so the coefficient becomes {coef:g} × {1 - swing:.3g} = {after:.3g}: "
              "a KL penalty of zero or below, which rewards drifting from the reference", hint)
    elif rows > horizon:
        c.add("VI978", "warning", keys,
              f"{KL}.horizon={horizon:g} is below one batch of samples: verl updates the adaptive KL controller with "
              f"n_steps = {per_update} (trainer/ppo/ray_trainer.py:96,112), so each update moves the coefficient by "
              f"up to ±{swing:.0%} (±0.2 × {rows}/{horizon:g}, core_algos.py:172-174), more than the controller's own "
              "±20% clip of the KL error", hint)


def rule_rollout_correction_logprobs(c: Ctx, f: Facts) -> None:
    if c.src.entry not in ("ppo", "one_step_off") or c.src.recipe:
        return
    if c.unknown(f"{R}.calculate_log_probs") or c.v(f"{R}.calculate_log_probs") is not False:
        return
    if c.unknown(f"{RC}.rollout_is", f"{RC}.rollout_rs", f"{RC}.bypass_mode"):
        return
    asked = [f"{key}={c.v(key)}" for key in (f"{RC}.rollout_is", f"{RC}.rollout_rs") if c.v(key) is not None]
    bypass = c.v(f"{RC}.bypass_mode") is True
    if not asked and not bypass:
        return
    keys = (f"{R}.calculate_log_probs", *(a.split("=", 1)[0] for a in asked),
            *((f"{RC}.bypass_mode",) if bypass else ()))
    what = ("bypass mode uses the rollout's log-probs as old_log_probs and raises at the first step "
            "(trainer/ppo/rollout_corr_helper.py:1131-1135)" if bypass else
            "the trainer applies the correction only when rollout_log_probs are in the batch "
            "(trainer/ppo/v1/trainer_base.py:1765-1771, ray_trainer.py:1651-1658) and skips it without a message: "
            "no importance weights, no rejection, no rollout_corr/ metrics")
    c.add("VI979", "error", keys,
          f"{', '.join(asked + (['bypass_mode=True'] if bypass else []))} with {R}.calculate_log_probs=False: the "
          "rollout returns no log-probs (experimental/agent_loop/agent_loop.py:595, 1072-1073; "
          f"trainer_base.py:1662-1663), and {what}",
          f"set {R}.calculate_log_probs=True (verl's default; docs/algo/rollout_corr.md requires it), or remove the "
          "rollout correction",
          fix=Fix(set={f"{R}.calculate_log_probs": True}))


def rule_remax_baseline(c: Ctx, f: Facts) -> None:
    if c.v("algorithm.adv_estimator") != "remax" or c.src.recipe:
        return
    if c.src.entry == "ppo":
        if c.unknown("trainer.use_v1") or c.v("trainer.use_v1") is False:
            return
        c.add("VI980", "error", ("algorithm.adv_estimator", "trainer.use_v1"),
              "algorithm.adv_estimator=remax on verl 0.9.1's V1 trainer (trainer.use_v1=true, the default): V1 never "
              "generates ReMax's greedy baseline (no reward_baselines in trainer/ppo/v1/, its _compute_advantage at "
              "trainer_base.py:1743-1787), and compute_remax_outcome_advantage requires it (core_algos.py:734-741): "
              "the first step raises TypeError: missing 'reward_baselines'",
              "set trainer.use_v1=False (the legacy trainer generates the baseline, ray_trainer.py:1493-1535; verl "
              "marks it deprecated), or choose an estimator without a greedy baseline (rloo, grpo, "
              "reinforce_plus_plus)")
    elif c.src.entry in ("one_step_off", "fully_async"):
        where = ("experimental/one_step_off_policy/ray_trainer.py:385" if c.src.entry == "one_step_off"
                 else "experimental/fully_async_policy/fully_async_trainer.py:643")
        c.add("VI980", "error", ("algorithm.adv_estimator",),
              f"algorithm.adv_estimator=remax under the {c.src.entry} trainer: its own _fit_generate ({where}) never "
              "generates ReMax's greedy baseline, and compute_remax_outcome_advantage requires reward_baselines "
              "(core_algos.py:734-741): the first step raises TypeError",
              "run ReMax with verl.trainer.main_ppo and trainer.use_v1=False (ray_trainer.py:1493-1535), or choose an "
              "estimator without a greedy baseline (rloo, grpo, reinforce_plus_plus)")


def rule_kl_resume(c: Ctx, f: Facts) -> None:
    if c.src.entry != "ppo" or c.src.recipe or c.v("algorithm.use_kl_in_reward") is not True or \
            c.v(f"{KL}.type") != "adaptive":
        return
    mode, freq = c.v("trainer.resume_mode"), c.int("trainer.save_freq")
    if mode not in ("auto", "resume_path") or not freq or freq <= 0:
        return  # nothing is saved, or nothing is resumed
    c.add("VI774", "info", (f"{KL}.type", "trainer.resume_mode"),
          f"{KL}.type=adaptive with resume_mode={mode}: verl saves and loads the model, optimizer and dataloader but "
          "not the KL controller (trainer/ppo/v1/trainer_base.py:850-1000), so each restart sets the coefficient back "
          f"to {KL}.kl_coef={c.v(f'{KL}.kl_coef')} (verl#2653)",
          f"after a restart, pass the coefficient the run had reached as {KL}.kl_coef (it is logged as "
          "actor/reward_kl_penalty_coeff), or use kl_ctrl.type=fixed")


SUMMED = ("token-sum", "seq-mean-token-sum")


def rule_summed_loss(c: Ctx, f: Facts) -> None:
    key = "actor_rollout_ref.actor.loss_agg_mode"
    mode = c.v(key)
    if mode not in SUMMED or c.src.recipe:
        return
    length = c.int("data.max_response_length")
    c.add("VI775", "info", (key,),
          f"{key}={mode} sums each response's token losses without dividing by a length (core_algos.py:1176-1193): "
          f"the loss and its gradient grow with the response length, up to {length or 'max_response_length'}× "
          "token-mean's at the same lr and grad_clip",
          "for Dr.GRPO's length-unbiased loss use seq-mean-token-sum-norm (with algorithm.norm_adv_by_std_in_grpo="
          "False); keep token-sum only with an lr scaled for it")
