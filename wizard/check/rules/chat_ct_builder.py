"""VI450: the Continuous Token builder verl picks from config.json's model_type lacks a token in the run's tokenizer.

verl 0.9.1 (paths under verl/): every agent loop, the single-turn one included, renders its prompt through a
Continuous Token builder made in AgentLoopBase.__init__ (experimental/agent_loop/agent_loop.py:242-254), one per
trajectory (:680-692). The builder class comes from the root config.json model_type alone, by an exact table
(utils/tokenizer/continuous_token_wiring.py:112-138, create_continuous_token_builder :218-267; the model_type is
read from model.hf_config_path, else model.path, agent_loop.py:510-511 and workers/config/model.py:151-152), and
verl 0.9.1 has no key to choose another. Model-specific builders ask the tokenizer (model.tokenizer_path, else
model.path, model.py:153-161) for their boundary tokens through require_token_id (utils/tokenizer/
continuous_token.py:846-856): Qwen's <|im_end|> (:560), GLM's <|observation|> and <|user|> (:626-627), Gemma 4's
<|tool_response> (:654), MiniMax's and DeepSeek's end tokens (:595, :970). A tokenizer without one of them (a
checkpoint whose architecture and chat format come from different families: a glm4_moe model with a ChatML
tokenizer, verl PR#7640; a qwen2-architecture model with its own vocabulary; a tokenizer_path from another
family) makes the constructor raise 'Tokenizer does not define required token' in every rollout worker, after the
GPUs are booked (error). A tokenizer with an unk token answers
the unk id instead, and the builder splits turns at a token the model never writes (warning).

Derived, not tabulated: verl's own create_continuous_token_builder is called here, on CPU, with the run's tokenizer
(custom_chat_template applied as verl applies it, model.py:173-177), its model_type and
data.apply_chat_template_kwargs; the tokens the builder asks for are recorded by wrapping verl's require_token_id
for the duration of the call and looked up in the tokenizer's vocabulary; only a missing token is reported (the
Qwen builder's other refusal, "\\n" not one token, :555-559, befalls only toy word-level tokenizers). Only for a
local (or cached) text model whose tokenizer is on this machine, with verl installed; a model with a multimodal
processor (preprocessor_config.json and the like) is left alone: verl then picks a VL builder with the processor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wizard.check.rules.context import M, Ctx, Facts, folder_json, model_folder
from wizard.check.shellargs import PLACEHOLDER

KWARGS = "data.apply_chat_template_kwargs"
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json", "video_preprocessor_config.json")


def _model_type(c: Ctx) -> tuple[str, str] | None:
    """(key, root config.json model_type) from model.hf_config_path, else model.path, when it is on this machine."""
    key = f"{M}.hf_config_path" if c.v(f"{M}.hf_config_path") else f"{M}.path"
    path = c.v(key)
    if not isinstance(path, str) or not path or PLACEHOLDER in path or c.unknown(key):
        return None
    doc = folder_json(model_folder(c, path), "config.json")
    model_type = doc.get("model_type") if doc is not None else None
    return (key, model_type) if isinstance(model_type, str) else None


def _tokenizer(c: Ctx) -> tuple[str, Any] | None:
    """(key, tokenizer verl builds) when the tokenizer folder is on this machine and holds no multimodal processor."""
    from wizard.planner import overlong

    key = f"{M}.tokenizer_path" if c.v(f"{M}.tokenizer_path") else f"{M}.path"
    path = c.v(key)
    if not isinstance(path, str) or not path or PLACEHOLDER in path or c.unknown(key, f"{M}.custom_chat_template"):
        return None
    local = model_folder(c, path)
    folder = overlong.local_tokenizer(str(local)) if local is not None else None
    if folder is None or any((Path(folder) / name).is_file() for name in PROCESSOR_FILES):
        return None
    tok = overlong.load_tokenizer(folder)[0]
    template = c.v(f"{M}.custom_chat_template")
    if tok is not None and isinstance(template, str) and template:
        import copy

        tok = copy.copy(tok)  # load_tokenizer's copy is shared (cached per folder)
        tok.chat_template = template
    return (key, tok) if tok is not None else None


def build_with_verl(tok: Any, model_type: str, kwargs: dict) -> tuple[str, str, list[str]]:
    """verl's own builder for (tokenizer, model_type): (builder class, error or "", tokens it asked for)."""
    from verl.utils.tokenizer import continuous_token, continuous_token_wiring

    asked: list[str] = []
    original = continuous_token.require_token_id

    def recording(tokenizer: Any, token: str) -> int:
        asked.append(token)
        return original(tokenizer, token)

    family = continuous_token_wiring.resolve_continuous_token_model_family("auto", hf_model_type=model_type)
    name = continuous_token_wiring.get_continuous_token_builder_class(family).__name__
    continuous_token.require_token_id = recording
    try:
        continuous_token_wiring.create_continuous_token_builder(tok, hf_model_type=model_type,
                                                                chat_template_kwargs=kwargs)
        error = ""
    except Exception as exc:  # noqa: BLE001 - what verl's rollout workers would raise is the finding
        error = f"{type(exc).__name__}: {exc}"
    finally:
        continuous_token.require_token_id = original
    return name, error, asked


def rule_ct_builder(c: Ctx, f: Facts) -> None:
    import importlib.util

    if c.unknown(KWARGS) or importlib.util.find_spec("verl") is None:
        return
    found_type = _model_type(c)
    found_tok = _tokenizer(c) if found_type is not None else None
    if found_tok is None:
        return
    (type_key, model_type), (tok_key, tok) = found_type, found_tok
    kwargs = c.v(KWARGS) if isinstance(c.v(KWARGS), dict) else {}
    try:
        name, error, asked = build_with_verl(tok, model_type, dict(kwargs))
    except Exception:  # noqa: BLE001 - verl's builder module does not load here: nothing to compare with
        return
    vocab = tok.get_vocab()
    missing = [t for t in dict.fromkeys(asked) if t not in vocab]
    where = (f"config.json model_type {model_type!r} ({c.v(type_key)}) makes verl 0.9.1 build {name} for every "
             "agent loop (continuous_token_wiring.py:112-138, agent_loop.py:242-254)")
    fix = (f"set {M}.tokenizer_path to the tokenizer of this checkpoint's own chat format (the one it was trained "
           "with), or train a checkpoint whose config.json model_type matches its tokenizer's family: verl 0.9.1 has "
           "no key to choose the builder")
    keys = tuple(dict.fromkeys((type_key, tok_key)))
    if error and missing:
        c.add("VI450", "error", keys,
              f"{where}, which needs {', '.join(map(repr, missing))}, absent from the tokenizer of {c.v(tok_key)}: "
              f"verl's constructor raises ({error[:120]}) in every rollout worker, after the GPUs are booked", fix)
    elif missing:
        c.add("VI450", "warning", keys,
              f"{where}, which splits turns at {', '.join(map(repr, missing))}; the tokenizer of {c.v(tok_key)} has no "
              f"such token and gives its unk id instead (continuous_token.py:846-856): the builder never sees the "
              "model's real turn end", fix)
