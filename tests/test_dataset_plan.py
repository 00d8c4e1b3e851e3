"""The data answers in the plan and the bundle: where verl reads the data, the VI5xx data rules, the
reward-function wiring, run.sh's missing-data message, and verl accepting every bundle."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers_answers import answers

import wizard
from wizard.intent.errors import WizardError
from wizard.planner.pipeline import plan

DATA = Path(__file__).resolve().parent / "data"
PROFILES = ["single-gpu", "single-node-8gpu", "cluster-8gpu", "ppo-16gpu", "dapo-32gpu", "megatron-64gpu", "cpu-smoke"]
RUNS = Path("/nonexistent")  # the folder the data files of these tests live in (the fixture below makes it)


def _qa_rows(n: int = 100) -> list[dict]:
    return [{"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"} for i in range(n)]


@pytest.fixture(autouse=True, scope="module")
def runs_folder(tmp_path_factory):
    """Every data file the answers below name exists (a missing one is VI539), with rows enough for one step."""
    import csv
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    global RUNS
    RUNS = tmp_path_factory.mktemp("runs")
    rows = _qa_rows()
    # verl's schema: what train_files / val_files name (a raw file there is VI518)
    ready = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": r["question"]}],
              "reward_model": {"style": "rule", "ground_truth": r["answer"].split("#### ")[-1]}} for r in rows]
    for name in ("qa.jsonl", "sub/qa.jsonl", "my_qa.jsonl", "data/val.jsonl"):
        (RUNS / name).parent.mkdir(parents=True, exist_ok=True)
        (RUNS / name).write_text("".join(json.dumps(r) + "\n" for r in (ready if name.startswith("data/") else rows)))
    (RUNS / "qa.json").write_text(json.dumps(rows))
    for name in ("qa.csv", "train.csv", "val.csv"):
        with open(RUNS / name, "w", newline="") as fh:
            w = csv.DictWriter(fh, ["question", "answer"])
            w.writeheader()
            w.writerows(rows)
    for name in ("qa.parquet", "t.parquet", "v.parquet", "mine/train.parquet"):
        (RUNS / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows if name == "qa.parquet" else ready), RUNS / name)
    chats = [{"messages": [{"role": "user", "content": r["question"]}], "answer": r["answer"]} for r in rows]
    (RUNS / "chat.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chats))
    yield RUNS


def bundle_files(**changes) -> dict[str, str]:
    return wizard.render(plan(answers(**changes), base_dir=str(RUNS)))


@pytest.mark.parametrize("dataset", ["gsm8k", "math", "./qa.jsonl", "./qa.csv", "./qa.parquet", "./qa.json"])
def test_config_reads_what_prepare_data_writes(dataset):
    p = plan(answers(dataset=dataset), base_dir=str(RUNS))
    assert p.value("data.train_files") == "data/train.parquet"
    assert p.value("data.val_files") == "data/val.parquet"
    assert "data/prepare_data.py" in p.settings["data.train_files"].reason
    files = wizard.render(p)
    assert "data/prepare_data.py" in files and "reward/reward_fn.py" not in files


def test_explicit_files_are_used_as_given():
    p = plan(answers(dataset="./qa.jsonl", train_files="./mine/train.parquet", val_files=f"{RUNS}/data/val.jsonl"),
             base_dir=str(RUNS))
    assert p.value("data.train_files") == f"{RUNS}/mine/train.parquet"
    assert p.value("data.val_files") == f"{RUNS}/data/val.jsonl"
    assert p.settings["data.train_files"].source == "answer"


def test_local_file_path_is_absolute_in_the_script_without_a_bundle_folder(monkeypatch):
    files = bundle_files(dataset="./sub/qa.jsonl")
    assert f"INPUT_FILE = '{RUNS}/sub/qa.jsonl'" in files["data/prepare_data.py"]
    monkeypatch.setenv("HOME", str(RUNS))
    files = bundle_files(dataset="~/qa.jsonl")
    assert "INPUT_FILE = '~/qa.jsonl'" in files["data/prepare_data.py"]  # expanded by the script


def test_data_paths_are_stored_relative_to_the_bundle():
    """Relative answers (as typed, from base_dir) become bundle-relative everywhere; absolute ones stay absolute."""
    p = plan(answers(dataset="./sub/qa.jsonl", train_files="mine/train.parquet", val_files=f"{RUNS}/data/val.jsonl"),
             base_dir=str(RUNS), bundle_dir="runs/x")
    assert p.bundle_dir == f"{RUNS}/runs/x"
    assert (p.answers.dataset, p.answers.train_files, p.answers.val_files) == \
        ("../../sub/qa.jsonl", "../../mine/train.parquet", f"{RUNS}/data/val.jsonl")
    assert p.value("data.train_files") == "../../mine/train.parquet"
    files = wizard.render(p)
    recorded = yaml.safe_load(files["verl-init.yaml"])["answers"]
    assert recorded["dataset"] == "../../sub/qa.jsonl" and recorded["train_files"] == "../../mine/train.parquet"
    assert "INPUT_FILE = '../../sub/qa.jsonl'" in files["data/prepare_data.py"]
    assert yaml.safe_load(files["verl_config.yaml"])["data"]["train_files"] == "../../mine/train.parquet"
    assert str(RUNS) + "/sub" not in "".join(files.values())


def test_missing_data_file_is_refused_with_the_fix():
    for key, value in (("dataset", "mydata/nope.jsonl"), ("train_files", "nope/train.parquet"),
                       ("val_files", "./nope.jsonl")):
        extra = {"train_files": "t.parquet", "val_files": "v.parquet"} if key != "dataset" else {}
        with pytest.raises(WizardError) as info:
            plan(answers(**{**extra, key: value}), base_dir=str(RUNS), bundle_dir="b")
        (problem,) = [p for p in info.value.problems]
        assert problem.rule == "VI539" and problem.keys == (key,)
        line = problem.line()
        assert value in line and str(RUNS) in line and "does not exist" in line and "check the path" in line
    (RUNS / "folder.jsonl").mkdir(exist_ok=True)
    with pytest.raises(WizardError, match="is a folder, not a data file"):
        plan(answers(dataset="folder.jsonl"), base_dir=str(RUNS))


def test_absolute_train_file_missing_here_is_a_warning_on_a_cluster():
    p = plan(answers(cluster="slurm", nnodes=2, train_files="/shared/nope/train.parquet",
                     val_files="/shared/nope/val.parquet"), base_dir=str(RUNS), bundle_dir="b")
    found = [f for f in p.findings if f.rule == "VI539"]
    assert len(found) == 2 and all(f.severity == "warning" and "every node" in f.message for f in found)
    with pytest.raises(WizardError, match="VI539"):  # a local run reads it here
        plan(answers(train_files="/shared/nope/train.parquet", val_files="/shared/nope/val.parquet"),
             base_dir=str(RUNS))


def test_relative_path_that_cannot_travel_is_refused():
    with pytest.raises(WizardError) as info:  # the bundle and the data share only /
        plan(answers(dataset="./qa.jsonl"), base_dir=str(RUNS), bundle_dir="/tmp-verl-init-elsewhere/b")
    (problem,) = info.value.problems
    assert problem.rule == "VI540" and "share no folder but /" in problem.message
    assert f"dataset={RUNS}/qa.jsonl" in problem.hint
    with pytest.raises(WizardError) as info:  # ray uploads only the bundle
        plan(answers(cluster="ray", train_files="t.parquet", val_files="v.parquet"), base_dir=str(RUNS),
             bundle_dir="runs/x")
    assert info.value.rules == ["VI540", "VI540"] and "working_dir" in info.value.problems[0].message
    # inside the bundle it travels
    (RUNS / "runs/y/data").mkdir(parents=True)
    (RUNS / "runs/y/data/t.parquet").write_bytes((RUNS / "t.parquet").read_bytes())
    p = plan(answers(cluster="ray", train_files="runs/y/data/t.parquet", val_files="runs/y/data/t.parquet"),
             base_dir=str(RUNS), bundle_dir="runs/y")
    assert p.value("data.train_files") == "data/t.parquet"


REJECTED = [
    ("VI511", dict(train_files="./train.csv")),
    ("VI511", dict(dataset="./qa.csv", val_files="./val.csv")),
    ("VI513", dict(dataset="./qa.jsonl", answer_format="text")),
    ("VI513", dict(data_source="my_homework")),
    ("VI514", dict(dataset="gsm8k", answer_format="boxed")),
    ("VI514", dict(dataset="./qa.jsonl", data_source="openai/gsm8k", answer_format="boxed")),
    ("VI515", dict(dataset="./chat.jsonl", messages_field="messages", question_field="q")),
    ("VI516", dict(dataset="gsm8k", question_field="q")),
    ("VI516", dict(dataset="math", val_fraction=0.1)),
]


@pytest.mark.parametrize("rule,changes", REJECTED, ids=[f"{r}-{i}" for i, (r, _) in enumerate(REJECTED)])
def test_data_rule_rejects(rule, changes):
    with pytest.raises(WizardError) as info:
        plan(answers(**changes), base_dir=str(RUNS))
    assert rule in info.value.rules, info.value
    for problem in info.value.problems:
        assert problem.keys and problem.message and problem.hint and "\n" not in problem.line()


def test_rule_messages_name_the_fix():
    with pytest.raises(WizardError) as info:
        plan(answers(dataset="./qa.jsonl", answer_format="text"), base_dir=str(RUNS))
    line = info.value.problems[0].line()
    assert "data_source='qa' has no scorer in verl's default scoring" in line
    assert "NotImplementedError" in line and "use reward=function" in line
    with pytest.raises(WizardError) as info:
        plan(answers(dataset="gsm8k", answer_format="boxed"), base_dir=str(RUNS))
    line = info.value.problems[0].line()
    assert "gsm8k scorer, which reads answer_format=number" in line and "every reward would be 0" in line


ACCEPTED = [
    dict(dataset="./qa.jsonl", answer_format="text", reward="function"),
    dict(dataset="gsm8k", answer_format="boxed", reward="function"),
    dict(dataset="./qa.jsonl", data_source="math", answer_format="boxed"),  # verl's math_dapo reads \\boxed{}
    dict(dataset="./qa.jsonl", answer_format="text", train_files="./t.parquet", val_files="./v.parquet"),
    dict(dataset="./chat.jsonl", messages_field="messages"),
    dict(dataset="./qa.csv"),
]


@pytest.mark.parametrize("changes", ACCEPTED)
def test_data_answers_accepted(changes):
    plan(answers(**changes), base_dir=str(RUNS))


def test_no_validation_split_warns():
    p = plan(answers(dataset="./qa.jsonl", val_fraction=0), base_dir=str(RUNS))
    assert "VI512" in [f.rule for f in p.findings]
    assert p.value("data.val_files") == "data/train.parquet"
    assert "VI512" not in [f.rule for f in plan(answers(dataset="./qa.jsonl"), base_dir=str(RUNS)).findings]


def test_default_data_source_by_reward_and_format():
    from wizard.planner.dataprep import resolve

    assert resolve(answers(dataset="./qa.jsonl"), "/r").data_source == "openai/gsm8k"
    assert resolve(answers(dataset="./qa.jsonl", answer_format="boxed"), "/r").data_source == \
        "DigitalLearningGmbH/MATH-lighteval"
    assert resolve(answers(dataset="./my_qa.jsonl", reward="function"), "/r").data_source == "my_qa"
    assert resolve(answers(dataset="math"), "/r").data_source == "DigitalLearningGmbH/MATH-lighteval"


def test_reward_function_without_file_uses_the_bundles_scorer():
    p = plan(answers(reward="function", dataset="math"), base_dir=str(RUNS))
    assert p.value("reward.custom_reward_function.path") == "reward/reward_fn.py"
    assert p.value("reward.custom_reward_function.name") == "compute_score"
    assert "reward/reward_fn.py" in p.roles["reward"] and "boxed" in p.roles["reward"]
    files = wizard.render(p)
    assert "ANSWER_FORMAT = 'boxed'" in files["reward/reward_fn.py"]
    cfg = yaml.safe_load(files["verl_config.yaml"])
    assert cfg["reward"]["custom_reward_function"] == {"path": "reward/reward_fn.py", "name": "compute_score"}


def test_reward_function_of_the_user_ships_no_scorer(tmp_path):
    (tmp_path / "score.py").write_text("def my_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                                       "    return 0.0\n")
    p = plan(answers(reward="function", reward_function="./score.py:my_score"), base_dir=str(tmp_path))
    assert p.value("reward.custom_reward_function.path") == str(tmp_path / "score.py")
    assert "reward/reward_fn.py" not in wizard.render(p)


def test_render_is_pure():
    p = plan(answers(reward="function", dataset="./qa.csv", system_prompt="Be exact."), base_dir=str(RUNS))
    assert wizard.render(p) == wizard.render(p)


# -- run.sh -------------------------------------------------------------------------------------


def test_run_sh_points_at_prepare_data_from_any_folder(tmp_path):
    bundle = wizard.write_bundle(bundle_files(nnodes=1, gpus_per_node=8), tmp_path / "b")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text('#!/bin/sh\n[ "$1" = "-c" ] && exit 0\necho "python3 $* (in $(pwd))"\n')
    (fake / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = subprocess.run(["bash", str(bundle / "run.sh")], capture_output=True, text=True, env=env, cwd=elsewhere)
    assert r.returncode == 1
    assert "missing data file: data/train.parquet" in r.stderr
    assert f'python3 "{bundle}/data/prepare_data.py"' in r.stderr
    (bundle / "data" / "train.parquet").write_text("")
    (bundle / "data" / "val.parquet").write_text("")
    r = subprocess.run(["bash", str(bundle / "run.sh")], capture_output=True, text=True, env=env, cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    assert f"-m verl.trainer.main_ppo --config-path {bundle}" in r.stdout and f"(in {bundle})" in r.stdout


# -- verl accepts every bundle --------------------------------------------------------------------


def single_gpu(**changes):
    from wizard.intent.profiles import profile_answers

    return wizard.make_answers({**profile_answers("single-gpu"), **changes})


def _write(answers_obj, out: Path) -> Path:
    return wizard.write_bundle(wizard.render(wizard.plan(answers_obj, base_dir=str(out.parent))), out)


@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_bundle_is_accepted_by_verl(profile, tmp_path, tiny_model):
    from wizard.verify.harness import verify_with_verl

    bundle = _write(wizard.load_profile(profile), tmp_path / profile)
    assert (bundle / "data" / "prepare_data.py").is_file()
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, report.summary()


DATA_VARIANTS = [
    dict(reward="function"),
    dict(reward="function", dataset="math", answer_format="boxed"),
    # the shipped sample files are tiny: one step's prompts must fit their training rows (VI519)
    dict(dataset=str(DATA / "qa/plain.csv"), prompts_per_step=8, updates_per_step=1),
    dict(dataset=str(DATA / "chat/chat.jsonl"), messages_field="messages", system_prompt="Be exact.",
         prompts_per_step=4, updates_per_step=1),
    dict(dataset=str(DATA / "qa/text.jsonl"), question_field="prompt_text", answer_field="reference",
         answer_format="text", reward="function", val_fraction=0,
         prompts_per_step=4, updates_per_step=1),
]


@pytest.mark.verl
@pytest.mark.parametrize("changes", DATA_VARIANTS)
def test_data_variant_bundles_are_accepted_by_verl(changes, tmp_path, tiny_model):
    from wizard.verify.harness import verify_with_verl

    bundle = _write(single_gpu(**changes), tmp_path / "b")
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, report.summary()


@pytest.mark.verl
def test_verl_loads_the_bundles_reward_function_from_the_bundle_folder(tmp_path, monkeypatch):
    """run.sh starts verl in the bundle folder: the relative path in the config resolves there."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from wizard.verify.harness import compose_bundle

    bundle = _write(single_gpu(reward="function"), tmp_path / "b")
    cfg = compose_bundle(bundle)
    monkeypatch.chdir(bundle)
    fn = get_custom_reward_fn(cfg)
    assert fn(data_source="openai/gsm8k", solution_str="4 + 3 = 7\n#### 7", ground_truth="7") == 1.0
    assert fn(data_source="openai/gsm8k", solution_str="#### 8", ground_truth="7") == 0.0


