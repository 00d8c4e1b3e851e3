"""Resume rules (VI839; VI926 below, the world a checkpoint was saved in): what verl 0.9.1's trainers assert about trainer.resume_from_path when the run starts,
after the workers are built and the GPUs booked.

Both PPO trainers read it the same way (site-packages/verl): with resume_mode=resume_path the path must be a string
holding "global_step_" (trainer/ppo/v1/trainer_base.py:866-867, ray_trainer.py:1073-1076), the text after its last
"global_step_" must be the step number (`int(path.split("global_step_")[-1])`, trainer_base.py:876,
ray_trainer.py:1083), and the actor is loaded from its `actor` folder (trainer_base.py:881). With resume_mode=auto
the trainers look for the newest checkpoint under default_local_dir and never read resume_from_path
(trainer_base.py:856-862): VI890 reports such a key as unread.
"""

from __future__ import annotations

import re

from wizard.check.rules.context import Ctx, Facts, local_path

MODE, PATH = "trainer.resume_mode", "trainer.resume_from_path"


def rule_resume(c: Ctx, f: Facts) -> None:
    mode, path = c.v(MODE), c.v(PATH)
    if c.unknown(MODE, PATH):
        return
    if mode != "resume_path":  # (auto never reads the path: VI890 says so, from verl's readers of the key)
        return
    if not isinstance(path, str) or "global_step_" not in path:
        c.add("VI839", "error", (PATH, MODE),
              f"{MODE}=resume_path needs {PATH} to name a global_step_N checkpoint folder, not {path!r}: verl asserts "
              "it at the start of training (v1/trainer_base.py:866-867)",
              f"set {PATH}=<trainer.default_local_dir>/global_step_N")
        return
    step = path.split("global_step_")[-1]
    if not step.isdigit():  # (a trailing slash too: int("50/") fails)
        head = path[: len(path) - len(step)]
        c.add("VI839", "error", (PATH,),
              f"{PATH}={path}: verl reads the step number as everything after the last 'global_step_' and "
              f"int({step!r}) fails (v1/trainer_base.py:876)",
              f"point it at the checkpoint folder itself, without a trailing slash: {head}{step.split('/')[0]}")
        return
    local = local_path(c, path)
    if local is not None and local.is_dir() and not (local / "actor").is_dir():
        c.add("VI839", "warning", (PATH,),
              f"{path} exists here but holds no actor/ folder, which verl loads the actor from "
              "(v1/trainer_base.py:881): an exported Hugging Face model is not a checkpoint verl can resume",
              "give the global_step_N folder that trainer.default_local_dir's checkpoints wrote")


# verl 0.9.1's SFT trainer (trainer/sft_trainer.py:83-96 → utils/checkpoint/checkpoint_handler.py) reads the same two
# keys another way: resume_path, and auto with a path given, assert that the path exists and holds "global_step_"
# (checkpoint_handler.py:203-216); the step is the FIRST global_step_<digits> in it (extract_step, :33-37); the
# engine then loads the checkpoint from that folder itself (:164), where the FSDP engine reads
# model_world_size_<W>_rank_<R>.pt (utils/checkpoint/fsdp_checkpoint_manager.py:213).
SFT_STEP = re.compile(r"global_step_(\d+)")


def rule_resume_sft(c: Ctx, f: Facts) -> None:
    mode, path = c.v(MODE), c.v(PATH)
    if c.unknown(MODE, PATH) or mode not in ("resume_path", "auto") or (mode == "auto" and path is None):
        return
    if not isinstance(path, str) or "global_step_" not in path:
        c.add("VI839", "error", (PATH, MODE),
              f"{MODE}={mode} with {PATH}={path!r}: verl's SFT trainer asserts the path holds 'global_step_' "
              "(utils/checkpoint/checkpoint_handler.py:208-216)",
              f"set {PATH}=<trainer.default_local_dir>/global_step_N" + (", or leave it null: auto finds the newest"
                                                                            if mode == "auto" else ""))
        return
    folder = path.rstrip("/").rsplit("/", 1)[-1]
    found = SFT_STEP.search(path)
    if not re.fullmatch(r"global_step_\d+", folder):
        head = path[: found.end()] if found else path
        c.add("VI839", "error", (PATH,),
              f"{PATH}={path}: verl's SFT trainer loads the checkpoint from this folder itself "
              "(checkpoint_handler.py:164) and takes the step from its first 'global_step_N' "
              f"({found.group(0) if found else 'none'}, :33-37): inside or beside a checkpoint folder the engine "
              "finds no model shards (fsdp_checkpoint_manager.py:213)",
              f"point it at the checkpoint folder itself: {head}")
        return
    local = local_path(c, path)
    if local is not None and local.is_dir() and not any(local.glob("model_world_size_*_rank_*.pt")) \
            and c.v("engine.strategy") in ("fsdp", "fsdp2"):
        c.add("VI839", "warning", (PATH,),
              f"{path} exists here but holds no model_world_size_*_rank_*.pt shards, which verl's FSDP engine loads "
              "(fsdp_checkpoint_manager.py:213): an exported Hugging Face model is not a checkpoint it can resume",
              "give the global_step_N folder that trainer.default_local_dir's checkpoints wrote")


