"""What verl sends a discriminative reward model, against what that model accepts (VI675, VI676).

verl 0.9.1 (paths under verl/):
- With reward.reward_model.enable and no reward.custom_reward_function.path, the reward loop scores every sample with
  the reward model as a classifier (experimental/reward_loop/reward_loop.py:145-155, compute_score_disrm). Its input
  is built by `_preprocess_reward_inputs` (:197-229): the data row's prompt messages as they are (`raw_prompt`,
  utils/dataset/rl_dataset.py:389, never cut to data.max_prompt_length), one assistant message holding the whole
  decoded response (up to data.max_response_length tokens), rendered by the reward model's own tokenizer
  (loaded from reward.reward_model.model_path, reward_loop.py:127-129) with `apply_chat_template(chat,
  add_generation_prompt=False, tokenize=False)` (:216-220). The text goes, uncut, to vLLM's /classify or SGLang's
  /v1/embeddings (:231-249); an HTTP 4xx answer is raised at once, without retry (:165-172), and ends the run.
- VI675: the reward model's server gets reward.reward_model.rollout.max_model_len, or, unset, the checkpoint's
  max_position_embeddings (workers/rollout/vllm_rollout/vllm_async_server.py:1101-1105, handed to vLLM at :332;
  workers/rollout/utils.py:31-40 reads it, text_config's for a multimodal config). SGLang's server derives the same
  value (workers/rollout/sglang_rollout/async_sglang_server.py:166-168) but does not hand it to SGLang, whose own
  context is the checkpoint's: only max_position_embeddings counts there. A prompt + response longer than that
  context draws vLLM's 400 ("longer than the maximum model length") at the first long sample, after the GPUs are
  booked. error: the context is no longer than data.max_response_length (one response at its cap fills it);
  warning: shorter than data.max_prompt_length + data.max_response_length (the policy's tokens; the reward model's
  tokenizer counts its own, so near the cap this is an estimate).
- VI676: a reward-model tokenizer with no chat template (transformers' apply_chat_template raises ValueError), or one
  whose template refuses the conversation verl builds from the training data (a `raise_exception` in the Jinja,
  e.g. a template that takes exactly one user and one assistant message, given a row with a system message: verl#2283)
  fails inside the reward loop worker at the first reward. Checked by rendering the reward model's template with
  transformers' own sandboxed renderer (chat_template_utils.render_jinja_template, as apply_chat_template does) on
  the first rows of the local data files, each row's prompt plus one assistant message; only when the folder is on
  this machine (a local folder or the Hugging Face cache).
A custom reward function builds its own judge prompt (a generative reward model): neither rule judges it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wizard.check.rules.context import Ctx, Facts, local_data_files, model_folder, model_shape
from wizard.check.shellargs import PLACEHOLDER

RM = "reward.reward_model"
FN = "reward.custom_reward_function"
ENGINES = ("vllm", "sglang")  # the engines compute_score_disrm posts to (reward_loop.py:233-249)
SAMPLE_ROWS = 64  # rows rendered per data file
RESPONSE = "The answer is 4."  # the assistant message's text: the template's verdict does not depend on it


def _scored_by_classifier(c: Ctx) -> bool:
    """Whether verl scores every sample with the reward model as a classifier (reward_loop.py:145-155)."""
    keys = (f"{RM}.enable", f"{RM}.model_path", f"{RM}.rollout.name", f"{FN}.path")
    if c.unknown(*keys) or not c.v(f"{RM}.enable") or c.v(f"{FN}.path"):
        return False
    path = c.v(f"{RM}.model_path")
    return c.v(f"{RM}.rollout.name") in ENGINES and isinstance(path, str) and bool(path) and PLACEHOLDER not in path


def rule_reward_inputs(c: Ctx, f: Facts) -> None:
    if not _scored_by_classifier(c):
        return
    _rule_context(c)
    _rule_template(c)


def _rule_context(c: Ctx) -> None:
    """VI675 (the module's docstring has verl's side)."""
    prompt, response = c.int("data.max_prompt_length"), c.int("data.max_response_length")
    if not prompt or not response or c.unknown("data.max_prompt_length", "data.max_response_length",
                                                f"{RM}.rollout.max_model_len"):
        return
    shape, _ = model_shape(c, f"{RM}.model_path")
    max_pos = shape.max_pos if shape is not None and shape.source in ("catalogue", "local") else None
    mml = c.int(f"{RM}.rollout.max_model_len") if c.v(f"{RM}.rollout.name") == "vllm" else None
    if mml and (not max_pos or mml <= max_pos):  # above max_position_embeddings verl raises itself (:1107-1111)
        context, key, what = mml, f"{RM}.rollout.max_model_len", f"{RM}.rollout.max_model_len={mml}"
    elif max_pos:
        context, key = max_pos, f"{RM}.model_path"
        what = f"the reward model's context, max_position_embeddings={max_pos} of {c.v(f'{RM}.model_path')}"
    else:
        return
    seq = prompt + response
    if context >= seq:
        return
    severe = context <= response
    hint = (f"raise {RM}.rollout.max_model_len to ≥ {seq} (or null: the checkpoint's context)" if key.endswith("len")
            and (not max_pos or max_pos >= seq) else
            f"use a reward model with a context of ≥ {seq} tokens, or lower data.max_prompt_length + "
            f"data.max_response_length to ≤ {context}")
    limit = ("no more than data.max_response_length" if severe else
             "shorter than data.max_prompt_length + data.max_response_length")
    c.add("VI675", "error" if severe else "warning", (key, "data.max_prompt_length", "data.max_response_length"),
          f"{what} is {limit} = {response if severe else seq} tokens: verl sends the reward model each whole "
          "prompt plus its whole response, uncut (reward_loop.py:197-241), and the server's 400 for a longer one is "
          "raised without retry (:165-172), ending the run at the first "
          f"{'response at its length cap' if severe else 'sample that long'}", hint)


def _special_tokens(folder: Path) -> dict[str, str]:
    """The special tokens apply_chat_template hands the template (bos_token, eos_token, ...), from
    tokenizer_config.json; {} when unreadable."""
    from wizard._io import UnsafeInput, read_user_file, safe_json

    try:
        doc = safe_json(read_user_file(str(folder / "tokenizer_config.json"), 4 << 20))
    except (OSError, ValueError, UnsafeInput):
        return {}
    out: dict[str, str] = {}
    for name in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"):
        value = doc.get(name) if isinstance(doc, dict) else None
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            out[name] = value
    return out


def _data_files(c: Ctx) -> list[tuple[str, Path]]:
    return [(key, local) for key, _, local in local_data_files(c, (".parquet", ".jsonl"))]


def refused(template: str, prompts: list[Any], tokens: dict[str, str]) -> tuple[int, str] | None:
    """(row index, the template's message) for the first prompt (a list of messages) the template refuses once an
    assistant message follows it, rendered as verl's reward loop renders it; None when every one renders."""
    from jinja2.exceptions import TemplateError
    from transformers.utils.chat_template_utils import render_jinja_template

    for i, messages in enumerate(prompts):
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            continue
        chat = [*messages, {"role": "assistant", "content": RESPONSE}]
        try:
            render_jinja_template(conversations=[chat], chat_template=template, add_generation_prompt=False, **tokens)
        except TemplateError as exc:
            return i, str(exc)
    return None


def _rule_template(c: Ctx) -> None:
    """VI676 (the module's docstring has verl's side)."""
    from wizard._chat_templates import folder_templates
    from wizard.check.rules.datacontent import file_rows

    path = str(c.v(f"{RM}.model_path"))
    folder = model_folder(c, path)
    templates = folder_templates(folder, processor=False) if folder is not None else None
    if templates is None or not (folder / "tokenizer_config.json").is_file():
        return  # not on this machine, unreadable, or no tokenizer here at all: not judged
    keys = (f"{RM}.model_path", f"{FN}.path")
    if not templates:
        c.add("VI676", "error", keys,
              f"{RM}.model_path={path} has no chat template (neither chat_template.jinja nor one in "
              "tokenizer_config.json), and verl renders every sample for the reward model with it "
              "(reward_model_tokenizer.apply_chat_template, reward_loop.py:216-220): transformers raises ValueError "
              "at the first reward, after the GPUs are booked",
              f"add the chat template the reward model was trained with to {path} (chat_template.jinja), or score "
              f"with a reward function of your own ({FN}.path) that formats its input")
        return
    template = templates[0]
    prompt_key = c.v("data.prompt_key") if isinstance(c.v("data.prompt_key"), str) else "prompt"
    tokens = _special_tokens(folder)
    for files_key, data in _data_files(c):
        prompts = []
        try:
            for row in file_rows(data):
                prompts.append(row.get(prompt_key))
                if len(prompts) >= SAMPLE_ROWS:
                    break
        except Exception:  # noqa: BLE001 - an unreadable file: the data rules say why
            continue
        hit = refused(template, prompts, tokens)
        if hit is None:
            continue
        row, message = hit
        roles = [m.get("role") for m in prompts[row]] + ["assistant"]
        c.add("VI676", "error", (*keys, files_key),
              f"{RM}.model_path={path}'s chat template refuses the conversation verl builds for it from row {row} of "
              f"{data.name} (roles {roles}: the row's prompt plus the response, reward_loop.py:197-220): "
              f"\"{message[:160]}\"; verl renders it inside the reward loop worker, so the first such sample stops "
              "the run after the GPUs are booked (verl#2283)",
              f"make the data's prompts fit the template (e.g. drop the system message), give {path} a template that "
              f"takes them, or score with a reward function of your own ({FN}.path) that builds the model's input")
        return
