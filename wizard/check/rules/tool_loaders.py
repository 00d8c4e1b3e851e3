"""Tool-agent settings verl only refuses inside the agent-loop workers, after the GPUs are booked (VI691, VI696).

verl 0.9.1 (paths under verl/):

- VI691: the tool agent loop builds its tool-call parser with ToolParser.get_tool_parser(rollout.multi_turn.format)
  (experimental/agent_loop/tool_agent_loop.py:120), which raises ValueError("Unknown tool parser: <name>") for a
  name not in ToolParser._registry (experimental/agent_loop/tool_parser.py:82-85). The loop is built per sample
  (agent_loop.py:678-683), so the run dies at its first rollout. The registered names are
  wizard/check/data/verl_tool_parsers.json, read by scripts/verl_tool_parsers.py from verl's `@ToolParser.register`
  lines (tool_parser.py:96-742: hermes, gpt-oss, qwen3_coder, glm, seed, minimax, kimi, deepseek_v4, gemma4).
  verl's own rollout.yaml comment offers "hermes, llama3_json, ..." and its search_r1 example shipped format=qwen
  (verl PR#5114): neither is registered. A parser of one's own registers itself when a module of the user's is
  imported first (a tool class, a function-tool file, a custom agent loop); when such a module is configured but
  cannot be read here the finding is a warning, when one of them registers the name there is none.
- VI696: rollout.multi_turn.function_tool_path is executed by verl.tools.function_tool.load_function_tools_from_path
  (tools/function_tool.py:151-169) in every AgentLoopWorker (agent_loop.py:526-531). RLHFDataset loads it first and
  only logs a warning when that fails (utils/dataset/rl_dataset.py:128-145), so a file that does not parse, or that
  imports a verl module verl 0.9.1 does not ship (verl PR#6189's description imports
  verl.tools.utils.function_tool; 0.9.1 has verl.tools.function_tool), fails in the workers. The file is parsed
  here with `ast`, never run; verl's shipped modules come from the installed distribution's file list.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from importlib import resources
from pathlib import Path

from wizard._io import UnsafeInput, read_user_file
from wizard.check.rules.context import R, Ctx, Facts, local_path
from wizard.check.rules.toolformat import DEFAULT_FORMAT, FORMAT, uses_tool_loop
from wizard.check.shellargs import PLACEHOLDER

FN_TOOLS = f"{R}.multi_turn.function_tool_path"
TOOL_CFG = f"{R}.multi_turn.tool_config_path"
LOOP_CFG = f"{R}.agent.agent_loop_config_path"
_MAX_BYTES = 1 << 20


@functools.lru_cache(maxsize=1)
def registered_parsers() -> tuple[str, ...]:
    text = resources.files("wizard.check").joinpath("data/verl_tool_parsers.json").read_text(encoding="utf-8")
    return tuple(json.loads(text)["parsers"])


def _module_file(c: Ctx, dotted: str) -> Path | None:
    """The file of module `dotted` in the folder verl runs in (where the workers import user modules from)."""
    base = c.src.workdir.joinpath(*dotted.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def _user_modules(c: Ctx) -> tuple[list[Path], list[str]]:
    """(files of the user's modules verl imports before the tool agent loop builds its parser, the ones that cannot
    be read here): the function-tool file, the tool classes' modules, the custom agent loops' `_target_` modules."""
    from wizard.check.rules.toolconfig import read_tools
    from wizard.check.source import read_yaml

    found: list[Path] = []
    missing: list[str] = []
    fn = c.v(FN_TOOLS)
    if isinstance(fn, str) and fn:
        local = local_path(c, fn)
        found.append(local) if local is not None and local.is_file() else missing.append(fn)
    dotted: list[str] = []
    tool_cfg = c.v(TOOL_CFG)
    if isinstance(tool_cfg, str) and tool_cfg:
        tools = read_tools(c, tool_cfg).tools
        if tools is None:
            missing.append(tool_cfg)
        dotted += [t["class_name"] for t in tools or [] if isinstance(t, dict) and isinstance(t.get("class_name"), str)]
    loops = c.v(LOOP_CFG)
    if isinstance(loops, str) and loops:
        local = local_path(c, loops)
        try:
            doc = read_yaml(local) if local is not None and local.is_file() else None
        except Exception:  # noqa: BLE001 - unreadable: whatever it imports is unknown here
            doc = None
        if not isinstance(doc, list):
            missing.append(loops)
        dotted += [e["_target_"] for e in doc or [] if isinstance(e, dict) and isinstance(e.get("_target_"), str)]
    for name in dotted:
        module = name.rpartition(".")[0]
        if module.split(".")[0] == "verl":
            continue  # verl's own modules register no parser beyond the table
        path = _module_file(c, module)
        found.append(path) if path is not None else missing.append(module)
    return found, missing


def _registers(files: list[Path], name: str) -> bool:
    pattern = re.compile(r"""register\(\s*["']""" + re.escape(name) + r"""["']\s*\)""")
    for f in files:
        try:
            if pattern.search(read_user_file(str(f), _MAX_BYTES).decode("utf-8", errors="replace")):
                return True
        except (OSError, UnsafeInput):
            continue
    return False


def rule_tool_parser_name(c: Ctx, f: Facts) -> None:
    if not uses_tool_loop(c) or c.unknown(FORMAT):
        return
    fmt = c.v(FORMAT)
    fmt = DEFAULT_FORMAT if fmt is None else fmt
    names = registered_parsers()
    if not isinstance(fmt, str) or fmt in names:
        return
    files, missing = _user_modules(c)
    if _registers(files, fmt):
        return
    what = (f"{FORMAT}={fmt} is no tool-call parser verl 0.9.1 registers ({', '.join(names)}): the tool agent loop "
            "raises ValueError('Unknown tool parser') in the agent-loop workers at the first rollout, after the GPUs "
            "are booked (tool_parser.py:82-85, tool_agent_loop.py:120)")
    hint = (f"set {FORMAT} to the parser for your model's tool-call format "
            "(hermes for <tool_call>{json}</tool_call>, qwen3_coder for Qwen3-Coder/Qwen3.5 XML calls, gpt-oss for "
            "harmony), or register a ToolParser of yours in a module verl imports")
    if missing:
        c.add("VI691", "warning", (FORMAT,), f"{what}, unless a module of yours that is not readable here "
              f"({', '.join(missing[:3])}) registers it", hint)
        return
    c.add("VI691", "error", (FORMAT,), what, hint)


def _imports(tree: ast.AST) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, node.lineno))
    return out


