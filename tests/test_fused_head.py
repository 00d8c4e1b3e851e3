"""The policy's log-prob head with model.use_fused_kernels (wizard.planner.fusedhead, memtrace.FUSED_VARIANTS): when
verl runs it, what the traced passes keep, and what `check` makes of it.

The real case behind it: a DAPO Qwen2.5-Math-7B run on 8×H100, Megatron TP2, log-prob budget 102,400 tokens, fused
kernels on (ISEEKYAN/verl_megatron_practice dapo7b.csv row 16, which ran at 389 s a step). Counting the whole logits
of such a budget called it 113 GiB a GPU.
"""

from __future__ import annotations

import pytest

from wizard.check.lint import check
from wizard.planner import fusedhead, memtrace
from wizard.planner.shapes import from_catalogue

A, M, R = "actor_rollout_ref.actor", "actor_rollout_ref.model", "actor_rollout_ref.rollout"


def _get(values: dict):
    return lambda key: values.get(key)


@pytest.mark.parametrize("values, megatron, runs", [
    ({}, False, False),                                                        # verl's default: off
    ({f"{M}.use_fused_kernels": True}, False, True),                           # FSDP, backend unset: torch
    ({f"{M}.use_fused_kernels": True, f"{M}.fused_kernel_options.impl_backend": "triton"}, False, True),
    ({f"{M}.use_fused_kernels": True, f"{M}.fused_kernel_options.impl_backend": "other"}, False, False),
    ({f"{M}.use_fused_kernels": True, f"{M}.use_remove_padding": True}, True, True),
    ({f"{M}.use_fused_kernels": True, f"{M}.use_remove_padding": False}, True, False),  # Megatron turns it off
    ({f"{M}.use_fused_kernels": True, f"{M}.use_remove_padding": True, f"{M}.mtp.enable": True}, True, False),
])
def test_when_verl_runs_the_fused_head(values, megatron, runs):
    assert fusedhead.runs(_get(values), megatron) is runs


ARCHS = [(sig, d) for sig, d in memtrace.catalogue_data().items() if "hidden=64|" not in sig]


@pytest.mark.parametrize("sig, data", ARCHS, ids=[d["traced_from"] for _, d in ARCHS])
def test_the_traced_fused_passes_keep_no_logits_per_token(sig, data):
    """Per token the fused passes keep hidden-sized tensors, not vocabulary-sized ones: the unfused forward keeps at
    least the bf16 logits (2 B × vocabulary), the fused one less than 5 B × hidden. A chunk's temporaries are the
    constant, as fusedhead's analytic figures say: forward 512 × vocabulary × 12 B (bf16 logits, fp32 copy, softmax,
    log-softmax); training the larger of 512 × vocabulary × 28 B beside one chunk's bf16 LM-head gradient
    (2 B × vocabulary × hidden) and 512 × vocabulary × 18 B beside two."""
    f = dict(kv.split("=") for kv in sig.split("|"))
    vocab, hidden = int(f["vocab"]), int(f["hidden"])
    assert data["forward"]["rest_per_token"] >= 2 * vocab
    assert data["forward_fused"]["rest_per_token"] < 5 * hidden
    for key in ("train_gc_fused", "train_nogc_fused"):
        assert data[key]["rest_per_token"] < 14 * hidden
    assert data["forward_fused"]["constant"] == pytest.approx(512 * vocab * 12, rel=0.05)
    analytic = fusedhead.logit_bytes(vocab, hidden, 1, megatron=False, train=True)[1]
    assert analytic == max(512 * vocab * 28 + 2 * vocab * hidden, 512 * vocab * 18 + 4 * vocab * hidden)
    assert data["train_gc_fused"]["constant"] == pytest.approx(analytic, rel=0.05)
    # the layers keep the same whatever the head: the per-layer slope is the unfused passes'
    assert data["train_gc_fused"]["per_layer_per_token"] == pytest.approx(data["train_gc"]["per_layer_per_token"], rel=0.02)


@pytest.mark.slow  # traces on the CPU: about 10 s
def test_the_fused_trace_is_verls_chunked_head():
    """A fresh trace gives the stored numbers; tracing the same pass through the whole logits instead (the planted
    fault: fused=False) keeps ≥ 2 B a vocabulary entry per token."""
    shape = from_catalogue("Qwen/Qwen2.5-0.5B-Instruct")
    stored = memtrace.catalogue_data()[memtrace.signature(shape)]
    assert memtrace.trace_fused(shape) == {k: stored[k] for k in memtrace.FUSED_VARIANTS}
    kw = dict(memtrace.FUSED_VARIANTS["forward_fused"], fused=False)
    unfused = memtrace._fit(shape, kw, *memtrace.FUSED_TOKENS)
    assert unfused["rest_per_token"] >= 2 * shape.vocab > 50 * stored["forward_fused"]["rest_per_token"]


