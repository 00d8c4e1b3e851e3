"""VI910 (default `check`): the parser `rollout.multi_turn.format` names must read the tool call the model's own chat
template writes (real case verl PR#6481: a gpt-oss model left on verl's default hermes parser; no tool is ever called).

The oracle in every case is verl's own parser (experimental/agent_loop/tool_parser.py, ToolParser.get_tool_parser)
run here on the assistant turn the tiny tokenizer's template renders after the generation prompt, as verl's tool
agent loop hands it the response ids (tool_agent_loop.py:300-302): a test fails when the rule's premise does not
hold for the installed verl. The tokenizers are byte-level BPEs with no merges (every text round-trips), built here;
the harmony markers are special tokens, as in gpt-oss's tokenizer, which verl's gpt-oss parser keeps by decoding
with skip_special_tokens=False and strips of the pad token (tool_parser.py:161-164).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from wizard.check.lint import check

pytestmark = pytest.mark.verl

M, R = "actor_rollout_ref.model", "actor_rollout_ref.rollout"
FORMAT = f"{R}.multi_turn.format"
HARMONY_TOKENS = ("<|start|>", "<|end|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|call|>", "<|return|>")
CHATML_TOKENS = ("<|im_start|>", "<|im_end|>")

# Qwen2.5-style hermes: the call as JSON between <tool_call> tags after the generation prompt '<|im_start|>assistant\n'
HERMES = ("{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' }}"
          "{%- if m.content %}{{- m.content }}{%- endif %}"
          "{%- for tc in m.tool_calls or [] %}{%- set f = tc.function %}"
          "{{- '<tool_call>\\n{\"name\": \"' + f.name + '\", \"arguments\": ' }}{{- f.arguments | tojson }}"
          "{{- '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
# gpt-oss-style harmony, in the form the model generates a call: '<|start|>assistant<|channel|>commentary
# to=functions.NAME <|constrain|>json<|message|>ARGS<|call|>'. The model writes the turn's header itself (as a
# gpt-oss response does after its analysis message), so the template adds no generation prompt.
HARMONY = ("{%- for m in messages %}<|start|>{{ m.role }}"
           "{%- if m.tool_calls %}{%- for tc in m.tool_calls %}{%- set f = tc.function %}"
           "<|channel|>commentary to=functions.{{ f.name }} <|constrain|>json<|message|>"
           "{{ f.arguments if f.arguments is string else f.arguments | tojson }}<|call|>{%- endfor %}"
           "{%- else %}<|channel|>final<|message|>{{ m.content }}<|end|>{%- endif %}{%- endfor %}")
# Llama-3.1-style bare JSON with "parameters": no parser of verl 0.9.1 reads it
LLAMA = HERMES.replace("'<tool_call>\\n{\"name\": \"' + f.name + '\", \"arguments\": '",
                       "'{\"name\": \"' + f.name + '\", \"parameters\": '").replace("'}\\n</tool_call>'", "'}'")
# DeepSeek-V3.1/V3.2's layout (verl PR#7635, held-out case R43-04): 'name<｜tool▁sep｜>{json}' inside the
# tool-calls markers, which verl 0.9.1's deepseek_v4 parser (DSML invoke tags) does not read either
DSV3 = ("{%- for m in messages %}{%- if m.role == 'user' %}<｜User｜>{{ m.content }}"
        "{%- elif m.role == 'assistant' %}<｜Assistant｜>{{ m.content or '' }}"
        "{%- if m.tool_calls %}<｜tool▁calls▁begin｜>{%- for tc in m.tool_calls %}<｜tool▁call▁begin｜>"
        "{{ tc.function.name }}<｜tool▁sep｜>{{ tc.function.arguments | tojson }}<｜tool▁call▁end｜>{%- endfor %}"
        "<｜tool▁calls▁end｜>{%- endif %}<｜end▁of▁sentence｜>{%- endif %}{%- endfor %}"
        "{%- if add_generation_prompt %}<｜Assistant｜>{%- endif %}")
DSV3_TOKENS = ("<｜User｜>", "<｜Assistant｜>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
               "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", "<｜end▁of▁sentence｜>")
# a template that ignores tool_calls (the shape of the scratch reproduction's stub)
NO_TOOLS = ("{%- for m in messages %}<|start|>{{ m.role }}<|channel|>final<|message|>{{ m.content }}<|end|>"
            "{%- endfor %}{%- if add_generation_prompt %}<|start|>assistant{%- endif %}")


def _tokenizer(path: Path, template: str, special: tuple[str, ...]) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import AddedToken, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(ByteLevel.alphabet()))}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=special[-1], pad_token="<|endoftext|>",
                                   additional_special_tokens=list(special))
    fast.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<tool_call>", "</tool_call>")])
    fast.chat_template = template
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(path))
    return path


def _verl_parsers():
    """verl's ToolParser class. Its package's __init__ needs cachetools, absent from a plain `pip install verl`:
    wizard.verlspec.toolcall.parsers_module loads tool_parser.py itself then (only a loader, no logic of ours)."""
    from wizard.verlspec.toolcall import parsers_module

    return parsers_module().ToolParser


def _verl_calls(model: Path, parser: str) -> int:
    """How many calls verl's `parser` gives back from the assistant turn the model's template writes for one call."""
    from transformers import AutoTokenizer

    ToolParser = _verl_parsers()  # noqa: N806 - verl's class

    tok = AutoTokenizer.from_pretrained(str(model))
    user = [{"role": "user", "content": "What is the weather in Paris?"}]
    call = {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}
    tools = [{"type": "function", "function": {"name": "f", "description": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]
    prompt = tok.apply_chat_template(user, tools=tools, add_generation_prompt=True, tokenize=False)
    full = tok.apply_chat_template([*user, {"role": "assistant", "content": "", "tool_calls": [call]}], tools=tools,
                                   tokenize=False)
    assert full.startswith(prompt), (prompt, full)
    ids = tok.encode(full[len(prompt):], add_special_tokens=False)
    _, calls = asyncio.run(ToolParser.get_tool_parser(parser, tok).extract_tool_calls(ids))
    assert all(c.name == "f" and json.loads(c.arguments) == {"x": 1} for c in calls)
    return len(calls)


def _findings(model: Path, *extra: str, rule: str = "VI910") -> list:
    report = check(None, [f"{M}.path={model}", f"{R}.name=vllm", f"{R}.multi_turn.enable=true",
                          "trainer.n_gpus_per_node=1", *extra])
    return [f.problem for f in report.findings if f.problem.rule == rule]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tool-format")
    return {"hermes": _tokenizer(root / "hermes", HERMES, CHATML_TOKENS),
            "harmony": _tokenizer(root / "harmony", HARMONY, HARMONY_TOKENS),
            "llama": _tokenizer(root / "llama", LLAMA, CHATML_TOKENS),
            "deepseek-v3": _tokenizer(root / "deepseek-v3", DSV3, DSV3_TOKENS),
            "no-tools": _tokenizer(root / "no-tools", NO_TOOLS, HARMONY_TOKENS)}


def test_hermes_template_with_verls_default_is_clean(models):
    assert _verl_calls(models["hermes"], "hermes") == 1
    assert not _findings(models["hermes"])
    assert not _findings(models["hermes"], f"{FORMAT}=hermes")


def test_harmony_calls_with_hermes_are_an_error_naming_gpt_oss(models):
    assert _verl_calls(models["harmony"], "hermes") == 0  # tool_parser.py:113-114: no <tool_call>, no call
    assert _verl_calls(models["harmony"], "gpt-oss") == 1
    for extra in ((), (f"{FORMAT}=hermes",)):  # verl's default, and hermes written out
        [hit] = _findings(models["harmony"], *extra)
        assert hit.severity == "error" and hit.keys == (FORMAT, f"{M}.path")
        assert "'hermes'" in hit.message and "to=functions.get_weather" in hit.message
        assert "gpt-oss parser reads it" in hit.message and "tool_agent_loop.py:300-308" in hit.message
        assert hit.hint == f"set {FORMAT}=gpt-oss"


def test_harmony_calls_with_the_gpt_oss_parser_are_clean(models):
    assert _verl_calls(models["harmony"], "gpt-oss") == 1
    assert not _findings(models["harmony"], f"{FORMAT}=gpt-oss")


def test_nothing_to_say_without_multi_turn(models):
    report = check(None, [f"{M}.path={models['harmony']}", f"{R}.name=vllm", "trainer.n_gpus_per_node=1"])
    assert "VI910" not in {f.problem.rule for f in report.findings}


def test_calls_no_parser_reads(models):
    """Llama's bare JSON: no parser verl registers reads it. A warning on verl's default, an info on a format the user
    chose (the model may generate its calls in another form than its template renders them)."""
    assert all(_verl_calls(models["llama"], name) == 0 for name in sorted(_verl_parsers()._registry))
    [default] = _findings(models["llama"])
    assert default.severity == "warning" and "no parser verl registers reads it" in default.message
    assert "gpt-oss" in default.hint and "register a ToolParser" in default.hint
    [chosen] = _findings(models["llama"], f"{FORMAT}=hermes")
    assert chosen.severity == "info"


def test_deepseek_v3_calls_no_parser_reads(models):
    """verl PR#7635 (held-out R43-04): a DeepSeek-V3-family model on verl 0.9.1, whose parsers (deepseek_v4's DSML
    included) read none of its calls; with the tokenizer on this machine VI910 says so on verl's default format."""
    assert all(_verl_calls(models["deepseek-v3"], name) == 0 for name in sorted(_verl_parsers()._registry))
    [hit] = _findings(models["deepseek-v3"])
    assert hit.severity == "warning" and "no parser verl registers reads it" in hit.message
    assert "tool▁sep" in hit.message and "deepseek_v4" in hit.message


