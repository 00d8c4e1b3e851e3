"""What the planner knows about a model without downloading it.

For now: the size, from `model_params_b` or from the name ("Qwen2.5-7B-Instruct" → 7.0,
"Qwen3-30B-A3B" → 30.0 total). The memory-fit planner replaces this seam with a catalogue of
model shapes and `transformers.AutoConfig` for local folders.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

_MOE = re.compile(r"(?i)(?:^|[-_/ .])(\d+)x(\d+(?:\.\d+)?)b(?=$|[-_ .])")
_SIZE = re.compile(r"(?i)(?:^|[-_/ ])(\d+(?:\.\d+)?)b(?=$|[-_ .])")
_SIZE_M = re.compile(r"(?i)(?:^|[-_/ ])(\d+(?:\.\d+)?)m(?=$|[-_ .])")


@dataclass(frozen=True)
class ModelSize:
    params_b: Optional[float]
    source: str  # "answer", "name" or "unknown"


def model_size(model: str, params_b: Optional[float]) -> ModelSize:
    if params_b is not None:
        return ModelSize(params_b, "answer")
    name = model.rstrip("/").rsplit("/", 1)[-1]
    m = _MOE.search(name)
    if m:
        # Mixtral-style "8x7B": experts share attention, so the total is below n × size.
        return ModelSize(round(int(m.group(1)) * float(m.group(2)) * 0.84, 1), "name")
    m = _SIZE.search(name)
    if m:
        return ModelSize(float(m.group(1)), "name")
    m = _SIZE_M.search(name)
    if m:
        return ModelSize(float(m.group(1)) / 1000.0, "name")
    return ModelSize(None, "unknown")
