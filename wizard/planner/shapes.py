"""Model shapes without weights: the shipped catalogue, a local folder's config.json, or a shape
scaled from a parameter count (name or `model_params_b`)."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional


# attention with a norm on q and k per head (transformers' q_norm / k_norm)
QK_NORM_ARCHS = ("qwen3", "qwen3_moe", "gemma3_text", "qwen3_vl", "qwen3_vl_text", "qwen3_next", "qwen3_5",
                 "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")
# MoEs whose shared expert is scaled by a sigmoid gate of its own (shared_expert_gate: hidden → 1)
SHARED_GATE_ARCHS = ("qwen2_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text")
# hybrid models of Gated DeltaNet and gated full attention (transformers' qwen3_next, qwen3_5, qwen3_5_moe)
HYBRID_ARCHS = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")


@dataclass(frozen=True)
class ModelShape:
    name: str
    arch: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool = False
    qkv_bias: bool = False
    max_pos: Optional[int] = None
    experts: int = 0  # routed experts per MoE layer (num_experts / num_local_experts / n_routed_experts)
    active_experts: int = 0  # routed experts per token (num_experts_per_tok)
    moe_intermediate: int = 0  # one routed expert's intermediate size (moe_intermediate_size; Mixtral, gpt-oss: intermediate_size)
    shared_intermediate: int = 0  # always-active shared experts' intermediate, all of them together (DeepSeek:
    #                               n_shared_experts × moe_intermediate_size; Qwen2-MoE: shared_expert_intermediate_size)
    dense_layers: int = 0  # layers with a dense MLP of `intermediate` (DeepSeek first_k_dense_replace; Qwen-MoE mlp_only_layers)
    expert_bias: bool = False  # biases on the router and every expert's projections (gpt-oss)
    # -- attention beyond q/k/v/o ---------------------------------------------------------------------------------
    o_bias: bool = False  # a bias on o_proj too (gpt-oss attention_bias covers q, k, v and o)
    attn_sinks: bool = False  # one learned sink logit per head (gpt-oss)
    # multi-head latent attention (DeepSeek-V2/V3, Moonlight; MLA when kv_lora_rank > 0): q through a q_lora_rank
    # bottleneck (0: a plain q_proj), K and V from one kv_lora_rank latent plus a shared RoPE key
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_dim: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0
    source: str = "catalogue"  # catalogue | local | name | answer
    # -- vision tower of a vision-language model (config.json's vision_config; 0 / "" for a text model) -----
    vision: str = ""  # qwen2_5_vl (RMSNorm, gated MLP) | qwen3_vl (LayerNorm, GELU MLP, position table, deepstack)
    vision_depth: int = 0
    vision_hidden: int = 0
    vision_intermediate: int = 0
    vision_heads: int = 0
    vision_patch: int = 14
    vision_merge: int = 2  # spatial_merge_size: merge × merge patches become one image token
    vision_temporal: int = 2  # temporal_patch_size
    vision_pos: int = 0  # num_position_embeddings (qwen3_vl)
    vision_deepstack: int = 0  # len(deepstack_visual_indexes) (qwen3_vl)
    # -- hybrid linear attention (Qwen3-Next, Qwen3.5): Gated DeltaNet layers in place of attention --------------
    # linear_layers of the `layers` are Gated DeltaNet (config.json layer_types "linear_attention"; else every layer
    # but each full_attention_interval-th), the rest full attention whose q_proj also emits a sigmoid output gate
    # (attn_gate). A GDN layer keeps a fixed state per sequence, not a K and V per token.
    linear_layers: int = 0
    linear_k_heads: int = 0  # linear_num_key_heads
    linear_v_heads: int = 0  # linear_num_value_heads
    linear_k_dim: int = 0  # linear_key_head_dim
    linear_v_dim: int = 0  # linear_value_head_dim
    linear_conv: int = 4  # linear_conv_kernel_dim
    attn_gate: bool = False

    # -- parameter counts (transformers' numel of the same config, ±1%) ----------------------
    def _norms_per_layer(self) -> int:
        return 4 if self.arch.startswith("gemma") else 2

    def attn_params(self) -> int:
        if self.kv_lora_rank:  # MLA (transformers' DeepseekV3Attention / DeepseekV2Attention)
            qk = self.qk_nope_dim + self.qk_rope_dim
            q = (self.hidden * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.heads * qk
                 if self.q_lora_rank else self.hidden * self.heads * qk)
            kv = (self.hidden * (self.kv_lora_rank + self.qk_rope_dim) + self.kv_lora_rank
                  + self.kv_lora_rank * self.heads * (self.qk_nope_dim + self.v_head_dim))
            return q + kv + self.heads * self.v_head_dim * self.hidden
        q = self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        bias = (self.heads + 2 * self.kv_heads) * self.head_dim if self.qkv_bias else 0
        qk_norm = 2 * self.head_dim if self._qk_norm else 0
        gate = q if self.attn_gate else 0  # q_proj's second half: the output gate
        return q + gate + kv + o + bias + qk_norm + (self.hidden if self.o_bias else 0) \
            + (self.heads if self.attn_sinks else 0)

    @property
    def _qk_norm(self) -> bool:
        return self.arch in QK_NORM_ARCHS

    @property
    def _linear_widths(self) -> tuple[int, int]:
        """A GDN layer's key width (heads × dim, for q and for k) and value width."""
        return self.linear_k_heads * self.linear_k_dim, self.linear_v_heads * self.linear_v_dim

    def linear_attn_params(self) -> int:
        """One Gated DeltaNet layer (transformers' Qwen3_5GatedDeltaNet / Qwen3NextGatedDeltaNet, as verl's
        flops_counter.py _compute_qwen3_5_hybrid_attn_params counts its projections): q, k, v and the output gate z
        in, out_proj, a and b (one per value head each), the depthwise conv over q, k and v, dt_bias and A_log per
        value head, and the gated norm over one value head."""
        if not self.linear_layers:
            return 0
        k, v = self._linear_widths
        proj = self.hidden * (2 * k + 2 * v + 2 * self.linear_v_heads) + v * self.hidden
        return proj + self.linear_conv * (2 * k + v) + 2 * self.linear_v_heads + self.linear_v_dim

    @property
    def attn_layers(self) -> int:
        """Layers whose attention reads every earlier token (all but the linear-attention ones)."""
        return self.layers - self.linear_layers

    def _mixers(self) -> int:
        """Every layer's token mixer: attention, or a GDN layer in a hybrid."""
        return self.attn_layers * self.attn_params() + self.linear_layers * self.linear_attn_params()

    @property
    def attention_width(self) -> int:
        """The width the attention scores and values are computed over: query heads × head_dim (Qwen3's 64 × 128 =
        8,192 where its hidden is 4,096); MLA the mean of its query-key width (nope + RoPE) and its value width."""
        if self.kv_lora_rank:
            return self.heads * (self.qk_nope_dim + self.qk_rope_dim + self.v_head_dim) // 2
        return self.heads * self.head_dim

    def expert_params(self) -> int:
        """One routed expert: gate, up and down projections (and their biases in gpt-oss)."""
        mi = self.moe_intermediate
        return 3 * self.hidden * mi + ((2 * mi + self.hidden) if self.expert_bias else 0)

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.experts else 0

    @property
    def routed_expert_params(self) -> int:
        """Every routed expert of every MoE layer: what Megatron splits over expert parallel (EP × ETP)."""
        return self.moe_layers * self.experts * self.expert_params()

    def mlp_params(self, active: bool = False, dense: bool = False) -> int:
        """One layer's MLP: dense (`intermediate`), or a MoE layer's routed experts (all, or the `active` ones a
        token passes), router and shared experts."""
        if not self.experts or dense:
            return 3 * self.hidden * self.intermediate
        n = self.active_experts if active else self.experts
        router = self.hidden * self.experts + (self.experts if self.expert_bias else 0)
        shared = 3 * self.hidden * self.shared_intermediate
        shared_gate = self.hidden if (self.arch in SHARED_GATE_ARCHS and self.shared_intermediate) else 0
        return n * self.expert_params() + router + shared + shared_gate

    def layer_params(self, active: bool = False, dense: bool = False) -> int:
        """One layer (a hybrid's: its mean token mixer)."""
        return self._mixers() // self.layers + self.mlp_params(active, dense) + self._norms_per_layer() * self.hidden

    def _all_layers(self, active: bool = False) -> int:
        norms = self._norms_per_layer() * self.hidden * self.layers
        if not self.experts:
            return self._mixers() + self.layers * self.mlp_params() + norms
        return (self._mixers() + norms + self.dense_layers * self.mlp_params(dense=True)
                + self.moe_layers * self.mlp_params(active))

    def embed_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def text_params(self) -> int:
        """The language model alone (every parameter but the vision tower's)."""
        return self._all_layers() + self.embed_params() + self.hidden

    def vision_params(self) -> int:
        """The vision tower's parameters (patch embedding, blocks, merger), as transformers' numel of
        Qwen2_5_VisionTransformerPretrainedModel / Qwen3VLVisionModel counts them (exact; tests/test_vlm.py)."""
        if not self.vision:
            return 0
        h, i, out = self.vision_hidden, self.vision_intermediate, self.hidden
        m = h * self.vision_merge ** 2  # the merger's input: merge × merge patches side by side
        patch = 3 * self.vision_temporal * self.vision_patch ** 2 * h
        attn = 3 * h * h + 3 * h + h * h + h  # qkv and proj, with biases
        if self.vision == "qwen3_vl":
            block = 4 * h + attn + (i * h + i) + (i * h + h)  # two LayerNorms, fc1 + fc2
            merger = 2 * h + (m * m + m) + (m * out + out)
            deepstack = self.vision_deepstack * (2 * m + m * m + m + m * out + out)
            return patch + h + self.vision_pos * h + self.vision_depth * block + merger + deepstack
        block = 2 * h + attn + 2 * (i * h + i) + (i * h + h)  # two RMSNorms, gate/up + down
        merger = h + (m * m + m) + (m * out + out)
        return patch + self.vision_depth * block + merger

    def checkpoint_tensors(self) -> int:
        """Tensors of the model's Hugging Face checkpoint: what a weight sync hands the rollout engine one by one
        (every routed expert's gate, up and down projections apart, as transformers' conversion_mapping.py
        "qwen2_moe" names them in the checkpoint; gpt-oss keeps its experts fused: 4 tensors a layer)."""
        if self.kv_lora_rank:
            attn = (3 if self.q_lora_rank else 1) + 4  # q_a, q_a_layernorm, q_b (or q_proj); kv_a, its norm, kv_b, o
        else:
            attn = 4 + (3 if self.qkv_bias else 0) + int(self.o_bias) + 2 * self._qk_norm + int(self.attn_sinks)
        # a GDN layer: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a (Qwen3-Next fuses them in twos: in_proj_qkvz,
        # in_proj_ba), conv1d, dt_bias, A_log, norm, out_proj
        linear = 7 if self.arch == "qwen3_next" else 9
        mixers = self.attn_layers * attn + self.linear_layers * linear
        per_layer = self._norms_per_layer()
        dense_mlp = 3
        moe_mlp = 0
        if self.experts:
            router = 1 + int(self.expert_bias) + int(self.arch == "deepseek_v3")  # e_score_correction_bias
            routed = 4 if self.arch == "gpt_oss" else 3 * self.experts
            shared = (3 + int(self.arch in SHARED_GATE_ARCHS)) if self.shared_intermediate else 0
            moe_mlp = router + routed + shared
        layers = mixers + (self.layers - self.moe_layers) * (per_layer + dense_mlp) + self.moe_layers * (per_layer + moe_mlp)
        top = 2 + (0 if self.tied else 1)  # embed_tokens, final norm, lm_head
        return layers + top + self._vision_tensors()

    def _vision_tensors(self) -> int:
        """The vision tower's tensors: 12 a block (two norms, qkv and proj, the MLP, each weight with its bias or
        norm pair), the patch embedding, the merger (and qwen3_vl's position table and deepstack mergers)."""
        if not self.vision:
            return 0
        if self.vision == "qwen3_vl":
            merger = 6  # norm weight + bias, fc1 and fc2 with biases
            return 1 + 1 + 1 + self.vision_depth * 12 + merger + self.vision_deepstack * merger
        return 1 + self.vision_depth * 12 + 5  # patch embed; merger: ln_q, two linears with biases

    def image_tokens(self, max_pixels: int) -> int:
        """Image tokens (placeholders in the prompt) of one image of at most `max_pixels` pixels: one per
        (patch × merge)² pixels (Qwen-VL's smart_resize rounds each side to that factor)."""
        return max_pixels // (self.vision_patch * self.vision_merge) ** 2 if self.vision else 0

    def vision_act_bytes_per_token(self, train: bool) -> float:
        """The vision tower's activations per image token (merge² patches): checkpointed block inputs (bf16)
        for every block in training, and one block's working set."""
        if not self.vision:
            return 0.0
        working = (10 * self.vision_hidden + 4 * self.vision_intermediate) * 2
        stored = self.vision_depth * self.vision_hidden * 2 if train else 0
        return self.vision_merge ** 2 * (stored + working)

    @property
    def params(self) -> int:
        return self.text_params + self.vision_params()

    @property
    def active_params(self) -> int:
        return self._all_layers(active=True) + self.embed_params() + self.hidden + self.vision_params()

    @property
    def params_b(self) -> float:
        return self.params / 1e9

    def kv_bytes_per_token(self, tp: int = 1) -> float:
        """bf16 K and V for one token on one GPU of a TP group (KV heads are replicated when TP > KV heads). MLA
        caches one latent of kv_lora_rank + qk_rope_dim per layer and token, whole on every TP rank (vLLM's MLA
        backends). Sliding-window layers (gpt-oss) are counted as full attention: an upper bound."""
        if self.kv_lora_rank:
            return self.layers * (self.kv_lora_rank + self.qk_rope_dim) * 2
        heads_per_gpu = max(self.kv_heads / tp, 1.0)
        return 2 * self.attn_layers * heads_per_gpu * self.head_dim * 2

    def state_bytes_per_seq(self, tp: int = 1) -> float:
        """A hybrid's fixed cache per sequence on one GPU of a TP group: each GDN layer's conv state (q, k and v
        widths / TP × (kernel − 1)) and recurrent state (value heads / TP × value dim × key dim), both in the model's
        bf16 (vLLM's MambaStateShapeCalculator.gated_delta_net_state_shape and
        MambaStateDtypeCalculator.gated_delta_net_state_dtype, mamba_cache_dtype "auto"); 0 for other models."""
        if not self.linear_layers:
            return 0.0
        k, v = self._linear_widths
        conv = (2 * k + v) / tp * (self.linear_conv - 1)
        recurrent = max(self.linear_v_heads / tp, 1.0) * self.linear_v_dim * self.linear_k_dim
        return self.linear_layers * (conv + recurrent) * 2

    def engine_tp_ok(self, tp: int) -> bool:
        """Whether a rollout engine (vLLM, SGLang) can split this model's attention over `tp` GPUs
        (arithmetic.attention_tp_problem); a shape scaled from a size has guessed head counts and passes."""
        from wizard.verlspec.arithmetic import attention_tp_problem

        if self.source not in ("catalogue", "local"):
            return True
        return attention_tp_problem(tp, self.heads, None if self.kv_lora_rank else self.kv_heads) is None

    def cache_bytes_per_seq(self, tp: int, seq_len: float) -> float:
        """What one sequence of `seq_len` tokens holds in a rollout engine's cache on one GPU of a TP group: its K
        and V, and a hybrid's fixed GDN state."""
        return self.kv_bytes_per_token(tp) * seq_len + self.state_bytes_per_seq(tp)

    def layer_types(self) -> list[str]:
        """config.json's layer_types: a hybrid's GDN layers first in every group, full attention last (Qwen3-Next
        and Qwen3.5 put one full-attention layer after every three GDN layers)."""
        full = self.attn_layers
        every = self.layers / full if full else float(self.layers + 1)
        return ["full_attention" if full and (i + 1) % round(every) == 0 and (i + 1) // round(every) <= full
                else "linear_attention" for i in range(self.layers)]

    def lora_params(self, rank: int) -> int:
        """peft's adapters on every linear layer (target_modules=all-linear), rank × (in + out) each: q, k, v, o and
        a dense MLP's gate, up, down; a MoE layer's router, shared experts, and its fused experts' gate_up and down
        parameters wrapped whole (peft's ParamWrapper: lora_A of rank × experts rows, gate_up at twice the rank), as
        tests/test_steptime_lora.py counts on peft's own state dict."""
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = (h + q) + 2 * (h + kv) + (q + h)
        dense = 3 * (h + self.intermediate)
        if not self.experts:
            return rank * (attention + dense) * self.layers
        e, mi = self.experts, self.moe_intermediate
        moe = (h + e) + 2 * e * (h + 2 * mi) + e * (mi + h) + (3 * (h + self.shared_intermediate)
                                                              if self.shared_intermediate else 0)
        dense_layers = min(self.dense_layers, self.layers)
        return rank * (attention * self.layers + dense * dense_layers + moe * (self.layers - dense_layers))

    def hf_config_kwargs(self) -> dict[str, Any]:
        """The config.json fields this shape came from (for transformers, e.g. a meta-device model)."""
        kw: dict[str, Any] = dict(
            num_hidden_layers=self.layers, hidden_size=self.hidden, num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads, head_dim=self.head_dim, intermediate_size=self.intermediate,
            vocab_size=self.vocab, tie_word_embeddings=self.tied,
        )
        if self.max_pos:
            kw["max_position_embeddings"] = self.max_pos
        if self.linear_layers:
            kw.update(layer_types=self.layer_types(), linear_num_key_heads=self.linear_k_heads,
                      linear_num_value_heads=self.linear_v_heads, linear_key_head_dim=self.linear_k_dim,
                      linear_value_head_dim=self.linear_v_dim, linear_conv_kernel_dim=self.linear_conv)
        if self.arch in ("qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"):
            kw.update(num_experts=self.experts, num_experts_per_tok=self.active_experts,
                      moe_intermediate_size=self.moe_intermediate,
                      shared_expert_intermediate_size=self.shared_intermediate)
        if self.arch == "qwen3_moe":
            kw.update(num_experts=self.experts, num_experts_per_tok=self.active_experts,
                      moe_intermediate_size=self.moe_intermediate, mlp_only_layers=list(range(self.dense_layers)),
                      decoder_sparse_step=1)
        if self.arch in ("mixtral", "gpt_oss"):
            kw.update(num_local_experts=self.experts, num_experts_per_tok=self.active_experts)
        if self.arch == "gpt_oss":
            kw.update(attention_bias=self.qkv_bias, intermediate_size=self.moe_intermediate)
        if self.arch in ("deepseek_v2", "deepseek_v3"):
            kw.update(n_routed_experts=self.experts, num_experts_per_tok=self.active_experts,
                      moe_intermediate_size=self.moe_intermediate,
                      n_shared_experts=self.shared_intermediate // self.moe_intermediate,
                      first_k_dense_replace=self.dense_layers, q_lora_rank=self.q_lora_rank or None,
                      kv_lora_rank=self.kv_lora_rank, qk_nope_head_dim=self.qk_nope_dim,
                      qk_rope_head_dim=self.qk_rope_dim, v_head_dim=self.v_head_dim, n_group=1, topk_group=1)
        if self.arch == "llama":
            kw.update(attention_bias=False, mlp_bias=False)
        if self.vision:  # a vision-language config: the language model in text_config, the tower in vision_config
            vision: dict[str, Any] = dict(
                depth=self.vision_depth, hidden_size=self.vision_hidden, intermediate_size=self.vision_intermediate,
                num_heads=self.vision_heads, patch_size=self.vision_patch, spatial_merge_size=self.vision_merge,
                temporal_patch_size=self.vision_temporal, out_hidden_size=self.hidden)
            if self.vision == "qwen3_vl":
                vision.update(num_position_embeddings=self.vision_pos)
                if self.vision_deepstack:
                    vision.update(deepstack_visual_indexes=list(range(self.vision_deepstack)))
            return {"text_config": kw, "vision_config": vision, "tie_word_embeddings": self.tied}
        return kw


