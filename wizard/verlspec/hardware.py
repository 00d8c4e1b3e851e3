"""Accelerator facts verl-init assumes: memory per GPU name (`verl-init check --gpu-type`) and, per accelerator
vendor, the names verl 0.9.1, Ray, Kubernetes and Slurm give its devices.

Only the standard library is imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# --gpu-type → memory (GB) where the name pins it down
GPU_MEMORY_GB = {"H100": 80, "H800": 80, "H200": 141, "H20": 96, "B200": 180, "L40S": 48, "L40": 48, "A10": 24,
                 "A10G": 24, "L4": 24, "RTX 4090": 24, "4090": 24, "RTX 3090": 24, "A6000": 48, "RTX A6000": 48,
                 "L20": 48, "GB200": 186, "B300": 288, "T4": 16,
                 # AMD Instinct (HBM per device as ROCm/amdsmi reports it; an MI250X module shows as two 64 GB GCDs)
                 "MI300X": 192, "MI325X": 256, "MI355X": 288, "MI250X": 64, "MI210": 64,
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
         "A6000", "RTX A6000", "L20", "GB200", "B300", "T4"),
        "verl's default platform (platform_cuda.py)"),
    "amd": Accelerator(
        "amd", "AMD Instinct GPU (ROCm)", "amd", "cuda", "GPU", "amd.com/gpu", "gpu", "HIP_VISIBLE_DEVICES",
        ("vllm", "sglang"), ("fsdp", "fsdp2"),
        ("MI300X", "MI325X", "MI355X", "MI250X", "MI210"),
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


# What each card reports as nvidia-smi's memory.total, in MiB (public nvidia-smi outputs: H100 80GB HBM3 and
# H800 81559, A100/A800-SXM4-80GB 81920, H200 and H200 NVL 143771, H20 97871, L40S and L40 46068); the others
# as their nvidia-smi lists them (B200 183359, RTX 4090 24564, RTX 3090 24576, A10/A10G 23028, L4 23034,
# RTX A6000 49140, A100 40GB 40960). torch can reserve at most this less the CUDA context.
GPU_MIB = {"H100": 81559, "H800": 81559, "H200": 143771, "H20": 97871, "B200": 183359, "L40S": 46068, "L40": 46068,
           "A10": 23028, "A10G": 23028, "L4": 23034, "RTX 4090": 24564, "4090": 24564, "RTX 3090": 24576, "A6000": 49140,
           "RTX A6000": 49140, "T4": 15360,  # Tesla T4: nvidia-smi lists 15360 MiB
           # AMD Instinct as rocm-smi reports VRAM Total (MI300X 206141652992 B = 196592 MiB; MI250X GCD and MI210
           # 68702699520 B = 65520 MiB); MI325X taken as its nominal 256 GiB less 0.5 %, like an unlisted card
           "MI300X": 196592, "MI250X": 65520, "MI210": 65520, "MI325X": 260833,
           # Huawei Ascend 910B: npu-smi lists 65536 MB of HBM per chip
           "Ascend910B": 65536, "Ascend 910B": 65536, "910B": 65536}
# A card's nominal size ("80 GB", as --gpu-memory-gb and gpu_memory_gb are given) → MiB it reports when the GPU
# type is not known. 80 → the H100's 81559 MiB (the A100's 81920 is 0.4 % more). 24 → the RTX 4090's 24564, the
# larger of the 24 GB cards: the A10/A10G/L4 report 23028-23034 (1.5 GiB less), and an unknown type must not turn
# a config that runs on a 24 GB card into a refusal (verl's quickstart, PPO 0.5B on one 24 GB GPU, needs about
# 22.6 GiB). --gpu-type (or the probe) gives the exact card; an A10G is then judged on its 22.5 GiB.
NOMINAL_MIB = {80: 81559, 141: 143771, 96: 97871, 180: 183359, 48: 46068, 24: 24564, 40: 40960}
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
    if key is not None and GPU_MEMORY_GB[key] == int(value) and key in GPU_MIB:
        return GPU_MIB[key] / 1024
    mib = NOMINAL_MIB.get(int(value))
    return mib / 1024 if mib is not None else value * 0.995


def _lower_without_count(gpu_type: str) -> str:
    """`gpu_type` in lower case without a count of cards before or after the name ("8xH100", "8 × A100",
    "H100x8", "MI300X*8"): how reports write a node, not part of the card's name."""
    low = re.sub(r"(?<![a-z0-9])\d{1,3}\s*[x×*]\s*(?=[a-z])", " ", gpu_type.lower())
    return re.sub(r"(?<=[0-9x])\s*[x×*]\s*\d{1,3}(?![a-z0-9])", " ", low)


