"""Does verl's tool-call parser read the tool calls this model writes? (`check --deep`, tools phase; VI863)

verl's tool agent loop hands each assistant turn's token ids to the parser that
`actor_rollout_ref.rollout.multi_turn.format` names (experimental/agent_loop/tool_agent_loop.py:120,
tool_parser.py: `ToolParser.get_tool_parser`), and a turn the parser does not read ends the episode with no tool
called (tool_agent_loop.py:300-308): a run whose format does not match the model's chat template trains without
ever calling its tool, and verl reports nothing.

The model's own chat template says how it writes a tool call: rendered for one call after one user turn (with the
tool's schema, as verl renders prompts), the text after the generation prompt is the assistant turn the model was
trained to produce. Its token ids (the model's own tokenizer) go through each parser verl registers; a parser reads
it when it gives back the call's name and arguments. This module imports verl and renders a user's template, so it
runs only inside the sandbox (wizard.check.deep_child).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

NAME = "get_weather"
ARGUMENTS = {"city": "Paris"}
SCHEMA = {"type": "function", "function": {
    "name": NAME, "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "the city"}},
                   "required": ["city"]}}}
USER = [{"role": "user", "content": "What is the weather in Paris?"}]


@dataclass
class Probe:
    rendered: str | None  # the assistant turn the template writes for the call; None: the template writes none
    readers: list[str] = field(default_factory=list)  # verl's parsers that give back the call, by registered name
    reason: str = ""  # why nothing was rendered


def shown(rendered: str, limit: int = 120) -> str:
    """A rendered turn on one line, cut to `limit` characters, as a finding quotes it."""
    turn = " ".join(rendered.split())
    return turn if len(turn) <= limit else turn[:limit - 3] + "..."


def assistant_turn(tok: Any) -> tuple[str | None, str]:
    """The text the chat template writes after the generation prompt for one tool call, and why it is None.
    The call's arguments go as a mapping (Qwen, Llama, GLM templates) or, where that does not render, as JSON text."""
    errors = []
    for args in (ARGUMENTS, json.dumps(ARGUMENTS)):
        call = {"id": "call_0", "type": "function", "function": {"name": NAME, "arguments": args}}
        turn = {"role": "assistant", "content": "", "tool_calls": [call]}
        try:
            prompt = tok.apply_chat_template(USER, tools=[SCHEMA], add_generation_prompt=True, tokenize=False)
            full = tok.apply_chat_template([*USER, turn], tools=[SCHEMA], tokenize=False)
        except Exception as exc:  # noqa: BLE001 - a template that refuses tools or calls is the answer
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        if not isinstance(prompt, str) or not isinstance(full, str) or NAME not in full:
            errors.append("the template writes no tool call")
            continue
        n = 0
        while n < min(len(prompt), len(full)) and prompt[n] == full[n]:
            n += 1
        return full[n:], ""
    return None, errors[-1] if errors else "no chat template"


def parsers_module() -> Any:
    """verl's tool_parser module. It is loaded from its file when the package cannot be imported: the agent-loop
    package's __init__ imports its router, which needs cachetools, absent from a plain `pip install verl`
    (verl-facts §0.7); tool_parser.py itself needs only verl.tools and verl.utils."""
    import importlib
    import importlib.util
    import sys
    from pathlib import Path

    name = "verl.experimental.agent_loop.tool_parser"
    try:
        return importlib.import_module(name)
    except ImportError:
        import verl

        spec = importlib.util.spec_from_file_location(
            name, Path(verl.__file__).parent / "experimental" / "agent_loop" / "tool_parser.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module


def reads(parser: Any, ids: list[int]) -> bool:
    """Whether `parser` (a verl ToolParser) gives back the call from the turn's token ids."""
    from verl.tools.schemas import OpenAIFunctionToolSchema

    try:
        _, calls = asyncio.run(parser.extract_tool_calls(ids, [OpenAIFunctionToolSchema(**SCHEMA)]))
        return any(c.name == NAME and json.loads(c.arguments) == ARGUMENTS for c in calls)
    except Exception:  # noqa: BLE001 - a parser that raises on the turn does not read it
        return False


def probe(tok: Any) -> Probe:
    """The template's assistant turn for one tool call, and every parser verl registers that reads it."""
    import logging

    ToolParser = parsers_module().ToolParser  # noqa: N806 - verl's class

    text, reason = assistant_turn(tok)
    if text is None:
        return Probe(None, reason=reason)
    ids = tok.encode(text, add_special_tokens=False)
    readers = []
    quiet = logging.getLogger().manager.disable
    logging.disable(logging.CRITICAL)  # verl's parsers log each call they fail to decode
    try:
        for name in sorted(ToolParser._registry):
            try:
                parser = ToolParser.get_tool_parser(name, tok)
            except Exception:  # noqa: BLE001 - a parser that needs tokens this tokenizer lacks
                continue
            if reads(parser, ids):
                readers.append(name)
    finally:
        logging.disable(quiet)
    return Probe(text, readers)
