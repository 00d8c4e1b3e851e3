"""Per-architecture memory coefficients traced under FakeTensorMode (wizard.planner.memtrace): the stored data is what
the script regenerates, the estimate says where its coefficients came from, and the JSON carries verl_metrics."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import ROOT
from wizard.planner import memtrace
from wizard.planner.shapes import from_catalogue, from_local

TINY = ROOT / "tests" / "data" / "tiny-qwen2-trace"


@pytest.mark.slow  # traces a model on the CPU: about 30 s
def test_regenerating_a_small_architecture_matches_the_stored_data():
    """The stored entry is what the script's trace gives now; a coefficient changed in it (the planted fault) would
    not match."""
    shape = from_local(str(TINY))
    stored = memtrace.catalogue_data()[memtrace.signature(shape)]
    fresh = memtrace.trace(shape, tokens=stored["tokens_traced"][1])
    keys = ("forward", "train_gc", "train_nogc", "value_forward", "value_train_gc", "value_train_nogc",
            *memtrace.FUSED_VARIANTS, "optimizer_step_temp_bytes_per_param")
    for key in keys:
        assert fresh[key] == stored[key], key
    planted = json.loads(json.dumps(stored))
    planted["train_gc"]["rest_per_token"] += 1
    assert any(fresh[k] != planted[k] for k in keys)


def test_the_traced_terms_follow_the_architecture():
    data = memtrace.catalogue_data()
    for name in ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-7B-Instruct"):
        d = data[memtrace.signature(from_catalogue(name))]
        # the forward's per-token bytes hold at least the bf16 logits (2 B per vocabulary entry)
        assert d["forward"]["rest_per_token"] >= 2 * from_catalogue(name).vocab
        # AdamW(foreach) keeps one fp32 temporary per parameter in its step
        assert d["optimizer_step_temp_bytes_per_param"] == pytest.approx(4.0)
    small = data[memtrace.signature(from_catalogue("Qwen/Qwen2.5-0.5B-Instruct"))]
    # gradient checkpointing keeps each layer's bf16 input (2 B × hidden per token); without it a layer keeps more
    assert small["train_gc"]["per_layer_per_token"] == 2 * 896
    assert small["train_nogc"]["per_layer_per_token"] > small["train_gc"]["per_layer_per_token"]


@pytest.mark.parametrize("name", ["meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen3-0.6B", "google/gemma-3-1b-it",
                                  "google/gemma-2-2b-it", "mistralai/Mistral-7B-Instruct-v0.3", "Qwen/Qwen2.5-72B-Instruct"])
def test_the_catalogue_architectures_beyond_qwen25_carry_coefficients(name):
    """Other architectures of the catalogue are traced too (scripts/trace_memory.py): the estimate uses them, and
    their terms follow the architecture: the forward holds at least the bf16 logits, gradient checkpointing keeps
    each layer's bf16 input (2 B × hidden per token and layer) and nothing else per layer."""
    shape = from_catalogue(name)
    data, src = memtrace.coefficients(shape)
    assert data is not None and src == "catalogue data" and data["traced_from"] == name
    assert data["forward"]["rest_per_token"] >= 2 * shape.vocab and data["forward"]["per_layer_per_token"] == 0
    assert data["train_gc"]["per_layer_per_token"] == pytest.approx(2 * shape.hidden, rel=0.05)
    assert data["train_nogc"]["per_layer_per_token"] > 4 * data["train_gc"]["per_layer_per_token"]


