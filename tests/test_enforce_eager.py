"""VI921: rollout.enforce_eager=True with vLLM or SGLang (real case verl#1414: eager mode set beside
free_cache_engine=True "to save memory for updating the actor").

The oracles are verl's own code, read with ast (the servers import vLLM / SGLang, absent on the CPU): each server
hands enforce_eager to its engine as the CUDA-graph switch, the engines' sleep / release read free_cache_engine and
never enforce_eager, and nothing else in verl reads enforce_eager. verl's RolloutConfig takes both flags together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers_verl import verl_root
from wizard.check.lint import check

R = "actor_rollout_ref.rollout"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{R}.n=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]




def _functions(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {f"{cls.name}.{fn.name}": ast.unparse(fn) for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
            for fn in cls.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))}


@pytest.mark.verl
def test_verl_maps_enforce_eager_to_the_graph_switch_and_frees_without_it():
    root = verl_root() / "workers" / "rollout"
    vllm = _functions(root / "vllm_rollout" / "vllm_async_server.py")
    sglang = (root / "sglang_rollout" / "async_sglang_server.py").read_text(encoding="utf-8")
    assert any("'enforce_eager': self.config.enforce_eager" in body for body in vllm.values())
    assert '"disable_cuda_graph": self.config.enforce_eager' in sglang
    sleeps = {k: v for k, v in vllm.items() if k.endswith((".sleep", ".wake_up", ".release_kv_cache"))}
    adapter = _functions(root / "vllm_rollout" / "vllm_rollout.py")
    sleeps |= {k: v for k, v in adapter.items() if k.endswith((".release", ".resume"))}
    sgl = _functions(root / "sglang_rollout" / "sglang_rollout.py")
    sleeps |= {k: v for k, v in sgl.items() if k.endswith((".release", ".resume"))}
    assert len(sleeps) >= 6
    for name, body in sleeps.items():
        assert "enforce_eager" not in body, name
    for name in ("vLLMHttpServer.sleep", "ServerAdapter.release"):
        assert any(k.endswith(name) and "free_cache_engine" in v for k, v in sleeps.items()), name


@pytest.mark.slow
@pytest.mark.verl
def test_nothing_else_in_verl_reads_enforce_eager():
    root = verl_root()
    readers = set()
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("tests/", "workers/config/", "trainer/config/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr == "enforce_eager") or \
                    (isinstance(node, ast.Constant) and node.value == "enforce_eager"):
                readers.add(rel)
    assert readers == {"workers/rollout/vllm_rollout/vllm_async_server.py",
                       "workers/rollout/sglang_rollout/async_sglang_server.py"}


@pytest.mark.verl
def test_verls_rollout_config_takes_eager_with_free_cache_engine():
    from verl.workers.config.rollout import RolloutConfig

    cfg = RolloutConfig(name="vllm", enforce_eager=True, free_cache_engine=True)
    assert cfg.enforce_eager and cfg.free_cache_engine


def _hits(*extra: str):
    return [f for f in check(None, [*BASE, *extra]).findings if f.problem.rule == "VI921"]


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_check_notes_eager_rollout(name):
    (hit,) = _hits(f"{R}.name={name}", f"{R}.enforce_eager=True", f"{R}.free_cache_engine=True")
    assert hit.problem.severity == "info" and hit.fix is None
    assert "free_cache_engine" in hit.problem.message
    assert ("cudagraph_capture_sizes" in hit.problem.hint) is (name == "vllm")


@pytest.mark.parametrize("extra", [
    [f"{R}.name=vllm"],  # verl's default enforce_eager=False
    [f"{R}.name=vllm", f"{R}.enforce_eager=False"],
    [f"{R}.name=vllm", f"{R}.enforce_eager=True", "trainer.device=npu"],  # Ascend: graph modes differ
])
def test_check_is_silent_with_graphs_on_or_on_npu(extra):
    assert _hits(*extra) == []