@functools.lru_cache(maxsize=1)
def catalogue() -> dict[str, ModelShape]:
    import yaml

    raw = yaml.safe_load((Path(__file__).parent / "catalog.yaml").read_text(encoding="utf-8"))
    out: dict[str, ModelShape] = {}
    for name, entry in raw.items():
        entry = dict(entry)
        aliases = entry.pop("aliases", [])
        shape = ModelShape(name=name, **entry)
        for key in [name, *aliases]:
            out[key.lower()] = replace(shape, name=key)
    return out


def from_catalogue(model: str) -> Optional[ModelShape]:
    cat = catalogue()
    key = model.rstrip("/").lower()
    if key in cat:
        return cat[key]
    tail = key.rsplit("/", 1)[-1]
    matches = [s for k, s in cat.items() if k.rsplit("/", 1)[-1] == tail]
    return matches[0] if matches else None


MAX_CONFIG_BYTES = 4 << 20


def from_local(path: str) -> ModelShape:
    """config.json of a local model folder, read as JSON (no weights, no transformers); a multimodal config's
    `text_config` describes the language model. Raises ValueError when it is not a usable model config."""
    from wizard._io import read_user_file, safe_json

    # bounded: a regular file (never a FIFO or device), its bytes counted while reading, its nesting capped;
    # what passes a bound is a ValueError (wizard._io.UnsafeInput), as any unusable config
    where = os.path.join(path, "config.json")
    top = safe_json(read_user_file(where, MAX_CONFIG_BYTES).decode("utf-8"))
    if not isinstance(top, dict):
        raise ValueError(f"{path}/config.json is not a JSON object")
    c = top.get("text_config") if isinstance(top.get("text_config"), dict) else top

    def get(*names: str, default: Any = None) -> Any:
        for name in names:
            if c.get(name) is not None:
                return c[name]
        return default

    try:
        heads = int(get("num_attention_heads", "n_head"))
        hidden = int(get("hidden_size", "n_embd", "d_model"))
        layers = int(get("num_hidden_layers", "n_layer"))
        vocab = int(get("vocab_size", default=top.get("vocab_size")))
    except (TypeError, ValueError):
        raise ValueError(f"{path}/config.json lacks num_attention_heads, hidden_size, num_hidden_layers or vocab_size") from None
    model_type = str(get("model_type", default=top.get("model_type", "")))
    vision = _vision_fields(top, path)
    experts = int(get("num_experts", "num_local_experts", "n_routed_experts", default=0) or 0)
    moe = _moe_fields(get, model_type, layers, experts) if experts else {}
    mla = int(get("kv_lora_rank", default=0) or 0)
    head_dim = int(get("head_dim", default=0) or 0) or (int(get("qk_rope_head_dim", default=0) or 0) if mla else 0) \
        or hidden // heads
    gpt_oss = model_type == "gpt_oss"
    return ModelShape(
        name=path, arch=model_type, layers=layers, hidden=hidden, heads=heads,
        kv_heads=int(get("num_key_value_heads", default=heads) or heads), head_dim=head_dim,
        intermediate=int(get("intermediate_size", "n_inner", default=0) or 4 * hidden), vocab=vocab,
        tied=bool(get("tie_word_embeddings", default=top.get("tie_word_embeddings", False))),
        qkv_bias=bool(get("attention_bias", default=False)) or model_type in ("qwen2", "qwen2_5_vl", "qwen2_5_vl_text", "qwen2_moe"),
        max_pos=_max_context(get("max_position_embeddings"), get("rope_scaling")),
        o_bias=gpt_oss and bool(get("attention_bias", default=True)), attn_sinks=gpt_oss,
        q_lora_rank=int(get("q_lora_rank", default=0) or 0) if mla else 0, kv_lora_rank=mla,
        qk_nope_dim=int(get("qk_nope_head_dim", default=0) or 0) if mla else 0,
        qk_rope_dim=int(get("qk_rope_head_dim", default=0) or 0) if mla else 0,
        v_head_dim=int(get("v_head_dim", default=0) or 0) if mla else 0,
        source="local", **moe, **vision, **_linear_fields(get, model_type, layers),
    )


