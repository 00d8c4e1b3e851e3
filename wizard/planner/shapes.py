"""Model shapes without weights: the shipped catalogue, a local folder's config.json, or a shape
scaled from a parameter count (name or `model_params_b`)."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional


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
    experts: int = 0
    active_experts: int = 0
    moe_intermediate: int = 0
    source: str = "catalogue"  # catalogue | local | name | answer

    # -- parameter counts (transformers' numel of the same config, ±1%) ----------------------
    def _norms_per_layer(self) -> int:
        return 4 if self.arch.startswith("gemma") else 2

    def attn_params(self) -> int:
        q = self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        bias = (self.heads + 2 * self.kv_heads) * self.head_dim if self.qkv_bias else 0
        qk_norm = 2 * self.head_dim if self.arch in ("qwen3", "qwen3_moe", "gemma3_text") else 0
        return q + kv + o + bias + qk_norm

    def mlp_params(self, active: bool = False) -> int:
        if self.experts:
            n = self.active_experts if active else self.experts
            return n * 3 * self.hidden * self.moe_intermediate + self.hidden * self.experts
        return 3 * self.hidden * self.intermediate

    def layer_params(self, active: bool = False) -> int:
        return self.attn_params() + self.mlp_params(active) + self._norms_per_layer() * self.hidden

    def embed_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def params(self) -> int:
        return self.layers * self.layer_params() + self.embed_params() + self.hidden

    @property
    def active_params(self) -> int:
        return self.layers * self.layer_params(active=True) + self.embed_params() + self.hidden

    @property
    def params_b(self) -> float:
        return self.params / 1e9

    def kv_bytes_per_token(self, tp: int = 1) -> float:
        """bf16 K and V for one token on one GPU of a TP group (KV heads are replicated when TP > KV heads)."""
        heads_per_gpu = max(self.kv_heads / tp, 1.0)
        return 2 * self.layers * heads_per_gpu * self.head_dim * 2

    def lora_params(self, rank: int) -> int:
        """Adapters on every linear layer (target_modules=all-linear)."""
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        inter = self.moe_intermediate * self.experts if self.experts else self.intermediate
        per_layer = (h + q) + 2 * (h + kv) + (q + h) + 3 * (h + inter) * (1 if not self.experts else 1)
        return rank * per_layer * self.layers

    def hf_config_kwargs(self) -> dict[str, Any]:
        """The config.json fields this shape came from (for transformers, e.g. a meta-device model)."""
        kw: dict[str, Any] = dict(
            num_hidden_layers=self.layers, hidden_size=self.hidden, num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads, head_dim=self.head_dim, intermediate_size=self.intermediate,
            vocab_size=self.vocab, tie_word_embeddings=self.tied,
        )
        if self.max_pos:
            kw["max_position_embeddings"] = self.max_pos
        if self.arch == "qwen3_moe":
            kw.update(num_experts=self.experts, num_experts_per_tok=self.active_experts,
                      moe_intermediate_size=self.moe_intermediate, mlp_only_layers=[], decoder_sparse_step=1)
        if self.arch == "mixtral":
            kw.update(num_local_experts=self.experts, num_experts_per_tok=self.active_experts)
        if self.arch == "llama":
            kw.update(attention_bias=False, mlp_bias=False)
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
    import json

    with open(os.path.join(path, "config.json"), "rb") as fh:
        raw = fh.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ValueError(f"{path}/config.json is larger than {MAX_CONFIG_BYTES >> 20} MiB")
    top = json.loads(raw.decode("utf-8"))
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
    experts = int(get("num_experts", "num_local_experts", "n_routed_experts", default=0) or 0)
    return ModelShape(
        name=path, arch=model_type, layers=layers, hidden=hidden, heads=heads,
        kv_heads=int(get("num_key_value_heads", default=heads) or heads),
        head_dim=int(get("head_dim", default=hidden // heads) or hidden // heads),
        intermediate=int(get("intermediate_size", "n_inner", default=0) or 4 * hidden), vocab=vocab,
        tied=bool(get("tie_word_embeddings", default=top.get("tie_word_embeddings", False))),
        qkv_bias=bool(get("attention_bias", default=False)) or model_type == "qwen2",
        max_pos=_max_context(get("max_position_embeddings"), get("rope_scaling")), experts=experts,
        active_experts=int(get("num_experts_per_tok", default=0) or 0),
        moe_intermediate=int(get("moe_intermediate_size", default=0) or (get("intermediate_size", default=0) if experts else 0)),
        source="local",
    )


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


def from_params(params_b: float, source: str, name: str = "") -> ModelShape:
    """A dense Qwen2.5-like shape with `params_b` billion parameters (layers scaled from the nearest size)."""
    dense = [s for k, s in catalogue().items() if k.startswith("qwen/qwen2.5-") and k.endswith("-instruct")]
    base = min(dense, key=lambda s: abs(s.params_b - params_b))
    per_layer = base.layer_params()
    layers = max(1, round((params_b * 1e9 - base.embed_params() - base.hidden) / per_layer))
    return replace(base, name=name or f"~{params_b:g}B", layers=layers, source=source)


_MOE = re.compile(r"(?i)(?:^|[-_/ .])(\d+)x(\d+(?:\.\d+)?)b(?=$|[-_ .])")
_SIZE = re.compile(r"(?i)(?:^|[-_/ ])(\d+(?:\.\d+)?)b(?=$|[-_ .])")
_SIZE_M = re.compile(r"(?i)(?:^|[-_/ ])(\d+(?:\.\d+)?)m(?=$|[-_ .])")


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
    entry within 15% of it is kept (the answer confirms it), else a shape scaled to the answer."""
    path = os.path.expanduser(model)
    # a local folder's config.json wins, also over a catalogue entry of the same name and over model_params_b
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json")):
        return from_local(path)
    if params_b is not None:
        shape = from_catalogue(model)
        return shape if shape and abs(shape.params_b - params_b) / params_b < 0.15 else from_params(params_b, "answer", model)
    shape = from_catalogue(model)
    if shape is not None:
        return shape
    name_size = size_in_name(model)
    if name_size is not None:
        return from_params(name_size, "name", model)
    return None
