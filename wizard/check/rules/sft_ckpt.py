"""What verl 0.9.1's SFT trainer does with its checkpoint handler that a run cannot see (site-packages/verl):

- VI697 (warning): trainer.resume_from_path holding more than one global_step_<N> (a checkpoint kept inside an older
  run's folder). The SFT trainer (trainer/sft_trainer.py:73 → utils/checkpoint/checkpoint_handler.py) takes that
  path as it is for resume_mode=resume_path, and for auto with a path given (:203-216, which only assert that it
  exists and holds "global_step_"), loads the model and the dataloader from it (:164-166), and restores the step
  counter from extract_step, `re.search(r"global_step_(\\d+)", path)`: the FIRST one in the path (:33-37, :151).
  The run goes on from the last folder's weights with the step, the LR schedule position, the save names and the
  remaining budget of the first: no error (real cases PR verl#7257, PR verl#6543). The PPO trainers take the last
  one (`split("global_step_")[-1]`, trainer/ppo/v1/trainer_base.py:876): not this rule. A path whose last folder is
  not global_step_<N> is VI839's.
- VI698 (warning): checkpoint.async_save=True on the SFT trainer's Megatron engine. sft_trainer.py:144 builds the
  checkpoint node into CheckpointConfig, whose async_save field (trainer/config/config.py:49) the trainer hands the
  engine (sft_trainer.py:170); the Megatron engine's MegatronCheckpointManager (workers/engine/megatron/
  transformer_impl.py:627-629) then schedules the dist-checkpoint writes on Megatron's async queue and attaches the
  manifest, tracker and retention to the last request (utils/checkpoint/megatron_checkpoint_manager.py:1164-1169,
  :1136-1146), to run when the queue is finalized. Nothing in the SFT trainers drives that queue (no finalize call in
  trainer/sft_trainer.py or sft_trainer_ray.py; the legacy PPO trainer calls the workers' finalize hook,
  ray_trainer.py:1467-1468), while the SFT handler writes latest_checkpointed_iteration.txt as soon as save returns
  (checkpoint_handler.py:126-133): a resume, or the last step's checkpoint, may read writes that never finished
  (real case PR verl#7363, open). Which engines read async_save: ckpt_store.CARRIES_OUT, derived from verl's
  checkpoint managers by tests/test_check_ckpt_store.py; that the SFT trainers never finalize is read from their
  source by tests/test_check_sft_ckpt.py.
"""

from __future__ import annotations

import re

from wizard.check.report import Fix
from wizard.check.rules.checkpoints import MODE, PATH
from wizard.check.rules.ckpt_store import CARRIES_OUT
from wizard.check.rules.context import Ctx, Facts

STEP = re.compile(r"global_step_(\d+)")
ASYNC = "checkpoint.async_save"


def rule_sft_resume_step(c: Ctx, f: Facts) -> None:
    mode, path = c.v(MODE), c.v(PATH)
    if c.unknown(MODE, PATH) or mode not in ("resume_path", "auto") or not isinstance(path, str):
        return
    folder = path.rstrip("/").rsplit("/", 1)[-1]
    steps = STEP.findall(path)
    if len(steps) < 2 or not re.fullmatch(r"global_step_\d+", folder) or steps[0] == steps[-1]:
        return  # one step in the path, or the last folder is not a checkpoint (VI839), or both say the same
    c.add("VI697", "warning", (PATH, MODE),
          f"{PATH}={path} holds {len(steps)} global_step_N folders: verl's SFT trainer loads the weights and the "
          f"dataloader from {folder} but restores the step counter from the first one, global_step_{steps[0]} "
          "(utils/checkpoint/checkpoint_handler.py:33-37, 151): the run goes on as step "
          f"{steps[0]} with step {steps[-1]}'s model, and its LR schedule, save names and step budget follow",
          f"move or link {folder} to a path with no other global_step_N in it (e.g. under "
          f"trainer.default_local_dir) and point {PATH} there")


def _engine(c: Ctx) -> str:
    strategy = c.v("engine.strategy")
    if isinstance(strategy, str):
        return strategy
    target = str(c.v("engine._target_") or "")
    return "megatron" if target.endswith("McoreEngineConfig") else target


def rule_sft_async_save(c: Ctx, f: Facts) -> None:
    if c.v(ASYNC) is not True or c.unknown(ASYNC) or _engine(c) not in CARRIES_OUT:
        return
    c.add("VI698", "warning", (ASYNC, "engine"),
          f"{ASYNC}=True on the Megatron engine: verl's Megatron checkpoint manager queues the writes and leaves the "
          "manifest and tracker to the queue's finalize (utils/checkpoint/megatron_checkpoint_manager.py:1164-1169), "
          "which verl's SFT trainer never runs, while it writes latest_checkpointed_iteration.txt at once "
          "(utils/checkpoint/checkpoint_handler.py:126-133): a resume may load a checkpoint whose writes never "
          "finished, the last one especially",
          f"drop {ASYNC} (save synchronously) for SFT", fix=Fix(delete=[ASYNC]))
