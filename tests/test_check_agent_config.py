"""Agent-loop and tool-config rules from round 23's real cases, each against verl 0.9.1's own code on the CPU:

- VI809 (agent loop names): verl registers every `name` of the rollout.agent.agent_loop_config_path file
  (experimental/agent_loop/agent_loop.py:533-539); its own registration lines are run on the planted file, and check
  accepts what they register and still refuses a name in neither (the false error of R23 extra).
- VI780 (verl#6801): the legacy trainer's DataProto.chunk over rollout.agent.num_workers asserts an equal split;
  verl's DataProto raises for 60 rows over 8 and the V1 trainer's TensorDict split does not.
- VI781 (verl#7505): verl's schema models drop undeclared JSON-schema keys; verl's model_validate + model_dump on the
  planted schema loses exactly the keys check names (and the table check reads is regenerated from verl).
- VI858 (R23-01, R23-02): a config.type other than native, and a verl module verl 0.9.1 does not ship, fail for
  certain in verl's tool registry: errors; verl's initialize_tools_from_config is the oracle.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from wizard.check.lint import check
from wizard.check.rules.agentworkers import step_sequences
from wizard.check.rules.toolschema import dropped_keys

ROOT = Path(__file__).resolve().parent.parent
R = "actor_rollout_ref.rollout"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{R}.n=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=2",
        f"{R}.tensor_model_parallel_size=1", f"{R}.name=vllm"]


def _hits(rule: str, *extra: str):
    return [f.problem for f in check(None, [*BASE, *extra]).findings if f.problem.rule == rule]


# --- VI809: names an agent_loop_config_path file registers ---------------------------------------------------------

LOOPS = "- name: math_expression\n  _target_: my_agent_loop.MathExpressionAgentLoop\n"


def _verl_registers(path: Path) -> set[str]:
    """The names verl's own registration lines (AgentLoopWorker.__init__, agent_loop.py:533-539) put in its
    registry for this file. The module does not import on a CPU box without its optional dependencies (cachetools),
    so the lines are cut from verl's source, compiled under its file name and run unchanged with the names they use
    (OmegaConf, verl's resolve_config_path, a fresh registry)."""
    import verl
    from omegaconf import OmegaConf

    from verl.utils.import_utils import resolve_config_path

    file = Path(verl.__file__).parent / "experimental/agent_loop/agent_loop.py"
    src = file.read_text(encoding="utf-8")
    start = src.rfind("\n", 0, src.index("agent_loop_config_path = self.rollout_config.agent")) + 1
    block = textwrap.dedent(src[start:src.index('if self.model_config.get("custom_chat_template"', start)])
    assert "_agent_loop_registry[agent_loop_config.name] = agent_loop_config" in block
    registry: dict[str, Any] = {}
    me = SimpleNamespace(rollout_config=SimpleNamespace(agent=SimpleNamespace(agent_loop_config_path=str(path))))
    scope = {"OmegaConf": OmegaConf, "resolve_config_path": resolve_config_path, "_agent_loop_registry": registry,
             "self": me}
    exec(compile(block, str(file), "exec"), scope)  # noqa: S102 - verl's own lines, on a planted file
    return set(registry)


@pytest.mark.verl
def test_verl_registers_the_files_names(tmp_path):
    path = tmp_path / "agent_loops.yaml"
    path.write_text(LOOPS)
    assert _verl_registers(path) == {"math_expression"}


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_accepts_a_loop_the_file_registers(tmp_path):
    path = tmp_path / "agent_loops.yaml"
    path.write_text(LOOPS)
    given = (f"{R}.agent.agent_loop_config_path={path}",)
    assert not _hits("VI809", f"{R}.agent.default_agent_loop=math_expression", *given)
    [bad] = _hits("VI809", f"{R}.agent.default_agent_loop=math_expr", *given)  # in neither: still the error
    assert bad.severity == "error" and "math_expression" in bad.hint
    [bare] = _hits("VI809", f"{R}.agent.default_agent_loop=math_expression")  # no file: unknown to verl
    assert bare.severity == "error" and "agent_loop_config_path" in bare.hint
    assert not _hits("VI809", f"{R}.agent.default_agent_loop=tool_agent", *given)


def test_an_unreadable_file_leaves_the_name_unverified(tmp_path):
    for value in (tmp_path / "absent.yaml", tmp_path / "bad.yaml"):
        if value.name == "bad.yaml":
            value.write_text("- name: [unclosed\n")
        [hit] = _hits("VI809", f"{R}.agent.default_agent_loop=math_expression",
                      f"{R}.agent.agent_loop_config_path={value}")
        assert hit.severity == "info" and "cannot be verified" in hit.message


# --- VI780: the legacy trainer's equal split over the agent-loop workers --------------------------------------------

@pytest.mark.verl
def test_verl_chunk_needs_an_equal_split_and_v1_does_not():
    import torch
    from tensordict import TensorDict

    from verl.protocol import DataProto

    prompts = DataProto.from_dict({"input_ids": torch.zeros(12, 3, dtype=torch.long)})
    batch = prompts.repeat(repeat_times=5, interleave=True)  # ray_trainer.py:1491
    assert len(batch) == step_sequences(12, 5, remax=False) == 60
    with pytest.raises(AssertionError, match="only support equal chunk"):
        batch.chunk(8)  # agent_loop.py:1247 with the default 8 workers
    assert [len(x) for x in batch.chunk(6)] == [10] * 6  # the hint's divisor
    v1 = TensorDict({"input_ids": torch.zeros(60, 3)}, batch_size=[60])
    assert [x.batch_size[0] for x in v1.chunk(8)] == [8] * 7 + [4]  # trainer/ppo/v1/agent_loop_tq.py:251


@pytest.mark.verl
def test_the_legacy_trainer_chunks_unpadded_and_validation_pads():
    import verl

    root = Path(verl.__file__).parent
    trainer = (root / "trainer/ppo/ray_trainer.py").read_text(encoding="utf-8")
    assert "gen_batch.repeat(repeat_times=rollout_n, interleave=True)" in trainer
    assert "self.async_rollout_manager.generate_sequences(combined_gen_batch)" in trainer
    assert "size_divisor = self.config.actor_rollout_ref.rollout.agent.num_workers" in trainer  # _validate only
    manager = (root / "experimental/agent_loop/agent_loop.py").read_text(encoding="utf-8")
    assert "prompts.chunk(len(self.agent_loop_workers))" in manager


@pytest.mark.slow
def test_check_flags_the_legacy_unequal_split():
    legacy = ("trainer.use_v1=False", "data.train_batch_size=12", f"{R}.n=5", "actor_rollout_ref.actor.ppo_mini_batch_size=4")
    [hit] = _hits("VI780", *legacy)
    assert hit.severity == "error" and "60" in hit.message and "num_workers=6" in hit.hint
    assert not _hits("VI780", *legacy[1:])  # V1, the default, splits unevenly
    assert not _hits("VI780", *legacy, f"{R}.agent.num_workers=6")
    assert not _hits("VI780", *legacy[:2], f"{R}.n=4", legacy[3])  # 48 over 8
    remax = ("trainer.use_v1=False", "data.train_batch_size=10", f"{R}.n=4", "actor_rollout_ref.actor.ppo_mini_batch_size=5")
    assert not _hits("VI780", *remax)  # 40 over 8
    [baseline] = _hits("VI780", *remax, "algorithm.adv_estimator=remax")  # 40 + 10 greedy baselines
    assert "50" in baseline.message and "ReMax" in baseline.message


# --- VI781: tool_schema keys verl's models drop ---------------------------------------------------------------------

SCHEMA: dict[str, Any] = {"type": "function", "function": {
    "name": "read_file", "description": "Read part of a file",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["path"], "properties": {
        "path": {"type": "string", "description": "File path", "pattern": "^[^/].*"},
        "offset": {"type": "integer", "description": "First line", "minimum": 0, "default": 0},
        "mode": {"type": "string", "enum": ["head", "tail"]},
        "symbols": {"type": "array", "description": "Symbols", "items": {"type": "string"}}}}}}
