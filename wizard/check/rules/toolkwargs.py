"""VI794 (warning): a data row's extra_info.tools_kwargs keyed by something other than a tool name.

verl 0.9.1's RLHFDataset hands each row's extra_info.tools_kwargs to the agent loop as it is
(utils/dataset/rl_dataset.py:403-409), and the tool agent loop looks it up by the called tool's name:
`kwargs = tools_kwargs.get(tool_name, {})`, then `tool.create(create_kwargs=kwargs.get("create_kwargs", {}))`
(experimental/agent_loop/tool_agent_loop.py:485-486). A row written as {"create_kwargs": {...}} (the per-tool level
without the tool name above it) gives every tool {} : the tool starts without its ground truth (verl's GSM8K tool
then scores every answer 0), with no error, and RLHFDataset's need_tools_kwargs warning (:405-407) stays silent
because the mapping is not empty. The tool names are the tool config's tool_schema.function.name (tools/base_tool.py:40,
read once through rules/toolconfig.py); the rows are the data files' first rows (rules/datacontent.py).
"""

from __future__ import annotations

from typing import Any

from wizard.check.rules.context import R, Ctx, Facts, local_data_files
from wizard.check.shellargs import PLACEHOLDER

ROWS = 200  # rows read per file
PER_TOOL = ("create_kwargs", "execute_kwargs", "calc_reward_kwargs", "release_kwargs")  # the level under a tool name


def tool_names(tools: list[Any]) -> set[str] | None:
    """Each tool's name as verl's BaseTool takes it (tool_schema.function.name), or None when one cannot be read
    here (a tool whose class supplies its own schema)."""
    names: set[str] = set()
    for tool in tools:
        schema = tool.get("tool_schema") if isinstance(tool, dict) else None
        function = schema.get("function") if isinstance(schema, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            return None
        names.add(name)
    return names


def misplaced_keys(tools_kwargs: Any, names: set[str]) -> list[str]:
    """The keys of one row's tools_kwargs that name no tool (what verl's lookup by tool name never reads)."""
    if not isinstance(tools_kwargs, dict):
        return []
    return [str(k) for k in tools_kwargs if k not in names]


def rule_tools_kwargs(c: Ctx, f: Facts) -> None:
    key = f"{R}.multi_turn.tool_config_path"
    path = c.v(key)
    if not isinstance(path, str) or not path or c.unknown(key) or PLACEHOLDER in path:
        return
    if c.v(f"{R}.multi_turn.function_tool_path"):
        return  # function tools' names are not read here (and verl ignores tools_kwargs for them)
    from wizard.check.rules.toolconfig import read_tools

    config = read_tools(c, path)
    names = tool_names(config.tools) if config.tools else None
    if not names:
        return
    from wizard.check.rules.datacontent import file_rows

    for files_key, file, local in local_data_files(c, (".parquet", ".jsonl")):
        try:
            found = _first_misplaced(file_rows(local), names)
        except Exception:  # noqa: BLE001 - an unreadable file is VI878's / verl's loader's business
            continue
        if found is not None:
            _report(c, key, files_key, file, names, *found)


def _first_misplaced(rows: Any, names: set[str]) -> tuple[int, list[str]] | None:
    for n, row in enumerate(rows):
        if n >= ROWS:
            break
        extra = row.get("extra_info") if isinstance(row, dict) else None
        wrong = misplaced_keys(extra.get("tools_kwargs") if isinstance(extra, dict) else None, names)
        if wrong:
            return n, wrong
    return None


def _report(c: Ctx, key: str, files_key: str, file: str, names: set[str], n: int, wrong: list[str]) -> None:
    shown = ", ".join(repr(k) for k in wrong[:6])
    tools = ", ".join(repr(k) for k in sorted(names)[:6])
    layout = set(wrong) & set(PER_TOOL)
    if layout and len(names) == 1:
        example = f"{{{next(iter(names))!r}: {{{', '.join(repr(k) + ': ...' for k in sorted(layout))}}}}}"
        fix = f"nest them under the tool's name: extra_info.tools_kwargs = {example}"
    elif layout:
        fix = "nest them under the name of the tool they are for: {'<tool name>': {'create_kwargs': {...}}}"
    else:
        fix = f"key extra_info.tools_kwargs by the tool names of {key} ({tools})"
    what = ("the per-tool level (create_kwargs, ...) without the tool name above it" if layout else
            "keys that name no tool")
    c.add("VI794", "warning", (files_key, key),
          f"{file} row {n}: extra_info.tools_kwargs has {shown} ({what}); the tools of {key} are {tools}. verl's "
          "tool agent loop reads tools_kwargs.get(<tool name>, {}) and passes its create_kwargs to tool.create "
          "(experimental/agent_loop/tool_agent_loop.py:485-486), so these kwargs reach no tool: it starts without "
          "them (a reward tool without its ground truth scores 0), and RLHFDataset's need_tools_kwargs warning "
          "stays silent because the mapping is not empty (utils/dataset/rl_dataset.py:403-407)",
          f"{fix}, when preparing the data")
