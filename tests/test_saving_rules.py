"""Checkpoint-saving and offload settings verl accepts but does not act on (real cases: verl PR#260, save_freq=-1 from
verl's own example saved nothing; verl-omni PR#177, offload_policy on FSDP1; verl#7213, del_local_ckpt_after_load):
check's VI916, VI917, VI918. The premises are read from verl's own code (its AST, and its own fs helpers run)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from wizard.check.lint import check

SPEC = importlib.util.find_spec("verl")
VERL = Path(SPEC.origin).parent if SPEC and SPEC.origin else None
A = "actor_rollout_ref.actor"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.n=4", "data.train_batch_size=16",
        f"{A}.ppo_mini_batch_size=8", f"{A}.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
needs_verl = pytest.mark.skipif(VERL is None, reason="verl is not installed")


def _ids(*extra: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in check(None, BASE + list(extra), defaults="snapshot", env={"HOME": "/nonexistent-home"}).findings:
        out.setdefault(f.problem.rule, []).append(f.problem)
    return out


def _tree(rel: str) -> ast.Module:
    return ast.parse((VERL / rel).read_text(encoding="utf-8"))


def _guards(tree: ast.AST, node: ast.AST) -> list[str]:
    """The source of every `if` test that encloses `node` (its body, not its else)."""
    out = []
    for parent in ast.walk(tree):
        if isinstance(parent, ast.If) and any(node is n for b in parent.body for n in ast.walk(b)):
            out.append(ast.unparse(parent.test))
    return out


@needs_verl
@pytest.mark.parametrize("rel", ["trainer/ppo/v1/trainer_base.py", "trainer/ppo/ray_trainer.py",
                                 "experimental/separation/ray_trainer.py",
                                 "experimental/fully_async_policy/fully_async_trainer.py"])
def test_every_ppo_trainer_save_needs_a_positive_save_freq(rel):
    tree = _tree(rel)
    saves = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "_save_checkpoint"]
    assert saves
    for call in saves:
        guards = _guards(tree, call)
        assert any("save_freq > 0" in g for g in guards), (rel, guards)


def test_save_freq_off_is_named_and_a_positive_one_is_not():
    (hit,) = _ids()["VI916"]  # verl's default, -1
    assert hit.severity == "info" and "not even after the last step" in hit.message
    assert "VI916" not in _ids("trainer.save_freq=50")


@needs_verl
def test_verls_fsdp_engine_reads_offload_policy_only_for_fsdp2():
    tree = _tree("workers/engine/fsdp/transformer_impl.py")
    reads = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "offload_policy"
             and ast.unparse(n.value) == "self.engine_config"]
    assert reads
    for node in reads:
        assert "self.engine_config.strategy == 'fsdp2'" in _guards(tree, node)


def test_offload_policy_on_fsdp1_is_a_warning_and_on_fsdp2_is_clean():
    (hit,) = _ids(f"{A}.fsdp_config.offload_policy=True")["VI917"]  # strategy fsdp: verl's default
    assert hit.severity == "warning" and f"{A}.strategy" in hit.keys
    assert "VI917" not in _ids(f"{A}.fsdp_config.offload_policy=True", f"{A}.strategy=fsdp2")
    critic = ["algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-0.5B-Instruct", "critic.use_dynamic_bsz=True",
              "critic.fsdp.offload_policy=True"]
    assert [p.keys[0] for p in _ids(*critic)["VI917"]] == ["critic.fsdp.offload_policy"]


@needs_verl
def test_verls_checkpoint_managers_delete_only_hdfs_paths(tmp_path):
    from verl.utils.fs import copy_to_local, is_non_local

    local = tmp_path / "model_world_size_1_rank_0.pt"
    local.write_bytes(b"x")
    assert not is_non_local(copy_to_local(str(local)))  # what the FSDP manager tests before os.remove
    for rel in ("utils/checkpoint/fsdp_checkpoint_manager.py", "utils/checkpoint/megatron_checkpoint_manager.py"):
        tree = _tree(rel)
        removes = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "os.remove"
                   and any(isinstance(p, ast.IfExp) and n is p.body and "is_non_local" in ast.unparse(p.test)
                           for p in ast.walk(tree))]
        assert removes, rel


def test_del_local_ckpt_after_load_is_named():
    (hit,) = _ids("trainer.del_local_ckpt_after_load=True")["VI918"]
    assert hit.severity == "warning" and "hdfs://" in hit.message
    assert "VI918" not in _ids()


@needs_verl
def test_verls_retention_forgets_what_an_earlier_process_saved(tmp_path, monkeypatch):
    """verl#7395: verl's own BaseCheckpointManager retention, across a restart (a new manager, as a new process
    builds, with torch.distributed's rank faked at the library boundary)."""
    import torch.distributed as dist
    from verl.utils.checkpoint.checkpoint_manager import BaseCheckpointManager

    monkeypatch.setattr(dist, "get_rank", lambda *a, **k: 0)
    monkeypatch.setattr(dist, "get_world_size", lambda *a, **k: 1)

    def run(steps: range) -> None:
        manager = BaseCheckpointManager(None, None, checkpoint_config={})
        for step in steps:
            path = tmp_path / f"global_step_{step}" / "actor"
            manager.ensure_checkpoint_capacity(1)
            path.mkdir(parents=True)
            manager.register_checkpoint(str(path), 1)

    run(range(1, 4))  # one process: the limit holds
    assert sorted(p.parent.name for p in tmp_path.glob("*/actor")) == ["global_step_3"]
    run(range(4, 6))  # the restart resumes from step 3 and saves 4 and 5
    assert sorted(p.parent.name for p in tmp_path.glob("*/actor")) == ["global_step_3", "global_step_5"]


def test_a_retention_limit_on_a_resuming_run_is_an_info():
    [hit] = _ids("trainer.max_actor_ckpt_to_keep=1")["VI992"]
    assert hit.severity == "info" and "resume_mode=auto" in hit.message
    assert "VI992" not in _ids("trainer.max_actor_ckpt_to_keep=1", "trainer.resume_mode=disable")
    assert "VI992" not in _ids()  # no limit: every checkpoint is kept anyway
