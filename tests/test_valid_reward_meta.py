"""VI442, VI443: what verl 0.9.1's validation hands a custom reward and what it does with the answer
(wizard/check/rules/valid_reward_meta.py).

Oracles are verl's own code on the CPU. experimental/agent_loop/agent_loop.py does not import on a CPU box without its
optional dependencies (cachetools), so AgentLoopWorker._compute_score is compiled from verl's source unchanged and run
against a stub worker: the DataProto it sends to the reward worker carries no meta_info (verl#7121). For VI443 the
reserved keys are read from verl's `_validate` sources and verl's own process_validation_metrics is run on the list
the V1 `_validate` builds when a reward function returns 'reward' (agentcore-rl-toolkit PR#136).
"""

from __future__ import annotations

import ast
import asyncio
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from helpers_verl import class_method, verl_root, verl_tree
from wizard.check.lint import check
from wizard.check.rules.valid_reward_meta import FALLBACK_RESERVED, reserved_keys

R = "actor_rollout_ref.rollout"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", f"{R}.name=vllm",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.logger=[console]", "trainer.nnodes=1",
        "trainer.n_gpus_per_node=8"]

MANAGER = '''from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager


class ValAware(NaiveRewardManager):
    async def run_single(self, data):
        strict = {read}
        return await super().run_single(data)
'''
FN = '''def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    ok = float(solution_str.strip().endswith(str(ground_truth)))
    return {{"score": ok, "{key}": ok}}
'''


def _rules(rule: str, overrides: list[str]) -> list[Any]:
    return [f.problem for f in check(None, [*BASE, *overrides], defaults="snapshot").findings if f.problem.rule == rule]


def _manager(tmp_path: Path, read: str, *extra: str) -> list[str]:
    p = tmp_path / "rm.py"
    p.write_text(MANAGER.format(read=read))
    return ["reward.reward_manager.source=importlib", "reward.reward_manager.name=ValAware",
            f"reward.reward_manager.module.path={p}", *extra]


@pytest.mark.parametrize("read", ['data.meta_info.get("validate", False)', 'data.meta_info["validate"]',
                                  '"validate" in data.meta_info'])
def test_vi442_manager_reading_validate(tmp_path: Path, read: str) -> None:
    hits = _rules("VI442", _manager(tmp_path, read))
    assert len(hits) == 1 and hits[0].severity == "warning"
    assert "rm.py:6" in hits[0].message and "verl#7121" in hits[0].message


def test_vi442_base_class_in_the_same_file(tmp_path: Path) -> None:
    p = tmp_path / "rm2.py"
    p.write_text("class Base:\n    def split(self, data):\n        return data.meta_info.get('validate')\n\n\n"
                 "class Mine(Base):\n    pass\n")
    hits = _rules("VI442", ["reward.reward_manager.source=importlib", "reward.reward_manager.name=Mine",
                            f"reward.reward_manager.module.path={p}"])
    assert len(hits) == 1 and "rm2.py:3" in hits[0].message


def test_vi442_controls(tmp_path: Path) -> None:
    # a manager that reads what the sample carries: clean
    assert not _rules("VI442", _manager(tmp_path, 'data.non_tensor_batch["extra_info"][0].get("split") == "test"'))
    # a reward model on the rollout's GPUs: the trainer scores its own batch, whose meta_info has validate
    colocated = ["reward.reward_model.enable=True", "reward.reward_model.enable_resource_pool=False",
                 "reward.reward_model.model_path=Qwen/Qwen2.5-1.5B-Instruct"]
    assert not _rules("VI442", _manager(tmp_path, 'data.meta_info.get("validate")', *colocated))


