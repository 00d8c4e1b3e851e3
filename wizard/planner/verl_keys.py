"""The key stages: verl's keys, written in the order verl_config.yaml shows them, each with the reason it was chosen
(the rule stages have resolved every number on the build state, wizard.planner.state.Build).
"""

from __future__ import annotations

from pathlib import Path

from wizard.planner import dataprep, genrm, recompute, sandbox
from wizard.planner.memory import GIB, rollout_weight_bytes
from wizard.planner.stages.checkpoints import RESUME_MODES
from wizard.planner.stages.layout import exact_shape
from wizard.planner.stages.overrides import ANSWER_KEYS
from wizard.planner.stages.vision import has_images
from wizard.planner.state import (MICRO_TOKEN_BUDGET, Build, experiment_name, given_reason, model_path, resolve_path,
                                  source_of)
from wizard.verlspec import arithmetic as rc
from wizard.verlspec.hardware import ACCELERATORS
from wizard.verlspec.hydra_overrides import format_value, parse_override
from wizard.verlspec.keys import PRE
from wizard.verlspec.lora import FSDP_TARGET_MODULES, MEGATRON_TARGET_MODULES, VISION_EXCLUDE


def algorithm_keys(b: Build) -> None:
    a, s, given, algo = b.a, b.s, b.given, b.algo
    s.set("algorithm.adv_estimator", algo.adv_estimator, f"{a.algorithm}: {algo.summary}"
          + ("" if b.use_ref or algo.kl == "none" else "; kl_coef=0 turns the KL term off"))
    s.set("algorithm.use_kl_in_reward", b.kl_in_reward,
          "KL penalty folded into the reward" if b.kl_in_reward else
          ("KL is a loss term instead (never both)" if b.kl_in_loss else "no KL penalty"))
    if b.kl_in_reward:
        s.set("algorithm.kl_penalty", algo.kl_penalty, "per-token KL estimate subtracted from the reward")
        s.set("algorithm.kl_ctrl.kl_coef", b.kl_coef, given_reason("kl_coef", given, "KL coefficient"), source_of("kl_coef", given))
    if algo.filter_groups:
        # verl 0.9.1's V1 trainer ignores max_num_gen_batches (it logs so: trainer/ppo/v1/trainer_base.py:205-210)
        s.set("algorithm.filter_groups.enable", True,
              "DAPO: drop groups whose samples all got the same reward; verl 0.9.1 samples more prompts until the step "
              "is full, with no limit (it ignores max_num_gen_batches)")
        s.set("algorithm.filter_groups.metric", *filter_metric(b))


def filter_metric(b: Build) -> tuple[str, str]:
    """DAPO's filter metric: the canonical reward, unless the overlong penalty shapes it (it is added into rm_scores,
    reward_manager/dapo.py:108-119, so same-outcome groups of different lengths would survive: check's VI649). Then
    the scorer's raw value from reward_extra_info: 'acc' (every built-in scorer gives it; a function that returns a
    number has it too, dapo.py:102-104), or a custom function's dict 'score' (dapo.py:97 requires it) when its dict
    has no 'acc'. A function whose return cannot be read here keeps 'reward' (stages/algorithm.py warns: VI508)."""
    if not b.algo.overlong_buffer:
        return "reward", "filter on the canonical reward (every scorer returns it)"
    a = b.a
    if a.reward == "function" and a.reward_function:
        from wizard._pysource import returned_keys, returns_number

        path, _, name = a.reward_function.rpartition(":")
        local = resolve_path(path, b.base)
        here = bool(local) and Path(local).is_file()
        got = returned_keys(Path(local), name) if here else None
        if got is None and here and returns_number(Path(local), name):
            return "acc", ("filter on the reward function's number, which the DAPO manager keeps as acc (dapo.py:102-104), "
                           "not the reward the overlong penalty shapes (check's VI649)")
        if got is None:
            return "reward", ("filter on the canonical reward: the reward function's return keys are not known here "
                              "(the overlong penalty is in it: set acc or score if the function returns them)")
        if "acc" not in got[0]:
            return "score", "filter on the reward function's raw score (the overlong penalty is not in it)"
    return "acc", "filter on the scorer's correctness, not the reward the overlong penalty shapes (check's VI649)"


def data_keys(b: Build) -> None:
    a, s, given = b.a, b.s, b.given
    s.set("data.train_files", *b.train_files)
    s.set("data.val_files", *b.val_files)
    s.set("data.train_batch_size", b.prompts, "prompts_per_step: prompts drawn per step", source_of("prompts_per_step", given))
    s.set("data.max_prompt_length", a.max_prompt_length, "max_prompt_length", source_of("max_prompt_length", given))
    s.set("data.max_response_length", a.max_response_length, "max_response_length", source_of("max_response_length", given))
    s.set("data.filter_overlong_prompts", True,
          "drop prompts longer than max_prompt_length at load time instead of truncating them mid-run")
    if b.shape is not None and b.shape.vision:
        # verl's YAML default (data/legacy_data.yaml:77: 14) wins over the processor's patch size (rl_dataset.py:
        # 112-114), and only the overlong filter reads it (:216-219); the rollout resizes on the processor's grid
        # (agent_loop.py:299-307). check's VI798 is the same fact.
        s.set("data.image_patch_size", b.shape.vision_patch,
              f"the model's vision patch (config.json vision_config.patch_size): the overlong filter counts image "
              f"tokens on the rollout's {b.shape.vision_patch * b.shape.vision_merge}-pixel grid")


