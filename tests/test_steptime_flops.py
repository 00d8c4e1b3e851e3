"""The FLOPs the step-time model and its calibration harness count, checked against verl's own FLOP counter
(verl.utils.flops_counter, the code that writes perf/mfu/actor), and the mean sequences the harness reads from a
report's MFU, checked against the same reports' throughput: two independent measures of the same tokens."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest
import transformers
from steptime_cases import _seq_from_mfu, _seq_from_report, cases, verl_counted_flops, workload

import steptime_cases
from wizard.planner import steptime as st
from wizard.planner.shapes import resolve_shape

CASES = cases()


def _lengths(prompt: int, resp_mean: float, cap: int, n: int = 4000) -> list[int]:
    """n sequence lengths at the quantiles of the model's law: prompt + an exponential response clipped at cap."""
    m = st.length_scale(resp_mean, cap)
    return [prompt + min(cap, round(-m * math.log(1 - (i + 0.5) / n))) for i in range(n)]


@pytest.mark.parametrize("model", ["Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3.5-9B",
                                   "Qwen/Qwen3.5-35B-A3B"])
def test_counted_flops_are_what_verls_counter_counts(model):
    """verl 0.9.1's FlopsCounter over a batch drawn from the length law counts what verl_counted_flops (the harness's
    inversion of perf/mfu/actor) says, and the model's own attention FLOPs for a training pass (3 × a forward's,
    at the context attention_context gives) are its attention term."""
    from verl.utils.flops_counter import ESTIMATE_FUNC  # what FlopsCounter.estimate_flops calls, less the device query

    shape = resolve_shape(model)
    config = transformers.AutoConfig.for_model(shape.arch, **shape.hf_config_kwargs())
    prompt, resp, cap = 300, 1500.0, 8192
    lengths = _lengths(prompt, resp, cap)
    counted = ESTIMATE_FUNC[config.model_type](config, sum(lengths), lengths, 1.0) * 1e12
    mean_resp = sum(lengths) / len(lengths) - prompt  # the sample's own mean (quantiles of a clipped law)
    ours = verl_counted_flops(shape, len(lengths), prompt, mean_resp, cap, attention=6)
    assert ours == pytest.approx(counted, rel=0.01)
    # the attention part alone: verl's total less its 6 × N × tokens, against the model's training attention
    dense = verl_counted_flops(shape, len(lengths), prompt, mean_resp, cap, attention=0)
    w = st.Workload(**st.shape_fields(shape, 1), n_gpus=1, prompts=1, n=1, max_prompt=prompt, max_response=cap)
    ctx = st.attention_context(prompt, mean_resp, cap)
    model_attention = 3 * st._attn_flops_per_token(w, ctx) * sum(lengths)
    assert model_attention == pytest.approx(counted - dense, rel=0.03)


def test_attention_context_is_half_the_mean_square_over_the_mean():
    """E[L²] / (2 E[L]) written out: an unclipped exponential (mean m) with no prompt gives m, not m / 2; with a
    prompt P, (P² + 2Pm + 2m²) / (2 (P + m)); every response at the cap (mean → cap) gives (P + cap) / 2."""
    huge = 1e9
    assert st.attention_context(0.0, 1000.0, huge) == pytest.approx(1000.0, rel=1e-3)
    p, m = 500.0, 2000.0
    assert st.attention_context(p, m, huge) == pytest.approx((p * p + 2 * p * m + 2 * m * m) / (2 * (p + m)), rel=1e-3)
    # numerically: the quantile sample's own moments
    lengths = _lengths(500, 3000.0, 8192, n=20000)
    sample = sum(x * x for x in lengths) / (2 * sum(lengths))
    assert st.attention_context(500.0, sum(lengths) / len(lengths) - 500, 8192) == pytest.approx(sample, rel=0.01)


def _seqs_gpus(c):
    d = c.get("derived") or {}
    cfg, hw = c["config"], c["hardware"]
    seqs = d.get("responses_trained_per_step") or cfg["train_batch_size"] * cfg["rollout_n"]
    return seqs, hw.get("n_gpus_total") or hw["nnodes"] * hw["n_gpus_per_node"]


def _both():
    """Reports with an MFU and, independently, the tokens themselves (verl's total_num_tokens or throughput)."""
    out = []
    for c in CASES:
        bare = copy.deepcopy(c)
        bare["derived"] = {}
        m = c["measured"]
        if m.get("perf/mfu/actor") and (m.get("perf/total_num_tokens") or m.get("perf/throughput")):
            seqs, gpus = _seqs_gpus(c)
            out.append((c["id"], _seq_from_mfu(c, seqs, gpus), _seq_from_report(bare)))
    return out


