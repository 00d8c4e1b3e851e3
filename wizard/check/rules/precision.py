"""What a card below compute capability 8.0 (V100, T4, Turing and Pascal cards) cannot run of verl 0.9.1's defaults
(VI864, VI865). The card comes from `--gpu-type` (an NVML name such as "Tesla V100-SXM2-32GB" works); its capability
from wizard.verlspec.hardware.GPU_COMPUTE_CAPABILITY. Nothing fires for a card that is not known.

- VI864: vLLM refuses a bf16 model there when its server starts (vllm/platforms/cuda.py,
  CudaPlatformBase.check_if_supports_dtype), and verl passes `rollout.dtype` (bfloat16 by default,
  trainer/config/rollout/rollout.yaml:43) to it (workers/rollout/vllm_rollout/vllm_async_server.py:326).
- VI865: the FSDP engines load the model with `model.override_config.attn_implementation`, flash_attention_2 when
  unset (workers/config/model.py:185); flash-attn 2 stops at the first forward pass, after the first rollout
  ("FlashAttention only supports Ampere GPUs or newer", flash-attn's csrc/flash_attn/flash_api.cpp). verl's own
  page on the override names sdpa and eager (docs/advance/attention_implementation.rst).
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import A, M, R, Ctx, Facts
from wizard.verlspec.hardware import without_bf16

BF16_NAMES = ("bfloat16", "bf16")
FSDP_STRATEGIES = ("fsdp", "fsdp2")
ATTN_DEFAULT = "flash_attention_2"  # workers/config/model.py:185
FLASH_ATTN = ("flash_attention_2", "flash_attention_3")


def rule_precision(c: Ctx, f: Facts) -> None:
    found = without_bf16(c.hw.gpu_type)
    if found is None:
        return
    name, (major, minor) = found
    card = f"{c.hw.gpu_type} ({name}: compute capability {major}.{minor}, below 8.0)"
    dtype = c.v(f"{R}.dtype")
    if c.v(f"{R}.name") == "vllm" and isinstance(dtype, str) and dtype.lower() in BF16_NAMES:
        c.add("VI864", "error", (f"{R}.dtype",),
              f"{R}.dtype={dtype} on {card}: vLLM refuses bf16 there when its server starts "
              "(vllm/platforms/cuda.py check_if_supports_dtype; verl passes rollout.dtype to it, "
              "vllm_async_server.py:326)",
              f"set {R}.dtype=float16 (and train in fp16 too, so the synced weights keep their precision: "
              + (f"+{A}.fsdp_config.mixed_precision.param_dtype=fp16; verl's FSDP engine scales the loss for fp16)"
                 if c.v(f"{A}.strategy") in FSDP_STRATEGIES else
                 f"{A}.megatron.dtype=float16, Megatron's fp16 mode, megatron/transformer_impl.py:292-335)"),
              fix=Fix(set={f"{R}.dtype": "float16"}))
    roles = [("actor", f"{A}.strategy", M)]
    if f.use_critic:  # critic.enable, else adv_estimator=gae (verl's need_critic, trainer/ppo/utils.py:96-107)
        roles.append(("critic", "critic.strategy", "critic.model"))
    for role, strategy_key, model in roles:
        if c.v(strategy_key) not in FSDP_STRATEGIES:
            continue
        key = f"{model}.override_config.attn_implementation"
        attn = c.v(key) or ATTN_DEFAULT
        if attn not in FLASH_ATTN:
            continue
        given = c.set_by_user(key)
        c.add("VI865", "error", (key,),
              f"the {role}'s attention is {attn}{'' if given else ' (verl default, workers/config/model.py:185)'} on "
              f"{card}: flash-attn runs only on compute capability 8.0 and later and stops the first training "
              "forward pass, after the first rollout (\"FlashAttention only supports Ampere GPUs or newer\")",
              f"set {'' if given else '+'}{key}=sdpa (verl's docs/advance/attention_implementation.rst)",
              fix=Fix(set={key if given else "+" + key: "sdpa"}))
