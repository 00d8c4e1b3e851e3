"""Rule stage of the answers' overrides, verl keys the answers do not model (VI550, VI551), and ANSWER_KEYS: the verl
keys an answer sets (wizard.planner.verl_keys applies the overrides after every planned key).
"""

from __future__ import annotations

import re

from wizard.planner import sandbox
from wizard.planner.state import Build
from wizard.verlspec.hydra_overrides import parse_override
from wizard.verlspec.keys import PRE


# verl keys an answer sets: an override of one is refused, the answer says it (and the plan re-derives every value
# that depends on it, which an override after the plan cannot). tests/test_overrides_answers.py keeps this table
# in step with the planner: every key a plan takes from an answer is listed.
ANSWER_KEYS: dict[str, str] = {
    "algorithm.adv_estimator": "algorithm",
    "algorithm.use_kl_in_reward": "kl_coef",
    "algorithm.kl_ctrl.kl_coef": "kl_coef",
    "data.train_files": "train_files",
    "data.val_files": "val_files",
    "data.train_batch_size": "prompts_per_step",
    "data.max_prompt_length": "max_prompt_length",
    "data.max_response_length": "max_response_length",
    f"{PRE}.model.path": "model",
    f"{PRE}.model.lora_rank": "lora_rank",
    f"{PRE}.model.lora_alpha": "lora_alpha",
    f"{PRE}.model.lora.rank": "lora_rank",
    f"{PRE}.model.lora.alpha": "lora_alpha",
    f"{PRE}.actor.strategy": "train_backend",
    f"{PRE}.actor.optim.lr": "learning_rate",
    f"{PRE}.actor.use_dynamic_bsz": "dynamic_batch",
    f"{PRE}.actor.ppo_max_token_len_per_gpu": "max_tokens_per_gpu",
    f"{PRE}.actor.ppo_micro_batch_size_per_gpu": "micro_batch_per_gpu",
    f"{PRE}.actor.use_kl_loss": "kl_coef",
    f"{PRE}.actor.kl_loss_coef": "kl_coef",
    f"{PRE}.actor.ulysses_sequence_parallel_size": "sequence_parallel",
    f"{PRE}.actor.fsdp_config.param_offload": "offload",
    f"{PRE}.actor.fsdp_config.optimizer_offload": "offload",
    f"{PRE}.actor.megatron.tensor_model_parallel_size": "megatron_tp",
    f"{PRE}.actor.megatron.pipeline_model_parallel_size": "megatron_pp",
    f"{PRE}.actor.megatron.virtual_pipeline_model_parallel_size": "megatron_vpp",
    f"{PRE}.actor.megatron.context_parallel_size": "megatron_cp",
    f"{PRE}.actor.megatron.expert_model_parallel_size": "megatron_ep",
    f"{PRE}.actor.megatron.expert_tensor_parallel_size": "megatron_etp",
    **{f"{role}.megatron.{key}": answer for role in (f"{PRE}.ref", "critic") for answer, key in (
        ("megatron_tp", "tensor_model_parallel_size"), ("megatron_pp", "pipeline_model_parallel_size"),
        ("megatron_vpp", "virtual_pipeline_model_parallel_size"), ("megatron_cp", "context_parallel_size"),
        ("megatron_ep", "expert_model_parallel_size"), ("megatron_etp", "expert_tensor_parallel_size"))},
    f"{PRE}.actor.megatron.param_offload": "offload",
    f"{PRE}.actor.megatron.optimizer_offload": "offload",
    f"{PRE}.rollout.name": "rollout_engine",
    f"{PRE}.rollout.n": "samples_per_prompt",
    f"{PRE}.rollout.tensor_model_parallel_size": "rollout_tp",
    f"{PRE}.rollout.expert_parallel_size": "rollout_ep",
    f"{PRE}.rollout.data_parallel_size": "rollout_dp",
    f"{PRE}.rollout.gpu_memory_utilization": "gpu_memory_utilization",
    f"{PRE}.rollout.temperature": "temperature",
    "critic.enable": "algorithm",
    "critic.strategy": "train_backend",
    "critic.model.path": "critic_model",
    "critic.optim.lr": "critic_learning_rate",
    "critic.fsdp.param_offload": "offload",
    "critic.fsdp.optimizer_offload": "offload",
    "critic.megatron.param_offload": "offload",
    "critic.megatron.optimizer_offload": "offload",
    "reward.reward_model.enable": "reward",
    "reward.reward_model.model_path": "reward_model",
    "reward.custom_reward_function.path": "reward_function",
    "reward.custom_reward_function.name": "reward_function",
    "trainer.device": "accelerator",
    "trainer.nnodes": "nnodes",
    "trainer.n_gpus_per_node": "gpus_per_node",
    "trainer.logger": "logger",
    "trainer.project_name": "project_name",
    "trainer.experiment_name": "experiment_name",
    "trainer.total_training_steps": "total_steps",
    "trainer.total_epochs": "epochs",
    "trainer.save_freq": "save_freq",
    "trainer.test_freq": "test_freq",
    "trainer.resume_mode": "resume",
    "trainer.resume_from_path": "resume_from_path",
    "trainer.default_local_dir": "checkpoint_dir",
    "trainer.max_actor_ckpt_to_keep": "keep_checkpoints",
    "trainer.max_critic_ckpt_to_keep": "keep_checkpoints",
    f"{PRE}.rollout.multi_turn.enable": "agent",
    f"{PRE}.rollout.multi_turn.max_assistant_turns": "max_turns",
    f"{PRE}.rollout.multi_turn.tool_config_path": "tool",
    f"{PRE}.rollout.agent.default_agent_loop": "agent",
    **sandbox.ANSWER_KEYS,
}


