"""Accelerator facts verl-init assumes: memory per GPU name (`verl-init check --gpu-type`) and, per accelerator
vendor, the names verl 0.9.1, Ray, Kubernetes and Slurm give its devices.

Only the standard library is imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# --gpu-type → memory (GB) where the name pins it down
GPU_MEMORY_GB = {"H100": 80, "H800": 80, "H200": 141, "H20": 96, "B200": 180, "L40S": 48, "L40": 48, "A10": 24,
                 "A10G": 24, "L4": 24, "RTX 4090": 24, "4090": 24, "RTX 3090": 24, "A6000": 48, "RTX A6000": 48,
                 # AMD Instinct (HBM per device as ROCm/amdsmi reports it; an MI250X module shows as two 64 GB GCDs)
                 "MI300X": 192, "MI325X": 256, "MI250X": 64, "MI210": 64,
                 # Huawei Ascend (the NPU chip's HBM)
                 "Ascend910B": 64, "Ascend 910B": 64, "910B": 64}


@dataclass(frozen=True)
class Accelerator:
    """What one accelerator vendor is called by each layer a bundle touches."""

    name: str  # the `accelerator` answer
    label: str
    verl_platform: str  # verl's platform registry name (VERL_PLATFORM), verl/plugin/platform/platform_*.py
    device: str  # trainer.device: verl's platform device_name (ROCm keeps "cuda": platform_rocm.py:25)
    ray_resource: str  # Ray resource a worker bundle asks for (platform_base.py:212 ray_resource_name)
    k8s_resource: str  # the device plugin's extended resource on a Kubernetes node
    slurm_gres: str  # GRES name in `#SBATCH --gres=<name>:<count>`
    visible_devices: str  # the variable that hides devices from a process (platform *.visible_devices_envvar)
    rollout_engines: tuple[str, ...]  # engines with builds verl 0.9.1 drives on this accelerator
    train_backends: tuple[str, ...]  # train_backend answers verl 0.9.1 registers for the device
    gpu_types: tuple[str, ...]  # GPU_MEMORY_GB names of this vendor
    why: str  # the source of rollout_engines / train_backends


ACCELERATORS: dict[str, Accelerator] = {
    "nvidia": Accelerator(
        "nvidia", "NVIDIA GPU", "nvidia", "cuda", "GPU", "nvidia.com/gpu", "gpu", "CUDA_VISIBLE_DEVICES",
        ("vllm", "sglang"), ("fsdp", "fsdp2", "megatron"),
        ("H100", "H800", "H200", "H20", "B200", "L40S", "L40", "A10", "A10G", "L4", "RTX 4090", "4090", "RTX 3090",
         "A6000", "RTX A6000"),
        "verl's default platform (platform_cuda.py)"),
    "amd": Accelerator(
        "amd", "AMD Instinct GPU (ROCm)", "amd", "cuda", "GPU", "amd.com/gpu", "gpu", "HIP_VISIBLE_DEVICES",
        ("vllm", "sglang"), ("fsdp", "fsdp2"),
        ("MI300X", "MI325X", "MI250X", "MI210"),
        "verl 0.9.1's ROCm platform (platform_rocm.py: PlatformCUDA reused, SGLANG_USE_AITER for SGLang's ROCm "
        "build) with vLLM/SGLang ROCm builds and the FSDP engine; verl-init has no record of verl's Megatron "
        "engine on ROCm"),
    "ascend": Accelerator(
        "ascend", "Huawei Ascend NPU", "huawei", "npu", "NPU", "huawei.com/Ascend910", "npu",
        "ASCEND_RT_VISIBLE_DEVICES",
        ("vllm",), ("fsdp", "fsdp2", "megatron"),
        ("Ascend910B", "Ascend 910B", "910B"),
        "verl 0.9.1 on Ascend (platform_npu.py): vLLM through vllm-ascend (vllm_rollout/utils.py:44 sets its "
        "variables), FSDP engines registered for npu (engine/fsdp/transformer_impl.py:1143) and Megatron through "
        "MindSpeed (engine/mindspeed/transformer_impl.py:56); its SGLang server has no NPU path "
        "(sglang_pd_replica.py:97 'PD on NPU not validated')"),
}


def memory_of_gpu_type(gpu_type: str) -> int | None:
    """Memory of one GPU named `gpu_type` (e.g. "NVIDIA H100 80GB HBM3"): the longest known name in it as a
    whole word, case-insensitively; None when no known name is in it."""
    key = _known_name(gpu_type)
    return None if key is None else GPU_MEMORY_GB[key]


def _known_name(gpu_type: str) -> str | None:
    low = gpu_type.lower()
    return next((k for k in sorted(GPU_MEMORY_GB, key=len, reverse=True)
                 if re.search(rf"(?<![a-z0-9]){re.escape(k.lower())}(?![a-z0-9])", low)), None)


def accelerator_of_gpu_type(gpu_type: str) -> str | None:
    """The accelerator answer whose catalogue names `gpu_type` (nvidia/amd/ascend); None when it is not known."""
    key = _known_name(gpu_type)
    if key is None:
        return None
    return next(acc.name for acc in ACCELERATORS.values() if key in acc.gpu_types)
