"""verl 0.9.1's LoRA: which config block each training engine reads, and what the trainer and the rollout
engines make of both (standard library only; paths under site-packages/verl).

verl carries two LoRA blocks in `actor_rollout_ref.model` that it never syncs (workers/config/model.py:122-135,
"TODO: unify fsdp and megatron lora config"):

- the flat FSDP keys `lora_rank`, `lora_alpha`, `target_modules`, `exclude_modules`, `lora_adapter_path`: read by
  the FSDP engines only (workers/engine/fsdp/transformer_impl.py:162 `_is_lora = lora_rank > 0`, :359-368
  peft's LoraConfig);
- the `lora` mapping (`rank`, `alpha`, `type`, `target_modules`, `merge`, `adapter_path`, ...): read by the
  Megatron engine, which builds Megatron-Bridge's PEFT from it (workers/config/megatron_peft.py:17-35; the
  engine calls it at workers/engine/megatron/transformer_impl.py:433-437). `lora.merge` is read by both engines
  (fsdp/transformer_impl.py:996, megatron/transformer_impl.py:1035).

Megatron LoRA needs Megatron-Bridge: `assert bridge is not None and provider is not None, "LoRA/PEFT only
supported via Megatron-Bridge"` (megatron_peft.py:26); the engine has a provider only when
`megatron.vanilla_mbridge` is False (transformer_impl.py:326-348), and asserts `use_mbridge` in any case (:191).

Whichever block carries it, the trainer treats the run as LoRA: `ref_in_actor = lora.rank > 0 or lora_rank > 0 or
lora_adapter_path is not None` (trainer/ppo/ray_trainer.py:356-360): no reference worker is built, and the
reference log-probs are the actor's with its adapters disabled (ray_trainer.py:1273 `no_lora_adapter`,
workers/engine_workers.py:425 `engine.disable_adapter()`). vLLM is started with LoRA from either block, unless
`lora.merge` (workers/rollout/vllm_rollout/vllm_async_server.py:418-435; validate_config's rank check,
utils/config.py:205-215, reads them the same way).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# model.lora.target_modules in verl's hf_model.yaml: every linear layer under Megatron's fused names (QKV, the
# attention output, the MLP's fused gate+up and its down projection); a MoE's experts' linear_fc1/fc2 included,
# its router not.
MEGATRON_TARGET_MODULES = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")
# The FSDP engines' model.target_modules default (hf_model.yaml): peft's every linear layer.
FSDP_TARGET_MODULES = "all-linear"
# vLLM's allowed max_lora_rank values as verl falls back to them without vLLM's own MaxLoRARanks
# (workers/rollout/vllm_rollout/utils.py:90-94; tests/test_lora_adapter.py reads the literal from verl's source)
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_slots(rank: int) -> int:
    """max_lora_rank verl starts vLLM with for a LoRA rank (get_vllm_max_lora_rank, utils.py:83-102): the rank rounded
    up to vLLM's allowed ranks (ValueError above the largest, as verl)."""
    if rank > VLLM_LORA_RANKS[-1]:
        raise ValueError(f"lora_rank must be less than or equal to {VLLM_LORA_RANKS[-1]}, but got {rank}")
    return next(r for r in VLLM_LORA_RANKS if rank <= r)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def block(model: Mapping[str, Any]) -> Mapping[str, Any]:
    """model.lora (the Megatron block) as a mapping; {} when absent or not a mapping."""
    lora = model.get("lora") if hasattr(model, "get") else None
    return lora if isinstance(lora, Mapping) or hasattr(lora, "get") else {}


def fsdp_rank(model: Mapping[str, Any]) -> int:
    """The rank the FSDP engines train (model.lora_rank)."""
    return _int(model.get("lora_rank"))


def megatron_rank(model: Mapping[str, Any]) -> int:
    """The rank the Megatron engine trains (model.lora.rank)."""
    return _int(block(model).get("rank"))


def engine_rank(model: Mapping[str, Any], *, megatron: bool) -> int:
    """The rank the training engine actually applies: 0 when it trains all weights."""
    return megatron_rank(model) if megatron else fsdp_rank(model)


def trainer_rank(model: Mapping[str, Any]) -> int:
    """The rank verl's trainer sees (ray_trainer.py:357-359): model.lora.rank, else model.lora_rank."""
    return megatron_rank(model) or fsdp_rank(model)


def ref_in_actor(model: Mapping[str, Any]) -> bool:
    """verl computes the reference with the actor's adapters off, and builds no reference worker
    (ray_trainer.py:360)."""
    return trainer_rank(model) > 0 or model.get("lora_adapter_path") is not None


def merged(model: Mapping[str, Any]) -> bool:
    """model.lora.merge: adapters merged into the weights for every sync (no LoRA in the rollout engine)."""
    return bool(block(model).get("merge", False))


