"""VI867: prompts longer than data.max_prompt_length, counted with the model's own (local) tokenizer on the local data
(wizard/check/rules/prompts.py). The oracle counts each prompt under the tiny model's chat template here, and verl's
own source is read for the two facts the rule rests on: RLHFDataset stores data.truncation and nothing reads it,
and the agent loop left-truncates a text prompt to rollout.prompt_length (real case verl#3373).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

LIMIT = 64
LONG = "the answer is " * 60  # hundreds of tokens under any chat template


def _write(path: Path, long: int, short: int, key: str = "prompt") -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"data_source": "openai/gsm8k", key: [{"role": "user", "content": LONG if i < long else f"What is {i}+1?"}],
             "reward_model": {"ground_truth": str(i + 1), "style": "rule"}} for i in range(long + short)]
    pq.write_table(pa.Table.from_pylist(rows), path)


def _tokens(model: Path, text: str) -> int:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    chat = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
    return len(tok.encode(chat, add_special_tokens=False))


def _check(tmp_path: Path, model: str, *extra: str):
    from wizard.check.lint import check

    return check(None, [f"actor_rollout_ref.model.path={model}", f"data.train_files={tmp_path / 'train.parquet'}",
                        f"data.val_files={tmp_path / 'train.parquet'}", f"data.max_prompt_length={LIMIT}",
                        "trainer.nnodes=1", "trainer.n_gpus_per_node=1", *extra])


def _vi867(report) -> list:
    return [f.problem for f in report.findings if f.problem.rule == "VI867"]


def test_the_oracle_lengths(tiny_model):
    assert _tokens(tiny_model, LONG) > LIMIT >= _tokens(tiny_model, "What is 3+1?")


@pytest.mark.verl
def test_verl_cuts_a_long_text_prompt_and_does_not_read_truncation():
    import verl
    import verl.utils.dataset.rl_dataset as rl

    source = inspect.getsource(rl)
    code = [line for line in source.splitlines() if "truncation" in line and not line.strip().startswith(("#", "config"))]
    assert [line.strip() for line in code] == ['self.truncation = config.get("truncation", "error")']  # stored, unread
    loop = (Path(verl.__file__).parent / "experimental" / "agent_loop" / "agent_loop.py").read_text(encoding="utf-8")
    assert "return prompt_ids[-prompt_length:]" in loop and "left-truncating" in loop


def test_filter_off_long_prompts_are_a_warning(tmp_path, tiny_model):
    _write(tmp_path / "train.parquet", long=2, short=2)
    [hit] = _vi867(_check(tmp_path, str(tiny_model), "data.filter_overlong_prompts=false"))
    assert hit.severity == "warning" and "2 of the 4 prompts" in hit.message and "filter_overlong_prompts" in hit.hint
    _write(tmp_path / "train.parquet", long=0, short=4)  # the control: every prompt fits
    assert not _vi867(_check(tmp_path, str(tiny_model), "data.filter_overlong_prompts=false"))


def test_filter_on_a_training_set_under_one_batch_is_an_error(tmp_path, tiny_model):
    _write(tmp_path / "train.parquet", long=2, short=2)
    [hit] = _vi867(_check(tmp_path, str(tiny_model), "data.filter_overlong_prompts=true", "data.train_batch_size=4"))
    assert hit.severity == "error" and "only 2 of the 4 prompts" in hit.message
    assert not _vi867(_check(tmp_path, str(tiny_model), "data.filter_overlong_prompts=true", "data.train_batch_size=2"))


def test_the_prompt_key_is_read_and_a_hub_model_is_not_counted(tmp_path, tiny_model):
    _write(tmp_path / "train.parquet", long=2, short=2, key="question")
    off = ["data.filter_overlong_prompts=false"]
    assert _vi867(_check(tmp_path, str(tiny_model), *off, "data.prompt_key=question"))
    assert not _vi867(_check(tmp_path, "Qwen/Qwen2.5-0.5B-Instruct", *off, "data.prompt_key=question"))
