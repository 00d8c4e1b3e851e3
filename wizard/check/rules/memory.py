"""Memory rules: the peak per GPU (wizard.planner.memory) against the GPU (VI860-VI862)."""

from __future__ import annotations

import re
from typing import Any

from wizard.check.rules.context import REF, A, M, R, Ctx, Facts, model_shape


_MOE_NAME = re.compile(r"(?<![a-z0-9])a\d+(\.\d+)?b(?![a-z0-9])|moe|\d+x\d+(\.\d+)?b|gpt-oss|mixtral|deepseek-v[2-4]",
                       re.IGNORECASE)


def _moe(c: Ctx, shape: Any) -> bool:
    """A mixture-of-experts model: experts in its shape, an "-A3B"/"MoE"/"8x7B" name, or expert parallel set."""
    path = c.res.flat.get(f"{M}.path")
    eps = (c.int(f"{A}.megatron.expert_model_parallel_size"), c.int(f"{R}.expert_parallel_size"))
    return bool(getattr(shape, "experts", 0)) or (isinstance(path, str) and bool(_MOE_NAME.search(path))) \
        or any(e is not None and e > 1 for e in eps)


def rule_memory(c: Ctx, f: Facts, shape: Any, why: str) -> None:
    from wizard.planner import memory
    from wizard.planner.memory import GB, Layout, estimate

    # guard: experts sharded over EP/ETP are not in the memory model (wizard.planner.memory); a MoE estimate from
    # dense terms is far off (Qwen3-30B-A3B with EP 8 runs on 8×H20, the dense terms say 246 GB per GPU)
    if _moe(c, shape) and not getattr(memory, "MOE_MODELLED", False):
        c.add("VI861", "info", (f"{M}.path",), "memory fit not checked: MoE memory not modelled (experts sharded over "
              "expert parallel are not in verl-init's memory model)", "size the GPUs from verl's own example for the model")
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
    seq = f.seq
    if f.dynamic:
        train_tokens = (c.int(f"{A}.ppo_max_token_len_per_gpu") or seq) * (1 if f.megatron else f.sp)
    else:
        train_tokens = (c.int(f"{A}.ppo_micro_batch_size_per_gpu") or 1) * seq
    if bool(c.v(f"{R}.log_prob_use_dynamic_bsz")):
        lp_tokens = (c.int(f"{R}.log_prob_max_token_len_per_gpu") or seq) * (1 if f.megatron else f.sp)
    else:
        lp_tokens = (c.int(f"{R}.log_prob_micro_batch_size_per_gpu") or 1) * seq
    if f.megatron:
        off_p, off_o = bool(c.v(f"{A}.megatron.param_offload")), bool(c.v(f"{A}.megatron.optimizer_offload"))
        ref_resident = not bool(c.v(f"{REF}.megatron.param_offload"))
        mtp, mpp = c.int(f"{A}.megatron.tensor_model_parallel_size") or 1, c.int(f"{A}.megatron.pipeline_model_parallel_size") or 1
    else:
        off_p, off_o = bool(c.v(f"{A}.fsdp_config.param_offload")), bool(c.v(f"{A}.fsdp_config.optimizer_offload"))
        ref_resident = not bool(c.v(f"{REF}.fsdp_config.param_offload"))
        mtp = mpp = 1
    critic = None
    if f.use_critic:
        same = c.v("critic.model.path") == c.v(f"{M}.path")
        critic = shape if same else model_shape(c, "critic.model.path")[0]
    tbs, n = f.tbs or 1, f.n or 1
    # a reward model served beside the policy (not in its own resource pool) reserves its share of each GPU
    reward_gmu = 0.0
    if bool(c.v("reward.reward_model.enable")) and not bool(c.v("reward.reward_model.enable_resource_pool")):
        reward_gmu = c.num("reward.reward_model.rollout.gpu_memory_utilization") or 0.0
    layout = Layout(gpu_gb=float(hw.gpu_memory_gb), n_gpus=f.n_gpus, gpus_per_node=f.gpn or f.n_gpus, seq_len=seq,
                    rollout_tp=tp, gmu=float(gmu), dp=f.dp, sp=1 if f.megatron else f.sp, megatron=f.megatron,
                    megatron_tp=mtp, megatron_pp=mpp, train_tokens=train_tokens, logprob_tokens=lp_tokens,
                    offload_params=off_p, offload_optimizer=off_o, ref_resident=ref_resident, use_ref=f.use_ref,
                    lora_rank=f.lora, critic=critic, replica_batch=max(1, -(-tbs * n * tp // f.n_gpus)),
                    reward_gmu=reward_gmu if 0 < reward_gmu <= 1 else 0.0)
    est = estimate(shape, layout)
    approx = shape.source not in ("catalogue", "local")
    sev = "warning" if approx else "error"
    where = f"{shape.name} ({shape.params_b:.1f}B{', shape estimated from its name' if approx else ''})"
    if est.kv_seqs < 1:
        weights = 2 * shape.params / tp / GB
        c.add("VI862", sev, keys, f"the rollout engine reserves {gmu:g} × {hw.gpu_memory_gb:g} GB = {gmu * hw.gpu_memory_gb:.1f} GB "
              f"per GPU, which cannot hold {where}'s bf16 weights ({weights:.1f} GB at TP {tp}) plus one {seq}-token sequence's KV cache",
              f"raise {keys[1]} or {keys[0]}")
    if est.peak_gb > est.budget_gb + 1e-9:
        # over the GPU itself: error; only inside the planner's safety margin: warning; shapes from a name: warning
        sev = "error" if est.peak_gb > hw.gpu_memory_gb and not approx else "warning"
        phase = "rollout" if est.rollout_gb >= est.training_gb else "training"
        top = sorted((est.rollout if phase == "rollout" else est.training).items(), key=lambda kv: -kv[1])[:3]
        parts = ", ".join(f"{k} {v:.1f}" for k, v in top)
        hints = []
        if not off_p and phase == "rollout":  # verl reloads offloaded state for every update: no help in training
            hints.append("offload the actor (fsdp_config/megatron param_offload and optimizer_offload)")
        if phase == "rollout":
            hints.append(f"lower {keys[1]} (now {gmu:g})")
        hints.append("lower the micro-batch / token budget" if phase == "training" else f"raise {keys[0]}")
        hints.append("use more GPUs or LoRA")
        c.add("VI860", sev, (f"{M}.path", keys[1], "trainer.n_gpus_per_node"),
              f"{where} needs about {est.peak_gb:.1f} GB per GPU in the {phase} phase ({parts} GB), over the "
              f"{est.budget_gb:.1f} GB budget ({int(est.margin * 100)}% margin) of a {hw.gpu_memory_gb:g} GB GPU",
              "; ".join(hints))
    c.memory = est