def model_keys(b: Build) -> None:
    a, s, given = b.a, b.s, b.given
    s.set(f"{PRE}.model.path", model_path(a.model, b.base), "model", source_of("model", given))
    if a.lora_rank and b.megatron:
        # the Megatron engine reads model.lora.*, never the flat FSDP keys (wizard.verlspec.lora)
        s.set(f"{PRE}.model.lora.rank", a.lora_rank,
              "LoRA adapters instead of full weights, through Megatron-Bridge's PEFT (megatron_peft.py reads model.lora, "
              "not model.lora_rank)", "answer")
        s.set(f"{PRE}.model.lora.alpha", b.lora_alpha, given_reason("lora_alpha", given, "twice the rank"), source_of("lora_alpha", given))
        s.set(f"{PRE}.model.lora.target_modules", list(MEGATRON_TARGET_MODULES),
              "adapters on every linear layer (Megatron's fused QKV, attention output, MLP fc1/fc2; verl's default)")
        s.set(f"{PRE}.model.lora.merge", False,
              "adapters synced to the rollout engine as a LoRA adapter each step; the base weights are never re-sent")
    elif a.lora_rank:
        s.set(f"{PRE}.model.lora_rank", a.lora_rank, "LoRA adapters instead of full weights", "answer")
        s.set(f"{PRE}.model.lora_alpha", b.lora_alpha, given_reason("lora_alpha", given, "twice the rank"), source_of("lora_alpha", given))
        s.set(f"{PRE}.model.target_modules", FSDP_TARGET_MODULES, "adapters on every linear layer")
        if b.shape is not None and b.shape.vision:
            s.set(f"{PRE}.model.exclude_modules", VISION_EXCLUDE,
                  "no adapters on the vision tower: vLLM serves LoRA on the language model only and would ignore "
                  "them (as verl's examples/tuning/lora/run_qwen2_5_vl_7b_fsdp.sh)")
    s.set(f"{PRE}.model.use_remove_padding", True, "sequence packing: no compute spent on padding")
    if not b.megatron:  # only the FSDP/VeOMni engines read it (wizard/check/data/verl_readers.json, check VI890)
        s.set(f"{PRE}.model.enable_gradient_checkpointing", True, "recompute activations in backward to save memory")


def _offload_reason(b: Build) -> str:
    return ("offload (your answer)" if "offload" in b.given else
            "training state does not fit beside the rollout engine: kept in host memory between uses" if b.offload
            else "fits on the GPU: no offload needed")


