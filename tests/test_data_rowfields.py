"""Issue 27 item 1 (images, agent_name, data_source): the per-row columns verl reads are mapped from the local file's
schema (wizard.planner.rowfields). A file planted with each column: plan and the wizard offer/accept it, a named
column the file lacks (or one holding another kind) is refused with the file's columns, and data/prepare_data.py
carries it into rows that verl's own RLHFDataset reads back (rl_dataset.py:109/:315 image_key; the reward manager's
data_source, reward_manager/naive.py:42; agent_loop.py:610-612 agent_name)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

import wizard
from wizard.intent.answers import make_answers
from wizard.intent.errors import WizardError

BASE = dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=80, model="Qwen/Qwen2.5-0.5B-Instruct", prompts_per_step=4,
            samples_per_prompt=4, updates_per_step=1, val_fraction=0)
VL = dict(nnodes=1, gpus_per_node=8, gpu_memory_gb=80, model="Qwen/Qwen2.5-VL-7B-Instruct", max_prompt_length=2048,
          max_response_length=2048, prompts_per_step=2, samples_per_prompt=4, updates_per_step=1, val_fraction=0,
          answer_format="text", reward="function", image_max_pixels=200704)
SOURCES = ("openai/gsm8k", "numina_amc_aime")  # two scorers (gsm8k, prime_math) that read number answers


def rows_file(path: Path, n: int = 8, **columns) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i), **{k: v(i) for k, v in columns.items()}}
            for i in range(n)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def render(tmp_path: Path, base: dict = BASE, **changes) -> Path:
    plan = wizard.plan(make_answers({**base, **changes}), base_dir=str(tmp_path), bundle_dir="bundle")
    return wizard.write_bundle(wizard.render(plan), tmp_path / "bundle")


def refused(tmp_path: Path, base: dict = BASE, **changes) -> dict:
    with pytest.raises(WizardError) as exc:
        render(tmp_path, base, **changes)
    assert not (tmp_path / "bundle").exists()  # nothing written
    return {p.rule: p for p in exc.value.problems}


def prepare(bundle: Path) -> list[dict]:
    import pyarrow.parquet as pq

    r = subprocess.run([sys.executable, str(bundle / "data" / "prepare_data.py")], capture_output=True, text=True,
                       timeout=180, cwd=bundle)
    assert r.returncode == 0, r.stderr
    return pq.read_table(bundle / "data" / "train.parquet").to_pylist()


def verl_dataset(path: Path, tmp_path: Path, processor=None, **config):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from wizard.smoketest.tiny import build_tokenizer

    build_tokenizer(tmp_path / "tok")
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 2048, "filter_overlong_prompts": False,
                            "return_raw_chat": True, **config})
    return RLHFDataset([str(path)], tok, cfg, processor=processor)


def _agent(i: int) -> str:
    return "tool_agent" if i % 2 else "single_turn_agent"


# --- data_source and agent_name ---------------------------------------------------------------------------------


@pytest.mark.verl
def test_data_source_and_agent_name_columns_reach_verls_rows(tmp_path):
    rows_file(tmp_path / "d.parquet", data_source=lambda i: SOURCES[i % 2], agent_name=_agent)
    bundle = render(tmp_path, dataset="d.parquet", data_source_field="data_source", agent_name_field="agent_name")
    plan_md = (bundle / "PLAN.md").read_text()
    assert "Per-row columns: data_source_field=data_source" in plan_md and "agent_name_field=agent_name" in plan_md
    rows = prepare(bundle)
    assert [r["data_source"] for r in rows] == [SOURCES[i % 2] for i in range(8)]
    dataset = verl_dataset(bundle / "data" / "train.parquet", tmp_path)
    items = [dataset[i] for i in range(len(dataset))]
    assert [it["data_source"] for it in items] == [SOURCES[i % 2] for i in range(8)]  # what the reward manager reads
    assert [it["agent_name"] for it in items] == [_agent(i) for i in range(8)]  # what the agent loop reads


def test_without_the_answers_the_plan_offers_the_columns(tmp_path):
    rows_file(tmp_path / "d.parquet", data_source=lambda i: SOURCES[0], agent_name=_agent)
    bundle = render(tmp_path, dataset="d.parquet")
    plan_md = (bundle / "PLAN.md").read_text()
    assert "`--set data_source_field=data_source` carries each row's data_source" in plan_md
    assert "`--set agent_name_field=agent_name` carries each row's agent_name" in plan_md
    assert "DATA_SOURCE_FIELD = None" in (bundle / "data" / "prepare_data.py").read_text()  # offered, not taken


@pytest.mark.parametrize("key", ["data_source_field", "agent_name_field", "image_key"])
def test_a_named_column_the_file_lacks_is_refused_with_its_columns(tmp_path, key):
    rows_file(tmp_path / "d.parquet", data_source=lambda i: SOURCES[0])
    p = refused(tmp_path, dataset="d.parquet", **{key: "missing"})["VI546"]
    assert f"{key}='missing'" in p.message and "question (text), answer (text), data_source (text)" in p.message


def test_a_column_of_another_kind_is_refused(tmp_path):
    rows_file(tmp_path / "d.parquet", score=lambda i: i * 1.5)
    p = refused(tmp_path, dataset="d.parquet", data_source_field="score")["VI970"]
    assert "holds number" in p.message and "question, answer" in p.hint


def test_a_data_source_no_scorer_knows_is_refused_row_by_row(tmp_path):
    rows_file(tmp_path / "d.parquet", data_source=lambda i: "my_private_set" if i == 3 else SOURCES[0])
    p = refused(tmp_path, dataset="d.parquet", data_source_field="data_source")["VI513"]
    assert "'my_private_set'" in p.message and "reward=function" in p.hint
    # a reward function scores any data_source
    render(tmp_path, dataset="d.parquet", data_source_field="data_source", reward="function")


def test_a_data_source_whose_scorer_reads_another_format_is_refused(tmp_path):
    rows_file(tmp_path / "d.parquet", data_source=lambda i: "DigitalLearningGmbH/MATH-lighteval")
    p = refused(tmp_path, dataset="d.parquet", data_source_field="data_source", answer_format="number")["VI514"]
    assert "answer_format=boxed" in p.message


def test_an_agent_name_verl_has_no_loop_for_is_a_warning(tmp_path):
    rows_file(tmp_path / "d.parquet", agent_name=lambda i: "my_agent")
    plan = wizard.plan(make_answers({**BASE, "dataset": "d.parquet", "agent_name_field": "agent_name"}),
                       base_dir=str(tmp_path))
    (w,) = [p for p in plan.findings if p.rule == "VI971"]
    assert w.severity == "warning" and "'my_agent'" in w.message and "tool_agent" in w.message


def test_the_wizard_offers_the_files_columns(tmp_path):
    from wizard.cli.interactive import dataq
    from wizard.cli.interactive.questions import QUESTIONS

    rows_file(tmp_path / "d.parquet", data_source=lambda i: SOURCES[0])
    rows_file(tmp_path / "plain.parquet")
    from wizard.cli.interactive.qcore import Context

    ctx = Context({"dataset": "d.parquet"}, base_dir=str(tmp_path))
    (q,) = [q for q in QUESTIONS if q.field == "data_source_field"]
    assert q.when(ctx) and q.default(ctx) == "data_source" and q.optional
    assert "text columns: data_source, question, answer" in q.note(ctx)
    assert "[VI546]" in dataq.check_column("nope", ctx)
    assert not q.when(Context({"dataset": "plain.parquet"}, base_dir=str(tmp_path)))  # nothing to offer: not asked
    (agent_q,) = [q for q in QUESTIONS if q.field == "agent_name_field"]
    assert not agent_q.when(ctx)


# --- images -----------------------------------------------------------------------------------------------------


def _png(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


@pytest.mark.verl
def test_an_image_column_is_mapped_from_the_schema_and_read_by_verl(tmp_path):
    import transformers

    rows_file(tmp_path / "v.parquet", n=4, pics=lambda i: [{"bytes": _png(32 + i, 32), "path": None}])
    bundle = render(tmp_path, VL, dataset="v.parquet")  # no image_key: the file's only image column is taken
    assert "image_key=pics (the file's only image column)" in (bundle / "PLAN.md").read_text()
    assert "image_key: pics" in (bundle / "verl_config.yaml").read_text()
    rows = prepare(bundle)
    assert [len(r["pics"]) for r in rows] == [1, 1, 1, 1]
    processor = transformers.Qwen2VLImageProcessorPil(max_pixels=200704)
    item = verl_dataset(bundle / "data" / "train.parquet", tmp_path, processor, image_key="pics")[0]
    kinds = [c["type"] for c in item["raw_prompt"][-1]["content"]]
    assert kinds.count("image") == 1  # verl paired the <image> placeholder with the row's image


def test_an_image_key_naming_a_text_column_is_refused(tmp_path):
    rows_file(tmp_path / "v.parquet", n=4, pics=lambda i: [{"bytes": _png(32, 32), "path": None}])
    p = refused(tmp_path, VL, dataset="v.parquet", image_key="question")["VI970"]
    assert "holds text" in p.message and "images columns: pics" in p.hint
