"""Issue 27 items 1-2: the local file's schema decides the column mapping, and PLAN.md shows the first prompt as
the model will see it. A chat-format parquet (system + user messages, an answer column) rendered without column
answers maps itself; its prepared rows, read by verl's RLHFDataset, carry the original messages (system role kept);
a named column the file lacks, or a chat column named as question text, is refused before anything is written."""

from __future__ import annotations

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


def chat_parquet(path: Path, n: int = 40, **extra_columns) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {i} + {i}?"}],
             "answer": str(2 * i), **{k: v(i) for k, v in extra_columns.items()}} for i in range(n)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def render(tmp_path: Path, out: str = "bundle", **changes) -> Path:
    plan = wizard.plan(make_answers({**BASE, **changes}), base_dir=str(tmp_path), bundle_dir=out)
    return wizard.write_bundle(wizard.render(plan), tmp_path / out)


def refusal(tmp_path: Path, **changes) -> list:
    with pytest.raises(WizardError) as exc:
        render(tmp_path, **changes)
    assert not (tmp_path / "bundle").exists()  # nothing written
    return [p for p in exc.value.problems if p.severity == "error"]


def test_chat_file_without_column_answers_maps_itself(tmp_path):
    chat_parquet(tmp_path / "chat.parquet")
    bundle = render(tmp_path, dataset="chat.parquet")
    plan_md = (bundle / "PLAN.md").read_text()
    assert "Mapped from its schema: messages_field=prompt, answer_field=answer" in plan_md
    answers = (bundle / "verl-init.yaml").read_text()
    assert "messages_field: prompt" in answers and "question_field" not in answers
    # PLAN.md: the first prompt as the model sees it and the ground truth the scorer gets
    assert f"<system> {SYSTEM}" in plan_md and "Ground truth the scorer gets: `0`" in plan_md


@pytest.mark.parametrize("key,column", [("question_field", "foo"), ("answer_field", "solution"),
                                        ("messages_field", "messages")])
def test_a_named_column_the_file_lacks_is_refused_with_its_columns(tmp_path, key, column):
    chat_parquet(tmp_path / "chat.parquet")
    (p,) = [p for p in refusal(tmp_path, dataset="chat.parquet", **{key: column}) if p.rule == "VI546"]
    assert f"{key}={column!r}" in p.message and "prompt (chat), answer (text)" in p.message


def test_a_chat_column_named_as_question_text_is_refused(tmp_path):
    chat_parquet(tmp_path / "chat.parquet")
    (p,) = refusal(tmp_path, dataset="chat.parquet", question_field="prompt")
    assert p.rule == "VI543" and "messages_field=prompt" in p.hint


def test_an_ambiguous_file_is_refused_naming_the_candidates(tmp_path):
    chat_parquet(tmp_path / "two.parquet", other=lambda i: [{"role": "user", "content": f"x{i}"}])
    (p,) = [p for p in refusal(tmp_path, dataset="two.parquet") if p.rule == "VI547"]
    assert "prompt, other" in p.message and "messages_field=" in p.hint
    # choosing one of them plans
    assert (render(tmp_path, dataset="two.parquet", messages_field="prompt") / "PLAN.md").is_file()


def test_plain_question_answer_file_maps_as_before(tmp_path):
    (tmp_path / "qa.jsonl").write_text("".join(f'{{"problem": "What is {i}+1?", "solution": "{i + 1}"}}\n'
                                              for i in range(20)))
    bundle = render(tmp_path, dataset="qa.jsonl")
    text = (bundle / "verl-init.yaml").read_text()
    assert "question_field: problem" in text and "answer_field: solution" in text


def test_plan_shows_the_prompt_after_the_models_own_chat_template(tmp_path, tiny_model):
    chat_parquet(tmp_path / "chat.parquet")
    bundle = render(tmp_path, dataset="chat.parquet", model=str(tiny_model), model_params_b=0.001)
    plan_md = (bundle / "PLAN.md").read_text()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    chat = [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What is 0 + 0? Let's think step by step and output the final answer after \"####\"."}]
    expected = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert expected.strip() in plan_md and "chat template)" in plan_md


@pytest.mark.verl
def test_prepared_rows_keep_the_system_role_in_verls_rlhfdataset(tmp_path, tiny_model):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    chat_parquet(tmp_path / "chat.parquet")
    bundle = render(tmp_path, dataset="chat.parquet")
    r = subprocess.run([sys.executable, str(bundle / "data" / "prepare_data.py")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512, "filter_overlong_prompts": True,
                            "filter_overlong_prompts_workers": 1, "cache_dir": str(tmp_path / "cache")})
    ds = RLHFDataset([str(bundle / "data" / "train.parquet")], tok, cfg)
    item = ds[0]
    assert item["raw_prompt"][0] == {"role": "system", "content": SYSTEM}
    assert item["raw_prompt"][1]["role"] == "user" and item["raw_prompt"][1]["content"].startswith("What is")
