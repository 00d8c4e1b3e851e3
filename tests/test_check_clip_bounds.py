"""VI667 / VI670: where verl's policy losses take their clip bounds from (wizard/check/rules/clip_bounds.py).

VI667 (real case FlowRL#15, a verl fork): actor.clip_ratio=0.1 alone. The oracle is verl's own actor config and
compute_policy_loss_vanilla on one batch: with verl's default clip_ratio_low/high the loss at clip_ratio=0.1 equals
the loss at 0.2, while the same bounds set on clip_ratio_low/high change it.

VI670 (real case SkyRL PR#553: CISPO with 0.2 / 0.2): verl's compute_policy_loss_cispo at clip_ratio_low=0.2 gives a
token whose ratio fell to 0.3 the gradient weight 0.8, at verl's example clip_ratio_low=10 its ratio 0.3.
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


def _hits(rule: str, *extra: str):
    return [f for f in check(None, BASE + list(extra), defaults="snapshot").findings if f.problem.rule == rule]


def _config(**kw):
    from verl.workers.config import FSDPActorConfig

    return FSDPActorConfig(ppo_mini_batch_size=1, ppo_micro_batch_size_per_gpu=1, strategy="fsdp", rollout_n=1, **kw)


@pytest.mark.verl
def test_table_matches_verls_source():
    sys.path.insert(0, str(ROOT / "scripts"))
    import verl_clip_bounds

    committed = json.loads((ROOT / "wizard/check/data/verl_clip_bounds.json").read_text(encoding="utf-8"))
    assert verl_clip_bounds.build() == committed
    assert committed["modes"]["cispo"]["detached_weight"] and not committed["modes"]["vanilla"]["detached_weight"]
    assert committed["defaults"]["clip_ratio_low"]["default"] == 0.2


def _vanilla(config):
    import torch
    from verl.trainer.ppo import core_algos

    torch.manual_seed(0)
    old = torch.randn(8, 64) - 2
    log_prob = old + 0.3 * torch.randn(8, 64)
    adv = torch.linspace(-1, 1, 8).unsqueeze(-1).expand(8, 64)
    loss, metrics = core_algos.compute_policy_loss_vanilla(old, log_prob, adv, torch.ones(8, 64), config=config)
    return float(loss), metrics["actor/pg_clipfrac"]


@pytest.mark.verl
def test_verl_never_reads_clip_ratio_alone():
    assert _config(clip_ratio=0.1).clip_ratio_low == 0.2  # verl's own dataclass default, as its YAML
    assert _vanilla(_config(clip_ratio=0.1)) == _vanilla(_config(clip_ratio=0.2))  # clip_ratio changes nothing
    assert _vanilla(_config(clip_ratio=0.1, clip_ratio_low=0.1, clip_ratio_high=0.1)) != _vanilla(_config())
    assert _vanilla(_config(clip_ratio=0.1, clip_ratio_low=None, clip_ratio_high=None)) == _vanilla(
        _config(clip_ratio_low=0.1, clip_ratio_high=0.1))  # null sides do fall back


def test_check_names_a_shadowed_clip_ratio():
    (hit,) = _hits("VI667", f"{A}.clip_ratio=0.1")
    assert hit.problem.severity == "warning" and "clip_ratio=0.1" in hit.problem.message
    assert hit.fix.set == {f"{A}.clip_ratio_low": 0.1, f"{A}.clip_ratio_high": 0.1}
    (hit,) = _hits("VI667", f"{A}.clip_ratio=0.1", f"{A}.clip_ratio_high=0.28")  # only the side left at 0.2
    assert hit.fix.set == {f"{A}.clip_ratio_low": 0.1}
    assert _hits("VI667", f"{A}.clip_ratio=0.1", f"{A}.policy_loss.loss_mode=gspo")  # any mode of the table


def test_clip_ratio_that_is_read_or_matches_is_clean():
    assert not _hits("VI667", f"{A}.clip_ratio=0.2")  # same as the sides
    assert not _hits("VI667", f"{A}.clip_ratio=0.1", f"{A}.clip_ratio_low=0.1", f"{A}.clip_ratio_high=0.1")
    assert not _hits("VI667", f"{A}.clip_ratio=0.1", f"{A}.clip_ratio_low=null", f"{A}.clip_ratio_high=null")
    assert not _hits("VI667", f"{A}.clip_ratio=0.1", f"{A}.policy_loss.loss_mode=kl_cov")  # VI776's: no clip read
    assert not _hits("VI667")


def _cispo_weight(low: float) -> float:
    """The gradient weight verl's CISPO loss gives a token whose ratio fell to 0.3, with advantage 1."""
    import torch
    from verl.trainer.ppo import core_algos

    old = torch.zeros(1, 1)
    log_prob = torch.log(torch.full((1, 1), 0.3)).requires_grad_(True)
    loss, _ = core_algos.compute_policy_loss_cispo(old, log_prob, torch.ones(1, 1), torch.ones(1, 1),
                                                   config=_config(clip_ratio_low=low, clip_ratio_high=0.2))
    loss.backward()
    return -float(log_prob.grad)


@pytest.mark.verl
def test_verls_cispo_floors_the_weight_below_one():
    assert _cispo_weight(0.2) == pytest.approx(0.8)  # floored at 1 - clip_ratio_low
    assert _cispo_weight(10.0) == pytest.approx(0.3)  # verl's example: the ratio itself


def test_check_names_a_floored_cispo_weight():
    (hit,) = _hits("VI670", f"{A}.policy_loss.loss_mode=cispo")
    assert hit.problem.severity == "warning" and "0.8" in hit.problem.message
    assert hit.fix.set == {f"{A}.clip_ratio_low": 10.0}
    assert _hits("VI670", f"{A}.policy_loss.loss_mode=cispo", f"{A}.clip_ratio_low=0.5")


def test_cispo_without_a_floor_and_other_modes_are_clean():
    assert not _hits("VI670", f"{A}.policy_loss.loss_mode=cispo", f"{A}.clip_ratio_low=10",
                     f"{A}.clip_ratio_high=0.2")  # verl's examples/cispo_trainer
    assert not _hits("VI670", f"{A}.policy_loss.loss_mode=cispo", f"{A}.clip_ratio_low=1")
    assert not _hits("VI670")
    assert not _hits("VI670", f"{A}.policy_loss.loss_mode=geo_mean")
