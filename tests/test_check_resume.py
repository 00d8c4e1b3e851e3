"""VI839: trainer.resume_from_path as verl 0.9.1's trainer reads it. The oracle is verl's own
PPOTrainer._load_checkpoint (trainer/ppo/v1/trainer_base.py), run unbound on a stand-in trainer whose worker group
records what it is asked to load: whatever it raises on, `check` calls an error; a path it accepts gets none.
The real case: a run resumed from an exported Hugging Face folder instead of a checkpoint (verl-project/verl#2767).
"""

from __future__ import annotations

import types

import pytest

from wizard.check.lint import check

BASE = ["actor_rollout_ref.rollout.name=vllm"]


def _verl_load_checkpoint():
    """verl's own PPOTrainer._load_checkpoint, compiled from its source: importing trainer_base pulls in
    transfer_queue and the rollout router's dependencies, which a CPU install lacks; the method itself needs only os,
    a logger, verl's find_latest_ckpt_path (the real one) and, in async modes, transfer_queue (left out: this test
    runs the sync mode)."""
    import ast
    import importlib.util
    import logging
    import os
    from pathlib import Path

    src = Path(importlib.util.find_spec("verl").origin).parent / "trainer" / "ppo" / "v1" / "trainer_base.py"
    tree = ast.parse(src.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PPOTrainer")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_load_checkpoint")
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    namespace = {"os": os, "logger": logging.getLogger("verl-oracle"), "tq": None,
                 "find_latest_ckpt_path": find_latest_ckpt_path}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(src), "exec"), namespace)  # noqa: S102 - verl's code
    return namespace["_load_checkpoint"]


def _verl_loads(mode: str, path, tmp_path):
    """What verl's own _load_checkpoint does with these two keys: ('raises', exception) or ('loads', actor path)."""
    from omegaconf import OmegaConf

    loaded = []
    cfg = OmegaConf.create({"trainer": {"resume_mode": mode, "resume_from_path": path, "default_local_dir": str(tmp_path),
                                        "del_local_ckpt_after_load": False}})
    me = types.SimpleNamespace(config=cfg, use_critic=False, trainer_mode="sync",
                               actor_rollout_wg=types.SimpleNamespace(load_checkpoint=lambda local_path, **_: loaded.append(local_path)),
                               train_dataloader=types.SimpleNamespace(load_state_dict=lambda *_: None))
    try:
        _verl_load_checkpoint()(me)
    except Exception as exc:  # noqa: BLE001 - what verl raises is the point
        return "raises", exc
    return "loads", loaded[0] if loaded else None


@pytest.mark.parametrize("path", ["ckpts/hf_model", "ckpts/global_step_50/actor/huggingface", "ckpts/global_step_50/",
                                  "ckpts/global_step_latest", "ckpts/global_step_50", "/abs/run/global_step_7"])
def test_check_errs_exactly_where_verl_raises(path, tmp_path):
    verdict, _ = _verl_loads("resume_path", path, tmp_path)
    report = check(None, [*BASE, "trainer.resume_mode=resume_path", f"trainer.resume_from_path={path}"], env={})
    assert ("VI839" in report.ids("error")) == (verdict == "raises"), (path, verdict)


def test_the_hint_names_the_checkpoint_folder():
    report = check(None, [*BASE, "trainer.resume_mode=resume_path",
                          "trainer.resume_from_path=ckpts/global_step_50/actor/huggingface"], env={})
    (hit,) = [f.problem for f in report.errors if f.problem.rule == "VI839"]
    assert hit.hint.endswith("ckpts/global_step_50") and "int('50/actor/huggingface')" in hit.message


def test_auto_never_reads_the_path(tmp_path):
    # verl's auto mode looks under default_local_dir (empty here: training from scratch), whatever the path says, so
    # a path verl could not resume from is no error there (verl's own examples set resume_from_path=checkpoints/)
    assert _verl_loads("auto", "ckpts/hf_model", tmp_path) == ("loads", None)
    assert "VI839" not in check(None, [*BASE, "trainer.resume_from_path=ckpts/hf_model"], env={}).ids()


def test_a_local_folder_without_actor_is_a_warning(tmp_path):
    exported = tmp_path / "global_step_50"
    exported.mkdir()
    (exported / "config.json").write_text("{}")
    overrides = [*BASE, "trainer.resume_mode=resume_path", f"trainer.resume_from_path={exported}"]
    assert "VI839" in check(None, overrides, env={}).ids("warning")
    (exported / "actor").mkdir()
    assert "VI839" not in check(None, overrides, env={}).ids()
