#!/usr/bin/env python3
"""What of a tool config's `tool_schema` verl 0.9.1 keeps: writes wizard/check/data/verl_tool_schema_fields.json,
read by check's VI781.

    python scripts/verl_tool_schema_fields.py           # regenerate the table from the installed verl
    python scripts/verl_tool_schema_fields.py --check   # exit 1 when the committed table differs

verl validates each tool_schema into OpenAIFunctionToolSchema (tools/tool_registry.py:66-71, model_validate) and the
tool agent loop hands the chat template tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True)
(experimental/agent_loop/tool_agent_loop.py:119). A pydantic model keeps only its declared fields (extra="ignore",
pydantic's default), so the table is the tree of verl's own models (verl/tools/schemas.py), walked from
OpenAIFunctionToolSchema through its fields' annotations: each level's field names and extra policy, the fields that
hold one nested model ("children") and those that hold a dict of them ("each", e.g. parameters.properties).
"""

from __future__ import annotations

import sys
import typing
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_tool_schema_fields.json"


def _walk(model: Any) -> dict[str, Any]:
    from pydantic import BaseModel

    def is_model(t: Any) -> bool:
        return isinstance(t, type) and issubclass(t, BaseModel)

    node: dict[str, Any] = {"model": model.__name__, "fields": sorted(model.model_fields),
                            "extra": model.model_config.get("extra") or "ignore", "children": {}, "each": {}}
    for name, field in model.model_fields.items():
        ann = field.annotation
        if is_model(ann):
            node["children"][name] = _walk(ann)
        elif typing.get_origin(ann) is dict and is_model(typing.get_args(ann)[1]):
            node["each"][name] = _walk(typing.get_args(ann)[1])
    return node


def build() -> dict[str, Any]:
    import verl
    from verl.tools.schemas import OpenAIFunctionToolSchema

    return {"verl": verl.__version__, "tool_schema": _walk(OpenAIFunctionToolSchema)}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
