"""Mixture-of-experts shapes (issue 16 item 1): the catalogue's MoE entries count exactly what transformers builds
from each model's config.json, in total and active per token, and a local config.json of each architecture
(qwen3_moe, mixtral, deepseek_v2 / deepseek_v3 with MLA, gpt_oss) is read to the same shape.

Independent source: the config.json fields below are the hub's (the keys as the model cards' files spell them,
only those that change a parameter count); transformers 5.10 builds each on the meta device (no weights, no
download). Active parameters: every parameter but the routed experts', plus `num_experts_per_tok` of them.
"""

from __future__ import annotations

import json

import pytest

from wizard.planner.shapes import GENERIC_TOP_K, active_in_name, from_catalogue, from_local, from_moe_params, resolve_shape

_QWEN3_MOE = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
              "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
              "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
              "vocab_size": 151936, "tie_word_embeddings": False, "max_position_embeddings": 40960}
_DEEPSEEK_V3 = {"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
                "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1,
                "n_routed_experts": 256, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
                "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                "v_head_dim": 128, "n_group": 8, "topk_group": 4, "num_nextn_predict_layers": 1, "vocab_size": 129280,
                "tie_word_embeddings": False, "max_position_embeddings": 163840,
                "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}}
_MOONLIGHT = {**_DEEPSEEK_V3, "hidden_size": 2048, "intermediate_size": 11264, "moe_intermediate_size": 1408,
              "num_hidden_layers": 27, "num_attention_heads": 16, "num_key_value_heads": 16, "n_shared_experts": 2,
              "n_routed_experts": 64, "num_experts_per_tok": 6, "first_k_dense_replace": 1, "q_lora_rank": None,
              "n_group": 1, "topk_group": 1, "vocab_size": 163840, "max_position_embeddings": 8192, "rope_scaling": None}
_V2_LITE = {**_MOONLIGHT, "model_type": "deepseek_v2", "intermediate_size": 10944, "vocab_size": 102400,
            "max_position_embeddings": 163840,
            "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}}
_GPT_OSS = {"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 24,
            "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32,
            "num_experts_per_tok": 4, "experts_per_token": 4, "attention_bias": True, "sliding_window": 128,
            "vocab_size": 201088, "tie_word_embeddings": False, "max_position_embeddings": 131072,
            "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096}}
_MIXTRAL = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
            "vocab_size": 32000, "tie_word_embeddings": False, "max_position_embeddings": 32768}

CONFIGS = {
    "Qwen/Qwen3-30B-A3B": _QWEN3_MOE,
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": {**_QWEN3_MOE, "max_position_embeddings": 262144},
    "Qwen/Qwen3-235B-A22B": {**_QWEN3_MOE, "hidden_size": 4096, "intermediate_size": 12288, "moe_intermediate_size": 1536,
                             "num_hidden_layers": 94, "num_attention_heads": 64},
    "mistralai/Mixtral-8x7B-Instruct-v0.1": _MIXTRAL,
    "mistralai/Mixtral-8x22B-Instruct-v0.1": {**_MIXTRAL, "hidden_size": 6144, "intermediate_size": 16384,
                                              "num_hidden_layers": 56, "num_attention_heads": 48, "vocab_size": 32768,
                                              "max_position_embeddings": 65536},
    "deepseek-ai/DeepSeek-V3": _DEEPSEEK_V3,
    "deepseek-ai/DeepSeek-V2-Lite": _V2_LITE,
    "moonshotai/Moonlight-16B-A3B": _MOONLIGHT,
    "openai/gpt-oss-20b": _GPT_OSS,
    "openai/gpt-oss-120b": {**_GPT_OSS, "num_hidden_layers": 36, "num_local_experts": 128},
}

# transformers 5.10's numel of each config on the meta device: (total, active per token); the test below rebuilds
# them, these literals pin the catalogue where transformers is absent. Published sizes for comparison: 30.5B/3.3B,
# 235B/22B, 46.7B/12.9B, 141B/39B, 671B/37B (DeepSeek-V3 without its 14B multi-token-prediction layer), 15.7B/2.4B,
# ~16B/3B, 21B/3.6B and 117B/5.1B (OpenAI's active counts leave out the 0.58B input embedding; these include it).
NUMEL = {
    "Qwen/Qwen3-30B-A3B": (30532122624, 3353032704),
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": (30532122624, 3353032704),
    "Qwen/Qwen3-235B-A22B": (235093634560, 22190763520),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (46702792704, 12879925248),
    "mistralai/Mixtral-8x22B-Instruct-v0.1": (140630071296, 39161468928),
    "deepseek-ai/DeepSeek-V3": (671026404352, 37552282624),
    "deepseek-ai/DeepSeek-V2-Lite": (15706484224, 2661150208),
    "moonshotai/Moonlight-16B-A3B": (15960108544, 2914774528),
    "openai/gpt-oss-20b": (20914757184, 4187440704),
    "openai/gpt-oss-120b": (116829156672, 5711982912),
}


@pytest.mark.parametrize("name", sorted(NUMEL))
def test_catalogue_counts_moe_models_exactly(name):
    shape = from_catalogue(name)
    assert shape is not None and shape.experts, name
    assert (shape.params, shape.active_params) == NUMEL[name]
    # the routed experts are what expert parallel splits; the rest is dense (attention, router, shared experts, embeddings)
    assert 0 < shape.routed_expert_params < shape.params
    assert shape.params - shape.routed_expert_params + shape.routed_expert_params * shape.active_experts // shape.experts \
        == shape.active_params


@pytest.mark.parametrize("name", sorted(NUMEL))
def test_local_config_json_of_each_moe_architecture_reads_to_the_catalogue_shape(name, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIGS[name]))
    local = from_local(str(tmp_path))
    shape = from_catalogue(name)
    assert (local.params, local.active_params) == NUMEL[name]
    for field in ("experts", "active_experts", "moe_intermediate", "shared_intermediate", "dense_layers", "kv_lora_rank",
                  "q_lora_rank", "qk_rope_dim", "expert_bias", "attn_sinks", "max_pos"):
        assert getattr(local, field) == getattr(shape, field), field
    assert resolve_shape(str(tmp_path)).source == "local"


@pytest.mark.parametrize("name", sorted(NUMEL))
def test_counts_match_transformers_on_the_meta_device(name, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    (tmp_path / "config.json").write_text(json.dumps(CONFIGS[name]))
    config = transformers.AutoConfig.from_pretrained(str(tmp_path))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in model.parameters())
    routed = sum(p.numel() for n, p in model.named_parameters() if ".mlp.experts." in n)
    experts, active = from_catalogue(name).experts, from_catalogue(name).active_experts
    assert (total, total - routed + routed * active // experts) == NUMEL[name]


def test_mla_kv_cache_is_one_latent_per_layer_whole_on_every_tp_rank():
    v3 = from_catalogue("deepseek-ai/DeepSeek-V3")
    # vLLM's MLA cache: kv_lora_rank + qk_rope_head_dim bf16 values per layer and token, not split by TP
    assert v3.kv_bytes_per_token(1) == v3.kv_bytes_per_token(8) == 61 * (512 + 64) * 2
    qwen = from_catalogue("Qwen/Qwen3-30B-A3B")
    assert qwen.kv_bytes_per_token(4) == 2 * 48 * 1 * 128 * 2


def test_qwen_moe_dense_layers_and_shared_expert_are_read(tmp_path):
    """Qwen-MoE's mlp_only_layers / decoder_sparse_step make dense layers; Qwen2-MoE's shared expert and its gate."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

    def numel() -> int:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.from_pretrained(str(tmp_path)))
        return sum(p.numel() for p in model.parameters())

    cfg = {**_QWEN3_MOE, "num_hidden_layers": 6, "mlp_only_layers": [1], "decoder_sparse_step": 2}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    shape = from_local(str(tmp_path))
    assert shape.dense_layers == 4  # layers 0, 2, 4 (off the step) and 1 (listed)
    assert shape.params == numel()
    q2 = {"model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
          "shared_expert_intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 100,
          "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(q2))
    shape = from_local(str(tmp_path))
    assert shape.shared_intermediate == 48 and shape.qkv_bias
    assert shape.params == numel()


# -- a MoE the catalogue does not know, known by its name's sizes ------------------------------------------------
@pytest.mark.parametrize("name", sorted(NUMEL))
def test_a_moe_known_only_by_its_two_sizes_counts_like_the_real_one(name):
    """What the step time and the memory read of a MoE (parameters in total: weights to hold and sync; per token:
    FLOPs) from its total and active sizes alone: within 1 % and 7 % of the real model's, counted exactly above. The
    expert count and layers are the generic shape's own: GENERIC_TOP_K a token of a whole multiple of it (what
    expert parallel divides), as many as the total makes, their width re-solved for the total."""
    real = from_catalogue(name)
    generic = from_moe_params(real.params / 1e9, real.active_params / 1e9, "name", name)
    assert abs(generic.params / real.params - 1) < 0.01
    assert abs(generic.active_params / real.active_params - 1) < 0.07
    assert generic.active_experts == GENERIC_TOP_K < generic.experts and generic.source == "name"
    assert generic.experts % GENERIC_TOP_K == 0


def test_the_generic_moe_shape_counts_what_transformers_builds_from_its_config():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    shape = from_moe_params(30.0, 3.0, "name", "some/Thing-30B-A3B")
    config = transformers.Qwen3MoeConfig(**shape.hf_config_kwargs())
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == shape.params


def test_names_that_state_an_active_size_resolve_to_a_moe():
    assert active_in_name("Qwen/Qwen3-Next-80B-A3B-Instruct") == 3.0
    assert active_in_name("Qwen1.5-MoE-A2.7B") == 2.7 and active_in_name("Qwen3-235B-A22B-Thinking") == 22.0
    assert active_in_name("meta-llama/Llama-3.1-8B") is None and active_in_name("org/alpha-7B") is None
    big = resolve_shape("Qwen/Qwen3.5-122B-A10B")  # not in the catalogue: by its name
    assert big.source == "name" and big.experts and abs(big.params_b - 122) < 2.5
    assert abs(big.active_params / 10e9 - 1) < 0.05
    vl = resolve_shape("Qwen/Qwen3-VL-30B-A3B-Instruct", 30.5)  # the answer's total, the name's active size
    assert vl.source == "answer" and abs(vl.active_params / 3e9 - 1) < 0.05
    # no active size in the name: dense, every parameter per token
    dense = resolve_shape("zai-org/Some-Model-100B", None)
    assert not dense.experts and dense.active_params == dense.params


def test_an_answer_that_is_the_names_size_keeps_the_catalogue_entry():
    """Qwen2.5-VL-7B-Instruct counts 8.3B (its vision tower, untied embeddings): an answer of 7 is the name's size,
    not another model; an answer the name does not state (14 for a 7B) still scales the shape."""
    vl = resolve_shape("Qwen/Qwen2.5-VL-7B-Instruct", 7.0)
    assert vl.source == "catalogue" and vl.vision and abs(vl.params_b - 8.29) < 0.01
    assert resolve_shape("Qwen/Qwen2.5-7B-Instruct", 14.0).source == "answer"
