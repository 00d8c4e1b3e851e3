"""Rule stages of the algorithm's roles: samples per prompt and KL (VI401, VI402), the reward and the critic
(VI501-VI507, VI404, VI405) and LoRA (VI406-VI409).
"""

from __future__ import annotations

import os

from wizard.intent.answers import Answers
from wizard.intent.errors import Findings
from wizard.planner import sandbox
from wizard.planner.memory import megatron_lora_params
from wizard.planner.state import Build, nearest_hint, refuse, resolve_path
from wizard.verlspec.algorithms import VLLM_LORA_RANKS
from wizard.verlspec.lora import FULL_FT_ACTOR_LR


def samples_and_kl(b: Build) -> None:
    a, f, algo = b.a, b.f, b.algo
    b.n = a.samples_per_prompt if a.samples_per_prompt is not None else algo.default_n
    b.n_src = "answer" if a.samples_per_prompt is not None else "default"
    if algo.group and b.n < 2:
        # verl 0.9.1 accepts it and runs: a group of one gets mean 0 and std 1 (core_algos.py:313-315 grpo,
        # :619-627 rloo), and DAPO's filter never drops it (replay_buffer.py:312 needs more than one value).
        f.warning("VI401", ("samples_per_prompt", "algorithm"),
                  f"{a.algorithm} with samples_per_prompt={b.n}: verl gives a group of one sample mean 0 and std 1 "
                  "(core_algos.py:313-315), so its advantage is the raw reward with no group baseline"
                  + (" and DAPO's filter never drops it" if algo.filter_groups else ""),
                  f"use samples_per_prompt={algo.default_n} (the default for {a.algorithm}; any value ≥ 2 compares "
                  "responses within a group)")
    if algo.kl == "none":
        if a.kl_coef:
            f.error("VI402", ("kl_coef", "algorithm"),
                    f"{a.algorithm} uses no KL penalty but kl_coef={a.kl_coef}",
                    "remove kl_coef (or set 0), or choose grpo / ppo / rloo to train with a KL term")
        b.kl_coef = 0.0
    else:
        b.kl_coef = a.kl_coef if a.kl_coef is not None else 0.001
    b.use_ref = b.kl_coef > 0
    b.kl_in_loss = b.use_ref and algo.kl == "loss"
    b.kl_in_reward = b.use_ref and algo.kl == "reward"


def reward(b: Build) -> None:
    a, f, algo = b.a, b.f, b.algo
    if a.reward == "model" and not a.reward_model:
        f.error("VI501", ("reward", "reward_model"), "reward=model needs reward_model",
                "set reward_model=<hub id or path of a sequence-classification model>, or use reward=rule")
    # VI502 (retired): reward=function without reward_function now uses the bundle's reward/reward_fn.py.
    if a.reward_model and a.reward not in ("model", "genrm"):
        f.error("VI503", ("reward_model", "reward"), f"reward_model is set but reward={a.reward}",
                "set reward=model (a classifier) or reward=genrm (a judge LLM), or remove reward_model")
    if a.reward == "function" and a.reward_function:
        _reward_file_rules(a, resolve_path(a.reward_function.rpartition(":")[0], b.base), f)
    if a.reward_function and a.reward != "function":
        f.error("VI504", ("reward_function", "reward"), f"reward_function is set but reward={a.reward}",
                "set reward=function, or remove reward_function")
    if algo.filter_groups and algo.overlong_buffer and a.reward == "function" and a.reward_function:
        from wizard.planner.verl_keys import filter_metric

        if filter_metric(b)[0] == "reward":  # check's VI649 (wizard/check/rules/dapo_filter.py has verl's side)
            f.warning("VI508", ("algorithm", "reward_function"),
                      f"algorithm=dapo filters groups on the reward, into which verl's DAPO manager adds the overlong "
                      f"penalty (reward_manager/dapo.py:108-119), and what {a.reward_function} returns cannot be read "
                      "here: groups of all-wrong answers of different lengths are kept and trained on length alone",
                      "after bundling, set algorithm.filter_groups.metric=acc if the function returns a number or a "
                      "dict with acc, or =score for a dict without acc")
    if algo.filter_groups and a.reward == "model":
        f.error("VI505", ("algorithm", "reward"),
                "algorithm=dapo filters groups by reward at sampling time, which reward=model (a colocated reward model) "
                "cannot provide (verl asserts it: trainer_base.py:199)",
                "use reward=rule or reward=function with dapo, or choose grpo")
    b.critic_model = a.critic_model or a.model
    if a.critic_model and not algo.critic:
        f.error("VI404", ("critic_model", "algorithm"),
                f"algorithm={a.algorithm} trains no critic but critic_model={a.critic_model!r} is set",
                "remove critic_model, or choose algorithm=ppo")
    sandbox.rules(b)
    if algo.critic and a.reward == "model" and a.reward_model and a.reward_model == b.critic_model:
        f.warning("VI405", ("critic_model", "reward_model"),
                  "critic and reward model are the same checkpoint; the critic needs a value head, the reward model a classifier",
                  "set critic_model to the policy (default) or another checkpoint")