def actor_keys(b: Build) -> None:
    a, s, given, algo, seq, sp = b.a, b.s, b.given, b.algo, b.seq, b.sp
    lr = a.learning_rate if a.learning_rate is not None else (3e-5 if a.lora_rank else 1e-6)
    if a.train_backend == "fsdp2":
        s.set(f"{PRE}.actor.strategy", "fsdp2", "train_backend=fsdp2 (reference follows the actor)", "answer")
    s.set(f"{PRE}.actor.optim.lr", lr,
          given_reason("learning_rate", given, "1e-6 for full fine-tuning, 3e-5 for LoRA adapters"), source_of("learning_rate", given))
    s.set(f"{PRE}.actor.ppo_mini_batch_size", b.mini,
          f"prompts_per_step / updates_per_step = {b.prompts} / {b.updates}: {b.updates} optimizer updates per step, "
          "each sample used once")
    if b.dynamic:
        s.set(f"{PRE}.actor.use_dynamic_bsz", True,
              given_reason("dynamic_batch", given, "micro-batches packed by token budget " + b.facts.get(
                  "dynamic_by_time", "(fsdp default)")), source_of("dynamic_batch", given))
        s.set(f"{PRE}.actor.ppo_max_token_len_per_gpu", b.tokens,
              given_reason("max_tokens_per_gpu", given, b.facts["token_budget_ranking"].why if "token_budget_ranking" in b.facts
                           else f"3 × (prompt + response) = 3 × {seq}, rounded to 1024"),
              source_of("max_tokens_per_gpu", given))
    else:
        s.set(f"{PRE}.actor.use_dynamic_bsz", False,
              given_reason("dynamic_batch", given, "fixed micro-batches " + b.facts.get(
                  "dynamic_by_time", "(megatron plans' default)")), source_of("dynamic_batch", given))
        s.set(f"{PRE}.actor.ppo_micro_batch_size_per_gpu", b.micro,
              given_reason("micro_batch_per_gpu", given,
                           f"largest divisor of the {b.per_rank} samples per GPU per update within ~{MICRO_TOKEN_BUDGET} tokens"),
              source_of("micro_batch_per_gpu", given))
    s.set(f"{PRE}.actor.use_kl_loss", b.kl_in_loss,
          "KL to the reference as a loss term" if b.kl_in_loss else "no KL loss term")
    if b.kl_in_loss:
        s.set(f"{PRE}.actor.kl_loss_coef", b.kl_coef, given_reason("kl_coef", given, "KL coefficient"), source_of("kl_coef", given))
        s.set(f"{PRE}.actor.kl_loss_type", algo.kl_loss_type, f"{a.algorithm}'s usual KL estimator")
    s.set(f"{PRE}.actor.entropy_coeff", 0, "no entropy bonus (verl's recipes)")
    if algo.loss_agg_mode:
        s.set(f"{PRE}.actor.loss_agg_mode", algo.loss_agg_mode, f"{a.algorithm}'s loss aggregation")
    if algo.clip_low is not None:
        s.set(f"{PRE}.actor.clip_ratio_low", algo.clip_low, f"{a.algorithm}'s lower clip range")
        s.set(f"{PRE}.actor.clip_ratio_high", algo.clip_high, f"{a.algorithm}'s upper clip range")
    if algo.loss_mode != "vanilla":
        s.set(f"{PRE}.actor.policy_loss.loss_mode", algo.loss_mode, f"{a.algorithm}'s policy loss")
    off_reason = _offload_reason(b)
    if not b.megatron:
        s.set(f"{PRE}.actor.ulysses_sequence_parallel_size", sp,
              given_reason("sequence_parallel", given,
                           "no sequence parallelism needed: one sequence's activations fit a GPU" if sp == 1 else
                           f"one {seq}-token sequence's activations only fit split over {sp} GPUs (divides the attention and KV heads)"),
              source_of("sequence_parallel", given))
        s.set(f"{PRE}.actor.fsdp_config.param_offload", b.offload, off_reason, source_of("offload", given))
        s.set(f"{PRE}.actor.fsdp_config.optimizer_offload", b.offload, off_reason, source_of("offload", given))
    else:
        _megatron_layout_keys(b, f"{PRE}.actor.megatron")
        _uneven_keys(b, f"{PRE}.actor.megatron")
        s.set(f"{PRE}.actor.megatron.param_offload", b.offload, off_reason, source_of("offload", given))
        s.set(f"{PRE}.actor.megatron.optimizer_offload", b.offload, off_reason, source_of("offload", given))
        recompute.actor_keys(b)  # Megatron full recompute when the layout has it (wizard.planner.recompute)
        if a.lora_rank:
            s.set(f"{PRE}.actor.megatron.use_mbridge", True,
                  "LoRA needs Megatron-Bridge (workers/config/megatron_peft.py:26 asserts it)")
            s.set(f"{PRE}.actor.megatron.vanilla_mbridge", False,
                  "LoRA needs the Megatron-Bridge provider, which the legacy mbridge does not build "
                  "(megatron/transformer_impl.py:326-348)")


def _megatron_reasons(b: Build) -> dict[str, str]:
    """Why each of the actor's Megatron layout sizes (wizard.verlspec.arithmetic.MEGATRON_CHECKS for the checks)."""
    g, shape, n_gpus, gpn = b.grid, b.shape, b.n_gpus, b.a.gpus_per_node
    exact = exact_shape(shape)
    moe = bool(shape is not None and shape.experts)
    heads = f"divides the {shape.heads} attention and {shape.kv_heads} KV heads; " if exact and shape else ""
    layers = ""
    if exact and shape and g.pp > 1:
        layers = (f" ({shape.layers} layers: {g.first} in the first stage, {g.last} in the last, at most "
                  f"{g.stage_layers(shape.layers)} per stage)" if g.first is not None else
                  f" ({shape.layers} layers, {shape.layers // (g.pp * (g.vpp or 1))} per "
                  f"{'virtual stage' if g.vpp else 'stage'})")
    out = {
        "megatron_tp": f"{g.tp}: {heads}with PP={g.pp}" + (f", CP={g.cp}" if g.cp > 1 else "")
                       + ", the least model parallelism whose training state fits"
                       + (f"; each TP group is {g.tp} consecutive GPUs inside one node (NVLink)" if g.tp > 1 else ""),
        "megatron_pp": f"{g.pp}: " + ("no pipeline stages needed" if g.pp == 1 else
                                      f"pipeline stages needed beside TP={g.tp} for the training state to fit{layers}"),
        "megatron_vpp": (f"{g.vpp} virtual stages per pipeline rank (interleaved schedule){layers}" if g.vpp else
                         "null: no interleaved pipeline schedule"),
        "megatron_cp": ("1: no context parallel, one sequence's activations fit beside the rest" if g.cp == 1 else
                        f"{g.cp}: each {b.seq}-token sequence is split over {g.cp} GPUs; its activations fit no other way"),
        "megatron_ep": "1: a dense model has no experts to spread",
        "megatron_etp": "null: a dense model (megatron-core's default, ETP = TP, applies to no expert)",
    }
    if moe and shape is not None:
        edp = g.expert_data_parallel(n_gpus)
        out["megatron_ep"] = (f"{g.ep}: the {shape.experts} experts of each MoE layer spread over {g.ep} GPUs "
                              f"({shape.experts // g.ep} whole experts each); the expert group ETP×EP = {g.expert_group} "
                              f"consecutive GPUs sits inside one node of {gpn} (token all-to-all over NVLink); "
                              f"expert data parallel {edp} (world {n_gpus} / ETP×EP×PP {g.expert_grid})"
                              + ("; the least expert parallelism whose training state fits" if g.ep > 1 else ""))
        out["megatron_etp"] = (f"{g.expert_tp}: " + ("whole experts on each GPU: the small expert matrices are not split "
                                                     "by tensor parallel (verl's MoE examples run ETP=1)"
                                                     if g.expert_tp == 1 else f"each expert split over {g.expert_tp} GPUs"))
    return out


