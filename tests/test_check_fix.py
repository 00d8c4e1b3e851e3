"""`check --fix` fixes every finding it calls fixable (issue 14, item 7).

Every place a rule attaches a `Fix` is found in the source (so a new fixable finding cannot go untested), and
each has a case here: the finding is reported with a fix, `--fix`'s list is applied the way the user applies
it (a script's overrides replaced, a YAML's launch given the extra overrides, overrides replaced), and
checking again no longer reports it. Misspelled keys are renamed when the suggestion is sure, and only then.
"""

from __future__ import annotations

import ast
import json
import textwrap
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cli

from wizard.check.lint import check
from wizard.check.report import fixed_overrides

RULES_DIR = ROOT / "wizard" / "check" / "rules"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.n=4", "data.train_batch_size=16",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "trainer.logger=[console]", "trainer.nnodes=1", "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]
YAML_HEAD = """\
hydra:
  searchpath: [pkg://verl.trainer.config]
defaults: [ppo_trainer, _self_]
algorithm: {adv_estimator: grpo}
data: {train_batch_size: 16}
"""


def with_(*overrides: str, drop: tuple[str, ...] = ()) -> list[str]:
    """BASE with these overrides in place of BASE's for the same keys (the others appended), less `drop`."""
    given = {o.lstrip("+~").split("=", 1)[0]: o for o in overrides}
    out = [given.pop(b.split("=", 1)[0], b) for b in BASE if b.split("=", 1)[0] not in drop]
    return out + list(given.values())


def fix_sites() -> Counter[str]:
    """Rule ID → how many `add(...)` calls in wizard/check/rules attach a fix (`fix=` other than None)."""
    sites: Counter[str] = Counter()
    for path in RULES_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            fix = next((kw.value for kw in node.keywords if kw.arg == "fix"), None)
            if fix is not None and not (isinstance(fix, ast.Constant) and fix.value is None):
                sites[str(node.args[0].value)] += 1
    return sites


@dataclass
class Case:
    rule: str
    key: str  # the finding's first key
    overrides: list[str] = field(default_factory=list)
    yaml: str | None = None  # a YAML body after YAML_HEAD (the YAML is the target)
    script: bool = False  # the overrides are in a launch script (the target)
    options: dict[str, Any] = field(default_factory=dict)


A, R = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
DISTILL = ["distillation.enabled=True", *(f"+distillation.teacher_models.{t}.{k}={v}" for t, key in
                                          (("gsm8k", "openai/gsm8k"), ("geo3k", "hiyouga/geometry3k"))
                                          for k, v in (("key", key), ("model_path", "Qwen/Qwen3-32B"),
                                                       ("num_replicas", 1),
                                                       ("inference.tensor_model_parallel_size", 2)))]
YAML_TAIL = "trainer: {nnodes: 1, n_gpus_per_node: 1, logger: [console]%s}\n"
YAML_ARR = """\
actor_rollout_ref:
  model: {path: Qwen/Qwen2.5-1.5B-Instruct}
  actor: {%s: 8, use_dynamic_bsz: true}
  rollout: {name: vllm, n: 4, tensor_model_parallel_size: 1}
"""
SFT_LAUNCH = "torchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer"
SFT_ARGS = ["data.train_files=/data/train.parquet", "data.messages_key=messages", "data.micro_batch_size_per_gpu=2",
            "model.path=Qwen/Qwen2.5-0.5B-Instruct", "trainer.n_gpus_per_node=8", "trainer.logger=[console]"]
