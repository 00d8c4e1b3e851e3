"""Agent rules: multi-turn tool calling set up so that the tools never fire, or cannot load (VI855, VI858, VI859).

verl 0.9.1 (paths under verl/): a row's `agent_name` picks its agent loop, else rollout.agent.default_agent_loop
(experimental/agent_loop/agent_loop.py:610-612, default single_turn_agent, which never calls a tool); the tool
agent loop loads rollout.multi_turn.tool_config_path with tools/tool_registry.py:initialize_tools_from_config
(each class_name imported with importlib) and function_tool_path's @function_tool functions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wizard.check.rules.context import R, Ctx, Facts, local_path
from wizard.check.shellargs import PLACEHOLDER

_HEAD_BYTES = 1 << 20  # a JSONL file's first row is read from at most this much


def _has_agent_name(path: Path) -> bool | None:
    """Whether a local data file's rows carry `agent_name` (parquet: its schema, read from the footer; JSONL: its
    first row); None when the file cannot be read here."""
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return "agent_name" in pq.read_schema(path).names
        if path.suffix == ".jsonl":
            with path.open("rb") as fh:
                line = fh.readline(_HEAD_BYTES)
            row = json.loads(line)
            return isinstance(row, dict) and "agent_name" in row
    except Exception:  # noqa: BLE001 - unreadable here: the data rules (VI870) speak about it
        return None
    return None


def _rows_pick_agent(c: Ctx) -> bool | None:
    """Whether the training rows name their agent loop: True/False when every train file says so, else None."""
    value = c.v("data.train_files")
    if c.unknown("data.train_files") or value is None:
        return None
    found: list[bool] = []
    for path in ([value] if isinstance(value, str) else value if isinstance(value, list) else []):
        local = local_path(c, path) if isinstance(path, str) and PLACEHOLDER not in path else None
        has = _has_agent_name(local) if local is not None and local.is_file() else None
        if has is None:
            return None
        found.append(has)
    return all(found) if found else None


def _verl_lacks(module: str) -> bool:
    """Whether `module` is a verl submodule that the verl 0.9.1 installed here does not ship (so not the one the
    user's 0.9.1 runs either: R23-01's verl.tools.sandbox_fusion_tools, removed before 0.9.1). Read from the
    installed distribution's metadata and files, never imported."""
    if module.split(".")[0] != "verl":
        return False
    try:
        from importlib import metadata

        if metadata.version("verl") != "0.9.1":
            return False
        files = metadata.files("verl") or []
    except Exception:  # noqa: BLE001 - no verl here: nothing is certain
        return False
    shipped = {str(f).removesuffix(".py").removesuffix("/__init__").replace("/", ".") for f in files
               if str(f).endswith(".py")}
    return "verl" in shipped and module not in shipped


