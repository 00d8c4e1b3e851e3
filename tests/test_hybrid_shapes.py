"""Hybrid linear-attention models (Qwen3-Next, Qwen3.5): Gated DeltaNet layers in place of three attention layers
in four. Their shapes are counted against transformers' own modules (a meta-device model of the same config.json),
their rollout cache against vLLM's state formula written out here, and their FLOPs against verl's counter
(tests/test_steptime_flops.py)."""

from __future__ import annotations

import json

import pytest

from wizard.planner import steptime as st
from wizard.planner.shapes import from_catalogue, from_local, resolve_shape

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _meta_numel(config) -> tuple[int, int]:
    """(parameters, checkpoint tensors) of transformers' model of `config`, experts counted one by one as the
    checkpoint stores them (conversion_mapping.py: qwen3_next and qwen3_5_moe_text take qwen2_moe's)."""
    auto = transformers.AutoModelForImageTextToText if getattr(config, "vision_config", None) else \
        transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config)
    keys = list(model.state_dict())
    fused = [k for k in keys if k.endswith(("experts.gate_up_proj", "experts.down_proj"))]
    experts = getattr(getattr(config, "text_config", config), "num_experts", 0) or 0
    return sum(p.numel() for p in model.parameters()), len(keys) - len(fused) + len(fused) // 2 * 3 * experts


@pytest.mark.parametrize("kind", ["qwen3_5_text", "qwen3_next", "qwen3_5_moe_text", "qwen3_5"])
def test_a_local_hybrid_config_counts_what_transformers_builds(tmp_path, kind):
    """A small config.json of each hybrid family (8 layers, 6 of them Gated DeltaNet), read by from_local, counts
    transformers' parameters and checkpoint tensors exactly."""
    small = dict(num_hidden_layers=8, vocab_size=4096, hidden_size=512, intermediate_size=1024, head_dim=64,
                 num_attention_heads=8, num_key_value_heads=2, linear_num_key_heads=4, linear_num_value_heads=8,
                 linear_key_head_dim=32, linear_value_head_dim=32)
    if kind in ("qwen3_next", "qwen3_5_moe_text"):
        small.update(moe_intermediate_size=128, shared_expert_intermediate_size=128, num_experts=16,
                     num_experts_per_tok=4)
    if kind == "qwen3_5":  # the VLM: the language model in text_config beside a small vision tower (no deepstack
        # mergers, even where the config lists deepstack indexes as Qwen3-VL's do)
        config = transformers.AutoConfig.for_model(kind, text_config=small, vision_config=dict(
            depth=2, hidden_size=128, intermediate_size=256, num_heads=4, out_hidden_size=512,
            deepstack_visual_indexes=[0, 1]))
    else:
        config = transformers.AutoConfig.for_model(kind, **small)
    (tmp_path / "config.json").write_text(config.to_json_string(), encoding="utf-8")
    shape = from_local(str(tmp_path))
    assert (shape.layers, shape.linear_layers, shape.attn_layers) == (8, 6, 2)
    assert shape.attn_gate and bool(shape.experts) == (kind in ("qwen3_next", "qwen3_5_moe_text"))
    assert bool(shape.vision) == (kind == "qwen3_5")
    assert (shape.params, shape.checkpoint_tensors()) == _meta_numel(config)


