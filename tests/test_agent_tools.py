"""Multi-turn tool calling (agent=tool): answers → plan → bundle, proven against verl 0.9.1's own code on CPU.

verl's tool registry loads the rendered tool config and the tool scores answers; verl's RLHFDataset reads the rows
data/prepare_data.py writes (agent_name, extra_info.tools_kwargs); verify_with_verl accepts the profile; `check`
and `validate-dataset` flag the agentic mistakes (tools that never fire, rows without the tool fields, a tool class
that does not import).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import wizard
from helpers_answers import answers
from wizard.intent.errors import WizardError
from wizard.verlspec.arithmetic import turn_budget

OFFLINE = Path(wizard.__file__).parent / "offline_data"  # GSM8K-style rows in the hub's train/test layout
PRE = "actor_rollout_ref.rollout"


def _rules(exc: pytest.ExceptionInfo) -> set[str]:
    return {p.rule for p in exc.value.problems}


def _bundle(tmp_path: Path, a) -> Path:
    return wizard.write_bundle(wizard.render(wizard.plan(a, base_dir=str(tmp_path))), tmp_path / "b")


# --- arithmetic ---------------------------------------------------------------------------------------------

def test_turn_budget_counts_tool_replies_against_the_response():
    b = turn_budget(2048, 3, 256)
    assert (b.tool_replies, b.tool_tokens, b.assistant_tokens, b.per_turn) == (2, 512, 1536, 512)
    assert turn_budget(512, 1, 256).tool_tokens == 0  # one turn: no tool reply comes back into the response
    assert turn_budget(600, 3, 256).per_turn == 29


# --- answers and planner ------------------------------------------------------------------------------------

def test_single_turn_default_sets_no_agent_key():
    plan = wizard.plan(answers())
    assert not [k for k in plan.settings if "multi_turn" in k or ".agent." in k]
    assert "verl_init_tools/tool_config.yaml" not in wizard.render(plan)


def test_agent_tool_sets_verls_multi_turn_keys():
    plan = wizard.plan(answers(agent="tool", max_response_length=2048, max_turns=4))
    v = plan.value
    assert v(f"{PRE}.multi_turn.enable") is True and v(f"{PRE}.mode") == "async"
    assert v(f"{PRE}.multi_turn.max_assistant_turns") == 4
    assert v(f"{PRE}.multi_turn.tool_config_path") == "verl_init_tools/tool_config.yaml"
    assert v(f"{PRE}.agent.default_agent_loop") == "tool_agent" and v(f"{PRE}.multi_turn.format") == "hermes"
    assert "3 replies take at most 768 of the 2048" in plan.settings[f"{PRE}.multi_turn.max_tool_response_length"].reason


@pytest.mark.parametrize("changes,rule", [
    (dict(tool="gsm8k"), "VI560"),
    (dict(max_turns=3), "VI560"),
    (dict(agent="tool", dataset="math"), "VI561"),
    (dict(agent="tool", max_response_length=600, max_turns=3), "VI562"),
    (dict(agent="tool", tool="no_such_module_xyz.Tool"), "VI563"),
])
def test_agent_refusals(changes, rule):
    with pytest.raises(WizardError) as exc:
        wizard.plan(answers(**changes))
    assert rule in _rules(exc)
    (p,) = [p for p in exc.value.problems if p.rule == rule]
    assert p.hint


def test_short_response_hint_names_values_that_pass():
    with pytest.raises(WizardError) as exc:
        wizard.plan(answers(agent="tool", max_response_length=600, max_turns=3))
    (p,) = [p for p in exc.value.problems if p.rule == "VI562"]
    assert "max_response_length ≥ 896" in p.hint and "max_turns ≤ 2" in p.hint
    wizard.plan(answers(agent="tool", max_response_length=896, max_turns=3))
    wizard.plan(answers(agent="tool", max_response_length=600, max_turns=2))


def test_tool_must_be_gsm8k_or_a_class_path():
    with pytest.raises(WizardError) as exc:
        wizard.make_answers({"agent": "tool", "tool": "my tool"})
    assert "tool" in exc.value.problems[0].line() and "module.Class" in exc.value.problems[0].hint + \
        exc.value.problems[0].message


def test_tool_import_is_bounded_in_time_and_output(tmp_path):
    from wizard.planner.agent import import_problem

    (tmp_path / "slow_tool.py").write_text("import time\ntime.sleep(60)\n")
    (tmp_path / "loud_tool.py").write_text("import sys\nsys.stderr.write('x' * 5_000_000)\nraise ImportError('boom')\n")
    assert "took longer than 1 s" in import_problem("slow_tool.T", str(tmp_path), 1.0)
    assert import_problem("loud_tool.T", str(tmp_path)).endswith("ImportError: boom")


def test_unimportable_tool_is_a_warning_off_this_machine():
    plan = wizard.plan(answers(agent="tool", tool="no_such_module_xyz.Tool", cluster="ray"))
    assert "VI563" in {p.rule for p in plan.findings}


def test_own_train_files_get_a_warning(tmp_path):
    (tmp_path / "t.parquet").write_bytes(b"PAR1")
    plan = wizard.plan(answers(agent="tool", train_files="t.parquet", val_files="t.parquet"), base_dir=str(tmp_path))
    assert "VI564" in {p.rule for p in plan.findings}


# --- the bundle, through verl's own code ---------------------------------------------------------------------

def test_rendered_gsm8k_tool_loads_through_verls_tool_registry(tmp_path):
    from wizard.verify.harness import load_tools

    bundle = _bundle(tmp_path, answers(agent="tool"))
    cfg = yaml.safe_load((bundle / "verl_init_tools" / "tool_config.yaml").read_text())
    assert cfg["tools"][0]["class_name"] == "verl_init_tools.gsm8k_tool.Gsm8kTool"
    (tool,) = load_tools(bundle, "verl_init_tools/tool_config.yaml")  # verl's initialize_tools_from_config
    assert tool.name == "calc_gsm8k_reward"

    async def call(answer: str) -> tuple:
        iid, _ = await tool.create(create_kwargs={"ground_truth": "72"})  # as tool_agent_loop.py:486 calls it
        try:
            return await tool.execute(iid, {"answer": answer})
        finally:
            await tool.release(iid)

    right, wrong = asyncio.run(call("72")), asyncio.run(call("71"))
    assert right[2] == {"score": 1.0} and "is correct" in right[0].text
    assert wrong[2] == {"score": 0.0} and "not correct" in wrong[0].text


def test_users_own_tool_class_is_named_in_the_tool_config(tmp_path):
    (tmp_path / "my_tools.py").write_text(
        "from verl.tools.base_tool import BaseTool\n"
        "from verl.tools.schemas import OpenAIFunctionToolSchema\n"
        "class Echo(BaseTool):\n"
        "    def get_openai_tool_schema(self):\n"
        "        return OpenAIFunctionToolSchema.model_validate({'type': 'function', 'function': {'name': 'echo',\n"
        "            'description': 'echo', 'parameters': {'type': 'object', 'properties': {}, 'required': []}}})\n")
    plan = wizard.plan(answers(agent="tool", tool="my_tools.Echo"), base_dir=str(tmp_path))
    (warning,) = [p for p in plan.findings if p.rule == "VI563"]  # beside the answers, not in the bundle
    assert warning.severity == "warning" and "copy my_tools.py" in warning.hint
    files = wizard.render(plan)
    assert "verl_init_tools/gsm8k_tool.py" not in files
    cfg = yaml.safe_load(files["verl_init_tools/tool_config.yaml"])
    assert cfg["tools"] == [{"class_name": "my_tools.Echo", "config": {"type": "native"}, "tool_schema": None}]
    bundle = wizard.write_bundle(files, tmp_path / "b")
    (tmp_path / "b" / "my_tools.py").write_text((tmp_path / "my_tools.py").read_text())
    from wizard.verify.harness import load_tools

    (tool,) = load_tools(bundle, "verl_init_tools/tool_config.yaml")
    assert tool.name == "echo"
    again = wizard.plan(answers(agent="tool", tool="my_tools.Echo"), base_dir=str(tmp_path), bundle_dir="b")
    assert "VI563" not in {p.rule for p in again.findings}  # the bundle folder carries it now


@pytest.mark.slow
@pytest.mark.verl
def test_multiturn_profile_is_accepted_by_verl(tmp_path, tiny_model):
    from wizard.verify.harness import compose_bundle, verify_with_verl

    bundle = _bundle(tmp_path, wizard.load_profile("multiturn-gsm8k-tool"))
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, report.summary()
    names = {c.name for c in report.checks}
    assert {"agent loop registry (default_agent_loop; agent_loop.py:678)", "tool parser registry (multi_turn.format)",
            "tool registry loads tool_config_path (tool_registry.py:initialize_tools_from_config)"} <= names
    cfg = compose_bundle(bundle)
    assert cfg.actor_rollout_ref.rollout.multi_turn.enable is True
    assert cfg.data.tool_config_path == "verl_init_tools/tool_config.yaml"  # verl's data section interpolates it
    plan_md = (bundle / "PLAN.md").read_text()
    assert "## Multi-turn tool calling" in plan_md
    assert "2048 tokens = up to 2 tool replies × 256 tokens (512" in plan_md and "1536 tokens of the model's own" in plan_md


@pytest.mark.verl
def test_the_harness_rejects_a_tool_config_verl_cannot_load(tmp_path, tiny_model):
    from wizard.verify.harness import verify_with_verl

    bundle = _bundle(tmp_path, answers(agent="tool"))
    path = bundle / "verl_init_tools" / "tool_config.yaml"
    path.write_text(path.read_text().replace("gsm8k_tool.Gsm8kTool", "gsm8k_tool.Missing"))
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert not report.ok and any("tool registry" in c.name for c in report.failures), report.summary()


def test_prepare_data_writes_tool_rows_verls_dataset_reads(tmp_path, tiny_model):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    from verl.utils.dataset.rl_dataset import RLHFDataset

    bundle = _bundle(tmp_path, answers(agent="tool", max_prompt_length=1024))
    out = tmp_path / "data"
    r = subprocess.run([sys.executable, str(bundle / "data" / "prepare_data.py"), "--local-dir", str(OFFLINE),
                        "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    ds = RLHFDataset(data_files=[str(out / "train.parquet")], tokenizer=AutoTokenizer.from_pretrained(str(tiny_model)),
                     config=OmegaConf.create({"max_prompt_length": 1024, "filter_overlong_prompts": False}))
    item = ds[0]
    truth = item["reward_model"]["ground_truth"]
    assert item["agent_name"] == "tool_agent"
    assert item["tools_kwargs"] == {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": truth}}}
    assert "calc_gsm8k_reward" in item["raw_prompt"][0]["content"] and item["raw_prompt"][0]["role"] == "system"

    from wizard.env.datasets import Options, validate

    report = validate([str(out / "train.parquet")], Options(agent="tool", tool_name="calc_gsm8k_reward"))
    assert report.ok and not [f for f in report.findings if f.rule.startswith("VI56")], report.findings


# --- validate-dataset and check flag the agentic mistakes ------------------------------------------------------

def _rows(tmp_path: Path, **row_changes) -> Path:
    import json

    row = {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "1+1?"}],
           "reward_model": {"style": "rule", "ground_truth": "2"},
           "extra_info": {"index": 0, "tools_kwargs": {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "2"}}}},
           "agent_name": "tool_agent"}
    for key, value in row_changes.items():
        if value is None:
            row.pop(key, None)
        else:
            row[key] = value
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return path


@pytest.mark.parametrize("changes,rule,severity", [
    (dict(agent_name=None), "VI566", "warning"),
    (dict(extra_info={"index": 0}), "VI567", "error"),
    (dict(agent_name="react_agent"), "VI568", "warning"),
])
def test_validate_dataset_flags_rows_without_tool_fields(tmp_path, changes, rule, severity):
    from wizard.env.datasets import Options, validate

    path = str(_rows(tmp_path, **changes))
    found = {(f.rule, f.severity) for f in validate([path], Options(agent="tool", tool_name="calc_gsm8k_reward")).findings}
    assert (rule, severity) in found
    assert not {f.rule for f in validate([path], Options()).findings} & {"VI566", "VI567", "VI568"}
    clean = str(_rows(tmp_path))
    assert not {f.rule for f in validate([clean], Options(agent="tool", tool_name="calc_gsm8k_reward")).findings} & \
        {"VI566", "VI567", "VI568"}


def test_validate_dataset_cli_takes_agent_tool(tmp_path, cli_env):
    from conftest import run_cli

    path = _rows(tmp_path, agent_name=None, extra_info={"index": 0})
    r = run_cli(["validate-dataset", str(path), "--agent", "tool", "--tool-name", "calc_gsm8k_reward"], env=cli_env)
    assert r.returncode == 1 and "VI566" in r.stdout and "VI567" in r.stdout


def test_check_finds_tools_that_never_fire(tmp_path):
    """The mistake users hit: a multi-turn bundle whose default agent loop is put back to single_turn_agent, with
    rows that name no agent loop: verl runs and never calls the tool."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from wizard.check.lint import check

    bundle = _bundle(tmp_path, answers(agent="tool"))
    data = bundle / "data"
    pq.write_table(pa.table({"prompt": ["q"] * 4}), data / "train.parquet")
    pq.write_table(pa.table({"prompt": ["q"] * 4}), data / "val.parquet")
    assert "VI855" not in check(str(bundle)).ids()
    report = check(str(bundle), [f"{PRE}.agent.default_agent_loop=single_turn_agent"])
    assert "VI855" in report.ids("error"), [f.problem.line() for f in report.findings]
    pq.write_table(pa.table({"prompt": ["q"] * 4, "agent_name": ["tool_agent"] * 4}), data / "train.parquet")
    assert "VI855" not in check(str(bundle), [f"{PRE}.agent.default_agent_loop=single_turn_agent"]).ids()


