"""VI910: the tool-call parser `rollout.multi_turn.format` names does not read the tool calls this model writes.

verl 0.9.1 (paths under verl/): multi_turn.format defaults to "hermes" (workers/config/rollout.py:61); the tool agent
loop builds the parser it names (experimental/agent_loop/tool_agent_loop.py:120, ToolParser.get_tool_parser,
tool_parser.py:82) and hands it each assistant turn's token ids (tool_agent_loop.py:300-302). A parser that finds no
call (hermes: no `<tool_call>` in the text, tool_parser.py:113-114) ends the episode after that turn
(tool_agent_loop.py:305-308): the run trains without ever calling its tool, and verl says nothing (real case verl
PR#6481: a gpt-oss model, whose harmony calls only the gpt-oss parser reads, with format left at hermes).

Derived, not tabulated: the model's own chat template writes one tool call after one user turn, and the text after
the generation prompt (what the model is trained to write, and what verl hands the parser) goes through every parser
verl registers (wizard.verlspec.toolcall, the same probe as `check --deep`'s VI863 and the planner's format). Only
when the model's tokenizer is on this machine (a local folder or the Hugging Face cache, loaded with
local_files_only as VI867 loads it) and verl is installed; verl's parser module is imported lazily, only then. The
template is rendered by transformers' sandboxed Jinja, as VI867 renders it; no code the config names runs.
"""

from __future__ import annotations

from typing import Any

from wizard.check.rules.context import M, R, Ctx, Facts, model_folder
from wizard.check.shellargs import PLACEHOLDER

FORMAT = f"{R}.multi_turn.format"
DEFAULT_FORMAT = "hermes"  # workers/config/rollout.py:61
TEMPLATE_KEYS = ("data.apply_chat_template_kwargs.chat_template", f"{M}.custom_chat_template")  # first given wins


def uses_tool_loop(c: Ctx) -> bool:
    """Whether the run calls tools through the tool agent loop's parser (as check --deep's tools phase decides)."""
    return bool(c.v(f"{R}.multi_turn.enable") or c.v(f"{R}.multi_turn.tool_config_path")
                or c.v(f"{R}.multi_turn.function_tool_path") or c.v(f"{R}.agent.default_agent_loop") == "tool_agent")


def _tokenizer(c: Ctx) -> tuple[str, Any] | None:
    """(model key, tokenizer carrying the template verl renders with), or None when it is not on this machine.
    model.custom_chat_template replaces the tokenizer's (workers/config/model.py:173-177); a chat_template in
    data.apply_chat_template_kwargs is passed to every apply_chat_template call (agent_loop.py:242) and wins."""
    import importlib.util

    from wizard.planner import overlong

    key = f"{M}.tokenizer_path" if c.v(f"{M}.tokenizer_path") else f"{M}.path"
    path = c.v(key)
    if not isinstance(path, str) or not path or c.unknown(key, *TEMPLATE_KEYS) or PLACEHOLDER in path:
        return None
    local = model_folder(c, path)
    folder = overlong.local_tokenizer(str(local)) if local is not None else None
    if folder is None or importlib.util.find_spec("verl") is None:
        return None
    tok = overlong.load_tokenizer(folder)[0]
    given = next((v for v in (c.v(k) for k in TEMPLATE_KEYS) if isinstance(v, str) and v), None)
    if tok is not None and given is not None:
        import copy

        tok = copy.copy(tok)  # load_tokenizer's copy is shared (cached per folder): leave its template alone
        tok.chat_template = given
    return (key, tok) if tok is not None and getattr(tok, "chat_template", None) else None


def _registered() -> list[str]:
    from wizard.verlspec.toolcall import parsers_module

    return sorted(parsers_module().ToolParser._registry)


def rule_tool_format(c: Ctx, f: Facts) -> None:
    if not uses_tool_loop(c) or c.unknown(FORMAT):
        return
    fmt = c.v(FORMAT) or DEFAULT_FORMAT
    found = _tokenizer(c) if isinstance(fmt, str) else None
    if found is None:
        return
    key, tok = found
    from wizard.verlspec.toolcall import probe, shown

    try:
        names = _registered()
        result = probe(tok)
    except Exception:  # noqa: BLE001 - verl's parser module does not load here: nothing to compare with
        return
    if fmt not in names:  # verl refuses it in the workers (tool_parser.py:82-85): VI691 (rules/tool_loaders.py) says so
        return
    model = c.v(key)
    if result.rendered is None:
        c.add("VI910", "info", (FORMAT, key),
              f"{model}'s chat template writes no tool call ({result.reason[:120]}): {FORMAT}={fmt} was not compared "
              "with the calls the model writes (tool_agent_loop.py:300-308 ends a turn whose call the parser does not "
              "read)", "check one rollout's first turn calls a tool, or give a chat template that renders tool_calls")
        return
    if fmt in result.readers:
        return
    turn = shown(result.rendered)
    what = (f"verl's {fmt!r} tool-call parser does not read the tool call {model}'s chat template writes ({turn!r}): "
            "it returns no call, and the tool agent loop ends each episode after its first turn with no tool called, "
            "silently (tool_parser.py, tool_agent_loop.py:300-308)")
    if result.readers:
        c.add("VI910", "error", (FORMAT, key), f"{what}; verl's {', '.join(result.readers)} parser reads it",
              f"set {FORMAT}={result.readers[0]}")
        return
    # No registered parser reads the template's call. The model may still write its calls in another form when it
    # generates than its template renders them (gpt-oss's template orders harmony's header otherwise than the
    # model's output): a warning while the format is verl's default, an info when the user chose it.
    c.add("VI910", "info" if c.set_by_user(FORMAT) else "warning", (FORMAT, key),
          f"{what}; no parser verl registers reads it either (verl's parsers: {', '.join(names)})",
          f"set {FORMAT} to the parser for the format {model} generates its calls in (one of {', '.join(names)}), "
          "or register a ToolParser (verl/experimental/agent_loop/tool_parser.py) for it")
