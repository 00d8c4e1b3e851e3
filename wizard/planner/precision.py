"""fp16 and PyTorch attention on an NVIDIA card below compute capability 8.0 (V100, T4, Turing and Pascal cards):
verl 0.9.1's defaults are bf16 and flash-attn 2, and neither runs there (wizard.check.rules.precision, VI864/VI865,
has the sources). The card's capability comes from `gpu_type` (wizard.verlspec.hardware.GPU_COMPUTE_CAPABILITY).

The keys, each verl 0.9.1's own:
- `rollout.dtype=float16`: what verl passes to the engine's server (vllm_async_server.py:326);
- `model.override_config.attn_implementation=sdpa` for the FSDP actor (workers/config/model.py:185;
  docs/advance/attention_implementation.rst); an FSDP critic has no such setting (stages/hardware.py, VI634);
- training in fp16, so the weights the rollout serves keep the precision they were trained in: the FSDP engine reads
  `fsdp_config.mixed_precision.param_dtype` and scales the loss for fp16 (engine/fsdp/transformer_impl.py:393-409);
  the Megatron engine reads `megatron.dtype` and sets Megatron's fp16 mode (engine/megatron/transformer_impl.py:292,
  334, 545).
"""

from __future__ import annotations

from typing import Any

from wizard.verlspec.hardware import without_bf16

PRE = "actor_rollout_ref"


def card_without_bf16(gpu_type: str, accelerator: str) -> str | None:
    """'V100: compute capability 7.0' when the plan's card has no bf16 in vLLM nor flash-attn 2; else None."""
    found = without_bf16(gpu_type) if accelerator == "nvidia" else None
    return None if found is None else f"{found[0]}: compute capability {found[1][0]}.{found[1][1]}"


def keys(b: Any) -> None:
    """The plan's fp16 / sdpa keys when `gpu_type` is a card below compute capability 8.0."""
    card = card_without_bf16(b.a.gpu_type, b.a.accelerator)
    if card is None:
        return
    s = b.s
    no_bf16 = f"gpu_type={b.a.gpu_type} ({card}) has no bf16"
    s.set(f"{PRE}.rollout.dtype", "float16",
          f"{no_bf16}: vLLM refuses bf16 below compute capability 8.0 (vllm/platforms/cuda.py check_if_supports_dtype)")
    train = f"{no_bf16}: train in fp16, the precision the rollout serves (verl scales the loss for fp16)"
    attn = (f"{no_bf16} nor flash-attn 2 (verl's default attention, workers/config/model.py:185, runs on 8.0 and "
            "later): PyTorch's scaled-dot-product attention (docs/advance/attention_implementation.rst)")
    critic = b.algo.critic
    if b.megatron:
        s.set(f"{PRE}.actor.megatron.dtype", "float16", train)
        if b.use_ref:
            s.set(f"{PRE}.ref.megatron.dtype", "float16", "same as the actor")
        if critic:
            s.set("critic.megatron.dtype", "float16", "same as the actor")
        return
    s.set(f"{PRE}.model.override_config.attn_implementation", "sdpa", attn)
    s.set(f"{PRE}.actor.fsdp_config.mixed_precision.param_dtype", "fp16", train)
    if b.use_ref:
        s.set(f"{PRE}.ref.fsdp_config.mixed_precision.param_dtype", "fp16", "same as the actor")
    # an FSDP critic cannot run on such a card (planner stage hardware, VI634): the plan was refused before here