def lora(b: Build) -> None:
    """LoRA: FSDP through peft (model.lora_rank, ...), Megatron through Megatron-Bridge's PEFT (model.lora.*;
    wizard.verlspec.lora has both blocks and the verl lines that read them)."""
    a, f = b.a, b.f
    b.lora_alpha = a.lora_alpha if a.lora_alpha is not None else 2 * a.lora_rank
    if a.lora_rank and b.megatron and b.shape is not None and b.shape.vision:
        # verl 0.9.1 has lora.type=vlm_lora and freeze_vision_* keys (trainer/config/model/hf_model.yaml:102-161) but
        # no recipe or test of them; lora.type=lora would put adapters on the vision tower's linear layers too
        # (Megatron-Bridge matches target_modules by name), which vLLM does not serve as LoRA.
        f.error("VI406", ("lora_rank", "train_backend", "model"),
                f"lora_rank={a.lora_rank} with train_backend=megatron on the vision-language model {a.model}: verl 0.9.1 "
                "ships no Megatron LoRA recipe for vision-language models (lora.type=vlm_lora is untested there), so "
                "verl-init does not plan it",
                "use train_backend=fsdp or fsdp2 with LoRA on a vision-language model, or lora_rank=0 with megatron")
    if a.lora_rank:
        b.facts["lora"] = {
            "rank": a.lora_rank, "alpha": b.lora_alpha,
            "engine": "Megatron-Bridge PEFT (model.lora.*)" if b.megatron else "peft (model.lora_rank, lora_alpha)",
            "params": (megatron_lora_params(b.shape, a.lora_rank) if b.megatron else b.shape.lora_params(a.lora_rank))
            if b.shape is not None else None,
        }
    if a.lora_rank and a.learning_rate is not None and a.learning_rate <= FULL_FT_ACTOR_LR:
        # check's VI929 (wizard/check/rules/lora_scale.py has verl's side): a zero-started adapter at the full
        # fine-tuning rate barely moves
        f.warning("VI403", ("learning_rate", "lora_rank"),
                  f"learning_rate={a.learning_rate:g} with lora_rank={a.lora_rank} is verl's full fine-tuning rate "
                  "(actor.yaml:151); verl's LoRA guide raises it by an order of magnitude (docs/advance/ppo_lora.rst)",
                  "leave learning_rate unset (3e-5 for LoRA) or set about 10x, e.g. learning_rate=1e-5")
    if a.lora_rank and a.rollout_engine == "vllm":
        if a.lora_rank > VLLM_LORA_RANKS[-1]:
            refuse(b, "VI407", ("lora_rank", "rollout_engine"), f"vLLM serves LoRA ranks up to 512 (lora_rank={a.lora_rank})",
                   nearest_hint("lora_rank", list(VLLM_LORA_RANKS), a.lora_rank,
                                f"lora_rank must be one of {', '.join(map(str, VLLM_LORA_RANKS))}"))
        elif a.lora_rank not in VLLM_LORA_RANKS:
            up = min(r for r in VLLM_LORA_RANKS if r >= a.lora_rank)
            f.warning("VI408", ("lora_rank",), f"vLLM reserves adapters of rank {up} for lora_rank={a.lora_rank}",
                      f"use one of {', '.join(map(str, VLLM_LORA_RANKS))} to waste no memory")
    if a.lora_alpha is not None and not a.lora_rank:
        f.error("VI409", ("lora_alpha", "lora_rank"), "lora_alpha is set but lora_rank=0 (full fine-tune)",
                "set lora_rank (e.g. 32), or remove lora_alpha")


def _reward_file_rules(a: Answers, path: str, f: Findings) -> None:
    """The reward function's file, where verl will import it from."""
    if path.startswith("${"):
        return  # ~/...: expanded on the machine that runs verl
    here = os.path.isfile(path)
    if a.cluster == "local" and not here:
        f.error("VI506", ("reward_function",), f"reward_function={a.reward_function}: file not found: {path}",
                "check the path, or remove reward_function to use the bundle's reward/reward_fn.py")
    elif a.cluster in ("ray", "kuberay"):
        carrier = "the job's working_dir upload (the bundle)" if a.cluster == "ray" else "the pods (image + ConfigMap)"
        f.warning("VI507", ("reward_function", "cluster"),
                  f"reward function {path} is a file on this machine; {carrier} does not carry it",
                  "put it at the same path on every node (image or shared storage), or remove reward_function "
                  "to use the bundle's reward/reward_fn.py, which travels with the bundle")
    elif not here:
        f.warning("VI506", ("reward_function",), f"reward_function={a.reward_function}: file not found here: {path}",
                  "it must exist at this path on the cluster's nodes")