def _jsonl(path, rows):
    import json as _json

    with open(path, "w") as fh:
        for i in range(rows):
            fh.write(_json.dumps({"question": f"{i} + 1?", "answer": str(i + 1)}) + "\n")
    return path


def test_too_few_local_rows_for_one_step_is_refused_at_plan_time(tmp_path):
    """verl drops the incomplete batch (drop_last) and asserts "Train dataloader is empty!": 200 rows with
    val_fraction 0.05 leave 200 − round(200 × 0.05) = 190 training rows, fewer than 256 prompts per step."""
    import re

    import pytest

    import wizard
    from wizard.intent.errors import WizardError

    _jsonl(tmp_path / "train.jsonl", 200)
    data = {**wizard.load_profile("single-gpu").model_dump(mode="json", exclude_unset=True),
            "dataset": "train.jsonl", "val_fraction": 0.05, "prompts_per_step": 256}
    with pytest.raises(WizardError) as info:
        wizard.plan(wizard.make_answers(data), base_dir=str(tmp_path))
    (problem,) = [p for p in info.value.problems if p.rule == "VI519"]
    assert "190 training row(s)" in problem.message and "prompts_per_step=256" in problem.message
    suggested = int(re.search(r"prompts_per_step=(\d+)", problem.hint).group(1))
    assert suggested <= 190
    wizard.plan(wizard.make_answers({**data, "prompts_per_step": suggested}), base_dir=str(tmp_path))  # passes


def test_enough_rows_and_own_parquet_files_are_counted(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest

    import wizard
    from wizard.intent.errors import WizardError

    base = wizard.load_profile("single-gpu").model_dump(mode="json", exclude_unset=True)
    _jsonl(tmp_path / "train.jsonl", 300)
    wizard.plan(wizard.make_answers({**base, "dataset": "train.jsonl", "val_fraction": 0.05, "prompts_per_step": 256}),
                base_dir=str(tmp_path))  # 300 − 15 = 285 ≥ 256
    table = pa.Table.from_pylist([{"prompt": [{"role": "user", "content": "x"}]}] * 64)
    pq.write_table(table, tmp_path / "mine.parquet")
    pq.write_table(table, tmp_path / "val.parquet")
    with pytest.raises(WizardError, match="VI519"):
        wizard.plan(wizard.make_answers({**base, "train_files": "mine.parquet", "val_files": "val.parquet",
                                         "prompts_per_step": 128}), base_dir=str(tmp_path))
