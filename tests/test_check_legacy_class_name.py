"""VI805 for reward_model.reward_loop_class_name: the fix writes the key verl's loader reads.

PR#4635 added reward_model.reward_loop_source / reward_loop_module_path / reward_loop_class_name for an importlib
reward manager. verl 0.9.1's own migration (migrate_legacy_reward_impl, called by fully_async_main) copies the class
name to reward.reward_manager.module.name (experimental/reward_loop/reward_loop.py:55), but resolve_reward_manager_cls
loads reward.reward_manager.name (trainer/ppo/reward.py:96-105, default "naive"): the migrated config fails. The
oracle is verl's migration and resolver on CPU with a tiny manager file; the finding is an error on every entry point
and --fix sets reward.reward_manager.name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wizard.check.lint import check

MANAGER = '''from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase


class MyRewardManager(RewardManagerBase):
    def __init__(self, config, tokenizer, compute_score, **kwargs):
        super().__init__(config, tokenizer, compute_score)

    async def run_single(self, data):
        return {"reward_score": 1.0, "reward_extra_info": {}}
'''
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1",
        "trainer.n_gpus_per_node=1"]


def _legacy_config(path: Path):
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "reward_model": {"num_workers": None, "reward_manager": None, "reward_loop_source": "importlib",
                         "reward_loop_module_path": str(path), "reward_loop_class_name": "MyRewardManager",
                         "model": {"path": None}, "rollout": {}},
        "custom_reward_function": {"path": None, "name": None}, "sandbox_fusion": {"url": None},
        "reward": {"reward_manager": {"source": "register", "name": "naive",
                                      "module": {"path": None, "name": "custom_reward_manager"}},
                   "reward_model": {"rollout": {}}}})


def test_verls_migration_loses_the_class_and_the_fix_targets_name(tmp_path):
    pytest.importorskip("verl")
    from verl.experimental.reward_loop import migrate_legacy_reward_impl
    from verl.trainer.ppo.reward import resolve_reward_manager_cls

    path = tmp_path / "rm.py"
    path.write_text(MANAGER)
    migrated = migrate_legacy_reward_impl(_legacy_config(path))
    assert migrated.reward.reward_manager.module.name == "MyRewardManager"
    with pytest.raises(AttributeError):  # verl loads reward_manager.name ('naive') from the file
        resolve_reward_manager_cls(migrated)
    migrated.reward.reward_manager.name = "MyRewardManager"  # what the fix writes
    assert resolve_reward_manager_cls(migrated).__name__ == "MyRewardManager"

    legacy = ["reward_model.reward_loop_source=importlib", f"reward_model.reward_loop_module_path={path}",
              "reward_model.reward_loop_class_name=MyRewardManager"]
    hits = [f for f in check(None, [*BASE, *legacy]).findings
            if f.problem.rule == "VI805" and f.problem.keys == ("reward_model.reward_loop_class_name",)]
    assert len(hits) == 1 and hits[0].problem.severity == "error", [h.problem.line() for h in hits]
    assert hits[0].fix is not None and hits[0].fix.set == {"reward.reward_manager.name": "MyRewardManager"}
    fixed = [*BASE, "reward.reward_manager.source=importlib", f"reward.reward_manager.module.path={path}",
             "reward.reward_manager.name=MyRewardManager"]
    assert not [f.problem.line() for f in check(None, fixed).findings
                if f.problem.rule in ("VI805", "VI873", "VI707")]


def test_other_legacy_keys_keep_verls_mapping():
    hits = [f for f in check(None, [*BASE, "reward_model.reward_loop_module_path=/x/rm.py"]).findings
            if f.problem.rule == "VI805"]
    assert hits and hits[0].fix.set == {"reward.reward_manager.module.path": "/x/rm.py"}
