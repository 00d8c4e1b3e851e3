"""VI692: serving-layer options (tool-call parser, reasoning parser, chat template) under engine_kwargs that verl's
own agent loops never reach.

verl 0.9.1 (paths under verl/): the rollout servers copy `rollout.engine_kwargs.<engine>` into the engine's launch
arguments (workers/rollout/vllm_rollout/vllm_async_server.py:287, 349; sglang_rollout/async_sglang_server.py:276), so
`+actor_rollout_ref.rollout.engine_kwargs.vllm.tool_call_parser=qwen3_coder` composes and the server starts with it.
But verl's agent loops (single_turn_agent, tool_agent: experimental/agent_loop/single_turn_agent_loop.py:70,
tool_agent_loop.py:244) generate through `server_manager.generate(prompt_ids=...)`, token ids in and token ids out:
vLLMHttpServer.generate wraps them in a TokensPrompt for `engine.generate` (vllm_async_server.py:558, 648, 667) and
SGLangHttpServer.generate sends GenerateReqInput(input_ids=...) to `tokenizer_manager.generate_request`
(async_sglang_server.py:546, 650, 657). The OpenAI serving layer, where vLLM and SGLang run a tool-call parser, a
reasoning parser and their chat template, is never on that path. verl tokenizes the chat itself with the model's
tokenizer (experimental/agent_loop/agent_loop.py:248), and the tool agent loop decodes each turn and reads its tool
calls with verl's own ToolParser that rollout.multi_turn.format names (tool_agent_loop.py:120, 300; default hermes,
workers/config/rollout.py:61). So these settings are silently inert, and a run that relies on them trains with
verl's format parser, its own template and the <think> text left in (real cases: verl PR#6844 with #6560/#3911,
vLLM's enable_auto_tool_choice + tool_call_parser set for a tool-agent rollout; verl#6424, a reasoning parser
expected to strip <think> before tool parsing).

The loops, lines and verl's parser names come from verl's source: wizard/check/data/verl_agent_loop_tito.json,
written by scripts/verl_agent_loop_tito.py (ast). The option names are the engines' own serve arguments (vLLM's
`--enable-auto-tool-choice --tool-call-parser --tool-parser-plugin --reasoning-parser --chat-template
--chat-template-content-format --default-chat-template-kwargs`, SGLang's `--tool-call-parser --reasoning-parser
--chat-template`). Only when every loop the run uses is one of verl's token-in loops: an
agent_loop_config_path may register a loop that calls the server's chat-completion endpoint, where they apply.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from wizard.check.rules.context import R, Ctx, Facts
from wizard.check.rules.toolformat import DEFAULT_FORMAT, FORMAT, uses_tool_loop

# serve argument -> what it does in the serving layer; per engine (the child of engine_kwargs verl reads)
SERVING_KEYS: dict[str, dict[str, str]] = {
    "vllm": {"enable_auto_tool_choice": "tool", "tool_call_parser": "tool", "tool_parser_plugin": "tool",
             "reasoning_parser": "reasoning", "enable_reasoning": "reasoning", "chat_template": "template",
             "chat_template_content_format": "template", "default_chat_template_kwargs": "template"},
    "sglang": {"tool_call_parser": "tool", "reasoning_parser": "reasoning", "chat_template": "template"},
}


@cache
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_agent_loop_tito.json").read_text(encoding="utf-8")
    return json.loads(text)


def _loop(c: Ctx) -> str | None:
    """The verl token-in loop every rollout of this run uses, or None (a custom loop may be registered, or unknown)."""
    keys = (f"{R}.agent.default_agent_loop", f"{R}.agent.agent_loop_config_path")
    if c.unknown(*keys) or c.v(keys[1]):
        return None
    name = c.v(keys[0]) or "single_turn_agent"
    entry = table()["loops"].get(name) if isinstance(name, str) else None
    return name if entry and entry.get("generate_line") else None


def _path(engine: str) -> str:
    t = table()[engine]
    if engine == "vllm":
        return f"vllm_async_server.py:{t['tokens_prompt_line']}-{t['engine_generate_line']}"
    return f"async_sglang_server.py:{t['request_line']}-{t['engine_generate_line']}"


def _tool(c: Ctx, key: str, opt: str, value: Any, tools: bool) -> tuple[str, str]:
    t = table()["tool_loop"]
    names = sorted(t["parsers"])
    if not tools:
        return ("no tool call is parsed in this run at all: its agent loop returns each response as generated",
                f"drop {key}; to train tool calls, run the tool agent loop ({R}.multi_turn.enable=True with "
                f"multi_turn.tool_config_path or function_tool_path) and pick its parser with {FORMAT}")
    fmt = c.v(FORMAT) if not c.unknown(FORMAT) and c.v(FORMAT) else DEFAULT_FORMAT
    what = (f"the tool calls are read by verl's own {fmt!r} parser that {FORMAT} names "
            f"(tool_agent_loop.py:{t['parser_line']}, {t['extract_line']})")
    if opt == "tool_call_parser" and isinstance(value, str) and value in t["parsers"] and value != fmt:
        return (f"{what}, not by {value!r}", f"set {FORMAT}={value} (verl's parser of that name) and drop {key}")
    if opt == "tool_call_parser" and value == fmt:
        return (what, f"drop {key}: {FORMAT}={fmt} already reads the calls")
    return (what, f"drop {key} and set {FORMAT} to verl's parser for the format the model writes its calls in "
                  f"(one of {', '.join(names)})")


def _what(c: Ctx, key: str, opt: str, kind: str, value: Any, tools: bool) -> tuple[str, str]:
    if kind == "tool":
        return _tool(c, key, opt, value, tools)
    if kind == "reasoning":
        where = (f", and it reaches the tool parser as is (tool_agent_loop.py:{table()['tool_loop']['extract_line']})"
                 if tools else "")
        return (f"verl's agent loops run no reasoning parser: the reasoning text stays in each response{where}",
                f"drop {key}: verl 0.9.1 has no switch that strips the reasoning from a rollout")
    return (f"verl renders each prompt itself with the model's tokenizer "
            f"(agent_loop.py:{table()['template']['builder_line']}) and sends token ids",
            f"drop {key}; set actor_rollout_ref.model.custom_chat_template (or "
            "data.apply_chat_template_kwargs.chat_template) to change the template verl renders with")


def rule_serve_parsers(c: Ctx, f: Facts) -> None:
    name = f"{R}.name"
    if c.unknown(name) or c.v(name) not in SERVING_KEYS:
        return
    engine = c.v(name)
    head = f"{R}.engine_kwargs.{engine}."
    hits = [k for k in sorted(c.res.user) if k.startswith(head) and k[len(head):] in SERVING_KEYS[engine]]
    hits = [k for k in hits if not c.unknown(k) and c.v(k) not in (None, False, "", "false", "False")]
    loop = _loop(c) if hits else None
    if loop is None:
        return
    tools = uses_tool_loop(c)
    for key in hits:
        opt = key[len(head):]
        value = c.v(key)
        what, hint = _what(c, key, opt, SERVING_KEYS[engine][opt], value, tools)
        c.add("VI692", "warning", (key, f"{R}.agent.default_agent_loop"),
              f"{key}={value!r} is an option of {engine}'s OpenAI serving layer, which verl's {loop} agent loop never "
              f"calls: it generates token ids in, token ids out ({_path(engine)}), so the option is silently inert; "
              f"{what}", hint)
