"""Memory rules: the peak per GPU (wizard.planner.memory) against the GPU (VI860-VI862)."""

from __future__ import annotations

import re
from typing import Any

from wizard.check.rules.context import REF, A, M, R, Ctx, Facts, model_shape

NO_SYNC = "use_no_sync_for_gradient_accumulation"  # the FSDP engine key of VI956 (rules/gradsync.py)


# CriticConfig.ppo_infer_max_token_len_per_gpu's default (workers/config/critic.py:89; no YAML carries it): the
# critic's token budget when the config does not set it (tests/test_critic_budget.py reads verl's dataclass)
CRITIC_ENGINE_TOKENS = 32768
_MOE_NAME = re.compile(r"(?<![a-z0-9])a\d+(\.\d+)?b(?![a-z0-9])|moe|\d+x\d+(\.\d+)?b|gpt-oss|mixtral|deepseek-v[2-4]",
                       re.IGNORECASE)


def _moe(c: Ctx, shape: Any) -> bool:
    """A mixture-of-experts model: experts in its shape, an "-A3B"/"MoE"/"8x7B" name, or expert parallel set."""
    path = c.res.flat.get(f"{M}.path")
    eps = (c.int(f"{A}.megatron.expert_model_parallel_size"), c.int(f"{R}.expert_parallel_size"))
    return bool(getattr(shape, "experts", 0)) or (isinstance(path, str) and bool(_MOE_NAME.search(path))) \
        or any(e is not None and e > 1 for e in eps)


def rule_memory(c: Ctx, f: Facts, shape: Any, why: str) -> None:
    from wizard.planner.memory import estimate

    # a MoE is estimated with its experts sharded over EP × ETP (wizard.planner.memory) when its exact shape is known
    # (a catalogue MoE or a local config.json); a dense shape scaled from a MoE's name ("30B-A3B") is far off
    if _moe(c, shape) and not (getattr(shape, "experts", 0) and shape.source in ("catalogue", "local")):
        c.add("VI861", "info", (f"{M}.path",), "memory fit not checked: MoE memory not modelled without the model's "
              "exact shape (its experts, from a local config.json or verl-init's catalogue)",
              "point actor_rollout_ref.model.path at a local model folder, or size the GPUs from verl's own example")
        return
    from wizard.verlspec.hardware import accelerator_of_gpu_type

    gpu_type = getattr(c.hw, "gpu_type", None)
    if str(c.v("trainer.device") or "").lower() == "npu" or (gpu_type and accelerator_of_gpu_type(gpu_type) == "ascend"):
        # the estimate's terms and its calibration are NVIDIA runs (torch's CUDA caching allocator, vLLM's CUDA pool)
        c.add("VI861", "info", ("trainer.device",), "memory fit not checked on Ascend NPUs: verl-init's memory model is "
              "calibrated on NVIDIA runs only", "size the NPUs from verl's own Ascend example for the model")
        return
    hw = c.hw
    if hw.gpu_memory_gb is None:
        c.add("VI861", "info", (), "memory fit not checked: the GPU memory size is unknown",
              "pass --gpu-memory-gb (or --gpu-type, e.g. H100)")
        return
    if shape is None:
        c.add("VI861", "info", (f"{M}.path",), f"memory fit not checked: {why}",
              "use a local model folder (its config.json is read) or a catalogue model")
        return
    engine = c.res.engine
    if f.megatron != (engine == "megatron"):  # e.g. actor.strategy=megatron under model_engine=dp: no megatron tree
        c.add("VI861", "info", ("model_engine",), "memory fit not checked: the GPU layout is unresolved (the actor's "
              f"strategy and model_engine={engine} disagree)", "set model_engine=megatron for a Megatron actor")
        return
    if engine not in ("dp", "megatron") or f.n_gpus is None or f.seq is None or f.dp is None:
        c.add("VI861", "info", (), "memory fit not checked: " + (f"model_engine={engine} is not modelled" if engine not in ("dp", "megatron")
                                                                  else "the GPU layout or sequence length is unresolved"), "")
        return
    keys = (f"{R}.tensor_model_parallel_size", f"{R}.gpu_memory_utilization")
    if c.unknown(*keys):
        return
    tp = c.int(keys[0]) or 1
    gmu = c.num(keys[1]) or 0.0
    if not 0 < gmu <= 1:
        return
    layout, off_p = _layout(c, f, shape, hw, tp, gmu)
    if layout is None:
        return
    c.memory_layout = layout  # type: ignore[attr-defined]  # the step-time rules (rules/time.py) re-estimate variants
    _report(c, estimate(shape, layout), shape, hw, keys, tp, gmu, off_p, layout.reward)


