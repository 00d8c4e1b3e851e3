"""Issue 27 item 1, a `datasets` folder saved with Dataset.save_to_disk / DatasetDict.save_to_disk is the dataset
wherever a local file is: its schema and first rows are read with bounded reads (pyarrow alone, memory-mapped, each
batch within wizard._parquet's caps), plan maps it from its schema, the wizard accepts it, validate-dataset and
check read its rows, check refuses it as verl's train_files (VI972: RLHFDataset reads files only), and the bundle's
data/prepare_data.py loads it with datasets.load_from_disk into rows verl's RLHFDataset reads.

Each folder is built twice: by the `datasets` library (installed in this venv with verl) and by pyarrow writing
the same layout (state.json, dataset_info.json, Arrow stream files; a DatasetDict's dataset_dict.json and split
folders), so the reader is shown to need only pyarrow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import wizard
from wizard.intent.answers import make_answers
from wizard.intent.errors import WizardError

SYSTEM = "You are a careful math tutor."
BASE = dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=80, model="Qwen/Qwen2.5-0.5B-Instruct", prompts_per_step=4,
            samples_per_prompt=4, updates_per_step=1)


def chat_rows(n: int = 40) -> list[dict]:
    return [{"prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {i} + {i}?"}],
             "answer": str(2 * i)} for i in range(n)]


def _pyarrow_dataset(rows: list[dict], folder: Path, shards: int = 2) -> None:
    """The layout Dataset.save_to_disk writes, written with pyarrow (Arrow IPC stream files listed in state.json)."""
    import pyarrow as pa

    folder.mkdir(parents=True)
    table = pa.Table.from_pylist(rows)
    names = [f"data-{k:05d}-of-{shards:05d}.arrow" for k in range(shards)]
    per = -(-len(rows) // shards)
    for k, name in enumerate(names):
        with pa.OSFile(str(folder / name), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.slice(k * per, per), max_chunksize=7)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": n} for n in names],
                                                   "_fingerprint": "0", "_format_columns": None,
                                                   "_format_kwargs": {}, "_format_type": None,
                                                   "_output_all_columns": False, "_split": None}))
    (folder / "dataset_info.json").write_text("{}")


def save(rows: list[dict], folder: Path, how: str, splits: tuple[str, ...] = ()) -> Path:
    """A Dataset folder (splits empty) or a DatasetDict folder with these splits, each holding `rows`."""
    if how == "datasets":
        import datasets

        ds = datasets.Dataset.from_list(rows)
        (datasets.DatasetDict({s: ds for s in splits}) if splits else ds).save_to_disk(str(folder))
        return folder
    if not splits:
        _pyarrow_dataset(rows, folder)
        return folder
    folder.mkdir()
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": list(splits)}))
    for s in splits:
        _pyarrow_dataset(rows, folder / s)
    return folder


HOW = ["datasets", "pyarrow"]


def render(tmp_path: Path, **changes) -> Path:
    plan = wizard.plan(make_answers({**BASE, **changes}), base_dir=str(tmp_path), bundle_dir="bundle")
    return wizard.write_bundle(wizard.render(plan), tmp_path / "bundle")


# --- the bounded reader -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("splits", [(), ("train", "test")])
def test_schema_rows_and_count_of_a_saved_folder(tmp_path, how, splits):
    from wizard._io import count_file_rows
    from wizard._parquet import saved_dataset
    from wizard.planner.dataschema import read_schema

    folder = save(chat_rows(30), tmp_path / "saved", how, splits)
    assert saved_dataset(str(folder)) and not saved_dataset(str(tmp_path))
    schema = read_schema(str(folder))
    assert schema.columns == {"prompt": "chat", "answer": "text"}
    assert schema.rows[0]["prompt"][0] == {"role": "system", "content": SYSTEM} and len(schema.rows) == 30
    assert count_file_rows(str(folder), 5) == 30


def test_a_value_over_the_cap_is_refused_before_it_becomes_python(tmp_path, monkeypatch):
    from wizard import _parquet

    folder = save([{"prompt": "x" * 5000, "answer": "1"}, {"prompt": "short", "answer": "2"}], tmp_path / "s", "pyarrow")
    monkeypatch.setattr(_parquet, "VALUE_BYTES", 4096)
    with pytest.raises(_parquet.DecodeCapExceeded, match="column 'prompt' holds a value"):
        list(_parquet.any_batches(str(folder), 1))


def test_a_datasetdict_without_train_among_several_splits_is_named(tmp_path):
    from wizard._parquet import training_split

    folder = save(chat_rows(4), tmp_path / "dd", "pyarrow", ("dev", "test"))
    with pytest.raises(ValueError, match="splits dev, test and no 'train'"):
        training_split(str(folder))
    assert training_split(str(save(chat_rows(4), tmp_path / "one", "pyarrow", ("dev",))))[1] == "dev"


# --- plan, wizard, prepare_data.py ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.parametrize("how", HOW)
def test_plan_maps_a_saved_folder_and_prepare_data_loads_it_for_verl(tmp_path, how, tiny_model):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    save(chat_rows(), tmp_path / "saved", how, ("train",) if how == "datasets" else ())
    bundle = render(tmp_path, dataset="saved")
    plan_md = (bundle / "PLAN.md").read_text()
    assert "Mapped from its schema: messages_field=prompt, answer_field=answer" in plan_md
    assert f"<system> {SYSTEM}" in plan_md  # the first prompt as the model will see it
    assert "INPUT_FILE = '../saved'" in (bundle / "data" / "prepare_data.py").read_text()
    r = subprocess.run([sys.executable, str(bundle / "data" / "prepare_data.py")], capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr
    assert "wrote 38 rows" in r.stdout
    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512, "filter_overlong_prompts": True,
                            "filter_overlong_prompts_workers": 1, "cache_dir": str(tmp_path / "cache")})
    item = RLHFDataset([str(bundle / "data" / "train.parquet")], tok, cfg)[0]
    assert item["raw_prompt"][0] == {"role": "system", "content": SYSTEM}


def test_a_folder_that_is_not_a_saved_dataset_is_refused(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(WizardError) as exc:
        render(tmp_path, dataset="plain")
    (p,) = [p for p in exc.value.problems if p.rule == "VI510"]
    assert "save_to_disk" in p.message and "state.json" in p.hint
    assert not (tmp_path / "bundle").exists()


def test_a_named_column_the_folder_lacks_is_refused_with_its_columns(tmp_path):
    save(chat_rows(), tmp_path / "saved", "pyarrow")
    with pytest.raises(WizardError) as exc:
        render(tmp_path, dataset="saved", question_field="foo")
    (p,) = [p for p in exc.value.problems if p.rule == "VI546"]
    assert "prompt (chat), answer (text)" in p.message


def test_the_wizard_accepts_a_saved_folder_and_offers_its_chat_column(tmp_path):
    from wizard.cli.interactive import dataq
    from wizard.cli.interactive.qcore import Context

    save(chat_rows(), tmp_path / "saved", "pyarrow")
    (tmp_path / "plain").mkdir()
    ctx = Context({"dataset": "saved"}, base_dir=str(tmp_path))
    assert dataq.check_dataset("saved", ctx) is None
    assert "[VI510]" in dataq.check_dataset("plain", ctx) and "state.json" in dataq.check_dataset("plain", ctx)
    assert "[VI539]" in dataq.check_dataset("missing.jsonl", ctx)  # a file is still looked for
    assert dataq.has_chat(ctx) and [c for c, _ in dataq.chat_choices(ctx)] == ["prompt"]
    assert "its columns: prompt (chat), answer (text)" in dataq.check_column("foo", ctx)


def test_prepare_data_without_the_datasets_library_says_so_in_one_line(tmp_path):
    save(chat_rows(), tmp_path / "saved", "pyarrow")
    bundle = render(tmp_path, dataset="saved")
    blocker = tmp_path / "block" / "datasets"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no datasets here')\n")
    r = subprocess.run([sys.executable, str(bundle / "data" / "prepare_data.py")], capture_output=True, text=True,
                       timeout=120, env={"PYTHONPATH": str(tmp_path / "block"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"prepare_data: {tmp_path / 'saved'} is a `datasets` folder "
                                             "(save_to_disk): reading it needs `pip install datasets`"]


# --- validate-dataset and check ---------------------------------------------------------------------------------


def verl_rows(n: int = 4, bad: int = -1) -> list[dict]:
    chat = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is 2+3?"}]
    garbled = [{"role": "user", "content": json.dumps(chat)}]
    return [{"data_source": "openai/gsm8k", "prompt": garbled if i == bad else chat, "ability": "math",
             "reward_model": {"style": "rule", "ground_truth": "5"}, "extra_info": {"split": "train", "index": i}}
            for i in range(n)]


@pytest.mark.parametrize("how", HOW)
def test_validate_dataset_reads_a_saved_folder(tmp_path, how):
    from wizard.env.datasets import Options, validate

    clean = save(verl_rows(), tmp_path / "clean", how)
    report = validate([str(clean)], Options())
    assert not [f for f in report.findings if f.severity == "error"], [f.message for f in report.findings]
    assert report.files[0].rows == 4 and "prompt" in report.files[0].columns
    garbled = save(verl_rows(bad=2), tmp_path / "garbled", how)
    (hit,) = [f for f in validate([str(garbled)], Options()).findings if f.rule == "VI543"]
    assert hit.examples[0][0] == 2


def test_check_refuses_a_saved_folder_as_train_files_and_reads_its_rows(tmp_path):
    from test_data_content import _check, _parquet

    val = _parquet(tmp_path / "val.parquet", verl_rows())
    folder = save(verl_rows(bad=1), tmp_path / "saved", "pyarrow")
    findings = {f.problem.rule: f.problem for f in _check(folder, val).findings}
    assert findings["VI972"].severity == "error" and "save_to_disk" in findings["VI972"].message
    assert "to_parquet" in findings["VI972"].hint
    assert "row 1" in findings["VI878"].message  # the garbled row, read from the folder
    assert "VI972" not in {f.problem.rule for f in _check(val, val).findings}


def test_a_folder_with_fewer_rows_than_one_batch_is_refused(tmp_path):
    """The row count reaches the folder (wizard._io.count_file_rows): verl would train 0 steps (VI519)."""
    save(chat_rows(4), tmp_path / "small", "pyarrow")
    with pytest.raises(WizardError) as exc:
        render(tmp_path, dataset="small")
    (p,) = [p for p in exc.value.problems if p.rule == "VI519"]
    assert "3 training row(s) (4 rows, 1 held out for validation)" in p.message
