"""VI660 (warning): an SGLang rollout of a Gated DeltaNet hybrid on a Blackwell data-centre GPU with an attention
backend SGLang refuses for such models there.

verl 0.9.1 starts SGLang with `attention_backend` from the rollout's `engine_kwargs.sglang.attention_backend`, and when
that is unset picks one itself (workers/rollout/sglang_rollout/async_sglang_server.py:289-298): "aiter" on ROCm,
"flashinfer" with sglang >= 0.5.12, else "fa3". SGLang's attention registry asserts, when the server builds the
attention backend of a hybrid GDN model (config.json layer_types with "linear_attention": Qwen3.5, Qwen3-Next) on a
Blackwell GPU (compute capability 10.x), that the backend is one of trtllm_mha, triton or fa4 ("Only {'trtllm_mha',
'triton', 'fa4'} backends are supported on Blackwell GPUs for hybrid GDN models. Got attention_backend=flashinfer",
sglang 0.5.17, sgl-project/sglang#35080, raised while running verl's one-step-off delta-sync example on B300). So
verl's defaults (flashinfer, fa3) fail there, in the rollout worker after the GPUs are booked. A warning: the set
lives in SGLang and has changed between its releases (#20709 lifted it once); the check needs the GPU type
(--gpu-type) and a model shape with its own sizes (catalogue or local config.json).

VERL_DEFAULTS is verl's fallback list; tests/test_check_sglang_attention.py reads it back from verl's source.
"""

from __future__ import annotations

from typing import Any

from wizard.check.rules.context import R, Ctx, Facts
from wizard.verlspec.hardware import compute_capability_of_gpu_type

KEY = f"{R}.engine_kwargs.sglang.attention_backend"
VERL_DEFAULTS = ("aiter", "fa3", "flashinfer")  # async_sglang_server.py:289-298 (aiter only on ROCm)
CUDA_DEFAULTS = ("fa3", "flashinfer")  # what verl picks on an NVIDIA GPU, by SGLang version
BLACKWELL_GDN = ("fa4", "triton", "trtllm_mha")  # SGLang attention registry, hybrid GDN on compute capability 10.x


def refused_backends(backend: Any) -> tuple[str, ...]:
    """The backends SGLang would get and refuse: the user's, or verl's CUDA defaults when unset."""
    picks = CUDA_DEFAULTS if backend in (None, "") else (str(backend),)
    return tuple(b for b in picks if b not in BLACKWELL_GDN)


def rule_sglang_gdn_blackwell_attention(c: Ctx, f: Facts, shape: Any) -> None:
    """VI660."""
    if shape is None or shape.source not in ("catalogue", "local") or not getattr(shape, "linear_layers", 0):
        return
    if c.unknown(f"{R}.name") or c.v(f"{R}.name") != "sglang":
        return
    found = compute_capability_of_gpu_type(c.hw.gpu_type)
    if found is None or found[1][0] != 10:
        return
    backend = c.v(KEY)
    bad = refused_backends(backend)
    if not bad:
        return
    what = f"{KEY}={backend}" if backend not in (None, "") else \
        f"{KEY} unset, so verl picks {' or '.join(CUDA_DEFAULTS)} by SGLang version (async_sglang_server.py:289-298)"
    c.add("VI660", "warning", (KEY, f"{R}.name"),
          f"SGLang rollout of {shape.name}, a Gated DeltaNet hybrid, on {found[0]} (compute capability "
          f"{found[1][0]}.{found[1][1]}) with {what}: SGLang accepts only {', '.join(BLACKWELL_GDN)} for hybrid GDN "
          "models on Blackwell and asserts when the rollout server builds the attention backend "
          "(sgl-project/sglang#35080)",
          f"set +{KEY}=triton (or fa4 / trtllm_mha)")