def _uneven_keys(b: Build, prefix: str, reason: str = "") -> None:
    """An uneven pipeline split (layers that do not divide over PP): the first and last stages' layers, in the
    engine's override_transformer_config (megatron-core's TransformerConfig fields; verl passes the mapping through,
    workers/engine/megatron/transformer_impl.py _build_tf_config)."""
    g, shape = b.grid, b.shape
    if g.first is None and g.last is None or shape is None:
        return
    middle = (shape.layers - (g.first or 0) - (g.last or 0)) // max(g.pp - 2, 1) if g.pp > 2 else 0
    why = reason or (f"the {shape.layers} layers do not split evenly over PP={g.pp}: {g.first} + "
                     + (f"{g.pp - 2} × {middle} + " if g.pp > 2 else "") + f"{g.last} layers (as verl's 235B example)")
    base = f"{prefix}.override_transformer_config"
    b.s.set(f"{base}.num_layers_in_first_pipeline_stage", g.first, why)
    b.s.set(f"{base}.num_layers_in_last_pipeline_stage", g.last, why)


def _megatron_layout_keys(b: Build, prefix: str, same_as: str = "") -> None:
    """The six Megatron layout keys under `prefix` (the actor's, the reference's, the critic's): TP, PP, VPP, CP, EP
    and ETP. `same_as`: the reason a role other than the actor takes the actor's layout."""
    g, given, s = b.grid, b.given, b.s
    reasons = _megatron_reasons(b)
    values = {"megatron_tp": g.tp, "megatron_pp": g.pp, "megatron_vpp": g.vpp, "megatron_cp": g.cp,
              "megatron_ep": g.ep, "megatron_etp": g.etp}
    for answer, value in values.items():
        key = f"{prefix}.{MEGATRON_KEYS[answer]}"
        if same_as:
            s.set(key, value, same_as)
        else:
            s.set(key, value, given_reason(answer, given, reasons[answer]), source_of(answer, given))


# verl's engine key of each Megatron layout answer (trainer/config/engine/megatron.yaml)
MEGATRON_KEYS = {"megatron_tp": "tensor_model_parallel_size", "megatron_pp": "pipeline_model_parallel_size",
                 "megatron_vpp": "virtual_pipeline_model_parallel_size", "megatron_cp": "context_parallel_size",
                 "megatron_ep": "expert_model_parallel_size", "megatron_etp": "expert_tensor_parallel_size"}


SAME_PROCESS = ("the actor's layout: the reference runs in the actor's processes, whose Megatron process groups are set "
                "once (verl workers/engine/megatron/transformer_impl.py:271)")


