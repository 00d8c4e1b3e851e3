"""`check --deep`, data phase: verl's dataset class built on the first rows of a data file, with the tokenizer and the
processor verl's trainer gives it (HFModelConfig: hf_tokenizer + hf_processor, workers/config/model.py:160-171).

- Rows verl drops without raising: with data.filter_overlong_prompts, RLHFDataset keeps a row only when its prompt
  fits data.max_prompt_length (rl_dataset.py:197-277). All the rows dropped is an error (VI876); some, a note.
  The oracle is the prompt's token count under the tiny model's own chat template, written out below.
- Rows with images: verl's dataset asserts a processor (rl_dataset.py:323). A text model's folder has none, so verl
  stops, and so does the check (VI876). A multimodal model whose processor does not build on this machine is not
  the config's fault: a note, the image rows not built.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.verl, pytest.mark.slow]  # each test runs verl's code in the sandbox

WORDS = 200  # words in a long prompt: far above the LIMIT tokens of max_prompt_length below
LIMIT = 64


def _rows(path: Path, long: int, short: int, images: bool = False) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for i in range(long + short):
        text = ("the answer is " * (WORDS // 3)) if i < long else f"What is {i}+1?"
        row = {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": ("<image>" if images else "")
                                                          + text}],
               "reward_model": {"ground_truth": str(i + 1), "style": "rule"}, "extra_info": {"index": i}}
        if images:
            row["images"] = [{"bytes": b"\x89PNG", "path": None}]
        rows.append(row)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _config(tmp_path: Path, model: Path, max_prompt: int) -> str:
    (tmp_path / "cfg.yaml").write_text(textwrap.dedent(f"""\
        defaults:
          - ppo_trainer
          - _self_
        algorithm: {{adv_estimator: grpo}}
        data: {{train_files: train.parquet, val_files: train.parquet, train_batch_size: 4,
               max_prompt_length: {max_prompt}, max_response_length: 32, filter_overlong_prompts: true}}
        actor_rollout_ref:
          model: {{path: {model}}}
          actor: {{ppo_mini_batch_size: 4, ppo_micro_batch_size_per_gpu: 1}}
          rollout: {{name: vllm, n: 2, log_prob_micro_batch_size_per_gpu: 1, tensor_model_parallel_size: 1}}
          ref: {{log_prob_micro_batch_size_per_gpu: 1}}
        trainer: {{n_gpus_per_node: 1, nnodes: 1, logger: [console]}}
        """), encoding="utf-8")
    return str(tmp_path / "cfg.yaml")


def _data_findings(report) -> list:
    return [f.problem for f in report.findings if f.problem.rule == "VI876"]


def test_the_prompt_lengths_the_oracle_counts(tiny_model):
    """Independent of verl: the long prompt is far over LIMIT tokens under the model's own template, the short one under."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    count = lambda text: len(tok.encode(tok.apply_chat_template(  # noqa: E731
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False), add_special_tokens=False))
    assert count("the answer is " * (WORDS // 3)) > LIMIT * 2
    assert count("What is 7+1?") <= LIMIT


def test_every_row_dropped_is_an_error_some_a_note(tmp_path, tiny_model):
    from wizard.check.lint import check

    _rows(tmp_path / "train.parquet", long=4, short=0)
    [dropped] = _data_findings(check(_config(tmp_path, tiny_model, LIMIT), deep=True))
    assert "keeps 0 of the first 4 rows" in dropped.message and f"max_prompt_length={LIMIT}" in dropped.message
    assert dropped.keys[0] == "data.max_prompt_length"

    _rows(tmp_path / "train.parquet", long=2, short=2)
    some = check(_config(tmp_path, tiny_model, LIMIT), deep=True)
    assert not _data_findings(some)
    assert any("keeps 2 of the first 4 rows" in n for n in some.deep_notes), some.deep_notes

    _rows(tmp_path / "train.parquet", long=4, short=0)  # the control: a limit the long prompts fit
    fits = check(_config(tmp_path, tiny_model, 4096), deep=True)
    assert not _data_findings(fits) and not [n for n in fits.deep_notes if "keeps" in n]


def test_image_rows_for_a_text_model_stop_verl_and_the_check(tmp_path, tiny_model):
    from wizard.check.lint import check

    _rows(tmp_path / "train.parquet", long=0, short=4, images=True)
    [stop] = _data_findings(check(_config(tmp_path, tiny_model, 4096), deep=True))
    assert "processor is needed to process multimodal data" in stop.message  # verl's own assert (rl_dataset.py:323)


def test_a_processor_that_does_not_build_here_is_a_note_not_a_finding(tmp_path, tiny_model):
    import shutil

    from wizard.check.lint import check

    model = tmp_path / "vlm"
    shutil.copytree(tiny_model, model)
    (model / "preprocessor_config.json").write_text(json.dumps({"processor_class": "NoSuchProcessorHere"}))
    _rows(tmp_path / "train.parquet", long=0, short=4, images=True)
    report = check(_config(tmp_path, model, 4096), deep=True)
    assert not _data_findings(report)
    assert any("does not build" in n and "rows with images were not built" in n for n in report.deep_notes), \
        report.deep_notes


def test_every_row_failing_for_want_of_a_template_names_it(tmp_path, tiny_model):
    """A model with no chat template (verl#390): verl's filter drops every row because applying the template raises;
    the --deep finding names the template, not the prompt length."""
    import shutil

    from wizard.check.lint import check

    base = tmp_path / "base"
    shutil.copytree(tiny_model, base)
    (base / "chat_template.jinja").unlink()
    _rows(tmp_path / "train.parquet", long=0, short=4)
    [dropped] = _data_findings(check(_config(tmp_path, base, 4096), deep=True))
    assert "keeps 0 of the first 4 rows" in dropped.message and "no chat template" in dropped.message
    assert dropped.keys[0] == "actor_rollout_ref.model.custom_chat_template"