def _linear_fields(get: Any, model_type: str, layers: int) -> dict[str, Any]:
    """A hybrid config.json's Gated DeltaNet layers: layer_types' "linear_attention" entries, else (an older
    Qwen3-Next config) every layer off the full_attention_interval, as verl's flops_counter.py
    _count_qwen3_5_layer_types counts them; {} for a model without linear_* keys."""
    if get("linear_num_value_heads") is None:
        return {}
    types = get("layer_types")
    if isinstance(types, list) and types:
        linear = sum(1 for t in types if t == "linear_attention")
    else:
        every = int(get("full_attention_interval", default=4) or 4)
        linear = layers - sum(1 for i in range(layers) if (i + 1) % every == 0)
    try:
        return dict(linear_layers=min(linear, layers), linear_k_heads=int(get("linear_num_key_heads")),
                    linear_v_heads=int(get("linear_num_value_heads")), linear_k_dim=int(get("linear_key_head_dim")),
                    linear_v_dim=int(get("linear_value_head_dim")),
                    linear_conv=int(get("linear_conv_kernel_dim", default=4) or 4),
                    attn_gate=model_type in HYBRID_ARCHS)
    except (TypeError, ValueError):
        raise ValueError("config.json: linear_num_value_heads without linear_num_key_heads, linear_key_head_dim "
                         "and linear_value_head_dim") from None


