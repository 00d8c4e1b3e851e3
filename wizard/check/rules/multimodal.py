"""Vision-language RL data settings of verl 0.9.1 (paths under site-packages/verl).

- VI798 (warning): data.image_patch_size differs from the model's vision patch (config.json vision_config.patch_size,
  which its image processor's patch_size is: Qwen2/2.5-VL 14, Qwen3-VL and Qwen3.5 16) with
  data.filter_overlong_prompts on. verl's YAML sets 14 (trainer/config/data/legacy_data.yaml:77), and RLHFDataset
  keeps any set value: `config.get("image_patch_size") or <processor's patch_size>` (utils/dataset/rl_dataset.py:112-114),
  so its fallback to the processor applies only when the key is null. The overlong filter resizes each image on
  that grid (qwen_vl_utils' process_vision_info, rl_dataset.py:216-219, :488-496) before counting the prompt's
  tokens, while the agent loop resizes with the processor's own patch_size (experimental/agent_loop/agent_loop.py:
  299-307). The two counts differ, so the filter keeps prompts the rollout finds too long, which then stop the run
  (agent_loop.py:352-361), and drops prompts that fit. The PPO dataset reads the key only in that filter.
- VI799 (warning): a vision-language run (a model with a vision tower, or data.image_key/data.video_key set) with
  data.filter_overlong_prompts off (verl's default, legacy_data.yaml:83). Nothing then refuses an image prompt
  longer than rollout.prompt_length (= data.max_prompt_length, rollout/rollout.yaml:35): the agent loop
  left-truncates text prompts (agent_loop.py:437-445) but raises ValueError for one with images, videos or audio
  (agent_loop.py:352-361), mid-training. RLHFDataset stores data.truncation (rl_dataset.py:118) and nothing reads
  it, so truncation='left' does not help.
- VI920 (error): data.mm_processor_kwargs non-empty with rollout.name=sglang. The agent loop reads it
  (agent_loop.py:243, :512) and passes it to every generate call (single_turn_agent_loop.py:48, :78); the LLM
  server client forwards a non-empty one as a keyword (workers/rollout/llm_server.py:135-136, :150-158) to
  SGLangHttpServer.generate, whose signature has no mm_processor_kwargs and no **kwargs
  (workers/rollout/sglang_rollout/async_sglang_server.py:546-555): TypeError at the first rollout request.
  vLLM's and TensorRT-LLM's servers take it (vllm_async_server.py:566, trtllm_async_server.py:326).
"""

from __future__ import annotations

from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import R, Ctx, Facts

PATCH = "data.image_patch_size"
FILTER = "data.filter_overlong_prompts"
MM_KWARGS = "data.mm_processor_kwargs"


def _vision_patch(shape: Any) -> int | None:
    if shape is None or not getattr(shape, "vision", ""):
        return None
    patch = getattr(shape, "vision_patch", None)
    return patch if isinstance(patch, int) and patch > 0 else None


def rule_image_patch(c: Ctx, f: Facts, shape: Any) -> None:
    patch = _vision_patch(shape)
    value = c.v(PATCH)
    if patch is None or c.v(FILTER) is not True or c.unknown(PATCH) or isinstance(value, bool):
        return
    if not isinstance(value, int) or value <= 0 or value == patch:
        return  # null/0: RLHFDataset falls back to the processor's own patch_size (rl_dataset.py:113-114)
    given = "set" if c.set_by_user(PATCH) else "left at verl's default (legacy_data.yaml:77)"
    c.add("VI798", "warning", (PATCH, FILTER, "actor_rollout_ref.model.path"),
          f"{PATCH}={value} ({given}) but {shape.name}'s vision patch is {patch}: verl's overlong filter resizes images "
          f"on a {2 * value}-pixel grid (rl_dataset.py:114, :216-219) while the rollout resizes them on the processor's "
          f"{2 * patch}-pixel grid (agent_loop.py:299-307), so the filter's token counts are wrong: it keeps image "
          "prompts the rollout finds longer than rollout.prompt_length, which stop the run (agent_loop.py:352-361), "
          "and drops prompts that fit",
          f"set {PATCH}={patch} (or null, for the processor's own patch size)",
          fix=Fix(set={PATCH: patch}))


def _multimodal(c: Ctx, shape: Any) -> str | None:
    """What makes this a run with images: the model's vision tower, or an image/video column the user named."""
    if shape is not None and getattr(shape, "vision", ""):
        return f"{shape.name} is a vision-language model"
    for key in ("data.image_key", "data.video_key"):
        if c.set_by_user(key) and isinstance(c.v(key), str) and c.v(key):
            return f"{key}={c.v(key)} is set"
    return None


def rule_vlm_overlong(c: Ctx, f: Facts, shape: Any) -> None:
    if c.unknown(FILTER) or c.v(FILTER) is not False:
        return
    if any(fd.problem.rule == "VI867" for fd in c.findings):
        return  # the prompts were counted and some found too long: VI867 says it with the count
    why = _multimodal(c, shape)
    if why is None:
        return
    limit = c.v("data.max_prompt_length")
    trunc = c.v("data.truncation")
    c.add("VI799", "warning", (FILTER, "data.max_prompt_length", "data.truncation"),
          f"{why} and {FILTER} is off{' (verl default)' if not c.set_by_user(FILTER) else ''}: nothing drops an image "
          f"prompt longer than rollout.prompt_length (= data.max_prompt_length={limit}), and verl 0.9.1's agent loop "
          "raises ValueError on the first one ('Multimodal prompt produced N tokens, exceeding rollout.prompt_length', "
          "agent_loop.py:352-361) mid-training; it cuts only text prompts (agent_loop.py:437-445). "
          f"data.truncation={trunc!r} does not help: RLHFDataset stores it and nothing reads it (rl_dataset.py:118)",
          f"set {FILTER}=True to drop over-long prompts at start-up (verl's vision-language examples do), or raise "
          "data.max_prompt_length / cap the image size",
          fix=Fix(set={FILTER: True}))


def mm_processor_kwargs(c: Ctx) -> dict[str, Any]:
    """The user's data.mm_processor_kwargs as the flat config holds it (its leaves)."""
    prefix = MM_KWARGS + "."
    return {k[len(prefix):]: c.v(k) for k in sorted(c.res.flat) if k.startswith(prefix)}


def rule_sglang_mm_kwargs(c: Ctx, f: Facts) -> None:
    if c.v(f"{R}.name") != "sglang" or c.unknown(f"{R}.name"):
        return
    given = mm_processor_kwargs(c)
    if not given:
        return
    shown = ", ".join(f"{k}={v}" for k, v in given.items())
    c.add("VI920", "error", (MM_KWARGS, f"{R}.name"),
          f"{MM_KWARGS} ({shown}) with {R}.name=sglang: verl 0.9.1's LLM server client forwards a non-empty "
          "mm_processor_kwargs to the rollout server's generate() (workers/rollout/llm_server.py:135-136, :150-158), "
          "and SGLangHttpServer.generate takes no such argument and no **kwargs "
          "(sglang_rollout/async_sglang_server.py:546-555): TypeError at the first rollout request",
          f"remove {MM_KWARGS} and cap image sizes in the data (or in the model's preprocessor_config.json, which "
          f"SGLang reads), or use {R}.name=vllm, whose server takes it (vllm_async_server.py:566)")
