"""VI835: Megatron's interleaved schedule with fixed micro-batches. verl asserts each pass's micro-batch count divides
by microbatch_group_size_per_vp_stage (workers/engine/megatron/transformer_impl.py:873-918), megatron-core's default
for it being the pipeline size (model_parallel_config.py __post_init__). The count here comes from verl's own splitter
(workers/engine/utils.py prepare_micro_batches) on as many samples as a rank gets, not from the rule's arithmetic.
The real case: verl-project/verl#1004 ("[PP=2, M=1]")."""

from __future__ import annotations

import pytest

from wizard.check.lint import check

A, R = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"


def _verl_micro_batches(samples: int, micro: int) -> int:
    import torch
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches

    td = TensorDict({"input_ids": torch.zeros(samples, 1, dtype=torch.long)}, batch_size=[samples])
    tu.assign_non_tensor(td, use_dynamic_bsz=False, micro_batch_size_per_gpu=micro)
    return len(prepare_micro_batches(td)[0])


def _check(mini: int, micro: int, *, pp: int = 2, vpp: int | None = 2, dynamic: bool = False, group: int | None = None):
    # 8 GPUs, TP 4 × PP 2: one data-parallel rank holds the whole mini-batch (mini × n samples, n = 1)
    over = [f"{R}.name=vllm", "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "algorithm.adv_estimator=grpo",
            f"{A}.megatron.tensor_model_parallel_size=4", f"{A}.megatron.pipeline_model_parallel_size={pp}",
            "trainer.n_gpus_per_node=8", "data.train_batch_size=16", f"{R}.n=1", f"{A}.ppo_mini_batch_size={mini}",
            f"{A}.ppo_micro_batch_size_per_gpu={micro}", f"{R}.log_prob_micro_batch_size_per_gpu=4",
            f"{A}.use_dynamic_bsz={dynamic}", f"{R}.log_prob_use_dynamic_bsz={dynamic}"]
    if vpp:
        over.append(f"{A}.megatron.virtual_pipeline_model_parallel_size={vpp}")
    if group:
        over.append(f"+{A}.megatron.override_transformer_config.microbatch_group_size_per_vp_stage={group}")
    return check(None, ["--config-name=ppo_megatron_trainer", *over], env={})


@pytest.mark.parametrize("mini, micro", [(1, 1), (2, 1), (4, 2), (4, 4), (8, 2), (6, 2), (6, 3)])
def test_vi835_where_the_count_does_not_divide_by_the_pipeline(mini, micro):
    count = _verl_micro_batches(mini, micro)
    fires = "VI835" in _check(mini, micro).ids("error")
    assert fires == (count % 2 != 0), (mini, micro, count)


@pytest.mark.slow
def test_no_vi835_without_interleaving_with_dynamic_batching_or_a_group_that_divides():
    assert "VI835" not in _check(1, 1, vpp=None).ids()
    assert "VI835" not in _check(1, 1, dynamic=True).ids()  # verl pads the count up then
    assert "VI835" in _check(6, 2, group=2).ids("error")  # 3 micro-batches
    assert "VI835" not in _check(6, 2, group=3).ids()
