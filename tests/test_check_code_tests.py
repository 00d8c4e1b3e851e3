"""VI637 / VI638: code rows' test cases that verl 0.9.1's code scorers cannot use, or that any answer passes.

The oracle is verl's own default_compute_score on a correct (or a raising) solution: through its sandbox client
against the local run_code stand-in (wizard.smoketest.sandbox_stub: the only fake is the network boundary), and
through prime_code without a URL. Rows are written here; nothing is downloaded."""

from __future__ import annotations

import ast
import inspect
import json

import pytest

from wizard.check.rules.code_tests import passes_anything, unusable
from wizard.planner.dataprep import CODE_DATA_SOURCES
from wizard.smoketest.sandbox_stub import SandboxStandIn

RIGHT = "```python\ndef isMagic(n):\n    return 1 if n in (1, 19) else 0\n```"
RAISES = "```python\ndef isMagic(n):\n    raise ValueError('no')\n```"
# PRIME-RL/Eurus-2-RL-Data's call-based form (verl PR #2199): each input a list of arguments, each output a list
EURUS = json.dumps({"fn_name": "isMagic", "inputs": [[1237], [12], [19]], "outputs": [[0], [0], [1]]})
# the same cases as verl reads them: one JSON value per argument per line, outputs as the text the wrapper prints
TEXT = json.dumps({"fn_name": "isMagic", "inputs": ["1237", "12", "19"], "outputs": ["0", "0", "1"]})
INT_OUT = json.dumps({"fn_name": "isMagic", "inputs": ["1237", "19"], "outputs": [0, 1]})
EMPTY_OUT = json.dumps({"fn_name": "isMagic", "inputs": ["1237"], "outputs": [""]})
NULL_OUT = json.dumps({"fn_name": "isMagic", "inputs": ["1237"], "outputs": [None]})
REAL_OUT = json.dumps({"fn_name": "isMagic", "inputs": ["1237"], "outputs": ["0"]})
STDIN = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})


def test_code_sources_are_verls_sandbox_routing():
    """CODE_DATA_SOURCES is the list verl's default_compute_score sends to the sandbox (read from verl's source)."""
    from verl.utils import reward_score

    tree = ast.parse(inspect.getsource(reward_score.default_compute_score))
    routed = [n for n in ast.walk(tree) if isinstance(n, ast.If)
              and "sandbox_fusion" in ast.unparse(n.body[0]) and isinstance(n.test, ast.Compare)]
    assert routed, "verl's sandbox branch moved: regenerate CODE_DATA_SOURCES"
    assert tuple(ast.literal_eval(routed[0].test.comparators[0])) == CODE_DATA_SOURCES


def test_verl_scores_a_right_answer_0_on_the_flagged_form_and_1_on_the_control():
    from verl.utils.reward_score import default_compute_score

    with SandboxStandIn() as sb:
        for ds in ("apps", "taco"):
            assert default_compute_score(ds, RIGHT, EURUS, sandbox_fusion_url=sb.url) == 0.0
            assert default_compute_score(ds, RIGHT, TEXT, sandbox_fusion_url=sb.url) == 1.0
        assert sb.calls  # the sandbox was called: the 0 is verl's comparison, not a refused request
    assert default_compute_score("apps", RIGHT, EURUS) == 0.0  # prime_code (no URL)
    assert default_compute_score("apps", RIGHT, TEXT) == 1.0
    assert default_compute_score("apps", RIGHT, INT_OUT) == 0.0  # prime_code json.loads each call-based output
    for sandbox in (True, False):
        assert "is a list, not text" in unusable(EURUS, sandbox)
        assert unusable(TEXT, sandbox) is None and unusable(STDIN, sandbox) is None
    assert unusable(INT_OUT, sandbox=True) is None  # the sandbox compares str(0) == "0": fine there
    assert "not JSON text" in unusable(INT_OUT, sandbox=False)
    trailing = json.dumps({"fn_name": "isMagic", "inputs": ["19\n"], "outputs": ["1"]})
    with SandboxStandIn() as sb:
        assert default_compute_score("apps", RIGHT, trailing, sandbox_fusion_url=sb.url) == 0.0
    assert default_compute_score("apps", RIGHT, trailing) == 0.0
    assert "a trailing newline counts" in unusable(trailing, True) and "a trailing newline" in unusable(trailing, False)
    assert "not JSON" in unusable("print(3)", True) and "2 inputs but 1 outputs" in unusable(
        json.dumps({"inputs": ["1", "2"], "outputs": ["3"]}), True)


