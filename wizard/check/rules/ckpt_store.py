"""Where verl 0.9.1's PPO trainers put a checkpoint for a later resume, and what of it the training engines carry out
(paths under site-packages/verl):

- VI923 (error): trainer.default_hdfs_dir set on a trainer whose `_load_checkpoint` refuses it. The legacy PPO trainer
  (trainer.use_v1=False, trainer/main_ppo.py:183-191 → trainer/ppo/ray_trainer.py), which the one-step-off-policy
  trainer inherits (experimental/separation/ray_trainer.py:52, :303), raises NotImplementedError("load from hdfs is not
  implemented yet") as its first act of any resume mode but disable (ray_trainer.py:1052-1058), and so do the fully
  async trainer and rollouter (experimental/fully_async_policy/fully_async_trainer.py:981-986,
  fully_async_rollouter.py:674-679): after the workers are built, before a step, and whether or not a checkpoint
  exists (real case verl#250).
- VI924 (warning): trainer.default_hdfs_dir with a non-Megatron actor or critic. The trainers hand each role
  `<default_hdfs_dir>/global_step_N/<role>` as hdfs_path (trainer/ppo/v1/trainer_base.py:971-993), but only the
  Megatron checkpoint manager reads it (utils/checkpoint/megatron_checkpoint_manager.py:1126-1134, hdfs_io.copy);
  FSDPCheckpointManager, behind the fsdp, fsdp2 and veomni engines (workers/engine/fsdp/transformer_impl.py:217,
  veomni/transformer_impl.py:253), documents it "Unused" and never reads it (utils/checkpoint/
  fsdp_checkpoint_manager.py:272-290), and the torchtitan and automodel engines drop it
  (workers/engine/torchtitan/transformer_impl.py:476-500, automodel/transformer_impl.py:372-395). Nothing reaches
  HDFS; the v1 trainer resumes from default_local_dir only (trainer_base.py:856-862). The SFT trainer copies to HDFS
  itself (utils/checkpoint/checkpoint_handler.py:136-138): not this rule.
- VI925 (warning): actor.checkpoint.async_save=True with a non-Megatron actor and resume_mode=auto. The PPO trainers
  skip writing latest_checkpointed_iteration.txt whenever async_save is set (trainer_base.py:1010-1020,
  ray_trainer.py:1037-1045), leaving it to the checkpoint manager; only the Megatron manager writes it
  (megatron_checkpoint_manager.py:1136-1146); FSDPCheckpointManager has no async_save at all. With no tracker,
  find_latest_ckpt_path returns None (utils/checkpoint/checkpoint_manager.py:238-242) and resume_mode=auto prints
  "Training from scratch" (trainer_base.py:856-863): a restarted run starts at step 0 and overwrites the checkpoints
  it saved (real case verl#7952). The fully async trainer writes the tracker itself (fully_async_trainer.py:974-977).

Which engines carry the path and the tracker out is derived from verl's source by tests/test_check_ckpt_store.py
(the registered backends, and what each checkpoint manager reads).
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import A, Ctx, Facts

HDFS, MODE, ASYNC = "trainer.default_hdfs_dir", "trainer.resume_mode", f"{A}.checkpoint.async_save"
# the engine backends whose checkpoint manager uploads to hdfs_path and writes the tracker after an async save
# (EngineRegistry backend "megatron": workers/engine/megatron, and mindspeed on NPU): tests/test_check_ckpt_store.py
CARRIES_OUT = ("megatron",)
# the entry points whose `_load_checkpoint` raises on default_hdfs_dir (legacy ray_trainer and its subclasses,
# fully async); main_ppo only with trainer.use_v1=False
REFUSING_ENTRIES = ("one_step_off", "fully_async")
# the entry points whose trainer skips the tracker under async_save (v1 trainer_base, legacy ray_trainer)
TRACKER_SKIPPING_ENTRIES = ("ppo", "one_step_off")


def _roles_dropping(c: Ctx, f: Facts) -> list[str]:
    roles = [(A, True), ("critic", f.use_critic)]
    return [f"{p}.strategy={c.v(f'{p}.strategy')}" for p, used in roles
            if used and str(c.v(f"{p}.strategy") or "fsdp") not in CARRIES_OUT]


def rule_hdfs_dir(c: Ctx, f: Facts) -> None:
    hdfs, entry = c.v(HDFS), getattr(c.src, "entry", "ppo")
    if hdfs in (None, "") or c.unknown(HDFS, MODE) or getattr(c.src, "recipe", None):
        return
    legacy = entry in REFUSING_ENTRIES or (entry == "ppo" and c.v("trainer.use_v1") is False)
    mode = c.v(MODE)
    if legacy and mode != "disable":
        where = (f"the {entry} trainer" if entry != "ppo" else "the legacy PPO trainer (trainer.use_v1=False)")
        c.add("VI923", "error", (HDFS, MODE),
              f"{HDFS}={hdfs} with {MODE}={mode}: {where} raises NotImplementedError('load from hdfs is not implemented "
              "yet') when it starts to resume, after the workers are built and whether or not a checkpoint exists "
              "(trainer/ppo/ray_trainer.py:1056-1058, fully_async_trainer.py:985-986)",
              f"remove {HDFS} (checkpoints go to trainer.default_local_dir; put that on shared storage), or set "
              f"{MODE}=disable" + (", or trainer.use_v1=True" if entry == "ppo" else ""))
        return
    dropping = _roles_dropping(c, f)
    if dropping and entry in ("ppo", *REFUSING_ENTRIES) and (c.int("trainer.save_freq") or 0) > 0:
        c.add("VI924", "warning", (HDFS, f"{A}.strategy"),
              f"{HDFS}={hdfs} with {', '.join(dropping)}: only verl's Megatron checkpoint manager copies a checkpoint "
              "to the HDFS path (megatron_checkpoint_manager.py:1126-1134); FSDPCheckpointManager never reads it "
              "(utils/checkpoint/fsdp_checkpoint_manager.py:272-290, 'Unused'): nothing reaches HDFS, and resume reads "
              "trainer.default_local_dir only (trainer/ppo/v1/trainer_base.py:856-862)",
              f"remove {HDFS}; set trainer.default_local_dir to shared storage (a mounted HDFS/NAS path), or copy "
              "global_step_N folders there yourself after each save")


def rule_async_tracker(c: Ctx, f: Facts) -> None:
    if c.v(ASYNC) is not True or getattr(c.src, "entry", "ppo") not in TRACKER_SKIPPING_ENTRIES \
            or getattr(c.src, "recipe", None) or c.unknown(MODE, f"{A}.strategy", "trainer.save_freq"):
        return
    strategy = str(c.v(f"{A}.strategy") or "fsdp")
    if strategy in CARRIES_OUT or c.v(MODE) != "auto" or (c.int("trainer.save_freq") or 0) <= 0:
        return
    c.add("VI925", "warning", (ASYNC, f"{A}.strategy", MODE),
          f"{ASYNC}=True with {A}.strategy={strategy}: verl's trainer skips writing latest_checkpointed_iteration.txt "
          "under async_save (trainer/ppo/v1/trainer_base.py:1010-1020) and only the Megatron checkpoint manager writes "
          f"it; the {strategy} engine saves synchronously and writes none, so {MODE}=auto finds no checkpoint "
          "(checkpoint_manager.py:238-242) and a restarted run trains from step 0 over its own checkpoints (verl#7952)",
          f"set {ASYNC}=False (the {strategy} engine saves synchronously either way)", fix=Fix(set={ASYNC: False}))
