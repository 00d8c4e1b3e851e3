"""Issue 27 item 4: an answer can be removed from the command line (`--unset KEY`, or `--set KEY=`), so that a
recorded question_field no longer blocks messages_field (VI515)."""

from __future__ import annotations

import pytest

from wizard.intent.errors import WizardError
from wizard.intent.profiles import merge_answers


@pytest.fixture()
def answers_file(tmp_path):
    path = tmp_path / "answers.yaml"
    path.write_text("answers:\n  model: Qwen/Qwen2.5-0.5B-Instruct\n  question_field: prompt\n  nnodes: 2\n")
    return path


@pytest.mark.parametrize("item", ["question_field=", "question_field=null"])
def test_set_empty_or_null_removes_the_answer(answers_file, item):
    a = merge_answers(None, answers_file, [item])
    assert "question_field" not in a.model_fields_set and a.nnodes == 2


def test_unset_flag_on_the_render_and_plan_commands(answers_file, tmp_path, capsys):
    from wizard.cli.app import main

    code = main(["--answers", str(answers_file), "--unset", "question_field", "--unset", "nnodes",
                 "--set", "gpus_per_node=1", "--set", "gpu_memory_gb=80", "--out", str(tmp_path / "b"), "--dry-run"])
    out = capsys.readouterr()
    assert code == 0, out.err[-2000:]
    text = (out.out + out.err)
    assert "question_field: prompt" not in text


def test_unknown_key_is_still_refused(answers_file):
    with pytest.raises(WizardError) as exc:
        merge_answers(None, answers_file, ["question_fild="])
    assert exc.value.problems[0].rule == "VI101"


def test_a_copied_answers_file_with_a_relative_dataset_is_refused_with_the_fix(tmp_path):
    """Issue 27 item 4: a bundle's verl-init.yaml names its data relative to the bundle; copied elsewhere, that
    path no longer resolves, and the replay says so at once with the fix (not a plan that fails later)."""
    import shutil

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "qa.jsonl").write_text("".join(f'{{"question": "{i}+1?", "answer": "{i + 1}"}}\n'
                                                       for i in range(50)))
    answers = tmp_path / "bundle" / "verl-init.yaml"
    answers.parent.mkdir()
    answers.write_text("answers:\n  dataset: ../data/qa.jsonl\n")
    assert merge_answers(None, answers).dataset.endswith("data/qa.jsonl")  # beside its data: fine
    copied = tmp_path / "elsewhere" / "deeper" / "answers.yaml"
    copied.parent.mkdir(parents=True)
    shutil.copy(answers, copied)
    with pytest.raises(WizardError) as exc:
        merge_answers(None, copied)
    (p,) = exc.value.problems
    assert p.rule == "VI539" and "relative to that file's folder" in p.message and "--set dataset=" in p.hint
    # the fix works: the path given on the command line wins
    assert merge_answers(None, copied, [f"dataset={tmp_path / 'data' / 'qa.jsonl'}"]).dataset.endswith("qa.jsonl")