KEPT: dict[str, Any] = {"type": "function", "function": {
    "name": "read_file", "description": "Read part of a file (offset ≥ 0, default 0)", "strict": True,
    "parameters": {"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string", "description": "File path"},
        "mode": {"type": ["string", "null"], "enum": ["head", "tail"]}}}}}


def _lost(given: Any, kept: Any, path: str = "") -> dict[str, list[str]]:
    """The keys of `given` missing from `kept`, per level (the paths dropped_keys uses)."""
    out: dict[str, list[str]] = {}
    if not isinstance(given, dict):
        return out
    gone = sorted(k for k in given if k not in kept)
    if gone:
        out[path] = gone
    for k, v in given.items():
        if k in kept and isinstance(v, dict):
            out.update(_lost(v, kept[k], f"{path}.{k}" if path else k))
    return out


@pytest.mark.verl
@pytest.mark.parametrize("schema", [SCHEMA, KEPT])
def test_verls_models_drop_exactly_what_check_names(schema):
    from verl.tools.schemas import OpenAIFunctionToolSchema

    # tools/tool_registry.py:70, then what the chat template gets (tool_agent_loop.py:119)
    dumped = OpenAIFunctionToolSchema.model_validate(schema).model_dump(exclude_unset=True, exclude_none=True)
    assert _lost(schema, dumped) == dropped_keys(schema)
    assert bool(dropped_keys(schema)) is (schema is SCHEMA)