def test_check_finds_a_response_budget_too_short_for_the_turns():
    """The planner's VI562 arithmetic on an existing script (VI866; real case verl#3619: 1024 response tokens for
    10 turns). Written out: 10 turns → 9 tool replies × 256 characters (verl's default max_tool_response_length,
    ≤ 256 tokens) = 2304 > 1024, nothing left for the model. 4096 and 3 turns: 4096 - 2 × 256 = 3584, 1194 a turn."""
    from wizard.check.lint import check

    base = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct", f"{PRE}.multi_turn.enable=true",
            f"{PRE}.agent.default_agent_loop=tool_agent", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
    short = check(None, base + [f"{PRE}.multi_turn.max_assistant_turns=10", "data.max_response_length=1024"])
    [hit] = [f.problem for f in short.findings if f.problem.rule == "VI866"]
    assert hit.severity == "warning" and "9 tool replies of up to 256 characters" in hit.message
    assert "data.max_response_length ≥ 3584" in hit.hint  # 2304 + 10 × 128
    assert "max_assistant_turns ≤ 3" in hit.hint  # 1024 - 2 × 256 = 512: 170 a turn; 4 turns: 256 / 4 = 64 < 128
    fits = check(None, base + [f"{PRE}.multi_turn.max_assistant_turns=3", "data.max_response_length=4096"])
    assert "VI866" not in fits.ids()
    unlimited = check(None, base + ["data.max_response_length=1024"])  # no turn limit: no worst case to count
    assert "VI866" not in unlimited.ids()


