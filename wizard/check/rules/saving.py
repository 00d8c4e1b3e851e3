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
- VI992 (info): a checkpoint retention limit on a run that resumes (resume_mode auto, verl's default, or
  resume_path). The checkpoint managers prune only the paths this process saved: `previous_saved_paths` starts empty
  in every process (utils/checkpoint/checkpoint_manager.py:59), register_checkpoint / ensure_checkpoint_capacity trim
  that list (:166-194), and loading a checkpoint does not add its path (fsdp_checkpoint_manager.py:176,
  megatron_checkpoint_manager.py). So each restart leaves the checkpoint it resumed from, and those before it, on
  disk for good (verl#7395; the fix, PR#7396, is not in 0.9.1).
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


RETENTION = {"ppo": ("trainer.max_actor_ckpt_to_keep", "trainer.max_critic_ckpt_to_keep"),
             "sft": ("trainer.max_ckpt_to_keep",)}


def rule_retention_across_restarts(c: Ctx, f: Facts) -> None:
    keys = [k for k in RETENTION.get("sft" if c.src.entry == "sft" else "ppo", ())
            if k in c.res.flat and isinstance(c.v(k), int) and not isinstance(c.v(k), bool) and c.v(k) > 0]
    if c.src.entry != "sft" and c.v("trainer.remove_previous_ckpt_in_save") is True:
        keys.append("trainer.remove_previous_ckpt_in_save")
    mode = c.v("trainer.resume_mode")
    if not keys or mode not in ("auto", "resume_path") or c.unknown("trainer.resume_mode"):
        return
    c.add("VI992", "info", (*keys, "trainer.resume_mode"),
          f"{', '.join(keys)} bounds only the checkpoints one process saves: verl's checkpoint managers start each "
          "process with an empty list of saved paths and do not add the one they resume from "
          f"(utils/checkpoint/checkpoint_manager.py:59, 166-194), so with resume_mode={mode} every restart leaves the "
          "checkpoints from before it on disk (verl#7395)",
          "budget the disk for the limit plus one checkpoint per restart, or delete old global_step_* folders "
          "between restarts")
