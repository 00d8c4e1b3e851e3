"""Rules derived from verl's code for three classes of real mistakes (tests/test_real_mistakes.py names the cases):

- VI904 Megatron context parallel under dynamic batching: verl packs budget × CP tokens before the CP split
  (workers/engine/utils.py:111, megatron/transformer_impl.py:836), so CP lowers nothing when the budget holds a
  whole sequence;
- VI905 a vLLM rollout replica that spans nodes only through data_parallel_size, for a model without experts
  (replica.py:108-118, vllm_async_server.py:384-414);
- VI906 rollout.max_model_len above max_num_batched_tokens with chunked prefill on (rollout.yaml:86,
  vllm_async_server.py:1113).

Each rule: the real case's class with other values is named, and a valid neighbour stays clean.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wizard.check.lint import check


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    for name in ("train.parquet", "val.parquet"):
        (tmp_path / name).write_bytes(b"PAR1")
    return tmp_path


def _base(data: Path, nnodes: int, gpn: int) -> list[str]:
    return [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={data / 'train.parquet'}",
        f"data.val_files={data / 'val.parquet'}",
        "data.train_batch_size=64",
        "data.max_prompt_length=1024",
        "data.max_response_length=2048",
        "actor_rollout_ref.actor.ppo_mini_batch_size=32",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "trainer.logger=[console]",
        f"trainer.nnodes={nnodes}",
        f"trainer.n_gpus_per_node={gpn}",
    ]


FIXED = ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
         "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"]
DYNAMIC = ["actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True"]


def _check(data: Path, extra: list[str], nnodes: int = 1, gpn: int = 8):
    return check(None, [*_base(data, nnodes, gpn), *extra], nnodes=nnodes, gpus_per_node=gpn, gpu_memory_gb=80,
                 defaults="snapshot", env={"HOME": "/nonexistent-home"})


def _named(report, rule: str, key: str) -> bool:
    return any(f.problem.rule == rule and key in f.problem.keys for f in report.findings)


def _lines(report) -> list[str]:
    return [f.problem.line() for f in report.findings]


# -- VI904: Megatron CP that does not lower the tokens per GPU ------------------------------------------------------

MEGATRON = ["model_engine=megatron", "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct",
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"]


def test_vi904_context_parallel_with_a_budget_that_holds_a_sequence(data):
    # CP 4 over 2 nodes of 8, budget 8192 ≥ prompt + response 3072: each GPU still packs 8192 tokens
    report = _check(data, [*MEGATRON, *DYNAMIC, "actor_rollout_ref.actor.megatron.context_parallel_size=4",
                           "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192"], nnodes=2)
    hit = [f.problem for f in report.findings if f.problem.rule == "VI904"]
    assert hit and hit[0].severity == "warning", _lines(report)
    assert "actor_rollout_ref.actor.megatron.context_parallel_size" in hit[0].keys
    assert "32768 tokens" in hit[0].message and "≥ 768" in hit[0].hint, hit[0].line()


def test_vi904_control_cp_needed_for_one_sequence_is_clean(data):
    # budget 2048 < 3072: one sequence needs the CP split (2048 × 2 ≥ 3072): CP is doing its job
    report = _check(data, [*MEGATRON, *DYNAMIC, "actor_rollout_ref.actor.megatron.context_parallel_size=2",
                           "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=2048",
                           "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=4096"])
    assert "VI904" not in report.ids(), _lines(report)
    assert not report.errors, _lines(report)
    # and CP 1 with the same large budget: nothing to say
    plain = _check(data, [*MEGATRON, *DYNAMIC, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192"])
    assert "VI904" not in plain.ids() and not plain.errors, _lines(plain)


# -- VI905: rollout data parallel across nodes for a dense model -----------------------------------------------------

def test_vi905_rollout_dp_spans_nodes_for_a_dense_model(data):
    # 4 nodes of 4 GPUs, TP 2 × DP 4 = 8 GPUs per replica: two nodes bound into one server
    report = _check(data, [*FIXED, "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct",
                           "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
                           "actor_rollout_ref.rollout.data_parallel_size=4"], nnodes=4, gpn=4)
    assert _named(report, "VI905", "actor_rollout_ref.rollout.data_parallel_size"), _lines(report)
    hit = next(f.problem for f in report.findings if f.problem.rule == "VI905")
    assert hit.severity == "warning" and "spans 2 nodes" in hit.message, hit.line()


def test_vi905_controls_dp_inside_a_node_and_a_moe_model_are_clean(data):
    inside = _check(data, [*FIXED, "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct",
                           "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
                           "actor_rollout_ref.rollout.data_parallel_size=2"], nnodes=4, gpn=4)
    assert "VI905" not in inside.ids() and not inside.errors, _lines(inside)
    separate = _check(data, [*FIXED, "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct",
                             "actor_rollout_ref.rollout.tensor_model_parallel_size=2"], nnodes=4, gpn=4)
    assert not separate.errors and not separate.warnings, _lines(separate)
    # a MoE model: DP inside the replica is how vLLM runs expert parallel (EP = TP × DP)
    moe = _check(data, [*FIXED, "actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B",
                        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
                        "actor_rollout_ref.rollout.data_parallel_size=4",
                        "actor_rollout_ref.rollout.expert_parallel_size=8"], nnodes=4, gpn=4)
    assert "VI905" not in moe.ids(), _lines(moe)


# -- VI906: rollout max_model_len above max_num_batched_tokens -------------------------------------------------------

def test_vi906_max_model_len_above_the_batched_token_budget(data):
    report = _check(data, [*FIXED, "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct",
                           "actor_rollout_ref.rollout.max_num_batched_tokens=4096",
                           "actor_rollout_ref.rollout.max_model_len=16384"])
    assert _named(report, "VI906", "actor_rollout_ref.rollout.max_num_batched_tokens"), _lines(report)
    hit = next(f.problem for f in report.findings if f.problem.rule == "VI906")
    assert hit.severity == "warning" and "≥ 16384" in hit.hint, hit.line()


def test_vi906_controls(data):
    enough = _check(data, [*FIXED, "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct",
                           "actor_rollout_ref.rollout.max_num_batched_tokens=16384",
                           "actor_rollout_ref.rollout.max_model_len=16384"])
    assert not enough.errors and not enough.warnings, _lines(enough)
    # max_model_len left to the model: the engine's own default, not a setting the user chose
    default = _check(data, [*FIXED, "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct",
                            "actor_rollout_ref.rollout.max_num_batched_tokens=4096"])
    assert "VI906" not in default.ids() and not default.errors, _lines(default)
    # chunked prefill off: verl raises the budget itself; VI831 says so, VI906 does not repeat it
    off = _check(data, [*FIXED, "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct",
                        "actor_rollout_ref.rollout.enable_chunked_prefill=False",
                        "actor_rollout_ref.rollout.max_num_batched_tokens=2048",
                        "actor_rollout_ref.rollout.max_model_len=16384"])
    assert "VI906" not in off.ids() and "VI831" in off.ids("warning"), _lines(off)
