"""The critic's token budget as verl 0.9.1's trainer sets it (real case verl#7462: a critic OOM despite its
micro-batch settings). verl builds the critic's engine with max_token_len_per_gpu = infer_max_token_len_per_gpu =
critic.ppo_infer_max_token_len_per_gpu (trainer/ppo/v1/trainer_base.py) and leaves the engine's use_dynamic_bsz at
its default, true; the critic's micro-batch keys never reach it. The facts are read from verl's source and
dataclasses here; check's memory estimate (both critic passes) and VI828 follow them, and the planner writes the
budget its estimate counts.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.memory import CRITIC_ENGINE_TOKENS

PPO = ["algorithm.adv_estimator=gae", "critic.enable=true", "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
       "critic.model.path=Qwen/Qwen2.5-7B-Instruct", "actor_rollout_ref.rollout.name=vllm", "trainer.nnodes=1",
       "trainer.n_gpus_per_node=8", "data.train_batch_size=256", "actor_rollout_ref.actor.ppo_mini_batch_size=64",
       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4", "data.max_prompt_length=1024",
       "data.max_response_length=2048"]


@pytest.mark.verl
def test_verls_trainer_sizes_the_critic_from_one_budget():
    import verl
    from verl.workers.config import CriticConfig
    from verl.workers.config.engine import EngineConfig

    fields = {f.name: f.default for f in dataclasses.fields(CriticConfig)}
    assert fields["ppo_infer_max_token_len_per_gpu"] == CRITIC_ENGINE_TOKENS
    assert {f.name: f.default for f in dataclasses.fields(EngineConfig)}["use_dynamic_bsz"] is True
    src = (Path(verl.__file__).parent / "trainer" / "ppo" / "v1" / "trainer_base.py").read_text(encoding="utf-8")
    assert "critic_cfg.engine.max_token_len_per_gpu = critic_cfg.ppo_infer_max_token_len_per_gpu" in src
    assert "critic_cfg.engine.infer_max_token_len_per_gpu = critic_cfg.ppo_infer_max_token_len_per_gpu" in src
    assert "critic_cfg.engine.use_dynamic_bsz" not in src and "micro_batch_size_per_gpu" not in src


def _critic_passes(extra: list[str]):
    report = check(None, PPO + extra, gpu_memory_gb=80)
    passes = report.memory.passes
    return report, passes["update_critic"], passes["values"]


def test_the_estimate_and_vi828_follow_verls_budget():
    report, update, values = _critic_passes(["critic.ppo_micro_batch_size_per_gpu=2"])
    assert report.memory.layout.critic_tokens == CRITIC_ENGINE_TOKENS  # ≤ 32 sequences × 3072 tokens a GPU gets
    [hit] = [f.problem for f in report.findings if f.problem.rule == "VI828"]
    assert "critic.ppo_micro_batch_size_per_gpu" in hit.message and "+critic.ppo_infer_max_token_len_per_gpu=6144" in hit.hint
    fixed, small_update, small_values = _critic_passes(["critic.ppo_micro_batch_size_per_gpu=2",
                                                        "+critic.ppo_infer_max_token_len_per_gpu=6144"])
    assert fixed.memory.layout.critic_tokens == 6144 and "VI828" not in fixed.ids()
    acts = dict(((r, w), b) for r, w, b in update.terms)[("critic", "activations (training micro-batch)")]
    small = dict(((r, w), b) for r, w, b in small_update.terms)[("critic", "activations (training micro-batch)")]
    assert acts / small == pytest.approx(CRITIC_ENGINE_TOKENS / 6144, rel=0.05)  # activations scale with the tokens
    assert values.working > small_values.working


def test_the_planner_writes_the_budget_its_estimate_counts():
    import wizard

    for dynamic in (True, False):
        answers = wizard.load_profile("ppo-16gpu").model_copy(update={"dynamic_batch": dynamic})
        plan = wizard.plan(answers)
        budget = plan.value("critic.ppo_infer_max_token_len_per_gpu")
        layout = plan.memory.layout
        assert budget and budget >= answers.max_prompt_length + answers.max_response_length
        assert layout.critic_tokens == budget * max(layout.sp, 1)
        if not dynamic:  # micro-batch × the sequence: the micro-batch's full tokens, as verl packs the budget
            seq = answers.max_prompt_length + answers.max_response_length
            assert budget == plan.value("critic.ppo_micro_batch_size_per_gpu") * seq // layout.sp