_OVERRIDE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)+")


_OVERRIDE_FORM = "write key=value for a key verl has, +key=value to add one (e.g. +actor_rollout_ref.model.override_config.attention_dropout=0.0)"


def overrides(b: Build) -> None:
    """Each override is one Hydra override on a dotted verl key, given once, that no answer sets (VI550, VI551)."""
    seen: dict[str, str] = {}
    for text in b.a.overrides:
        ov = parse_override(text, "overrides")
        if ov is None or ov.op == "~":
            b.f.error("VI550", ("overrides",), f"override {text!r} is not key=value" + (
                      ": removing a key (~key) is not possible in a config file" if ov is not None else ""),
                      _OVERRIDE_FORM if ov is None else "set the key to the value you want instead")
            continue
        if not _OVERRIDE_KEY.fullmatch(ov.key) or ov.key.split(".")[0] in ("hydra", "defaults"):
            b.f.error("VI550", ("overrides",), f"override {text!r}: {ov.key!r} is not a dotted verl config key"
                      + (" (Hydra's own settings and the defaults list belong to verl-init)"
                         if ov.key.split(".")[0] in ("hydra", "defaults") else ""), _OVERRIDE_FORM)
            continue
        if ov.key in seen:
            b.f.error("VI550", ("overrides",), f"override {text!r}: {ov.key} is already set by {seen[ov.key]!r}",
                      "keep one of the two")
            continue
        seen[ov.key] = text
        if ov.has_value and isinstance(ov.value, str) and ov.value == "???":
            b.f.error("VI550", ("overrides",), f"override {text!r}: '???' is OmegaConf's missing value",
                      "write the actual value")
            continue
        field_name = ANSWER_KEYS.get(ov.key)
        if field_name is not None:
            b.f.error("VI551", ("overrides", field_name), f"override {text!r}: {ov.key} is set by the answer "
                      f"{field_name}", f"set {field_name} instead (--set {field_name}=VALUE): the plan then re-derives "
                      "every value that depends on it")


ANSWER_KEYS.update({
    "data.image_key": "image_key",
    f"{PRE}.actor.freeze_vision_tower": "freeze_vision_tower",
})
