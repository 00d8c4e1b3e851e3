"""wizard._chat_templates: the one reader of a model folder's chat templates (planner and check share it).

The load order is transformers' own: a tiny tokenizer saved by transformers with a template in tokenizer_config.json,
then a chat_template.jinja beside it, is rendered by transformers' apply_chat_template, and the reader must return
the template transformers rendered with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wizard._chat_templates import MAX_TEMPLATE_BYTES, folder_templates
from wizard.planner.reasoning import thinks_by_default


def _write(folder: Path, name: str, doc) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(doc if isinstance(doc, str) else json.dumps(doc))


def _render(folder: Path) -> str:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder).apply_chat_template([{"role": "user", "content": "x"}],
                                                                     tokenize=False)


def test_the_reader_returns_what_transformers_renders_with(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=tokenizers.Tokenizer(
        tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]")))
    tok.save_pretrained(tmp_path)
    (tmp_path / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = "FROM-CONFIG{{ messages[0]['content'] }}"
    _write(tmp_path, "tokenizer_config.json", config)
    assert _render(tmp_path) == "FROM-CONFIGx"
    assert folder_templates(tmp_path) == ["FROM-CONFIG{{ messages[0]['content'] }}"]
    _write(tmp_path, "chat_template.jinja", "FROM-JINJA{{ messages[0]['content'] }}")
    assert _render(tmp_path) == "FROM-JINJAx"  # transformers reads the .jinja file over tokenizer_config.json's
    assert folder_templates(tmp_path) == ["FROM-JINJA{{ messages[0]['content'] }}"]


def test_named_templates_and_the_processor_file(tmp_path):
    _write(tmp_path, "tokenizer_config.json", {"chat_template": [{"name": "default", "template": "A"},
                                                                 {"name": "tool_use", "template": "B"}]})
    _write(tmp_path, "chat_template.json", {"chat_template": "<think>C"})
    assert folder_templates(tmp_path) == ["A", "B", "<think>C"]
    assert folder_templates(tmp_path, processor=False) == ["A", "B"]
    # the planner reads the tokenizer's templates only: the processor's <think> does not make the model a thinker
    assert thinks_by_default(str(tmp_path)) is None


def test_no_template_unreadable_and_undecodable(tmp_path):
    assert folder_templates(tmp_path) == []
    _write(tmp_path / "bad", "tokenizer_config.json", "{not json")
    assert folder_templates(tmp_path / "bad") is None
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "chat_template.jinja").write_bytes(b"<think>\xff")
    assert folder_templates(tmp_path / "bin") is None  # strict: check stays silent on a file it cannot decode
    assert folder_templates(tmp_path / "bin", errors="replace") == ["<think>\ufffd"]
    assert thinks_by_default(str(tmp_path / "bin")) == "its chat template opens a <think> block by default"
    _write(tmp_path / "big", "tokenizer_config.json", '{"chat_template": "' + " " * MAX_TEMPLATE_BYTES + '"}')
    assert folder_templates(tmp_path / "big") is None  # over the bound: refused, not read