def test_vi442_oracle_verl_compute_score_drops_meta_info() -> None:
    """verl's AgentLoopWorker._compute_score, compiled from its source, sends the reward worker a DataProto without
    meta_info: a reward manager never sees validate on this path."""
    import torch
    from tensordict import TensorDict

    from verl.protocol import DataProto
    from verl.utils.profiler import simple_timer

    rel = "experimental/agent_loop/agent_loop.py"
    fn = class_method(verl_tree(rel), "AgentLoopWorker", "_compute_score")
    fn.decorator_list, fn.returns = [], None
    for a in fn.args.args + fn.args.kwonlyargs:
        a.annotation = None
    ns: dict[str, Any] = {"torch": torch, "np": np, "TensorDict": TensorDict, "DataProto": DataProto,
                          "simple_timer": simple_timer, "random": random}
    exec(compile(ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[])), str(verl_root() / rel), "exec"),
         ns)  # noqa: S102 - verl's own code
    sent: list[Any] = []

    async def remote(data: Any) -> dict:
        sent.append(data)
        return {"reward_score": 1.0, "reward_extra_info": {}}

    worker = SimpleNamespace(
        reward_loop_worker_handles=[SimpleNamespace(compute_score=SimpleNamespace(remote=remote))],
        _compute_multi_modal_inputs=lambda output, ids: {},
        _compute_position_ids=lambda ids, mask, mm, kw: torch.arange(ids.shape[1]).unsqueeze(0),
        _get_mm_processor_kwargs=lambda audios: {})
    out = SimpleNamespace(prompt_ids=[1, 2], response_ids=[3, 4], reward_score=None, multi_modal_data=None,
                          mm_processor_kwargs=None, num_turns=2, extra_fields={},
                          metrics=SimpleNamespace(compute_score=None))
    asyncio.run(ns["_compute_score"](worker, [out], kwargs={"data_source": "gsm8k"}))
    assert len(sent) == 1 and "validate" not in sent[0].meta_info and out.reward_score == 1.0


def _fn(tmp_path: Path, key: str) -> list[str]:
    p = tmp_path / "score.py"
    p.write_text(FN.format(key=key))
    val = tmp_path / "val.parquet"
    val.write_bytes(b"")
    return [f"reward.custom_reward_function.path={p}", f"data.val_files={val}"]


def test_vi443_reward_key(tmp_path: Path) -> None:
    hits = _rules("VI443", _fn(tmp_path, "reward"))
    assert len(hits) == 1 and hits[0].severity == "warning" and "score.py:3" in hits[0].message
    legacy = _rules("VI443", [*_fn(tmp_path, "reward"), "trainer.use_v1=False"])
    assert len(legacy) == 1 and legacy[0].severity == "error"


def test_vi443_control(tmp_path: Path) -> None:
    assert not _rules("VI443", _fn(tmp_path, "acc"))


def test_vi443_reserved_keys_from_verl() -> None:
    assert reserved_keys() == FALLBACK_RESERVED == frozenset({"reward"})


def test_vi443_oracle_verl_validation_metrics_misaligned() -> None:
    """The V1 _validate extends reward_extra_infos_dict['reward'] with the scores and appends every extra-info key,
    'reward' included (read from verl's source); verl's process_validation_metrics then reads the doubled list by
    sample index and reports a different mean than the scores."""
    src = ast.unparse(_validate_v1())
    assert 'reward_extra_infos_dict["reward"].extend(scores)' in src.replace("'", '"')
    assert "reward_extra_infos_dict[key].append(value)" in src and 'key != "reward"' not in src.split(
        "for key, value in reward_extra_info.items()")[1].split("n_prior += 1")[0].replace("'", '"')

    from verl.trainer.ppo.metric_utils import process_validation_metrics

    # two validation batches of two samples; the function returns {"score": s, "reward": r} with r = 10 * s
    batches = [[1.0, 0.0], [0.0, 1.0]]
    rewards: list[float] = []
    for scores in batches:
        rewards.extend(scores)  # trainer_base.py:1124
        rewards.extend(10 * s for s in scores)  # trainer_base.py:1136-1139, the 'reward' extra-info key
    uids = ["a", "b", "c", "d"]
    m = process_validation_metrics(["gsm8k"] * 4, uids, {"reward": rewards})
    right = process_validation_metrics(["gsm8k"] * 4, uids, {"reward": [1.0, 0.0, 0.0, 1.0]})
    assert m["gsm8k"]["reward"]["mean@1"] != right["gsm8k"]["reward"]["mean@1"]


def _validate_v1() -> ast.AST:
    return next(n for n in ast.walk(verl_tree("trainer/ppo/v1/trainer_base.py"))
                if isinstance(n, ast.FunctionDef) and n.name == "_validate")
