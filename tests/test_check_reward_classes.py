"""VI706 / VI707: reward classes verl 0.9.1's reward loop cannot use.

Real cases (round 70): verl#3606 names a reward-manager class as the custom reward function
(`custom_reward_function.name=CollabLLMRewardManager`); verl#4390 writes a reward manager against the legacy batch API
(AbstractRewardManager) that 0.9.1's reward loop no longer builds.

The oracle is verl's own code, on CPU: get_custom_reward_fn wraps the named object and is called the way the reward
manager calls it (naive.py:67-84); load_reward_manager builds the importlib class with the keywords the reward worker
passes (reward_loop.py:131-136). The planted faults fail there and the controls build; the table the rules read is
regenerated from verl's source and compared with the committed one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wizard.check.lint import check

ROOT = Path(__file__).resolve().parent.parent
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1",
        "trainer.n_gpus_per_node=1"]

LOOP = "from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase\n"
MANAGER_OK = LOOP + '''

class MyRewardManager(RewardManagerBase):
    def __init__(self, config, tokenizer, compute_score, reward_router_address=None, reward_model_tokenizer=None):
        super().__init__(config, tokenizer, compute_score)

    async def run_single(self, data):
        return {"reward_score": 1.0, "reward_extra_info": {}}
'''
MANAGER_KW = LOOP + '''

class KwRewardManager(RewardManagerBase):
    def __init__(self, config, tokenizer, compute_score, **kwargs):
        super().__init__(config, tokenizer, compute_score)

    async def run_single(self, data):
        return {"reward_score": 1.0, "reward_extra_info": {}}
'''
MANAGER_NO_INIT = LOOP + '''

class BareRewardManager(RewardManagerBase):
    async def run_single(self, data):
        return {"reward_score": 1.0, "reward_extra_info": {}}
'''
LEGACY = '''import torch
from verl.workers.reward_manager.abstract import AbstractRewardManager


class MessyRewardManager(AbstractRewardManager):
    def __init__(self, tokenizer, num_examine, compute_score=None, reward_fn_key="data_source") -> None:
        self.tokenizer = tokenizer

    def __call__(self, data, return_dict=False):
        return torch.zeros(1)
'''
SCORE = '''def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return 1.0
'''
PLAIN_CLASS = '''class Scorer:
    def __init__(self, threshold):
        self.threshold = threshold
'''


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _hits(rule: str, *extra: str) -> list[str]:
    return [f.problem.line() for f in check(None, [*BASE, *extra]).findings if f.problem.rule == rule]


def _manager(path: Path, name: str) -> list[str]:
    return ["reward.reward_manager.source=importlib", f"reward.reward_manager.module.path={path}",
            f"reward.reward_manager.name={name}"]


def _verl_cfg(rm_path=None, rm_name="naive", fn_path=None, fn_name=None):
    from omegaconf import OmegaConf

    return OmegaConf.create({"reward": {
        "custom_reward_function": {"path": fn_path and str(fn_path), "name": fn_name, "reward_kwargs": {}},
        "reward_manager": {"source": "importlib" if rm_path else "register", "name": rm_name,
                           "module": {"path": rm_path and str(rm_path), "name": "custom_reward_manager"}},
        "sandbox_fusion": {"url": None}}})


def _verl_builds(path: Path, name: str) -> Exception | None:
    """verl's load_reward_manager with the keywords RewardLoopWorker passes (reward_loop.py:131-136)."""
    pytest.importorskip("verl")
    from verl.trainer.ppo.reward import load_reward_manager

    try:
        load_reward_manager(_verl_cfg(path, name), None, reward_router_address=None, reward_model_tokenizer=None)
    except Exception as exc:  # noqa: BLE001 - the oracle's answer
        return exc
    return None


def _verl_scores(path: Path, name: str) -> Exception | object:
    """verl's get_custom_reward_fn, called the way naive.py:75-84 calls it."""
    pytest.importorskip("verl")
    from verl.trainer.ppo.reward import get_custom_reward_fn

    fn = get_custom_reward_fn(_verl_cfg(fn_path=path, fn_name=name))
    try:
        return fn(data_source="openai/gsm8k", solution_str="#### 4", ground_truth="4", extra_info={})
    except Exception as exc:  # noqa: BLE001
        return exc


def test_vi706_reward_manager_class_as_function(tmp_path):
    path = _write(tmp_path, "collab.py", MANAGER_OK.replace("MyRewardManager", "CollabLLMRewardManager"))
    got = _verl_scores(path, "CollabLLMRewardManager")
    assert isinstance(got, TypeError), got  # verl constructs the class with the scorer's keywords
    hits = _hits("VI706", f"reward.custom_reward_function.path={path}",
                 "reward.custom_reward_function.name=CollabLLMRewardManager")
    assert len(hits) == 1 and "reward.reward_manager.source=importlib" in hits[0], hits


def test_vi706_any_class(tmp_path):
    path = _write(tmp_path, "scorer.py", PLAIN_CLASS)
    assert isinstance(_verl_scores(path, "Scorer"), TypeError)
    hits = _hits("VI706", f"reward.custom_reward_function.path={path}", "reward.custom_reward_function.name=Scorer")
    assert len(hits) == 1 and "fn(data_source" in hits[0], hits


def test_vi706_function_stays_clean(tmp_path):
    path = _write(tmp_path, "score.py", SCORE)
    assert _verl_scores(path, "compute_score") == 1.0
    assert not _hits("VI706", f"reward.custom_reward_function.path={path}",
                     "reward.custom_reward_function.name=compute_score")


@pytest.mark.parametrize("text,name,what", [
    (LEGACY, "MessyRewardManager", "legacy batch manager AbstractRewardManager"),
    (MANAGER_NO_INIT, "BareRewardManager", "does not take reward_router_address, reward_model_tokenizer"),
    (LEGACY.replace("AbstractRewardManager)", "NaiveRewardManager)").replace(
        "abstract import AbstractRewardManager", "naive import NaiveRewardManager"), "MessyRewardManager",
     "legacy batch manager NaiveRewardManager"),
])
def test_vi707_manager_verl_cannot_build(tmp_path, text, name, what):
    path = _write(tmp_path, "rm.py", text)
    assert isinstance(_verl_builds(path, name), TypeError)
    hits = _hits("VI707", *_manager(path, name))
    assert len(hits) == 1 and what in hits[0], hits


@pytest.mark.parametrize("text,name", [(MANAGER_OK, "MyRewardManager"), (MANAGER_KW, "KwRewardManager")])
def test_vi707_reward_loop_manager_stays_clean(tmp_path, text, name):
    path = _write(tmp_path, "rm.py", text)
    assert _verl_builds(path, name) is None
    assert not _hits("VI707", *_manager(path, name))
    assert not _hits("VI706", *_manager(path, name))


def test_vi707_unknown_base_is_not_judged(tmp_path):
    path = _write(tmp_path, "rm.py", "from mypkg.managers import Base\n\n\nclass Mine(Base):\n    pass\n")
    assert not _hits("VI707", *_manager(path, "Mine"))


def test_table_matches_verl_source():
    pytest.importorskip("verl")
    from helpers_scripts import regenerated

    committed = (ROOT / "wizard" / "check" / "data" / "verl_reward_manager_api.json").read_text(encoding="utf-8")
    assert regenerated("verl_reward_manager_api") == committed