def _moe_fields(get: Any, model_type: str, layers: int, experts: int) -> dict[str, Any]:
    """A MoE config.json's expert fields (qwen2_moe / qwen3_moe, mixtral, deepseek_v2 / deepseek_v3, gpt_oss keys)."""
    moe_inter = int(get("moe_intermediate_size", "intermediate_size", default=0) or 0)
    if get("n_shared_experts") is not None:  # DeepSeek: n_shared_experts experts of moe_intermediate_size
        shared = int(get("n_shared_experts") or 0) * moe_inter
    else:  # Qwen2-MoE: one shared expert of shared_expert_intermediate_size
        shared = int(get("shared_expert_intermediate_size", default=0) or 0)
    if get("first_k_dense_replace") is not None:
        dense = int(get("first_k_dense_replace") or 0)
    else:  # Qwen-MoE: mlp_only_layers, and layers off the decoder_sparse_step are dense
        only = {int(i) for i in (get("mlp_only_layers") or [])}
        step = int(get("decoder_sparse_step", default=1) or 1)
        dense = sum(1 for i in range(layers) if i in only or (i + 1) % step != 0)
    return dict(experts=experts, active_experts=int(get("num_experts_per_tok", "experts_per_token", default=0) or 0),
                moe_intermediate=moe_inter, shared_intermediate=shared, dense_layers=min(dense, layers),
                expert_bias=model_type == "gpt_oss")


