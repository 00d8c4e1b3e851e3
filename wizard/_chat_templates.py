"""The chat templates of a local model folder, read as transformers loads them, without running anything.

One reader for the planner (planner/reasoning.py: does the model think by default?) and for check
(check/rules/prompt_options.py, VI796: which variables does the template read?):

- chat_template.jinja, which transformers reads over tokenizer_config.json's `chat_template`
  (tokenization_utils_base.py); else tokenizer_config.json's `chat_template`, a string or named templates
  ([{name, template}], every one kept);
- with processor=True, also the processor's chat_template.json (a vision-language model's), which verl's processor
  load renders with.

Every read is bounded (MAX_TEMPLATE_BYTES) and goes through wizard._io's user-file reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MAX_TEMPLATE_BYTES = 4 << 20


def folder_templates(folder: str | Path, *, processor: bool = True, errors: str = "strict") -> list[str] | None:
    """Every chat template of a model folder (an empty list when it has none), or None when one of the files
    cannot be read. errors: how chat_template.jinja's bytes are decoded ("strict": an undecodable file is
    unreadable; "replace": read what can be read)."""
    from wizard._io import UnsafeInput, read_user_file, safe_json

    folder = Path(folder)
    out: list[str] = []
    try:
        jinja = folder / "chat_template.jinja"
        if jinja.is_file():
            out.append(read_user_file(str(jinja), MAX_TEMPLATE_BYTES).decode("utf-8", errors=errors))
        else:
            cfg = folder / "tokenizer_config.json"
            doc = safe_json(read_user_file(str(cfg), MAX_TEMPLATE_BYTES)) if cfg.is_file() else {}
            out += _templates(doc.get("chat_template") if isinstance(doc, dict) else None)
        proc = folder / "chat_template.json"
        if processor and proc.is_file():
            doc = safe_json(read_user_file(str(proc), MAX_TEMPLATE_BYTES))
            out += _templates(doc.get("chat_template") if isinstance(doc, dict) else None)
    except (OSError, ValueError, UnsafeInput):  # UnicodeDecodeError is a ValueError
        return None
    return out


def _templates(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):  # named templates: [{name, template}]
        return [t["template"] for t in value if isinstance(t, dict) and isinstance(t.get("template"), str)]
    return []


__all__ = ["MAX_TEMPLATE_BYTES", "folder_templates"]
