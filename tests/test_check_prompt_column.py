"""`check` VI878 when no row of a data file has the column data.prompt_key names (real case NOVAglow646/Monet#17:
`data.prompt_key=problem` copied from a DeepScaleR-style recipe onto gsm8k parquet whose chats are under 'prompt').

The oracle is verl 0.9.1's own RLHFDataset on the same file and tiny tokenizer: with data.filter_overlong_prompts on,
its length filter swallows the KeyError and keeps no row (utils/dataset/rl_dataset.py:259-266); with it off, the
first item raises KeyError (rl_dataset.py:313). With the right key verl keeps every row, and check says nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_data_content import _check, _parquet, row


def _verl(model: Path, data: Path, prompt_key: str, filtered: bool):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from transformers import AutoTokenizer

    from verl.utils.dataset.rl_dataset import RLHFDataset

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = compose("ppo_trainer", overrides=[f"data.filter_overlong_prompts={str(filtered).lower()}",
                                                f"data.prompt_key={prompt_key}", "data.max_prompt_length=256",
                                                "data.dataloader_num_workers=0"]).data
    return RLHFDataset(data_files=[str(data)], tokenizer=AutoTokenizer.from_pretrained(str(model)), config=cfg,
                       processor=None)


def _vi878(report) -> list:
    return [f.problem for f in report.findings if f.problem.rule == "VI878" and "no row has the column" in f.problem.message]


@pytest.mark.slow
@pytest.mark.verl
def test_verl_keeps_no_row_and_check_names_the_key(tmp_path, tiny_model):
    data = _parquet(tmp_path / "train.parquet", [row(i) for i in range(4)])  # chats under 'prompt'
    assert len(_verl(tiny_model, data, "problem", filtered=True)) == 0  # every row dropped as "overlong"
    with pytest.raises(KeyError):
        _verl(tiny_model, data, "problem", filtered=False)[0]
    assert len(_verl(tiny_model, data, "prompt", filtered=True)) == 4  # the control: the right key keeps them all

    hits = _vi878(_check(data, data, "data.prompt_key=problem"))
    assert hits, "no VI878 for a prompt_key no row has"
    hit = hits[0]
    assert hit.severity == "error" and "'problem'" in hit.message and "'prompt'" in hit.message
    assert hit.hint == "set data.prompt_key=prompt"
    assert not _vi878(_check(data, data))  # verl's default key, present


def test_a_key_some_rows_have_is_not_this_finding(tmp_path):
    """Rows that lack the key among rows that have it are the row checks' business (a prompt that is None), not a
    missing column: only a file none of whose rows has the key is named."""
    rows = [row(0), {**row(1), "prompt": None}]
    data = _parquet(tmp_path / "train.parquet", rows)
    assert not _vi878(_check(data, data))


@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.parametrize("key", ["train_files", "val_files"])
def test_the_planner_refuses_a_raw_file_verl_would_read_as_is(tmp_path, tiny_model, key):
    """The planner's side of the same class (VI518): train_files / val_files are read by verl as they are, with the
    bundle's data.prompt_key (verl's default 'prompt'). A raw question/answer file there leaves verl no row (the
    oracle, as above); the same rows in verl's schema are planned, and verl keeps every one of them."""
    import json

    import wizard
    from wizard.intent.errors import WizardError

    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"}) + "\n"
                           for i in range(4)))
    good = _parquet(tmp_path / "good.parquet", [row(i) for i in range(4)])
    assert len(_verl(tiny_model, raw, "prompt", filtered=True)) == 0
    assert len(_verl(tiny_model, good, "prompt", filtered=True)) == 4

    base = dict(model="Qwen/Qwen2.5-0.5B-Instruct", nnodes=1, gpus_per_node=4, gpu_memory_gb=80,
                dataset="gsm8k", train_files=str(good), val_files=str(good), prompts_per_step=4,
                samples_per_prompt=4, updates_per_step=1)
    planned = wizard.plan(wizard.make_answers(base), base_dir=str(tmp_path))  # the control
    assert planned.value("data.val_files") == str(good) and "VI518" not in [x.rule for x in planned.findings]
    with pytest.raises(WizardError) as info:
        wizard.plan(wizard.make_answers({**base, key: str(raw)}), base_dir=str(tmp_path))
    assert info.value.rules == ["VI518"], info.value
    line = info.value.problems[0].line()
    assert f"{key}=" in line and "'prompt'" in line and "question (text)" in line and "\n" not in line
    assert ("val_fraction" in line) and (f"dataset={raw}" in line) == (key == "train_files")
