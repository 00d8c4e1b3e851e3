"""verl's overlong-prompt filter counted at plan time with the model's local tokenizer (VI541, VI542), checked
against verl's own RLHFDataset on what the bundle's data/prepare_data.py writes; and the planner's copy of
prepare_data.py's prompt building (wizard.planner.dataprep.prompt_of) against the rendered script itself."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import wizard
from wizard.intent.answers import make_answers
from wizard.intent.errors import WizardError
from wizard.planner.pipeline import plan

SHORT = "What is {i} plus 1 ?"
LONG = "Read this long story first . " + "the answer is near " * 20 + "What is {i} plus 1 ?"


def _base(model: Path | str, **changes):
    data = dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=24, model=str(model), prompts_per_step=64,
                samples_per_prompt=4, updates_per_step=1, max_prompt_length=128, max_response_length=64)
    data.update(changes)
    return make_answers(data)


def _write(path: Path, n: int, n_long: int) -> Path:
    """n rows, every (n // n_long)-th of them long (about 400 tokens with the tiny tokenizer's chat template, short ones 84)."""
    step = n // n_long if n_long else n + 1
    rows = [{"question": (LONG if n_long and i % step == 0 and i // step < n_long else SHORT).format(i=i),
             "answer": f"#### {i + 1}"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _kept_by_verl(train: Path, tok_dir: Path, max_len: int, cache: Path) -> int:
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": max_len, "filter_overlong_prompts": True,
                            "filter_overlong_prompts_workers": 1, "cache_dir": str(cache)})
    return len(RLHFDataset([str(train)], AutoTokenizer.from_pretrained(str(tok_dir)), cfg))


def test_too_many_overlong_prompts_for_one_batch_is_refused(tmp_path, tiny_model):
    data = _write(tmp_path / "qa.jsonl", 100, 40)  # 95 training rows, about 38 of them too long
    with pytest.raises(WizardError) as info:
        plan(_base(tiny_model, dataset=str(data)), base_dir=str(tmp_path))
    (problem,) = info.value.problems
    assert problem.rule == "VI541" and "dataset" in problem.keys and "max_prompt_length" in problem.keys
    found = re.search(r"keeps (\d+) of 95 training prompts", problem.message)
    assert found and int(found.group(1)) < 64 and "trains 0 steps" in problem.message
    raised = int(re.search(r"max_prompt_length=(\d+) keeps 64", problem.hint).group(1))
    assert raised > 128 and "prompts_per_step=" in problem.hint
    plan(_base(tiny_model, dataset=str(data), max_prompt_length=raised), base_dir=str(tmp_path))  # the fix works


def test_some_overlong_prompts_warn_and_verl_keeps_exactly_the_counted_rows(tmp_path, tiny_model):
    data = _write(tmp_path / "qa.jsonl", 100, 10)
    p = plan(_base(tiny_model, dataset=str(data)), base_dir=str(tmp_path), bundle_dir=str(tmp_path / "b"))
    (warning,) = [f for f in p.findings if f.rule == "VI542"]
    assert warning.severity == "warning" and "longer than max_prompt_length=128" in warning.message
    kept = int(re.search(r"trains on (\d+)", p.facts["overlong"]).group(1))
    assert 64 <= kept < 95
    files = wizard.render(p)
    assert p.facts["overlong"] in files["PLAN.md"]
    bundle = wizard.write_bundle(files, tmp_path / "b")
    r = subprocess.run([sys.executable, str(bundle / "data" / "prepare_data.py")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert _kept_by_verl(bundle / "data" / "train.parquet", tiny_model, 128, tmp_path / "cache") == kept


def test_own_train_file_in_verls_schema_is_counted_too(tmp_path, tiny_model):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": (LONG if i < 50 else SHORT).format(i=i)}],
             "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(i)}} for i in range(100)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    with pytest.raises(WizardError, match=r"keeps 50 of 100 training prompts.*\[VI541\]"):
        plan(_base(tiny_model, train_files="train.parquet", val_files="train.parquet"), base_dir=str(tmp_path))
    assert _kept_by_verl(tmp_path / "train.parquet", tiny_model, 128, tmp_path / "cache") == 50
    short = [dict(r, prompt=[{"role": "user", "content": SHORT.format(i=i)}]) for i, r in enumerate(rows)]
    pq.write_table(pa.Table.from_pylist(short), tmp_path / "short.parquet")
    pq.write_table(pa.Table.from_pylist(rows[:10]), tmp_path / "val.parquet")  # every prompt too long
    with pytest.raises(WizardError) as info:
        plan(_base(tiny_model, train_files="short.parquet", val_files="val.parquet"), base_dir=str(tmp_path))
    (problem,) = info.value.problems
    assert problem.rule == "VI541" and "val_files" in problem.keys and "empty validation set" in problem.message


def test_without_a_local_tokenizer_plan_md_says_the_count_is_unchecked(tmp_path):
    data = _write(tmp_path / "qa.jsonl", 100, 40)
    p = plan(_base("Qwen/Qwen2.5-0.5B-Instruct", dataset=str(data)), base_dir=str(tmp_path))
    assert not [f for f in p.findings if f.rule in ("VI541", "VI542")]
    assert "unchecked" in p.facts["overlong"] and "not a local folder with a tokenizer" in p.facts["overlong"]
    assert p.facts["overlong"] in wizard.render(p)["PLAN.md"]


# -- the planner builds prompts exactly as the bundle's prepare_data.py does --------------------------------------


ROWS = [
    {"question": "What is 2 + 2?", "answer": "It is 4.\n#### 4"},
    {"question": "Sum 1,000 and 1", "answer": "1,001"},
    {"question": "No number here", "answer": "none"},
    {"question": "", "answer": "#### 3"},
    {"question": "Boxed?", "answer": "so \\boxed{\\frac{1}{2}} done"},
    {"question": 7, "answer": 8.0},
    {"answer": "#### 1"},
    {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "#### 5"}]},
    {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}], "answer": "#### 2"},
    {"messages": "[{\"role\": \"user\", \"content\": \"json text\"}]", "answer": "#### 9"},
    {"messages": [{"role": "robot", "content": "x"}], "answer": "#### 1"},
    {"messages": [{"role": "assistant", "content": "only a reply"}], "answer": "#### 1"},
    {"messages": "not json", "answer": "#### 1"},
]
VARIANTS = [
    {},
    {"answer_format": "boxed"},
    {"answer_format": "text", "reward": "function", "system_prompt": "Be exact.", "instruction": "Q: {question}"},
    {"messages_field": "messages", "system_prompt": "You are careful."},
    {"messages_field": "messages", "instruction": ""},
]


