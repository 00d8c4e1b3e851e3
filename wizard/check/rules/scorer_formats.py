"""What verl 0.9.1's built-in scorers accept and return, against the data rows (paths under site-packages/verl). The
table behind both rules is wizard/check/data/verl_scorer_formats.json, written by scripts/verl_scorer_formats.py by
running verl's default_compute_score (utils/reward_score/__init__.py:44-112) on one correct answer in each format.
Both rules are silent when a custom reward function or a reward model scores (the row's data_source then picks no
built-in scorer), and on data_sources whose scorer the table could not run.

- VI766 (warning): a row's prompt asks for an answer format (\\boxed, ####, <answer>) that the scorer of its
  data_source never gives full marks, and names none it does. verl's gsm8k scorer only extracts '#### N'
  (utils/reward_score/gsm8k.py:20-31, method='strict'), MATH's only \\boxed{} (math_reward.py), search-r1's only
  <answer></answer>: a model that follows the prompt scores 0 on every sample, with no error (verl#2150).
- VI922 (warning): one training (or validation) set mixes data_sources whose scorers give reward_extra_info different
  keys (a float becomes {'acc'}, a dict keeps its keys: experimental/reward_loop/reward_manager/naive.py:86-95).
  verl builds the batch's extra-info columns from the FIRST sample's keys of each chunk
  (experimental/agent_loop/agent_loop.py:1107-1111; experimental/reward_loop/reward_loop.py:365-369): a chunk whose
  first sample has a key another lacks raises KeyError (e.g. 'score' with math_dapo first and gsm8k after), the
  other order silently drops the keys (verl#1031).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

# the formats a prompt names by these markers; 'Answer:' and 'The answer is' only count for a scorer that accepts them
NAMED = ("hashes", "boxed", "answer_tag")


@lru_cache(maxsize=1)
def scorer_table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_scorer_formats.json").read_text(encoding="utf-8")
    return json.loads(text)


def prompt_text(prompt: Any) -> str:
    """The text of a row's prompt: a string, or the text content of its chat messages."""
    if isinstance(prompt, str):
        return prompt
    parts: list[str] = []
    for m in prompt if isinstance(prompt, list) else []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "\n".join(parts)


def format_mismatch(prompt: Any, data_source: Any) -> tuple[list[str], list[str]] | None:
    """(markers the prompt names, markers of the formats the scorer accepts) when the prompt asks only for formats the
    data_source's built-in scorer never gives full marks; else None."""
    table = scorer_table()
    row = table["data_sources"].get(data_source) if isinstance(data_source, str) else None
    if not row or not row["runs"] or not row["accepts"]:
        return None
    text = prompt_text(prompt)
    markers = {name: f["marker"] for name, f in table["formats"].items()}
    named = [n for n in markers if markers[n] in text]
    if not [n for n in named if n in NAMED] or set(named) & set(row["accepts"]):
        return None
    return [markers[n] for n in named if n in NAMED], [markers[n] for n in row["accepts"]]


def extra_info_keys(data_source: Any) -> tuple[str, ...] | None:
    """The reward_extra_info keys verl's reward manager gives a sample of this data_source, or None: not known."""
    row = scorer_table()["data_sources"].get(data_source) if isinstance(data_source, str) else None
    if not row or not row["runs"] or not row["returns"]:
        return None
    return tuple(row["returns"]["extra_info_keys"])


def mixed_extra_info(sources: list[str]) -> dict[tuple[str, ...], list[str]] | None:
    """extra-info key set -> the data_sources giving it, when the sources give more than one key set."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for ds in sources:
        keys = extra_info_keys(ds)
        if keys is not None and ds not in groups.setdefault(keys, []):
            groups[keys].append(ds)
    return groups if len(groups) > 1 else None
