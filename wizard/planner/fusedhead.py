"""The policy's log-prob head with `actor_rollout_ref.model.use_fused_kernels`: whether verl 0.9.1 runs it, and the
memory it keeps instead of the whole (tokens, vocabulary) logits. Only the standard library is imported.

Whether it runs (site-packages/verl):
- the engine takes the flag from the model config (workers/engine_workers.py:115) and hands it to every pass
  (engine_workers.py:357, 411);
- FSDP: the model's forward is patched only for impl_backend triton, torch (the default, trainer/config/model/
  hf_model.yaml:68) or liger (models/transformers/monkey_patch.py:246-250); the torch backend is verl's
  FusedLinearForPPO, 512 tokens at a time (utils/experimental/torch_functional.py:96-240), traced for the catalogue's
  architectures (wizard.planner.memtrace.FUSED_VARIANTS);
- Megatron: off again without use_remove_padding, for a value model or with MTP enabled
  (workers/engine/megatron/transformer_impl.py:522-531); on, the triton kernel linear_cross_entropy
  (models/mcore/model_forward_fused.py:35, 110; utils/kernel/kernels.py).

What it keeps, for the analytic estimate (Megatron, and FSDP models without traced coefficients):
- FSDP, torch backend: a chunk's temporaries, FUSED_CHUNK tokens × vocabulary × CHUNK_BYTES_* (and, training, a
  chunk's LM-head gradient); per token only what the layers keep already (tests/test_fused_head.py compares these
  with the traced constants);
- Megatron: per token the kernel's fp32 partial maxima, sums and entropies, one of each per 1,024 vocabulary entries
  of the rank (kernels.py:620-626), its fp32 outputs (kernels.py:602-614) and, in the backward, the bf16 logit
  gradients of one 9,504-entry vocabulary split (kernels.py:168 Split_Dlogits_N, 1664-1668); a training pass also
  holds the bf16 gradient of the rank's LM head (kernels.py:1559-1565).
"""

from __future__ import annotations

import math
from typing import Any, Callable

FUSED_CHUNK = 512  # FusedLinearForPPO's chunk_size (utils/experimental/torch_functional.py:221)
# a chunk's temporaries per vocabulary entry, as the fused passes trace them (tests/test_fused_head.py): forward
# bf16 logits, their fp32 copy, softmax and log-softmax (12 B). The backward computes each chunk's LM-head gradient
# `dlogits.t() @ hidden` whether or not the weight trains (torch_functional.py:84), bf16 vocabulary × hidden; its
# peak is the larger of two moments the traces show: the chunk's one-hot, gradient and entropy terms (28 B a
# vocabulary entry) beside one such gradient (2 B × vocabulary × hidden), or fewer of them (18 B) beside two (4 B)
CHUNK_BYTES_FORWARD = 12
TRAIN_PEAKS = ((28, 2), (18, 4))  # (B per chunk token and vocabulary entry, B per vocabulary entry and hidden unit)
# Megatron's linear_cross_entropy
SPLIT_VOCAB, SPLIT_BACKWARD = 1024, 9504  # forward partials per 1,024 entries; backward split (kernels.py:620, 1665)
PARTIAL_BYTES = 3 * 4  # fp32 max, sum and entropy per split and token
OUTPUT_BYTES = 5 * 4  # fp32 log-prob, entropy, maximum, accumulate and entropy_b per token


def runs(get: Callable[[str], Any], megatron: bool) -> bool:
    """Whether verl runs the fused head for the policy, from the resolved config (`get` a dotted key)."""
    model = "actor_rollout_ref.model"
    if not get(f"{model}.use_fused_kernels"):
        return False
    if megatron:
        mtp = get(f"{model}.mtp.enable")
        return bool(get(f"{model}.use_remove_padding")) and not mtp
    backend = get(f"{model}.fused_kernel_options.impl_backend") or "torch"
    return backend in ("triton", "torch", "liger")


def logit_bytes(vocab: int, hidden: int, tp: int, *, megatron: bool, train: bool) -> tuple[float, float]:
    """(bytes per token, bytes once per pass) of the fused head on one GPU, in place of the full logits."""
    if not megatron:
        if not train:
            return 0.0, FUSED_CHUNK * vocab * CHUNK_BYTES_FORWARD
        return 0.0, max(FUSED_CHUNK * vocab * chunk + grads * vocab * hidden for chunk, grads in TRAIN_PEAKS)
    local = vocab / max(tp, 1)
    per_token = OUTPUT_BYTES + PARTIAL_BYTES * math.ceil(local / SPLIT_VOCAB)
    if not train:
        return per_token, 0.0
    return per_token + 2 * min(SPLIT_BACKWARD, local), 2 * local * hidden


def for_layout(s: Any, L: Any, *, train: bool) -> tuple[float, float]:
    """logit_bytes for a model shape and a memory Layout (wizard.planner.memory); (0, 0) without the fused head."""
    if not L.fused_logits:
        return 0.0, 0.0
    return logit_bytes(s.vocab, s.hidden, L.megatron_tp if L.megatron else 1, megatron=L.megatron, train=train)
