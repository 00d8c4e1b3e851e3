"""Round 86's multi-turn setups that verl refuses only inside its agent-loop workers, each against verl 0.9.1's own
code on the CPU, each with a valid control that stays clean:

- VI691 (verl PR#5114, rollout.yaml's "llama3_json"): a multi_turn.format verl registers no parser for; verl's
  ToolParser.get_tool_parser raises for the planted names and builds the control's; the table check reads is
  regenerated from verl's source and equals verl's live registry.
- VI695 (verl PR#7673): `rollout.multi_turn=True`; verl's own Hydra tree and omega_conf_to_dataclass keep the bool,
  and reading the group's field (agent_loop.py:526) raises AttributeError; multi_turn.enable=True does not.
- VI696 (verl PR#6189): a function-tool file importing verl.tools.utils.function_tool; verl's
  load_function_tools_from_path raises ModuleNotFoundError on it and loads the control file's tool.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.tool_loaders import registered_parsers

ROOT = Path(__file__).resolve().parent.parent
R = "actor_rollout_ref.rollout"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{R}.n=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=2",
        f"{R}.tensor_model_parallel_size=1", f"{R}.name=vllm", f"{R}.agent.default_agent_loop=tool_agent"]
TOOLS = '''from verl.tools.function_tool import function_tool


@function_tool
def {name}(answer: str) -> str:
    """Check an answer.

    Args:
        answer: The final answer.
    """
    return answer
'''


def _findings(*extra: str):
    return check(None, [*BASE, *extra], defaults="snapshot", env={"HOME": "/nonexistent-home"}).findings


def _hits(rule: str, *extra: str):
    return [f.problem for f in _findings(*extra) if f.problem.rule == rule]


def _tools_file(tmp_path: Path, name: str, module: str = "verl.tools.function_tool") -> Path:
    path = tmp_path / f"{name}_tools.py"
    path.write_text(TOOLS.format(name=name).replace("verl.tools.function_tool", module))
    return path


# --- VI691: the parser name --------------------------------------------------------------------------------------

@pytest.mark.verl
def test_the_parser_table_is_verls_registry():
    from helpers_scripts import regenerated

    from wizard.verlspec.toolcall import parsers_module

    committed = (ROOT / "wizard" / "check" / "data" / "verl_tool_parsers.json").read_text("utf-8")
    assert regenerated("verl_tool_parsers") == committed
    assert sorted(parsers_module().ToolParser._registry) == list(registered_parsers())


@pytest.mark.verl
@pytest.mark.parametrize("fmt", ["llama3_json", "qwen"])
def test_verl_refuses_an_unregistered_parser_and_check_says_so(tmp_path, fmt):
    from wizard.verlspec.toolcall import parsers_module

    parser = parsers_module().ToolParser
    with pytest.raises(ValueError, match="Unknown tool parser"):
        parser.get_tool_parser(fmt, None)
    assert parser.get_tool_parser("hermes", None) is not None  # the control builds
    tools = f"{R}.multi_turn.function_tool_path={_tools_file(tmp_path, 'vi691_' + fmt)}"
    [hit] = _hits("VI691", f"{R}.multi_turn.format={fmt}", tools)
    assert hit.severity == "error" and fmt in hit.message and "hermes" in hit.hint
    assert not _hits("VI691", f"{R}.multi_turn.format=hermes", tools)
    assert not _hits("VI691", f"{R}.multi_turn.format=qwen3_coder", tools)
    assert not _hits("VI691", tools)  # verl's default, hermes


def test_a_parser_the_users_module_registers_is_accepted(tmp_path):
    path = tmp_path / "my_tools.py"
    path.write_text(TOOLS.format(name="vi691_own") + '\n\n@ToolParser.register("my_xml")\nclass Mine: ...\n')
    assert not _hits("VI691", f"{R}.multi_turn.format=my_xml", f"{R}.multi_turn.function_tool_path={path}")
    [hit] = _hits("VI691", f"{R}.multi_turn.format=my_xml", f"{R}.multi_turn.function_tool_path={path}.absent")
    assert hit.severity == "warning"  # its module is not readable here: it may register the name


# --- VI695: a group replaced by a scalar -------------------------------------------------------------------------

@pytest.mark.verl
def test_verl_keeps_the_bool_and_fails_reading_the_group():
    import verl
    from hydra import compose, initialize_config_dir

    from verl.utils.config import omega_conf_to_dataclass

    folder = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=folder, version_base=None):
        bad = compose(config_name="ppo_trainer", overrides=[f"{R}.multi_turn=True", f"{R}.name=vllm"])
        good = compose(config_name="ppo_trainer", overrides=[f"{R}.multi_turn.enable=True", f"{R}.name=vllm"])
    rollout = omega_conf_to_dataclass(bad.actor_rollout_ref.rollout)
    assert rollout.multi_turn is True
    with pytest.raises(AttributeError):
        rollout.multi_turn.tool_config_path  # noqa: B018 - agent_loop.py:526's read
    assert omega_conf_to_dataclass(good.actor_rollout_ref.rollout).multi_turn.tool_config_path is None


def test_check_names_the_group_replaced_by_a_value(tmp_path):
    tools = f"{R}.multi_turn.function_tool_path={_tools_file(tmp_path, 'vi695')}"
    [hit] = _hits("VI695", f"{R}.multi_turn=True")  # as multiturn.rst writes it
    assert hit.severity == "error" and hit.keys == (f"{R}.multi_turn",) and f"{R}.multi_turn.enable=True" in hit.hint
    [other] = _hits("VI695", f"{R}.agent=tool_agent")  # any group, not only multi_turn
    assert other.keys == (f"{R}.agent",)
    assert not _hits("VI695", f"{R}.multi_turn.enable=True", tools)


# --- VI696: the function-tool file -------------------------------------------------------------------------------

@pytest.mark.verl
def test_verl_fails_on_the_missing_module_and_loads_the_control(tmp_path):
    from verl.tools.function_tool import load_function_tools_from_path

    bad = _tools_file(tmp_path, "vi696_bad", "verl.tools.utils.function_tool")
    with pytest.raises(ModuleNotFoundError):
        load_function_tools_from_path(str(bad))
    good = _tools_file(tmp_path, "vi696_good")
    assert [t.name for t in load_function_tools_from_path(str(good))] == ["vi696_good"]
    [hit] = _hits("VI696", f"{R}.multi_turn.function_tool_path={bad}")
    assert hit.severity == "error" and "verl.tools.utils.function_tool" in hit.message
    assert "from verl.tools.function_tool import function_tool" in hit.hint
    assert not _hits("VI696", f"{R}.multi_turn.function_tool_path={good}")


def test_a_function_tool_file_that_does_not_parse(tmp_path):
    path = tmp_path / "broken_tools.py"
    path.write_text("def f(:\n")
    [hit] = _hits("VI696", f"{R}.multi_turn.function_tool_path={path}")
    assert hit.severity == "error" and "does not parse" in hit.message
