"""`check --deep`, tools phase (VI863): the parser `rollout.multi_turn.format` names must read the tool call the
model's own chat template writes (wizard.verlspec.toolcall). The oracles are verl's own ToolParser classes
(experimental/agent_loop/tool_parser.py) and the template rendered by transformers' apply_chat_template.

The templates below reproduce how three model families write one tool call (the rest of each template is cut to
the chat markers): Qwen2.5's hermes JSON in <tool_call> tags, Qwen3-Coder's XML <function=...><parameter=...>
in the same tags (a real mistake: `format=hermes`, verl's default, on Qwen3-Coder), and Llama 3.1's bare JSON with
"parameters", which no parser of verl 0.9.1 reads. The tokenizer is byte-level, so every text round-trips.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.verl

HEAD = ("{%- if tools %}{{- '<|im_start|>system\\n# Tools\\n' }}{%- for t in tools %}{{- t | tojson }}{%- endfor %}"
        "{{- '<|im_end|>\\n' }}{%- endif %}"
        "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' }}"
        "{%- if message.content %}{{- message.content }}{%- endif %}"
        "{%- for tool_call in message.tool_calls or [] %}{%- set tool_call = tool_call.function %}")
TAIL = ("{%- endfor %}{{- '<|im_end|>\\n' }}{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
CALLS = {
    # Qwen2.5-7B-Instruct's tokenizer_config.json: '\n<tool_call>\n{"name": "' ... tool_call.arguments | tojson
    "hermes": "{{- '<tool_call>\\n{\"name\": \"' + tool_call.name + '\", \"arguments\": ' }}"
              "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}",
    # Qwen3-Coder-30B-A3B-Instruct's chat_template.jinja: <function=NAME> and one <parameter=KEY> per argument
    "qwen3_coder": "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"
                   "{%- for k, v in tool_call.arguments | items %}{{- '<parameter=' + k + '>\\n' + v + "
                   "'\\n</parameter>\\n' }}{%- endfor %}{{- '</function>\\n</tool_call>' }}",
    # Llama-3.1-8B-Instruct: {"name": ..., "parameters": ...} with no tags
    "llama": "{{- '{\"name\": \"' + tool_call.name + '\", \"parameters\": ' }}{{- tool_call.arguments | tojson }}"
             "{{- '}' }}",
}
NO_TOOLS = ("{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
            "'<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
            "{%- endif %}")


def _tokenizer(path: Path, template: str) -> Path:
    """A byte-level BPE with no merges (every text round-trips) and the chat markers as added tokens: <tool_call>
    is an added, non-special token, as in Qwen's tokenizers (so decode keeps it)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import AddedToken, PreTrainedTokenizerFast

    alphabet = ByteLevel.alphabet()
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(alphabet))}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=["<|im_start|>"])
    fast.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<tool_call>", "</tool_call>")])
    fast.chat_template = template
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(path))
    return path


