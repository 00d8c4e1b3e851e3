"""Whether a model reasons before it answers by default: its chat template opens a thinking block unless told not to.

Such a model's responses run long whatever the task, so the step time's default mean response (steptime, when
nobody states one) is half of max_response_length for it, not the √-law fitted on base and instruct models.

The model's own files decide when they are on this machine: a chat template (tokenizer_config.json's
`chat_template`, or chat_template.jinja) that writes `<think>` and does not default `enable_thinking` to false.
Otherwise the checkpoint's name (a hub id's, or the folder's when it is not on this machine) decides, for the
families whose published chat template or model card says they think by default (each with its source below).
Standard library only; reads are bounded.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from wizard._chat_templates import MAX_TEMPLATE_BYTES  # noqa: F401  (the bound every chat-template read uses)

# checkpoint names (a hub id's or a folder's last part) whose model thinks by default, and why (each family's model
# card on huggingface.co)
THINKING_IDS: tuple[tuple[str, str], ...] = (
    # Qwen3's hybrid models: "thinking mode is enabled by default" (enable_thinking=True in the chat template);
    # the -Base checkpoints have no chat behaviour, the -Instruct-2507 and Coder ones do not think
    (r"^qwen3-(?!.*(?:-base|-instruct|coder))[\w.-]+$", "Qwen3's chat template thinks by default"),
    (r"^qwen3\.5-(?!.*-base)[\w.-]+$", "Qwen3.5's chat template thinks by default"),
    (r"thinking", "a -Thinking checkpoint"),
    (r"^qwq-", "QwQ reasons before it answers (its chat template opens <think>)"),
    (r"deepseek-r1", "DeepSeek-R1 and its distills reason in a <think> block (their chat template opens it)"),
    (r"^gpt-oss-", "gpt-oss reasons in its analysis channel (harmony format, medium effort by default)"),
)
_THINKS = re.compile(r"<think>")
# a template whose thinking waits to be switched on (enable_thinking false unless the caller sets it)
_OPT_IN = re.compile(r"enable_thinking\s*(?:is\s+(?:defined\s+and\s+enable_thinking\s+is\s+)?true|\|\s*default\(\s*false)")


def _local_template(path: str) -> Optional[str]:
    """The chat template of a local model folder (its named templates joined), or None (no folder, no template,
    unreadable). The tokenizer's templates only: the processor's chat_template.json does not decide thinking."""
    if not path or not os.path.isdir(path):
        return None
    from wizard._chat_templates import folder_templates

    templates = folder_templates(path, processor=False, errors="replace")
    return " ".join(templates) if templates else None


def thinks_by_default(model: Optional[str]) -> Optional[str]:
    """Why the model reasons by default (a short basis), or None when it does not or nothing says so."""
    if not model:
        return None
    model = str(model)
    template = _local_template(os.path.expanduser(model))
    if template is not None:
        if _THINKS.search(template) and not _OPT_IN.search(template):
            return "its chat template opens a <think> block by default"
        return None
    # a hub id (Qwen/Qwen3-8B) or a folder this machine lacks (~/models/Qwen3-8B): the checkpoint's name decides
    name = model.strip().rstrip("/").rsplit("/", 1)[-1].lower()
    for pattern, why in THINKING_IDS:
        if re.search(pattern, name):
            return why
    return None


__all__ = ["THINKING_IDS", "thinks_by_default"]
