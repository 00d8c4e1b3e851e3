#!/usr/bin/env python3
"""How verl 0.9.1's own agent loops reach the rollout engine: writes wizard/check/data/verl_agent_loop_tito.json,
read by check's VI692.

    python scripts/verl_agent_loop_tito.py           # regenerate the table from the installed verl
    python scripts/verl_agent_loop_tito.py --check   # exit 1 when the committed table differs

verl's agent loops register under a name (`@register("...")`, experimental/agent_loop/agent_loop.py:470) and generate
through `self.server_manager.generate(prompt_ids=...)`: token ids in, token ids out. The rollout servers answer that
call without vLLM's or SGLang's OpenAI serving layer: vLLMHttpServer.generate wraps the ids in a TokensPrompt and calls
`self.engine.generate` (workers/rollout/vllm_rollout/vllm_async_server.py), SGLangHttpServer.generate builds a
GenerateReqInput(input_ids=...) for `tokenizer_manager.generate_request` (sglang_rollout/async_sglang_server.py). So
the tool-call and reasoning parsers and the chat template of that serving layer never see a rollout of these loops;
the tool agent loop decodes the ids and parses tool calls with verl's own ToolParser that rollout.multi_turn.format
names (experimental/agent_loop/tool_agent_loop.py). The table is read from those files with ast: each registered loop
with the line of its server_manager.generate call (null when it has none), the tool parsers verl registers, the
lines that build and run the tool parser, where the loops tokenize the chat with verl's own tokenizer, and each
server's engine_kwargs read and token-in generate path.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_agent_loop_tito.json"
LOOPS = "experimental/agent_loop"
TOOL_LOOP = f"{LOOPS}/tool_agent_loop.py"
PARSERS = f"{LOOPS}/tool_parser.py"
VLLM = "workers/rollout/vllm_rollout/vllm_async_server.py"
SGLANG = "workers/rollout/sglang_rollout/async_sglang_server.py"


def _calls(node: ast.AST, dotted: str) -> list[int]:
    """Lines of calls whose function unparses to `dotted` (e.g. self.server_manager.generate)."""
    return sorted(n.lineno for n in ast.walk(node) if isinstance(n, ast.Call) and ast.unparse(n.func) == dotted)


def _decorated(tree: ast.Module, decorator: str) -> list[tuple[str, ast.ClassDef, int]]:
    """(name, class, line) for each class decorated `@<decorator>("name")`."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and ast.unparse(dec.func) == decorator and dec.args \
                        and isinstance(dec.args[0], ast.Constant) and isinstance(dec.args[0].value, str):
                    out.append((dec.args[0].value, node, dec.lineno))
    return out


def _method(tree: ast.Module, cls: str, name: str) -> ast.AsyncFunctionDef | ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, (ast.AsyncFunctionDef, ast.FunctionDef)) and item.name == name:
                    return item
    raise LookupError(f"{cls}.{name} not found")


def _loops(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted((root / LOOPS).glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, cls, line in _decorated(tree, "register"):
            gen = _calls(cls, "self.server_manager.generate")
            out[name] = {"file": f"{LOOPS}/{path.name}", "class": cls.name, "line": line,
                         "generate_line": gen[0] if gen else None}
    return out


def _tool_loop(root: Path) -> dict[str, Any]:
    tree = ast.parse((root / TOOL_LOOP).read_text(encoding="utf-8"))
    build = _calls(tree, "ToolParser.get_tool_parser")
    extract = _calls(tree, "self.tool_parser.extract_tool_calls")
    parsers = ast.parse((root / PARSERS).read_text(encoding="utf-8"))
    return {"file": TOOL_LOOP, "parser_line": build[0], "extract_line": extract[0],
            "parsers": {name: line for name, _, line in sorted(_decorated(parsers, "ToolParser.register"))}}


def _read_line(tree: ast.Module, engine: str | None) -> int:
    """The line reading the rollout config's engine_kwargs child (`.get("engine_kwargs", {}).get(...)`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and isinstance(node.func.value, ast.Call) and node.func.value.args \
                and isinstance(node.func.value.args[0], ast.Constant) \
                and node.func.value.args[0].value == "engine_kwargs":
            arg = node.args[0] if node.args else None
            if engine is None or (isinstance(arg, ast.Constant) and arg.value == engine):
                return node.lineno
    raise LookupError("engine_kwargs read not found")


def _vllm(root: Path) -> dict[str, Any]:
    tree = ast.parse((root / VLLM).read_text(encoding="utf-8"))
    gen = _method(tree, "vLLMHttpServer", "generate")
    return {"file": VLLM, "engine_kwargs_line": _read_line(tree, None), "generate": gen.lineno,
            "tokens_prompt_line": _calls(gen, "TokensPrompt")[0],
            "engine_generate_line": _calls(gen, "self.engine.generate")[0]}


def _sglang(root: Path) -> dict[str, Any]:
    tree = ast.parse((root / SGLANG).read_text(encoding="utf-8"))
    gen = _method(tree, "SGLangHttpServer", "generate")
    return {"file": SGLANG, "engine_kwargs_line": _read_line(tree, "sglang"), "generate": gen.lineno,
            "request_line": _calls(gen, "GenerateReqInput")[0],
            "engine_generate_line": _calls(gen, "self.tokenizer_manager.generate_request")[0]}


def _template(root: Path) -> dict[str, Any]:
    """Where the agent loops tokenize the chat themselves: the builder AgentLoopBase makes from verl's tokenizer."""
    path = f"{LOOPS}/agent_loop.py"
    init = _method(ast.parse((root / path).read_text(encoding="utf-8")), "AgentLoopBase", "__init__")
    return {"file": path, "builder_line": _calls(init, "create_continuous_token_builder")[0]}


def build_from(root: Path) -> dict[str, Any]:
    return {"loops": _loops(root), "tool_loop": _tool_loop(root), "template": _template(root), "vllm": _vllm(root),
            "sglang": _sglang(root)}


def build() -> dict[str, Any]:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    root = Path(list(spec.submodule_search_locations)[0])
    version = (root / "version" / "version").read_text(encoding="utf-8").strip() \
        if (root / "version" / "version").is_file() else "unknown"
    return {"verl": version, **build_from(root)}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
