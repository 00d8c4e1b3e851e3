"""The critic's update activations follow its own settings and the actor's parallelism.

The critic is the same transformer body as a policy of its shape under a one-output value head (verl/utils/model.py
load_valuehead_model; the Megatron critic's engine runs the body with value=True), so its stored activations per
token are the policy's without the vocabulary's logits: full recompute keeps each layer's bf16 input (2·hidden B),
Megatron's default selective recompute 34·hidden B (Korthikanti et al. table 2), both split over TP, over the
stage's layers under PP, times the micro-batches 1F1B keeps in flight. The critic's engine reads its own
critic.megatron.override_transformer_config (verl 0.9.1 _generated_ppo_megatron_trainer.yaml:610-615) and its own
critic.model.enable_gradient_checkpointing (_generated_ppo_trainer.yaml:685). The planted fault: the estimate used
to count every critic as if it recomputed, whatever its keys said, and ignored TP and PP.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from wizard.check.lint import check
from wizard.planner import inflight, memory
from wizard.planner.shapes import ModelShape

SHAPE = ModelShape(name="qwen2.5-7b", arch="qwen2", layers=28, hidden=3584, heads=28, kv_heads=4, head_dim=128,
                   intermediate=18944, vocab=152064)
BASE = memory.Layout(gpu_gb=80, n_gpus=8, gpus_per_node=8, seq_len=4096, rollout_tp=2, gmu=0.5, dp=8, critic=SHAPE)


def _working(tp: int) -> float:
    return (10 * SHAPE.hidden + 4 * SHAPE.intermediate) * 2 / tp


@pytest.mark.parametrize("tp,pp,recompute", [(1, 1, False), (2, 1, False), (2, 2, False), (4, 2, True), (1, 4, True)])
def test_megatron_critic_bytes_per_token_written_out(tp, pp, recompute):
    L = replace(BASE, megatron=True, megatron_tp=tp, megatron_pp=pp, pp_micro_batches=8, critic_recompute=recompute)
    per_layer = (2 if recompute else 34) * SHAPE.hidden / tp
    flight = inflight.pipeline_in_flight(pp, None, 8)  # min(PP, micro-batches) on the first stage
    assert flight == min(pp, 8)
    expected = flight * math.ceil(SHAPE.layers / pp) * per_layer + _working(tp)
    assert memory._critic_bytes_per_token(SHAPE, L) == pytest.approx(expected)


@pytest.mark.parametrize("checkpointing", [True, False])
def test_fsdp_critic_bytes_per_token_written_out(checkpointing):
    L = replace(BASE, checkpointing=not checkpointing, critic_checkpointing=checkpointing)  # the actor's differs
    per_layer = 2 * SHAPE.hidden if checkpointing else _working(1)
    assert memory._critic_bytes_per_token(SHAPE, L) == pytest.approx(SHAPE.layers * per_layer + _working(1))


def test_the_critic_body_is_the_policy_body_without_logits():
    """Independent of the written-out numbers: a policy of vocabulary 0 has no logits, so its training bytes per
    token are the critic's for every layout (same recompute, same parallelism)."""
    bare = replace(SHAPE, vocab=0)
    for L in (BASE, replace(BASE, checkpointing=False),
              replace(BASE, megatron=True, megatron_tp=2, megatron_pp=2, pp_micro_batches=4),
              replace(BASE, megatron=True, megatron_tp=2, megatron_pp=4, recompute=True, pp_micro_batches=2)):
        assert memory._critic_bytes_per_token(SHAPE, L) == pytest.approx(memory.train_bytes_per_token(bare, L))


MEGATRON_PPO = ["algorithm.adv_estimator=gae", "critic.enable=true",
                "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "critic.model.path=Qwen/Qwen2.5-7B-Instruct",
                "actor_rollout_ref.rollout.name=vllm", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
                "data.train_batch_size=256", "actor_rollout_ref.actor.ppo_mini_batch_size=64",
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4", "data.max_prompt_length=1024",
                "data.max_response_length=2048", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
                "critic.megatron.tensor_model_parallel_size=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=2"]
ACTOR_FULL = [f"actor_rollout_ref.actor.megatron.override_transformer_config.{k}={v}"
              for k, v in (("recompute_granularity", "full"), ("recompute_method", "uniform"), ("recompute_num_layers", 1))]
CRITIC_FULL = [o.replace("actor_rollout_ref.actor.", "critic.") for o in ACTOR_FULL]


def _critic_per_token(extra: list[str]) -> float:
    report = check(None, MEGATRON_PPO + extra, gpu_memory_gb=80, defaults="snapshot", config_name="ppo_megatron_trainer")
    L = report.memory.layout
    assert L.megatron and L.megatron_tp == 2 and L.critic is not None
    return memory._critic_bytes_per_token(L.critic, L)


def test_check_reads_the_critics_own_recompute_keys():
    neither, actor_only = _critic_per_token([]), _critic_per_token(ACTOR_FULL)
    both = _critic_per_token(ACTOR_FULL + CRITIC_FULL)
    # the actor's recompute does not reach the critic's engine: its update keeps the selective 34·hidden B a layer
    assert actor_only == pytest.approx(neither)
    assert neither == pytest.approx(SHAPE.layers * 34 * SHAPE.hidden / 2 + _working(2))
    # its own keys do: 2·hidden a layer instead of 34, the layer being computed unchanged
    assert both == pytest.approx(SHAPE.layers * 2 * SHAPE.hidden / 2 + _working(2))


@pytest.mark.parametrize("update,recompute", [({}, False),
                                              ({"model": "Qwen/Qwen2.5-14B-Instruct", "max_response_length": 16384}, True)])
def test_the_planners_megatron_critic_is_counted_with_the_keys_it_writes(update, recompute):
    import wizard

    answers = wizard.load_profile("ppo-16gpu").model_copy(update={"train_backend": "megatron", **update})
    plan = wizard.plan(answers)
    L = plan.memory.layout
    assert L.megatron and L.recompute is recompute
    written = plan.settings.get("critic.megatron.override_transformer_config.recompute_granularity")
    assert (written is not None and written.value == "full") is recompute  # the critic's keys go with the actor's
    per_layer = (2 if recompute else 34) * L.critic.hidden / L.megatron_tp
    stored = math.ceil(L.critic.layers / L.megatron_pp) * per_layer
    flight = inflight.pipeline_in_flight(L.megatron_pp, L.megatron_vpp, L.pp_micro_batches)
    working = (10 * L.critic.hidden + 4 * L.critic.intermediate) * 2 / L.megatron_tp
    assert memory._critic_bytes_per_token(L.critic, L) == pytest.approx(flight * stored + working)