def test_check_finds_a_tool_class_that_does_not_import(tmp_path):
    from wizard.check.lint import check

    bundle = _bundle(tmp_path, answers(agent="tool"))
    path = bundle / "verl_init_tools" / "tool_config.yaml"
    assert "VI858" not in check(str(bundle)).ids()
    path.write_text(path.read_text().replace("verl_init_tools.gsm8k_tool", "verl_init_tools.gone_tool"))
    report = check(str(bundle))
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI858"]
    assert "verl_init_tools.gone_tool.Gsm8kTool" in hit.message and "does not import" in hit.message
    path.write_text(path.read_text().replace("verl_init_tools.gone_tool.Gsm8kTool", "verl_init_tools.gsm8k_tool.Gone"))
    (hit,) = [f.problem for f in check(str(bundle)).findings if f.problem.rule == "VI858"]
    assert "gsm8k_tool.py defines no Gone" in hit.message  # read statically from the bundle's own module


def test_sampler_draws_multi_turn_plans():
    from sampler import sample

    drawn = [sample(seed) for seed in range(200)]
    assert sum(d.get("agent") == "tool" for d in drawn) >= 20


# --- the CPU smoke run: what it covers of a multi-turn bundle, and what it says it does not -----------------------

SMOKE = dict(gpu_type="cpu", gpus_per_node=1, gpu_memory_gb=16, model="./tiny-model", model_params_b=0.001,
             dataset="gsm8k", max_prompt_length=256, max_response_length=128, prompts_per_step=8, samples_per_prompt=4,
             updates_per_step=2, total_steps=1, save_freq=-1, test_freq=-1, agent="tool", max_turns=1)


