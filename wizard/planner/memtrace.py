"""Per-architecture memory coefficients traced from the model itself: the HF model built from its config.json under
torch's FakeTensorMode (no weights, no GPU), one forward (+ backward) pass of a few hundred tokens and one AdamW step
run under torch.distributed._tools.mem_tracker.MemTracker, the way torchtitan estimates memory without a GPU.

What verl 0.9.1 runs, and therefore what is traced (site-packages/verl):
- the forward/backward computes in bf16: FSDP's MixedPrecision(param_dtype=bf16) gathers every unit in bf16
  (workers/engine/fsdp/transformer_impl.py:396-401), so the fake model is built in bf16; the fp32 master weights,
  fp32 gradients and Adam states are counted per parameter by the estimate (phasemem.py), not traced here;
- gradient checkpointing is transformers' (model.gradient_checkpointing_enable, non-reentrant), verl's default
  (model.enable_gradient_checkpointing: true);
- remove-padding packs the micro-batch's real tokens into one row (input_ids (1, T)), as use_remove_padding does;
- the log-probs come from verl's own logprobs_from_logits (utils/torch_functional.py:73) on the (T, vocab) logits
  (transformer_impl.py:1382-1432): without flash-attn its row-wise logprobs_from_logits_v2 (the GPU measurements
  ran without flash-attn); the entropy of the update (entropy_coeff != 0) through verl's entropy_from_logits;
  the old log-probs' entropy goes through torch.compile (engine use_torch_compile, transformer_impl.py:183), a
  fused reduction that materializes no (T, vocab) tensor, so the forward-only passes trace no entropy;
- the critic is the base model with a one-output head (verl/utils/model.py load_valuehead_model): no logits;
- the optimizer is torch.optim.AdamW with foreach (the default on CUDA): its step's temporaries are traced on fp32
  parameters and gradients.

Coefficients (bytes; per token per layer, per token outside the layers, per parameter) scale to the real token
counts and layer count; traced at two token counts and at one, two and three layers so the per-layer slope and
the rest separate.
Heavy imports (torch, transformers, verl) stay inside the functions."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

DATA = Path(__file__).parent / "data" / "memory_coeffs.json"
TRACE_TOKENS = 512
SCHEMA = 3  # 2: gradients dropped as accumulated, linear-memory attention, the per-layer slope from the third layer;
# 3: the fused-kernel passes (FUSED_VARIANTS)
# an architecture not in the catalogue data (a local config.json) is traced on demand, in a child process bounded
# by TIMEOUT_ENV seconds (a small model takes about a minute on a CPU; the result is cached); TRACE_ENV=0 turns it off
TRACE_ENV = "VERL_INIT_TRACE_MEMORY"
TIMEOUT_ENV = "VERL_INIT_TRACE_TIMEOUT"
DEFAULT_TIMEOUT_S = 300
# the shape fields the coefficients depend on (the layer count is scaled, not traced)
SIGNATURE_FIELDS = ("arch", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab", "tied", "qkv_bias")


def signature(shape: Any) -> str:
    return "|".join(f"{k}={getattr(shape, k)}" for k in SIGNATURE_FIELDS)


def traceable(shape: Any) -> bool:
    """Dense text models only: a MoE's routing is data-dependent (not traceable with fake tensors), a vision tower
    needs images, and a hybrid's Gated DeltaNet layers would trace transformers' torch fallback, not the fused
    kernels verl runs (flash-linear-attention); those stay analytic (wizard.planner.memory)."""
    return not getattr(shape, "experts", 0) and not getattr(shape, "vision", "") and not getattr(shape, "kv_lora_rank", 0) \
        and not getattr(shape, "linear_layers", 0)


def _config(shape: Any, layers: int) -> Any:
    from transformers import AutoConfig

    kw = dict(shape.hf_config_kwargs())
    kw["num_hidden_layers"] = layers
    kw.pop("max_window_layers", None)
    cfg = AutoConfig.for_model(shape.arch, **kw)
    cfg._attn_implementation = _flash_like_attention()
    if hasattr(cfg, "layer_types") and isinstance(getattr(cfg, "layer_types"), list):
        cfg.layer_types = list(cfg.layer_types)[:layers]
    cfg.use_cache = False
    return cfg


ATTENTION = "verl_init_linear_memory"


def _flash_like_attention() -> str:
    """Register (once) an attention with flash-attention's memory: verl runs flash_attention_2 on the packed tokens
    (model.attn_implementation's default, workers/config/model.py), and on a GPU torch's sdpa picks a flash or
    memory-efficient kernel too; both keep O(tokens) memory: the output and the fp32 log-sum-exp per head and token,
    saved with q, k, v for the backward. On fake CPU tensors sdpa would take its math path and materialize the
    (heads, tokens, tokens) scores, an artefact that grows with the square of the tokens traced."""
    import torch
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    class _Flash(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, q: Any, k: Any, v: Any) -> Any:  # q (B, H, T, D), k/v (B, KV, T, D)
            out = q.new_empty(q.shape[0], q.shape[2], q.shape[1], v.shape[-1])
            lse = q.new_empty(q.shape[0], q.shape[1], q.shape[2], dtype=torch.float32)
            ctx.save_for_backward(q, k, v, out, lse)
            return out

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            q, k, v, _, _ = ctx.saved_tensors
            return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
        return _Flash.apply(query, key, value), None

    AttentionInterface.register(ATTENTION, attention)
    AttentionMaskInterface.register(ATTENTION, flash_attention_mask)
    return ATTENTION


def _peak_working(mt: Any) -> float:
    """Peak bytes of activations and temporaries at the tracker's peak (parameters, buffers, gradients excluded:
    the estimate counts those per parameter in verl's dtypes)."""
    snap = mt.get_tracker_snapshot("peak")
    total = 0.0
    for dev in snap.values():
        for k, v in dev.items():
            name = getattr(k, "value", k)
            if name in ("Activation", "Temp", "Other"):
                total += v
    return total


def _drop_grad(p: Any) -> None:
    p.grad = None


def _trace_pass(shape: Any, layers: int, tokens: int, *, train: bool, ckpt: bool, value: bool, entropy: bool,
                embed_grad: bool = True, fused: bool = False) -> float:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker
    from transformers import AutoModel, AutoModelForCausalLM

    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits_v2

    cfg = _config(shape, layers)
    old = torch.get_default_dtype()
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            torch.set_default_dtype(torch.bfloat16)
            model = (AutoModel if value else AutoModelForCausalLM).from_config(cfg, dtype=torch.bfloat16)
            head = torch.nn.Linear(shape.hidden, 1, dtype=torch.bfloat16) if value else None
            head_w = getattr(getattr(model, "lm_head", None), "weight", None)
            if not embed_grad and head_w is not None:  # no weight gradient through the LM head's vocabulary table
                model.lm_head.forward = lambda x: torch.nn.functional.linear(x, head_w.detach())
            if ckpt:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            # a parameter's gradient is dropped as soon as it is accumulated: the estimate counts verl's fp32
            # (sharded) gradients per parameter, and a gradient kept here would move the tracker's peak to the end
            # of the backward pass, where the working set is not at its largest (small token counts)
            for p in [*model.parameters(), *(head.parameters() if head is not None else [])]:
                if p.requires_grad:
                    p.register_post_accumulate_grad_hook(_drop_grad)
            model.train(train)
            ids = torch.randint(0, shape.vocab, (1, tokens))
            pos = torch.arange(tokens).unsqueeze(0)
            mt = MemTracker()
            mt.track_external(model, *([head] if head is not None else []))
            ctx = torch.enable_grad() if train else torch.no_grad()
            with mt, ctx:
                body = model.get_decoder() if fused else model  # fused: the decoder's hidden states, then verl's head
                if embed_grad:
                    out = body(input_ids=ids, position_ids=pos, use_cache=False)
                else:  # no embedding backward: its parameter-sized temporaries are traced apart (embedding_backward)
                    embeds = model.get_input_embeddings()(ids).detach()
                    out = body(inputs_embeds=embeds, position_ids=pos, use_cache=False)
                    del embeds
                if value:
                    loss = head(out.last_hidden_state).squeeze(-1).float().sum()
                elif fused:
                    loss = _fused_head_loss(model, out.last_hidden_state, ids, embed_grad=embed_grad, entropy=entropy)
                else:
                    logits = out.logits.squeeze(0)
                    loss = logprobs_from_logits_v2(logits, ids.squeeze(0)).sum()
                    if entropy:
                        loss = loss + entropy_from_logits(logits).sum()
                    del logits
                del out
                if train:
                    loss.backward()
            return _peak_working(mt)
    finally:
        torch.set_default_dtype(old)


def _fused_head_loss(model: Any, hidden: Any, ids: Any, *, embed_grad: bool, entropy: bool) -> Any:
    """The log-probs (and entropy) as verl computes them with model.use_fused_kernels (FSDP, impl_backend torch, its
    default): the decoder's hidden states into verl's FusedLinearForPPO with the LM head's weight, in chunks of 512
    tokens, never the whole (tokens, vocab) logits (models/transformers/dense_common.py:91-128
    forward_with_torch_backend; utils/experimental/torch_functional.py:96-240)."""
    import torch

    from verl.utils.experimental.torch_functional import FusedLinearForPPO

    weight = model.lm_head.weight if embed_grad else model.lm_head.weight.detach()
    labels = torch.roll(ids, shifts=-1, dims=-1)
    log_probs, ent = FusedLinearForPPO()(hidden, weight, labels)
    return log_probs.sum() + (ent.float().sum() if entropy else 0)


def _trace_optimizer(shape: Any) -> float:
    """Temporary bytes per parameter of one AdamW(foreach) step on fp32 parameters and gradients, steady state
    (states exist): the step's peak minus parameters, gradients and the two states."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    sizes = [shape.hidden * shape.intermediate] * 3 + [shape.hidden * shape.hidden, shape.hidden]
    with FakeTensorMode():
        params = [torch.nn.Parameter(torch.empty(n, dtype=torch.float32)) for n in sizes]
        for p in params:
            p.grad = torch.empty_like(p)
        opt = torch.optim.AdamW(params, lr=1e-6, foreach=True)
        opt.step()  # creates the states
        mt = MemTracker()
        mt.track_external(*params)
        with mt:
            opt.step()
        snap = mt.get_tracker_snapshot("peak")
    total = sum(v for dev in snap.values() for k, v in dev.items() if getattr(k, "value", k) in ("Temp", "Other"))
    return total / sum(sizes)


# Every pass is traced at two token counts and one to three layers with the vocabulary tables' weight gradients left
# out (the input embedding's output and the LM head's weight detached): bytes per token per decoder layer, per token
# outside the layers (the logits and verl's log-softmax dominate the policy's), and a constant. A pass's peak sits
# where its per-token working set is largest once the micro-batch is large enough; at few tokens it sits at a
# weight-sized temporary (a layer's weight gradient in bf16), and a fit across the two would be wrong. So the token
# counts are chosen per architecture: the smaller one holds more bytes per token × tokens than the largest weight
# matrix's bf16 temporaries (traced: the peak moves between 256 and 512 tokens for Qwen2.5-7B). The weight
# gradients' own temporaries of the vocabulary tables (a dense vocabulary × hidden gradient of the embedding,
# parameter-sized) are traced on their own at a few tokens with every gradient on: they are a pass's peak only
# when the micro-batch is small; a frozen embedding (LoRA) has none.
VARIANTS = {
    "forward": dict(train=False, ckpt=False, value=False, entropy=False),
    "train_gc": dict(train=True, ckpt=True, value=False, entropy=False),
    "train_nogc": dict(train=True, ckpt=False, value=False, entropy=False),
    "value_forward": dict(train=False, ckpt=False, value=True, entropy=False),
    "value_train_gc": dict(train=True, ckpt=True, value=True, entropy=False),
    "value_train_nogc": dict(train=True, ckpt=False, value=True, entropy=False),
}
EMBED_TOKENS = 8


def token_counts(shape: Any, tokens: int = TRACE_TOKENS, *, value: bool = False) -> tuple[int, int]:
    """(smaller, larger) token counts traced: the smaller one's working set (≈ 4 B per vocabulary entry per token for
    the policy, ≈ 24 B per hidden unit for the critic) at least twice the largest weight matrix's bf16 gradient,
    at least `tokens` // 2 (powers of two)."""
    weight = 2 * shape.hidden * max(shape.intermediate, shape.hidden)
    per_token = (4 * shape.vocab) if not value else (24 * shape.hidden + 8 * shape.intermediate)
    t1 = max(tokens // 2, 1)
    while t1 * per_token < 2 * weight and t1 < 1 << 15:
        t1 *= 2
    return t1, 2 * t1


# With model.use_fused_kernels the policy's passes compute their log-probs FUSED_CHUNK tokens at a time
# (_fused_head_loss): traced at token counts of whole chunks, so a chunk's temporaries land in the constant and the
# slope is what each token keeps. The update traces the entropy's backward too (entropy_coeff != 0), its largest case.
FUSED_CHUNK = 512  # FusedLinearForPPO's chunk_size (utils/experimental/torch_functional.py:221)
FUSED_TOKENS = (2 * FUSED_CHUNK, 4 * FUSED_CHUNK)
FUSED_VARIANTS = {
    "forward_fused": dict(train=False, ckpt=False, value=False, entropy=False, fused=True),
    "train_gc_fused": dict(train=True, ckpt=True, value=False, entropy=True, fused=True),
    "train_nogc_fused": dict(train=True, ckpt=False, value=False, entropy=True, fused=True),
}


def _fit(shape: Any, kw: dict[str, Any], t1: int, t2: int) -> dict[str, Any]:
    """One pass's coefficients (see the module doc) from traces at `t1` and `t2` tokens and one to three layers."""
    w11 = _trace_pass(shape, 1, t1, embed_grad=False, **kw)
    w12 = _trace_pass(shape, 1, t2, embed_grad=False, **kw)
    w21 = _trace_pass(shape, 2, t1, embed_grad=False, **kw)
    layer = max(0.0, (w21 - w11) / t1)
    rest = max(0.0, (w12 - w11) / (t2 - t1) - layer)
    constant = max(0.0, w11 - t1 * (rest + layer))
    if not kw["train"]:  # without autograd nothing is kept per layer: what a second layer adds is the residual
        rest, layer = rest + 2 * layer, 0.0  # stream's copies, per token, whatever the depth
    else:  # the first layer added can move the peak (the logits' backward vs a layer's recompute): the slope per
        # layer is the third layer's, the fit anchored at two layers (traced: Mistral-7B's first step is 6 B per
        # hidden unit and token, every further one the 2 B of the checkpointed input)
        steady = max(0.0, (_trace_pass(shape, 3, t1, embed_grad=False, **kw) - w21) / t1)
        rest, layer = max(0.0, rest + 2 * (layer - steady)), steady
    entry = {"per_layer_per_token": round(layer, 2), "rest_per_token": round(rest, 2), "constant": round(constant)}
    if kw["train"]:
        entry["embedding_backward"] = round(_trace_pass(shape, 1, EMBED_TOKENS, **kw))
    return entry


def trace_fused(shape: Any) -> dict[str, Any]:
    """The fused-kernel passes' coefficients only (FUSED_VARIANTS), at FUSED_TOKENS."""
    return {name: _fit(shape, kw, *FUSED_TOKENS) for name, kw in FUSED_VARIANTS.items()}


def trace(shape: Any, tokens: int = TRACE_TOKENS) -> dict[str, Any]:
    """The coefficients of one architecture (see the module doc); raises on an architecture transformers cannot
    build or fake tensors cannot run."""
    import torch
    import transformers

    out: dict[str, Any] = {"signature": signature(shape), "schema": SCHEMA,
                           "tokens_traced": list(token_counts(shape, tokens)),
                           "value_tokens_traced": list(token_counts(shape, 2 * tokens, value=True)),
                           "layers_traced": [1, 2, 3]}
    for name, kw in VARIANTS.items():
        out[name] = _fit(shape, kw, *out["value_tokens_traced" if kw["value"] else "tokens_traced"])
    out.update(trace_fused(shape))
    out["fused_tokens_traced"] = list(FUSED_TOKENS)
    out["optimizer_step_temp_bytes_per_param"] = round(_trace_optimizer(shape), 3)
    out["torch"], out["transformers"] = torch.__version__, transformers.__version__
    return out


@lru_cache(maxsize=1)
def catalogue_data() -> dict[str, Any]:
    if not DATA.exists():
        return {}
    return json.loads(DATA.read_text(encoding="utf-8")).get("architectures", {})


_TRACED: dict[str, tuple[Optional[dict[str, Any]], str]] = {}


def coefficients(shape: Any) -> tuple[Optional[dict[str, Any]], str]:
    """(coefficients, where they came from): "catalogue data" (wizard/planner/data/memory_coeffs.json, traced by
    scripts/trace_memory.py), "traced ..." (an architecture not in the data, traced now from its config in a
    subprocess bounded by TIMEOUT_ENV seconds, torch and transformers installed, and cached), or (None,
    "analytic ...") with the reason."""
    sig = signature(shape)
    data = catalogue_data().get(sig)
    if data is not None:
        return data, "catalogue data"
    if not traceable(shape):
        return None, "analytic (MoE, vision or latent attention: not traced)"
    if os.environ.get(TRACE_ENV, "1") == "0":
        return None, f"analytic (architecture not in the catalogue data; {TRACE_ENV}=0 turns tracing it off)"
    if getattr(shape, "source", "local") != "local":  # a catalogue entry, a size guessed from a name or an answer
        return None, "analytic (architecture not in the catalogue data; a local config.json is traced on demand)"
    if sig in _TRACED:
        return _TRACED[sig]
    cached = _cache_file(sig)
    if cached is not None and cached.exists():
        try:
            data = json.loads(cached.read_text(encoding="utf-8"))
            if data.get("schema") == SCHEMA:  # a trace by an older tracer is traced again
                _TRACED[sig] = (data, "traced (cached trace of this config)")
                return _TRACED[sig]
        except (OSError, ValueError):
            pass
    import importlib.util

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        return None, "analytic (torch/transformers not installed: no trace of this architecture)"
    timeout = trace_timeout()
    data, why = trace_bounded(shape, timeout)
    if data is None:
        _TRACED[sig] = (None, f"analytic ({why})")
        return _TRACED[sig]
    _TRACED[sig] = (data, f"traced (this config, now, in {data.get('seconds', 0):.0f} s of at most {timeout:.0f} s)")
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(data, indent=1), encoding="utf-8")
        except OSError:
            pass
    return _TRACED[sig]


