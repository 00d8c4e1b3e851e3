"""VI832: a token budget (*_max_token_len_per_gpu) set with its dynamic batching off (real case verl#2753: a budget of
2 × 9K tokens beside fixed micro-batches of 2; the update took ~90 % of the step). The oracle is verl's own
prepare_micro_batches (workers/engine/utils.py), which the engines call to split a pass: with dynamic batching off the
micro-batch count is the same whatever the budget; on, the budget sets it.
"""

from __future__ import annotations

import pytest

from wizard.check.lint import check

A, R, REF = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.ref"
BASE = ["trainer.nnodes=1", "trainer.n_gpus_per_node=8", "data.train_batch_size=64", "actor_rollout_ref.rollout.n=4",
        f"{A}.ppo_mini_batch_size=16", f"{R}.name=vllm", "data.max_prompt_length=1024", "data.max_response_length=1024"]
FIXED = [f"{A}.use_dynamic_bsz=false", f"{A}.ppo_micro_batch_size_per_gpu=2",
         f"{R}.log_prob_micro_batch_size_per_gpu=2", f"{REF}.log_prob_micro_batch_size_per_gpu=2"]


def _micro_batches(budget: int, dynamic: bool) -> int:
    import torch

    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches

    ids = torch.nested.as_nested_tensor([torch.ones(5 + i, dtype=torch.long) for i in range(8)], layout=torch.jagged)
    td = tu.get_tensordict({"input_ids": ids, "attention_mask": ids}, non_tensor_dict={
        "use_dynamic_bsz": dynamic, "micro_batch_size_per_gpu": 2, "max_token_len_per_gpu": budget})
    return len(prepare_micro_batches(td)[0])


@pytest.mark.verl
def test_verl_reads_the_budget_only_with_dynamic_batching():
    assert _micro_batches(16, False) == _micro_batches(100_000, False) == 8 // 2
    assert _micro_batches(16, True) > _micro_batches(100_000, True)


def _vi832(*extra: str, config_name: str | None = None):
    report = check(None, [*BASE, *FIXED, *extra], config_name=config_name)
    return [f.problem for f in report.findings if f.problem.rule == "VI832"]


def test_a_budget_beside_fixed_micro_batches_is_named_once():
    [hit] = _vi832(f"{A}.ppo_max_token_len_per_gpu=18432", f"{R}.log_prob_max_token_len_per_gpu=18432")
    assert hit.severity == "warning" and "micro-batches of 2 sequence(s)" in hit.message
    assert hit.keys == (f"{A}.ppo_max_token_len_per_gpu", f"{A}.use_dynamic_bsz",
                        f"{R}.log_prob_max_token_len_per_gpu", f"{R}.log_prob_use_dynamic_bsz")


def test_nothing_when_the_budget_is_read_or_not_set():
    assert not _vi832()  # verl's default budgets, not set: nothing to say
    on = [f"{A}.use_dynamic_bsz=true", f"{A}.ppo_max_token_len_per_gpu=18432",
          f"{R}.log_prob_max_token_len_per_gpu=18432"]
    assert not _vi832(*on)


def test_megatron_keeps_it_off_on_purpose_an_info():
    """verl's Megatron examples (bshd mode) set a budget beside fixed micro-batches: a true note, not a warning."""
    [hit] = _vi832(f"{A}.ppo_max_token_len_per_gpu=8192", config_name="ppo_megatron_trainer")
    assert hit.severity == "info"
