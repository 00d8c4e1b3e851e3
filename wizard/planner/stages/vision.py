"""Rule stage of vision-language models (VI570-VI573): image tokens within max_prompt_length, image answers or data
on a text model.
"""

from __future__ import annotations

from typing import Optional

from wizard.intent.answers import Answers
from wizard.planner import dataprep, patch_embed
from wizard.planner.shapes import ModelShape
from wizard.planner.state import Build, round_up


TEXT_DATASETS = ("gsm8k", "math")  # built-in datasets without images


VISION_ANSWERS = ("image_key", "images_per_prompt", "image_max_pixels", "freeze_vision_tower")


# verl fails a multimodal prompt longer than rollout.prompt_length instead of truncating it (agent_loop.py:352):
# the image tokens and this many text tokens (question, instruction, chat template) must fit max_prompt_length.
MIN_TEXT_TOKENS = 64


def has_images(a: Answers, shape: Optional[ModelShape]) -> bool:
    """A vision-language model on data that may carry images: every dataset but the text-only built-in ones, and any
    train_files of yours (they replace the dataset)."""
    return bool(shape is not None and shape.vision and (a.dataset not in TEXT_DATASETS or a.train_files is not None))


def image_share(a: Answers, shape: Optional[ModelShape], seq: int) -> float:
    """Share of a sequence's tokens that are image tokens, assuming full-length sequences each holding
    images_per_prompt images of image_max_pixels (the memory plan's assumption; PLAN.md states it)."""
    if not has_images(a, shape) or not seq:
        return 0.0
    assert shape is not None
    return min(1.0, a.images_per_prompt * shape.image_tokens(a.image_max_pixels) / seq)


def vision(b: Build) -> None:
    """A vision-language model: image tokens within max_prompt_length, freeze_vision_tower, image answers on a
    text model, image data on a text model."""
    a, f, shape = b.a, b.f, b.shape
    if shape is None:
        return
    hub = dataprep.HUB.get(a.dataset)
    if not shape.vision:
        if hub is not None and hub.images:
            f.error("VI572", ("dataset", "model"), f"dataset={a.dataset} has images but {a.model} is a text model "
                    "(no vision_config in the catalogue or its config.json)",
                    "choose a vision-language model, e.g. model=Qwen/Qwen2.5-VL-3B-Instruct")
        given = [k for k in VISION_ANSWERS if k in b.given]
        if given:
            f.warning("VI573", tuple(given), f"{', '.join(given)} only apply to a vision-language model; {a.model} is "
                      "a text model, so they are ignored", "remove them, or choose a vision-language model")
        return
    per_image = shape.image_tokens(a.image_max_pixels)
    b.facts["vision"] = {
        "tower_params_b": round(shape.vision_params() / 1e9, 3),
        "tower": f"{shape.vision}: {shape.vision_depth} blocks × hidden {shape.vision_hidden}, MLP {shape.vision_intermediate}",
        "factor": shape.vision_patch * shape.vision_merge,
        "images": has_images(a, shape),
        "image_tokens_per_image": per_image,
        "image_tokens_per_prompt": a.images_per_prompt * per_image,
        "image_share": round(image_share(a, shape, b.seq), 4),
        "act_mb_per_image_token": round(shape.vision_act_bytes_per_token(True) / 1e6, 3),
        # torch 2.9 without cuDNN 9.15: the Conv3d patch embedding's per-channel fill loop (wizard.planner.patch_embed)
        "slow_patch_embed_s_per_image": round(patch_embed.seconds_per_image(
            shape, patch_embed.area_patches(shape, a.image_max_pixels)), 1)
        if patch_embed.has_conv3d_patch_embed(shape) else None,
    }
    need = a.images_per_prompt * per_image + MIN_TEXT_TOKENS
    if has_images(a, shape) and a.max_prompt_length < need:
        most_pixels = max(0, (a.max_prompt_length - MIN_TEXT_TOKENS) // a.images_per_prompt) * (shape.vision_patch * shape.vision_merge) ** 2
        f.error("VI570", ("max_prompt_length", "image_max_pixels", "images_per_prompt"),
                f"max_prompt_length={a.max_prompt_length} cannot hold {a.images_per_prompt} image(s) of "
                f"{per_image} tokens (image_max_pixels={a.image_max_pixels}) and {MIN_TEXT_TOKENS} text tokens: verl "
                "drops such prompts at load time and fails one at rollout (agent_loop.py:352)",
                f"set max_prompt_length={round_up(need, 256)}" + (
                    f", or image_max_pixels={most_pixels}" if most_pixels >= 3136 else ""))
    if a.freeze_vision_tower:
        f.warning("VI571", ("freeze_vision_tower",),
                  "verl 0.9.1 declares actor.freeze_vision_tower (workers/config/actor.py:161) but no FSDP worker reads "
                  "it: the vision tower is trained anyway, and the memory plan counts its gradients and optimizer states",
                  "keep it for a later verl that honours it, or remove it; freezing needs a verl change")
