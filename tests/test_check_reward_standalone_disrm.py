"""VI957: a classifier reward model on its own GPUs (reward.reward_model.enable_resource_pool=True) with no custom
reward function (real case verl#7368: every async trajectory dies with KeyError: 'reward_extra_info').

The oracle is verl 0.9.1's own code: RewardLoopManager.reward_loop_worker_handles (experimental/reward_loop/
reward_loop.py) hands the reward-loop workers to the agent loop exactly when the reward model has its own pool (or
there is none); RewardLoopWorker.compute_score, run on the CPU with the HTTP request replaced, answers a classifier
score as {"reward_score": ...} with no "reward_extra_info"; and AgentLoopWorker._compute_score (agent_loop.py, read
as source: its module needs packages a CPU box lacks) subscripts result["reward_extra_info"]. Controls: the colocated
reward model, and a custom reward function beside the standalone one.
"""

from __future__ import annotations

import ast
import asyncio
import json
from types import SimpleNamespace

import pytest

from helpers_verl import class_method, verl_tree
from wizard.check.lint import check

RM = "reward.reward_model"


def _cfg(pool: bool, fn: str | None = None):
    from omegaconf import OmegaConf

    return OmegaConf.create({"reward": {"custom_reward_function": {"path": fn},
                                        "reward_model": {"enable": True, "enable_resource_pool": pool,
                                                         "model_path": "rm", "rollout": {"name": "vllm"}}}})


@pytest.mark.verl
def test_verls_standalone_classifier_answers_without_extra_info():
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager, RewardLoopWorker

    # the workers go to the agent loop with the reward model's own pool, not with a colocated one
    handles = RewardLoopManager.reward_loop_worker_handles.fget
    assert handles(SimpleNamespace(config=_cfg(True), reward_loop_workers=["w"])) == ["w"]
    assert handles(SimpleNamespace(config=_cfg(False), reward_loop_workers=["w"])) is None

    worker = object.__new__(RewardLoopWorker)
    worker.config = _cfg(True)

    async def prompt(data):
        return "prompt"

    async def post(payload, endpoint):
        assert endpoint == "classify"
        return {"data": [{"probs": [0.25, 0.75]}]}

    worker._preprocess_reward_inputs, worker._post_request = prompt, post
    worker.reward_manager = SimpleNamespace(run_single=None)  # not reached without a custom function
    out = asyncio.run(worker.compute_score([None]))
    assert out == {"reward_score": 0.75} and "reward_extra_info" not in out


@pytest.mark.verl
def test_verls_agent_loop_subscripts_reward_extra_info():
    fn = class_method(verl_tree("experimental/agent_loop/agent_loop.py"), "AgentLoopWorker", "_compute_score")
    subs = [n for n in ast.walk(fn) if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
            and n.value.id == "result" and isinstance(n.slice, ast.Constant) and n.slice.value == "reward_extra_info"]
    assert subs  # result["reward_extra_info"], not result.get(...)
    # the colocated path reads it with .get and a default
    colocated = class_method(verl_tree("experimental/reward_loop/reward_loop.py"), "RewardLoopManager",
                             "compute_rm_score")
    assert "output.get('reward_extra_info', {})" in ast.unparse(colocated)


def _hits(tmp_path, extra: list[str]) -> list:
    rm = tmp_path / "rm"
    rm.mkdir(exist_ok=True)
    (rm / "config.json").write_text(json.dumps({"architectures": ["Qwen2ForSequenceClassification"],
                                                "max_position_embeddings": 32768}))
    base = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
            "trainer.logger=[console]", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
            f"{RM}.enable=True", f"{RM}.model_path={rm}", f"{RM}.rollout.name=vllm", f"{RM}.nnodes=1",
            f"{RM}.n_gpus_per_node=2", f"{RM}.rollout.tensor_model_parallel_size=1"]
    found = check(None, [*base, *extra], defaults="snapshot").findings
    return [f for f in found if f.problem.rule == "VI957"]


@pytest.mark.slow
def test_planted_fault_and_controls(tmp_path):
    [e] = _hits(tmp_path, [f"{RM}.enable_resource_pool=True"])
    assert e.problem.severity == "error" and "reward_extra_info" in e.problem.message
    assert "enable_resource_pool=False" in e.problem.hint
    assert not _hits(tmp_path, [f"{RM}.enable_resource_pool=False"])  # colocated: read with .get
    fn = tmp_path / "judge.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
                  "    return {'score': 0.0}\n")
    assert not _hits(tmp_path, [f"{RM}.enable_resource_pool=True", f"reward.custom_reward_function.path={fn}"])