def _tool_config_problem(c: Ctx, path: str) -> tuple[str, str, str] | None:
    """(severity, message, hint) when the tool config cannot give verl its tools, or None. A class that cannot be
    found is reported too: by reading the module file in the folder verl runs in or the installed packages (never
    run), or, with `check --deep`, by importing it in the sandbox (wizard._sandbox). It may exist only where verl runs
    (a warning), except a verl module verl 0.9.1 does not ship, and a config.type other than native: ToolType has
    NATIVE only (tools/tool_registry.py:36-38) and ToolType(config.type) raises ValueError (:62) in every
    AgentLoopWorker before any tool code runs (errors, certain from verl's source)."""
    from wizard.check.rules.toolconfig import read_tools

    config = read_tools(c, path)
    if config.local is None:
        return None
    if config.problem is not None:
        return ("warning", *config.problem)
    tools = config.tools or []
    from wizard.planner.agent import NOT_TRIED, import_problem, imports_allowed, installed_folders, static_problem

    deep = imports_allowed()
    for i, tool in enumerate(tools):
        name = tool.get("class_name") if isinstance(tool, dict) else None
        kind = (tool.get("config") or {}).get("type") if isinstance(tool, dict) and isinstance(tool.get("config"), dict) else None
        if not isinstance(name, str) or "." not in name:
            return ("warning", f"tool {i} in {path} has no class_name module.Class", "set class_name to your BaseTool subclass")
        if kind != "native":
            certain = not (isinstance(kind, str) and "${" in kind)  # an interpolation resolves where verl runs
            return ("error" if certain else "warning",
                    f"tool {i} ({name}) in {path} has config.type={kind!r}: verl 0.9.1 loads only native tools "
                    "(ToolType has NATIVE only, tools/tool_registry.py:36-38; ToolType(config.type) raises ValueError "
                    "at :62 in every agent-loop worker at start-up)", "set config: {type: native}")
        if deep:
            why = import_problem(name, str(c.src.workdir))
        else:
            why = static_problem(name, [str(c.src.workdir), *installed_folders()])
            if why is False:
                why = f"no module file for {name.rpartition('.')[0]} in {c.src.workdir} or the installed packages"
            why = None if why is None else f"{why}; {NOT_TRIED}"
        if why is not None and not deep and _verl_lacks(name.rpartition(".")[0]):
            return ("error", f"tool class {name} (in {path}): verl 0.9.1 ships no module {name.rpartition('.')[0]}, "
                    "so its tool registry fails to load it in every agent-loop worker at start-up "
                    "(tools/tool_registry.py:41-45)",
                    "use a tool class of your own (a BaseTool subclass in a module on the workers' sys.path), or "
                    "an older verl that still ships it")
        if why is not None:
            return ("warning", f"tool class {name} (in {path}) does not import here: {why}",
                    "install its package where verl runs, or put its module in the folder verl runs in (on the "
                    "workers' sys.path)")
    return None


def registered_agent_loops(c: Ctx) -> tuple[tuple[str, ...], str | None]:
    """The names rollout.agent.agent_loop_config_path registers, and why they could not be read (None when read, or
    when no file is set). verl loads the file in every AgentLoopWorker and registers each entry's `name`
    (experimental/agent_loop/agent_loop.py:533-539: OmegaConf.load, then _agent_loop_registry[cfg.name]); a relative
    path is tried in the folder verl runs in, then under verl's install (utils/import_utils.py:91-125). The file is
    read here bounded (wizard.check.source.read_yaml), never its classes."""
    from wizard.check.source import read_yaml

    key = f"{R}.agent.agent_loop_config_path"
    value = c.v(key)
    if value is None or value == "":
        return (), None
    if c.unknown(key) or not isinstance(value, str) or PLACEHOLDER in value:
        return (), f"{key} is not known here"
    local = local_path(c, value)
    if local is None or not local.is_file():
        return (), f"{key}={value} is not a file here" + (f" ({local})" if local is not None else "")
    try:
        doc: Any = read_yaml(local)
    except Exception as exc:  # noqa: BLE001 - bad YAML, too large, unreadable
        return (), f"{key}={value} cannot be read: {exc}"
    if not isinstance(doc, list):
        return (), f"{key}={value} is not a list of agent loops (verl iterates it: agent_loop.py:538)"
    return tuple(e["name"] for e in doc if isinstance(e, dict) and isinstance(e.get("name"), str)), None