def test_the_mean_sequence_read_from_mfu_agrees_with_throughput():
    """Inverting verl's FLOP counter (with the attention term of the report's verl: 12 × Σ L² before 2026-01-18, 6
    after) gives the mean sequence that the same report's token count gives, within 10 %, on every report that has
    both. Counting 6 × active parameters alone (no attention, the estimate this replaced) misses by more on some."""
    both = _both()
    assert len(both) >= 4
    for cid, mfu, tokens in both:
        assert mfu == pytest.approx(tokens, rel=0.10), cid


def test_the_mfu_inversion_without_attention_fails_the_throughput_check(monkeypatch):
    """The planted fault: an inversion that ignores the attention term (what verl counts beside 6 × N × tokens)
    overstates the mean sequence where sequences are long."""
    real = verl_counted_flops
    monkeypatch.setattr(steptime_cases, "verl_counted_flops",
                        lambda shape, seqs, prompt, resp, cap, attention=6: real(shape, seqs, prompt, resp, cap, 0))
    assert any(abs(mfu / tokens - 1) > 0.10 for _, mfu, tokens in _both())


def test_a_rollout_tp_group_across_nodes_pays_nccls_latency_not_a_bandwidth_factor():
    """A rollout TP group spanning two nodes: each decode iteration's per-layer cost grows by its two all-reduces'
    inter-node latency (2 × CROSS_NODE_ALLREDUCE_S × layers) and its bytes over the NIC instead of NVLink: nothing
    more. The drain of one sequence to max_response_length is that many iterations."""
    shape = resolve_shape("Qwen/Qwen3-235B-A22B")
    base = st.Workload(params=shape.params, active_params=shape.active_params, layers=shape.layers,
                       hidden=shape.hidden, kv_bytes_per_token=shape.kv_bytes_per_token(16), n_gpus=16, prompts=1,
                       n=1, max_prompt=128, max_response=4096, response_mean=100.0, gpu_type="H100", rollout_tp=16,
                       gmu=0.9, moe=True, gpus_per_node=16)
    across = st.rollout_seconds(replace(base, gpus_per_node=8), "H100", st.GPU_PEAK["H100"], 1e6, 100.0, 128.0)
    inside = st.rollout_seconds(base, "H100", st.GPU_PEAK["H100"], 1e6, 100.0, 128.0)
    tp = 16
    nic, nvl = st.NIC_GB_S * 1e9, st.INTRA_NODE_GB_S["H100"] * 1e9
    bytes_per_seq = 2 * 2 * (tp - 1) / tp * shape.hidden * 2 * shape.layers  # two all-reduces a layer, a ring
    per_iteration = 2 * st.CROSS_NODE_ALLREDUCE_S * shape.layers + bytes_per_seq * (1 / nic - 1 / nvl)
    assert across["decode tail"] - inside["decode tail"] == pytest.approx(4096 * per_iteration, rel=1e-6)


def test_a_report_without_expert_tp_gets_verls_default_only_where_it_can_run():
    """verl's expert_tensor_parallel_size null means TP (engine/megatron.yaml:20); Megatron needs ETP × EP × PP to
    divide the GPUs, so TP 4 and EP 8 on 16 GPUs ran with ETP 1, on 32 GPUs it may be 4; a stated one is kept."""
    t11 = copy.deepcopy(next(c for c in CASES if c["id"] == "T11"))
    t11["overrides"] = None
    assert workload(t11, CASES).expert_tp == 1
    wide = copy.deepcopy(t11)
    wide["hardware"].update(n_gpus_total=32, nnodes=4)
    assert workload(wide, CASES).expert_tp == 4
    stated = copy.deepcopy(wide)
    stated["overrides"] = ["actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=2"]
    assert workload(stated, CASES).expert_tp == 2


@pytest.mark.parametrize("date, version, k", [("2025-07-02", "0.4.1", 12), ("2026-07-30", "0.9.0", 6),
                                             (None, "0.7.0", 12), (None, "0.7.1", 6), (None, "0.9.1", 6),
                                             (None, None, 6)])
def test_the_attention_term_follows_the_reports_verl(monkeypatch, date, version, k):
    """12 × Σ L² before verl PR #4959 (2026-01-18, first released in v0.7.1), 6 × after: by the report's date, else
    its verl version, else today's verl."""
    seen = []
    real = verl_counted_flops
    monkeypatch.setattr(steptime_cases, "verl_counted_flops",
                        lambda shape, seqs, prompt, resp, cap, attention=6: seen.append(attention) or
                        real(shape, seqs, prompt, resp, cap, attention))
    c = copy.deepcopy(next(c for c in CASES if c["id"] == "T11"))
    c["date"], c["verl_version"] = date, version
    seqs, gpus = _seqs_gpus(c)
    assert _seq_from_mfu(c, seqs, gpus) is not None
    assert set(seen) == {k}