def trace_timeout() -> float:
    try:
        return max(1.0, float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))
    except ValueError:
        return float(DEFAULT_TIMEOUT_S)


def trace_bounded(shape: Any, timeout: float) -> tuple[Optional[dict[str, Any]], str]:
    """trace(shape) in a child Python process killed after `timeout` seconds: (coefficients, "") or (None, why)."""
    import dataclasses
    import subprocess
    import sys
    import time

    root = str(Path(__file__).resolve().parents[2])
    code = ("import json, sys; from wizard.planner import memtrace; from wizard.planner.shapes import ModelShape; "
            "s = ModelShape(**json.loads(sys.stdin.read())); print(json.dumps(memtrace.trace(s)))")
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    print(f"verl-init: tracing the memory of {getattr(shape, 'arch', '?')} from its config under FakeTensorMode "
          f"(at most {timeout:.0f} s; {TRACE_ENV}=0 skips it, {TIMEOUT_ENV} bounds it)", file=sys.stderr)
    t0 = time.monotonic()
    try:
        out = subprocess.run([sys.executable, "-c", code], input=json.dumps(dataclasses.asdict(shape)), text=True,
                             capture_output=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return None, f"the trace of this config ran past {timeout:.0f} s ({TIMEOUT_ENV} raises the bound)"
    except OSError as exc:
        return None, f"trace failed: {type(exc).__name__}: {exc}"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no message"])[-1]
        return None, f"trace failed: {last[:160]}"
    try:
        data = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, "trace failed: no coefficients on its output"
    data["seconds"] = round(time.monotonic() - t0, 1)
    return data, ""


def _cache_file(sig: str) -> Optional[Path]:
    import hashlib

    base = os.environ.get("XDG_CACHE_HOME") or (os.path.join(os.path.expanduser("~"), ".cache")
                                                  if os.path.expanduser("~") != "~" else "")
    if not base:
        return None
    return Path(base) / "verl-init" / "memory-coeffs" / (hashlib.sha256(sig.encode()).hexdigest()[:16] + ".json")
