"""VI666 (warning): a Megatron vision-language LoRA run whose unfrozen module never reaches the rollout (verl 0.9.1,
paths under site-packages/verl; the table wizard/check/data/verl_vlm_lora_sync.json is written from verl's source by
scripts/verl_vlm_lora_sync.py).

model.lora.type=vlm_lora (trainer/config/model/hf_model.yaml:103) makes Megatron-Bridge's create_peft, which gets the
whole lora block (workers/config/megatron_peft.py:22-30), build a VLMLoRA. Its freeze_model sets requires_grad=False
only on the modules whose switch is True (freeze_vision_model, freeze_vision_projection, freeze_language_model,
hf_model.yaml:162-164, all True by default), so a switch set False trains that module's own weights in full, next to
the adapters. The Megatron engine's weight sync (workers/engine/megatron/transformer_impl.py:1033-1055) exports the
full weights only while the rollout has no base yet; after that, with lora.merge=False (hf_model.yaml:106, the
default), `adapter_only = base_sync_done and non_merge_lora_sync` (:1036) and only `bridge.export_adapter_weights`
is sent (:1044). The worker marks the base synced after the first sync, or from the start when the rollout loads real
weights (workers/engine_workers.py:673, :787-805, :826). So the rollout keeps the module's starting weights for the
whole run, with no error: responses are sampled from a policy the actor is no longer training, and the actor's
log-probs drift from the rollout's. verl's vLLM server enables LoRA for the language model only
(workers/rollout/vllm_rollout/vllm_async_server.py:417-434; verl PR #6670 asks to add vLLM's tower LoRA switch for this
setting). lora.merge=True syncs the merged full weights every step (:1045-1055), the unfrozen module included.
Skipped: LoRA off (rank 0, megatron_peft.py:23-24), another lora.type (only Megatron-Bridge's VLMLoRA declares
the freeze_* switches), the legacy mbridge (vanilla_mbridge=True exports every weight, :1041-1042), and a model known to
have no vision tower.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

M = "actor_rollout_ref.model"
TABLE = Path(__file__).resolve().parent.parent / "data" / "verl_vlm_lora_sync.json"
PART = {"freeze_vision_model": "vision tower", "freeze_vision_projection": "vision projector",
        "freeze_language_model": "language model"}


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(TABLE.read_text(encoding="utf-8"))


def unfrozen(c: Ctx) -> list[str]:
    """The VLMLoRA freeze_* switches this run sets False (the modules whose own weights train in full)."""
    t = table()
    out = []
    for key, row in t["freeze"].items():
        value = c.v(f"{M}.lora.{key}", row["default"])
        if value is False or (isinstance(value, str) and value.strip().lower() == "false"):
            out.append(key)
    return out


def rule_vlm_lora_sync(c: Ctx, f: Facts, shape: Any) -> None:
    if not f.megatron or c.unknown(f"{M}.lora.rank", f"{M}.lora.type", f"{M}.lora.merge"):
        return
    t = table()
    rank = c.int(f"{M}.lora.rank") or 0
    if rank <= 0 or c.v(f"{M}.lora.type", t["type_default"]) != "vlm_lora":
        return
    if c.v(f"{M}.lora.merge", t["merge_default"]) in (True, "true", "True"):
        return
    if c.v("actor_rollout_ref.actor.megatron.vanilla_mbridge") in (True, "true", "True"):
        return
    if shape is not None and not getattr(shape, "vision", ""):
        return  # a text model: VLMLoRA is for vision-language models
    keys = unfrozen(c)
    if not keys:
        return
    parts = " and ".join(PART.get(k, k) for k in keys)
    flags = ", ".join(f"{M}.lora.{k}=False" for k in keys)
    c.add("VI666", "warning", tuple(f"{M}.lora.{k}" for k in keys) + (f"{M}.lora.merge", f"{M}.lora.type"),
          f"{flags} with lora.type=vlm_lora (rank {rank}) and lora.merge=False on the Megatron engine: VLMLoRA trains "
          f"the weights of the {parts} in full, but after the first weight sync verl sends the rollout only the "
          f"adapters ({t['engine']}:{t['adapter_only_line']}, :{t['export_adapter_line']}), so the rollout keeps the "
          f"starting {parts} for the whole run and samples from a policy the actor is not training",
          f"set {M}.lora.merge=True (merged full weights every sync), or leave "
          f"{', '.join(f'lora.{k}' for k in keys)} at True",
          fix=Fix(set={f"{M}.lora.merge": True}))