def test_an_older_config_without_layer_types_counts_by_the_interval(tmp_path):
    """Qwen3-Next configs before layer_types: every full_attention_interval-th layer is full attention (verl's
    _count_qwen3_5_layer_types reads them the same way); a config with linear heads but no head sizes is refused."""
    raw = transformers.Qwen3NextConfig(num_hidden_layers=12).to_dict()
    raw.pop("layer_types")
    raw["full_attention_interval"] = 3
    (tmp_path / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    assert from_local(str(tmp_path)).linear_layers == 8  # layers 3, 6, 9 and 12 attend
    raw.pop("linear_key_head_dim")
    raw["linear_key_head_dim"] = None
    (tmp_path / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(ValueError, match="linear_key_head_dim"):
        from_local(str(tmp_path))


def test_the_catalogue_hybrids_are_transformers_defaults_for_those_checkpoints():
    """transformers names Qwen3-Next-80B-A3B and Qwen3.5-35B-A3B as its defaults' checkpoints: the catalogue's
    entries are those configs, parameter for parameter."""
    for name, config in (("Qwen/Qwen3-Next-80B-A3B-Instruct", transformers.Qwen3NextConfig()),
                         ("Qwen/Qwen3.5-35B-A3B", transformers.Qwen3_5MoeTextConfig())):
        shape = from_catalogue(name)
        assert shape.text_params == _meta_numel(config)[0], name  # Qwen3.5's vision tower: test_memory.py
    nine = from_catalogue("Qwen/Qwen3.5-9B")
    text = transformers.Qwen3_5TextConfig()
    assert (nine.hidden, nine.layers, nine.heads, nine.kv_heads, nine.head_dim, nine.intermediate, nine.vocab) == (
        text.hidden_size, text.num_hidden_layers, text.num_attention_heads, text.num_key_value_heads, text.head_dim,
        text.intermediate_size, text.vocab_size)
    assert nine.layer_types() == text.layer_types


def test_only_the_full_attention_layers_cache_k_and_v():
    """Qwen3.5-9B: 8 of its 32 layers attend; each caches K and V of 4 KV heads × 256 in bf16 per token; at TP 8 the
    4 KV heads are replicated (one per GPU)."""
    s = from_catalogue("Qwen/Qwen3.5-9B")
    assert s.kv_bytes_per_token(1) == 8 * 2 * 4 * 256 * 2 == 32_768
    assert s.kv_bytes_per_token(8) == 8 * 2 * 1 * 256 * 2


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_a_sequence_holds_each_gdn_layers_conv_and_recurrent_state(tp):
    """vLLM's gated_delta_net_state_shape: conv (q, k and v widths / TP, kernel − 1), recurrent (value heads / TP,
    value dim, key dim), both bf16 under mamba_cache_dtype "auto". Qwen3.5-9B: 24 GDN layers, key heads 16 × 128,
    value heads 32 × 128, kernel 4."""
    s = from_catalogue("Qwen/Qwen3.5-9B")
    conv = (2 * 16 * 128 + 32 * 128) // tp * 3
    recurrent = 32 // tp * 128 * 128
    assert s.state_bytes_per_seq(tp) == 24 * (conv + recurrent) * 2
    assert s.cache_bytes_per_seq(tp, 1000) == s.kv_bytes_per_token(tp) * 1000 + s.state_bytes_per_seq(tp)
    # a dense model holds no state: the cache is its K and V alone
    dense = from_catalogue("Qwen/Qwen2.5-7B-Instruct")
    assert dense.state_bytes_per_seq(tp) == 0 and dense.cache_bytes_per_seq(tp, 1000) == dense.kv_bytes_per_token(tp) * 1000


def _workload(shape, **kw) -> st.Workload:
    base = dict(n_gpus=8, prompts=256, n=8, max_prompt=1024, max_response=4096, response_mean=1500.0,
                gpu_type="H100", rollout_tp=1, gmu=0.6)
    base.update(kw)
    return st.Workload(**{**st.shape_fields(shape, base["rollout_tp"]), **base})


def test_the_rollout_runs_as_many_sequences_as_their_kv_and_state_fit():
    """The engine's concurrency: the KV room over each sequence's tokens plus its state in tokens of KV. Planted
    fault: the same workload without the state runs more sequences at once and decodes faster."""
    s = from_catalogue("Qwen/Qwen3.5-9B")
    w = _workload(s, max_num_seqs=4096, prompts=1024, n=16)
    name, pk, _ = st.peak("H100")
    kv = st._kv_tokens(w, name)
    resp, prompt, _, _ = st._lengths(w)
    out = st.rollout_seconds(w, name, pk, kv, resp, prompt)
    seqs = 1024 * 16 / 8
    expect = min(seqs, 4096, kv / (prompt + resp + s.state_bytes_per_seq(1) / s.kv_bytes_per_token(1)))
    assert out["concurrency"] == pytest.approx(max(1.0, expect))
    stateless = st.rollout_seconds(_workload(s, max_num_seqs=4096, prompts=1024, n=16, state_bytes_per_seq=0.0),
                                   name, pk, kv, resp, prompt)
    assert out["concurrency"] < seqs  # the cache, not the batch, bounds it
    assert stateless["concurrency"] > out["concurrency"] and stateless["rollout"] < out["rollout"]


def test_attention_flops_count_only_the_layers_that_attend():
    """The context term of a pass: 4 × attending layers × query width × context per token; a hybrid's GDN layers add
    none (their projections are in 2 × N)."""
    s = from_catalogue("Qwen/Qwen3.5-9B")
    w = _workload(s)
    assert st._attn_flops_per_token(w, 2000.0) == 4 * 8 * (16 * 256) * 2000.0
    assert st._attn_flops_per_token(_workload(s, attn_layers=0), 2000.0) == 4 * 32 * (16 * 256) * 2000.0


def test_the_memory_plan_sizes_the_kv_cache_with_the_state():
    """memory.estimate's full sequences in the engine's KV room: the reservation (gmu × the card's capacity) less the
    bf16 weights and the engine's overhead, over (K and V × sequence + state). Planted fault: K and V alone would
    count over 15 % more sequences in the same room."""
    from wizard.planner.memory import ENGINE_OVERHEAD_GIB, GIB, Layout, estimate

    s = from_catalogue("Qwen/Qwen3.5-9B")
    lay = Layout(gpu_gb=80, n_gpus=8, gpus_per_node=8, seq_len=5120, rollout_tp=1, gmu=0.6, dp=8)
    e = estimate(s, lay)
    room = 0.6 * e.capacity_gib * GIB - 2 * s.params - ENGINE_OVERHEAD_GIB * GIB
    assert e.kv_seqs == pytest.approx(room / (s.kv_bytes_per_token(1) * 5120 + s.state_bytes_per_seq(1)))
    assert room / (s.kv_bytes_per_token(1) * 5120) > 1.15 * e.kv_seqs


def test_a_hybrid_by_name_resolves_from_the_catalogue():
    assert resolve_shape("Qwen/Qwen3.5-9B").linear_layers == 24
    assert resolve_shape("Qwen/Qwen3.5-9B", 9.0).source == "catalogue"  # the answer of 9 confirms the 9.4B entry
    assert resolve_shape("Qwen/Qwen3-Next-80B-A3B-Thinking").linear_layers == 36


def _findings(tmp_path, *extra: str) -> dict:
    from wizard.check.lint import check

    for name in ("train.parquet", "val.parquet"):
        (tmp_path / name).write_bytes(b"PAR1")
    argv = ["algorithm.adv_estimator=grpo", f"data.train_files={tmp_path / 'train.parquet'}",
            f"data.val_files={tmp_path / 'val.parquet'}", "data.train_batch_size=64", "data.max_prompt_length=1024",
            "data.max_response_length=8192", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
            "actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=20480",
            "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
            "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=20480", "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.n=4", "trainer.logger=[console]", "trainer.nnodes=1",
            "trainer.n_gpus_per_node=8", *extra]
    report = check(None, argv, nnodes=1, gpus_per_node=8, gpu_memory_gb=80, defaults="snapshot",
                   env={"HOME": "/nonexistent-home"})
    return {f.problem.rule: f.problem for f in report.findings}


def test_ulysses_on_a_gated_deltanet_model_names_flas_context_parallel_kernels(tmp_path):
    """verl 0.9.1 splits Qwen3.5's GDN layers over Ulysses ranks with flash-linear-attention's context-parallel
    kernels and raises NotImplementedError inside the workers without them (models/transformers/qwen3_5.py:168-172):
    a warning naming the version check, for a hybrid under SP only. Controls: SP 1, and a dense model under SP 2."""
    sp = "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"
    found = _findings(tmp_path, "actor_rollout_ref.model.path=Qwen/Qwen3.5-9B", sp)
    assert found["VI907"].severity == "warning" and "24 Gated DeltaNet layers" in found["VI907"].message
    assert "verl-init doctor" in found["VI907"].hint and "ulysses_sequence_parallel_size=1" in found["VI907"].hint
    assert "VI907" not in _findings(tmp_path, "actor_rollout_ref.model.path=Qwen/Qwen3.5-9B")
    assert "VI907" not in _findings(tmp_path, "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", sp)
