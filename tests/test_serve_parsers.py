"""VI692: serving-layer options under rollout.engine_kwargs that verl's own agent loops never reach (round 78).

Real cases: verl PR#6844 (with #6560 and #3911), vLLM's enable_auto_tool_choice + tool_call_parser set for a
tool-agent rollout, and verl#6424, a reasoning parser expected to strip <think> before tool parsing.

The oracle is verl's own source and code: scripts/verl_agent_loop_tito.py's table regenerates unchanged, the lines it
cites hold the token-in generate path and the format parser, verl's RolloutConfig takes the planted option without a
word, and verl's own ToolParser classes show that the parser rollout.multi_turn.format names, not the engine's, decides
whether a tool call is read.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest
from helpers_scripts import regenerated

from wizard.check.lint import check

SPEC = importlib.util.find_spec("verl")
VERL = Path(SPEC.origin).parent if SPEC and SPEC.origin else None
DATA = Path(__file__).resolve().parent.parent / "wizard" / "check" / "data"
R = "actor_rollout_ref.rollout"
BASE = ["algorithm.adv_estimator=grpo", "data.train_files=/d/train.parquet", "data.val_files=/d/val.parquet",
        "data.train_batch_size=16", "data.max_prompt_length=512", "data.max_response_length=1024",
        "actor_rollout_ref.model.path=Qwen/Qwen3-4B", f"{R}.name=vllm", f"{R}.n=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
TOOLS = [f"{R}.multi_turn.enable=True", f"{R}.agent.default_agent_loop=tool_agent",
         f"{R}.multi_turn.function_tool_path=/d/tools.py", f"{R}.multi_turn.max_assistant_turns=4"]
# one tool call as Qwen3-Coder writes it (its chat template's XML form)
CODER_CALL = "<tool_call>\n<function=calc>\n<parameter=answer>\n42\n</parameter>\n</function>\n</tool_call>"


def _hits(*extra: str, base: list[str] = BASE):
    report = check(None, [*base, *extra], defaults="snapshot", env={"HOME": "/nonexistent-home"})
    return [f.problem for f in report.findings if f.problem.rule == "VI692"]


def _table() -> dict:
    return json.loads((DATA / "verl_agent_loop_tito.json").read_text(encoding="utf-8"))


def _src(rel: str) -> list[str]:
    assert VERL is not None
    return (VERL / rel).read_text(encoding="utf-8").splitlines()


@pytest.mark.verl
def test_the_table_is_verls_source():
    if VERL is None:
        pytest.skip("verl is not installed")
    assert regenerated("verl_agent_loop_tito") == (DATA / "verl_agent_loop_tito.json").read_text(encoding="utf-8")


@pytest.mark.verl
def test_verls_loops_generate_token_ids_past_the_serving_layer():
    """The lines the finding cites: each loop calls server_manager.generate with prompt ids, the servers hand ids to
    the engine (TokensPrompt / GenerateReqInput(input_ids)), the loops tokenize with verl's tokenizer, and the tool
    loop builds its parser from multi_turn.format."""
    if VERL is None:
        pytest.skip("verl is not installed")
    t = _table()
    assert set(t["loops"]) >= {"single_turn_agent", "tool_agent"}
    for loop in t["loops"].values():
        src = _src(loop["file"])
        assert "self.server_manager.generate(" in src[loop["generate_line"] - 1]
        assert "prompt_ids=" in "\n".join(src[loop["generate_line"] - 1:loop["generate_line"] + 4])
    v, s = t["vllm"], t["sglang"]
    vs, ss = _src(v["file"]), _src(s["file"])
    assert "TokensPrompt(" in vs[v["tokens_prompt_line"] - 1]
    assert "self.engine.generate(" in vs[v["engine_generate_line"] - 1]
    assert '"engine_kwargs"' in vs[v["engine_kwargs_line"] - 1]
    assert "GenerateReqInput(" in ss[s["request_line"] - 1]
    assert '"input_ids": prompt_ids' in "\n".join(ss[s["generate"] - 1:s["request_line"]])
    tl = t["tool_loop"]
    assert "multi_turn.format" in _src(tl["file"])[tl["parser_line"] - 1]
    assert "create_continuous_token_builder(" in _src(t["template"]["file"])[t["template"]["builder_line"] - 1]


@pytest.mark.verl
def test_verls_rollout_config_takes_the_option_without_a_word():
    if VERL is None:
        pytest.skip("verl is not installed")
    from verl.workers.config.rollout import RolloutConfig

    cfg = RolloutConfig(name="vllm", engine_kwargs={"vllm": {"tool_call_parser": "qwen3_coder",
                                                             "enable_auto_tool_choice": True}})
    assert cfg.engine_kwargs["vllm"]["tool_call_parser"] == "qwen3_coder" and cfg.multi_turn.format == "hermes"


class _Tok:
    """What the parsers need of a tokenizer: decode() of the response ids (here: the text itself)."""

    pad_token = "<|endoftext|>"

    def decode(self, ids, **_):
        return CODER_CALL


@pytest.mark.verl
def test_verls_format_parser_decides_not_the_engines():
    """verl's ToolParser the tool loop builds from multi_turn.format (hermes by default) reads no call from a
    Qwen3-Coder turn; the one named qwen3_coder, the value the engine option carried, reads it."""
    if VERL is None:
        pytest.skip("verl is not installed")
    from wizard.verlspec.toolcall import parsers_module  # verl's tool_parser.py, by file when the package won't load

    ToolParser = parsers_module().ToolParser

    def calls(fmt: str):
        return asyncio.run(ToolParser.get_tool_parser(fmt, _Tok()).extract_tool_calls([1, 2, 3]))[1]

    assert calls("hermes") == []
    [call] = calls("qwen3_coder")
    assert call.name == "calc" and "42" in call.arguments


def test_tool_parser_on_the_tool_loop():
    [hit] = [h for h in _hits(*TOOLS, f"+{R}.engine_kwargs.vllm.tool_call_parser=qwen3_coder")]
    assert hit.severity == "warning" and "qwen3_coder" in hit.message and "'hermes'" in hit.message
    assert f"{R}.multi_turn.format=qwen3_coder" in hit.hint


def test_auto_tool_choice_and_reasoning_parser_each_named():
    hits = _hits(*TOOLS, f"+{R}.engine_kwargs.vllm.enable_auto_tool_choice=True",
                 f"+{R}.engine_kwargs.vllm.reasoning_parser=qwen3")
    assert sorted(h.keys[0].rsplit(".", 1)[1] for h in hits) == ["enable_auto_tool_choice", "reasoning_parser"]
    [reasoning] = [h for h in hits if "reasoning_parser" in h.keys[0]]
    assert "no reasoning parser" in reasoning.message and "tool parser" in reasoning.message


def test_sglang_chat_template_on_the_single_turn_loop():
    base = [x if x != f"{R}.name=vllm" else f"{R}.name=sglang" for x in BASE]
    [hit] = _hits(f"+{R}.engine_kwargs.sglang.chat_template=/d/t.jinja", base=base)
    assert "async_sglang_server.py" in hit.message and "custom_chat_template" in hit.hint
    [tool] = _hits(f"+{R}.engine_kwargs.sglang.tool_call_parser=qwen25", base=base)
    assert "no tool call is parsed" in tool.message


def test_controls_stay_clean():
    # no engine option; a parser switched off; another engine's child (VI988's business); a custom loop registered
    # by agent_loop_config_path may call the chat-completion endpoint, where the options apply
    assert _hits(*TOOLS) == []
    assert _hits(*TOOLS, f"+{R}.engine_kwargs.vllm.enable_auto_tool_choice=False") == []
    assert _hits(*TOOLS, f"+{R}.engine_kwargs.sglang.tool_call_parser=qwen25") == []
    assert _hits(*TOOLS, f"+{R}.engine_kwargs.vllm.tool_call_parser=hermes",
                 f"{R}.agent.agent_loop_config_path=/d/loops.yaml") == []
    assert _hits(f"+{R}.engine_kwargs.vllm.max_num_seqs=256") == []
