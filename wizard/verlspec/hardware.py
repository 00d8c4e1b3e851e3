"""GPU facts verl-init assumes when only a GPU's name is known (`verl-init check --gpu-type`).

Only the standard library is imported.
"""

from __future__ import annotations

import re

# --gpu-type → memory (GB) where the name pins it down
GPU_MEMORY_GB = {"H100": 80, "H800": 80, "H200": 141, "H20": 96, "B200": 180, "L40S": 48, "L40": 48, "A10": 24,
                 "A10G": 24, "L4": 24, "RTX 4090": 24, "4090": 24, "RTX 3090": 24, "A6000": 48, "RTX A6000": 48}


# What each card reports as nvidia-smi's memory.total, in MiB (public nvidia-smi outputs: H100 80GB HBM3 and
# H800 81559, A100/A800-SXM4-80GB 81920, H200 and H200 NVL 143771, H20 97871, L40S and L40 46068); the others
# as their nvidia-smi lists them (B200 183359, RTX 4090 24564, RTX 3090 24576, A10/A10G 23028, L4 23034,
# RTX A6000 49140, A100 40GB 40960). torch can reserve at most this less the CUDA context.
GPU_MIB = {"H100": 81559, "H800": 81559, "H200": 143771, "H20": 97871, "B200": 183359, "L40S": 46068, "L40": 46068,
           "A10": 23028, "A10G": 23028, "L4": 23034, "RTX 4090": 24564, "4090": 24564, "RTX 3090": 24576, "A6000": 49140,
           "RTX A6000": 49140}
# A card's nominal size ("80 GB", as --gpu-memory-gb and gpu_memory_gb are given) → MiB it reports when the GPU
# type is not known; for two cards with the same nominal size the smaller (80 → the H100's 81559 MiB, not the
# A100's 81920; 24 → the A10G's 23028 MiB, not the RTX 4090's 24564).
NOMINAL_MIB = {80: 81559, 141: 143771, 96: 97871, 180: 183359, 48: 46068, 24: 23028, 40: 40960}
GIB = float(1 << 30)


def capacity_gib(gpu_memory_gb: float, gpu_type: str | None = None) -> float:
    """Memory one GPU reports, in GiB (2^30 bytes), from `gpu_memory_gb` as verl-init receives it:
    - a whole number is the card's nominal size ("80 GB"): what a `gpu_type` of that nominal size reports
      (GPU_MIB), else the table above for the usual sizes (H100 "80 GB" = 81559 MiB = 79.6 GiB; H200 "141 GB" =
      140.4 GiB), any other size taken as that many GiB less 0.5 % (the driver keeps 81559 MiB of 81920 on an H100);
    - a fraction is a measured size in GB (1e9 bytes), as the machine probe reads it from NVML (an H100: 85.5).
    """
    value = float(gpu_memory_gb)
    if not value.is_integer():
        return value * 1e9 / GIB
    key = _known_type(gpu_type) if gpu_type else None
    if key is not None and GPU_MEMORY_GB[key] == int(value):
        return GPU_MIB[key] / 1024
    mib = NOMINAL_MIB.get(int(value))
    return mib / 1024 if mib is not None else value * 0.995


def _known_type(gpu_type: str) -> str | None:
    """The longest known GPU name in `gpu_type` as a whole word, case-insensitively."""
    low = gpu_type.lower()
    return next((k for k in sorted(GPU_MEMORY_GB, key=len, reverse=True)
                 if re.search(rf"(?<![a-z0-9]){re.escape(k.lower())}(?![a-z0-9])", low)), None)


def memory_of_gpu_type(gpu_type: str) -> int | None:
    """Memory of one GPU named `gpu_type` (e.g. "NVIDIA H100 80GB HBM3"): the longest known name in it as a
    whole word, case-insensitively; None when no known name is in it."""
    key = _known_type(gpu_type)
    return None if key is None else GPU_MEMORY_GB[key]
