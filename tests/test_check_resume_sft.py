"""VI839 on an `sft_trainer` launch: trainer.resume_mode / resume_from_path as verl 0.9.1's SFT trainer reads them
(real case: PR verl#7257, a resume path pointing inside the checkpoint folder, whose step verl took from the wrong
component). The oracle is verl's own CheckpointHandler.load_checkpoint, run unbound on a stand-in handler whose engine
loads as verl's FSDP checkpoint manager does: the rank's `model_world_size_<W>_rank_<R>.pt` inside the path it is
given (utils/checkpoint/fsdp_checkpoint_manager.py:213). Whatever verl raises on, check calls an error; a path it
resumes gets none.
"""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

from wizard.check.lint import check

WORLD = 8


def _checkpoints(root: Path) -> Path:
    """A default_local_dir as verl's SFT trainer leaves it: global_step_100 with the FSDP shards and an export."""
    step = root / "ck" / "global_step_100"
    (step / "huggingface").mkdir(parents=True)
    for rank in range(WORLD):
        (step / f"model_world_size_{WORLD}_rank_{rank}.pt").write_bytes(b"")
    (step / "huggingface" / "config.json").write_text("{}")
    return root / "ck"


def _verl_resumes(mode: str, path: str | None, default_dir: Path) -> bool:
    from verl.utils.checkpoint.checkpoint_handler import CheckpointHandler

    def load(checkpoint_path: str) -> None:  # FSDPCheckpointManager.load_checkpoint's first read, rank 0
        shard = os.path.join(checkpoint_path, f"model_world_size_{WORLD}_rank_0.pt")
        if not os.path.exists(shard):
            raise FileNotFoundError(shard)

    me = types.SimpleNamespace(resume_mode=mode, resume_from_path=path, default_local_dir=str(default_dir), rank=0,
                               dp_rank=0, engine=types.SimpleNamespace(load_checkpoint=load))
    me._determine_resume_path = types.MethodType(CheckpointHandler._determine_resume_path, me)
    me._find_latest_checkpoint = types.MethodType(CheckpointHandler._find_latest_checkpoint, me)
    me._load_dataloader_state = lambda p: None
    try:
        CheckpointHandler.load_checkpoint(me)
    except (AssertionError, FileNotFoundError):
        return False
    return True


def _vi839(tmp_path: Path, mode: str, path: str | None, default_dir: Path):
    script = tmp_path / "sft.sh"
    script.write_text(
        f"torchrun --standalone --nnodes=1 --nproc_per_node={WORLD} -m verl.trainer.sft_trainer "
        "data.train_files=/data/sft/train.parquet data.val_files=/data/sft/val.parquet data.messages_key=messages "
        f"model.path=Qwen/Qwen2.5-0.5B-Instruct trainer.default_local_dir={default_dir} trainer.resume_mode={mode} "
        + (f"trainer.resume_from_path={path} " if path is not None else "") + f"trainer.n_gpus_per_node={WORLD}\n")
    report = check(str(script))
    return [f.problem for f in report.findings if f.problem.rule == "VI839"]


CASES = {
    "the_step_folder": ("resume_path", "{ck}/global_step_100"),
    "with_a_trailing_slash": ("resume_path", "{ck}/global_step_100/"),
    "inside_it": ("resume_path", "{ck}/global_step_100/huggingface"),
    "the_parent": ("resume_path", "{ck}"),
    "auto_with_the_step_folder": ("auto", "{ck}/global_step_100"),
    "auto_with_the_export": ("auto", "{ck}/global_step_100/huggingface"),
    "auto_without_a_path": ("auto", None),
}


@pytest.mark.verl
@pytest.mark.parametrize("case", sorted(CASES))
def test_check_errs_exactly_where_verls_sft_resume_fails(tmp_path, case):
    ck = _checkpoints(tmp_path)
    mode, template = CASES[case]
    path = template.format(ck=ck) if template is not None else None
    resumes = _verl_resumes(mode, path, ck)
    errors = [p for p in _vi839(tmp_path, mode, path, ck) if p.severity == "error"]
    assert bool(errors) == (not resumes), (case, resumes, [e.message for e in errors])
    if errors and path and "global_step_" in path:
        assert errors[0].hint.endswith(f"{ck}/global_step_100")


@pytest.mark.verl
def test_the_cases_have_both_outcomes(tmp_path):
    ck = _checkpoints(tmp_path)
    outcomes = {case: _verl_resumes(mode, t.format(ck=ck) if t else None, ck) for case, (mode, t) in CASES.items()}
    assert {c for c, ok in outcomes.items() if not ok} == {"inside_it", "the_parent", "auto_with_the_export"}


def test_an_export_named_like_a_checkpoint_is_a_warning(tmp_path):
    """A global_step_N folder with no shards (a Hugging Face export copied under that name): a warning, since the
    engine's files depend on the engine (an FSDP run's shards are named above)."""
    export = tmp_path / "exports" / "global_step_7"
    export.mkdir(parents=True)
    (export / "config.json").write_text("{}")
    [hit] = _vi839(tmp_path, "resume_path", str(export), tmp_path / "ck")
    assert hit.severity == "warning" and "model_world_size_" in hit.message


def test_ppo_launches_keep_their_own_reading(tmp_path):
    """The PPO trainers read the step after the last global_step_ and resume only with resume_path: an SFT rule
    must not run on them (tests/test_check_resume.py holds them to verl's PPO trainer)."""
    script = tmp_path / "ppo.sh"
    script.write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm trainer.resume_mode=auto "
                      "trainer.resume_from_path=/nowhere/here\n")
    assert not [f for f in check(str(script)).findings if f.problem.rule == "VI839"]