def _known_type(gpu_type: str) -> str | None:
    """The longest known GPU name in `gpu_type` as a whole word, case-insensitively."""
    low = _lower_without_count(gpu_type)
    return next((k for k in sorted(GPU_MEMORY_GB, key=len, reverse=True)
                 if re.search(rf"(?<![a-z0-9]){_spaced(k)}(?![a-z0-9])", low)), None)


def _spaced(name: str) -> str:
    """A regex for a GPU name, lowercase, whose spaces also match a hyphen, an underscore or nothing."""
    return re.escape(name.lower()).replace(r"\ ", r"[-_ ]?")


def memory_of_gpu_type(gpu_type: str) -> int | None:
    """Memory of one GPU named `gpu_type` (e.g. "NVIDIA H100 80GB HBM3"): the longest known name in it as a
    whole word, case-insensitively; None when no known name is in it."""
    key = _known_type(gpu_type)
    return None if key is None else GPU_MEMORY_GB[key]


def accelerator_of_gpu_type(gpu_type: str) -> str | None:
    """The accelerator answer whose catalogue names `gpu_type` (nvidia/amd/ascend); None when it is not known."""
    key = _known_type(gpu_type)
    if key is None:
        return None
    return next(acc.name for acc in ACCELERATORS.values() if key in acc.gpu_types)


@dataclass(frozen=True)
class Peak:
    """One GPU's vendor-spec peaks: dense bf16 tensor FLOP/s (no sparsity) and HBM bandwidth; and, where the vendor
    measured it, the dense bf16 GEMM rate the card sustains under load (`sustained_tflops`), for cards whose
    datasheet peak assumes a boost clock that dense matrix work does not hold."""

    bf16_tflops: float
    hbm_tb_s: float
    source: str
    sustained_tflops: Optional[float] = None

    @property
    def compute_tflops(self) -> float:
        """The FLOP rate the step-time model divides by: the sustained rate where measured, else the peak."""
        return self.sustained_tflops or self.bf16_tflops