# VI926: the FSDP checkpoint manager (behind the fsdp, fsdp2 and veomni engines: workers/engine/fsdp/
# transformer_impl.py:217, veomni/transformer_impl.py:253) names every shard after the world it was saved in and opens
# the one of its own world and rank: <role>/model_world_size_{W}_rank_{r}.pt, optim_…, extra_state_… (utils/checkpoint/
# fsdp_checkpoint_manager.py:213-214, 232-233, 240-243). A checkpoint saved on a different number of GPUs has no such
# file: FileNotFoundError on every rank once the workers are built (real case verl#2265). Which folder a PPO trainer
# resumes: resume_path → resume_from_path; auto → the global_step_N that default_local_dir/
# latest_checkpointed_iteration.txt names (trainer/ppo/v1/trainer_base.py:854-881, utils/checkpoint/
# checkpoint_manager.py:222-252). Actor and critic train on the trainer's pool, trainer.nnodes × n_gpus_per_node.
SHARD = re.compile(r"(?:model|optim|extra_state)_world_size_(\d+)_rank_\d+\.pt")
FSDP_MANAGER = ("fsdp", "fsdp2", "veomni")


def resumed_folder(c: Ctx):
    """The global_step_N folder on this machine that verl's resume loads, or None: resume_path's own folder, or for
    auto the step default_local_dir's latest_checkpointed_iteration.txt names (trainer/ppo/v1/trainer_base.py:854-881;
    the tracker file is read up to 64 bytes)."""
    mode, path = c.v(MODE), c.v(PATH)
    if mode == "resume_path":
        return local_path(c, path) if isinstance(path, str) and "global_step_" in path else None
    if mode != "auto" or not isinstance(c.v("trainer.default_local_dir"), str):
        return None
    root = local_path(c, c.v("trainer.default_local_dir"))
    tracker = root / "latest_checkpointed_iteration.txt" if root is not None else None
    if tracker is None or not tracker.is_file():
        return None
    with tracker.open("rb") as fh:
        step = fh.read(64).decode("utf-8", errors="replace").strip()
    return root / f"global_step_{step}" if step.isdigit() else None


def rule_resume_world(c: Ctx, f: Facts) -> None:
    if f.n_gpus is None or c.unknown(MODE, PATH, "trainer.default_local_dir"):
        return
    folder = resumed_folder(c)
    if folder is None or not folder.is_dir():
        return
    for role, strategy_key, used in (("actor", "actor_rollout_ref.actor.strategy", True),
                                     ("critic", "critic.strategy", f.use_critic)):
        if not used or str(c.v(strategy_key) or "fsdp") not in FSDP_MANAGER or not (folder / role).is_dir():
            continue
        worlds = sorted({int(m.group(1)) for p in (folder / role).iterdir() if (m := SHARD.fullmatch(p.name))})
        if not worlds or worlds == [f.n_gpus]:
            continue
        saved = "/".join(map(str, worlds))
        c.add("VI926", "error", ("trainer.nnodes", "trainer.n_gpus_per_node", MODE),
              f"{folder / role} holds shards saved by {saved} GPUs (*_world_size_{saved}_rank_*.pt) and this run trains "
              f"the {role} on trainer.nnodes × n_gpus_per_node = {f.n_gpus}: verl's FSDP checkpoint manager opens "
              f"model_world_size_{f.n_gpus}_rank_<r>.pt (utils/checkpoint/fsdp_checkpoint_manager.py:213-214), which "
              "is not there: FileNotFoundError once the workers are built",
              f"resume on {saved} GPUs (trainer.nnodes × n_gpus_per_node), or start a new run from its weights: "
              f"`python -m verl.model_merger merge --backend fsdp --local_dir {folder / role} --target_dir <out>` "
              f"then actor_rollout_ref.model.path=<out> and {MODE}=disable")
