"""verl's published minimum recipes (tests/data/reference/verl-min-resources.json) as answer sets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import ROOT

REFERENCE = ROOT / "tests" / "data" / "reference" / "verl-min-resources.json"


def rows() -> list[dict[str, Any]]:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))["rows"]  # missing file: the tests fail, never skip


def _override(row: dict[str, Any], key: str) -> Any:
    for item in row.get("recipe_overrides") or []:
        k, _, v = item.partition("=")
        if k.lstrip("+") == key:
            return v
    return None


def answers_for(row: dict[str, Any]) -> dict[str, Any]:
    gpus = int(row["gpus"])
    gpn = min(gpus, 8)
    out: dict[str, Any] = {
        "model": row["model"],
        "nnodes": gpus // gpn,
        "gpus_per_node": gpn,
        "gpu_memory_gb": row["gpu_memory_gb"],
        "gpu_type": row["gpu"],
        "cluster": "local" if gpus <= 8 else "ray",
        "algorithm": "grpo",
        "train_backend": row["train_backend"],
        "lora_rank": 32 if "LoRA" in row["task"] else 0,
        "max_prompt_length": int(_override(row, "data.max_prompt_length") or 512),
        "max_response_length": int(_override(row, "data.max_response_length") or 1024),
        "samples_per_prompt": max(2, int(_override(row, "actor_rollout_ref.rollout.n") or 5)),
    }
    tbs = int(_override(row, "data.train_batch_size") or 16 * gpus)
    mini = int(_override(row, "actor_rollout_ref.actor.ppo_mini_batch_size") or tbs)
    out["prompts_per_step"] = tbs
    out["updates_per_step"] = max(1, tbs // mini) if tbs % mini == 0 else 1
    if row["train_backend"] == "megatron":
        out["dynamic_batch"] = False
    return out
