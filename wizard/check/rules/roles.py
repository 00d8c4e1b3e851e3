"""Role rules: critic, reference and reward model against the algorithm (VI840-VI848, VI782).

VI782 (verl 0.9.1, paths under site-packages/verl): trainer.critic_warmup holds the actor back whether or not a
critic exists. verl builds a critic only when need_critic says so (trainer/ppo/utils.py:96-107: critic.enable, else
adv_estimator == gae), but every trainer guards the actor update with the warmup alone: V1
`if self.config.trainer.critic_warmup <= self.global_steps: self._update_actor(...)` (trainer/ppo/v1/trainer_base.py:
608-610), legacy `if critic_warmup > global_steps: update_weights only, else _update_actor` (trainer/ppo/ray_trainer.py:
1683-1690), separation (experimental/separation/ray_trainer.py:646, 657: no actor update and no weight sync).
global_steps is 1 at the first step (trainer_base.py:454, ray_trainer.py:1451), so steps 1 .. critic_warmup-1 train
nothing. VI841 reports the critic.* keys without a critic ("no effect"); trainer.critic_warmup does have an effect.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import REF, A, M, R, Ctx, Facts
from wizard.verlspec.keys import GROUP_ESTIMATORS, MISSING, REWARD_MODEL_ROLLOUTS, VERL_DEFAULT_CRITIC_PATH


def rule_roles(c: Ctx, f: Facts) -> None:
    adv = f.adv
    if c.unknown("algorithm.adv_estimator"):
        return
    if adv == "gae" and not f.use_critic:
        c.add("VI840", "error", ("algorithm.adv_estimator", "critic.enable"),
              "adv_estimator=gae needs a critic but critic.enable=false: every config check passes and step 1 fails with "
              "KeyError: 'values' (ray_trainer.py:222)", "set critic.enable=true (and critic.model.path), or choose grpo",
              fix=None)
    if f.use_critic and adv != "gae":
        c.add("VI841", "warning", ("critic.enable", "algorithm.adv_estimator"),
              f"critic.enable=true with adv_estimator={adv}: the critic is built and trained every step but {adv} never "
              "uses its values", "set critic.enable=false (or null), or use adv_estimator=gae")
    elif not f.use_critic:
        _warmup_without_critic(c, adv)
        stray = sorted(k for k in c.res.user if k.startswith("critic.") and k != "critic.enable")
        if stray:
            c.add("VI841", "warning", stray[:6], f"{len(stray)} critic setting(s) have no effect: {adv} trains no critic",
                  "remove them, or use adv_estimator=gae for PPO with a critic")
    kl_loss, kl_reward = bool(c.v(f"{A}.use_kl_loss")), bool(c.v("algorithm.use_kl_in_reward"))
    if kl_loss and kl_reward:
        c.add("VI842", "warning", (f"{A}.use_kl_loss", "algorithm.use_kl_in_reward"),
              "KL to the reference is both a loss term and a reward penalty: it is counted twice",
              "keep one: use_kl_loss for GRPO-style training, use_kl_in_reward for PPO-style")
    for on, coef_key, what in ((kl_loss, f"{A}.kl_loss_coef", f"{A}.use_kl_loss"),
                               (kl_reward, "algorithm.kl_ctrl.kl_coef", "algorithm.use_kl_in_reward")):
        coef = c.num(coef_key)
        if not on and c.set_by_user(coef_key) and coef:
            c.add("VI843", "warning", (coef_key, what), f"{coef_key}={coef:g} has no effect: {what}=false",
                  f"set {what}=true to use it, or remove {coef_key}")
        elif on and coef == 0:
            c.add("VI843", "info", (coef_key, what), f"{what}=true with {coef_key}=0: the reference model runs every step "
                  "for a KL term of weight 0 (only its metric is logged)", f"set {coef_key} > 0, or {what}=false to skip the reference")
    if not f.use_ref:
        stray = sorted(k for k in c.res.user if k.startswith(f"{REF}."))
        if stray:
            c.add("VI844", "info", stray[:6], f"{len(stray)} reference-model setting(s) have no effect: neither "
                  "use_kl_loss nor use_kl_in_reward is on, so verl builds no reference model", "remove them")
    rm_path = c.v("reward.reward_model.model_path")
    # a reward model with a custom reward function is a generative judge (reward_loop.py:147-156 posts to /classify only
    # without one): an LLM, not a classifier, so sharing the critic's base checkpoint is no mistake
    judge = bool(c.v("reward.custom_reward_function.path"))
    if (f.use_critic and bool(c.v("reward.reward_model.enable")) and not judge and rm_path
            and rm_path == c.v("critic.model.path")):
        c.add("VI845", "warning", ("critic.model.path", "reward.reward_model.model_path"),
              "critic and reward model load the same checkpoint: the critic needs a value head, the reward model a classifier",
              "initialise the critic from the policy (actor_rollout_ref.model.path)")
    if f.use_critic and not c.set_by_user("critic.model.path") and c.v("critic.model.path") == VERL_DEFAULT_CRITIC_PATH:
        policy = c.v(f"{M}.path")
        if policy != VERL_DEFAULT_CRITIC_PATH and not c.unknown(f"{M}.path"):
            # GAE only because algorithm.adv_estimator was left at verl's default, with a group of samples per prompt
            # (the group-relative estimators' setting): perhaps GRPO was meant (real case PRIME-RL/PRIME#11)
            unset = not c.set_by_user("algorithm.adv_estimator") and c.v("algorithm.adv_estimator") == "gae"
            group = f.n is not None and f.n > 1
            c.add("VI846", "error", ("critic.model.path", f"{M}.path"),
                  f"the critic loads verl's default {VERL_DEFAULT_CRITIC_PATH}, not the policy: critic.model.path is not "
                  "taken from actor_rollout_ref.model.path"
                  + (f"; the critic is there because algorithm.adv_estimator is unset (verl's default, gae), while "
                     f"rollout.n={f.n} samples a group per prompt, as the group-relative estimators do"
                     if unset and group else ""),
                  f"set critic.model.path={policy}" + (", or algorithm.adv_estimator=grpo if GRPO was meant (no critic)"
                                                       if unset and group else ""),
                  fix=Fix(set={"critic.model.path": policy}))
    if f.n == 1:
        _one_sample(c, adv)
    if f.use_critic and c.src.entry in ("ppo", "fully_async", "one_step_off"):
        _critic_budget(c, f)
    rm = "reward.reward_model"
    if bool(c.v(f"{rm}.enable")):
        if not c.v(f"{rm}.model_path"):
            c.add("VI848", "error", (f"{rm}.model_path",), "the reward model is enabled without a model path (HFModelConfig)",
                  f"set {rm}.model_path")
        rname = c.v(f"{rm}.rollout.name")
        if rname == MISSING or rname is None:
            c.add("VI848", "error", (f"{rm}.rollout.name",), "the reward model has no rollout engine (`???`)",
                  f"set {rm}.rollout.name=vllm or sglang")
        elif rname not in REWARD_MODEL_ROLLOUTS:
            c.add("VI848", "error", (f"{rm}.rollout.name",), f"reward models are served by vllm or sglang, not {rname}",
                  f"set {rm}.rollout.name=vllm")
        rtp = (c.int(f"{rm}.rollout.tensor_model_parallel_size") or 1) * (c.int(f"{rm}.rollout.data_parallel_size") or 1)
        pool = ((c.int(f"{rm}.n_gpus_per_node") or 0) * (c.int(f"{rm}.nnodes") or 0)
                if bool(c.v(f"{rm}.enable_resource_pool")) else f.n_gpus)
        if pool is not None and pool // max(rtp, 1) < 1:
            c.add("VI848", "error", (f"{rm}.rollout.tensor_model_parallel_size", f"{rm}.n_gpus_per_node", f"{rm}.nnodes"),
                  f"the reward model's pool has {pool} GPU(s) but a replica needs {rtp}", "give the pool more GPUs or lower its TP")
    if bool(c.v("algorithm.filter_groups.enable")):
        if not c.v("algorithm.filter_groups.metric"):
            c.add("VI848", "error", ("algorithm.filter_groups.metric",),
                  "group filtering is enabled without a metric (trainer_base.py:195)", "set algorithm.filter_groups.metric=acc or score")
        if bool(c.v(f"{rm}.enable")) and not bool(c.v(f"{rm}.enable_resource_pool")):
            c.add("VI848", "error", ("algorithm.filter_groups.enable", f"{rm}.enable_resource_pool"),
                  "group filtering needs rewards at sampling time, which a colocated reward model computes only later "
                  "(trainer_base.py:199)", f"set {rm}.enable_resource_pool=true, or use a rule-based reward")


def _warmup_without_critic(c: Ctx, adv: object) -> None:
    """VI782: trainer.critic_warmup ≥ 2 in a run without a critic skips the actor update of steps 1..warmup-1."""
    key = "trainer.critic_warmup"
    warmup = c.int(key)
    if c.unknown(key, "critic.enable") or warmup is None or warmup < 2:
        return
    total = c.int("trainer.total_training_steps")
    never = total is not None and 0 < total < warmup
    lost = f"all {total} steps" if never else "step 1" if warmup == 2 else f"steps 1-{warmup - 1}"
    c.add("VI782", "error" if never else "warning", (key, "algorithm.adv_estimator", "critic.enable"),
          f"{key}={warmup} with adv_estimator={adv} and no critic (need_critic, trainer/ppo/utils.py:96-107): verl "
          f"still skips the actor update while critic_warmup > global_steps (trainer/ppo/v1/trainer_base.py:608; legacy "
          f"ray_trainer.py:1684; separation ray_trainer.py:646), so {lost} generate and score rollouts and train "
          + ("nothing: the actor never trains" if never else "nothing"),
          f"set {key}=0: the warmup is for a critic, and this run has none",
          fix=Fix(set={key: 0}))


def estimator_outcomes() -> dict[str, dict[str, str]]:
    """What verl's own compute_advantage gives each registered estimator with 1 and 4 samples per prompt
    (scripts/verl_estimators.py → data/verl_estimators.json): zero, raw, relative, needs, or raises: <message>."""
    import json
    from importlib import resources

    text = resources.files("wizard.check").joinpath("data/verl_estimators.json").read_text(encoding="utf-8")
    return json.loads(text)["estimators"]


def _one_sample(c: Ctx, adv: object) -> None:
    """VI847: rollout.n=1 with an estimator that compares a prompt's samples; its outcome is verl's own, computed."""
    distill = bool(c.v("distillation.enabled")) and not bool(c.v("distillation.distillation_loss.use_task_rewards"))
    got = estimator_outcomes().get(str(adv), {}).get("1", "")
    if distill or not (adv in GROUP_ESTIMATORS or got == "zero" or got.startswith("raises")):
        return
    keys, hint = (f"{R}.n", "algorithm.adv_estimator"), \
        f"set {R}.n ≥ 2 (5-16 is usual), or choose reinforce_plus_plus / remax for one sample per prompt"
    computed = "verl's own compute_advantage on a batch of one sample per prompt (scripts/verl_estimators.py)"
    if got == "zero":
        c.add("VI847", "error", keys, f"{adv} with rollout.n=1 gives every sample an advantage of 0 ({computed}): "
              "the policy never learns", hint)
    elif got.startswith("raises"):
        c.add("VI847", "error", keys, f"{adv} with rollout.n=1: verl stops in the first step's advantage "
              f"({got[len('raises: '):]})", hint)
    else:
        c.add("VI847", "warning", keys, f"{adv} compares the samples of each prompt's group but rollout.n=1: there "
              "is no group" + (f"; each sample's advantage is then its own raw score ({computed}), plain REINFORCE "
                               "without a baseline" if got == "raw" else ""), hint)


def _critic_budget(c: Ctx, f: Facts) -> None:
    """VI828: the critic's batching keys verl 0.9.1's trainer does not read. It builds the critic's engine with
    max_token_len_per_gpu = infer_max_token_len_per_gpu = critic.ppo_infer_max_token_len_per_gpu (trainer_base.py:
    267-268) and leaves the engine's use_dynamic_bsz at its default, true (workers/config/engine.py:100): the critic's
    micro-batch, use_dynamic_bsz and ppo_max_token_len_per_gpu never reach it, and an unset budget is 32768 tokens."""
    from wizard.check.rules.memory import CRITIC_ENGINE_TOKENS

    if c.set_by_user("critic.ppo_infer_max_token_len_per_gpu"):
        return
    unread = [k for k in ("critic.ppo_micro_batch_size_per_gpu", "critic.use_dynamic_bsz", "critic.ppo_max_token_len_per_gpu",
                          "critic.forward_micro_batch_size_per_gpu", "critic.forward_max_token_len_per_gpu")
              if c.set_by_user(k)]
    if not unread:
        return
    micro, budget = c.int("critic.ppo_micro_batch_size_per_gpu"), c.int("critic.ppo_max_token_len_per_gpu")
    meant = budget if c.set_by_user("critic.ppo_max_token_len_per_gpu") and budget else \
        (micro * f.seq if micro and f.seq else None)
    c.add("VI828", "warning", ("critic.ppo_infer_max_token_len_per_gpu",),  # VI890 names the unread keys themselves
          f"{', '.join(unread)} {'is' if len(unread) == 1 else 'are'} not read by verl 0.9.1's trainer: it runs the "
          "critic with dynamic batching on critic.ppo_infer_max_token_len_per_gpu alone, unset here, so "
          f"{CRITIC_ENGINE_TOKENS} tokens per micro-batch in both critic passes (trainer_base.py:267-268, "
          "EngineConfig.use_dynamic_bsz=true); the memory estimate counts that",
          f"set +critic.ppo_infer_max_token_len_per_gpu={meant}" if meant else
          "set +critic.ppo_infer_max_token_len_per_gpu to the tokens one critic micro-batch may hold")

