"""`verl-init validate-dataset`: every bad file gets its exact message, rule ID and row numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from wizard.env.datasets import Options, format_report, validate

DATA = Path(__file__).resolve().parent / "data"
BAD = DATA / "bad"


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    from wizard.smoketest.tiny import build_tokenizer

    path = tmp_path_factory.mktemp("tok")
    build_tokenizer(path)
    return path


@pytest.fixture(scope="module")
def tok(tok_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tok_dir))


def to_parquet(src: Path, dst: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    pq.write_table(pa.Table.from_pylist(rows), dst)
    return dst


def findings(report, rule=None):
    return [f for f in report.findings if rule is None or f.rule == rule]


def one(report, rule):
    found = findings(report, rule)
    assert len(found) == 1, [f.as_dict() for f in report.findings]
    return found[0]


def test_good_file_passes():
    report = validate([str(BAD / "good.jsonl")], Options())
    assert report.ok
    assert [f.rule for f in report.findings] == ["VI534"]  # only: no tokenizer given
    s = report.files[0]
    assert s.rows == 6 and s.data_sources == {"openai/gsm8k": 6}
    assert set(s.columns) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}


def test_prompt_as_string():
    report = validate([str(BAD / "prompt_string.jsonl")], Options())
    f = one(report, "VI522")
    assert not report.ok and f.severity == "error" and f.count == 1
    assert f.message == "'prompt' is a string, not a list of chat messages"
    assert "verl drops such rows when filter_overlong_prompts=True" in f.hint
    assert f.examples == [(1, "'What is 2 plus 2?'")]


def test_missing_and_empty_ground_truth():
    report = validate([str(BAD / "missing_ground_truth.jsonl")], Options())
    messages = {f.message: f.examples for f in findings(report, "VI523")}
    assert messages == {"reward_model.ground_truth is missing": [(1, "null")],
                        "reward_model.ground_truth is empty": [(2, "''")]}
    assert not report.ok


def test_ground_truth_not_text():
    report = validate([str(BAD / "ground_truth_int.jsonl")], Options())
    f = one(report, "VI524")
    assert f.severity == "error" and f.message == "reward_model.ground_truth is int, not text"
    assert f.examples == [(1, "4")] and "every reward would be 0" in f.hint
    # with a custom scorer it may be intended: a warning only
    report = validate([str(BAD / "ground_truth_int.jsonl")], Options(reward_function="r.py:score"))
    assert one(report, "VI524").severity == "warning" and report.ok


def test_unknown_data_source():
    report = validate([str(BAD / "unknown_data_source.jsonl")], Options())
    f = one(report, "VI526")
    assert f.message == "data_source 'my_homework' has no scorer in verl's default scoring"
    assert f.count == 2 and [r for r, _ in f.examples] == [1, 2]
    assert "NotImplementedError" in f.hint and "--reward-function" in f.hint
    assert validate([str(BAD / "unknown_data_source.jsonl")], Options(reward_function="r.py:score")).ok


def test_wrong_prompt_key_names_the_chat_column():
    report = validate([str(BAD / "wrong_prompt_key.jsonl")], Options())
    f = one(report, "VI521")
    assert f.message == "column 'prompt' not found (columns: ability, data_source, extra_info, messages, reward_model)"
    assert f.hint == ("the chat messages look like they are in 'messages': pass --prompt-key messages "
                      "(and set data.prompt_key=messages in verl)")
    assert len(report.findings) == 2  # no per-row noise besides VI534
    assert validate([str(BAD / "wrong_prompt_key.jsonl")], Options(prompt_key="messages")).ok


def test_wrong_prompt_key_parquet(tmp_path):
    path = to_parquet(BAD / "wrong_prompt_key.jsonl", tmp_path / "w.parquet")
    f = one(validate([str(path)], Options()), "VI521")
    assert "pass --prompt-key messages" in f.hint


def test_overlong_prompts_with_filter(tok):
    report = validate([str(BAD / "overlong.jsonl")], Options(tokenizer=tok, max_prompt_length=64))
    f = one(report, "VI528")
    assert f.severity == "warning" and report.ok
    assert f.message == "prompts longer than max_prompt_length=64 tokens"
    assert f.examples == [(1, "216 tokens > max_prompt_length=64")]
    assert "verl drops these rows when it loads the file" in f.hint
    s = report.files[0]
    assert s.overlong == 1 and s.kept_by_verl == 2 and s.length_unit == "tokens" and s.lengths["max"] == 216


def test_overlong_prompts_without_filter(tok):
    report = validate([str(BAD / "overlong.jsonl")], Options(tokenizer=tok, max_prompt_length=64,
                                                          filter_overlong_prompts=False))
    hint = one(report, "VI528").hint
    assert "left-truncates them to rollout.prompt_length" in hint and "data.truncation is not applied" in hint


def test_all_rows_overlong_is_an_error(tok):
    report = validate([str(BAD / "good.jsonl")], Options(tokenizer=tok, max_prompt_length=5))
    f = one(report, "VI531")
    assert not report.ok and f.message == "no row survives verl's overlong filter: the dataset would be empty"


def test_chat_template_failure(tok_dir, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    tok.chat_template = "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('no system role') }}" \
                        "{% endif %}{{ m['content'] }}{% endfor %}"
    path = tmp_path / "sys.jsonl"
    rows = [json.loads(line) for line in (BAD / "good.jsonl").read_text().splitlines()]
    rows[3]["prompt"].insert(0, {"role": "system", "content": "Be brief."})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    f = one(validate([str(path)], Options(tokenizer=tok)), "VI527")
    assert f.examples[0][0] == 3 and "no system role" in f.examples[0][1]


def test_bad_role_and_assistant_last():
    report = validate([str(BAD / "bad_role.jsonl")], Options())
    assert one(report, "VI522").examples == [(0, "message 0 has role 'bot'; allowed: system, user, assistant, tool")]


def test_duplicates_and_overlap():
    report = validate([str(BAD / "good.jsonl"), str(BAD / "val_overlap.jsonl"), str(BAD / "duplicates.jsonl")],
                      Options())
    dup = one(report, "VI529")
    assert dup.file.endswith("duplicates.jsonl") and dup.examples == [(2, "same prompt as row 0")]
    overlap = {f.file.rsplit("/", 1)[-1]: f for f in findings(report, "VI530")}
    assert overlap["val_overlap.jsonl"].examples == [(0, f"same prompt as row 4 of {BAD / 'good.jsonl'}")]
    assert overlap["val_overlap.jsonl"].message == f"prompts also in {BAD / 'good.jsonl'} (train/validation overlap)"
    assert report.ok  # warnings only


def test_unreadable_inputs(tmp_path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"a": 1}\nnot json\n[1, 2]\n')
    report = validate([str(broken), str(tmp_path / "nope.parquet"), str(DATA / "qa/plain.csv")], Options())
    messages = {(Path(f.file).name, f.message) for f in findings(report, "VI520")}
    assert messages == {("broken.jsonl", "row cannot be read"), ("nope.parquet", "file not found"),
                        ("plain.csv", "verl reads .parquet, .jsonl and .json files, not .csv")}
    bad_rows = [f for f in findings(report, "VI520") if f.message == "row cannot be read"][0]
    assert [r for r, _ in bad_rows.examples] == [1, 2]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert one(validate([str(empty)], Options()), "VI531").message == "the file has no rows"


def test_parquet_read_in_batches_gives_the_same_answer(tmp_path, tok):
    """Row numbers and counts do not depend on the batch size (parquet iter_batches of 2 rows)."""
    src = tmp_path / "mixed.jsonl"
    rows = [json.loads(line) for line in (BAD / "good.jsonl").read_text().splitlines()]
    rows += [json.loads(line) for line in (BAD / "overlong.jsonl").read_text().splitlines()]
    rows[7]["reward_model"]["ground_truth"] = ""
    rows.append(dict(rows[0]))
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pq_path = to_parquet(src, tmp_path / "mixed.parquet")
    results = []
    for path, batch in ((src, 2048), (pq_path, 2), (pq_path, 3), (src, 1)):
        report = validate([str(path)], Options(tokenizer=tok, max_prompt_length=64, batch_rows=batch))
        results.append(sorted((f.rule, f.message, f.count, tuple(f.examples)) for f in report.findings))
        assert report.files[0].rows == 10
    assert all(r == results[0] for r in results), results
    rules = {r[0] for r in results[0]}
    assert {"VI523", "VI528", "VI529"} <= rules


def test_preference_pairs(tmp_path, tok):
    good = to_parquet(DATA / "preference/pairs.jsonl", tmp_path / "pairs.parquet")
    assert validate([str(good)], Options(kind="preference", tokenizer=tok)).ok
    rows = [json.loads(line) for line in (DATA / "preference/bad_pairs.jsonl").read_text().splitlines()]
    text_rows, chat_rows = [r for r in rows if isinstance(r["prompt"], str)], [r for r in rows if isinstance(r["prompt"], list)]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(text_rows), tmp_path / "bad.parquet")
    pq.write_table(pa.Table.from_pylist(chat_rows), tmp_path / "chat.parquet")
    report = validate([str(tmp_path / "bad.parquet"), str(tmp_path / "chat.parquet")], Options(kind="preference"))
    got = {(f.rule, f.message): f.examples for f in report.findings}
    assert got[("VI536", "'chosen' and 'rejected' are the same text")] == [(1, "'6'")]
    assert got[("VI535", "'chosen' is empty")] == [(2, "''")]
    assert got[("VI535", "'rejected' is missing or null")] == [(3, "null")]
    assert got[("VI537", "'prompt' is list[struct], not text")][0][0] == 0
    assert not report.ok
    jsonl = validate([str(DATA / "preference/pairs.jsonl")], Options(kind="preference"))
    assert one(jsonl, "VI520").message == "verl's RMDataset reads parquet only"


def test_summary_table_and_rows_in_text_output(tok):
    report = validate([str(BAD / "overlong.jsonl"), str(BAD / "prompt_string.jsonl")],
                      Options(tokenizer=tok, tokenizer_name="tiny", max_prompt_length=64))
    text = format_report(report)
    lines = text.splitlines()
    assert lines[0].split() == ["file", "rows", "columns", "prompt", "tokens", "p50/p90/p99/max", "overlong"]
    assert any(line.startswith(str(BAD / "overlong.jsonl")) and " 3 " in line for line in lines)
    assert f"{BAD / 'overlong.jsonl'}: data_source openai/gsm8k 3 (verl gsm8k)" in lines
    assert f"{BAD / 'overlong.jsonl'}: 2 of 3 rows kept by verl's overlong filter" in lines
    assert "    row 1: 216 tokens > max_prompt_length=64" in lines
    assert "    row 1: 'What is 2 plus 2?'" in lines
    assert "warning VI530" in text  # the two fixtures share prompts
    assert lines[-1] == "validate-dataset: FAILED — 1 error(s), 2 warning(s) in 2 file(s)"


# -- the command line -------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_exit_codes_and_json(cli_env, tok_dir):
    r = run_cli(["validate-dataset", str(BAD / "good.jsonl"), "--tokenizer", str(tok_dir)], env=cli_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "validate-dataset: OK" in r.stdout
    r = run_cli(["validate-dataset", str(BAD / "prompt_string.jsonl"), "--json"], env=cli_env)
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["files"][0]["rows"] == 3
    (f,) = [f for f in doc["findings"] if f["id"] == "VI522"]
    assert f["severity"] == "error" and f["examples"] == [{"row": 1, "problem": "'What is 2 plus 2?'"}]
    r = run_cli(["validate-dataset", str(BAD / "wrong_prompt_key.jsonl"), "--prompt-key", "messages"], env=cli_env)
    assert r.returncode == 0, r.stdout


@pytest.mark.slow
def test_cli_bad_tokenizer_is_one_line(cli_env, tmp_path):
    r = run_cli(["validate-dataset", str(BAD / "good.jsonl"), "--tokenizer", str(tmp_path / "none")], env=cli_env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "[VI538]" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_help_stays_light(cli_env):
    code = ("import sys, wizard.cli.app as c\n"
            "try:\n    c.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = {'ray', 'torch', 'transformers', 'verl', 'jinja2', 'pydantic', 'questionary', 'pandas',"
            " 'pyarrow', 'numpy'}\n"
            "print(sorted(m for m in heavy if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env, timeout=60)
    assert "validate-dataset FILE..." in r.stdout
    assert r.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.verl
def test_token_counts_match_verls_overlong_filter(tmp_path, tok):
    """kept_by_verl equals the length of verl's own RLHFDataset after filter_overlong_prompts."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    src = tmp_path / "mix.jsonl"
    rows = []
    for i in range(12):
        q = "Add: " + " ".join(str(d % 10) for d in range(i * 3))
        rows.append({"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": q}],
                     "reward_model": {"style": "rule", "ground_truth": "1"}, "extra_info": {"index": i}})
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for limit in (12, 20, 30):
        report = validate([str(src)], Options(tokenizer=tok, max_prompt_length=limit))
        cfg = OmegaConf.create({"max_prompt_length": limit, "filter_overlong_prompts": True,
                                "filter_overlong_prompts_workers": 1, "cache_dir": str(tmp_path / "c")})
        assert report.files[0].kept_by_verl == len(RLHFDataset([str(src)], tok, cfg)), limit


def test_benchmark_script_runs(tmp_path):
    r = subprocess.run([sys.executable, str(Path(__file__).resolve().parent.parent / "benchmarks" /
                                            "bench_validate_dataset.py"), "--rows", "3000", "--batch-rows", "500"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "rows/s" in r.stdout and "peak RSS" in r.stdout