@pytest.mark.verl
def test_regenerating_gives_the_committed_schema_table():
    from helpers_scripts import regenerated

    committed = (ROOT / "wizard" / "check" / "data" / "verl_tool_schema_fields.json").read_text("utf-8")
    assert regenerated("verl_tool_schema_fields") == committed


def _tool_config(tmp_path: Path, schema: dict[str, Any], kind: str = "native", cls: str = "my_tools.ReadFileTool") -> Path:
    import yaml

    (tmp_path / "my_tools.py").write_text("class ReadFileTool:\n    pass\n")
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"tools": [{"class_name": cls, "config": {"type": kind}, "tool_schema": schema}]}))
    return path


def test_check_names_the_tool_property_and_keys(tmp_path):
    path = _tool_config(tmp_path, SCHEMA)
    [hit] = _hits("VI781", f"{R}.multi_turn.tool_config_path={path}", f"{R}.agent.default_agent_loop=tool_agent")
    assert hit.severity == "warning" and "read_file" in hit.message
    for part in ("property path: pattern", "property offset: default, minimum", "property symbols: items",
                 "function.parameters: additionalProperties"):
        assert part in hit.message
    assert "description" in hit.hint
    kept = _tool_config(tmp_path, KEPT)
    assert not _hits("VI781", f"{R}.multi_turn.tool_config_path={kept}", f"{R}.agent.default_agent_loop=tool_agent")



def test_one_check_reads_the_tool_config_once_and_a_changed_file_again(tmp_path, monkeypatch):
    """VI858 and VI781 share one reader (wizard.check.rules.toolconfig): one read per check, and an edited file is
    read afresh (the cache is keyed on its mtime and size, so a fixed file is not judged by its old text)."""
    import os

    from wizard.check import source

    reads = []
    real = source.read_yaml
    monkeypatch.setattr(source, "read_yaml", lambda path, *a, **k: (reads.append(str(path)), real(path, *a, **k))[1])
    path = _tool_config(tmp_path, SCHEMA)
    args = (f"{R}.multi_turn.tool_config_path={path}", f"{R}.agent.default_agent_loop=tool_agent")
    assert _hits("VI781", *args)
    assert reads.count(str(path)) == 1, reads
    _tool_config(tmp_path, KEPT)  # fixed in place
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
    assert not _hits("VI781", *args)
    assert reads.count(str(path)) == 2, reads

# --- VI858: failures certain from verl's tool registry are errors ---------------------------------------------------

@pytest.mark.verl
def test_verls_registry_refuses_mcp_and_a_removed_module(tmp_path):
    from verl.tools.tool_registry import initialize_tools_from_config

    with pytest.raises(ValueError, match="is not a valid ToolType"):
        initialize_tools_from_config(str(_tool_config(tmp_path, KEPT, kind="mcp")))
    with pytest.raises(AttributeError):  # find_spec is None for the missing submodule (tool_registry.py:41-45)
        initialize_tools_from_config(str(_tool_config(tmp_path, KEPT, cls="verl.tools.sandbox_fusion_tools.SandboxFusionTool")))


def test_check_makes_certain_tool_failures_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the folder verl runs in holds my_tools.py
    loop = f"{R}.agent.default_agent_loop=tool_agent"
    [mcp] = _hits("VI858", f"{R}.multi_turn.tool_config_path={_tool_config(tmp_path, KEPT, kind='mcp')}", loop)
    assert mcp.severity == "error" and "'mcp'" in mcp.message
    interp = _tool_config(tmp_path, KEPT, kind="${oc.env:TOOL_TYPE}")
    [maybe] = _hits("VI858", f"{R}.multi_turn.tool_config_path={interp}", loop)
    assert maybe.severity == "warning"  # resolved where verl runs
    gone = _tool_config(tmp_path, KEPT, cls="other_pkg.tools.Gone")
    [warn] = _hits("VI858", f"{R}.multi_turn.tool_config_path={gone}", loop)
    assert warn.severity == "warning"  # may exist where verl runs
    assert not _hits("VI858", f"{R}.multi_turn.tool_config_path={_tool_config(tmp_path, KEPT)}", loop)


@pytest.mark.verl
def test_check_errors_on_a_verl_module_verl_does_not_ship(tmp_path):
    removed = _tool_config(tmp_path, KEPT, cls="verl.tools.sandbox_fusion_tools.SandboxFusionTool")
    [hit] = _hits("VI858", f"{R}.multi_turn.tool_config_path={removed}", f"{R}.agent.default_agent_loop=tool_agent")
    assert hit.severity == "error" and "ships no module verl.tools.sandbox_fusion_tools" in hit.message
