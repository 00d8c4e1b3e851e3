"""VI947: rollout.free_cache_engine=False on a rollout engine that shares the trainer's GPUs (real case verl
PR#2459: verl's own Ascend VL example shipped free_cache_engine=False and ran out of memory; the PR sets it True).

The oracles are verl's own code: its RolloutConfig accepts False (default True), and the engines' sleep / release,
read with ast (the servers import vLLM / SGLang, absent on the CPU), return before freeing anything when the flag
is off, so the weights and the KV-cache reservation stay through the actor update.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers_verl import class_method, verl_root
from test_enforce_eager import BASE, R
from wizard.check.lint import check





def _method(path: Path, cls: str, name: str) -> ast.AST:
    return class_method(ast.parse(path.read_text(encoding="utf-8")), cls, name)


def _returns_early_without_free_cache(fn: ast.AST) -> bool:
    """The method's first `if` reads free_cache_engine and its body is a bare return."""
    for stmt in fn.body:  # type: ignore[attr-defined]
        if isinstance(stmt, ast.If):
            return "free_cache_engine" in ast.unparse(stmt.test) and isinstance(stmt.body[0], ast.Return)
    return False


@pytest.mark.verl
def test_verls_rollout_config_takes_false_and_defaults_true():
    from verl.workers.config.rollout import RolloutConfig

    assert RolloutConfig(name="vllm").free_cache_engine is True
    assert RolloutConfig(name="vllm", free_cache_engine=False).free_cache_engine is False


@pytest.mark.verl
def test_verls_engines_skip_sleep_without_free_cache_engine():
    root = verl_root() / "workers" / "rollout"
    assert _returns_early_without_free_cache(_method(root / "vllm_rollout" / "vllm_async_server.py",
                                                     "vLLMHttpServer", "sleep"))
    sgl = (root / "sglang_rollout" / "async_sglang_server.py").read_text(encoding="utf-8")
    assert "not self.config.free_cache_engine" in sgl
    release = ast.unparse(_method(root / "vllm_rollout" / "vllm_rollout.py", "ServerAdapter", "release"))
    assert "self.config.free_cache_engine" in release


def _hits(*extra: str, gpu_gb: float | None = None):
    kw = {"gpu_memory_gb": gpu_gb} if gpu_gb else {}
    return [f for f in check(None, [*BASE, *extra], **kw).findings if f.problem.rule == "VI947"]


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_check_warns_when_a_colocated_engine_never_sleeps(name):
    (hit,) = _hits(f"{R}.name={name}", f"{R}.free_cache_engine=False", f"{R}.gpu_memory_utilization=0.5",
                   gpu_gb=80)
    assert hit.problem.severity == "warning"
    assert f"{R}.free_cache_engine=False" in hit.problem.message and "40 GB" in hit.problem.message
    assert "free_cache_engine" in hit.problem.hint


@pytest.mark.parametrize("extra", [
    [f"{R}.name=vllm"],  # verl's default free_cache_engine=True
    [f"{R}.name=vllm", f"{R}.free_cache_engine=True"],
    [f"{R}.name=sglang", f"{R}.free_cache_engine=True", f"{R}.gpu_memory_utilization=0.6"],
    [f"{R}.name=vllm", f"{R}.free_cache_engine=False", "actor_rollout_ref.hybrid_engine=False"],  # not colocated
])
def test_valid_controls_stay_clean(extra):
    assert _hits(*extra) == []