def rule_agent(c: Ctx, f: Facts) -> None:
    enable, loop = bool(c.v(f"{R}.multi_turn.enable")), c.v(f"{R}.agent.default_agent_loop")
    tool_cfg, fn_tools = c.v(f"{R}.multi_turn.tool_config_path"), c.v(f"{R}.multi_turn.function_tool_path")
    if c.unknown(f"{R}.agent.default_agent_loop", f"{R}.multi_turn.tool_config_path", f"{R}.multi_turn.function_tool_path"):
        return
    tools_set = [k for k, v in ((f"{R}.multi_turn.tool_config_path", tool_cfg),
                                (f"{R}.multi_turn.function_tool_path", fn_tools)) if v]
    if (tools_set or enable) and loop == "single_turn_agent":
        rows = _rows_pick_agent(c)
        keys = (*tools_set, f"{R}.agent.default_agent_loop") if tools_set else (f"{R}.multi_turn.enable",
                                                                                f"{R}.agent.default_agent_loop")
        hint = (f"set {R}.agent.default_agent_loop=tool_agent, or write agent_name: tool_agent in every row "
                "(verl-init's data/prepare_data.py does with agent=tool)")
        if rows is False:
            c.add("VI855", "error", (*keys, "data.train_files"), "tools are configured but the training rows have no "
                  "agent_name and the default agent loop is single_turn_agent: verl never calls a tool "
                  "(agent_loop.py:610-612)", hint)
        elif rows is None:
            c.add("VI855", "warning", keys, "tools are configured but the default agent loop is single_turn_agent: "
                  "only rows whose agent_name is tool_agent call them (the data files could not be read here)", hint)
    if (loop == "tool_agent" or enable) and not tools_set:
        c.add("VI859", "warning", (f"{R}.agent.default_agent_loop", f"{R}.multi_turn.tool_config_path"),
              f"the tool agent loop is on ({'multi_turn.enable=true' if enable else 'default_agent_loop=tool_agent'}) "
              "but no tool is configured: every rollout is single-turn, at the cost of the multi-turn loop",
              f"set {R}.multi_turn.tool_config_path (or function_tool_path), or turn multi-turn off")
    if isinstance(tool_cfg, str) and tool_cfg and PLACEHOLDER not in tool_cfg:
        problem = _tool_config_problem(c, tool_cfg)
        if problem is not None:
            c.add("VI858", problem[0], (f"{R}.multi_turn.tool_config_path",), *problem[1:])


def rule_turn_budget(c: Ctx, f: Facts) -> None:
    """VI866: the multi-turn response budget. data.max_response_length holds the whole
    conversation after the prompt, tool replies included (tool_agent_loop.py:386-397, cut at :290 and :394), and each
    reply is cut to max_tool_response_length characters (:499-505), at most as many tokens. With max_assistant_turns
    turns, the worst case (wizard.verlspec.arithmetic.turn_budget, the planner's VI562 arithmetic) leaves each turn
    of the model's own fewer tokens than it needs to reason, call a tool and answer."""
    from wizard.planner.agent import MIN_TURN_TOKENS
    from wizard.verlspec.arithmetic import turn_budget

    keys = (f"{R}.multi_turn.max_assistant_turns", f"{R}.multi_turn.max_tool_response_length", "data.max_response_length")
    enable, loop = bool(c.v(f"{R}.multi_turn.enable")), c.v(f"{R}.agent.default_agent_loop")
    if not (enable or loop == "tool_agent") or c.unknown(*keys):
        return
    turns, reply, response = (c.int(k) for k in keys)
    if not turns or turns < 2 or reply is None or not response:
        return
    budget = turn_budget(response, turns, reply)
    if budget.per_turn >= MIN_TURN_TOKENS:
        return
    fit = max((t for t in range(1, turns) if turn_budget(response, t, reply).per_turn >= MIN_TURN_TOKENS), default=0)
    need = budget.tool_tokens + turns * MIN_TURN_TOKENS
    c.add("VI866", "warning", (keys[0], "data.max_response_length"),
          f"max_response_length={response} holds the whole conversation of up to {turns} assistant turns: "
          f"{budget.tool_replies} tool replies of up to {reply} characters (≤ {reply} tokens, max_tool_response_length "
          f"counts characters) leave {max(budget.assistant_tokens, 0)} tokens of the model's own, under "
          f"{MIN_TURN_TOKENS} a turn; verl ends the conversation when the response is full (tool_agent_loop.py:290)",
          f"set data.max_response_length ≥ {need}" + (f", or {keys[0]} ≤ {fit}" if fit else ""))