def test_verl_passes_a_raising_answer_on_an_empty_or_null_output():
    from verl.utils.reward_score import default_compute_score

    with SandboxStandIn() as sb:
        assert default_compute_score("apps", RAISES, EMPTY_OUT, sandbox_fusion_url=sb.url) == 1.0
        assert default_compute_score("apps", RAISES, NULL_OUT, sandbox_fusion_url=sb.url) == 1.0
        assert default_compute_score("apps", RAISES, REAL_OUT, sandbox_fusion_url=sb.url) == 0.0
    # prime_code (no URL): an empty call-based output passes every answer, a raising one included
    assert default_compute_score("apps", RAISES, EMPTY_OUT) == 1.0
    assert default_compute_score("apps", RAISES, NULL_OUT) == 0.0  # null: prime_code fails the case (VI637 there)
    assert "all([]) is True" in passes_anything(EMPTY_OUT, sandbox=False)
    assert passes_anything(NULL_OUT, sandbox=False) is None and "not JSON text" in unusable(NULL_OUT, False)
    assert "empty" in passes_anything(EMPTY_OUT) and "null" in passes_anything(NULL_OUT)
    assert passes_anything(REAL_OUT) is None and passes_anything(STDIN) is None
    assert passes_anything(json.dumps({"assert_case": ["assert isMagic(1) == 1"]})) is None  # the assert decides


def _rows(path, truth, source="apps", n=8):
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = {"data_source": source, "prompt": [{"role": "user", "content": "Write isMagic(n) in ```python```."}],
           "ability": "code", "reward_model": {"style": "rule", "ground_truth": truth}, "extra_info": {"index": 0}}
    pq.write_table(pa.Table.from_pylist([row] * n), path)
    return path


BASE = ["algorithm.adv_estimator=grpo", "data.train_batch_size=4", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", "trainer.n_gpus_per_node=1", "trainer.nnodes=1"]
URL = "reward.sandbox_fusion.url=http://127.0.0.1:8080/run_code"


def _found(train, *extra):
    from wizard.check.lint import check

    report = check(None, BASE + [f"data.train_files={train}", f"data.val_files={train}", *extra],
                   defaults="snapshot", env={"HOME": "/nonexistent-home"}, nnodes=1, gpus_per_node=1, gpu_memory_gb=80)
    return {f.problem.rule: f.problem for f in report.findings if f.problem.rule in ("VI637", "VI638")}


@pytest.mark.parametrize("extra", [(URL,), ()], ids=["sandbox", "prime_code"])
def test_check_flags_eurus_call_based_rows_and_passes_text_rows(tmp_path, extra):
    found = _found(_rows(tmp_path / "eurus.parquet", EURUS), *extra)
    assert set(found) == {"VI637"} and found["VI637"].severity == "error"
    assert "[1237]" in found["VI637"].message and "data.train_files" in found["VI637"].keys
    assert _found(_rows(tmp_path / "text.parquet", TEXT), *extra) == {}
    assert _found(_rows(tmp_path / "stdin.parquet", STDIN, source="codecontests"), *extra) == {}
    # a custom reward function scores instead of verl's code scorers: nothing to say about their input
    assert _found(tmp_path / "eurus.parquet", *extra, "reward.custom_reward_function.path=/x/r.py") == {}
    # rows of other data_sources are not code rows for verl
    assert _found(_rows(tmp_path / "math.parquet", EURUS, source="openai/gsm8k"), *extra) == {}


def test_check_warns_on_cases_a_raising_answer_passes(tmp_path):
    found = _found(_rows(tmp_path / "empty.parquet", EMPTY_OUT), URL)
    assert set(found) == {"VI638"} and found["VI638"].severity == "warning"
    assert _found(_rows(tmp_path / "real.parquet", REAL_OUT), URL) == {}
    assert set(_found(tmp_path / "empty.parquet")) == {"VI638"}  # prime_code passes every answer there
    assert set(_found(_rows(tmp_path / "null.parquet", NULL_OUT), URL)) == {"VI638"}
    assert set(_found(tmp_path / "null.parquet")) == {"VI637"}  # prime_code fails every answer there
