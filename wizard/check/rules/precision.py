"""What a card below compute capability 8.0 (V100, T4, Turing and Pascal cards) cannot run of verl 0.9.1's defaults
(VI864, VI865). The card comes from `--gpu-type` (an NVML name such as "Tesla V100-SXM2-32GB" works); its capability
from wizard.verlspec.hardware.GPU_COMPUTE_CAPABILITY. Nothing fires for a card that is not known.

- VI864: vLLM refuses a bf16 model there when its server starts (vllm/platforms/cuda.py,
  CudaPlatformBase.check_if_supports_dtype), and verl passes `rollout.dtype` (bfloat16 by default,
  trainer/config/rollout/rollout.yaml:43) to it (workers/rollout/vllm_rollout/vllm_async_server.py:326).
- VI865: the FSDP engines load the model with `model.override_config.attn_implementation`, flash_attention_2 when
  unset (workers/config/model.py:185); flash-attn 2 stops at the first forward pass, after the first rollout
  ("FlashAttention only supports Ampere GPUs or newer", flash-attn's csrc/flash_attn/flash_api.cpp). verl's own
  page on the override names sdpa and eager (docs/advance/attention_implementation.rst). An FSDP critic has no such
  override: the FSDP engine loads a value model with `load_valuehead_model` (engine/fsdp/transformer_impl.py:291-305),
  which passes attn_implementation="flash_attention_2" to from_pretrained in both of its loads (utils/model.py:649,
  674), whatever critic.model.override_config says; so an FSDP critic cannot run on such a card (no fix: a
  critic-free estimator, the Megatron engine, or a card of compute capability 8.0 or later).
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
        if role == "critic":
            _fsdp_critic(c, card, key, attn)
            continue
        if attn not in FLASH_ATTN:
            continue
        given = c.set_by_user(key)
        c.add("VI865", "error", (key,),
              f"the {role}'s attention is {attn}{'' if given else ' (verl default, workers/config/model.py:185)'} on "
              f"{card}: flash-attn runs only on compute capability 8.0 and later and stops the first training "
              "forward pass, after the first rollout (\"FlashAttention only supports Ampere GPUs or newer\")",
              f"set {'' if given else '+'}{key}=sdpa (verl's docs/advance/attention_implementation.rst)",
              fix=Fix(set={key if given else "+" + key: "sdpa"}))


def _fsdp_critic(c: Ctx, card: str, key: str, attn: str) -> None:
    """VI865 for an FSDP critic: verl loads it with flash-attn 2 whatever `key` says (the module's docstring)."""
    said = "" if attn in FLASH_ATTN else f" ({key}={attn} is not read for it)"
    c.add("VI865", "error", ("critic.strategy", key),
          f"the critic runs on the FSDP engine, which loads a value model with attn_implementation=flash_attention_2 "
          f"whatever override_config says{said} (utils/model.py:649, 674 via engine/fsdp/transformer_impl.py:291-305), "
          f"on {card}: flash-attn runs only on compute capability 8.0 and later and stops the first critic forward "
          "pass, after the first rollout (\"FlashAttention only supports Ampere GPUs or newer\")",
          "no setting makes an FSDP critic run on this card in verl 0.9.1: use a critic-free estimator "
          "(algorithm.adv_estimator=grpo, rloo, reinforce_plus_plus, ...), or train with the Megatron engine "
          "(--config-name ppo_megatron_trainer), or GPUs of compute capability 8.0 or later")
