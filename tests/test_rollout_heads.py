"""Rollout TP against the model's attention heads (VI838 in `check`, VI321 in the planner).

vLLM and SGLang split each attention layer over the engine's tensor-parallel ranks: QKVParallelLinear takes
`divide(heads, tp)` query heads per rank and `divide(kv_heads, tp)` KV heads, or, when tp ≥ kv_heads, one KV head
replicated `divide(tp, kv_heads)` times; `divide` asserts exact division. The expected sets below are that rule
worked out by hand for each model's published head counts, not computed by the code under test.
"""

from __future__ import annotations

import pytest

from wizard.check.lint import check
from wizard.intent.errors import WizardError
from wizard.verlspec.arithmetic import attention_tp_problem, attention_tp_sizes

R = "actor_rollout_ref.rollout"
BASE = ["algorithm.adv_estimator=grpo", "data.train_batch_size=64", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", f"{R}.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]


@pytest.mark.parametrize("heads, kv, valid", [
    (28, 4, [1, 2, 4]),          # Qwen2.5-7B / DeepSeek-R1-Distill-Qwen-7B: 28 = 4·7, so 8 fails
    (12, 2, [1, 2, 4, 6]),       # Qwen2.5-1.5B: 12 % 8 ≠ 0; 3 splits 12 heads but not 2 KV heads (3 % 2); 4 and 6
                                 # replicate each KV head 2 and 3 times
    (14, 2, [1, 2]),             # Qwen2.5-0.5B: 14 = 2·7
    (32, 8, [1, 2, 4, 8]),       # Llama-3.1-8B
    (40, 8, [1, 2, 4, 8]),       # Qwen2.5-14B/32B: 40 % 8 = 0
    (24, 3, [1, 3, 6]),          # the KV heads decide: 24 heads split over 2, 4, 6 and 8, but 3 KV heads neither
                                 # split over 2 nor replicate evenly across 4 or 8 (4 % 3, 8 % 3); 6 % 3 = 0
])
def test_the_sizes_that_split_the_heads(heads, kv, valid):
    assert attention_tp_sizes(heads, kv, range(1, 9)) == valid
    for tp in range(1, 9):
        assert (attention_tp_problem(tp, heads, kv) is None) == (tp in valid), tp


def test_latent_attention_splits_only_the_query_heads():
    # DeepSeek-V3: 128 heads, MLA (its KV is one latent, not split by heads); 16 → fine, 48 → 128 % 48 ≠ 0
    assert attention_tp_problem(16, 128, None) is None
    assert "128 attention heads" in attention_tp_problem(48, 128, None)


def _check(model: str, tp: int, engine: str = "vllm"):
    return check(None, [*BASE, f"actor_rollout_ref.model.path={model}", f"{R}.tensor_model_parallel_size={tp}",
                        f"{R}.name={engine}"], env={})


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_refuses_a_rollout_tp_the_heads_do_not_split(engine):
    # the real case: DeepSeek-R1-Distill-Qwen-7B (28 heads) at rollout TP 8, "28 must be divisible by 8"
    report = _check("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", 8, engine)
    found = [f.problem for f in report.errors if f.problem.rule == "VI838"]
    assert len(found) == 1
    p = found[0]
    assert p.keys == (f"{R}.tensor_model_parallel_size",)
    assert "28 attention heads" in p.message and "=8" in p.message
    assert "2 or 4" in p.hint


@pytest.mark.parametrize("model, tp", [("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", 4),
                                       ("Qwen/Qwen2.5-7B-Instruct", 2),
                                       ("meta-llama/Llama-3.1-8B-Instruct", 8)])
def test_check_accepts_sizes_that_split_the_heads(model, tp):
    assert "VI838" not in _check(model, tp).ids("error")


def test_a_size_guessed_from_a_name_is_not_judged():
    # a model outside the catalogue, sized from "7B" in its name: its head count is a guess
    assert "VI838" not in _check("someone/unknown-model-7B", 8).ids()


def test_the_planner_never_picks_a_rollout_tp_the_heads_do_not_split():
    from wizard.intent.answers import make_answers
    from wizard.intent.errors import Findings
    from wizard.planner.shapes import from_catalogue
    from wizard.planner.stages.layout import rollout_tp_options

    shape = from_catalogue("Qwen/Qwen2.5-0.5B-Instruct")
    a = make_answers({"model": "Qwen/Qwen2.5-0.5B-Instruct", "nnodes": 1, "gpus_per_node": 8})
    f = Findings()
    assert rollout_tp_options(a, 8, f, shape) == [1, 2]  # 4 and 8 do not split 14 heads
    assert not f.errors
    assert rollout_tp_options(a, 8, f, None) == [1, 2, 4, 8]  # no shape: only the node decides


def test_the_planner_refuses_an_explicit_rollout_tp_naming_the_answer():
    import wizard

    answers = wizard.merge_answers(profile="single-gpu", sets=["gpus_per_node=8", "rollout_tp=8"])
    with pytest.raises(WizardError) as err:
        wizard.plan(answers)
    text = str(err.value) + " ".join(p.line() for p in getattr(err.value, "problems", []))
    assert "VI321" in text and "rollout_tp=8" in text and "14 attention heads" in text
    assert "rollout_tp=1 or 2" in text


def test_a_reward_model_engine_gets_a_tp_that_splits_its_heads():
    # Qwen2.5-7B (28 heads) as a reward model beside the policy on small cards: its share of a 16 GB card stays above
    # 0.3 at every TP, so the planner takes the largest TP, which must be 4 (28 % 8 ≠ 0), not 8
    from wizard.planner.memory import reward_engine_share, reward_layout
    from wizard.planner.shapes import from_catalogue

    judge = from_catalogue("Qwen/Qwen2.5-7B-Instruct")
    assert reward_engine_share(judge, 16, 2048, 4) > 0.3
    assert reward_layout(judge, 16, 2048, 8)[0] == 4
