"""RL data and prompt options verl 0.9.1 takes and then does not act on (probe round 28), each shown with verl's own code
(or transformers') on the CPU, then planted in a config `check` must flag, beside controls it must pass:

- VI878 (extended), R28-05: reward_model.ground_truth stored as a number for a data_source whose built-in scorer
  compares strings: gsm8k and MATH score every answer 0, math_dapo raises (verl's default_compute_score is the oracle).
- VI794, R28-06: extra_info.tools_kwargs without the tool-name level: the tool agent loop's _call_tool creates the
  tool with create_kwargs {} (verl's ToolAgentLoop._call_tool is the oracle).
- VI795, R28-01: data.truncation=middle/right/error in an RL run: RLHFDataset stores it and nothing reads it; the agent
  loop's _cap_text_prompt_length keeps the last prompt_length tokens (the oracle).
- VI796, R28-03: data.apply_chat_template_kwargs.enable_thinking with a template that never reads it: transformers'
  apply_chat_template renders the same prompt for True and False (the oracle); a template that reads it differs.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wizard.check.lint import check

R = "actor_rollout_ref.rollout"
CHAT = [{"role": "user", "content": "What is 100+8?"}]
BASE = ["algorithm.adv_estimator=grpo", "data.train_batch_size=2", "data.max_prompt_length=512",
        "data.max_response_length=512", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", f"{R}.name=vllm", f"{R}.n=2",
        f"{R}.tensor_model_parallel_size=1", f"{R}.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1", "trainer.nnodes=1", "trainer.n_gpus_per_node=1"]


def _check(*extra: str, model: str = "Qwen/Qwen2.5-0.5B-Instruct"):
    return check(None, [*BASE, f"actor_rollout_ref.model.path={model}", *extra], defaults="snapshot",
                 env={"HOME": "/nonexistent-home"}, nnodes=1, gpus_per_node=1, gpu_memory_gb=80)


def _hits(rule: str, *extra: str, model: str = "Qwen/Qwen2.5-0.5B-Instruct"):
    return [f.problem for f in _check(*extra, model=model).findings if f.problem.rule == rule]


def _rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _row(i: int, gt=None, ds="openai/gsm8k", tools_kwargs=None) -> dict:
    extra = {"split": "train", "index": i}
    if tools_kwargs is not None:
        extra["tools_kwargs"] = tools_kwargs
    return {"data_source": ds, "prompt": CHAT, "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "108" if gt is None else gt}, "extra_info": extra}


# --- VI878: a ground truth that is not a string -----------------------------------------------------------------------

# a correct response in each scorer's own answer format
SOLUTIONS = {"gsm8k": "So 100 + 8 = 108.\n#### 108", "math_reward": "The sum is \\boxed{108}",
             "math_dapo": "The sum is 108.\nAnswer: 108", "prime_math": "The sum is \\boxed{108}"}


@pytest.mark.slow
@pytest.mark.verl
def test_verl_scores_a_numeric_ground_truth_as_wrong_or_raises():
    from verl.utils.reward_score import default_compute_score

    from wizard.check.rules.datacontent import STRING_GT_SCORERS
    from wizard.planner.dataprep import DEFAULT_SCORERS

    def score(ds, solution, gt):
        res = default_compute_score(ds, solution, gt)
        return res["score"] if isinstance(res, dict) else res  # math_dapo returns {score, acc, pred}

    for scorer, solution in SOLUTIONS.items():
        ds = next(d for d, s in DEFAULT_SCORERS.items() if s == scorer)
        assert score(ds, solution, "108") == 1.0, scorer  # the control: the same answer as a string
        fails = []
        for gt in (108, 108.0, ["108"]):
            try:
                fails.append(score(ds, solution, gt) != 1.0)
            except Exception:  # noqa: BLE001 - math_dapo: AttributeError 'int' object has no attribute 'split'
                fails.append(True)
        # a number decides it (prime_math converts it with str(), :391); in a string scorer a list fails as well
        assert fails[0] == fails[1] == (scorer in STRING_GT_SCORERS), (scorer, fails)
        assert fails[2] or scorer not in STRING_GT_SCORERS


def test_check_flags_a_numeric_ground_truth_for_a_string_scorer(tmp_path):
    bad = _rows(tmp_path / "bad.jsonl", [_row(0), _row(1, gt=108)])
    good = _rows(tmp_path / "good.jsonl", [_row(0), _row(1)])
    [hit] = [h for h in _hits("VI878", f"data.train_files={bad}", f"data.val_files={good}") if "not a string" in h.message]
    assert "row 1" in hit.message and "int 108" in hit.message and "gsm8k.py:69" in hit.message
    assert "validate-dataset" not in hit.hint and "str(" in hit.hint
    [dapo] = _hits("VI878", f"data.train_files={_rows(tmp_path / 'dapo.jsonl', [_row(0, gt=7.5, ds='aime2024')])}",
                   f"data.val_files={good}")
    assert "math_dapo" in dapo.message and "AttributeError" in dapo.message
    # controls: strings, a scorer that converts (prime_math), a custom reward function
    assert not _hits("VI878", f"data.train_files={good}", f"data.val_files={good}")
    numina = _rows(tmp_path / "numina.jsonl", [_row(0, gt=108, ds="numina_olympiads")])
    assert not _hits("VI878", f"data.train_files={numina}", f"data.val_files={good}")
    fn = tmp_path / "r.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")
    assert not _hits("VI878", f"data.train_files={bad}", f"data.val_files={good}",
                     f"reward.custom_reward_function.path={fn}")


# --- VI794 and VI795: verl's agent loop, run in a child (its modules import serving packages a CPU box lacks) ---------

ORACLE = r'''
import asyncio, importlib, json, sys
from types import SimpleNamespace
from unittest import mock
for name in ("transfer_queue", "cachetools", "uvicorn", "fastapi"):  # imported by the rollout modules, unused here
    try:
        importlib.import_module(name)
    except ImportError:
        stub = mock.MagicMock(); stub.__path__ = []; stub.__spec__ = None
        sys.modules[name] = stub
from verl.experimental.agent_loop.agent_loop import AgentLoopBase
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import FunctionCall
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema

seen = []
class Recorder(BaseTool):
    async def create(self, instance_id=None, **kwargs):
        seen.append(kwargs)
        return await super().create(instance_id, **kwargs)

schema = OpenAIFunctionToolSchema.model_validate({"type": "function", "function": {"name": "calc_gsm8k_reward",
    "description": "d", "parameters": {"type": "object", "properties": {}, "required": []}}})
me = SimpleNamespace(tools={"calc_gsm8k_reward": Recorder({}, schema)}, max_tool_response_length=100,
                     tool_response_truncate_side="right")
out = {"create_kwargs": []}
for layout in json.loads(sys.argv[1]):
    seen.clear()
    asyncio.run(ToolAgentLoop._call_tool(me, FunctionCall(name="calc_gsm8k_reward", arguments="{}"), layout,
                                         SimpleNamespace()))
    out["create_kwargs"].append(seen[0]["create_kwargs"])
loop = SimpleNamespace(rollout_config=SimpleNamespace(prompt_length=4))
out["capped"] = AgentLoopBase._cap_text_prompt_length(loop, list(range(10)))
print("ORACLE" + json.dumps(out))
'''

FLAT = {"create_kwargs": {"ground_truth": "108"}}
KEYED = {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "108"}}}


@pytest.fixture(scope="module")
def agent_loop_oracle():
    pytest.importorskip("verl")
    run = subprocess.run([sys.executable, "-c", ORACLE, json.dumps([FLAT, KEYED])], capture_output=True, text=True,
                         timeout=300)
    line = next((x for x in run.stdout.splitlines() if x.startswith("ORACLE")), None)
    assert line, run.stderr[-3000:]
    return json.loads(line[len("ORACLE"):])


@pytest.mark.slow
@pytest.mark.verl
def test_verls_tool_loop_gives_a_flat_tools_kwargs_to_no_tool(agent_loop_oracle):
    from wizard.check.rules.toolkwargs import misplaced_keys

    flat, keyed = agent_loop_oracle["create_kwargs"]
    assert flat == {} and keyed == {"ground_truth": "108"}
    names = {"calc_gsm8k_reward"}
    assert misplaced_keys(FLAT, names) == ["create_kwargs"] and misplaced_keys(KEYED, names) == []


TOOLS = textwrap.dedent("""\
    tools:
      - class_name: verl.tools.base_tool.BaseTool
        config: {type: native}
        tool_schema:
          type: function
          function:
            name: calc_gsm8k_reward
            description: reward
            parameters: {type: object, properties: {answer: {type: string}}, required: [answer]}
    """)


def test_check_flags_tools_kwargs_without_the_tool_name(tmp_path):
    tools = tmp_path / "tools.yaml"
    tools.write_text(TOOLS)
    given = (f"{R}.multi_turn.enable=True", f"{R}.multi_turn.tool_config_path={tools}")
    bad = _rows(tmp_path / "bad.jsonl", [_row(i, tools_kwargs=FLAT) for i in range(2)])
    good = _rows(tmp_path / "good.jsonl", [_row(i, tools_kwargs=KEYED) for i in range(2)])
    [hit] = _hits("VI794", f"data.train_files={bad}", f"data.val_files={good}", *given)
    assert hit.severity == "warning" and "'create_kwargs'" in hit.message and "tool_agent_loop.py:485" in hit.message
    assert "{'calc_gsm8k_reward': {'create_kwargs': ...}}" in hit.hint
    other = _rows(tmp_path / "other.jsonl", [_row(0, tools_kwargs={"calc": {"create_kwargs": {}}})])
    [typo] = _hits("VI794", f"data.train_files={other}", f"data.val_files={good}", *given)
    assert "keys that name no tool" in typo.message
    # controls: keyed by the tool's name, no tools_kwargs, no tool config
    assert not _hits("VI794", f"data.train_files={good}", f"data.val_files={good}", *given)
    plain = _rows(tmp_path / "plain.jsonl", [_row(0)])
    assert not _hits("VI794", f"data.train_files={plain}", f"data.val_files={plain}", *given)
    assert not _hits("VI794", f"data.train_files={bad}", f"data.val_files={bad}")


@pytest.mark.verl
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_verl_stores_truncation_and_the_agent_loop_cuts_the_start(agent_loop_oracle):
    import verl

    root = Path(verl.__file__).parent
    reads = []
    for file in [root / "utils/dataset/rl_dataset.py", *sorted((root / "experimental/agent_loop").glob("*.py"))]:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "truncation":
                reads.append((file.name, type(node.ctx).__name__))
    assert reads == [("rl_dataset.py", "Store")]  # self.truncation = config.get("truncation", "error"), never read
    assert agent_loop_oracle["capped"] == [6, 7, 8, 9]  # the last prompt_length tokens: the start is cut


def test_check_warns_on_truncation_rl_does_not_apply():
    for value in ("middle", "right", "error"):
        [hit] = _hits("VI795", f"data.truncation={value}", "data.filter_overlong_prompts=False")
        assert hit.severity == "warning" and "agent_loop.py:437-445" in hit.message
        assert "data.filter_overlong_prompts=True" in hit.hint
    # controls: left (what happens), the filter on, verl's default left unset, a custom dataset class
    assert not _hits("VI795", "data.truncation=left")
    assert not _hits("VI795", "data.truncation=middle", "data.filter_overlong_prompts=True")
    assert not _hits("VI795")
    assert not _hits("VI795", "data.truncation=middle", "data.custom_cls.path=my_ds.py", "data.custom_cls.name=MyDS")


# --- VI796: a chat-template kwarg the template never reads ------------------------------------------------------------

IGNORES = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
           "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
READS = IGNORES[:-len("{% endif %}")] + ("{% if enable_thinking is defined and enable_thinking is false %}"
                                         "<think>\n\n</think>\n\n{% endif %}{% endif %}")


def _model(tiny_model: Path, dest: Path, template: str) -> Path:
    shutil.copytree(tiny_model, dest)
    (dest / "chat_template.jinja").write_text(template)
    return dest


@pytest.mark.verl
def test_transformers_renders_the_same_prompt_when_the_template_ignores_the_kwarg(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    from wizard.check.rules.prompt_options import CALL_PARAMETERS, template_variables

    for name, template, differs in (("ignores", IGNORES, False), ("reads", READS, True)):
        tok = AutoTokenizer.from_pretrained(_model(tiny_model, tmp_path / name, template))
        on, off = (tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True, enable_thinking=v)
                   for v in (True, False))
        assert (on != off) == differs == ("enable_thinking" in template_variables(tok.chat_template)), name
    import inspect

    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    params = set(inspect.signature(PreTrainedTokenizerBase.apply_chat_template).parameters) - {"self", "kwargs"}
    assert params == CALL_PARAMETERS  # the rest of the mapping goes to the template


def test_check_warns_on_a_kwarg_the_local_template_never_reads(tiny_model, tmp_path):
    ignores, reads = _model(tiny_model, tmp_path / "ignores", IGNORES), _model(tiny_model, tmp_path / "reads", READS)
    kwarg = "+data.apply_chat_template_kwargs.enable_thinking=False"
    [hit] = _hits("VI796", kwarg, model=str(ignores))
    assert hit.severity == "warning" and "never reads `enable_thinking`" in hit.message
    assert hit.keys == ("data.apply_chat_template_kwargs.enable_thinking",)
    # a template given in the config replaces the folder's: the one that reads it silences the warning
    assert not _hits("VI796", kwarg, f"actor_rollout_ref.model.custom_chat_template='{READS}'", model=str(ignores))
    # controls: the template reads it, a hub model not on this machine, apply_chat_template's own parameter
    assert not _hits("VI796", kwarg, model=str(reads))
    assert not _hits("VI796", kwarg)
    assert not _hits("VI796", "+data.apply_chat_template_kwargs.tokenize=False", model=str(ignores))
