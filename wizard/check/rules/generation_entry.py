"""verl 0.9.1's offline generation entry point, `python -m verl.trainer.main_generation_server` (paths under
site-packages/verl). It composes main_ppo's tree (trainer/main_generation_server.py:122), starts standalone rollout
servers (start_server, :40-63: one replica per tensor-parallel group, each `init_standalone()`: no trainer, no actor,
no weight sync ever) and posts each prompt of data.prompt_key to their OpenAI chat endpoint (:82-103).

- VI699 (error, `--fix`): actor_rollout_ref.rollout.load_format is a `dummy*` format, verl's default (`dummy`,
  trainer/config/rollout/rollout.yaml:100; RolloutConfig.load_format, workers/config/rollout.py:249). In training the
  rollout engine starts with random weights because the trainer syncs the real ones before the first rollout (verl
  itself keys on `"dummy" in load_format`, workers/engine_workers.py:673). A standalone server is never synced: the
  vLLM and SGLang servers hand the format to the engine as given (workers/rollout/vllm_rollout/
  vllm_async_server.py:327, sglang_rollout/async_sglang_server.py:326), so every response comes from a randomly
  initialised model, with no error, and data.output_path is filled with noise. verl's own example says so and sets
  load_format=auto (examples/generation/run_deepseek_llm_7b.sh, PR #6126); the e2e script of PR #3732
  (tests/special_e2e/generation/run_gen_qwen05_server.sh) set none.
- VI738 (error when a local data row holds images/videos; warning for a vision-language model or a media key named
  with no rows read): main_generation_server reads only data.prompt_key (:157-159) and posts
  {model, messages, temperature, top_p, max_tokens} (:91-97, :135-140); data.image_key / data.video_key are never
  read, so the model answers every prompt without its images or videos (verl#2573: main_generation on a Qwen2.5-VL
  model, "verl's inference scripts don't support multimodality").
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import M, R, Ctx, Facts, model_shape

LF = f"{R}.load_format"
FIX_FORMAT = "auto"  # the format verl's own generation example sets (examples/generation/run_deepseek_llm_7b.sh)
MEDIA_KEYS = ("data.image_key", "data.video_key")


def _generation(c: Ctx) -> bool:
    return getattr(c.src, "entry", "ppo") == "generation"


def rule_generation_dummy_weights(c: Ctx, f: Facts) -> None:
    if not _generation(c) or c.unknown(LF):
        return
    fmt = c.v(LF)
    if not isinstance(fmt, str) or "dummy" not in fmt:
        return
    c.add("VI699", "error", (LF,),
          f"{LF}={fmt} in a generation-only run (verl.trainer.main_generation_server): the standalone rollout "
          "servers start with random weights and no trainer ever syncs the real ones (main_generation_server.py:"
          "40-56, init_standalone; vllm_async_server.py:327 passes the format as is): every response is noise, "
          "with no error",
          f"set {LF}={FIX_FORMAT} so the server loads {M}.path's weights (verl's examples/generation script does)",
          fix=Fix(set={LF: FIX_FORMAT}))


def rule_generation_media(c: Ctx, f: Facts) -> None:
    if not _generation(c):
        return
    from wizard.check.rules.vlm_processor import media_row

    prompt = c.v("data.prompt_key", "prompt")
    media = media_row(c, ("image", "video"))
    if media is not None:
        path, row, kind, col = media
        c.add("VI738", "error", (f"data.{kind}_key", "data.prompt_key"),
              f"{path} row {row} holds {kind}s (data.{kind}_key={col}) but main_generation_server sends only the "
              f"data.prompt_key={prompt} messages to the chat server (main_generation_server.py:157-159, :91-97): "
              f"the {kind}s never reach the model, which answers without them",
              "generate multimodal rows elsewhere (vLLM's OpenAI server with image_url content parts, or verl's "
              "validation loop: trainer.val_only=True); main_generation_server is text-only")
        return
    named = [k for k in MEDIA_KEYS if c.set_by_user(k) and isinstance(c.v(k), str) and c.v(k)]
    shape, _ = model_shape(c, f"{M}.path")
    vision = shape is not None and bool(getattr(shape, "vision", ""))
    if not named and not vision:
        return
    why = (f"{named[0]}={c.v(named[0])} is set" if named else f"{M}.path={c.v(f'{M}.path')} is a vision-language model")
    c.add("VI738", "warning", (*named, f"{M}.path") if named else (f"{M}.path",),
          f"{why}, but main_generation_server sends only the data.prompt_key={prompt} messages "
          "(main_generation_server.py:157-159, :91-97): data.image_key / data.video_key are never read, so any "
          "images or videos in the rows do not reach the model",
          "for image/video prompts generate with vLLM's OpenAI server (image_url content parts) or verl's validation "
          "loop (trainer.val_only=True); for text-only prompts this is fine")