def _max_context(max_pos: Any, rope_scaling: Any) -> Optional[int]:
    """The longest context the model serves: max_position_embeddings, stretched by a RoPE scaling factor the way
    vLLM derives max_model_len (vllm/config.py _get_and_verify_max_len: yarn scales
    original_max_position_embeddings, other types scale max_position_embeddings; longrope, su and llama3 do not
    scale, their max_position_embeddings already is the long context)."""
    if not isinstance(max_pos, int) or max_pos <= 0:
        return None
    if not isinstance(rope_scaling, dict):
        return max_pos
    kind = str(rope_scaling.get("rope_type", rope_scaling.get("type", "")))
    factor = rope_scaling.get("factor")
    if kind in ("su", "longrope", "llama3", "default", "mrope", "") or not isinstance(factor, (int, float)) or factor <= 1:
        return max_pos
    base = rope_scaling.get("original_max_position_embeddings") if kind == "yarn" else max_pos
    return max(max_pos, int((base if isinstance(base, int) and base > 0 else max_pos) * factor))


# a VLM's model_type → the tower ModelShape counts (Qwen3.5's is Qwen3-VL's without deepstack mergers)
VISION_TYPES = {"qwen2_5_vl": "qwen2_5_vl", "qwen3_vl": "qwen3_vl", "qwen3_vl_moe": "qwen3_vl", "qwen3_5": "qwen3_vl",
                "qwen3_5_moe": "qwen3_vl"}


