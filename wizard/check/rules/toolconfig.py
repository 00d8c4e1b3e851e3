"""The tools of a rollout's tool_config_path, read once for every rule that looks at them (VI858 in rules/agent.py,
VI781 in rules/toolschema.py). verl's tool registry reads the file's `tools:` list (tools/tool_registry.py:55-60,
initialize_tools_from_config); here it is read bounded (wizard.check.source.read_yaml) and
nothing in it is imported or run.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wizard.check.rules.context import Ctx, local_path


@dataclass(frozen=True)
class ToolConfig:
    """A tool config as check can see it: `tools` is the `tools:` list, or None with `problem` = (message, hint)
    saying why verl would get no tools from the file. `local` is None where the path is not readable from here (a
    remote or unresolved path): then nothing is known."""

    local: Path | None
    tools: list[Any] | None = None
    problem: tuple[str, str] | None = None


def read_tools(c: Ctx, path: str) -> ToolConfig:
    local = local_path(c, path)
    if local is None:
        return ToolConfig(None)
    if not local.is_file():
        return ToolConfig(local, problem=(
            f"tool_config_path {path} does not exist here ({local})",
            "write the tool config there (a `tools:` list of {class_name, config: {type: native}, tool_schema}), "
            "or fix the path (relative paths resolve from the folder verl runs in)"))
    stat = local.stat()
    tools, problem = _load(str(local), path, stat.st_mtime_ns, stat.st_size)
    return ToolConfig(local, tools, problem)


@functools.lru_cache(maxsize=8)
def _load(local: str, path: str, mtime_ns: int, size: int) -> tuple[list[Any] | None, tuple[str, str] | None]:
    """The `tools:` list or why there is none; cached on the file's mtime and size, so the rules of one check read
    the file once and a file changed since is read again."""
    from wizard.check.source import read_yaml

    try:
        doc: Any = read_yaml(Path(local))
    except Exception as exc:  # noqa: BLE001 - bad YAML, too large, unreadable
        return None, (f"tool_config_path {path} cannot be read: {exc}", "fix the YAML")
    tools = doc.get("tools") if isinstance(doc, dict) else None
    if not isinstance(tools, list) or not tools:
        return None, (f"tool_config_path {path} holds no `tools:` list: verl's tool registry reads tools_config.tools",
                      "write tools: [{class_name: module.Class, config: {type: native}, tool_schema: ...}]")
    return tools, None
