"""A step-time Workload from verl's dotted config keys (a plan's settings or a checked config): what
wizard.planner.steptime.predict times."""

from __future__ import annotations

from typing import Optional

from wizard.planner.reasoning import thinks_by_default
from wizard.planner.steptime import MAX_NUM_SEQS, TOOL_RESPONSE_CHARS, Workload, moe_layers, shape_fields
from wizard.planner.steptime_lora import lora_fields
from wizard.verlspec import lora as verl_lora

A, R, REF, M = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.ref", "actor_rollout_ref.model"


def _int(v: object, default: int) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else default


def workload_from_config(get, shape, *, n_gpus: int, gpu_type: Optional[str], gpu_memory_gb: Optional[float],
                         response_mean: Optional[float] = None, prompt_mean: Optional[float] = None,
                         kv_tokens: Optional[float] = None, response_mean_basis: str = "given") -> Workload:
    """A Workload from verl's dotted keys: `get(key)` returns the resolved value (None when unset)."""
    megatron = get(f"{A}.strategy") == "megatron" or get("model_engine") == "megatron"
    tp = _int(get(f"{R}.tensor_model_parallel_size"), 1)
    tbs = _int(get("data.train_batch_size"), 1)
    dyn = bool(get(f"{A}.use_dynamic_bsz"))
    lp_dyn = bool(get(f"{R}.log_prob_use_dynamic_bsz")) if get(f"{R}.log_prob_use_dynamic_bsz") is not None else dyn
    if megatron:
        mtp = _int(get(f"{A}.megatron.tensor_model_parallel_size"), 1)
        cp = _int(get(f"{A}.megatron.context_parallel_size"), 1)
        mp, pp = mtp * cp, _int(get(f"{A}.megatron.pipeline_model_parallel_size"), 1)
        ep = _int(get(f"{A}.megatron.expert_model_parallel_size"), 1)
        etp = _int(get(f"{A}.megatron.expert_tensor_parallel_size"), mtp)
        recompute = get(f"{A}.megatron.override_transformer_config.recompute_granularity") == "full"
        off_p, off_o = bool(get(f"{A}.megatron.param_offload")), bool(get(f"{A}.megatron.optimizer_offload"))
        fsdp_size = 0
    else:
        mp, pp, cp, ep, etp = _int(get(f"{A}.ulysses_sequence_parallel_size"), 1), 1, 1, 1, 1
        recompute = get(f"{M}.enable_gradient_checkpointing") is not False
        off_p, off_o = bool(get(f"{A}.fsdp_config.param_offload")), bool(get(f"{A}.fsdp_config.optimizer_offload"))
        fsdp_size = _int(get(f"{A}.fsdp_config.fsdp_size"), 0)
    # one-step-off and fully async (verl/experimental/*/config): the rollout on rollout.nnodes × n_gpus_per_node GPUs
    # of its own (one_step_off_policy/main_ppo.py:121-122, fully_async_main.py:235-236), overlapping training
    own = _int(get("rollout.nnodes"), 0) * _int(get("rollout.n_gpus_per_node"), 0)
    # fully async: the trainer takes require_batches × ppo_mini_batch_size prompts a local step (data.train_batch_size
    # is not used, fully_async.md), one optimizer step per mini-batch, and syncs the weights every
    # trigger_parameter_sync_step local steps; verl logs one step per sync, its timings the sum of the local steps'
    # (v0.9.0 experimental/fully_async_policy/detach_utils.py:255-256 and 293-294, fully_async_trainer.py:790-810):
    # a step here is that cycle, one weight sync
    streamed = get("async_training.require_batches")
    if streamed is not None:
        tbs = fully_async_cycle_prompts(get)
    adv = str(get("algorithm.adv_estimator") or "")
    has_critic = adv == "gae" or bool(get("critic.enable"))
    has_ref = bool(get(f"{A}.use_kl_loss")) or bool(get("algorithm.use_kl_in_reward"))
    gmu = get(f"{R}.gpu_memory_utilization")
    # LoRA: the block the training engine reads, and lora.merge (wizard.verlspec.lora)
    model = {"lora_rank": get(f"{M}.lora_rank"),
             "lora": {"rank": get(f"{M}.lora.rank"), "merge": get(f"{M}.lora.merge")}}
    return Workload(
        **shape_fields(shape, tp), n_gpus=max(n_gpus, 1),
        prompts=_int(get("data.gen_batch_size"), tbs) if streamed is None else tbs, train_prompts=tbs,
        filter_groups=bool(get("algorithm.filter_groups.enable")), n=_int(get(f"{R}.n"), 1),
        max_prompt=_int(get("data.max_prompt_length"), 512), max_response=_int(get("data.max_response_length"), 512),
        response_mean=response_mean, response_mean_basis=response_mean_basis, prompt_mean=prompt_mean,
        thinking=thinks_by_default(get(f"{M}.path")) or "",
        gpu_type=gpu_type, gpu_memory_gb=gpu_memory_gb,
        rollout_tp=tp, rollout_dp=_int(get(f"{R}.data_parallel_size"), 1),
        max_num_seqs=_int(get(f"{R}.max_num_seqs"), MAX_NUM_SEQS), enforce_eager=get(f"{R}.enforce_eager") is True,
        gpus_per_node=_int(get("trainer.n_gpus_per_node"), 8),
        gmu=float(gmu) if isinstance(gmu, (int, float)) and 0 < gmu <= 1 else 0.5, kv_tokens=kv_tokens,
        backend="megatron" if megatron else "fsdp", moe=bool(getattr(shape, "experts", 0)), dynamic_bsz=dyn and lp_dyn,
        train_tokens=_int(get(f"{A}.ppo_max_token_len_per_gpu"), 16384) if dyn else 0,
        logprob_tokens=_int(get(f"{R}.log_prob_max_token_len_per_gpu"), 16384) if lp_dyn else 0,
        train_micro=_int(get(f"{A}.ppo_micro_batch_size_per_gpu"), 1),
        logprob_micro=_int(get(f"{R}.log_prob_micro_batch_size_per_gpu"), 1),
        mini_batches=max(1, tbs // _int(get(f"{A}.ppo_mini_batch_size"), tbs)),
        ppo_epochs=_int(get(f"{A}.ppo_epochs"), 1), recompute=recompute, model_parallel=mp, pipeline=pp,
        virtual_pipeline=_int(get(f"{A}.megatron.virtual_pipeline_model_parallel_size"), 1) if megatron else 1,
        context_parallel=cp, expert_parallel=ep, expert_tp=etp, moe_layers=moe_layers(shape),
        top_k=int(getattr(shape, "active_experts", 0) or 0), experts=int(getattr(shape, "experts", 0) or 0),
        routed_params=float(getattr(shape, "routed_expert_params", 0) or 0),
        weight_tensors=shape.checkpoint_tensors() if hasattr(shape, "checkpoint_tensors") else 0,
        offload_params=off_p, offload_optimizer=off_o, fsdp_size=fsdp_size, has_ref=has_ref, has_critic=has_critic,
        multi_turn=bool(get(f"{R}.multi_turn.enable")),
        assistant_turns=_int(get(f"{R}.multi_turn.max_assistant_turns") or get(f"{R}.multi_turn.max_user_turns"), 0),
        tool_response_chars=_int(get(f"{R}.multi_turn.max_tool_response_length"), TOOL_RESPONSE_CHARS),
        prefix_caching=get(f"{R}.enable_prefix_caching") is not False,
        remove_padding=get(f"{M}.use_remove_padding") is not False,
        old_logprob=get("algorithm.rollout_correction.bypass_mode") is not True,
        rollout_logprobs=get(f"{R}.calculate_log_probs") is True,
        loss_agg_mode=str(get(f"{A}.loss_agg_mode") or "token-mean"),
        rollout_gpus=own, overlap=own > 0, rollout_per_node=_int(get("rollout.n_gpus_per_node"), 0) if own else 0,
        streaming=streamed is not None and get("async_training.partial_rollout") is not False,
        **lora_fields(shape, verl_lora.engine_rank(model, megatron=megatron), megatron, merge=verl_lora.merged(model)))


def fully_async_cycle_prompts(get) -> int:
    """Prompts of one fully async step as verl logs it: require_batches × ppo_mini_batch_size per local step, times
    trigger_parameter_sync_step local steps per weight sync (verl's defaults 1 and 4, fully_async_ppo_trainer.yaml)."""
    return (_int(get("async_training.require_batches"), 1) * _int(get(f"{A}.ppo_mini_batch_size"), 1)
            * _int(get("async_training.trigger_parameter_sync_step"), 4))
