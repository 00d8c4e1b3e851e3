"""VI923-VI926: where verl 0.9.1 puts a checkpoint for a later resume, held to verl's own code.

The oracles are verl's methods compiled from its source and run unbound on stand-in trainers (importing the trainers
pulls in transfer_queue and the rollout router's dependencies, which a CPU install lacks), verl's real
find_latest_ckpt_path, and verl's FSDPCheckpointManager.load_checkpoint on a stand-in manager. Each rule's table
(which engines carry out default_hdfs_dir and async_save) is derived here from verl's engine registry and checkpoint
managers. Real cases: verl#250 (default_hdfs_dir), verl#7952 (async_save on FSDP), verl#2265 (resume on another
number of GPUs).
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import os
import re
import types
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules import ckpt_store

VERL = Path(importlib.util.find_spec("verl").origin).parent
BASE = ["actor_rollout_ref.rollout.name=vllm", "trainer.save_freq=10"]
HDFS = "trainer.default_hdfs_dir=hdfs://nn:8020/user/me/run"


def _method(relpath: str, cls_name: str, name: str, **names):
    """verl's own method, compiled from its source file into a namespace holding `names`."""
    src = VERL / relpath
    tree = ast.parse(src.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace = {"os": os, "logger": logging.getLogger("verl-oracle"), "tq": None, **names}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(src), "exec"), namespace)  # noqa: S102 - verl's code
    return namespace[name]


def _ids(*overrides: str, severity: str | None = None, **kw) -> list[str]:
    return check(None, [*BASE, *overrides], env={}, **kw).ids(severity) if severity else \
        check(None, [*BASE, *overrides], env={}, **kw).ids()


# --- the tables, from verl's source -----------------------------------------------------------------------------