def vllm_rank(model: Mapping[str, Any]) -> int:
    """The rank vLLM serves adapters of (vllm_async_server.py:418-425, utils/config.py:205-211): 0 with merge."""
    return 0 if merged(model) else trainer_rank(model)


# A vision-language model's vision tower under LoRA. vLLM serves LoRA on the language model only: it warns "Regarding
# multimodal models, vLLM currently only supports adding LoRA to language model" and ignores the tower's adapters
# (vllm/lora/models.py; v1/worker/lora_model_runner_mixin.py), so the engine samples with a tower the actor no longer
# has. verl's FSDP engine hands target_modules and exclude_modules to peft as they are
# (workers/engine/fsdp/transformer_impl.py:359-368; exclude_modules defaults to null, trainer/config/model/
# hf_model.yaml), and its own vision LoRA example excludes the tower (examples/tuning/lora/run_qwen2_5_vl_7b_fsdp.sh:
# exclude_modules='.*visual.*'). The tower's linear layers per vision family, as transformers 5 names them under
# AutoModelForImageTextToText (tests/test_vlm_lora.py builds each tower on the meta device and compares):
VISION_LINEARS = {
    "qwen2_5_vl": ("model.visual.blocks.0.attn.qkv", "model.visual.blocks.0.attn.proj",
                   "model.visual.blocks.0.mlp.gate_proj", "model.visual.blocks.0.mlp.up_proj",
                   "model.visual.blocks.0.mlp.down_proj", "model.visual.merger.mlp.0", "model.visual.merger.mlp.2"),
    "qwen3_vl": ("model.visual.blocks.0.attn.qkv", "model.visual.blocks.0.attn.proj",
                 "model.visual.blocks.0.mlp.linear_fc1", "model.visual.blocks.0.mlp.linear_fc2",
                 "model.visual.merger.linear_fc1", "model.visual.merger.linear_fc2"),
}
VISION_EXCLUDE = ".*visual.*"  # verl's example's exclude_modules: every module under the tower


def family_in_name(name: str) -> str:
    """The VISION_LINEARS family a model id names when no config says it (Qwen/Qwen3-VL-4B-Instruct: qwen3_vl, any
    size): a family key without its underscores inside the id's last part, lowercased and without punctuation."""
    import re

    tail = re.sub(r"[^a-z0-9]", "", name.rstrip("/").rsplit("/", 1)[-1].lower())
    hits = [f for f in VISION_LINEARS if f.replace("_", "") in tail]
    return max(hits, key=len) if hits else ""


def peft_targets(name: str, target_modules: Any, exclude_modules: Any) -> bool:
    """Whether peft puts an adapter on the linear layer `name`, as its check_target_module_exists decides
    (peft/tuners/tuners_utils.py): exclude_modules first (a string is a full-match regex, a list names modules or
    their last components), then target_modules ("all-linear": every linear layer but the output head; another
    string: a full-match regex; a list: the name or its last components)."""
    import re

    if exclude_modules:
        if isinstance(exclude_modules, str):
            if re.fullmatch(exclude_modules, name):
                return False
        elif name in exclude_modules or any(name.endswith(f".{x}") for x in exclude_modules):
            return False
    if target_modules in (None, ""):
        return False
    if isinstance(target_modules, str):
        return target_modules == FSDP_TARGET_MODULES or re.fullmatch(target_modules, name) is not None
    return name in target_modules or any(name.endswith(f".{t}") for t in target_modules)


def vision_adapters(family: str, target_modules: Any, exclude_modules: Any) -> list[str]:
    """The vision tower's linear layers (VISION_LINEARS) that would get an adapter vLLM ignores."""
    return [n for n in VISION_LINEARS.get(family, ()) if peft_targets(n, target_modules, exclude_modules)]


# The actor's full-finetune learning rate: verl's default actor.optim.lr (trainer/config/actor/actor.yaml:151, both
# engines' actor trees inherit it). verl's LoRA guide asks for an lr an order of magnitude above it
# (docs/advance/ppo_lora.rst:164); every LoRA example of verl 0.9 sets 3e-6 or more
# (examples/tuning/lora/*.sh). tests/test_check_lora_scale.py reads verl's actor.yaml and compares.
FULL_FT_ACTOR_LR = 1e-6


def fsdp_alpha(model: Mapping[str, Any]) -> Any:
    """The alpha the FSDP engines hand to peft's LoraConfig (fsdp/transformer_impl.py:362: model.lora_alpha)."""
    return model.get("lora_alpha")


def megatron_alpha(model: Mapping[str, Any]) -> Any:
    """The alpha Megatron-Bridge's create_peft reads (model.lora.alpha, megatron_peft.py:29; hf_model.yaml:112)."""
    return block(model).get("alpha")
