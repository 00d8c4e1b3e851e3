"""`check --deep` on an sft_trainer launch: verl's own SFT dataset (trainer/sft_trainer.py:create_sft_dataset,
MultiTurnSFTDataset) built on the first rows with the model's tokenizer, in the sandbox. The real case (verl#3477):
a multi-turn SFT run on a Qwen3 model, whose chat template adds <think></think> to the last assistant turn only, stops
on verl's assert that the turns tokenized one by one equal the whole conversation, unless
data.ignore_input_ids_mismatch. The oracle is verl's dataset itself; the template below reproduces the Qwen3 trait.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wizard.check.lint import check

pytestmark = [pytest.mark.verl, pytest.mark.slow]  # each test runs verl's code in the sandbox
THINKING_LAST = ("{% for m in messages %}{% if m['role'] == 'assistant' and loop.last %}"
                 "{{ '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' + m['content'] + '<|im_end|>\\n' }}"
                 "{% else %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endif %}"
                 "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def _data(tmp_path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    chat = [{"role": "user", "content": "What is 1+1?"}, {"role": "assistant", "content": "the answer is 2"},
            {"role": "user", "content": "and 2+2?"}, {"role": "assistant", "content": "the answer is 4"}]
    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist([{"messages": chat}] * 4), path)
    return path


def _model(tmp_path: Path, tiny_model: Path, template: str | None) -> Path:
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    if template is not None:
        cfg = json.loads((model / "tokenizer_config.json").read_text(encoding="utf-8"))
        cfg["chat_template"] = template
        (model / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
        (model / "chat_template.jinja").unlink(missing_ok=True)
    return model


def _check(tmp_path: Path, model: Path, *extra: str):
    data = _data(tmp_path)
    script = tmp_path / "sft.sh"
    script.write_text("torchrun --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer \\\n    " + " \\\n    ".join(
        [f"data.train_files={data}", f"data.val_files={data}", "data.micro_batch_size_per_gpu=2",
         "data.max_length=2048", f"model.path={model}", "trainer.n_gpus_per_node=8", "trainer.nnodes=1", *extra])
        + "\n", encoding="utf-8")
    report = check(str(script), deep=True)
    return [f.problem for f in report.findings if f.problem.rule == "VI876"], report


def test_a_template_that_thinks_on_the_last_turn_stops_verls_sft_dataset(tmp_path, tiny_model):
    [hit], _ = _check(tmp_path, _model(tmp_path, tiny_model, THINKING_LAST))
    assert "MultiTurnSFTDataset" in hit.message and "ignore_input_ids_mismatch" in hit.message


def test_the_setting_verl_names_and_a_plain_template_pass(tmp_path, tiny_model):
    found, report = _check(tmp_path, _model(tmp_path, tiny_model, THINKING_LAST), "data.ignore_input_ids_mismatch=true")
    assert not found, [p.message for p in found]
    assert any("MultiTurnSFTDataset built and read the first rows" in n for n in report.deep_notes)
    other = tmp_path / "plain"
    other.mkdir()
    plain, _ = _check(other, _model(other, tiny_model, None))  # one template for every turn: nothing to say
    assert not plain


def test_a_wrong_messages_key_is_named(tmp_path, tiny_model):
    [hit], _ = _check(tmp_path, _model(tmp_path, tiny_model, None), "data.messages_key=nope")
    assert "KeyError: 'nope'" in hit.message


def _hidden(report):
    return [f.problem for f in report.findings if f.problem.rule == "VI683"]


def test_vi683_names_the_mismatch_ignore_input_ids_mismatch_hides(tmp_path, tiny_model):
    """R46-04 (verl#7807): with the setting on, verl only warns once and trains on the turn-by-turn tokens; read
    with it off, verl's own sanity_check asserts on the same rows, which is the finding."""
    found, report = _check(tmp_path, _model(tmp_path, tiny_model, THINKING_LAST), "data.ignore_input_ids_mismatch=true")
    assert not found, [p.message for p in found]
    [hit] = _hidden(report)
    assert hit.severity == "warning" and "4 of the first 4 rows" in hit.message and "verl#7807" in hit.message
    other = tmp_path / "plain"
    other.mkdir()
    _, plain = _check(other, _model(other, tiny_model, None), "data.ignore_input_ids_mismatch=true")
    assert not _hidden(plain)  # one template for every turn: the setting hides nothing


# Qwen3.5's two guards (verl#7378): a lone system message has no user query, and verl's fallback that prepends an empty
# user message (utils/tokenizer/chat_template.py:175-190) puts the system message second
SYSTEM_FIRST_ONLY = ("{% if messages | selectattr('role', 'equalto', 'user') | list | length == 0 %}"
                     "{{ raise_exception('No user query found in messages.') }}{% endif %}"
                     "{% for m in messages %}{% if m['role'] == 'system' and not loop.first %}"
                     "{{ raise_exception('System message must be at the beginning.') }}{% endif %}"
                     "{% set text = m['content'] if m['content'] is string else "
                     "m['content'] | map(attribute='text') | join('') %}"
                     "{{ '<|im_start|>' + m['role'] + '\\n' + text + '<|im_end|>\\n' }}{% endfor %}"
                     "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def test_a_system_first_corpus_on_a_qwen35_like_template_is_named(tmp_path, tiny_model):
    """R46-02 (verl#7378): MultiTurnSFTDataset renders each message alone, so every system-first row raises."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    chat = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "What is 1+1?"},
            {"role": "assistant", "content": "2"}]
    model = _model(tmp_path, tiny_model, SYSTEM_FIRST_ONLY)
    data = tmp_path / "sys.parquet"
    pq.write_table(pa.Table.from_pylist([{"messages": chat}] * 4), data)
    script = tmp_path / "sft.sh"
    script.write_text("torchrun --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer \\\n    " + " \\\n    ".join(
        [f"data.train_files={data}", "data.max_length=2048", f"model.path={model}"]) + "\n", encoding="utf-8")
    hits = [f.problem for f in check(str(script), deep=True).findings if f.problem.rule == "VI876"]
    assert len(hits) == 1 and "System message must be at the beginning" in hits[0].message, hits
    chat_ok = chat[1:]  # the control: no system message, the same template renders turn by turn
    pq.write_table(pa.Table.from_pylist([{"messages": chat_ok}] * 4), data)
    assert not [f for f in check(str(script), deep=True).findings if f.problem.rule == "VI876"]
