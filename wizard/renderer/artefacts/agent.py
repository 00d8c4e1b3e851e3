"""Bundle files for multi-turn tool calling (see renderer.ARTEFACT_PROVIDERS), rendered when agent=tool:
`verl_init_tools/tool_config.yaml` (rollout.multi_turn.tool_config_path, in the form verl's
tools/tool_registry.py:initialize_tools_from_config reads), the package's `__init__.py`, and with tool=gsm8k the
tool itself, `verl_init_tools/gsm8k_tool.py` (verl 0.9.1 ships none; wizard.planner.agent says why and where).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wizard.planner import agent

if TYPE_CHECKING:
    from wizard.planner.state import Plan
    from wizard.renderer.render import Artefact

# The OpenAI function schema the model sees for tool=gsm8k (verl.tools.schemas.OpenAIFunctionToolSchema).
GSM8K_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": agent.GSM8K_TOOL_NAME,
        "description": "Check an answer to the math question: replies whether it is correct (score 1) or not (score 0).",
        "parameters": {
            "type": "object",
            "properties": {
                "answer": {"type": "string", "description": "The final answer to the question: a number, digits only."},
            },
            "required": ["answer"],
        },
    },
}


def tool_config(tool: str) -> dict[str, Any]:
    """The tool config verl's registry reads: one native tool."""
    return {"tools": [{
        "class_name": agent.tool_class(tool),
        "config": {"type": "native"},
        "tool_schema": GSM8K_SCHEMA if tool == "gsm8k" else None,
    }]}


def bundle_paths(plan: "Plan") -> list[str]:
    """The bundle paths of the tool files (what a KubeRay ConfigMap carries to the pods); [] without agent=tool."""
    return [art.template.removesuffix(".j2") for art in artefacts(plan)]


def artefacts(plan: "Plan") -> "list[Artefact]":
    from wizard.renderer.render import Artefact, dump_yaml

    facts = plan.facts.get("agent")
    if facts is None:
        return []
    tool = facts["tool"]
    out = [Artefact(f"{agent.TOOLS_DIR}/__init__.py.j2"),
           Artefact(f"{agent.TOOLS_DIR}/tool_config.yaml.j2", {"tool_config_yaml": dump_yaml(tool_config(tool))})]
    if tool == "gsm8k":
        out.append(Artefact(f"{agent.TOOLS_DIR}/gsm8k_tool.py.j2", {"tool_name": agent.GSM8K_TOOL_NAME}))
    return out
