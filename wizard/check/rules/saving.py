"""Checkpoint-saving rules of verl 0.9.1's PPO trainers (paths under site-packages/verl):

- VI916 (info): trainer.save_freq ≤ 0 (its default, -1: trainer/config/ppo_trainer.yaml) saves nothing, not even the
  last step: every save, the last step's included, sits under `save_freq > 0` (trainer/ppo/v1/trainer_base.py:481-482,
  ray_trainer.py:1704-1706, fully_async_trainer.py:890). sft_trainer saves its last step whatever save_freq says
  (trainer/sft_trainer.py:441), so it is not one of these.
- VI918 (warning): trainer.del_local_ckpt_after_load=True deletes nothing. The trainers hand it to the engine's
  checkpoint manager (trainer_base.py:882-889); the FSDP manager removes a file only where `is_non_local` (an hdfs://
  path, utils/fs.py:34-43) holds for the copy it loaded, which copy_to_local has made local
  (utils/checkpoint/fsdp_checkpoint_manager.py:213-214, 257-261); the Megatron manager reads it only for a
  Megatron-FSDP checkpoint, under the same test (megatron_checkpoint_manager.py:766-768).
"""

from __future__ import annotations

from wizard.check.rules.context import A, Ctx, Facts


def rule_saving(c: Ctx, f: Facts) -> None:
    freq = c.v("trainer.save_freq")
    if not c.unknown("trainer.save_freq") and isinstance(freq, int) and not isinstance(freq, bool) and freq <= 0:
        c.add("VI916", "info", ("trainer.save_freq",),
              f"trainer.save_freq={freq}: verl saves no checkpoint at all, not even after the last step (every save "
              "sits under save_freq > 0, trainer/ppo/v1/trainer_base.py:481-482): the trained weights end with the run",
              "set trainer.save_freq to the steps between checkpoints (the last step is then saved too), and "
              f"{A}.checkpoint.save_contents to include 'hf_model' for Hugging Face weights")
    if c.v("trainer.del_local_ckpt_after_load") is True and str(c.v(f"{A}.strategy") or "") in ("fsdp", "fsdp2", "megatron"):
        c.add("VI918", "warning", ("trainer.del_local_ckpt_after_load",),
              "trainer.del_local_ckpt_after_load=True deletes nothing in verl 0.9.1: the checkpoint managers remove a "
              "loaded file only when its path is an hdfs:// one (utils/fs.py:34-43), and the FSDP manager tests the "
              "local copy it loaded (utils/checkpoint/fsdp_checkpoint_manager.py:213-214, 257-261)",
              "remove it; bound the disk with trainer.max_actor_ckpt_to_keep (and max_critic_ckpt_to_keep), or delete "
              "old checkpoints yourself")


def rule_fsdp1_offload_policy(c: Ctx, f: Facts) -> None:
    """VI917 (warning): fsdp_config.offload_policy=True on an FSDP1 actor or critic. Only the fsdp2 branch of verl's
    FSDP engine reads it (CPUOffloadPolicy, workers/engine/fsdp/transformer_impl.py:458-463); the fsdp branch builds
    FSDP1 with cpu_offload=None for a trained model (:423-447, "We force turn off CPUOffload because it causes
    incorrect results when using grad accumulation"), so nothing moves to the host. The memory estimate counts it
    for fsdp2 only (rules/memory.py)."""
    roles = [(f"{A}.fsdp_config.offload_policy", f"{A}.strategy", True),
             ("critic.fsdp.offload_policy", "critic.strategy", f.use_critic)]
    for key, strategy, used in roles:
        if used and c.v(key) is True and c.v(strategy) == "fsdp":
            c.add("VI917", "warning", (key, strategy),
                  f"{key}=True on FSDP1 ({strategy}=fsdp): verl's FSDP engine reads offload_policy only for fsdp2 "
                  "(workers/engine/fsdp/transformer_impl.py:458-463) and builds FSDP1 without CPU offload "
                  "(:423-447): nothing is offloaded",
                  f"set {strategy}=fsdp2 (torch's CPUOffloadPolicy), or use the FSDP1 offloads "
                  f"{key.rsplit('.', 1)[0]}.param_offload / optimizer_offload")