def test_a_template_that_writes_no_call_is_an_info(models):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(models["no-tools"]))
    call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    assert "get_weather" not in tok.apply_chat_template([{"role": "assistant", "content": "", "tool_calls": [call]}],
                                                        tokenize=False)
    [hit] = _findings(models["no-tools"])
    assert hit.severity == "info" and "writes no tool call" in hit.message


def test_custom_chat_template_is_the_one_compared(tmp_path, models):
    """model.custom_chat_template replaces the tokenizer's (workers/config/model.py:173-177): a hermes model given
    the harmony template is compared as harmony, and the cached tokenizer keeps its own template."""
    config = tmp_path / "cfg.yaml"
    config.write_text(json.dumps({"defaults": ["ppo_trainer", "_self_"],
                                  "actor_rollout_ref": {"model": {"path": str(models["hermes"]),
                                                                  "custom_chat_template": HARMONY},
                                                        "rollout": {"name": "vllm", "multi_turn": {"enable": True}}},
                                  "trainer": {"n_gpus_per_node": 1}}), encoding="utf-8")
    [hit] = [f.problem for f in check(str(config)).findings if f.problem.rule == "VI910"]
    assert hit.severity == "error" and hit.hint == f"set {FORMAT}=gpt-oss"
    assert not _findings(models["hermes"])  # the shared tokenizer still carries the hermes template