@pytest.mark.parametrize("changes", VARIANTS)
def test_prompt_of_matches_the_rendered_prepare_data(tmp_path, changes):
    from wizard.planner import dataprep

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS * 60))  # enough rows for one step
    a = make_answers(dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=24, prompts_per_step=8, samples_per_prompt=4,
                          updates_per_step=1, dataset=str(data), **changes))
    p = plan(a, base_dir=str(tmp_path))
    script = wizard.render(p)["data/prepare_data.py"]
    namespace: dict = {"__name__": "prepare_data_under_test", "__file__": str(tmp_path / "data" / "prepare_data.py")}
    exec(compile(script, "prepare_data.py", "exec"), namespace)  # noqa: S102 - the bundle's own script
    prep = dataprep.resolve(p.answers, "")
    for row in ROWS:
        try:
            expected = namespace["build"](dict(row))[0]
        except namespace["Skip"]:
            expected = None
        try:
            got = dataprep.prompt_of(dict(row), prep)
        except dataprep.Skip:
            got = None
        assert got == expected, row
    for n in (0, 1, 2, 7, 100):
        rows = [{"extra_info": {}, "i": i} for i in range(n)]
        old = namespace["VAL_FRACTION"], namespace["SEED"]
        train, val = namespace["split_file"](rows)
        assert {r["i"] for r in val} == dataprep.held_out(n, *old)