def _registered_backends() -> dict[str, Path]:
    """backend → the engine file that registers it (EngineRegistry.register(..., backend=...))."""
    out: dict[str, Path] = {}
    for path in (VERL / "workers" / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "register":
                for kw in node.keywords:
                    if kw.arg == "backend":
                        value = ast.literal_eval(kw.value)
                        for b in [value] if isinstance(value, str) else value:
                            out.setdefault(b, path)
    return out


def _reads(fn: ast.FunctionDef, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(fn))


def _function(path: Path, cls_name: str, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_only_megatron_managers_carry_out_hdfs_and_async_save():
    backends = _registered_backends()
    assert {"fsdp", "fsdp2", "megatron", "veomni"} <= set(backends)
    manager_of = {b: ("MegatronCheckpointManager" if "megatron" in p.parts or "from ..megatron import" in p.read_text()
                      else "FSDPCheckpointManager" if p.parent.name == "fsdp" or "FSDPCheckpointManager" in p.read_text()
                      else "own")
                  for b, p in backends.items()}
    carriers = {b for b, m in manager_of.items() if m == "MegatronCheckpointManager"}
    assert carriers == set(ckpt_store.CARRIES_OUT)
    # FSDPCheckpointManager: save_checkpoint never reads hdfs_path, and nothing in it knows async_save
    fsdp = VERL / "utils" / "checkpoint" / "fsdp_checkpoint_manager.py"
    assert not _reads(_function(fsdp, "FSDPCheckpointManager", "save_checkpoint"), "hdfs_path")
    assert "async_save" not in fsdp.read_text(encoding="utf-8")
    # the engines with their own checkpointer drop hdfs_path too
    for b, m in manager_of.items():
        if m == "own":
            tree = ast.parse(backends[b].read_text(encoding="utf-8"))
            saves = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "save_checkpoint"]
            assert saves and not any(_reads(fn, "hdfs_path") for fn in saves), b
    # Megatron's finalize uploads and writes the tracker after an async save
    final = _function(VERL / "utils" / "checkpoint" / "megatron_checkpoint_manager.py", "MegatronCheckpointManager",
                      "_finalize_save")
    text = ast.unparse(final)
    assert "hdfs_io.copy" in text and "async_save" in text and "latest_checkpointed_iteration.txt" in text


# --- VI925: async_save on a non-Megatron actor ------------------------------------------------------------------

def _verl_saves_then_finds(tmp_path: Path, async_save: bool) -> str | None:
    """verl's v1 PPOTrainer._save_checkpoint on a stand-in whose worker group saves as the FSDP engine does (its
    files, no tracker: FSDPCheckpointManager has none), then verl's find_latest_ckpt_path: what auto-resume finds."""
    import torch
    from omegaconf import OmegaConf

    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    save = _method("trainer/ppo/v1/trainer_base.py", "PPOTrainer", "_save_checkpoint", torch=torch)
    cfg = OmegaConf.create({"trainer": {"default_local_dir": str(tmp_path), "default_hdfs_dir": None},
                            "actor_rollout_ref": {"actor": {"checkpoint": {"async_save": async_save}}}})

    def fsdp_save(local_path, hdfs_path, step, max_ckpt_to_keep=None):
        os.makedirs(local_path, exist_ok=True)
        Path(local_path, "model_world_size_1_rank_0.pt").write_bytes(b"")

    me = types.SimpleNamespace(config=cfg, global_steps=20, use_critic=False, trainer_mode="sync",
                               actor_rollout_wg=types.SimpleNamespace(save_checkpoint=fsdp_save),
                               train_dataloader=types.SimpleNamespace(state_dict=lambda: {}),
                               checkpoint_callback=types.SimpleNamespace(on_save=lambda **_: None))
    save(me)
    return find_latest_ckpt_path(str(tmp_path))


@pytest.mark.parametrize("async_save", [True, False])
def test_vi925_warns_exactly_when_verls_auto_resume_finds_nothing(tmp_path, async_save):
    found = _verl_saves_then_finds(tmp_path, async_save)
    assert (found is None) == async_save
    ids = _ids(f"actor_rollout_ref.actor.checkpoint.async_save={async_save}", severity="warning")
    assert ("VI925" in ids) == (found is None)


def test_vi925_names_the_key_the_value_and_the_fix():
    report = check(None, [*BASE, "actor_rollout_ref.actor.checkpoint.async_save=True"], env={})
    (hit,) = [f for f in report.findings if f.problem.rule == "VI925"]
    assert "async_save=True" in hit.problem.message and "strategy=fsdp" in hit.problem.message
    assert hit.fix.set == {"actor_rollout_ref.actor.checkpoint.async_save": False}


@pytest.mark.parametrize("other", ["trainer.resume_mode=disable", "trainer.save_freq=-1",
                                   "trainer.resume_mode=resume_path"])
def test_vi925_quiet_where_the_tracker_is_not_read(other):
    # disable never resumes; save_freq ≤ 0 saves nothing (VI916); resume_path names its folder itself
    extra = ["trainer.resume_from_path=/ckpt/global_step_10"] if "resume_path" in other else []
    assert "VI925" not in _ids("actor_rollout_ref.actor.checkpoint.async_save=True", other, *extra)


def test_vi925_quiet_on_megatron_which_writes_the_tracker_itself():
    assert "VI925" not in _ids("model_engine=megatron", "actor_rollout_ref.actor.checkpoint.async_save=True")


# --- VI923 / VI924: default_hdfs_dir -----------------------------------------------------------------------------

def _verl_load(relpath: str, cls_name: str, hdfs: str | None, tmp_path: Path):
    """verl's _load_checkpoint (legacy or v1) with resume_mode=auto and an empty default_local_dir."""
    from omegaconf import OmegaConf

    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    load = _method(relpath, cls_name, "_load_checkpoint", find_latest_ckpt_path=find_latest_ckpt_path)
    cfg = OmegaConf.create({"trainer": {"resume_mode": "auto", "resume_from_path": None, "default_hdfs_dir": hdfs,
                                        "default_local_dir": str(tmp_path), "del_local_ckpt_after_load": False}})
    me = types.SimpleNamespace(config=cfg, use_critic=False, trainer_mode="sync", global_steps=0)
    try:
        load(me)
    except Exception as exc:  # noqa: BLE001 - what verl raises is the point
        return exc
    return None


@pytest.mark.parametrize("use_v1", [False, True])
@pytest.mark.parametrize("hdfs", [None, "hdfs://nn:8020/user/me/run"])
def test_vi923_errs_exactly_where_verls_trainer_raises(tmp_path, use_v1, hdfs):
    relpath, cls = ("trainer/ppo/v1/trainer_base.py", "PPOTrainer") if use_v1 else \
        ("trainer/ppo/ray_trainer.py", "RayPPOTrainer")
    raised = _verl_load(relpath, cls, hdfs, tmp_path)
    assert raised is None or isinstance(raised, NotImplementedError)
    overrides = [f"trainer.use_v1={use_v1}"] + ([f"trainer.default_hdfs_dir={hdfs}"] if hdfs else [])
    assert ("VI923" in _ids(*overrides, severity="error")) == (raised is not None)


def test_vi923_the_one_step_off_trainer_inherits_the_refusal():
    src = (VERL / "experimental" / "separation" / "ray_trainer.py").read_text(encoding="utf-8")
    assert "class SeparateRayPPOTrainer(RayPPOTrainer)" in src and "def _load_checkpoint" not in src
    assert "VI923" not in _ids(HDFS, "trainer.resume_mode=disable", "trainer.use_v1=False", severity="error")


def test_vi924_verl_hands_the_path_on_and_fsdp_drops_it(tmp_path):
    import torch
    from omegaconf import OmegaConf

    save = _method("trainer/ppo/v1/trainer_base.py", "PPOTrainer", "_save_checkpoint", torch=torch)
    handed = []
    cfg = OmegaConf.create({"trainer": {"default_local_dir": str(tmp_path), "default_hdfs_dir": "hdfs://nn/run"},
                            "actor_rollout_ref": {"actor": {"checkpoint": {"async_save": False}}}})
    me = types.SimpleNamespace(
        config=cfg, global_steps=5, use_critic=False, trainer_mode="sync",
        actor_rollout_wg=types.SimpleNamespace(save_checkpoint=lambda lp, hp, *a, **k: handed.append(hp)),
        train_dataloader=types.SimpleNamespace(state_dict=lambda: {}),
        checkpoint_callback=types.SimpleNamespace(on_save=lambda **_: None))
    save(me)
    assert handed == ["hdfs://nn/run/global_step_5/actor"]  # verl means it to be used ...
    fsdp = VERL / "utils" / "checkpoint" / "fsdp_checkpoint_manager.py"
    assert not _reads(_function(fsdp, "FSDPCheckpointManager", "save_checkpoint"), "hdfs_path")  # ... FSDP drops it
    hit = [f.problem for f in check(None, [*BASE, HDFS], env={}).findings if f.problem.rule == "VI924"]
    assert hit and hit[0].severity == "warning" and "hdfs://nn:8020/user/me/run" in hit[0].message
    assert "strategy=fsdp" in hit[0].message


def test_vi924_quiet_on_megatron_and_without_the_key():
    assert "VI924" not in _ids(HDFS, "model_engine=megatron")
    assert not {"VI923", "VI924"} & set(_ids())


# --- VI926: resume on another number of GPUs ---------------------------------------------------------------------

def _shards(folder: Path, world: int) -> Path:
    actor = folder / "actor"
    actor.mkdir(parents=True)
    for rank in range(world):
        for kind in ("model", "optim", "extra_state"):
            (actor / f"{kind}_world_size_{world}_rank_{rank}.pt").write_bytes(b"")
    return actor


def _verl_loads_shard(actor: Path, world: int, monkeypatch) -> Exception | None:
    """verl's FSDPCheckpointManager.load_checkpoint, rank 0 of `world`, on a stand-in manager holding a plain module
    (get_fsdp_state_ctx gives a null context for it); torch.distributed.barrier, its last call, is stubbed."""
    import torch

    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

    model = torch.nn.Linear(2, 2)
    for p in actor.glob(f"model_world_size_{world}_rank_0.pt"):
        torch.save(model.state_dict(), p)
    monkeypatch.setattr(torch.distributed, "barrier", lambda *a, **k: None)
    me = types.SimpleNamespace(should_load_model=True, should_load_optimizer=False, should_load_extra=False,
                               model=model, optimizer=None, world_size=world, rank=0,
                               is_lora_only_state_dict=lambda sd: False)
    try:
        FSDPCheckpointManager.load_checkpoint(me, str(actor))
    except Exception as exc:  # noqa: BLE001
        return exc
    return None


@pytest.mark.parametrize("saved,gpus", [(16, 8), (8, 8), (4, 8)])
def test_vi926_errs_exactly_where_verls_manager_finds_no_shard(tmp_path, monkeypatch, saved, gpus):
    folder = tmp_path / "global_step_40"
    actor = _shards(folder, saved)
    raised = _verl_loads_shard(actor, gpus, monkeypatch)
    assert raised is None or isinstance(raised, FileNotFoundError)
    ids = _ids("trainer.resume_mode=resume_path", f"trainer.resume_from_path={folder}", "trainer.nnodes=1",
               f"trainer.n_gpus_per_node={gpus}", severity="error")
    assert ("VI926" in ids) == (raised is not None)


def test_vi926_auto_follows_the_tracker(tmp_path):
    _shards(tmp_path / "global_step_40", 16)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("40")
    report = check(None, [*BASE, f"trainer.default_local_dir={tmp_path}", "trainer.n_gpus_per_node=8"], env={})
    (hit,) = [f.problem for f in report.errors if f.problem.rule == "VI926"]
    assert "16" in hit.message and "= 8" in hit.message and re.search(r"resume on 16 GPUs", hit.hint)
    # no tracker: verl trains from scratch, nothing to say
    (tmp_path / "latest_checkpointed_iteration.txt").unlink()
    assert "VI926" not in check(None, [*BASE, f"trainer.default_local_dir={tmp_path}"], env={}).ids()


def test_vi926_reads_the_critic_too(tmp_path):
    folder = tmp_path / "global_step_3"
    _shards(folder, 8)
    critic = folder / "critic"
    critic.mkdir()
    (critic / "model_world_size_4_rank_0.pt").write_bytes(b"")
    report = check(None, [*BASE, "algorithm.adv_estimator=gae", "trainer.resume_mode=resume_path",
                          f"trainer.resume_from_path={folder}", "trainer.n_gpus_per_node=8"], env={})
    hits = [f.problem.message for f in report.errors if f.problem.rule == "VI926"]
    assert len(hits) == 1 and "critic" in hits[0]
