"""Megatron without Megatron-Bridge (real case: verl PR#6286's review, a converted dist checkpoint with
megatron.use_mbridge=False): check's VI912. The premise is read from verl's own engine: the Megatron engine's
constructor asserts use_mbridge, and verl 0.9.1 has no other Megatron worker."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from wizard.check.lint import check

SPEC = importlib.util.find_spec("verl")
VERL = Path(SPEC.origin).parent if SPEC and SPEC.origin else None
A = "actor_rollout_ref.actor"
BASE = ["model_engine=megatron", "algorithm.adv_estimator=grpo", "data.train_files=/d/train.parquet",
        "data.val_files=/d/val.parquet", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.n=4", f"{A}.ppo_mini_batch_size=8",
        f"{A}.use_dynamic_bsz=True", "data.train_batch_size=16", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]


def _vi912(*extra: str):
    report = check(None, [*BASE, *extra], defaults="snapshot", env={"HOME": "/nonexistent-home"})
    return [(f.problem.keys, f.fix.set if f.fix else None) for f in report.findings if f.problem.rule == "VI912"]


def test_verls_megatron_engine_asserts_megatron_bridge():
    if VERL is None:
        pytest.skip("verl is not installed")
    tree = ast.parse((VERL / "workers/engine/megatron/transformer_impl.py").read_text(encoding="utf-8"))
    init = next(n for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == "MegatronEngine"
                for n in c.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    asserts = [ast.unparse(n.test) for n in ast.walk(init) if isinstance(n, ast.Assert)]
    assert "self.engine_config.use_mbridge" in asserts
    # no other Megatron worker: verl/workers has the engine workers only
    assert not list((VERL / "workers").glob("megatron_workers.py"))


def test_the_actor_without_megatron_bridge_is_an_error_fixed_in_place():
    assert _vi912(f"{A}.megatron.use_mbridge=False") == [((f"{A}.megatron.use_mbridge",),
                                                         {f"{A}.megatron.use_mbridge": True})]


def test_the_critic_is_its_own_engine():
    assert _vi912("algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-0.5B-Instruct",
                  "critic.megatron.use_mbridge=False", "critic.use_dynamic_bsz=True")[0][0] == ("critic.megatron.use_mbridge",)


def test_the_references_follows_the_actors_and_is_named_only_when_set():
    kl = [f"{A}.use_kl_loss=True"]
    assert [k for k, _ in _vi912(*kl, f"{A}.megatron.use_mbridge=False")] == [(f"{A}.megatron.use_mbridge",)]
    assert [k for k, _ in _vi912(*kl, "actor_rollout_ref.ref.megatron.use_mbridge=False")] == [
        ("actor_rollout_ref.ref.megatron.use_mbridge",)]


def test_verls_default_and_an_fsdp_actor_are_clean():
    assert _vi912() == [] and _vi912(f"{A}.megatron.use_mbridge=True") == []
    fsdp = check(None, [b for b in BASE if not b.startswith("model_engine")] + [f"{A}.megatron.use_mbridge=False"],
                 defaults="snapshot", env={"HOME": "/nonexistent-home"})
    assert not [f for f in fsdp.findings if f.problem.rule == "VI912"]


def test_megatron_lora_says_it_once():
    """VI881 already names use_mbridge for Megatron LoRA."""
    report = check(None, [*BASE, "actor_rollout_ref.model.lora.rank=16", f"{A}.megatron.use_mbridge=False"],
                   defaults="snapshot", env={"HOME": "/nonexistent-home"})
    rules = [f.problem.rule for f in report.findings if f"{A}.megatron.use_mbridge" in f.problem.keys]
    assert rules == ["VI881"]
