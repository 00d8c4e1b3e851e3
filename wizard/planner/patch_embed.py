"""A vision tower's patch embedding on torch 2.9 without a fixed cuDNN: the slow path and what it costs per image.

The Qwen2-VL / Qwen2.5-VL / Qwen3-VL / Qwen3.5 vision towers embed patches with an `nn.Conv3d` whose stride equals
its kernel: a linear projection written as a convolution (transformers' own `PatchEmbeddingsFusionSpec.is_fusable`
recognises it; tests/test_patch_embed.py runs it on each family). verl trains these towers as transformers builds
them: the FSDP engines through `from_pretrained`, the Megatron engine through mbridge, which builds the tower with
the transformers class (`hf_vision_cls._from_config`, mbridge models/qwen3_5/model.py). transformers 5.x swaps in a
linear only when asked (`fusion_config={"patch_embeddings": True}`), and verl does not ask.

torch 2.9 turned cuDNN off for 3-D bf16 convolutions on cuDNN releases before 9.15 (pytorch/pytorch#166643: cuDNN
9.10, the version the torch 2.8-2.10 wheels pin, is slow and memory-hungry there). The convolution then falls back to
aten::slow_conv_dilated3d (pytorch/pytorch#174051, on torch 2.9.1), whose CUDA kernel loops over the batch (here:
every patch of every image) and, for each, fills each output channel with its bias one `fill_` at a time before a
one-column GEMM (aten/src/ATen/native/cuda/NaiveDilatedConvolution.cu, slow_conv_dilated_all_cuda_template). That is
patches × vision hidden size host-launched ops per forward: host-bound, whatever the GPU. The CPU twin of the
kernel runs the same loop, which tests/test_patch_embed.py counts with torch's profiler.

vLLM (its Conv3dLayer, vllm-project/vllm#27418) and SGLang (sgl-project/sglang#19788) run the patch embedding as a
linear layer in their recent releases, so the rollout is not slowed: the training passes are (old log-prob,
reference, update: the tower runs forward in each, trained or frozen).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

# the torch minor whose 3-D bf16 convolutions fall back, and the cuDNN release from which it uses cuDNN again
SLOW_TORCH = (2, 9)
CUDNN_FIXED = (9, 15)
# what torch 2.8.0, 2.9.0, 2.9.1 and 2.10.0's Linux x86-64 wheels require (their PyPI metadata:
# nvidia-cudnn-cu12==9.10.2.21): the cuDNN a pip-installed torch runs with unless another is installed over it
TORCH_WHEEL_CUDNN = "9.10.2.21"
CUDNN_DISTS = ("nvidia-cudnn-cu12", "nvidia-cudnn-cu13")
# host seconds of one op of that loop (select, fill_, kernel launch): QwenLM/Qwen3-VL#1811 measured a Qwen3-VL-2B
# forward at 2.5 s with two 256×256 images and 0.15 s without; the two images are 2 × 256 patches of 16² pixels,
# each filling the tower's 1024 channels (hidden_size of Qwen3-VL-2B's vision_config): 2.35 s / (512 × 1024)
FILL_OP_S = 2.35 / (512 * 1024)
# the vision families (wizard.planner.shapes.ModelShape.vision) whose patch embedding is a stride-equals-kernel Conv3d
CONV3D_FAMILIES = ("qwen2_5_vl", "qwen3_vl")


@dataclass(frozen=True)
class Versions:
    torch: Optional[str]
    cudnn: Optional[str]  # the nvidia-cudnn-* package's version; None when no such package is installed

    @property
    def described(self) -> str:
        cudnn = f"cuDNN {self.cudnn}" if self.cudnn else f"no nvidia-cudnn package (torch's wheel pins {TORCH_WHEEL_CUDNN})"
        return f"torch {self.torch} with {cudnn}"


def _minor(text: Optional[str]) -> Optional[tuple[int, int]]:
    m = re.match(r"\s*(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def installed(versions: dict[str, Optional[str]]) -> Versions:
    """torch's and cuDNN's versions from a {distribution: version} mapping, as `verl-init doctor` reads them from
    package metadata (wizard.env.doctor.package_versions: nothing is imported)."""
    cudnn = next((versions.get(d) for d in CUDNN_DISTS if versions.get(d)), None)
    return Versions(versions.get("torch"), cudnn)


def slow_conv3d(v: Versions) -> Optional[str]:
    """Why this torch runs a stride-equals-kernel Conv3d through aten::slow_conv_dilated3d, or None: a CUDA build of
    torch 2.9 with a cuDNN before 9.15 (or none installed as a package: the wheel's own 9.10)."""
    if _minor(v.torch) != SLOW_TORCH or re.search(r"\+(cpu|rocm)", v.torch or ""):
        return None  # not 2.9, or a build without cuDNN (the CPU's and ROCm's convolutions take other paths)
    cudnn = _minor(v.cudnn or TORCH_WHEEL_CUDNN)
    if cudnn is not None and cudnn >= CUDNN_FIXED:
        return None
    return (f"{v.described}: torch 2.9 gives 3-D bf16 convolutions to cuDNN only from 9.15 on (pytorch/pytorch#166643) "
            "and otherwise runs aten::slow_conv_dilated3d (pytorch/pytorch#174051)")


def has_conv3d_patch_embed(shape: Any) -> bool:
    """The model's vision tower embeds patches with a stride-equals-kernel Conv3d."""
    return getattr(shape, "vision", "") in CONV3D_FAMILIES


def area_patches(shape: Any, pixels: int) -> int:
    """Patches of an image of `pixels` pixels, by its area: the image tokens the planner counts for it
    (ModelShape.image_tokens) times the merge² patches each token holds."""
    return max(shape.image_tokens(pixels) * shape.vision_merge ** 2, 1)


def seconds_per_image(shape: Any, patches: float) -> float:
    """Seconds the slow path adds to every forward pass (log-prob, reference, update) for an image of `patches`
    patches: per patch one fill_ per output channel (the tower's hidden size), then the column copy and the GEMM,
    each a host-launched op."""
    return patches * (shape.vision_hidden + 2) * FILL_OP_S


# the image processors' bounds on one image's pixels, from the models' preprocessor_config.json on the hub (a local
# model folder's own file is read instead): Qwen2.5-VL min_pixels 3136 / max_pixels 12845056; Qwen3-VL and Qwen3.5
# size {shortest_edge: 65536, longest_edge: 16777216}
PIXEL_BOUNDS = {"qwen2_5_vl": (3136, 12845056), "qwen3_vl": (65536, 16777216)}
PROCESSOR_CONFIG_BYTES = 1 << 20  # a preprocessor_config.json larger than this is not read


def pixel_bounds(shape: Any, model_dir: Optional[Path] = None) -> tuple[int, int]:
    """(min, max) pixels the model's image processor resizes an image into: its preprocessor_config.json when the
    model is a local folder (min_pixels/max_pixels, or size.shortest_edge/longest_edge), else the hub's values."""
    from wizard._io import read_user_file, safe_json

    lo, hi = PIXEL_BOUNDS.get(getattr(shape, "vision", ""), PIXEL_BOUNDS["qwen2_5_vl"])
    if model_dir is None or not (model_dir / "preprocessor_config.json").exists():
        return lo, hi
    try:  # bounded: a regular file, its bytes counted while reading, its nesting capped
        cfg = safe_json(read_user_file(str(model_dir / "preprocessor_config.json"), PROCESSOR_CONFIG_BYTES))
        size = cfg.get("size") if isinstance(cfg.get("size"), dict) else {}  # type: ignore[union-attr]
        return (int(cfg.get("min_pixels") or size.get("shortest_edge") or lo),  # type: ignore[union-attr]
                int(cfg.get("max_pixels") or size.get("longest_edge") or hi))  # type: ignore[union-attr]
    except (OSError, ValueError, TypeError, AttributeError):  # UnsafeInput is a ValueError
        return lo, hi


def image_patches(shape: Any, width: int, height: int, bounds: tuple[int, int]) -> int:
    """Patches of one image as the model's image processor makes them: transformers' own smart_resize (sides
    rounded to patch × merge pixels, the area kept within the processor's bounds), one patch per patch² pixels."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    h, w = smart_resize(height, width, factor=shape.vision_patch * shape.vision_merge, min_pixels=bounds[0],
                        max_pixels=bounds[1])
    return (h // shape.vision_patch) * (w // shape.vision_patch)


@dataclass(frozen=True)
class DataImages:
    rows: int  # rows read that have the image column
    sizes: tuple[tuple[int, int], ...]  # (width, height) of each image whose header was read

    @property
    def per_row(self) -> float:
        return len(self.sizes) / self.rows if self.rows else 0.0


def data_images(rows: Iterable[dict], image_key: str, limit: int) -> DataImages:
    """The sizes of the images in the first `limit` rows (those that hold `image_key` are counted): {"bytes": ...}
    entries, read from their headers by PIL (no pixel is decoded); an entry PIL cannot read, or a path, is not."""
    import io

    from PIL import Image

    n, sizes = 0, []
    for i, row in enumerate(rows):
        if i >= limit:
            break
        images = row.get(image_key) if isinstance(row, dict) else None
        if not isinstance(images, (list, tuple)):
            continue
        n += 1
        for entry in images:
            data = entry.get("bytes") if isinstance(entry, dict) else None
            if not isinstance(data, (bytes, bytearray)) or not data:
                continue
            try:
                with Image.open(io.BytesIO(bytes(data))) as im:
                    sizes.append((int(im.width), int(im.height)))
            except Exception:  # noqa: BLE001 - PIL raises many kinds for bad data: validate-dataset reports them
                continue
    return DataImages(n, tuple(sizes))


FIX = ("pip install 'torch>=2.10' (or torch 2.8), or keep torch 2.9 with 'nvidia-cudnn-cu12>=9.15' (verl's own "
       "torch 2.9.1 image pairs it with cuDNN 9.16, docker/README.md)")
