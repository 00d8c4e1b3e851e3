"""VI868: PPO clip settings on a run that takes one optimizer step per batch (real cases verl#1477, #791: DAPO's
clip-higher with ppo_mini_batch_size = train_batch_size). The oracle is verl's own vanilla policy loss
(core_algos.compute_policy_loss_vanilla): with the log-probs the update starts from equal to old_log_prob (one
mini-batch, one epoch, old_log_prob recomputed with the same weights) the loss and its gradient do not depend on
the clip bounds and nothing is clipped; once the policy has moved (a later mini-batch) they do.
"""

from __future__ import annotations

import pytest

from wizard.check.lint import check

BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "algorithm.adv_estimator=grpo",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=8", "data.train_batch_size=64"]
HIGH = "actor_rollout_ref.actor.clip_ratio_high=0.28"


def _loss(moved: float, high: float):
    import torch
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla
    from verl.workers.config import FSDPActorConfig

    torch.manual_seed(0)
    old = torch.randn(4, 6) - 2
    log_prob = (old + moved * torch.randn(4, 6)).requires_grad_(True)
    config = FSDPActorConfig(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=high, ppo_mini_batch_size=1,
                             ppo_micro_batch_size_per_gpu=1, strategy="fsdp", rollout_n=1)
    loss, metrics = compute_policy_loss_vanilla(old, log_prob, torch.tensor([[1.0], [-1.0], [2.0], [-0.5]]).expand(4, 6),
                                                torch.ones(4, 6), config=config)
    loss.backward()
    return loss.item(), log_prob.grad.clone(), metrics["actor/pg_clipfrac"]


@pytest.mark.verl
def test_verls_loss_ignores_the_clip_bounds_at_ratio_one():
    import torch

    loss_a, grad_a, clipped = _loss(0.0, 0.2)
    loss_b, grad_b, _ = _loss(0.0, 0.28)
    assert clipped == 0.0 and loss_a == loss_b and torch.equal(grad_a, grad_b)
    moved_a, _, moved_clipped = _loss(0.5, 0.2)  # a policy that has moved: the bound matters
    moved_b, _, _ = _loss(0.5, 0.28)
    assert moved_clipped > 0 and moved_a != moved_b


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_says_the_clip_settings_have_no_effect_with_one_update_per_batch():
    one = check(None, BASE + [HIGH, "actor_rollout_ref.actor.ppo_mini_batch_size=64"])
    [hit] = [f.problem for f in one.findings if f.problem.rule == "VI868"]
    assert hit.severity == "info" and "clip_ratio_high" in hit.message and "ratio is 1" in hit.message
    several = ["actor_rollout_ref.actor.ppo_mini_batch_size=16"]  # 4 updates a batch: the ratio moves
    assert "VI868" not in check(None, BASE + [HIGH, *several]).ids()
    two_epochs = ["actor_rollout_ref.actor.ppo_mini_batch_size=64", "actor_rollout_ref.actor.ppo_epochs=2"]
    assert "VI868" not in check(None, BASE + [HIGH, *two_epochs]).ids()
    assert "VI868" not in check(None, BASE + ["actor_rollout_ref.actor.ppo_mini_batch_size=64"]).ids()  # no clip set
    bypass = ["actor_rollout_ref.actor.ppo_mini_batch_size=64", "algorithm.rollout_correction.bypass_mode=true"]
    assert "VI868" not in check(None, BASE + [HIGH, *bypass]).ids()  # rollout log-probs as old: the ratio moves
