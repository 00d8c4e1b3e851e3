"""GPU facts verl-init assumes when only a GPU's name is known (`verl-init check --gpu-type`).

Only the standard library is imported.
"""

from __future__ import annotations

import re

# --gpu-type → memory (GB) where the name pins it down
GPU_MEMORY_GB = {"H100": 80, "H800": 80, "H200": 141, "H20": 96, "B200": 180, "L40S": 48, "L40": 48, "A10": 24,
                 "A10G": 24, "L4": 24, "RTX 4090": 24, "4090": 24, "RTX 3090": 24, "A6000": 48, "RTX A6000": 48}


def memory_of_gpu_type(gpu_type: str) -> int | None:
    """Memory of one GPU named `gpu_type` (e.g. "NVIDIA H100 80GB HBM3"): the longest known name in it as a
    whole word, case-insensitively; None when no known name is in it."""
    low = gpu_type.lower()
    key = next((k for k in sorted(GPU_MEMORY_GB, key=len, reverse=True)
                if re.search(rf"(?<![a-z0-9]){re.escape(k.lower())}(?![a-z0-9])", low)), None)
    return None if key is None else GPU_MEMORY_GB[key]
