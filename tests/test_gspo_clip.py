"""VI915: GSPO with token-level clip bounds (real case verl PR#2775: a GSPO run with GRPO's 0.2 / 0.28). The oracle is
verl's own loss functions on one batch: with a policy drift that token-level PPO clips (compute_policy_loss_vanilla
at 0.2 / 0.28 clips a sizeable share of tokens), GSPO's sequence ratio (compute_policy_loss_gspo) at the same bounds
clips nothing, while verl's GSPO example bounds (3e-4 / 4e-4) clip.
"""

from __future__ import annotations

import pytest

from wizard.check.lint import check
from wizard.check.rules.values import GSPO_BOUNDS, TOKEN_SCALE

A = "actor_rollout_ref.actor"
BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        f"{A}.ppo_micro_batch_size_per_gpu=4", "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "algorithm.adv_estimator=grpo",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=8", "data.train_batch_size=64", f"{A}.ppo_mini_batch_size=16",
        f"{A}.policy_loss.loss_mode=gspo"]


def _clipfrac(loss: str, low: float, high: float, drift: float = 0.15, length: int = 512) -> float:
    import torch
    from verl.trainer.ppo import core_algos
    from verl.workers.config import FSDPActorConfig

    torch.manual_seed(0)
    old = torch.randn(16, length) - 2
    log_prob = old + drift * torch.randn(16, length)
    adv = torch.linspace(-1, 1, 16).unsqueeze(-1).expand(16, length)
    config = FSDPActorConfig(clip_ratio=0.2, clip_ratio_low=low, clip_ratio_high=high, ppo_mini_batch_size=1,
                             ppo_micro_batch_size_per_gpu=1, strategy="fsdp", rollout_n=1)
    fn = getattr(core_algos, f"compute_policy_loss_{loss}")
    _, metrics = fn(old, log_prob, adv, torch.ones(16, length), config=config)
    return metrics["actor/pg_clipfrac"]


@pytest.mark.verl
def test_token_bounds_clip_tokens_but_no_sequence():
    assert _clipfrac("vanilla", 0.2, 0.28) > 0.05  # a drift token-level PPO clips
    assert _clipfrac("gspo", 0.2, 0.28) == 0.0  # GSPO at the same bounds: nothing
    assert _clipfrac("gspo", TOKEN_SCALE, TOKEN_SCALE) == 0.0  # nor at the rule's threshold
    assert _clipfrac("gspo", *GSPO_BOUNDS) > 0.1  # verl's GSPO example bounds clip


def _vi915(*extra: str):
    return [f for f in check(None, BASE + list(extra), defaults="snapshot").findings if f.problem.rule == "VI915"]


def test_check_names_token_level_bounds_on_gspo():
    (hit,) = _vi915(f"{A}.clip_ratio_low=0.2", f"{A}.clip_ratio_high=0.28")
    assert hit.problem.severity == "warning" and "0.2 / 0.28" in hit.problem.message
    assert hit.fix.set == {f"{A}.clip_ratio_low": GSPO_BOUNDS[0], f"{A}.clip_ratio_high": GSPO_BOUNDS[1]}
    assert len(_vi915()) == 1  # verl's defaults (clip_ratio 0.2) are token-level bounds too


def test_sequence_level_bounds_vanilla_loss_and_one_update_a_batch_are_clean():
    assert not _vi915(f"{A}.clip_ratio_low=3e-4", f"{A}.clip_ratio_high=4e-4")
    assert not [f for f in check(None, [b for b in BASE if "loss_mode" not in b], defaults="snapshot").findings
                if f.problem.rule == "VI915"]
    assert not _vi915(f"{A}.ppo_mini_batch_size=64")  # one mini-batch, one epoch: the ratio is 1 (VI868's case)