def _layout(c: Ctx, f: Facts, shape: Any, hw: Any, tp: int, gmu: float) -> tuple[Any, bool]:
    """The memory Layout verl would run with these keys, and whether the actor's parameters are offloaded."""
    from wizard.planner import fusedhead, memory
    from wizard.planner.memory import MEAN_FILL, Layout

    seq = f.seq
    # token counts per micro-batch: the budget under dynamic batching (verl packs up to it; × SP, split back over
    # the SP group by the estimate), else micro-batch × max length (the estimate applies its mean fill)
    # a fixed micro-batch holds at most the samples a GPU has: a mini-batch's share for the update, the step's for a
    # log-prob pass (a larger one is VI824's error; the estimate counts what could run)
    step_share = -(-f.tbs * f.n // f.dp) if f.tbs and f.n and f.dp else None
    mini_share = -(-f.mini * f.n // f.dp) if f.mini and f.n and f.dp else step_share

    def at_most(micro: int, share: int | None) -> int:
        return min(micro, share) if share else micro

    if f.dynamic:
        train_tokens = (c.int(f"{A}.ppo_max_token_len_per_gpu") or seq) * (1 if f.megatron else f.sp)
    else:
        train_tokens = at_most(c.int(f"{A}.ppo_micro_batch_size_per_gpu") or 1, mini_share) * seq
    lp_dynamic = bool(c.v(f"{R}.log_prob_use_dynamic_bsz"))
    if lp_dynamic:
        lp_tokens = (c.int(f"{R}.log_prob_max_token_len_per_gpu") or seq) * (1 if f.megatron else f.sp)
    else:
        lp_tokens = at_most(c.int(f"{R}.log_prob_micro_batch_size_per_gpu") or 1, step_share) * seq
    # the critic: verl 0.9.1's trainer runs it with dynamic batching on one budget, its micro-batch unread
    # (trainer_base.py:267-268; EngineConfig.use_dynamic_bsz defaults to true), at most the tokens a GPU gets a step
    critic_tokens = 0
    if f.use_critic and c.src.entry in ("ppo", "fully_async", "one_step_off"):
        budget = (c.int("critic.ppo_infer_max_token_len_per_gpu") or CRITIC_ENGINE_TOKENS) * f.token_sp[2]
        critic_tokens = at_most(budget, step_share * seq if step_share else None)
    # the update's micro-batches per mini-batch on one DP rank: how many Megatron's 1F1B schedule can keep in flight
    # (memory.Layout.pp_micro_batches); a token budget packs the rank's mean-filled sequences (MEAN_FILL)
    if not mini_share:
        pp_micro = 0
    elif f.dynamic:
        pp_micro = -(-int(mini_share * seq * MEAN_FILL) // max(1, train_tokens))
    else:
        pp_micro = -(-mini_share // max(1, c.int(f"{A}.ppo_micro_batch_size_per_gpu") or 1))
    # remove-padding (verl's default) packs real tokens: a static micro-batch is mean-filled
    static = not f.dynamic and c.v(f"{M}.use_remove_padding") is not False
    if static and lp_dynamic:  # the layout's one fill applies to both passes: a log-prob budget is not filled
        lp_tokens = int(lp_tokens / MEAN_FILL)
    cp, ep, etp, recompute, cpu_policy, fsdp_size = 1, 1, None, False, False, 0
    grad_bytes, optim_bytes, cpu_fraction = memory.MEGATRON_GRAD_BYTES, memory.MEGATRON_OPTIM_BYTES, 0.0
    if f.megatron:
        off_p, off_o = bool(c.v(f"{A}.megatron.param_offload")), bool(c.v(f"{A}.megatron.optimizer_offload"))
        ref_resident = not bool(c.v(f"{REF}.megatron.param_offload"))
        mtp, mpp = c.int(f"{A}.megatron.tensor_model_parallel_size") or 1, c.int(f"{A}.megatron.pipeline_model_parallel_size") or 1
        cp = c.int(f"{A}.megatron.context_parallel_size") or 1
        ep = c.int(f"{A}.megatron.expert_model_parallel_size") or 1
        etp = c.int(f"{A}.megatron.expert_tensor_parallel_size")
        recompute = c.v(f"{A}.megatron.override_transformer_config.recompute_granularity") == "full"
        critic_off = c.v("critic.megatron.param_offload")
        grad_bytes, optim_bytes, cpu_fraction = _megatron_optimizer_bytes(c)
    else:
        off_p, off_o = bool(c.v(f"{A}.fsdp_config.param_offload")), bool(c.v(f"{A}.fsdp_config.optimizer_offload"))
        # FSDP2's CPUOffloadPolicy (fsdp2 and fsdp_turbo only; FSDP1 ignores the key: transformer_impl.py:450-463)
        cpu_policy = bool(c.v(f"{A}.fsdp_config.offload_policy")) and c.v(f"{A}.strategy") in ("fsdp2", "fsdp_turbo")
        fsdp_size = c.int(f"{A}.fsdp_config.fsdp_size") or 0
        # verl forces CPU offload on the FSDP reference whatever its param_offload says (forward-only engine:
        # workers/engine/fsdp/transformer_impl.py:422-463)
        ref_resident = False
        mtp = mpp = 1
        critic_off = c.v("critic.fsdp.param_offload")
    critic = None
    if f.use_critic:
        same = c.v("critic.model.path") == c.v(f"{M}.path")
        critic = shape if same else model_shape(c, "critic.model.path")[0]
    tbs, n = f.tbs or 1, f.n or 1
    # one-step-off and fully async: the rollout on GPUs of its own (rollout.nnodes × rollout.n_gpus_per_node;
    # one_step_off_policy/main_ppo.py:121-122, fully_async_main.py:235-236), so none of its engine on these
    own = (c.int("rollout.nnodes") or 0) * (c.int("rollout.n_gpus_per_node") or 0)
    # a reward model served beside the policy (not in its own resource pool): its engine reserves its share of
    # each GPU, and must hold the reward model at its own TP
    reward, reward_gmu, reward_tp = None, 0.0, 1
    if bool(c.v("reward.reward_model.enable")) and not bool(c.v("reward.reward_model.enable_resource_pool")):
        reward_gmu = c.num("reward.reward_model.rollout.gpu_memory_utilization") or 0.0
        reward_tp = c.int("reward.reward_model.rollout.tensor_model_parallel_size") or 1
        reward = model_shape(c, "reward.reward_model.model_path")[0]
    # a judge's sequences (prompt + verdict) as its engine is told (reward.reward_model.rollout.max_model_len);
    # unset: the policy's sequence length
    reward_seq = c.int("reward.reward_model.rollout.max_model_len") or 0
    # a vision-language model whose rollout reserves image room (vLLM's limit_mm_per_prompt, as the plan writes it):
    # image tokens share the sequence as the planner assumes (images of its default image_max_pixels, full length)
    image_share = 0.0
    images = c.v(f"{R}.engine_kwargs.vllm.limit_mm_per_prompt.image")
    if getattr(shape, "vision", None) and isinstance(images, int) and images > 0 and seq:
        from wizard.intent.answers import Answers

        pixels = Answers.model_fields["image_max_pixels"].default
        image_share = min(1.0, images * shape.image_tokens(pixels) / seq)
    layout = Layout(gpu_gb=float(hw.gpu_memory_gb), n_gpus=f.n_gpus, gpus_per_node=f.gpn or f.n_gpus, seq_len=seq,
                    rollout_tp=tp, gmu=float(gmu), dp=f.dp, sp=1 if f.megatron else f.sp, megatron=f.megatron,
                    megatron_tp=mtp, megatron_pp=mpp, megatron_cp=cp, megatron_ep=ep, megatron_etp=etp,
                    recompute=recompute, pp_micro_batches=pp_micro,
                    megatron_vpp=c.int(f"{A}.megatron.virtual_pipeline_model_parallel_size") if f.megatron else None,
                    train_tokens=train_tokens, logprob_tokens=lp_tokens,
                    static_micro=static,
                    checkpointing=c.v(f"{M}.enable_gradient_checkpointing") is not False,
                    offload_params=off_p, offload_optimizer=off_o, ref_resident=ref_resident, use_ref=f.use_ref,
                    lora_rank=f.lora, critic=critic, critic_tokens=critic_tokens, **_critic_activations(c, f.megatron),
                    # Megatron LoRA synced as adapters to an engine that loaded the real base (memory.Layout)
                    lora_adapter_sync=bool(f.megatron and f.lora and not c.v(f"{M}.lora.merge")
                                           and "dummy" not in str(c.v(f"{R}.load_format") or "dummy")), critic_offload=None if critic_off is None else bool(critic_off),
                    replica_batch=max(1, -(-tbs * n * tp // (own or f.n_gpus))),
                    reward=reward, reward_gmu=reward_gmu if 0 < reward_gmu <= 1 else 0.0, reward_tp=reward_tp,
                    reward_seq_len=reward_seq if reward_seq > 0 else 0,
                    reward_free_cache=c.v("reward.reward_model.rollout.free_cache_engine") is not False,
                    image_share=image_share, rollout_dp=c.int(f"{R}.data_parallel_size") or 1,
                    optimizer_cpu_fraction=cpu_fraction, fsdp_cpu_policy=cpu_policy, fsdp_size=fsdp_size,
                    grad_bytes=grad_bytes,
                    optim_bytes=optim_bytes,
                    update_entropy=bool(c.v(f"{A}.calculate_entropy")) or (c.num(f"{A}.entropy_coeff") or 0.0) != 0.0,
                    fused_logits=fusedhead.runs(c.v, f.megatron),
                    free_cache_engine=c.v(f"{R}.free_cache_engine") is not False, gpu_type=hw.gpu_type,
                    rollout_elsewhere=bool(own),
                    # VI956: the FSDP actor's deferred gradient sync (memory.Layout.deferred_grad_sync)
                    deferred_grad_sync=not f.megatron and c.v(f"{A}.fsdp_config.{NO_SYNC}") is True)
    return layout, off_p


def _critic_activations(c: Ctx, megatron: bool) -> dict[str, bool]:
    """The critic's own activation settings: its engine reads critic.megatron.override_transformer_config
    (_generated_ppo_megatron_trainer.yaml:610-615) and critic.model.enable_gradient_checkpointing
    (_generated_ppo_trainer.yaml:685), not the actor's."""
    if megatron:
        return {"critic_recompute": c.v("critic.megatron.override_transformer_config.recompute_granularity") == "full"}
    return {"critic_checkpointing": c.v("critic.model.enable_gradient_checkpointing") is not False}


def _report(c: Ctx, est: Any, shape: Any, hw: Any, keys: tuple, tp: int, gmu: float, off_p: bool, reward: Any) -> None:
    """VI860 (a phase over the card, or tight) and VI862 (the KV cache) from the estimate; c.memory = est."""
    from wizard.planner.memory import DEFERRED_GRAD_PART, GIB

    seq = est.layout.seq_len if est.layout else 0
    reward_gmu = est.layout.reward_gmu if est.layout else 0.0
    reward_tp = est.layout.reward_tp if est.layout else 1
    approx = shape.source not in ("catalogue", "local")
    sev = "warning" if approx else "error"
    where = f"{shape.name} ({shape.params_b:.1f}B{', shape estimated from its name' if approx else ''})"
    if est.reward_kv_seqs is not None and est.reward_kv_seqs < 1 and reward is not None:
        rkeys = ("reward.reward_model.rollout.tensor_model_parallel_size", "reward.reward_model.rollout.gpu_memory_utilization")
        c.add("VI862", sev, rkeys, f"the reward model's engine reserves {reward_gmu:g} × {est.capacity_gib:.1f} GiB = "
              f"{reward_gmu * est.capacity_gib:.1f} GiB per GPU, which cannot hold {reward.name}'s bf16 weights "
              f"({2 * reward.params / reward_tp / GIB:.1f} GiB at TP {reward_tp}) plus one {seq}-token sequence's KV cache",
              f"raise {rkeys[1]} or {rkeys[0]}")
    elif est.kv_seqs < 1:
        weights = 2 * shape.params / tp / GIB
        c.add("VI862", sev, keys, f"the rollout engine reserves {gmu:g} × {est.capacity_gib:.1f} GiB = "
              f"{gmu * est.capacity_gib:.1f} GiB per GPU, which cannot hold {where}'s bf16 weights ({weights:.1f} GiB at TP {tp}) "
              f"plus one {seq}-token sequence's KV cache", f"raise {keys[1]} or {keys[0]}")
    over = est.peak_gib > est.capacity_gib + 1e-9 and not est.sync_uncertain  # (the KV cache is VI862's)
    if over or est.tight_phases:
        verdict = "does not fit" if over else "tight"
        phase = est.peak_phase if over else max(est.tight_phases, key=lambda p: est.tight_phases[p])
        top = sorted(est.table(phase).items(), key=lambda kv: -kv[1])[:3]
        parts = ", ".join(f"{k} {v:.1f}" for k, v in top)
        hints = []
        if phase in ("rollout", "weight sync"):
            if not off_p:
                hints.append("offload the actor (fsdp_config/megatron param_offload and optimizer_offload)")
            hints.append(f"lower {keys[1]} (now {gmu:g})")
        elif phase == "update" and (roles := _recompute_roles(shape, est)):
            # Megatron without full recompute keeps 34·hidden B per layer and token for up to PP micro-batches in
            # flight (memory.train_bytes_per_token, planner/inflight.py); full recompute keeps each layer's input.
            # The critic's engine reads its own mapping (memory._critic_bytes_per_token)
            keys_ = " ".join(f"+{r}.megatron.override_transformer_config.{k}={v}" for r in roles
                             for k, v in (("recompute_granularity", "full"), ("recompute_method", "uniform"),
                                          ("recompute_num_layers", 1)))
            hints.append(f"recompute activations: {keys_} (verl's engine/megatron.yaml leaves recompute_granularity "
                         "null; the estimate with full recompute fits)")
        else:
            if phase == "update" and any(t.part == DEFERRED_GRAD_PART for t in est.phases["update"]):
                hints.append(f"set {A}.fsdp_config.{NO_SYNC}=False (VI956)")
            hints.append("lower the micro-batch / token budget, or raise sequence/tensor parallelism")
        hints.append("use more GPUs or LoRA")
        high = est.band(phase)[1]
        if verdict == "does not fit":
            sev = "warning" if approx else "error"
            msg = (f"{where} does not fit: about {est.phase_gib(phase):.1f} GiB per GPU in the {phase} phase ({parts} GiB), "
                   f"{est.phase_gib(phase) - est.capacity_gib:.1f} GiB over the {est.capacity_gib:.1f} GiB a "
                   f"{hw.gpu_memory_gb:g} GB card reports")
        elif est.sync_uncertain:
            sev, phase = "warning", "weight sync"
            msg = (f"{where} is tight in the weight sync: {est.phase_gib(phase):.1f} GiB per GPU if the engine's KV cache "
                   f"is held during it, as in the measured verl ≈0.4 runs ({est.phase_gib(phase) - est.capacity_gib:.1f} "
                   f"GiB over the {est.capacity_gib:.1f} GiB card); verl 0.9.1 resumes the KV cache only after the sync "
                   f"({est.phase_gib(phase) - est.sync_kv_gib:.1f} GiB)")
        else:
            sev = "warning"
            msg = (f"{where} is tight in the {phase} phase: {est.phase_gib(phase):.1f} GiB per GPU estimated, up to "
                   f"{high:.1f} GiB at the band's high end ({int(est.margin * 100)}% or full-length sequences), "
                   f"{high - est.capacity_gib:.1f} GiB over the {est.capacity_gib:.1f} GiB card")
        c.add("VI860", sev, (f"{M}.path", keys[1], "trainer.n_gpus_per_node"), msg, "; ".join(hints))
    c.memory = est


def _recompute_roles(shape: Any, est: Any) -> list[str]:
    """The fewest Megatron roles (actor, critic) without full recompute whose recompute makes the update fit (VI860's
    recompute hint); [] when none does."""
    from dataclasses import replace

    from wizard.planner.memory import estimate

    L = est.layout
    if L is None or not L.megatron:
        return []
    roles = [A] if not L.recompute else []
    if L.critic is not None and not (L.recompute if L.critic_recompute is None else L.critic_recompute):
        roles.append("critic")
    on = L.recompute if L.critic_recompute is None else L.critic_recompute
    for pick in [[r] for r in roles] + ([roles] if len(roles) > 1 else []):  # one role's keys first, then both
        again = estimate(shape, replace(L, recompute=L.recompute or A in pick,
                                        critic_recompute=None if L.critic is None else (on or "critic" in pick)))
        if again.phase_gib("update") <= again.capacity_gib:
            return pick
    return []


_DTYPE_BYTES = {"fp32": 4, "float32": 4, "torch.float32": 4, "bf16": 2, "bfloat16": 2, "torch.bfloat16": 2,
                "fp16": 2, "float16": 2, "torch.float16": 2, "fp8": 1, "uint8": 1, "torch.uint8": 1}


def _megatron_optimizer_bytes(c: Ctx) -> tuple[int, int, float]:
    """(gradient buffer B/param, master + Adam m + v B/param, share of the optimizer states on the host) of the
    actor's Megatron optimizer: verl's optim fields, Megatron's OptimizerConfig overrides on top
    (utils/megatron/optimizer.py init_megatron_optim_config), the DDP gradient dtype as verl derives it
    (workers/engine/megatron/transformer_impl.py _resolve_override_ddp_config; an explicit grad_reduce_in_fp32 wins)."""
    o = f"{A}.optim"
    over = c.v(f"{o}.override_optimizer_config")
    over = over if isinstance(over, dict) else {}

    def field(name: str, default: Any) -> Any:
        value = c.v(f"{o}.override_optimizer_config.{name}")
        return value if value is not None else over.get(name, default)

    def size(value: Any) -> int:
        return _DTYPE_BYTES.get(str(value).lower(), 4)

    aware_verl = bool(c.v(f"{o}.use_precision_aware_optimizer"))
    aware = bool(field("use_precision_aware_optimizer", aware_verl))
    verl_dtype = lambda key: c.v(f"{o}.{key}") if aware_verl else "fp32"  # noqa: E731 - verl sets them only when aware
    m = size(field("exp_avg_dtype", verl_dtype("exp_avg_dtype"))) if aware else 4
    v = size(field("exp_avg_sq_dtype", verl_dtype("exp_avg_sq_dtype"))) if aware else 4
    reduce_fp32 = c.v(f"{A}.megatron.override_ddp_config.grad_reduce_in_fp32")
    if reduce_fp32 is None:
        reduce_fp32 = not (aware_verl and size(c.v(f"{o}.main_grads_dtype") or "fp32") < 4)
    grad = 4 if reduce_fp32 else 2
    fraction = 0.0
    if bool(field("optimizer_cpu_offload", False)):
        raw = field("optimizer_offload_fraction", 1.0)
        try:
            fraction = min(1.0, max(0.0, float(raw)))
        except (TypeError, ValueError):
            fraction = 1.0
    return grad, 4 + m + v, fraction