@pytest.mark.verl
@pytest.mark.slow
def test_cpu_smoke_loads_the_tools_and_checks_the_tool_rows(tmp_path):
    from conftest import ROOT
    from wizard.smoketest.report import format_report
    from wizard.smoketest.run import SmokeOptions

    b = _bundle(tmp_path, answers(**SMOKE))
    options = SmokeOptions(engine="cpu", data_dir=str(ROOT / "tests" / "data" / "gsm8k"))
    r = wizard.smoke(b, options=options)
    assert r.ok, format_report(r) + "\n" + r.log_tail[-3000:]
    checks = {c.name: c for c in r.checks}
    assert checks["tools load through verl's tool registry"].ok is True
    assert "calc_gsm8k_reward" in checks["tools load through verl's tool registry"].detail
    assert checks["multi-turn rollout with tool calls"].ok is None  # said, not claimed
    assert "tools_kwargs checked" in checks["dataset_schema"].detail

    # rows without the tool fields (a prepare_data.py edited back to single-turn rows) fail the data phase
    script = b / "data" / "prepare_data.py"
    script.write_text(script.read_text().replace("TOOL_NAME = 'calc_gsm8k_reward'", "TOOL_NAME = None"))
    r = wizard.smoke(b, options=options)
    assert not r.ok and r.failure is not None and r.failure.phase == "data", format_report(r)
    assert "VI567" in r.failure.message