# Dense (not 2:4-sparse) bf16 tensor-core peaks and HBM bandwidth from each vendor's datasheet; the step-time model
# (wizard.planner.steptime) divides FLOPs by the first and bytes read by the second. The SXM/OAM parts: a PCIe or
# NVL card of the same name has lower clocks (H100 PCIe 756 TFLOPS, 2.0 TB/s): pass --gpu-type "H100 PCIe".
GPU_PEAK: dict[str, Peak] = {
    "H100": Peak(989, 3.35, "NVIDIA H100 datasheet (SXM5: 1979 TFLOPS bf16 with sparsity, 3.35 TB/s HBM3)"),
    "H100 PCIe": Peak(756, 2.0, "NVIDIA H100 datasheet (PCIe: 1513 TFLOPS bf16 with sparsity, 2.0 TB/s)"),
    "H800": Peak(989, 3.35, "NVIDIA H800 SXM5 (H100 compute, NVLink cut to 400 GB/s)"),
    "H200": Peak(989, 4.8, "NVIDIA H200 datasheet (SXM: 1979 TFLOPS bf16 with sparsity, 4.8 TB/s HBM3e)"),
    "H20": Peak(148, 4.0, "NVIDIA H20 product brief (148 TFLOPS dense bf16, 4.0 TB/s HBM3)"),
    "B200": Peak(2250, 8.0, "NVIDIA DGX B200 / HGX B200 datasheet (4.5 PFLOPS bf16 with sparsity per GPU, 8 TB/s)"),
    "B300": Peak(2250, 8.0, "NVIDIA HGX B300 datasheet (36 PFLOPS FP16/BF16 with sparsity over 8 GPUs, 8 TB/s each)"),
    "GB200": Peak(2500, 8.0, "NVIDIA GB200 NVL72 datasheet (360 PFLOPS FP16/BF16 with sparsity over 72 GPUs, "
                  "576 TB/s HBM3e over 72)"),
    "A100": Peak(312, 2.0, "NVIDIA A100 datasheet (SXM 80GB: 312 TFLOPS bf16 dense, 2.039 TB/s HBM2e)"),
    "A800": Peak(312, 2.0, "NVIDIA A800 SXM (A100 compute and memory, NVLink cut to 400 GB/s)"),
    "L40S": Peak(362, 0.864, "NVIDIA L40S datasheet (733 TFLOPS bf16 with sparsity, 864 GB/s GDDR6)"),
    "L40": Peak(181, 0.864, "NVIDIA L40 datasheet (362 TFLOPS bf16 with sparsity, 864 GB/s)"),
    "L20": Peak(119.5, 0.864, "NVIDIA L20 product brief (239 TFLOPS FP16/BF16 with sparsity, 864 GB/s GDDR6)"),
    "A10": Peak(125, 0.6, "NVIDIA A10 datasheet (250 TFLOPS bf16 with sparsity, 600 GB/s)"),
    "A10G": Peak(70, 0.6, "AWS G5 A10G (about 70 TFLOPS dense bf16, 600 GB/s)"),
    "L4": Peak(121, 0.3, "NVIDIA L4 datasheet (242 TFLOPS bf16 with sparsity, 300 GB/s)"),
    "RTX 4090": Peak(165, 1.008, "NVIDIA Ada whitepaper (RTX 4090: 165 TFLOPS bf16 dense with fp32 accumulate 82.6; 1008 GB/s)"),
    "RTX 3090": Peak(71, 0.936, "NVIDIA Ampere GA102 whitepaper (RTX 3090: 71 TFLOPS bf16 dense, 936 GB/s)"),
    "A6000": Peak(155, 0.768, "NVIDIA RTX A6000 datasheet (309.7 TFLOPS bf16 with sparsity, 768 GB/s)"),
    # AMD's datasheet peak is at the 2,100 MHz boost clock; under a dense bf16 GEMM the MI300X's clock falls to a
    # median 1,207 MHz and the MI325X's to 1,447 MHz: AMD measured 708 and 843 TFLOPS there, its "Max-Achievable
    # FLOPs" (ROCm blog "Measuring Max-Achievable FLOPs - Part 2", Table 1, ROCm/rocm-blogs
    # blogs/software-tools-optimization/measuring-max-achievable-flops-part2). The step time uses those.
    "MI300X": Peak(1307, 5.3, "AMD Instinct MI300X datasheet (1307.4 TFLOPS dense bf16, 5.3 TB/s); 708 TFLOPS "
                   "sustained under dense bf16 GEMM (AMD's measured Max-Achievable FLOPs, at 1207 MHz)", 708),
    "MI325X": Peak(1307, 6.0, "AMD Instinct MI325X datasheet (1307.4 TFLOPS dense bf16, 6 TB/s); 843 TFLOPS "
                   "sustained under dense bf16 GEMM (AMD's measured Max-Achievable FLOPs, at 1447 MHz)", 843),
    "MI355X": Peak(2517, 8.0, "AMD Instinct MI355X datasheet (2516.6 TFLOPS dense bf16, 8 TB/s HBM3E)"),
    "MI250X": Peak(191, 1.6, "AMD Instinct MI250X datasheet (383 TFLOPS bf16 per module of two GCDs, 3.2 TB/s)"),
    "MI210": Peak(181, 1.6, "AMD Instinct MI210 datasheet (181 TFLOPS bf16, 1.6 TB/s)"),
    "Ascend910B": Peak(313, 1.6, "Huawei Ascend 910B (about 313 TFLOPS fp16, 1.6 TB/s HBM2e; public spec sheets)"),
    "GH200": Peak(989, 4.0, "NVIDIA GH200 datasheet (H100 compute, 4 TB/s HBM3 on the 96 GB part)"),
    # no bf16 below compute capability 8.0: these cards run fp16 (wizard.planner.precision), at their fp16 tensor peak
    "V100": Peak(125, 0.9, "NVIDIA V100 datasheet (SXM2: 125 TFLOPS fp16 tensor, 900 GB/s HBM2; no bf16)"),
    "T4": Peak(65, 0.32, "NVIDIA T4 datasheet (65 TFLOPS fp16 tensor, 320 GB/s GDDR6; no bf16)"),
}
DEFAULT_PEAK_GPU = "H100"  # the step time's assumption when the GPU type is not known (it is named where used)


def peak_of_gpu_type(gpu_type: str | None) -> tuple[str, Peak] | None:
    """(name, peaks) of the longest GPU_PEAK name in `gpu_type` as a whole word, case-insensitively, a space in the name
    matching a hyphen, an underscore or nothing; None when unknown."""
    if not gpu_type:
        return None
    low = _lower_without_count(gpu_type)
    for k in sorted(GPU_PEAK, key=len, reverse=True):
        alias = {"Ascend910B": r"ascend[-_ ]?910b\d?|910b\d?", "RTX 4090": r"(rtx[-_ ]?)?4090",
                 "A6000": r"(rtx[-_ ]?)?a6000"}.get(k)
        pat = alias or _spaced(k)  # "H100 PCIe", "H100-PCIe", "h100_pcie"
        if re.search(rf"(?<![a-z0-9])(?:{pat})(?![a-z0-9])", low):
            return k, GPU_PEAK[k]
    return None