def _vision_fields(top: dict, path: str) -> dict[str, Any]:
    """The vision tower of a vision-language config.json (its `vision_config`), as ModelShape fields; {} for a
    text model. A vision_config of a model family verl-init cannot count is refused (ValueError)."""
    v = top.get("vision_config")
    if not isinstance(v, dict):
        return {}
    kind = VISION_TYPES.get(str(top.get("model_type", "")))
    if kind is None:
        raise ValueError(f"{path}/config.json: vision_config of model_type {top.get('model_type')!r} (verl-init counts "
                         f"the vision towers of {', '.join(sorted(VISION_TYPES))})")
    try:
        return dict(
            vision=kind, vision_depth=int(v["depth"]), vision_hidden=int(v["hidden_size"]),
            vision_intermediate=int(v["intermediate_size"]), vision_heads=int(v["num_heads"]),
            vision_patch=int(v.get("patch_size", 14)), vision_merge=int(v.get("spatial_merge_size", 2)),
            vision_temporal=int(v.get("temporal_patch_size", 2)),
            vision_pos=int(v.get("num_position_embeddings", 0) or 0) if kind == "qwen3_vl" else 0,
            # Qwen3.5's tower has no deepstack mergers (transformers' Qwen3_5VisionModel), whatever its config lists
            vision_deepstack=len(v.get("deepstack_visual_indexes") or [])
            if str(top.get("model_type", "")) in ("qwen3_vl", "qwen3_vl_moe") else 0,
        )
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{path}/config.json: vision_config lacks depth, hidden_size, intermediate_size or num_heads") from None