PP_LAYOUT = f"{A}.megatron.override_transformer_config.pipeline_model_parallel_layout"
PP2 = ("model_engine=megatron", "trainer.n_gpus_per_node=2", f"{A}.megatron.pipeline_model_parallel_size=2")
GEN_ARGS = ["trainer.nnodes=1", "trainer.n_gpus_per_node=1", "data.train_files=/data/test.parquet",
            "+data.output_path=/data/gen.parquet", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
            "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]
MISSPELLED = with_(f"{A}.ppo_mini_batch_sise=8", drop=(f"{A}.ppo_mini_batch_size",))
CASES = {
    "config group set to a bool (verl PR#7673)": Case("VI695", f"{R}.multi_turn", with_(f"{R}.multi_turn=True")),
    "deferred gradient sync": Case("VI956", f"{A}.fsdp_config.use_no_sync_for_gradient_accumulation",
                                   with_(f"{A}.fsdp_config.use_no_sync_for_gradient_accumulation=True",
                                         "data.max_response_length=4096")),
    "legacy reward key": Case("VI805", "custom_reward_function.name", with_("custom_reward_function.name=score")),
    "checkpoint engine file name": Case("VI705", f"{R}.checkpoint_engine.backend", with_(f"{R}.checkpoint_engine.backend=kimi")),
    "+ on an existing key": Case("VI803", f"{R}.gpu_memory_utilization", with_(f"+{R}.gpu_memory_utilization=0.5")),
    "moved key": Case("VI801", "critic.model.fsdp_config.param_offload",
                      with_("critic.model.fsdp_config.param_offload=False")),
    "removed key": Case("VI801", "trainer.use_legacy_worker_impl", with_("trainer.use_legacy_worker_impl=auto")),
    "misspelled override": Case("VI801", f"{A}.ppo_mini_batch_sise", MISSPELLED),
    "misspelled YAML key": Case("VI801", "trainer.totl_epochs",
                                yaml=YAML_ARR % "ppo_mini_batch_size" + YAML_TAIL % ", totl_epochs: 3"),
    "+ of a removed key": Case("VI802", "trainer.use_legacy_worker_impl", with_("+trainer.use_legacy_worker_impl=auto")),
    "+ of a misspelled key": Case("VI802", "trainer.totl_epochs", with_("+trainer.totl_epochs=3")),
    "misspelled dataclass field": Case("VI804", f"{A}.ppo_mini_batch_sise",
                                       yaml=YAML_ARR % "ppo_mini_batch_sise" + YAML_TAIL % ""),
    "misspelled key in a script": Case("VI801", f"{A}.ppo_mini_batch_sise", MISSPELLED, script=True),
    # a key an older verl had, re-added with + in RolloutConfig, which refuses it (tests/test_check_weightsync.py)
    "+ of a removed dataclass field": Case("VI804", f"{R}.skip_rollout", with_(f"+{R}.skip_rollout=True")),
    # R53-01 (verl#5952): the sync bucket below the fp32 embed_tokens on a path that asserts (TensorRT-LLM here)
    "sync bucket below the embedding": Case("VI651", f"{R}.checkpoint_engine.update_weights_bucket_megabytes",
                                            with_("actor_rollout_ref.model.path=Qwen/Qwen3-8B", f"{R}.name=trtllm"),
                                            script=True, options={"launch": "python3 -m verl.trainer.main_ppo"}),
    # R102-04 (verl-omni PR#613 quotes the gate): delta_sharded with a TensorRT-LLM rollout has no delta consumer
    "delta_sharded with a rollout that has no delta consumer": Case(
        "VI454", f"{R}.checkpoint_engine.backend",
        with_(f"{R}.name=trtllm", f"{R}.checkpoint_engine.backend=delta_sharded", "actor_rollout_ref.hybrid_engine=False",
              "trainer.n_gpus_per_node=6", "rollout.nnodes=1", "rollout.n_gpus_per_node=2", "data.train_batch_size=64",
              f"{A}.ppo_mini_batch_size=16"),
        script=True, options={"launch": "python3 -m verl.experimental.one_step_off_policy.main_ppo"}),
    # R102 class (VI455): engine_kwargs the checkpoint engine's constructor refuses
    "delta_sharded encoding verl asserts away (its example names 'deltas')": Case(
        "VI455", f"{R}.checkpoint_engine.engine_kwargs.delta_sharded.encoding",
        with_(f"{R}.checkpoint_engine.backend=delta_sharded",
              f"+{R}.checkpoint_engine.engine_kwargs.delta_sharded.encoding=deltas")),
    "checkpoint engine kwarg the engine does not take (RFC verl#7262's phase)": Case(
        "VI455", f"{R}.checkpoint_engine.engine_kwargs.nccl.phase",
        with_(f"{R}.checkpoint_engine.backend=nccl", f"+{R}.checkpoint_engine.engine_kwargs.nccl.phase=2")),
    "checkpoint engine kwarg verl passes itself": Case(
        "VI455", f"{R}.checkpoint_engine.engine_kwargs.nccl.bucket_size",
        with_(f"{R}.checkpoint_engine.backend=nccl", f"+{R}.checkpoint_engine.engine_kwargs.nccl.bucket_size=8")),
    # R53-02 (verl#7495): LoRA adapters behind fully_async_main's nccl sync: merge them
    "LoRA adapters behind a disaggregated sync": Case(
        "VI652", "actor_rollout_ref.model.lora_rank",
        with_("actor_rollout_ref.model.lora_rank=16", "actor_rollout_ref.model.lora_alpha=32",
              "actor_rollout_ref.hybrid_engine=False", "rollout.nnodes=1", "rollout.n_gpus_per_node=1",
              "data.train_batch_size=0", "data.gen_batch_size=1"),
        script=True, options={"launch": "python -m verl.experimental.fully_async_policy.fully_async_main"}),
    # R91-01 (verl PR#6987): a Megatron actor under fully_async_main without the run's length: give it
    "fully async Megatron optimizer without its total": Case(
        "VI410", f"{A}.strategy",
        with_("actor_rollout_ref.hybrid_engine=False", "rollout.nnodes=1", "rollout.n_gpus_per_node=1",
              "data.train_batch_size=0", "data.gen_batch_size=1", "rollout.total_rollout_steps=800",
              "hydra.searchpath=[pkg://verl.trainer.config]"),
        script=True, options={"launch": "python -m verl.experimental.fully_async_policy.fully_async_main "
                                        "--config-name=fully_async_ppo_megatron_trainer"}),
    "rollout mode sync": Case("VI853", f"{R}.mode", with_(f"{R}.mode=sync")),
    "val_batch_size": Case("VI857", "data.val_batch_size", with_("data.val_batch_size=8")),
    "DAPO metric no scorer returns": Case("VI648", "algorithm.filter_groups.metric",
                                          with_("algorithm.filter_groups.enable=True",
                                                "algorithm.filter_groups.metric=seq_final_reward")),
    "DAPO filter on the legacy trainer": Case("VI650", "algorithm.filter_groups.enable",
                                              with_("algorithm.filter_groups.enable=True", "trainer.use_v1=False")),
    "DAPO filter on the shaped reward": Case("VI649", "algorithm.filter_groups.metric",
                                             with_("algorithm.filter_groups.enable=True",
                                                   "reward.reward_manager.name=dapo",
                                                   "+reward.reward_kwargs.overlong_buffer_cfg.enable=True",
                                                   "+reward.reward_kwargs.overlong_buffer_cfg.len=16",
                                                   "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
                                                   "+reward.reward_kwargs.max_resp_len=64")),
    "rollout TP that cannot fit": Case("VI810", f"{R}.tensor_model_parallel_size",
                                       with_(f"{R}.tensor_model_parallel_size=2")),
    "SP without remove_padding": Case("VI812", "actor_rollout_ref.model.use_remove_padding",
                                      with_("trainer.n_gpus_per_node=2", f"{A}.ulysses_sequence_parallel_size=2",
                                            "actor_rollout_ref.model.use_remove_padding=False")),
    "old and new micro-batch keys": Case("VI806", f"{A}.ppo_micro_batch_size",
                                         with_(f"{A}.ppo_micro_batch_size=8", f"{A}.ppo_micro_batch_size_per_gpu=2",
                                               f"{R}.log_prob_micro_batch_size_per_gpu=2",
                                               drop=(f"{A}.use_dynamic_bsz",))),
    "old micro-batch key under dynamic batching": Case("VI806", f"{A}.ppo_micro_batch_size",
                                                       with_(f"{A}.ppo_micro_batch_size=8")),
    "old global micro-batch size": Case("VI806", f"{A}.ppo_micro_batch_size",
                                        with_(f"{A}.ppo_micro_batch_size=8", f"{R}.log_prob_micro_batch_size_per_gpu=2",
                                              drop=(f"{A}.use_dynamic_bsz",))),
    "critic on verl's default model": Case("VI846", "critic.model.path",
                                           with_("algorithm.adv_estimator=gae", "critic.use_dynamic_bsz=True")),
    # LoRA keys per engine (tests/test_lora_megatron.py has the messages): the fix moves them to the engine's block
    "FSDP LoRA keys on Megatron": Case("VI880", "actor_rollout_ref.model.lora_rank",
                                       with_("model_engine=megatron", "actor_rollout_ref.model.lora_rank=16",
                                             "actor_rollout_ref.model.lora_alpha=32")),
    "trained rank above vLLM's slots": Case("VI880", "actor_rollout_ref.model.lora_rank",
                                            with_("actor_rollout_ref.model.lora_rank=32",
                                                  "actor_rollout_ref.model.lora.rank=16")),
    "LoRA on a vision tower": Case("VI849", "actor_rollout_ref.model.exclude_modules",
                                   with_("actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-7B-Instruct",
                                         "actor_rollout_ref.model.lora_rank=16")),
    "VLMLoRA module the rollout never receives": Case("VI666", "actor_rollout_ref.model.lora.freeze_vision_model",
                                                      with_("model_engine=megatron",
                                                            "actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-7B-Instruct",
                                                            "actor_rollout_ref.model.lora.rank=16",
                                                            "actor_rollout_ref.model.lora.type=vlm_lora",
                                                            "actor_rollout_ref.model.lora.freeze_vision_model=False")),
    "Megatron LoRA without Megatron-Bridge": Case("VI881", "actor_rollout_ref.model.lora.rank",
                                                  with_("model_engine=megatron", "actor_rollout_ref.model.lora.rank=16",
                                                        f"{A}.megatron.vanilla_mbridge=True")),
    # VI629 / VI635 (tests/test_pp_layout.py has the messages): the layout's stages over PP fix the virtual pipeline
    "pipeline layout against VPP": Case("VI629", PP_LAYOUT,
                                        with_(*PP2, f"{A}.megatron.virtual_pipeline_model_parallel_size=1",
                                              f"+{PP_LAYOUT}='Et*7|t*7|t*7|t*7L'")),
    "pipeline layout, VPP unset": Case("VI635", PP_LAYOUT, with_(*PP2, f"+{PP_LAYOUT}='Et*7|t*7|t*7|t*7L'")),
    "Megatron without Megatron-Bridge": Case("VI912", f"{A}.megatron.use_mbridge",
                                             with_("model_engine=megatron", f"{A}.megatron.use_mbridge=False")),
    "SGLang rollout DP without DP attention": Case("VI913", f"{R}.data_parallel_size",
                                                   with_(f"{R}.name=sglang", "trainer.n_gpus_per_node=4",
                                                         f"{R}.tensor_model_parallel_size=2",
                                                         f"{R}.data_parallel_size=2")),
    # tests/test_critic_rules.py holds the skipped updates to verl's need_critic and the trainers' guard
    # tests/test_check_ckpt_store.py holds the tracker verl's trainer skips under async_save (verl#7952)
    "async_save on an FSDP actor (R31-04)": Case("VI925", f"{A}.checkpoint.async_save",
                                                 with_(f"{A}.checkpoint.async_save=True", "trainer.save_freq=10")),
    "critic warmup without a critic (R22-05)": Case("VI782", "trainer.critic_warmup", with_("trainer.critic_warmup=10")),
    # tests/test_check_ppo_updates.py holds both to verl's FSDP optimizer_step and make_iterator
    "role-level grad_clip (verl PR#7923)": Case("VI791", f"{A}.grad_clip", with_(f"{A}.grad_clip=0.2")),
    # tests/test_check_optim_sched.py holds both to verl's Megatron checkpoint manager and adamw_rms_match_scale_factor
    "Megatron LR schedule restarted on resume (verl#7953)": Case(
        "VI661", f"{A}.optim.use_checkpoint_opt_param_scheduler",
        with_("model_engine=megatron", f"{A}.optim.lr_warmup_steps=10", "trainer.resume_mode=resume_path",
              "trainer.resume_from_path=/tmp/ckpt/global_step_20")),
    "Muon at an AdamW lr (verl PR#7120)": Case("VI663", f"{A}.optim.optimizer",
                                               with_("model_engine=megatron", f"{A}.optim.optimizer=muon")),
    "ppo_epochs replaying one order (verl#3213)": Case("VI792", f"{A}.ppo_epochs", with_(f"{A}.ppo_epochs=4")),
    # tests/test_check_profiling.py holds the count to verl's worker group and Nsight profiler
    "nsys whole-step capture end (verl#4920)": Case("VI976", "global_profiler.global_tool_config.nsys.worker_nsight_options.capture-range-end",
                                                  with_("global_profiler.tool=nsys", "global_profiler.steps=[1,2]")),
    # tests/test_check_profiler_roles.py holds both to verl's DistProfiler and worker group
    "profiling with no role enabled (verl#6181)": Case("VI678", f"{A}.profiler.enable", with_(
        "global_profiler.tool=torch_memory", "global_profiler.steps=[1,5]", f"{A}.profiler.all_ranks=True")),
    "ref ranks chosen, ref profiler off": Case("VI678", "actor_rollout_ref.ref.profiler.enable", with_(
        "global_profiler.tool=torch", "global_profiler.steps=[1]", f"{A}.profiler.enable=True",
        "actor_rollout_ref.ref.profiler.ranks=[0]")),
    "nsys GPU metrics in every worker (verl#2438)": Case(
        "VI688", "global_profiler.global_tool_config.nsys.worker_nsight_options.gpu-metrics-devices", with_(
            "global_profiler.tool=nsys", "global_profiler.steps=[1]", f"{A}.profiler.enable=True",
            "trainer.n_gpus_per_node=2",
            "global_profiler.global_tool_config.nsys.worker_nsight_options.capture-range-end=repeat-shutdown:1",
            "+global_profiler.global_tool_config.nsys.worker_nsight_options.gpu-metrics-devices=all")),
    # tests/test_layered_summon.py holds it to verl's collect_lora_params and the worker's base_sync_done
    "LoRA layered_summon with dummy weights (verl#3516)": Case("VI790", f"{R}.layered_summon", with_(
        "actor_rollout_ref.model.lora_rank=64", "actor_rollout_ref.model.lora_alpha=32", f"{R}.layered_summon=True")),
    # tests/test_check_multimodal.py holds both to verl's RLHFDataset and agent loop
    "image patch size unlike the model's (verl#6592)": Case("VI798", "data.image_patch_size", with_(
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-3B-Instruct", "data.filter_overlong_prompts=True",
        "data.image_patch_size=16")),
    "image prompts with the overlong filter off (verl#856)": Case("VI799", "data.filter_overlong_prompts", with_(
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-3B-Instruct", "data.filter_overlong_prompts=False")),
    "timeline file under ray_init (PR#1768)": Case("VI657", "ray_kwargs.ray_init.timeline_json_file",
                                                  with_("+ray_kwargs.ray_init.timeline_json_file=/tmp/timeline.json")),
    "int Ray env var (remax example, PR#6340)": Case("VI658", "ray_kwargs.ray_init.runtime_env.env_vars.TRANSFER_QUEUE_ENABLE",
                                                    with_("+ray_kwargs.ray_init.runtime_env.env_vars.TRANSFER_QUEUE_ENABLE=1")),
    # tests/test_check_offline_entries.py holds these to verl's RolloutConfig default, get_custom_reward_fn and
    # HFModelConfig
    "generation-only run on dummy weights (PR#6126)": Case(
        "VI699", f"{R}.load_format", GEN_ARGS, script=True,
        options={"launch": "python3 -m verl.trainer.main_generation_server"}),
    "main_eval with evaluation.yaml's reward keys (PR#777)": Case(
        "VI708", "custom_reward_function.path",
        ["data.path=/data/gen.parquet", "custom_reward_function.path=/data/score.py",
         "custom_reward_function.name=score"], script=True, options={"launch": "python3 -m verl.trainer.main_eval"}),
    "model path a verl checkpoint with hf weights (verl#298)": Case(
        "VI737", "actor_rollout_ref.model.path", [*GEN_ARGS, f"{R}.load_format=auto", "actor_rollout_ref.model.path=CKPT"],
        script=True, options={"launch": "python3 -m verl.trainer.main_generation_server", "ckpt": True}),
    # tests/test_launch_cpus.py holds VI434's count to verl's own ResourcePoolManager bundles
    "Ray CPUs below TransferQueue's storage units (verl#7656)": Case(
        "VI434", "ray_kwargs.ray_init.num_cpus", with_("trainer.n_gpus_per_node=1", "ray_kwargs.ray_init.num_cpus=8")),
    # 16 CPUs, not 8: 8 would give the V1 trainer too few for its placement groups (VI434)
    "Slurm job with Ray's own CPU count (PR#1009)": Case("VI977", "ray_kwargs.ray_init.num_cpus", with_(), script=True,
                                                        options={"header": "#SBATCH --cpus-per-task=16\n"}),
    # tests/test_rollout_engine_settings.py holds both to verl's servers and agent loop
    # tests/test_check_sglang_args.py holds VI664 to verl's own args literal (async_sglang_server.py:314-341)
    "SGLang mem_fraction_static in engine_kwargs (R44-02)": Case("VI664", f"{R}.engine_kwargs.sglang.mem_fraction_static",
                                                              with_(f"{R}.name=sglang", f"+{R}.engine_kwargs.sglang.mem_fraction_static=0.4")),
    "SGLang tp_size in engine_kwargs (R44-01)": Case("VI664", f"{R}.engine_kwargs.sglang.tp_size", with_(
        f"{R}.name=sglang", f"{R}.tensor_model_parallel_size=2", f"+{R}.engine_kwargs.sglang.tp_size=1")),
    "SGLang base_gpu_id in engine_kwargs": Case("VI664", f"{R}.engine_kwargs.sglang.base_gpu_id",
                                                with_(f"{R}.name=sglang", f"+{R}.engine_kwargs.sglang.base_gpu_id=1")),
    "SGLang dtype repeated in engine_kwargs (R44-01)": Case("VI664", f"{R}.engine_kwargs.sglang.dtype",
                                                         with_(f"{R}.name=sglang", f"+{R}.engine_kwargs.sglang.dtype=bfloat16")),
    # tests/test_check_vllm_spread.py holds VI600/VI612 to verl's own args literal (vllm_async_server.py:325-350)
    "vLLM max_model_len in engine_kwargs unlike verl's (R74-01)": Case("VI600", f"{R}.engine_kwargs.vllm.max_model_len",
                                                                   with_(f"{R}.max_model_len=1024", f"+{R}.engine_kwargs.vllm.max_model_len=2048")),
    "vLLM gpu_memory_utilization in engine_kwargs (R74-02)": Case(
        "VI600", f"{R}.engine_kwargs.vllm.gpu_memory_utilization",
        with_(f"{R}.gpu_memory_utilization=0.6", f"+{R}.engine_kwargs.vllm.gpu_memory_utilization=0.85")),
    "vLLM enforce_eager repeated in engine_kwargs (R74-03)": Case("VI600", f"{R}.engine_kwargs.vllm.enforce_eager", with_(
        f"{R}.enforce_eager=True", f"+{R}.engine_kwargs.vllm.enforce_eager=True")),
    "vLLM fp8 through engine_kwargs (R74-04)": Case("VI612", f"{R}.engine_kwargs.vllm.quantization",
                                                    with_(f"+{R}.engine_kwargs.vllm.quantization=fp8")),
    # tests/test_router_replay.py holds VI709/VI729 to verl's engines and vLLM server (verl_router_replay.json, ...)
    "router replay R3 without the rollout capture (PR#4101)": Case("VI709", f"{A}.megatron.router_replay.mode", with_(
        "model_engine=megatron", f"{A}.megatron.router_replay.mode=R3")),
    "router replay R2 with the rollout capture (PR#4973)": Case("VI709", f"{A}.megatron.router_replay.mode", with_(
        "model_engine=megatron", f"{A}.megatron.router_replay.mode=R2", f"{R}.enable_rollout_routing_replay=True")),
    # tests/test_moe_rollout.py holds VI430/VI431 to verl's weight sync and metrics code (verl_moe_rollout.json)
    "bf16 MoE vLLM rollout on a B200, MoE backend on auto (verl#7978)": Case(
        "VI430", "actor_rollout_ref.model.path", with_("actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B"),
        options={"gpu_type": "B200"}),
    "rollout MoE load-balance metrics without the routes (PR#6853)": Case(
        "VI431", f"{R}.moe_load_balance_metrics_interval", with_(f"{R}.moe_load_balance_metrics_interval=10")),
    "vLLM expert parallel through engine_kwargs (best_practices.rst:141)": Case(
        "VI729", f"{R}.engine_kwargs.vllm.enable_expert_parallel", with_(
            f"{R}.tensor_model_parallel_size=2", "trainer.n_gpus_per_node=2",
            f"+{R}.engine_kwargs.vllm.enable_expert_parallel=True")),
    "vLLM expert parallel turned off through engine_kwargs": Case(
        "VI729", f"{R}.engine_kwargs.vllm.enable_expert_parallel", with_(
            f"{R}.tensor_model_parallel_size=2", "trainer.n_gpus_per_node=2", f"{R}.expert_parallel_size=2",
            f"+{R}.engine_kwargs.vllm.enable_expert_parallel=False")),
    "vLLM expert parallel repeated in engine_kwargs": Case(
        "VI729", f"{R}.engine_kwargs.vllm.enable_expert_parallel", with_(
            f"{R}.tensor_model_parallel_size=2", "trainer.n_gpus_per_node=2", f"{R}.expert_parallel_size=2",
            f"+{R}.engine_kwargs.vllm.enable_expert_parallel=True")),
    "retired dummy* load_format (verl PR#7644)": Case("VI414", f"{R}.load_format",
                                                     with_(f"{R}.load_format=dummy_dtensor")),
    "flat engine argument (PR#1442)": Case("VI988", f"{R}.engine_kwargs.swap_space", with_(f"+{R}.engine_kwargs.swap_space=32")),
    "greedy validation by do_sample (verl#6202)": Case("VI989", f"{R}.val_kwargs.do_sample",
                                                       with_(f"{R}.val_kwargs.do_sample=False",
                                                             f"{R}.val_kwargs.temperature=0.6")),
    # tests/test_check_algorithm.py holds the skip to verl's own gates (trainer_base.py:1765-1771, ray_trainer.py:1651)
    "token TIS without rollout log-probs (PR#3984)": Case("VI979", f"{R}.calculate_log_probs",
                                                         with_(f"{R}.calculate_log_probs=False",
                                                               "algorithm.rollout_correction.rollout_is=token")),
    # tests/test_check_estimator_inputs.py holds VI624 to verl's compute_advantage and the engines' fused-kernel raise
    # tests/test_algo_estimator_flags.py holds VI426 to verl's compute_advantage (the flag changes nothing)
    "Dr.GRPO flag on grpo_vectorized (PR#7893)": Case("VI426", "algorithm.norm_adv_by_std_in_grpo",
                                                       with_("algorithm.adv_estimator=grpo_vectorized",
                                                             "algorithm.norm_adv_by_std_in_grpo=False")),
    "OTB without sum_pi_squared (PR#4678)": Case("VI624", "algorithm.adv_estimator",
                                                 with_("algorithm.adv_estimator=optimal_token_baseline",
                                                       "trainer.use_v1=False")),
    "OTB with fused kernels (PR#4678)": Case("VI624", "algorithm.adv_estimator",
                                             with_("algorithm.adv_estimator=optimal_token_baseline",
                                                   "trainer.use_v1=False", f"{A}.calculate_sum_pi_squared=True",
                                                   "actor_rollout_ref.model.use_fused_kernels=True")),
    # tests/test_check_validation.py holds VI985 to the trainers' fit and VI986 to verl's SFT loop, run
    "val_only without val_before_train (verl#5483)": Case(
        "VI985", "trainer.val_before_train", with_("trainer.val_before_train=False", "trainer.val_only=True")),
    # tests/test_data_train_subset.py holds VI418 to verl's RLHFDataset, create_rl_sampler and a resumed StatefulDataLoader
    "unseeded train_max_samples subset (verl#7816)": Case("VI418", "data.train_max_samples",
                                                          with_("data.train_max_samples=40", "trainer.save_freq=10")),
    "unseeded train_max_samples subset, no checkpoints (verl#7816)": Case("VI418", "data.train_max_samples",
                                                                           with_("data.train_max_samples=40")),
    # tests/test_check_val_sampling.py holds VI937 to verl's process_validation_metrics and its agent loops' source
    "val_kwargs.n greedy copies (verl#1352)": Case("VI937", f"{R}.val_kwargs.n", with_(f"{R}.val_kwargs.n=8")),
    # tests/test_update_epochs.py holds VI438 to verl's make_iterator and FSDPActorConfig, run on the CPU
    "update epochs 0 (class of verl PR#7924)": Case("VI438", f"{A}.ppo_epochs", with_(f"{A}.ppo_epochs=0")),
    "run budget 0 (class of verl PR#7924)": Case("VI439", "trainer.total_epochs", with_("trainer.total_epochs=0")),
    # tests/test_check_sampling_reach.py holds VI608 to verl's AgentLoopWorker.generate_sequences, run
    "repetition_penalty the agent loop pins (verl#7270)": Case("VI608", f"{R}.repetition_penalty",
                                                               with_(f"+{R}.repetition_penalty=1.05")),
    "rollout seed SGLang never reads (verl#3126)": Case("VI609", f"{R}.seed",
                                                        with_(f"{R}.name=sglang", f"{R}.seed=7")),
    # R87-03 (PR verl#7363): the SFT trainer never finalizes Megatron's async checkpoint queue: drop the key
    "SFT async_save on the Megatron engine (R87-03)": Case(
        "VI698", "checkpoint.async_save",
        SFT_ARGS + ["engine=megatron", "optim=megatron", "+checkpoint.async_save=True"],
        script=True, options={"launch": SFT_LAUNCH}),
    "SFT test_freq 0": Case("VI986", "trainer.test_freq", SFT_ARGS + ["data.val_files=/data/val.parquet",
                                                                       "trainer.test_freq=0"],
                            script=True, options={"launch": SFT_LAUNCH}),
    "SFT validation without a val set (verl#7545)": Case("VI986", "trainer.test_freq",
                                                          SFT_ARGS + ["data.val_files=null", "trainer.test_freq=10"],
                                                          script=True, options={"launch": SFT_LAUNCH}),
    # tests/test_check_sft_data.py holds VI785 to verl's FSDP engine's assert, run on the CPU
    "SFT right padding the engines refuse (R27-03)": Case("VI785", "data.pad_mode",
                                                          SFT_ARGS + ["data.pad_mode=right",
                                                                      "model.use_remove_padding=false"],
                                                          script=True, options={"launch": SFT_LAUNCH}),
    # tests/test_check_sft_runs.py holds VI682 to verl's rearrange_micro_batches, run on the CPU
    "SFT max_length above the token budget (R46-05)": Case("VI682", "data.max_token_len_per_gpu",
                                                           SFT_ARGS + ["data.max_length=16384",
                                                                       "data.truncation=right"],
                                                           script=True, options={"launch": SFT_LAUNCH}),
    # tests/test_check_sft_parallel.py holds VI812's SFT side to verl's apply_monkey_patch and FSDP engine source
    "SFT Ulysses without remove padding": Case("VI812", "model.use_remove_padding",
                                               SFT_ARGS + ["engine.ulysses_sequence_parallel_size=2",
                                                           "model.use_remove_padding=false"],
                                               script=True, options={"launch": SFT_LAUNCH}),
    # tests/test_check_clip_bounds.py holds VI667/VI670 to verl's own policy-loss functions
    "clip_ratio shadowed by the low/high defaults (FlowRL#15)": Case("VI667", f"{A}.clip_ratio",
                                                                     with_(f"{A}.clip_ratio=0.1")),
    "CISPO importance weight floored (SkyRL PR#553)": Case("VI670", f"{A}.policy_loss.loss_mode",
                                                          with_(f"{A}.policy_loss.loss_mode=cispo")),
    "GSPO with token-level clip bounds": Case("VI915", f"{A}.policy_loss.loss_mode",
                                              with_(f"{A}.policy_loss.loss_mode=gspo", f"{A}.ppo_mini_batch_size=4")),
    # the distillation teacher pool (tests/test_distill_pool.py has verl's DistillationConfig on the same arithmetic):
    # two teachers of 1 replica × TP 2 hold 4 GPUs; the pool's node count, else its GPUs a node, is set to hold them
    "teacher pool over two nodes (PR#6358)": Case("VI973", "distillation.n_gpus_per_node",
                                                  with_(*DISTILL, "distillation.n_gpus_per_node=4",
                                                        "distillation.nnodes=2")),
    "teacher pool of 8 GPUs a node": Case("VI973", "distillation.n_gpus_per_node",
                                          with_(*DISTILL, "distillation.n_gpus_per_node=8", "distillation.nnodes=1")),
    # distillation settings verl refuses or replaces (tests/test_distill_settings.py has verl's DistillationConfig)
    "k1 distillation loss backpropagated": Case("VI617", "distillation.distillation_loss.loss_mode",
                                                with_("distillation.enabled=True",
                                                      "distillation.distillation_loss.loss_mode=k1",
                                                      "distillation.distillation_loss.use_policy_gradient=False")),
    "distillation policy loss other than vanilla": Case("VI617", "distillation.distillation_loss.policy_loss_mode",
                                                        with_("distillation.enabled=True",
                                                              "distillation.distillation_loss.policy_loss_mode=gspo")),
    "teacher vLLM max_logprobs below topk": Case(
        "VI620", "distillation.teacher_models.teacher_model.inference.engine_kwargs.vllm.max_logprobs",
        with_("distillation.enabled=True", "distillation.distillation_loss.loss_mode=forward_kl_topk",
              "distillation.distillation_loss.use_policy_gradient=False", "distillation.distillation_loss.topk=64",
              "+distillation.teacher_models.teacher_model.inference.engine_kwargs.vllm.max_logprobs=20")),
    "teacher temperature (verl#7769)": Case("VI621", "distillation.teacher_models.teacher_model.inference.temperature",
                                            with_("distillation.enabled=True",
                                                  "distillation.teacher_models.teacher_model.inference.temperature=0.6")),
    # a pre-trained adapter (tests/test_lora_adapter.py has peft's own adapter): its rank from its adapter_config.json
    "adapter without a LoRA rank": Case("VI880", "actor_rollout_ref.model.lora_adapter_path",
                                        with_("+actor_rollout_ref.model.lora_adapter_path=ADAPTER"),
                                        options={"adapter_r": 16}),
    "adapter above vLLM's slots": Case("VI880", "actor_rollout_ref.model.lora_adapter_path",
                                       with_("+actor_rollout_ref.model.lora_adapter_path=ADAPTER",
                                             "actor_rollout_ref.model.lora_rank=8"), options={"adapter_r": 16}),
    # a card below compute capability 8.0 (tests/test_precision.py has verl's verdict on the fixed list)
    "bf16 rollout on a V100": Case("VI864", f"{R}.dtype", with_(), options={"gpu_type": "Tesla V100-SXM2-32GB"}),
    # a precision name verl's PrecisionType.to_dtype refuses, in a case it knows (tests/test_check_dtypes.py)
    "precision name in capitals": Case("VI613", "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype",
                                       with_("+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=BF16")),
    "flash-attn on a T4": Case("VI865", "actor_rollout_ref.model.override_config.attn_implementation",
                               with_(f"{R}.dtype=float16"), options={"gpu_type": "T4"}),
    # a tiny local model folder written by _model_folder (tests/test_check_attention_kernels.py has the oracles)
    "head dim 512 under flash-attn": Case("VI642", "actor_rollout_ref.model.override_config.attn_implementation",
                                          with_("actor_rollout_ref.model.path=MODEL"), options={"model": "gemma4"}),
    "attention sinks without eager": Case("VI643", "actor_rollout_ref.model.override_config.attn_implementation",
                                          with_("actor_rollout_ref.model.path=MODEL"), options={"model": "gpt_oss"}),
    "attention sinks under sdpa": Case("VI643", "actor_rollout_ref.model.override_config.attn_implementation",
                                       with_("actor_rollout_ref.model.path=MODEL",
                                             "+actor_rollout_ref.model.override_config.attn_implementation=sdpa"),
                                       options={"model": "gpt_oss"}),
    # SGLang's attention backend against the card (tests/test_check_sglang_attention.py runs verl's own default pick)
    "SGLang fa3 on a B200": Case("VI958", f"{R}.engine_kwargs.sglang.attention_backend",
                                 with_(f"{R}.name=sglang", f"+{R}.engine_kwargs.sglang.attention_backend=fa3"),
                                 options={"gpu_type": "B200"}),
    "verl's SGLang default for a GDN model on a B300 (sglang#35080)": Case(
        "VI958", f"{R}.engine_kwargs.sglang.attention_backend",
        with_(f"{R}.name=sglang", "actor_rollout_ref.model.path=MODEL"), options={"gpu_type": "B300", "model": "gdn"}),
    "verl's SGLang default on a B200, sglang version unknown": Case(
        "VI959", f"{R}.engine_kwargs.sglang.attention_backend", with_(f"{R}.name=sglang"),
        options={"gpu_type": "B200"}),
    "role-level use_torch_compile (verl-recipe PR#150)": Case("VI689", f"{A}.use_torch_compile",
                                                              with_(f"{A}.use_torch_compile=False")),
    "LoRA on the FSDP critic (verl#4620)": Case("VI422", "critic.model.lora_rank",
                                                with_("algorithm.adv_estimator=gae", "critic.model.lora_rank=32",
                                                      "critic.ppo_micro_batch_size_per_gpu=2")),
}


def _model_folder(kind: str, folder: Path) -> None:
    """A config.json-only model folder: Gemma 4 with global_head_dim=512, gpt-oss (attention sinks), or a hybrid
    GatedDeltaNet model (Qwen3.5's layer_types)."""
    if kind == "gdn":
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps({
            "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
            "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "vocab_size": 1000, "layer_types": ["linear_attention"] * 3 + ["full_attention"]}), encoding="utf-8")
        return
    if kind == "gemma4":
        from transformers import Gemma4Config

        cfg = Gemma4Config(text_config={"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6,
                                        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
                                        "global_head_dim": 512, "vocab_size": 128})
    else:
        from transformers import GptOssConfig

        cfg = GptOssConfig(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=16, num_local_experts=4, vocab_size=128)
    cfg.save_pretrained(folder)


def test_every_fix_site_has_a_case():
    # the plain script case repeats an override case; a script case with a header or another entry point is a case
    # of its own
    have = Counter(c.rule for c in CASES.values() if not c.script or c.options.get("header") or c.options.get("launch"))
    missing = {rule: n - have[rule] for rule, n in fix_sites().items() if have[rule] < n}
    assert not missing, f"fixable findings without a --fix round-trip case here: {missing}"


def _apply(case: Case, tmp_path: Path) -> tuple[Any, Any]:
    """(report before, report after applying --fix's list as the user would)."""
    extra = list(case.options.get("extra", []))
    if "adapter_r" in case.options:  # a peft adapter folder here, named where the case says ADAPTER
        folder = tmp_path / "adapter"
        folder.mkdir()
        (folder / "adapter_config.json").write_text(json.dumps({"r": case.options["adapter_r"], "lora_alpha": 32}))
        case = replace(case, overrides=[o.replace("ADAPTER", str(folder)) for o in case.overrides])
    if case.options.get("ckpt"):  # a verl FSDP checkpoint folder that saved hf_model, named where the case says CKPT
        ckpt = tmp_path / "global_step_1" / "actor"
        (ckpt / "huggingface").mkdir(parents=True)
        (ckpt / "model_world_size_1_rank_0.pt").write_bytes(b"")
        (ckpt / "huggingface" / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
        (ckpt / "huggingface" / "model.safetensors").write_bytes(b"")
        case = replace(case, overrides=[o.replace("CKPT", str(ckpt)) for o in case.overrides])
    if "model" in case.options:  # a model folder here, named where the case says MODEL
        _model_folder(case.options["model"], tmp_path / "model")
        case = replace(case, overrides=[o.replace("MODEL", str(tmp_path / "model")) for o in case.overrides])
    hw = {"gpu_type": case.options["gpu_type"]} if "gpu_type" in case.options else {}
    if case.yaml is not None:
        target = tmp_path / "cfg.yaml"
        target.write_text(YAML_HEAD + case.yaml, encoding="utf-8")
        before = check(str(target), extra, defaults="snapshot", workdir=str(tmp_path), **hw)
        fixed, _ = fixed_overrides(before)
        return before, check(str(target), fixed, defaults="snapshot", workdir=str(tmp_path), **hw)
    if case.script:
        target = tmp_path / "run.sh"
        head = "#!/bin/bash\n" + case.options.get("header", "")  # lines before the launch (#SBATCH options)
        launch = case.options.get("launch", "python3 -m verl.trainer.main_ppo") + " "  # another entry point's launch
        tree = "verl" if "launch" in case.options else "snapshot"  # the snapshot holds main_ppo's trees only
        target.write_text(head + launch + " ".join(f"'{o}'" for o in case.overrides) + "\n", encoding="utf-8")
        before = check(str(target), defaults=tree, workdir=str(tmp_path), **hw)
        fixed, _ = fixed_overrides(before)  # the launch's whole list: it replaces the script's
        target.write_text(head + launch + " ".join(f"'{o}'" for o in fixed) + "\n", encoding="utf-8")
        return before, check(str(target), defaults=tree, workdir=str(tmp_path), **hw)
    before = check(None, case.overrides + extra, defaults="snapshot", workdir=str(tmp_path), **hw)
    fixed, _ = fixed_overrides(before)
    return before, check(None, fixed, defaults="snapshot", workdir=str(tmp_path), **hw)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fix_resolves_what_it_calls_fixable(name, tmp_path):
    case = CASES[name]
    before, after = _apply(case, tmp_path)
    hits = [f for f in before.findings if f.problem.rule == case.rule and f.problem.keys[:1] == (case.key,)]
    assert hits, [f.problem.line() for f in before.findings]
    assert all(f.fix is not None for f in hits), "reported without a fix: " + hits[0].problem.line()
    again = [f.problem.line() for f in after.findings if f.problem.rule == case.rule and case.key in f.problem.keys]
    assert not again, again
    # and nothing fixable is left over: a second --fix has nothing to do
    assert not [f.problem.line() for f in after.findings if f.fix is not None]


def test_every_fixable_finding_of_the_cases_is_fixed_together(tmp_path):
    """All override cases at once: whatever was fixable before is gone after one --fix."""
    overrides = list(dict.fromkeys(o for c in CASES.values() if c.yaml is None and not c.script and "model" not in c.options
                                   for o in c.overrides))
    before = check(None, overrides, defaults="snapshot", workdir=str(tmp_path))
    fixable = {(f.problem.rule, f.problem.keys) for f in before.findings if f.fix is not None}
    assert len(fixable) >= 8
    fixed, changes = fixed_overrides(before)
    after = check(None, fixed, defaults="snapshot", workdir=str(tmp_path))
    assert not fixable & {(f.problem.rule, f.problem.keys) for f in after.findings}


@pytest.mark.parametrize("overrides, why", [
    ([f"{A}.ppo_mini_batch_sise=8", f"{A}.ppo_mini_batch_size=16"], "the right key is given too"),
    ([f"{A}.ppo_mini_bs=8"], "not close enough"),
    (["trainer.n_gpus=8"], "two siblings are about as close (n_gpus_per_node, nnodes)"),
    ([f"{A}.ppo_epoch_count=2"], "a guess, not a misspelling"),
])
def test_unsure_suggestions_are_not_renamed(overrides, why):
    report = check(None, with_(*overrides, drop=(f"{A}.ppo_mini_batch_size",)), defaults="snapshot")
    bad = overrides[0].split("=")[0]
    hits = [f for f in report.findings if f.problem.keys[:1] == (bad,)]
    assert hits, [f.problem.line() for f in report.findings]
    assert all(f.fix is None for f in hits), why
    fixed, _ = fixed_overrides(report)
    assert overrides[0] in fixed  # left as it was


def test_a_rename_keeps_the_overrides_place():
    report = check(None, [MISSPELLED[-1], *MISSPELLED[:-1]], defaults="snapshot")
    fixed, changes = fixed_overrides(report)
    assert fixed[0] == f"{A}.ppo_mini_batch_size=8"
    assert changes == [f"VI801 {A}.ppo_mini_batch_sise: {A}.ppo_mini_batch_size=8; remove {A}.ppo_mini_batch_sise"]


@pytest.mark.slow
@pytest.mark.verl
def test_cli_fix_renames_a_misspelled_key_with_verls_tree(tmp_path, cli_env):
    """As a user runs it, with verl's own Hydra tree: script and YAML both get the rename, and say how to use it."""
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\npython3 -m verl.trainer.main_ppo \\\n  " + " \\\n  ".join(MISSPELLED) + "\n",
                      encoding="utf-8")
    r = run_cli(["check", str(script), "--defaults", "verl", "--fix", str(tmp_path / "fixed.txt")], env=cli_env,
                cwd=tmp_path)
    assert f"--fix: VI801 {A}.ppo_mini_batch_sise: {A}.ppo_mini_batch_size=8" in r.stderr, r.stderr
    assert "use them in place of those in" in r.stderr
    fixed = (tmp_path / "fixed.txt").read_text().splitlines()
    assert fixed == [o.replace("_sise=", "_size=") for o in MISSPELLED]  # in place, nothing else changed
    r = run_cli(["check", "--defaults", "verl", "--", *fixed], env=cli_env, cwd=tmp_path)
    assert r.returncode == 0 and "ppo_mini_batch_sise" not in r.stdout, r.stdout

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(YAML_HEAD + str(CASES["misspelled dataclass field"].yaml), encoding="utf-8")
    r = run_cli(["check", str(cfg), "--defaults", "verl", "--fix"], env=cli_env, cwd=tmp_path)
    assert r.stdout.splitlines() == [f"~{A}.ppo_mini_batch_sise", f"{A}.ppo_mini_batch_size=8"], r.stdout + r.stderr
    assert "add them after --config-path/--config-name" in r.stderr
    r = run_cli(["check", str(cfg), "--defaults", "verl", "--", *r.stdout.splitlines()], env=cli_env, cwd=tmp_path)
    assert r.returncode == 0 and "ppo_mini_batch_sise" not in r.stdout, r.stdout


def test_fix_never_overwrites_unasked(tmp_path, cli_env):
    out = tmp_path / "fixed.txt"
    out.write_text("mine\n")
    args = ["check", "--defaults", "snapshot", "--fix", str(out), "--", *BASE, f"{R}.mode=sync"]
    r = run_cli(args, env=cli_env, cwd=tmp_path)
    assert r.returncode == 2 and "exists" in r.stderr and "--force" in r.stderr
    assert out.read_text() == "mine\n"
    r = run_cli(args[:3] + ["--force"] + args[3:], env=cli_env, cwd=tmp_path)
    assert f"{R}.mode=async" in out.read_text().splitlines(), r.stderr
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\npython3 -m verl.trainer.main_ppo " + " ".join(BASE) + "\n")
    r = run_cli(["check", str(script), "--defaults", "snapshot", "--fix", str(script), "--force"], env=cli_env,
                cwd=tmp_path)
    assert r.returncode == 2 and "the file being checked" in r.stderr
    assert script.read_text().startswith("#!/bin/bash")


def test_fix_on_a_bundle_says_to_pass_the_list_to_run_sh(tmp_path, cli_env):
    import wizard

    plan = wizard.plan(wizard.load_profile("single-gpu"), base_dir=str(tmp_path))
    b = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    r = run_cli(["check", str(b), "--defaults", "snapshot", "--fix", "--", f"{R}.mode=sync"], env=cli_env, cwd=tmp_path)
    assert f"{R}.mode=async" in r.stdout.splitlines(), r.stdout + r.stderr
    assert f"pass them as arguments to {b / 'run.sh'}" in r.stderr
