"""VI697 / VI698: verl 0.9.1's SFT checkpoint handler, held to verl's own code (real cases PR verl#7257, #6543, #7363).

VI697's oracle is verl's CheckpointHandler.load_checkpoint, run unbound on a stand-in handler whose engine records the
folder it is told to load: the step verl restores must be the step of the folder it loads, and the rule warns exactly
where verl's two disagree. VI698's table is read from verl's source: CheckpointConfig has async_save, the SFT trainer
hands its checkpoint config to the engine, the Megatron checkpoint manager queues async writes with the bookkeeping as
their finalize, and neither SFT trainer drives the queue, while the handler writes the tracker at once.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import types
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules import ckpt_store

VERL = Path(importlib.util.find_spec("verl").origin).parent
WORLD = 8
LAUNCH = f"torchrun --standalone --nnodes=1 --nproc_per_node={WORLD} -m verl.trainer.sft_trainer"
ARGS = ("data.train_files=/data/sft/train.parquet data.val_files=/data/sft/val.parquet data.messages_key=messages "
        "model.path=Qwen/Qwen2.5-0.5B-Instruct trainer.n_gpus_per_node=8 trainer.logger=[console] ")


def _run(tmp_path: Path, extra: str):
    script = tmp_path / "sft.sh"
    script.write_text(f"{LAUNCH} {ARGS}{extra}\n")
    return check(str(script))


def _verl_resume(mode: str, path: str, default_dir: Path) -> tuple[int, str]:
    """(the step verl's SFT handler restores, the folder its engine loads)."""
    from verl.utils.checkpoint.checkpoint_handler import CheckpointHandler

    loaded: list[str] = []
    me = types.SimpleNamespace(resume_mode=mode, resume_from_path=path, default_local_dir=str(default_dir), rank=0,
                               dp_rank=0, engine=types.SimpleNamespace(load_checkpoint=loaded.append))
    me._determine_resume_path = types.MethodType(CheckpointHandler._determine_resume_path, me)
    me._find_latest_checkpoint = types.MethodType(CheckpointHandler._find_latest_checkpoint, me)
    me._load_dataloader_state = lambda p: None
    step = CheckpointHandler.load_checkpoint(me)
    return step, loaded[0]


PATHS = [  # (layout under tmp_path, whether verl restores another step than the folder it loads)
    ("old/global_step_900/archive/global_step_12", True),  # PR verl#7257
    ("exp/global_step_100/run/global_step_250", True),  # PR verl#6543
    ("runs/global_step_7/copy/global_step_7", False),  # same step twice: harmless
    ("ck/global_step_40", False),  # the control: a checkpoint where the trainer saved it
]


@pytest.mark.parametrize("mode", ["resume_path", "auto"])
@pytest.mark.parametrize("layout,wrong", PATHS)
def test_vi697_warns_exactly_where_verl_restores_another_step(tmp_path, mode, layout, wrong):
    folder = tmp_path / layout
    folder.mkdir(parents=True)
    for rank in range(WORLD):
        (folder / f"model_world_size_{WORLD}_rank_{rank}.pt").write_bytes(b"")
    step, loaded = _verl_resume(mode, str(folder), tmp_path / "fresh")
    assert (step != int(Path(loaded).name.split("_")[-1])) is wrong  # verl's own answer
    report = _run(tmp_path, f"trainer.default_local_dir={tmp_path}/fresh trainer.resume_mode={mode} "
                            f"trainer.resume_from_path={folder}")
    hits = [f.problem for f in report.findings if f.problem.rule == "VI697"]
    assert bool(hits) is wrong
    if wrong:
        first = re.search(r"global_step_(\d+)", layout).group(1)
        assert hits[0].severity == "warning" and f"global_step_{first}" in hits[0].message
        assert "trainer.resume_from_path" in hits[0].message and "move or link" in hits[0].hint
    assert "VI839" not in report.ids()


def test_vi697_leaves_disable_and_auto_without_a_path_alone(tmp_path):
    for extra in (f"trainer.resume_mode=disable trainer.resume_from_path={tmp_path}/global_step_9/x/global_step_3",
                  "trainer.resume_mode=auto"):
        assert "VI697" not in _run(tmp_path, extra).ids()


# --- VI698: the table, from verl's source --------------------------------------------------------------------------

def _src(rel: str) -> str:
    return (VERL / rel).read_text(encoding="utf-8")


def test_sft_async_save_reaches_the_megatron_manager_and_is_never_finalized():
    from verl.trainer.config import CheckpointConfig

    assert "async_save" in {f.name for f in dataclasses.fields(CheckpointConfig)}
    sft = _src("trainer/sft_trainer.py")
    assert "omega_conf_to_dataclass(self.config.checkpoint)" in sft
    assert "checkpoint_config=self.checkpoint_config" in sft
    manager = _src("utils/checkpoint/megatron_checkpoint_manager.py")
    assert "add_finalize_fn(finalize_save_fn)" in manager and "schedule_async_request" in manager
    assert "checkpoint_config=self.checkpoint_config" in _src("workers/engine/megatron/transformer_impl.py")
    for rel in ("trainer/sft_trainer.py", "trainer/sft_trainer_ray.py"):  # nothing drains the queue
        text = _src(rel)
        assert not re.search(r"finalize|async_calls", text), rel
    handler = _src("utils/checkpoint/checkpoint_handler.py")  # the tracker is written as soon as save returns
    save = handler[handler.index("def save_checkpoint"):handler.index("def load_checkpoint")]
    assert save.index("self.engine.save_checkpoint(") < save.index("get_checkpoint_tracker_filename")
    assert ckpt_store.CARRIES_OUT == ("megatron",)  # derived by tests/test_check_ckpt_store.py


MCORE = "engine=megatron optim=megatron engine.tensor_model_parallel_size=2 trainer.default_local_dir=/tmp/ck "


def test_vi698_warns_on_the_megatron_engine_with_async_save(tmp_path):
    report = _run(tmp_path, MCORE + "+checkpoint.async_save=True")
    hit = next(f for f in report.findings if f.problem.rule == "VI698")
    assert hit.problem.severity == "warning" and "checkpoint.async_save=True" in hit.problem.message
    assert hit.fix is not None and hit.fix.delete == ["checkpoint.async_save"]
    assert "VI802" not in report.ids()  # CheckpointConfig's field, read by the engine: not an ignored key


@pytest.mark.parametrize("extra", [MCORE + "+checkpoint.async_save=False", MCORE,
                                   "engine=fsdp +checkpoint.async_save=True"])
def test_vi698_control_stays_clean(tmp_path, extra):
    report = _run(tmp_path, extra)
    assert "VI698" not in report.ids() and "VI802" not in report.ids()


def test_an_unknown_checkpoint_field_is_refused_like_verls_dataclass(tmp_path):
    from omegaconf import OmegaConf

    from verl.utils.config import omega_conf_to_dataclass

    node = OmegaConf.create({"_target_": "verl.trainer.config.CheckpointConfig", "async_savee": True})
    with pytest.raises(Exception):  # noqa: B017 - verl's own conversion refuses it
        omega_conf_to_dataclass(node)
    assert "VI804" in _run(tmp_path, "+checkpoint.async_savee=True").ids()
