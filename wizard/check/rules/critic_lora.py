"""LoRA on the PPO critic under verl 0.9.1's FSDP engine (VI422; paths under site-packages/verl; the facts are in
wizard/check/data/verl_critic_lora.json, written from verl's source by scripts/verl_critic_lora.py).

- VI422 (error): a run that builds a critic (GAE, or critic.enable=True) with critic.model.lora_rank > 0 and
  critic.strategy fsdp/fsdp2. verl turns LoRA on from lora_rank alone (`self._is_lora = self.model_config.lora_rank
  > 0`, workers/engine/fsdp/transformer_impl.py:162) and wraps whatever model it built with _build_lora_module
  (:598-599) — for the critic that is the value model, loaded as AutoModelForTokenClassification(num_labels=1)
  (:285-300, utils/model.py:641-651) by the value-model engine registered for fsdp/fsdp2 (:1594). _build_lora_module
  gives a fresh adapter `TaskType.CAUSAL_LM` (:359-368; a loaded adapter whose task_type is a string is also forced to
  CAUSAL_LM, :354-356), so peft builds PeftModelForCausalLM, whose __init__ reads the base model's
  prepare_inputs_for_generation; a ...ForTokenClassification model has none under transformers 5 (verl 0.9.1
  requires transformers>=5.5.3), and the critic worker dies with AttributeError while it builds its model, after
  the Ray pools and GPUs are booked. Real cases: verl#4620 (Qwen3-4B PPO with LoRA; fixed then in the legacy
  fsdp_workers.py only, PR#4695 — 0.9.1 runs the engine above) and the verl-based RAGEN#100 (Qwen2.5, lora_rank=64).
  A critic.model.lora_adapter_path folder on this machine whose adapter_config.json declares another task type
  (TOKEN_CLS) is built by PeftModel.from_pretrained with that type and passes. LoRA on the actor alone is fine;
  a Megatron critic's LoRA goes through Megatron-Bridge (VI881) and is not concerned.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts, local_path
from wizard.check.shellargs import PLACEHOLDER

KEY = "critic.model.lora_rank"


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_critic_lora.json").read_text(encoding="utf-8")
    return json.loads(text)


def _adapter_task_type(c: Ctx, path: str) -> str | None:
    """The task_type a LoRA adapter folder on this machine declares ("" when it declares none); None when the folder
    or its adapter_config.json is not here to read."""
    folder = local_path(c, path)
    config = folder / "adapter_config.json" if folder is not None else None
    if config is None or not config.is_file():
        return None
    from wizard._io import UnsafeInput, read_user_file, safe_json

    try:
        data = safe_json(read_user_file(str(config), 1 << 20))  # an adapter_config.json, bounded while reading
    except (OSError, ValueError, UnsafeInput):
        return None
    task = data.get("task_type") if isinstance(data, dict) else None
    return task if isinstance(task, str) else ""


def rule_critic_lora(c: Ctx, f: Facts) -> None:
    t = table()
    strategy = c.v("critic.strategy")
    rank = c.int(KEY)
    if not f.use_critic or strategy not in t["value_model"]["backends"] or rank is None or rank <= 0:
        return
    causal = t["task_type"]
    adapter = c.v("critic.model.lora_adapter_path")
    how = f"verl wraps it with peft TaskType.{causal} ({t['task_type_at']})"
    if isinstance(adapter, str) and adapter and adapter.lower() not in ("null", "none"):
        if PLACEHOLDER in adapter:
            return
        task = _adapter_task_type(c, adapter)
        if task is None or task != causal:
            return  # not here to read, or PeftModel.from_pretrained builds the adapter's own (non-causal) type
        how = f"critic.model.lora_adapter_path={adapter} is a {causal} adapter, so peft builds a causal-LM wrapper"
    c.add("VI422", "error", (KEY, "critic.strategy"),
          f"{KEY}={rank} on critic.strategy={strategy}: the critic is a value model (AutoModelForTokenClassification) "
          f"and {how}, whose PeftModelForCausalLM needs prepare_inputs_for_generation, which token-classification "
          f"models lack: the critic worker raises AttributeError when it builds its model, after the GPUs are booked "
          f"(verl#4620, RAGEN#100)",
          f"set {KEY}=0 (train the critic in full; LoRA on the actor is fine)",
          fix=Fix(set={KEY: 0}))