def test_deep_keeps_its_own_finding(monkeypatch, models):
    """With --deep, the tools phase's VI863 (verl's run in the sandbox) says the same: VI910 is dropped."""
    import wizard.check.deep as deep
    from wizard.intent.errors import Problem

    vi863 = Problem("VI863", "error", (FORMAT,), "[--deep, tools phase] ...", f"set {FORMAT}=gpt-oss")
    monkeypatch.setattr(deep, "refuse_without_sandbox", lambda flag: None)
    monkeypatch.setattr(deep, "run_deep", lambda *a, **k: SimpleNamespace(problems=[vi863], notes=[], verl=None))
    report = check(None, [f"{M}.path={models['harmony']}", f"{R}.name=vllm", f"{R}.multi_turn.enable=true",
                          "trainer.n_gpus_per_node=1"], deep=True)
    rules = [f.problem.rule for f in report.findings]
    assert "VI863" in rules and "VI910" not in rules


@pytest.mark.slow  # the CLI in a subprocess, tokenizer and verl's parsers loaded
def test_the_cli_flags_a_launch_script(tmp_path, models, cli_env):
    from conftest import run_cli

    tools = tmp_path / "tool_config.yaml"
    tools.write_text("tools: []\n", encoding="utf-8")
    script = tmp_path / "run.sh"
    script.write_text(
        "#!/usr/bin/env bash\nset -x\npython3 -m verl.trainer.main_ppo \\\n"
        "    algorithm.adv_estimator=grpo \\\n"
        f"    {M}.path={models['harmony']} \\\n"
        f"    {R}.name=vllm \\\n"
        f"    {R}.multi_turn.enable=True \\\n"
        f"    {R}.multi_turn.tool_config_path={tools} \\\n"
        f"    {R}.agent.default_agent_loop=tool_agent \\\n"
        "    trainer.n_gpus_per_node=1 trainer.nnodes=1\n", encoding="utf-8")
    r = run_cli(["check", str(script), "--json"], env=cli_env)
    found = [f for f in json.loads(r.stdout)["findings"] if f.get("rule", f.get("id")) == "VI910"]
    assert len(found) == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert found[0]["severity"] == "error" and f"{FORMAT}=gpt-oss" in found[0]["hint"]
    assert r.returncode == 1