def rollout_keys(b: Build) -> None:
    a, s, given, seq, rtp, gmu, shape = b.a, b.s, b.given, b.seq, b.rtp, b.gmu, b.shape
    mem = b.decision.estimate if b.decision else None
    s.set(f"{PRE}.rollout.name", a.rollout_engine, "rollout_engine", source_of("rollout_engine", given))
    s.set(f"{PRE}.rollout.n", b.n,
          given_reason("samples_per_prompt", given, f"{a.algorithm}'s usual group size"), b.n_src)
    weights_gib = (rollout_weight_bytes(shape, b.decision.layout) if b.decision else 2 * shape.params / rtp) / GIB \
        if shape else 0.0
    by_time = b.facts.get("rollout_tp_by_time")  # stages/fit.py _fastest: a larger TP predicted faster
    lead = (f"{rtp}: the fastest by predicted step time (PLAN.md's Time and cost; {by_time}, the smallest split "
            "that fits, is slower); its reservation" if by_time else f"{rtp}: smallest split inside a node whose "
            "reservation")
    s.set(f"{PRE}.rollout.tensor_model_parallel_size", rtp,
          given_reason("rollout_tp", given,
                       f"{lead} holds the bf16 weights ({weights_gib:.1f} GiB per GPU) "
                       f"and a KV cache for {mem.kv_seqs:.0f} full sequences" if mem else f"{rtp}"),
          source_of("rollout_tp", given))
    if shape is not None and shape.experts or b.rdp > 1:
        s.set(f"{PRE}.rollout.data_parallel_size", b.rdp,
              given_reason("rollout_dp", given,
                           f"{b.rdp}: the least rollout data parallel whose expert split (EP = TP {rtp} × DP {b.rdp} = "
                           f"{rtp * b.rdp} GPUs per replica) holds the bf16 weights in each engine's reservation "
                           "(replica = TP × DP GPUs filling whole nodes: replica.py:108, vllm_async_server.py:384)"
                           if b.rdp > 1 else "1: one engine per replica; the experts fit its TP GPUs"), source_of("rollout_dp", given))
    if a.rollout_engine == "sglang" and b.rdp > 1:
        s.set(f"{PRE}.rollout.engine_kwargs.sglang.enable_dp_attention", True,
              f"rollout data_parallel_size {b.rdp} on SGLang: verl starts one SGLang server with tp_size = TP × DP "
              "(async_sglang_server.py:313-323), which SGLang splits into DP groups only with DP attention (without "
              "it each of the DP groups takes tp_size GPUs of its own: check VI913)")
    if shape is not None and shape.experts or b.rep > 1:
        s.set(f"{PRE}.rollout.expert_parallel_size", b.rep,
              given_reason("rollout_ep", given,
                           f"{b.rep}: whole experts spread over the replica's {rtp * b.rdp} GPUs (vLLM enable_expert_parallel); verl "
                           "requires EP = TP × DP (workers/config/rollout.py:294)" if b.rep > 1 else
                           "1: one GPU per replica holds every expert"), source_of("rollout_ep", given))
    s.set(f"{PRE}.rollout.gpu_memory_utilization", gmu,
          given_reason("gpu_memory_utilization", given,
                       f"{gmu:g} × {a.gpu_memory_gb:g} GB for the engine; what training keeps resident "
                       f"({mem.gib('rollout', 'actor', 'resident (not offloaded)'):.1f} GiB actor) and a {int(mem.margin * 100)}% margin fit beside it"
                       if mem else f"{gmu:g}"),
          source_of("gpu_memory_utilization", given))
    if a.rollout_engine != "sglang":  # SGLang never reads it (wizard/check/data/verl_readers.json, check VI890)
        s.set(f"{PRE}.rollout.max_num_batched_tokens", max(8192, seq),
              f"max(8192, prompt + response = {seq}): one full sequence fits a prefill batch")
    s.set(f"{PRE}.rollout.temperature", a.temperature, "temperature", source_of("temperature", given))
    if a.lora_rank:
        s.set(f"{PRE}.rollout.load_format", "safetensors",
              "LoRA: the engine loads the real base weights from the model, only the adapters are synced (verl marks "
              "the base as synced unless load_format is dummy: engine_workers.py:673)" if b.megatron else
              "LoRA: the engine loads real base weights, adapters synced")
    if b.dynamic:
        s.set(f"{PRE}.rollout.log_prob_max_token_len_per_gpu", b.logprob_tokens,
              "the memory fit's budget for forward-only passes (they keep no activations), at least the training budget")
    else:
        per_rank_step = rc.step_batch(b.prompts, b.n, b.dp, b.mini).per_rank if b.dp else 0
        ranked = b.facts.get("logprob_micro_ranking")
        s.set(f"{PRE}.rollout.log_prob_micro_batch_size_per_gpu", b.logprob_micro,
              f"divides the {per_rank_step} samples per GPU per step; " + (ranked.why if ranked else
                                                                           "forward-only, so up to 2× the training micro-batch"))


def ref_keys(b: Build) -> None:
    a, s = b.a, b.s
    if not b.use_ref:
        return
    b.roles["ref"] = "frozen copy of the policy for the KL term" + (" (inside the actor: LoRA base weights)" if a.lora_rank else "")
    if b.dynamic:
        s.set(f"{PRE}.ref.log_prob_max_token_len_per_gpu", b.logprob_tokens, "same budget as the actor's log-prob pass")
    else:
        s.set(f"{PRE}.ref.log_prob_micro_batch_size_per_gpu", b.logprob_micro, "same as the actor's log-prob pass")
    if b.megatron:
        _megatron_layout_keys(b, f"{PRE}.ref.megatron", SAME_PROCESS)
    if not b.megatron and not a.lora_rank:
        s.set(f"{PRE}.ref.fsdp_config.param_offload", True,
              "the reference only runs forward passes: keep its weights in host memory between them")


def critic_keys(b: Build) -> None:
    a, s, given = b.a, b.s, b.given
    if not b.algo.critic:
        s.set("critic.enable", False, f"{a.algorithm} needs no critic")
        return
    b.roles["critic"] = f"value model initialised from {b.critic_model}"
    s.set("critic.enable", True, "ppo: GAE needs a critic (never inferred silently)")
    if a.train_backend == "fsdp2":
        s.set("critic.strategy", "fsdp2", "train_backend=fsdp2", "answer")
    s.set("critic.model.path", model_path(b.critic_model, b.base),
          given_reason("critic_model", given, "initialised from the policy model"), source_of("critic_model", given))
    s.set("critic.optim.lr", a.critic_learning_rate or 1e-5,
          given_reason("critic_learning_rate", given, "critics learn faster than the policy"), source_of("critic_learning_rate", given))
    # verl 0.9.1's trainer sizes the critic's engine from ppo_infer_max_token_len_per_gpu alone, with dynamic
    # batching on whatever critic.use_dynamic_bsz says (trainer_base.py:267-268, EngineConfig.use_dynamic_bsz=True)
    s.set("critic.ppo_infer_max_token_len_per_gpu", b.critic_tokens,
          "the actor's token budget: the memory estimate's critic passes" if b.dynamic else
          f"the critic runs token budgets in verl 0.9.1 (its micro-batch is not read): {b.micro} × the sequence, "
          "as the memory estimate counts it")
    if not b.dynamic:
        s.set("critic.ppo_micro_batch_size_per_gpu", b.micro, "same split as the actor (verl's CriticConfig checks it)")
    critic_off = "same as the actor: the memory estimate offloads both or neither"
    if not b.megatron:
        # verl 0.9 builds the critic's engine from critic.fsdp; critic.ulysses_sequence_parallel_size is
        # deprecated and not copied there (unlike the actor's), but validate() still reads it: set both.
        s.set("critic.fsdp.ulysses_sequence_parallel_size", b.sp, "same as the actor")
        s.set("critic.ulysses_sequence_parallel_size", b.sp, "same as the actor (read by verl's validate())")
        s.set("critic.fsdp.param_offload", b.offload, critic_off, source_of("offload", given))
        s.set("critic.fsdp.optimizer_offload", b.offload, critic_off, source_of("offload", given))
    else:
        _megatron_layout_keys(b, "critic.megatron", "same layout as the actor")
        critic = b.critic_shape
        if b.grid.ep > 1 and critic is not None and not critic.experts:
            # a dense critic beside a MoE actor: megatron-core refuses EP > 1 without experts (transformer_config.py:808)
            s.set("critic.megatron.expert_model_parallel_size", 1, "a dense critic has no experts to spread")
            s.set("critic.megatron.expert_tensor_parallel_size", None, "a dense critic has no experts")
        if critic is None or critic.layers == (b.shape.layers if b.shape else 0):
            _uneven_keys(b, "critic.megatron", "same pipeline split as the actor")
        s.set("critic.megatron.param_offload", b.offload, critic_off, source_of("offload", given))
        s.set("critic.megatron.optimizer_offload", b.offload, critic_off, source_of("offload", given))
        recompute.critic_keys(b)