def from_params(params_b: float, source: str, name: str = "") -> ModelShape:
    """A dense Qwen2.5-like shape with `params_b` billion parameters (layers scaled from the nearest size)."""
    dense = [s for k, s in catalogue().items()
             if k.startswith("qwen/qwen2.5-") and k.endswith("-instruct") and not s.vision]
    base = min(dense, key=lambda s: abs(s.params_b - params_b))
    per_layer = base.layer_params()
    layers = max(1, round((params_b * 1e9 - base.embed_params() - base.hidden) / per_layer))
    return replace(base, name=name or f"~{params_b:g}B", layers=layers, source=source)


# a MoE known only by its name's two sizes: how many routed experts a token passes, as the catalogue's fine-grained
# MoEs route (Qwen3-MoE top-8 of 128, DeepSeek-V3 top-8 of 256; an assumption, named by the shape's source)
GENERIC_TOP_K = 8


def from_moe_params(params_b: float, active_b: float, source: str, name: str = "") -> ModelShape:
    """A MoE of `params_b` billion parameters of which a token uses `active_b` (its name's "-A3B"), known by nothing
    else: the dense shape of `active_b` (layers, attention, embeddings: what every token passes) whose MLP is split
    into GENERIC_TOP_K routed experts a token passes, plus as many more experts as the remaining parameters make."""
    base = from_params(active_b, source, name)
    k = GENERIC_TOP_K
    moe = replace(base, arch="qwen3_moe", qkv_bias=False, experts=k, active_experts=k,
                  moe_intermediate=max(base.intermediate // k, 1))
    more = round((params_b * 1e9 - moe.params) / (moe.moe_layers * moe.expert_params()))
    # whole multiples of top-k, as real MoEs have (64, 128, 256: expert parallel divides them, moe_layer.py:64);
    # the experts' width re-solved so that the total stays the named one
    experts = max(k, round((k + max(more, 0)) / k) * k)
    bare = replace(moe, experts=experts, moe_intermediate=0).params
    width = round((params_b * 1e9 - bare) / (moe.moe_layers * experts * 3 * moe.hidden))
    return replace(moe, experts=experts, moe_intermediate=max(width, 1))


def _scaled(params_b: float, source: str, model: str) -> ModelShape:
    """A shape of `params_b` billion parameters for a model the catalogue does not know: a MoE when its name states
    fewer active parameters ("Qwen3-Next-80B-A3B"), else dense."""
    active = active_in_name(model)
    if active and active < 0.8 * params_b:
        return from_moe_params(params_b, active, source, model)
    return from_params(params_b, source, model)


_MOE = re.compile(r"(?i)(?:^|[-_/ .])(\d+)x(\d+(?:\.\d+)?)b(?=$|[-_ .])")
_SIZE = re.compile(r"(?i)(?:^|[-_/ ])(\d+(?:\.\d+)?)b(?=$|[-_ .])")
_SIZE_M = re.compile(r"(?i)(?:^|[-_/ ])(\d+(?:\.\d+)?)m(?=$|[-_ .])")
_ACTIVE = re.compile(r"(?i)(?:^|[-_/ .])a(\d+(?:\.\d+)?)b(?=$|[-_ .])")


def active_in_name(model: str) -> Optional[float]:
    """Billions of parameters a token uses, as a MoE's name states them ("Qwen3-Next-80B-A3B" → 3.0,
    "Qwen1.5-MoE-A2.7B" → 2.7); None when it states none."""
    m = _ACTIVE.search(model.rstrip("/").rsplit("/", 1)[-1])
    return float(m.group(1)) if m else None


def size_in_name(model: str) -> Optional[float]:
    """Billions of parameters stated in a model's name ("Qwen2.5-7B-Instruct" → 7.0, "Qwen3-30B-A3B" → 30.0,
    Mixtral-style "8x7B" → 0.84 × 8 × 7: experts share attention); None when the name states none."""
    name = model.rstrip("/").rsplit("/", 1)[-1]
    m = _MOE.search(name)
    if m:
        return round(int(m.group(1)) * float(m.group(2)) * 0.84, 1)
    m = _SIZE.search(name)
    if m:
        return float(m.group(1))
    m = _SIZE_M.search(name)
    if m:
        return float(m.group(1)) / 1000.0
    return None


def resolve_shape(model: str, params_b: Optional[float] = None) -> Optional[ModelShape]:
    """The one answer to "how big is this model": a local folder's config.json > the catalogue >
    model_params_b > the size in the name; None when nothing is known. With model_params_b, a catalogue
    entry within 15% of it, or one whose name states that size, is kept (the answer confirms it), else a shape
    scaled to the answer: a MoE when the name states its active size ("-A3B"), else dense."""
    path = os.path.expanduser(model)
    # a local folder's config.json wins, also over a catalogue entry of the same name and over model_params_b
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json")):
        return from_local(path)
    if params_b is not None:
        shape, nominal = from_catalogue(model), size_in_name(model)
        # the answer confirms the entry, or is the size the name states (Qwen2.5-VL-7B-Instruct: "7", 8.3B counted)
        if shape and (abs(shape.params_b - params_b) / params_b < 0.15
                      or (nominal is not None and abs(nominal - params_b) <= 0.05 * params_b)):
            return shape
        return _scaled(params_b, "answer", model)
    shape = from_catalogue(model)
    if shape is not None:
        return shape
    name_size = size_in_name(model)
    if name_size is not None:
        return _scaled(name_size, "name", model)
    return None
