"""reward/reward_fn.py, as rendered into a bundle: verl's custom-reward signature, and a scorer that
really scores each answer_format (correct -> 1.0, wrong or missing -> 0.0)."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_answers import answers
from hypothesis import given, settings
from hypothesis import strategies as st

import wizard


def load_scorer(tmp_path: Path, fmt: str):
    data = tmp_path / "qa.jsonl"  # a real local file: a missing one is refused at plan time (VI539)
    data.write_text("".join(f'{{"question": "{i}+1?", "answer": "{i + 1}"}}\n' for i in range(600)))
    files = wizard.render(wizard.plan(answers(reward="function", dataset="./qa.jsonl", answer_format=fmt),
                                      base_dir=str(tmp_path)))
    path = tmp_path / f"reward_fn_{fmt}.py"
    path.write_text(files["reward/reward_fn.py"])
    spec = importlib.util.spec_from_file_location(f"reward_fn_{fmt}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scorers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reward")
    return {fmt: load_scorer(tmp, fmt) for fmt in ("number", "boxed", "text")}


def test_signature_is_verls(scorers):
    for module in scorers.values():
        params = list(inspect.signature(module.compute_score).parameters)
        assert params[:4] == ["data_source", "solution_str", "ground_truth", "extra_info"]
        assert inspect.signature(module.compute_score).parameters["extra_info"].default is None
        # verl calls it with keywords, plus reward_kwargs
        assert module.compute_score(data_source="x", solution_str="#### 3", ground_truth="3", extra_info={},
                                    some_reward_kwarg=1) in (0.0, 1.0)


NUMBER = [
    ("Tom has 3 + 4 = 7 apples.\n#### 7", "7", 1.0),
    ("The answer is 1,234.", "1234", 1.0),
    ("So she earns $2,400 in total.", "2,400", 1.0),
    ("Half of 9 is 4.5", "4.5", 1.0),
    ("It is 4.0 exactly", "4", 1.0),
    ("#### -3", "-3", 1.0),
    ("3/4 of the cake", "0.75", 1.0),
    ("#### 7 ... wait, I mean 8", "7", 0.0),  # the last number after '####' counts: 8
    ("#### 8", "7", 0.0),
    ("I do not know.", "7", 0.0),
    ("", "7", 0.0),
]


@pytest.mark.parametrize("response,truth,expected", NUMBER)
def test_number(scorers, response, truth, expected):
    assert scorers["number"].compute_score("openai/gsm8k", response, truth) == expected


BOXED = [
    ("so $\\boxed{\\frac{3}{4}}$.", "\\frac{3}{4}", 1.0),
    ("so $\\boxed{\\dfrac{3}{4}}$", "\\frac{3}{4}", 1.0),
    ("so $\\boxed{\\frac34}$", "\\frac{3}{4}", 1.0),
    ("so $\\boxed{3/4}$", "\\frac{3}{4}", 1.0),
    ("\\boxed{x = 5}", "5", 1.0),
    ("\\boxed{ 0.5 }", "\\frac{1}{2}", 1.0),
    ("\\boxed{x^6}", "x^6", 1.0),
    ("\\boxed{10\\%}", "10", 1.0),
    ("first \\boxed{4} then \\boxed{5}", "5", 1.0),
    ("\\boxed{\\text{(B)}}", "(B)", 1.0),
    ("\\boxed{4}", "5", 0.0),
    ("The answer is 5", "5", 0.0),  # not boxed: no credit
    ("\\boxed{5", "5", 0.0),  # unbalanced
]


@pytest.mark.parametrize("response,truth,expected", BOXED)
def test_boxed(scorers, response, truth, expected):
    assert scorers["boxed"].compute_score("math", response, truth) == expected


TEXT = [
    ("Let me think.\nAnswer: Paris", "Paris", 1.0),
    ("answer: the Red Planet, Mars.", "the red planet mars", 1.0),
    ("It is William Shakespeare.\nAnswer: William Shakespeare!", "William Shakespeare", 1.0),
    ("I think it is Mars", "Mars", 0.0),  # last line is the whole sentence
    ("Mars", "Mars", 1.0),  # no 'Answer:': the last line
    ("Answer: Venus", "Mars", 0.0),
]


@pytest.mark.parametrize("response,truth,expected", TEXT)
def test_text(scorers, response, truth, expected):
    assert scorers["text"].compute_score("trivia", response, truth) == expected


def test_none_inputs_score_zero(scorers):
    for module in scorers.values():
        assert module.compute_score("x", None, "1") == 0.0
        assert module.compute_score("x", "1", None) == 0.0


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=-10**9, max_value=10**9), filler=st.text(alphabet="abc xyz.,\n", max_size=40))
def test_number_property(scorers, n, filler):
    score = scorers["number"].compute_score
    assert score("d", f"{filler}\n#### {n}", str(n)) == 1.0
    assert score("d", f"{filler}\n#### {n}", f"{n:,}") == 1.0
    assert score("d", f"{filler}\n#### {n + 1}", str(n)) == 0.0


@settings(max_examples=100, deadline=None)
@given(a=st.integers(min_value=1, max_value=999), b=st.integers(min_value=1, max_value=999))
def test_boxed_property(scorers, a, b):
    score = scorers["boxed"].compute_score
    assert score("d", f"so \\boxed{{\\frac{{{a}}}{{{b}}}}}", f"\\frac{{{a}}}{{{b}}}") == 1.0
    assert score("d", f"so \\boxed{{{a}}}", str(a)) == 1.0
    assert score("d", f"so \\boxed{{{a}}}", str(a + 1)) == 0.0


def test_command_line_try_out(tmp_path):
    files = wizard.render(wizard.plan(answers(reward="function"), base_dir="/runs"))
    path = tmp_path / "reward_fn.py"
    path.write_text(files["reward/reward_fn.py"])
    r = subprocess.run([sys.executable, str(path), "The total is 3+4 = 7. #### 7", "7"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "1.0"


@pytest.mark.verl
@pytest.mark.parametrize("fmt,data_source,response,truth", [
    ("number", "openai/gsm8k", "3 + 4 = 7\n#### 7", "7"),
    ("boxed", "DigitalLearningGmbH/MATH-lighteval", "so $\\boxed{\\frac{3}{4}}$.", "\\frac{3}{4}"),
])
def test_agrees_with_verls_own_scorer_on_its_format(scorers, fmt, data_source, response, truth):
    from verl.utils.reward_score import default_compute_score

    for resp in (response, response.replace("7", "8").replace("3}{4", "2}{3")):
        assert scorers[fmt].compute_score(data_source, resp, truth) == default_compute_score(data_source, resp, truth)
