"""Shared answer sets for tests."""

from __future__ import annotations

from typing import Any

# A small valid plan on one 8-GPU node; tests change one thing at a time.
BASE: dict[str, Any] = {
    "nnodes": 1,
    "gpus_per_node": 8,
    "gpu_memory_gb": 80,
    "algorithm": "grpo",
    "model": "Qwen/Qwen2.5-1.5B-Instruct",
    "prompts_per_step": 64,
    "samples_per_prompt": 4,
    "updates_per_step": 2,
}


def answers(**changes: Any):
    from wizard.intent.answers import make_answers

    data = dict(BASE)
    data.update(changes)
    return make_answers(data)