# NVIDIA compute capability by card name, from NVIDIA's list of CUDA GPUs (developer.nvidia.com/cuda-gpus) and each
# architecture's whitepaper: Pascal 6.x, Volta 7.0, Turing 7.5, Ampere 8.0/8.6, Ada 8.9, Hopper 9.0, Blackwell 10.x.
# What depends on it (verl 0.9.1's defaults on a card below 8.0):
# - vLLM refuses a bf16 model: CudaPlatformBase.check_if_supports_dtype (vllm/platforms/cuda.py) raises "Bfloat16 is
#   only supported on GPUs with compute capability of at least 8.0" when the server starts; rollout.dtype is
#   bfloat16 (trainer/config/rollout/rollout.yaml:43) and verl passes it to the server (vllm_async_server.py:326);
# - flash-attn 2 runs only on 8.0 and later (flash-attn's csrc/flash_attn/flash_api.cpp: "FlashAttention only
#   supports Ampere GPUs or newer"), verl's default attention for the FSDP engines (workers/config/model.py:185).
# "Quadro RTX 6000" (Turing, 7.5) is not "RTX 6000 Ada" (8.9) nor "RTX A6000" (8.6): the longest name wins, and a bare
# "RTX 6000" is left unknown.
GPU_COMPUTE_CAPABILITY: dict[str, tuple[int, int]] = {
    "P100": (6, 0), "P40": (6, 1), "P4": (6, 1), "GTX 1080 Ti": (6, 1), "TITAN Xp": (6, 1),
    "V100": (7, 0), "V100S": (7, 0), "TITAN V": (7, 0),
    "T4": (7, 5), "RTX 2080 Ti": (7, 5), "RTX 2080": (7, 5), "TITAN RTX": (7, 5), "Quadro RTX 6000": (7, 5),
    "Quadro RTX 8000": (7, 5),
    "A100": (8, 0), "A800": (8, 0), "A30": (8, 0),
    "A10": (8, 6), "A10G": (8, 6), "A40": (8, 6), "A16": (8, 6), "A2": (8, 6), "RTX 3090": (8, 6), "RTX 3090 Ti": (8, 6),
    "A6000": (8, 6), "RTX A6000": (8, 6), "RTX A5000": (8, 6), "RTX A4000": (8, 6),
    "RTX 3080": (8, 6),
    "L4": (8, 9), "L40": (8, 9), "L40S": (8, 9), "L20": (8, 9), "RTX 4090": (8, 9), "4090": (8, 9), "RTX 6000 Ada": (8, 9),
    "RTX 4080": (8, 9),
    "H100": (9, 0), "H100 PCIe": (9, 0), "H800": (9, 0), "H200": (9, 0), "H20": (9, 0), "GH200": (9, 0),
    "B200": (10, 0), "GB200": (10, 0), "B300": (10, 3),
    "RTX 5090": (12, 0), "RTX 5080": (12, 0), "RTX PRO 6000": (12, 0),
}
BF16_MIN_CAPABILITY = (8, 0)  # vLLM's bf16 check and flash-attn 2 (both above)


def compute_capability_of_gpu_type(gpu_type: str | None) -> tuple[str, tuple[int, int]] | None:
    """(name, (major, minor)) of the longest GPU_COMPUTE_CAPABILITY name in `gpu_type` ("Tesla V100-SXM2-32GB",
    "8xT4") as a whole word, case-insensitively, a space matching a hyphen, an underscore or nothing; None when no
    known name is in it."""
    if not gpu_type:
        return None
    low = _lower_without_count(gpu_type)
    for k in sorted(GPU_COMPUTE_CAPABILITY, key=len, reverse=True):
        if re.search(rf"(?<![a-z0-9]){_spaced(k)}(?![a-z0-9])", low):
            return k, GPU_COMPUTE_CAPABILITY[k]
    return None


def without_bf16(gpu_type: str | None) -> tuple[str, tuple[int, int]] | None:
    """(name, capability) when `gpu_type` is an NVIDIA card below compute capability 8.0 (no bf16 in vLLM, no
    flash-attn 2); else None (a newer card, or one not known)."""
    found = compute_capability_of_gpu_type(gpu_type)
    return found if found is not None and found[1] < BF16_MIN_CAPABILITY else None
