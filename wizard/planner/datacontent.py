"""What a prompt says, not only its shape: the content checks validate-dataset, `check` (on the data files it
can reach) and the CPU smoke share. Pure and light (no pandas, pyarrow or verl).

  VI543 error  a message's content is itself a JSON chat (a chat column read as the question text: the whole
               conversation, system role included, ends up inside one user message)
  VI544 error  the prompt is empty or whitespace (every user message is)
  VI545 error  a system message that is not the first message (chat templates put the system prompt first or
               refuse it elsewhere: Qwen2.5's template renders it mid-conversation, others raise)
"""

from __future__ import annotations

import json
from typing import Any, Optional

RULES: dict[str, tuple[str, str]] = {
    "VI543": ("error", "a message's content is itself a JSON chat"),
    "VI544": ("error", "the prompt is empty or whitespace"),
    "VI545": ("error", "a system message that is not the first message"),
}

HINTS: dict[str, str] = {
    "VI543": ("the file's chat column was read as question text: map it as the chat (messages_field=<column>, "
              "which keeps each message and its role) instead of question_field"),
    "VI544": "drop these rows or fill the question: verl would train on an empty prompt",
    "VI545": "put the system message first (one per chat): chat templates place or accept it only there",
}

MESSAGES = {
    "VI543": "a message's content is the JSON text of a whole chat",
    "VI544": "the prompt is empty or whitespace",
    "VI545": "a system message is not the first message",
}


def json_chat(text: Any) -> Optional[list[dict[str, Any]]]:
    """The chat a text holds as JSON (a list of {role, content} mappings), or None."""
    if not isinstance(text, str):
        return None
    s = text.strip()
    if not (s.startswith("[") and s.endswith("]") and '"role"' in s):
        return None
    try:
        value = json.loads(s)
    except ValueError:
        return None
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m and "content" in m for m in value):
        return value
    return None


def chat_problems(chat: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(rule, the detail for this row) for each content problem of one well-formed chat."""
    out: list[tuple[str, str]] = []
    for i, m in enumerate(chat):
        inner = json_chat(m.get("content"))
        if inner is not None:
            roles = ", ".join(str(x.get("role")) for x in inner[:4])
            out.append(("VI543", f"message {i} ({m.get('role')}) holds a {len(inner)}-message chat ({roles})"))
            break
    users = [m for m in chat if m.get("role") == "user"]
    if not users or all(not str(m.get("content") or "").strip() for m in users):
        out.append(("VI544", "no user message with text" if not users else "every user message is blank"))
    late = [i for i, m in enumerate(chat) if m.get("role") == "system" and i > 0]
    if late:
        out.append(("VI545", f"system message at position {late[0]}"))
    return out


PLACEHOLDERS = {"image": "<image>", "video": "<video>", "audio": "<audio>"}


def media_mismatches(chat: list[dict[str, Any]], media: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(kind, placeholders, items) for each kind whose count verl 0.9.1 refuses in one row, as RLHFDataset.
    _build_messages pairs them (utils/dataset/rl_dataset.py:313-383): only in a row with any media at all (a text-only
    row keeps "<image>" as text), only in messages whose content is a string (a structured content list is taken as
    it is), the n-th placeholder of a kind with the n-th item of that kind's column; the offsets must end equal to
    the lengths (rl_dataset.py:381-383). `media`: kind → the row's value of data.<kind>_key (None: empty)."""
    items = {kind: value if isinstance(value, (list, tuple)) else [] for kind, value in media.items() if value}
    if not any(items.values()):
        return []
    texts = [m.get("content") for m in chat if isinstance(m, dict) and isinstance(m.get("content"), str)]
    counts = {kind: sum(t.count(PLACEHOLDERS[kind]) for t in texts) for kind in media}
    return [(kind, counts[kind], len(items.get(kind, []))) for kind in media
            if counts[kind] != len(items.get(kind, []))]