# DAPO's overlong buffer: a quarter of the response budget, at most the paper's 4,096 tokens (DAPO §3.4: 4,096 of
# 20,480; verl-recipe's DAPO scripts: 4,096 of 20,480 and 512 of 2,048, though test_dapo_7b_math.sh keeps 4,096 of
# 8,192, where this gives 2,048)
OVERLONG_SHARE, OVERLONG_MAX = 4, 4096


def _overlong_keys(b: Build) -> None:
    """DAPO's soft overlong punishment, where verl 0.9.1's DAPO reward manager reads it (reward.reward_kwargs, not in
    verl's tree: the bundle's YAML adds it); max_resp_len is the response cap, which the manager asserts is set
    and at least the buffer (reward_manager/dapo.py:39-44)."""
    s, cap = b.s, b.a.max_response_length
    buffer = max(1, min(OVERLONG_MAX, cap // OVERLONG_SHARE))
    s.set("reward.reward_kwargs.overlong_buffer_cfg.enable", True,
          "DAPO's overlong reward shaping: responses in the last stretch before max_response_length lose reward "
          "linearly, up to penalty_factor at the cap")
    s.set("reward.reward_kwargs.overlong_buffer_cfg.len", buffer,
          f"the stretch: a quarter of max_response_length, at most {OVERLONG_MAX} (the DAPO paper's 4,096 of 20,480)")
    s.set("reward.reward_kwargs.overlong_buffer_cfg.penalty_factor", 1.0, "the full penalty at the cap (DAPO's)")
    s.set("reward.reward_kwargs.overlong_buffer_cfg.log", False, "no per-sample overlong metrics")
    s.set("reward.reward_kwargs.max_resp_len", cap,
          "max_response_length: where the stretch ends (verl's DAPO manager asserts it is set, dapo.py:39-41)")


def reward_keys(b: Build) -> None:
    a, s, algo, roles = b.a, b.s, b.algo, b.roles
    s.set("reward.reward_manager.name", algo.reward_manager,
          "DAPO's reward manager" if algo.reward_manager == "dapo" else "one scorer call per sample")
    if algo.overlong_buffer:
        _overlong_keys(b)
    if a.reward == "function" and a.reward_function:
        path, _, name = a.reward_function.rpartition(":")
        s.set("reward.custom_reward_function.path", resolve_path(path, b.base), "reward_function", "answer")
        s.set("reward.custom_reward_function.name", name, "reward_function", "answer")
        roles["reward"] = f"custom function {name} in {path}"
    elif a.reward == "function":
        prep = dataprep.resolve(a, b.base)
        s.set("reward.custom_reward_function.path", dataprep.BUNDLE_REWARD_FN,
              f"verl-init's scorer for answer_format={prep.answer_format}, shipped in the bundle "
              "(relative: run.sh starts verl in the bundle folder)")
        s.set("reward.custom_reward_function.name", dataprep.BUNDLE_REWARD_NAME, "the scorer's function in reward_fn.py")
        roles["reward"] = (f"{dataprep.BUNDLE_REWARD_FN} (answer_format={prep.answer_format}): "
                           f"{dataprep.FORMAT_WORDS[prep.answer_format]}")
    elif a.reward == "model" and a.reward_model:
        s.set("reward.reward_model.enable", True, "reward=model")
        s.set("reward.reward_model.model_path", model_path(a.reward_model, b.base), "reward_model", "answer")
        s.set("reward.reward_model.rollout.name", a.rollout_engine, "served by the same engine as the rollout")
        s.set("reward.reward_model.rollout.tensor_model_parallel_size", b.reward_tp,
              "smallest split whose engine share stays ≤ 0.3 of the card")
        s.set("reward.reward_model.rollout.gpu_memory_utilization", b.reward_gmu,
              "the reward model's bf16 weights and KV cache for 8 full sequences, beside the policy's engine")
        s.set("reward.reward_model.rollout.free_cache_engine", True,
              "the reward model's engine sleeps beside the policy's and wakes for its own turn after rollout "
              "(reward_loop.py compute_rm_score), as the memory plan counts it")
        roles["reward"] = f"reward model {a.reward_model}"
    elif a.reward == "sandbox":
        sandbox.reward_keys(b)
    else:
        roles["reward"] = "verl's rule-based scorer chosen by each row's data_source"


BUCKET_DEFAULT_MB = 2048  # rollout.checkpoint_engine.update_weights_bucket_megabytes (workers/config/rollout.py:135)


def _ascend_sync_bucket(b: Build) -> None:
    """vLLM on Ascend without IPC syncs weights through shared memory, which refuses a tensor over the bucket
    (vllm_rollout/bucketed_weight_transfer.py:140-144, vllm_rollout.py:143); the FSDP actor sends its embedding in
    fp32 (engine model_dtype fp32, fsdp/transformer_impl.py:258-262): vocab × hidden × 4 B (check's VI651)."""
    need = -(-b.shape.vocab * b.shape.hidden * 4 // (1 << 20))
    if need > BUCKET_DEFAULT_MB:
        b.s.set("actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes", -(-need // 1024) * 1024,
                f"accelerator=ascend: the fp32 embedding ({b.shape.vocab} × {b.shape.hidden} × 4 B = {need} MiB) must "
                "fit one bucket of vLLM's shared-memory sync on Ascend without IPC (verl#5952)")


def trainer_keys(b: Build) -> None:
    a, s, given = b.a, b.s, b.given
    if a.accelerator != "nvidia":
        acc = ACCELERATORS[a.accelerator]
        s.set("trainer.device", acc.device,
              "accelerator=amd: ROCm PyTorch names its devices cuda (verl plugin/platform/platform_rocm.py:25)"
              if a.accelerator == "amd" else
              "accelerator=ascend: verl's NPU platform device (plugin/platform/platform_npu.py:47)", "answer")
        # as verl's Ascend CI runs (tests/special_npu/nightly_ci_ascend/*_npu.sh); the Megatron engine never reads it.
        # Under fsdp_config: the FSDP engine reads only fsdp_config.use_torch_compile (engine/fsdp/transformer_impl.py:
        # 183-186), never the role-level key (verl-init check VI689, verl-recipe PR#150)
        if a.accelerator == "ascend" and not b.megatron:
            for role in ("actor", "ref"):
                s.set(f"actor_rollout_ref.{role}.fsdp_config.use_torch_compile", False,
                      "accelerator=ascend: torch.compile off, as verl's own Ascend runs set it (the FSDP engine reads "
                      "it under fsdp_config)")
        if a.accelerator == "ascend" and not b.megatron and a.rollout_engine == "vllm" and b.shape is not None:
            _ascend_sync_bucket(b)
    if b.algo.adv_estimator == "remax":
        # only the legacy trainer generates ReMax's greedy baseline (verl-init check VI980, rules/algorithm.py)
        s.set("trainer.use_v1", False,
              "ReMax: verl 0.9.1's V1 trainer never generates the greedy baseline (reward_baselines) the estimator "
              "needs; the legacy trainer does (trainer/ppo/ray_trainer.py:1493-1535), with a deprecation warning")
    s.set("trainer.nnodes", a.nnodes, "nnodes", source_of("nnodes", given))
    s.set("trainer.n_gpus_per_node", a.gpus_per_node, "gpus_per_node", source_of("gpus_per_node", given))
    s.set("trainer.logger", list(a.logger), "logger", source_of("logger", given))
    s.set("trainer.project_name", a.project_name, "project_name", source_of("project_name", given))
    s.set("trainer.experiment_name", experiment_name(a), given_reason("experiment_name", given, "algorithm-model"),
          source_of("experiment_name", given))
    if a.total_steps is not None:
        s.set("trainer.total_training_steps", a.total_steps, "total_steps", "answer")
    else:
        s.set("trainer.total_epochs", a.epochs or 15, given_reason("epochs", given, "15 passes, as verl's GSM8K recipes"),
              source_of("epochs", given))
    s.set("trainer.save_freq", a.save_freq, "save_freq", source_of("save_freq", given))
    s.set("trainer.test_freq", a.test_freq, "test_freq", source_of("test_freq", given))
    mode, where = b.facts["resume"], b.facts["checkpoint_dir"]
    s.set("trainer.resume_mode", RESUME_MODES[mode],
          "resume=path: start from resume_from_path" if mode == "path" else
          "resume=disable: every launch starts over" if mode == "disable" else
          given_reason("resume", given, f"a relaunch continues from the newest checkpoint in {where} (or starts fresh)"),
          "answer" if "resume" in given or mode == "path" else "default")
    if a.resume_from_path:
        s.set("trainer.resume_from_path", a.resume_from_path,
              "resume_from_path (relative: from the bundle folder, where verl runs)", "answer")
    if a.checkpoint_dir is not None:
        s.set("trainer.default_local_dir", where, "checkpoint_dir", "answer")
    if a.keep_checkpoints is not None:
        s.set("trainer.max_actor_ckpt_to_keep", a.keep_checkpoints, "keep_checkpoints: older actor checkpoints deleted",
              "answer")
        if b.algo.critic:
            s.set("trainer.max_critic_ckpt_to_keep", a.keep_checkpoints, "keep_checkpoints: the critic's too", "answer")


def override_keys(b: Build) -> None:
    """The answers' overrides, after every planned key: a planned value they replace is named (VI553); a mapping
    the plan sets keys inside, or a key inside a planned value, is refused (VI552). `verl-init` (the CLI) then
    checks the final config with `verl-init check`'s rules and refuses any error (wizard.check.planned)."""
    s, items = b.s, b.s.items
    applied: list[dict[str, str]] = []
    for text in b.a.overrides:
        ov = parse_override(text, "overrides")
        if ov is None:
            continue  # refused by the overrides stage
        key = ov.key
        inside = [k for k in items if k.startswith(key + ".")]
        above = [k for k in items if key.startswith(k + ".")]
        if inside or above:
            clash = (inside or above)[0]
            b.f.error("VI552", ("overrides",), f"override {text!r}: " + (
                f"{key} is a mapping the plan sets keys inside ({clash})" if inside else
                f"{key} lies inside {clash}, which the plan sets as one value"),
                f"override the keys inside one by one, e.g. {clash}=VALUE" if inside else
                f"set {ANSWER_KEYS[clash]} instead (--set {ANSWER_KEYS[clash]}=VALUE)" if clash in ANSWER_KEYS else
                f"override {clash} as a whole: {clash}=VALUE")
            continue
        old = items.get(key)
        planned = format_value(old.value) if old is not None else ""
        if old is not None:
            b.replaced[key] = old
            b.f.warning("VI553", ("overrides",), f"override {text!r} replaces the planned value {planned} ({old.reason})",
                        "values the plan derived from the planned one are not re-derived: verl-init checks the final "
                        "config with `verl-init check`'s rules before writing it")
        s.set(key, ov.value, f"override {text} (your answer)"
              + (f"; the plan chose {planned}: {old.reason}" if old is not None else ""), "override")
        applied.append({"text": text, "key": key, "planned": planned, "reason": old.reason if old else ""})
    b.facts["overrides"] = applied


def describe_roles(b: Build) -> None:
    a, roles = b.a, b.roles
    roles["actor"] = f"{a.model} trained with {a.train_backend}" + (
        f" + LoRA r={a.lora_rank} (Megatron-Bridge PEFT; base weights frozen)" if a.lora_rank and b.megatron else
        f" + LoRA r={a.lora_rank}" if a.lora_rank else "")
    roles["rollout"] = (f"{a.rollout_engine}, {b.facts['rollout_replicas']} replica(s) of TP={b.rtp}"
                        + (f" × DP={b.rdp}" if b.rdp > 1 else "") + ", colocated with the actor")
    b.roles = {k: roles[k] for k in ("actor", "rollout", "ref", "critic", "reward", "sandbox") if k in roles}


def vision_keys(b: Build) -> None:
    """verl's keys for a vision-language model. verl builds the processor (chat template and image processor) from
    the model folder itself (trainer/main_ppo.py: hf_processor) and turns each row's <image> placeholders and
    images into the processor's chat (utils/dataset/rl_dataset.py:_build_messages): no key names it."""
    a, s, given, shape = b.a, b.s, b.given, b.shape
    if shape is None or not shape.vision:
        return
    s.set("data.image_key", a.image_key, given_reason("image_key", given, "the column data/prepare_data.py writes the images to"),
          source_of("image_key", given))
    if a.freeze_vision_tower is not None:
        s.set(f"{PRE}.actor.freeze_vision_tower", a.freeze_vision_tower,
              "freeze_vision_tower (your answer; verl 0.9.1 does not act on it, VI571)", "answer")
    if a.rollout_engine == "vllm" and has_images(a, shape):
        # vLLM's serve argument, as verl's own rollout.limit_images sets it (vllm_async_server.py:289); limit_images
        # is a RolloutConfig field that verl 0.9.1's rollout.yaml does not declare, so the config cannot name it,
        # while engine_kwargs.vllm is passed to `vllm serve` as is (vllm_rollout/utils.py:build_cli_args_from_config)
        # verl's own VLM runs (examples/grpo_trainer/run_qwen2_5_vl_7b_fsdp.sh, run_qwen3_vl_8b_fsdp.sh) turn chunked
        # prefill off; vLLM then needs max_num_batched_tokens ≥ the longest sequence, which the rollout stage sets
        s.set(f"{PRE}.rollout.enable_chunked_prefill", False,
              "as verl's own VLM examples: whole prompts (image tokens included) prefilled at once; "
              "max_num_batched_tokens holds the longest sequence")
        s.set(f"{PRE}.rollout.engine_kwargs.vllm.limit_mm_per_prompt", {"image": a.images_per_prompt},
              given_reason("images_per_prompt", given, "one image per prompt") + ": vLLM reserves encoder room for this many")


def genrm_keys(b: Build) -> None:
    """reward=genrm's keys (wizard.planner.genrm): the judge, its placement and the bundle's judge function."""
    genrm.keys(b, model_path(b.a.reward_model, b.base) if b.a.reward_model else "")
