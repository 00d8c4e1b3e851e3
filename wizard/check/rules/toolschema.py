"""Tool schemas verl 0.9.1 cuts down before the model sees them (paths under site-packages/verl):

- VI781 (warning): a tool_config_path tool's `tool_schema` uses JSON-schema keys verl's schema models do not declare
  (minimum, maximum, default, pattern, an array's items, additionalProperties, ...). verl validates the schema into
  OpenAIFunctionToolSchema (tools/tool_registry.py:66-71); pydantic keeps only the declared fields
  (tools/schemas.py:21-55: a property keeps type, description and enum), and the tool agent loop renders
  tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True) into the chat template
  (experimental/agent_loop/tool_agent_loop.py:119). The model never reads the dropped constraints while the tool may
  still enforce them (real case verl#7505). The kept fields come from wizard/check/data/verl_tool_schema_fields.json,
  which scripts/verl_tool_schema_fields.py derives from verl's own models, so check needs no verl (nor imports it);
  the file is read once for both rules (wizard.check.rules.toolconfig), the tool's code is never imported.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from wizard.check.rules.context import R, Ctx, Facts
from wizard.check.shellargs import PLACEHOLDER

KEY = f"{R}.multi_turn.tool_config_path"


@functools.lru_cache(maxsize=1)
def schema_table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_tool_schema_fields.json").read_text(encoding="utf-8")
    return json.loads(text)["tool_schema"]


def dropped_keys(schema: Any, node: dict[str, Any] | None = None, path: str = "") -> dict[str, list[str]]:
    """{path: keys} of a tool_schema that verl's models drop ("" the schema itself, "function.parameters",
    "function.parameters.properties.NAME", ...). Only levels whose model ignores extra keys lose them."""
    node = schema_table() if node is None else node
    if not isinstance(schema, dict):
        return {}
    out: dict[str, list[str]] = {}
    lost = sorted(str(k) for k in schema if k not in node["fields"])
    if lost and node.get("extra", "ignore") == "ignore":
        out[path] = lost
    for name, child in node["children"].items():
        out.update(dropped_keys(schema.get(name), child, f"{path}.{name}" if path else name))
    for name, child in node["each"].items():
        items = schema.get(name)
        if isinstance(items, dict):
            for item, sub in items.items():
                out.update(dropped_keys(sub, child, f"{path}.{name}.{item}" if path else f"{name}.{item}"))
    return out


def _where(path: str) -> str:
    prefix = "function.parameters.properties."
    return f"property {path[len(prefix):]}" if path.startswith(prefix) else (path or "the schema's top level")


def rule_tool_schema(c: Ctx, f: Facts) -> None:
    from wizard.check.rules.toolconfig import read_tools

    value = c.v(KEY)
    if not isinstance(value, str) or not value or PLACEHOLDER in value or c.unknown(KEY):
        return
    tools = read_tools(c, value).tools  # None: VI858 speaks about a missing, unreadable or empty file
    for i, tool in enumerate(tools or []):
        schema = tool.get("tool_schema") if isinstance(tool, dict) else None
        lost = dropped_keys(schema)
        if not lost:
            continue
        function = schema.get("function") if isinstance(schema.get("function"), dict) else {}
        name = function.get("name") or tool.get("class_name") or f"tool {i}"
        parts = "; ".join(f"{_where(p)}: {', '.join(keys)}" for p, keys in lost.items())
        c.add("VI781", "warning", (KEY,),
              f"tool {name} in {value}: verl drops {parts} from its tool_schema before the model sees it (verl's "
              "schema models keep a property's type, description and enum only, tools/schemas.py:21-55; the chat "
              "template gets their model_dump, tool_agent_loop.py:119): the model never learns these constraints",
              "state each constraint (bounds, default, pattern, an array's item type) in the property's description "
              "text, and have the tool check its arguments")