def rule_function_tools_file(c: Ctx, f: Facts) -> None:
    from wizard.check.rules.agent import _verl_lacks

    path = c.v(FN_TOOLS)
    if not isinstance(path, str) or not path or c.unknown(FN_TOOLS) or PLACEHOLDER in path:
        return
    local = local_path(c, path)
    if local is None or not local.is_file():
        return  # a missing file: VI953/the files rules; a remote one is not ours to read
    try:
        text = read_user_file(str(local), _MAX_BYTES).decode("utf-8", errors="replace")
    except (OSError, UnsafeInput):
        return  # larger than a tool file, or not a regular file: not judged
    where = "the agent-loop workers fail loading it at start-up, after the GPUs are booked (agent_loop.py:526-531)"
    try:
        tree = ast.parse(text, filename=str(local))
    except SyntaxError as exc:
        c.add("VI696", "error", (FN_TOOLS,), f"{FN_TOOLS}={path} does not parse (line {exc.lineno}: {exc.msg}): "
              f"{where}", "fix the file's syntax")
        return
    for module, line in _imports(tree):
        if _verl_lacks(module):
            c.add("VI696", "error", (FN_TOOLS,), f"{FN_TOOLS}={path} imports {module} (line {line}), a module verl "
                  f"0.9.1 does not ship: {where}; the dataset only logs the ImportError (rl_dataset.py:139-145)",
                  "import the decorator as `from verl.tools.function_tool import function_tool`" if
                  module.endswith("function_tool") else f"import what {module} held from where verl 0.9.1 keeps it")
            return
