"""VI438: an update epoch count below 1 (wizard/check/rules/update_epochs.py).

The class is verl PR #7924's (real cases R98-02..04: zero counts verl's config validation accepts); ppo_epochs=0 is
its member that never crashes. The oracle is verl itself on the CPU: FSDPActorConfig accepts ppo_epochs=0, and the
TrainingWorker's iterator, verl.utils.tensordict_utils.make_iterator, yields no mini-batch for epochs=0 (one pass per
epoch otherwise), so train_mini_batch trains nothing. The table the rule reads is regenerated from verl's source.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from wizard.check.lint import check

A = "actor_rollout_ref.actor"
ROOT = Path(__file__).resolve().parent.parent
BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        f"{A}.ppo_micro_batch_size_per_gpu=4", "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "algorithm.adv_estimator=grpo",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=8", "data.train_batch_size=64", f"{A}.ppo_mini_batch_size=16"]
GAE = ["algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-0.5B-Instruct",
       "critic.ppo_micro_batch_size_per_gpu=4", "critic.ppo_mini_batch_size=16"]


def _hits(*extra: str):
    return [f for f in check(None, BASE + list(extra), defaults="snapshot").findings if f.problem.rule == "VI438"]


@pytest.mark.verl
def test_table_matches_verls_source():
    sys.path.insert(0, str(ROOT / "scripts"))
    import update_epochs_table

    committed = json.loads((ROOT / "wizard/check/data/update_epochs.json").read_text(encoding="utf-8"))
    assert update_epochs_table.build() == committed
    assert set(committed["keys"]) == {f"{A}.ppo_epochs", "critic.ppo_epochs"}
    assert committed["consumer"].startswith("utils/tensordict_utils.py:")


@pytest.mark.verl
def test_verl_accepts_zero_epochs_and_its_iterator_then_yields_nothing():
    import torch
    from tensordict import TensorDict

    from verl.utils import tensordict_utils as tu
    from verl.workers.config import FSDPActorConfig

    config = FSDPActorConfig(ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=2, strategy="fsdp", rollout_n=1,
                             ppo_epochs=0)  # no error: verl's config accepts it
    assert config.ppo_epochs == 0
    data = TensorDict({"x": torch.arange(8).unsqueeze(1)}, batch_size=[8])
    assert list(tu.make_iterator(data, mini_batch_size=4, epochs=0)) == []  # no mini-batch: no update at all
    assert len(list(tu.make_iterator(data, mini_batch_size=4, epochs=1))) == 2
    assert len(list(tu.make_iterator(data, mini_batch_size=4, epochs=2))) == 4


@pytest.mark.parametrize("value", [0, -1])
def test_actor_epochs_below_one_is_an_error(value):
    hits = _hits(f"{A}.ppo_epochs={value}")
    assert [h.problem.keys[0] for h in hits] == [f"{A}.ppo_epochs"] and hits[0].problem.severity == "error"
    assert "range(epochs)" in hits[0].problem.message and hits[0].fix is not None


def test_critic_epochs_zero_fires_only_when_a_critic_trains():
    assert not _hits("critic.ppo_epochs=0")  # GRPO builds no critic (VI841 reports the dead key)
    hits = _hits(*GAE, "critic.ppo_epochs=0")
    assert [h.problem.keys[0] for h in hits] == ["critic.ppo_epochs"]


@pytest.mark.parametrize("extra", [(), (f"{A}.ppo_epochs=1",), (f"{A}.ppo_epochs=4",),
                                   (*GAE, "critic.ppo_epochs=2")])
def test_valid_epochs_stay_clean(extra):
    assert not _hits(*extra)


def test_registered_for_ppo_only():
    from wizard.check import lint
    from wizard.check.rules.update_epochs import rule_update_epochs

    assert rule_update_epochs in lint.PPO_RULES and rule_update_epochs not in lint.SFT_RULES