def _load(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


@pytest.mark.parametrize("family, readers", [("hermes", ["hermes"]), ("qwen3_coder", ["qwen3_coder"]),
                                             ("llama", [])])
def test_the_parsers_that_read_each_familys_tool_call(tmp_path, family, readers):
    from wizard.verlspec.toolcall import ARGUMENTS, NAME, probe

    found = probe(_load(_tokenizer(tmp_path / family, HEAD + CALLS[family] + TAIL)))
    assert found.rendered is not None and NAME in found.rendered and "<|im_start|>assistant" not in found.rendered
    assert found.readers == readers, (found.rendered, found.readers)
    if family == "hermes":  # the rendered turn is the model's, after the generation prompt
        body = found.rendered.split("<tool_call>\n")[1].split("\n</tool_call>")[0]
        assert json.loads(body) == {"name": NAME, "arguments": ARGUMENTS}


def test_a_template_without_tools_renders_no_call(tmp_path):
    from wizard.verlspec.toolcall import probe

    found = probe(_load(_tokenizer(tmp_path / "plain", NO_TOOLS)))
    assert found.rendered is None and found.readers == [] and found.reason


def _config(tmp_path: Path, model: Path, fmt: str, multi_turn: bool = True) -> str:
    (tmp_path / "cfg.yaml").write_text(textwrap.dedent(f"""\
        defaults:
          - ppo_trainer
          - _self_
        algorithm: {{adv_estimator: grpo}}
        data: {{train_batch_size: 4, max_prompt_length: 64, max_response_length: 32}}
        actor_rollout_ref:
          model: {{path: {model}}}
          actor: {{ppo_mini_batch_size: 4, ppo_micro_batch_size_per_gpu: 1}}
          rollout: {{name: sglang, n: 2, log_prob_micro_batch_size_per_gpu: 1, tensor_model_parallel_size: 1,
                     multi_turn: {{enable: {str(multi_turn).lower()}, format: {fmt}}}}}
          ref: {{log_prob_micro_batch_size_per_gpu: 1}}
        trainer: {{n_gpus_per_node: 1, nnodes: 1, logger: [console]}}
        """), encoding="utf-8")
    return str(tmp_path / "cfg.yaml")


def _tools(report) -> list:
    return [f.problem for f in report.findings if f.problem.rule == "VI863"]


@pytest.mark.slow  # verl's code in the sandbox, three times
def test_deep_names_the_parser_that_reads_the_models_calls(tmp_path, tiny_model):
    """End to end, in the sandbox: Qwen3-Coder's template with verl's default hermes parser is an error whose fix
    names qwen3_coder; with qwen3_coder, or without multi-turn, there is nothing to say."""
    from wizard.check.lint import check
    from wizard.smoketest.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "coder")
    _tokenizer(model, HEAD + CALLS["qwen3_coder"] + TAIL)
    [wrong] = _tools(check(_config(tmp_path, model, "hermes"), deep=True))
    assert wrong.keys == ("actor_rollout_ref.rollout.multi_turn.format",) and "tools phase" in wrong.message
    assert "'hermes'" in wrong.message and "<function=get_weather>" in wrong.message
    assert wrong.hint == "set actor_rollout_ref.rollout.multi_turn.format=qwen3_coder"
    assert not _tools(check(_config(tmp_path, model, "qwen3_coder"), deep=True))
    assert not _tools(check(_config(tmp_path, model, "hermes", multi_turn=False), deep=True))


@pytest.mark.slow  # verl's code in the sandbox
def test_deep_says_when_no_parser_reads_the_models_calls(tmp_path):
    from wizard.check.lint import check
    from wizard.smoketest.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "llama")
    _tokenizer(model, HEAD + CALLS["llama"] + TAIL)
    report = check(_config(tmp_path, model, "hermes"), deep=True)
    # no parser reads the rendering, which is then no proof (gpt-oss's own template renders calls in another order
    # than the model writes them): the sandbox notes it, and the default check's VI910 says it (an info: this config
    # names the format itself)
    assert not _tools(report)
    [none] = [f.problem for f in report.findings if f.problem.rule == "VI910"]
    assert none.severity == "info" and "no parser verl registers reads it" in none.message


# --- the planner: the format the bundle writes ---------------------------------------------------------------

def _plan(model: Path):
    import wizard
    from helpers_answers import answers

    return wizard.plan(answers(agent="tool", model=str(model), model_params_b=0.5, max_response_length=2048))


@pytest.mark.parametrize("family, fmt, warned", [("hermes", "hermes", False), ("qwen3_coder", "qwen3_coder", False),
                                                 ("llama", "hermes", True)])
def test_the_planner_writes_the_parser_that_reads_the_models_calls(tmp_path, family, fmt, warned):
    """A local model folder: the bundle's multi_turn.format is the verl parser that reads the tool call its chat
    template writes (verl's default hermes where it does); none reads it → VI569, a warning before GPUs are booked."""
    from wizard.smoketest.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / family)
    _tokenizer(model, HEAD + CALLS[family] + TAIL)
    plan = _plan(model)
    setting = plan.settings["actor_rollout_ref.rollout.multi_turn.format"]
    assert setting.value == fmt, setting.reason
    assert ("VI569" in {p.rule for p in plan.findings}) is warned
    if not warned:
        assert "chat template writes" in setting.reason and "get_weather" in setting.reason


def test_the_planner_keeps_verls_default_for_a_hub_model():
    import wizard
    from helpers_answers import answers

    plan = wizard.plan(answers(agent="tool", max_response_length=2048))
    setting = plan.settings["actor_rollout_ref.rollout.multi_turn.format"]
    assert setting.value == "hermes" and "check --deep --model-dir" in setting.reason
    assert "VI569" not in {p.rule for p in plan.findings}