def test_the_source_of_the_coefficients_is_named(monkeypatch, tmp_path):
    data, src = memtrace.coefficients(from_catalogue("Qwen/Qwen2.5-1.5B-Instruct"))
    assert data is not None and src == "catalogue data"
    data, src = memtrace.coefficients(from_catalogue("Qwen/Qwen3-30B-A3B"))
    assert data is None and src.startswith("analytic (MoE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    odd = from_catalogue("Qwen/Qwen2.5-0.5B-Instruct").__class__(name="odd", arch="qwen2", layers=2, hidden=96, heads=4,
                                                                kv_heads=2, head_dim=24, intermediate=192, vocab=2048,
                                                                source="local")
    # only a local config.json is traced on demand: a shape guessed from a size (the planner's suggestions) is not
    monkeypatch.setenv(memtrace.TRACE_ENV, "1")
    data, src = memtrace.coefficients(replace(odd, source="answer"))
    assert data is None and "local config.json" in src
    monkeypatch.setenv(memtrace.TRACE_ENV, "0")
    data, src = memtrace.coefficients(odd)
    assert data is None and memtrace.TRACE_ENV in src
    # the bound holds: a trace that cannot finish in time leaves the analytic model, saying why
    monkeypatch.setenv(memtrace.TRACE_ENV, "1")
    monkeypatch.setenv(memtrace.TIMEOUT_ENV, "1")
    data, src = memtrace.coefficients(odd)
    assert data is None and "ran past 1 s" in src
    memtrace._TRACED.clear()


TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 160,
              "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 3, "vocab_size": 1536,
              "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
              "hidden_act": "silu"}


@pytest.mark.slow  # traces a model on the CPU: about 90 s
def test_a_local_config_of_another_architecture_is_traced_on_demand(monkeypatch, tmp_path):
    """The general case: a tiny Llama config (not Qwen2.5, not in the catalogue data) traced on demand in the bounded
    subprocess gives coefficients whose prediction at another token count and layer count matches a direct
    FakeTensorMode trace of that pass; a coefficient planted wrong does not."""
    from wizard.planner.phasemem import PerToken

    model = tmp_path / "tiny-llama"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINY_LLAMA), encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(memtrace.TRACE_ENV, "1")
    monkeypatch.setenv(memtrace.TIMEOUT_ENV, "600")
    memtrace._TRACED.clear()
    shape = from_local(str(model))
    assert memtrace.signature(shape) not in memtrace.catalogue_data()
    data, src = memtrace.coefficients(shape)
    assert data is not None and src.startswith("traced (this config, now"), src
    assert memtrace.coefficients(shape)[1] == src  # once per process; then from the cache
    memtrace._TRACED.clear()
    assert memtrace.coefficients(shape)[1] == "traced (cached trace of this config)"
    tokens, layers = 3 * data["tokens_traced"][1], 5
    for name in ("forward", "train_nogc", "train_gc"):
        d = data[name]
        pt = PerToken(d["per_layer_per_token"], d["rest_per_token"], d["constant"])
        direct = memtrace._trace_pass(shape, layers, tokens, embed_grad=False, **memtrace.VARIANTS[name])
        print(name, pt.bytes(tokens, layers), direct)
        assert pt.bytes(tokens, layers) == pytest.approx(direct, rel=0.02), name
    planted = PerToken(0.0, data["train_nogc"]["rest_per_token"], data["train_nogc"]["constant"])
    direct = memtrace._trace_pass(shape, layers, tokens, embed_grad=False, **memtrace.VARIANTS["train_nogc"])
    assert planted.bytes(tokens, layers) != pytest.approx(direct, rel=0.02)
    memtrace._TRACED.clear()


def test_check_json_has_verl_metrics_per_phase():
    from wizard.check.lint import check

    ov = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "data.train_batch_size=8",
          "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4", "actor_rollout_ref.rollout.n=2",
          "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4", "actor_rollout_ref.actor.use_kl_loss=True",
          "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]
    report = check(None, ov, nnodes=1, gpus_per_node=1, gpu_type="H200", gpu_memory_gb=141)
    doc = report.as_dict()["memory"]
    assert doc["coefficients"] == "catalogue data"
    for phase in ("log-prob", "update"):
        vm = doc["phases"][phase]["verl_metrics"]
        assert 0 < vm["max_memory_allocated_gb"] <= vm["max_memory_reserved_gb"] < doc["phases"][phase]["total_gib"]
    assert set(doc["phases"]["log-prob"]["verl_metrics"]["passes"]) == {"old_log_prob", "ref_log_prob"}