def test_megatron_linear_cross_entropy_bytes():
    # Qwen2.5-7B at TP 2: 76,032 vocabulary entries a rank, 75 forward splits of 1,024 (3 fp32 partials each) and five
    # fp32 outputs a token; training adds one 9,504-entry bf16 split of logit gradients a token and the rank's bf16
    # LM-head gradient (76,032 × 3,584 × 2 B)
    per_fwd, const_fwd = fusedhead.logit_bytes(152064, 3584, 2, megatron=True, train=False)
    assert (per_fwd, const_fwd) == (20 + 12 * 75, 0.0)
    per_train, const_train = fusedhead.logit_bytes(152064, 3584, 2, megatron=True, train=True)
    assert per_train == 20 + 12 * 75 + 2 * 9504 and const_train == 2 * 76032 * 3584


DAPO_TP2 = [
    "algorithm.adv_estimator=grpo", "data.max_prompt_length=2048", "data.max_response_length=8192",
    "data.train_batch_size=512", f"{R}.n=16", f"{M}.path=Qwen/Qwen2.5-7B-Instruct", f"{A}.ppo_mini_batch_size=32",
    f"{A}.use_dynamic_bsz=True", f"{A}.ppo_max_token_len_per_gpu=10240", "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True",
    f"{R}.log_prob_use_dynamic_bsz=True", "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=102400",
    f"{R}.log_prob_max_token_len_per_gpu=102400", f"{A}.megatron.param_offload=True",
    f"{A}.megatron.optimizer_offload=True", f"{A}.megatron.tensor_model_parallel_size=2",
    "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=2", "actor_rollout_ref.ref.megatron.param_offload=True",
    f"{A}.entropy_coeff=0", f"{R}.tensor_model_parallel_size=1", f"{R}.gpu_memory_utilization=0.6", f"{R}.name=vllm",
    "trainer.n_gpus_per_node=8", "trainer.nnodes=1",
]


def _memory(overrides):
    report = check(None, ["--config-name=ppo_megatron_trainer", *overrides], gpu_memory_gb=80, env={})
    return report


def test_check_counts_the_fused_head_and_the_run_that_ran_fits():
    """The log-prob phase without fused kernels holds the budget's whole logits; with them, their place is taken by the
    kernel's per-token partials. The difference, worked out here, is what the estimate's log-prob term drops."""
    plain = _memory(DAPO_TP2)
    fused = _memory([*DAPO_TP2, f"{M}.use_fused_kernels=True", f"{M}.use_remove_padding=True"])
    assert "VI860" in plain.ids("error")  # the whole logits of a 102,400-token budget do not fit
    assert "VI860" not in fused.ids("error") and "VI860" not in fused.ids("warning")
    term = "activations + logits (forward)"
    lp_plain = {t.part: t.gib for t in plain.memory.phases["log-prob"]}[term]
    lp_fused = {t.part: t.gib for t in fused.memory.phases["log-prob"]}[term]
    tokens = plain.memory.layout.logprob_tokens / 1  # a Megatron micro-batch is the budget (CP 1), no fill assumed
    drop = tokens * (152064 * 10 / 2 - fusedhead.logit_bytes(152064, 3584, 2, megatron=True, train=False)[0])
    assert (lp_plain - lp_fused) * 2**30 == pytest.approx(drop, rel=0.01)


def test_fsdp_with_fused_kernels_takes_the_traced_fused_passes():
    base = ["algorithm.adv_estimator=grpo", f"{M}.path=Qwen/Qwen2.5-7B-Instruct", f"{A}.ppo_mini_batch_size=64",
            f"{A}.use_dynamic_bsz=True", f"{A}.ppo_max_token_len_per_gpu=16384",
            f"{R}.log_prob_max_token_len_per_gpu=65536", "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=65536",
            f"{R}.name=vllm", "data.train_batch_size=128", "trainer.n_gpus_per_node=8", "trainer.nnodes=1"]
    plain = check(None, base, gpu_memory_gb=80, env={})
    fused = check(None, [*base, f"{M}.use_fused_kernels=True"], gpu_memory_gb=80, env={})
    assert "fused-kernel passes" in fused.memory.coefficients and "fused" not in plain.memory.coefficients
    data = memtrace.catalogue_data()[memtrace.signature(from_catalogue("Qwen/Qwen2.5-7B-Instruct"))]
    drop = data["forward"]["rest_per_token"] - data["forward_fused"]["rest_per_token"]
    assert plain.memory.verl_metrics["log-prob"]["max_memory_allocated_gb"] - \
        fused.memory.verl_metrics["log-prob"]["max_memory_allocated_gb"] > 65536 * drop * 0.5 / 2**30
