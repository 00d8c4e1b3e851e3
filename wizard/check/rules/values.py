"""Value rules: unresolved values (VI800), required values (VI807), verl's choices (VI809) and values
verl passes on unchecked (VI850-VI857).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from wizard.check.report import Fix
from wizard.check.rules.context import REF, A, M, R, Ctx, Facts, join_or, nearest
from wizard.check.shellargs import PLACEHOLDER
from wizard.verlspec.keys import (
    ADV_ESTIMATORS,
    AGENT_LOOPS,
    CRITIC_STRATEGIES,
    FSDP_SCHEDULERS,
    KL_CTRL_TYPES,
    KL_TYPES,
    LOGGERS,
    LOSS_AGG_MODES,
    LOSS_MODES,
    MISSING,
    RESUME_MODES,
    REWARD_MANAGER_SOURCES,
    REWARD_MANAGERS,
    ROLLOUT_IS_LEVELS,
    ROLLOUT_NAMES,
    STRATEGIES,
    TRAINER_MODES,
)


def rule_unresolved(c: Ctx, f: Facts) -> None:
    by_name: dict[str, list[str]] = {}
    for key, value in c.res.flat.items():
        if isinstance(value, str) and PLACEHOLDER in value and key in c.res.user:
            for m in re.finditer(r"UNSET_[A-Za-z0-9_]+", value):
                by_name.setdefault(m.group(0), []).append(key)
    for name, keys in sorted(by_name.items()):
        why = c.src.placeholders.get(name, "placeholder value")
        var = name[len(PLACEHOLDER):]
        c.add("VI800", "info", sorted(set(keys)), f"{name}: {why}; rules that read these keys were skipped",
              f"pass --env {var}=VALUE (or set it in the script) to check them" if var.isidentifier() and var not in ("CMD", "SCRIPT", "ARITH", "SPECIAL") else
              "give the value after -- to check it")
    for p in c.src.problems:
        c.add(p.rule, p.severity, p.keys, p.message, p.hint)


def rule_required(c: Ctx, f: Facts) -> None:
    if c.v(f"{R}.name") == MISSING:
        c.add("VI807", "error", (f"{R}.name",), "rollout.name has no default (`???`): verl stops with MissingMandatoryValue",
              f"set {R}.name=vllm (or sglang, trtllm)")
    if c.v(f"{M}.path") == MISSING:
        c.add("VI807", "error", (f"{M}.path",), "the policy model path is missing", f"set {M}.path")
    required = (
        (not f.dynamic, f"{A}.ppo_micro_batch_size", (f"{A}.ppo_micro_batch_size_per_gpu", f"{A}.use_dynamic_bsz"),
         "without dynamic batching verl needs the actor's micro-batch size per GPU (ActorConfig assert)",
         f"set {A}.ppo_micro_batch_size_per_gpu (it must divide the per-GPU mini-batch), or {A}.use_dynamic_bsz=true"),
        (not bool(c.v(f"{R}.log_prob_use_dynamic_bsz")), f"{R}.log_prob_micro_batch_size",
         (f"{R}.log_prob_micro_batch_size_per_gpu",),
         "without dynamic batching verl needs the rollout log-prob micro-batch size per GPU (validate_config)",
         f"set {R}.log_prob_micro_batch_size_per_gpu (often 1-2 × the training micro-batch)"),
        (f.use_ref and not bool(c.v(f"{REF}.log_prob_use_dynamic_bsz")), f"{REF}.log_prob_micro_batch_size",
         (f"{REF}.log_prob_micro_batch_size_per_gpu",),
         "a KL term needs the reference model, and without dynamic batching its log-prob micro-batch size (validate_config)",
         f"set {REF}.log_prob_micro_batch_size_per_gpu (e.g. equal to the rollout's)"),
        (f.use_critic and not bool(c.v("critic.use_dynamic_bsz")), "critic.ppo_micro_batch_size",
         ("critic.ppo_micro_batch_size_per_gpu",),
         "the critic needs a micro-batch size per GPU without dynamic batching (CriticConfig)",
         "set critic.ppo_micro_batch_size_per_gpu (e.g. equal to the actor's)"),
    )
    for needed, old, keys, message, hint in required:
        if needed and c.v(keys[0]) is None and c.v(old) is None:
            c.add("VI807", "error", keys, message, hint)


def _enum(c: Ctx, key: str, allowed: Sequence[str], what: str, *, when: bool = True, plus_suffix: bool = False,
          also: str = "") -> None:
    if not when or c.unknown(key):
        return
    value = c.v(key)
    if value is None:
        return
    text = str(value)
    check = text[:-1] if plus_suffix and text.endswith("+") else text
    if check in allowed:
        return
    code = c.src.recipe_code  # a recipe that registers the name or handles the value itself
    where = code.accepts(key, check) if code is not None else None
    registered = code.registered.get("rollout", {}) if code is not None and key == f"{R}.name" else {}
    if check in registered:  # registered, not only compared: its module must be imported
        _unloaded_rollout(c, key, text, registered[check])
    if where is None:
        close = difflib.get_close_matches(check, list(allowed), n=1)
        article = "an" if what[0] in "aeiou" else "a"
        c.add("VI809", "error", (key,), f"{key}={text} is not {article} {what} verl 0.9.1 knows",
              (f"did you mean {close[0]}? " if close else "") + f"choose from {', '.join(allowed)}" + also)


# VERL_USE_EXTERNAL_MODULES=a,b in a launch script (exported, or given to the command)
_EXTERNAL = re.compile(r"VERL_USE_EXTERNAL_MODULES=[\"']?([A-Za-z0-9_.,]+)")
MAX_SCRIPT_SCAN = 1 << 20


def _unloaded_rollout(c: Ctx, key: str, value: str, where: str) -> None:
    """VI809 warning: a rollout the recipe registers (RolloutReplicaRegistry / _ROLLOUT_REGISTRY, at a module's top
    level) in a module nothing imports at this launch. verl imports the modules VERL_USE_EXTERNAL_MODULES names when
    it is imported (verl 0.9.1 verl/__init__.py:49-52); otherwise only the recipe's launch, its packages and its
    imports run (recipe/dynamo/register.py is none of them: its scripts export the variable)."""
    from wizard._io import UnsafeInput, read_user_file

    module = where.rsplit(":", 1)[0].removesuffix(".py").replace("/", ".")
    if module in c.src.recipe_loads:
        return
    texts = [f"VERL_USE_EXTERNAL_MODULES={c.env.get('VERL_USE_EXTERNAL_MODULES', '')}"]  # check --env
    script = getattr(c.src.extraction, "script", None) if c.src.extraction is not None else None
    if script:
        try:
            texts.append(read_user_file(script, MAX_SCRIPT_SCAN).decode("utf-8", errors="replace"))
        except (UnsafeInput, OSError):
            pass
    if module in {m for text in texts for found in _EXTERNAL.findall(text) for m in found.split(",")}:
        return
    c.add("VI809", "warning", (key,), f"{key}={value} is registered by {where}, a module this launch never imports: "
          "verl imports it only where VERL_USE_EXTERNAL_MODULES names it (verl/__init__.py:49), and neither the "
          "script nor the recipe's main does (`Unknown rollout mode` when the rollout starts)",
          f"export VERL_USE_EXTERNAL_MODULES={module} before the launch")


def _agent_loop(c: Ctx) -> None:
    """VI809 for rollout.agent.default_agent_loop: verl's own loops plus every name the agent_loop_config_path file
    registers (experimental/agent_loop/agent_loop.py:533-539, read by wizard.check.rules.agent.registered_agent_loops).
    A file that cannot be read here leaves the name unverified (info), never unknown."""
    from wizard.check.rules.agent import registered_agent_loops

    key = f"{R}.agent.default_agent_loop"
    value = c.v(key)
    if c.unknown(key) or value is None or str(value) in AGENT_LOOPS:
        return
    names, why = registered_agent_loops(c)
    if str(value) in names:
        return
    if why is not None:
        c.add("VI809", "info", (key, f"{R}.agent.agent_loop_config_path"),
              f"{key}={value} is not one of verl's own agent loops and cannot be verified: {why}",
              f"make sure the file verl reads registers `name: {value}` (agent_loop.py:533-539)")
        return
    path = c.v(f"{R}.agent.agent_loop_config_path")
    _enum(c, key, (*AGENT_LOOPS, *names), "agent loop",
          also=f" (verl's own and those {path} registers)" if path else
          f", or register yours in a YAML list of {{name, _target_}} named by {R}.agent.agent_loop_config_path")


def rule_choices(c: Ctx, f: Facts) -> None:
    _enum(c, "algorithm.adv_estimator", ADV_ESTIMATORS, "advantage estimator")
    _enum(c, f"{A}.policy_loss.loss_mode", LOSS_MODES, "policy loss")
    _enum(c, f"{A}.loss_agg_mode", LOSS_AGG_MODES, "loss aggregation")
    _enum(c, "critic.loss_agg_mode", LOSS_AGG_MODES, "loss aggregation", when=f.use_critic)
    _enum(c, f"{A}.kl_loss_type", KL_TYPES, "KL estimator", when=bool(c.v(f"{A}.use_kl_loss")), plus_suffix=True)
    _enum(c, "algorithm.kl_penalty", KL_TYPES, "KL estimator", when=bool(c.v("algorithm.use_kl_in_reward")), plus_suffix=True)
    _enum(c, "algorithm.kl_ctrl.type", KL_CTRL_TYPES, "KL controller", when=bool(c.v("algorithm.use_kl_in_reward")))
    if c.v(f"{R}.name") != MISSING:
        _enum(c, f"{R}.name", ROLLOUT_NAMES, "rollout engine")
    _enum(c, "reward.reward_manager.source", REWARD_MANAGER_SOURCES, "reward manager source")
    _enum(c, "reward.reward_manager.name", REWARD_MANAGERS, "reward manager",
          when=c.v("reward.reward_manager.source") == "register")
    _enum(c, "trainer.v1.trainer_mode", TRAINER_MODES, "trainer mode", when=c.v("trainer.use_v1") is not False)
    _enum(c, "trainer.resume_mode", RESUME_MODES, "resume mode")
    _enum(c, f"{A}.strategy", STRATEGIES, "training strategy")
    _enum(c, "critic.strategy", CRITIC_STRATEGIES, "critic strategy", when=f.use_critic,
          also=" (verl 0.9.1 registers a value-model engine for these alone, and the critic worker asserts its backend"
               " when it starts, workers/engine/base.py:399-401: model_engine=torchtitan/automodel has no critic,"
               " verl PR#5356; use an estimator without a critic such as grpo, or another model_engine)")
    _agent_loop(c)
    if c.v(f"{A}.strategy") in ("fsdp", "fsdp2", "fsdp_turbo"):
        _enum(c, f"{A}.optim.lr_scheduler_type", FSDP_SCHEDULERS, "learning-rate schedule for FSDP (bare assert in FSDPOptimizerConfig)")
    if c.v("reward.reward_manager.source") == "importlib" and not c.v("reward.reward_manager.module.path"):
        c.add("VI807", "error", ("reward.reward_manager.module.path",),
              "reward.reward_manager.source=importlib needs the module path", "set reward.reward_manager.module.path")
    logger = c.v("trainer.logger")
    if not c.unknown("trainer.logger") and logger is not None:
        if not isinstance(logger, (str, list)):
            c.add("VI809", "error", ("trainer.logger",), f"trainer.logger={logger!r} is not a logger name or a list of them",
                  "e.g. trainer.logger=[console] or [console,wandb]")
            logger = []
        backends = [logger] if isinstance(logger, str) else list(logger)
        for b in backends:
            if str(b) not in LOGGERS:
                close = difflib.get_close_matches(str(b), LOGGERS, n=1)
                c.add("VI809", "error", ("trainer.logger",), f"logger {b!r} is not supported by verl's Tracking "
                      "(`... is not supported` when training starts)",
                      (f"did you mean {close[0]}? " if close else "") + f"choose from {', '.join(LOGGERS[:-1])}")
    rs = c.v("algorithm.rollout_correction.rollout_is")
    if rs is not None and not c.unknown("algorithm.rollout_correction.rollout_is") and rs not in ROLLOUT_IS_LEVELS:
        c.add("VI809", "error", ("algorithm.rollout_correction.rollout_is",), f"rollout_is={rs} is not token, sequence or null",
              "use token or sequence, or null to turn it off")


def _greedy_generation(c: Ctx, n: int | None) -> None:
    """verl.trainer.main_generation_server: temperature 0 is greedy generation, valid with rollout.n=1; with n > 1 it
    asserts "When temperature=0, n_samples must be 1." (trainer/main_generation_server.py:131-132)."""
    t = c.num(f"{R}.temperature")
    if getattr(c.src, "entry", "ppo") != "generation" or t is None or t != 0 or n is None or n <= 1:
        return
    c.add("VI852", "error", (f"{R}.temperature", f"{R}.n"),
          f"{R}.temperature=0 with {R}.n={n} in verl.trainer.main_generation_server: it asserts 'When temperature=0, "
          "n_samples must be 1.' (main_generation_server.py:131-132); greedy samples would all be the same",
          f"set {R}.n=1 for greedy generation, or {R}.temperature > 0 to draw {n} different samples")


def rule_values(c: Ctx, f: Facts) -> None:
    for key, used in ((f"{R}.gpu_memory_utilization", True),
                      ("reward.reward_model.rollout.gpu_memory_utilization", bool(c.v("reward.reward_model.enable")))):
        g = c.num(key)
        if used and g is not None and not 0 < g <= 1:
            c.add("VI850", "error", (key,), f"{key}={g:g} is a share of GPU memory and must be in (0, 1]; verl passes it to "
                  "the engine unchecked", "0.5-0.7 without offload, 0.8-0.9 with offload" +
                  (f" (did you mean {g / 100:g}?)" if 1 < g <= 100 else ""))
    n = c.int(f"{R}.n")
    if n is not None and n < 1:
        c.add("VI851", "error", (f"{R}.n",), f"rollout.n={n}: no samples per prompt (validate_config lets it pass)",
              "set rollout.n ≥ 1 (≥ 2 for group estimators)")
    _greedy_generation(c, n)
    for temp_key, sample_key, where in ((f"{R}.temperature", f"{R}.do_sample", "rollout"),
                                       (f"{R}.val_kwargs.temperature", f"{R}.val_kwargs.do_sample", "validation")):
        if getattr(c.src, "entry", "ppo") == "generation":
            break  # main_generation_server reads neither do_sample nor val_kwargs: _greedy_generation
        t = c.num(temp_key)
        if t is not None and t <= 0 and bool(c.v(sample_key)):
            # verl samples with rollout.temperature in training and val_kwargs.temperature in validation
            # (experimental/agent_loop/agent_loop.py:591, :607); validate_config checks only rollout.temperature
            # when val_kwargs.do_sample (utils/config.py:200-203): the validation case passes silently
            c.add("VI852", "error" if where == "rollout" else "warning", (temp_key, sample_key),
                  f"{where} samples with temperature={t:g}: every sample of a prompt is the same greedy answer" +
                  (" (GRPO-style groups then have no spread to learn from)" if where == "rollout" else
                   f" (verl's validation samples with {temp_key}, agent_loop.py:607, which validate_config does not "
                   "check)"),
                  f"set {temp_key} > 0 (1.0 is usual; the actor divides the logits by it)" if where == "rollout" else
                  f"set {temp_key} > 0 to sample, or keep it at 0 and set {sample_key}=false for greedy validation "
                  "(verl's agent loop reads only the temperature, VI989)")
    if c.v(f"{R}.mode") == "sync":
        c.add("VI853", "error", (f"{R}.mode",), "rollout mode 'sync' has been removed in verl 0.9 (RolloutConfig raises)",
              f"set {R}.mode=async or remove it", fix=Fix(set={f"{R}.mode": "async"}))
    loss = c.v(f"{A}.policy_loss.loss_mode")
    cc = c.num(f"{A}.clip_ratio_c")
    if loss == "vanilla" and cc is not None and cc <= 1:
        c.add("VI854", "error", (f"{A}.clip_ratio_c",), f"clip_ratio_c={cc:g}: dual-clip PPO needs a lower bound > 1 "
              "(core_algos.py asserts in the first update)", "use 3.0 (verl's default)")
    if loss == "dro":
        beta = c.num(f"{A}.policy_loss.dro_beta")
        if beta is None or beta <= 0:
            c.add("VI854", "error", (f"{A}.policy_loss.dro_beta",), "loss_mode=dro needs policy_loss.dro_beta > 0 (core_algos.py)",
                  f"set {A}.policy_loss.dro_beta, e.g. 0.1")
    rank = f.lora_vllm  # verl's own reading: model.lora.rank, else model.lora_rank; none with lora.merge
    if rank and c.v(f"{R}.name") == "vllm":
        from wizard.verlspec.algorithms import VLLM_LORA_RANKS

        key = f"{M}.lora.rank" if c.int(f"{M}.lora.rank") else f"{M}.lora_rank"
        if rank > VLLM_LORA_RANKS[-1]:
            c.add("VI856", "error", (key,), f"vLLM serves LoRA ranks up to 512 (got {rank}; validate_config raises)",
                  f"nearest valid: {join_or(nearest(VLLM_LORA_RANKS, rank))}")
        elif rank not in VLLM_LORA_RANKS:
            up = min(r for r in VLLM_LORA_RANKS if r >= rank)
            c.add("VI856", "warning", (key,), f"vLLM reserves adapters of rank {up} for lora_rank={rank}",
                  f"use one of {', '.join(map(str, VLLM_LORA_RANKS))} to waste no memory")
    if c.v("data.val_batch_size") is not None and c.set_by_user("data.val_batch_size"):
        c.add("VI857", "info", ("data.val_batch_size",), "data.val_batch_size: verl 0.9.1 prints that it is deprecated "
              "(utils/config.py:194) but still reads it: validation runs in batches of this many prompts, every batch "
              "kept (ray_trainer.py:414-422, trainer/ppo/v1/trainer_base.py:754); unset, the whole set is one batch",
              "remove it to send the whole validation set at once (the inference engines schedule it), or keep it to "
              "bound each validation batch", fix=Fix(delete=["data.val_batch_size"]))
    if c.v("trainer.device") == "cpu":
        c.add("VI857", "info", ("trainer.device",), "trainer.device=cpu is rewritten to cuda by verl's auto_set_device "
              "when no accelerator is found; verl 0.9.1 cannot train on CPU", "run on GPUs")


def rule_inert_clip(c: Ctx, f: Facts) -> None:
    """VI868: PPO's clip settings on a run that takes one optimizer step per batch. verl recomputes old_log_prob with
    the actor's current weights (algorithm.rollout_correction.bypass_mode off, its default), and one mini-batch in
    one epoch updates from exactly those weights: the ratio is 1 and no clip bound binds (core_algos.py:1319-1329)."""
    keys = [f"{A}.{k}" for k in ("clip_ratio", "clip_ratio_low", "clip_ratio_high", "clip_ratio_c")]
    from wizard.check.rules.losses import mode_reads

    reads = mode_reads(c.v(f"{A}.policy_loss.loss_mode", "vanilla"))  # a key the loss mode never reads is VI776's
    given = [k for k in keys if c.set_by_user(k) and (reads is None or k.rsplit(".", 1)[1] in reads)]
    epochs, tbs, mini = c.int(f"{A}.ppo_epochs"), f.tbs, f.mini
    if not given or c.v("algorithm.rollout_correction.bypass_mode") is not False or c.unknown(f"{A}.ppo_epochs"):
        return
    if epochs == 1 and tbs and mini and mini >= tbs:
        c.add("VI868", "info", (*given, f"{A}.ppo_mini_batch_size"),
              f"{', '.join(k.rsplit('.', 1)[1] for k in given)} set, but each batch of {tbs} prompts is one "
              f"mini-batch (ppo_mini_batch_size={mini}) in one epoch: verl updates from the weights it just computed "
              "old_log_prob with, so the ratio is 1 and no clip bound binds (core_algos.py:1319-1329)",
              f"lower {A}.ppo_mini_batch_size to take several steps per batch (DAPO: 512 prompts, mini-batches of "
              "32), or drop the clip settings")



GSPO_BOUNDS = (3e-4, 4e-4)  # verl's GSPO examples (examples/gspo_trainer/README.md "Key Flags"), the GSPO paper's
# Bounds at or above this are called token-level: a quarter of verl's default clip_ratio 0.2 (workers/config/actor.py:158).
# Not verl's number but ours; tests/test_gspo_clip.py shows verl's GSPO loss clips nothing at it, on a drift verl's
# token-level loss clips at 0.2 / 0.28 (per-token log-ratio spread 0.15, 512-token responses).
TOKEN_SCALE = 0.05


def rule_gspo_clip(c: Ctx, f: Facts) -> None:
    """VI915: GSPO with token-level clip bounds. compute_policy_loss_gspo clips the sequence ratio, the geometric
    mean of the response's token ratios (exp of the mean token log-ratio, trainer/ppo/core_algos.py:1580-1596), with
    clip_ratio_low/high (else clip_ratio, :1575-1576). Averaging L token log-ratios shrinks their spread about √L
    times, so bounds sized for one token's ratio (verl's default 0.2, workers/config/actor.py:158) bind on almost no
    sequence: the update is unclipped (tests/test_gspo_clip.py measures it with verl's own function). verl's GSPO
    examples use 3e-4 / 4e-4. On a run whose single update is on-policy the ratio is 1 anyway (VI868)."""
    if c.v(f"{A}.policy_loss.loss_mode") != "gspo" or c.unknown(f"{A}.clip_ratio", f"{A}.ppo_epochs"):
        return
    epochs, tbs, mini = c.int(f"{A}.ppo_epochs"), f.tbs, f.mini
    if epochs == 1 and tbs and mini and mini >= tbs and c.v("algorithm.rollout_correction.bypass_mode") is False:
        return
    base = c.v(f"{A}.clip_ratio")
    low, high = (c.v(f"{A}.clip_ratio_{s}") for s in ("low", "high"))
    low, high = (base if low is None else low), (base if high is None else high)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (low, high)) or min(low, high) < TOKEN_SCALE:
        return
    keys = [f"{A}.clip_ratio_low", f"{A}.clip_ratio_high"]
    c.add("VI915", "warning", (f"{A}.policy_loss.loss_mode", *keys),
          f"policy_loss.loss_mode=gspo with clip bounds {low:g} / {high:g}: GSPO clips the sequence ratio, the geometric "
          "mean of the response's token ratios (trainer/ppo/core_algos.py:1580-1596), whose spread is about 1/√length of "
          "a token's, so bounds sized for token-level PPO almost never bind and the off-policy updates go unclipped",
          f"set {keys[0]}={GSPO_BOUNDS[0]:g} {keys[1]}={GSPO_BOUNDS[1]:g} (verl's GSPO examples, "
          "examples/gspo_trainer/README.md)",
          fix=Fix(set={keys[0]: GSPO_BOUNDS[0], keys[1]: GSPO_BOUNDS[1]}))
