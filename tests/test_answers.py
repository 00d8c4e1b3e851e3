from __future__ import annotations

import pytest

from wizard.intent.answers import Answers, answer_problems, make_answers, parse_set
from wizard.intent.errors import WizardError
from wizard.intent.profiles import merge_answers


def test_unknown_key_did_you_mean():
    with pytest.raises(WizardError) as info:
        make_answers({"samples_per_promt": 8})
    line = info.value.problems[0].line()
    assert "samples_per_promt" in line and "did you mean 'samples_per_prompt'?" in line and "[VI101]" in line


def test_wrong_type_names_key_value_and_allowed():
    problems = answer_problems({"samples_per_prompt": "abc", "algorithm": "sac"})
    lines = sorted(p.line() for p in problems)
    assert any(line.startswith("algorithm:") and "'sac'" in line and "grpo" in line and "ppo" in line for line in lines)
    assert any(line.startswith("samples_per_prompt:") and "'abc'" in line and "integer" in line for line in lines)


def test_bounds_are_named():
    (problem,) = answer_problems({"gpu_memory_utilization": 1.5})
    assert "gpu_memory_utilization" in problem.line() and "≤ 1" in problem.line()


def test_reward_function_shape():
    (problem,) = answer_problems({"reward_function": "score.py"})
    assert "file.py:function_name" in problem.line()


def test_steps_and_epochs_exclusive():
    with pytest.raises(WizardError, match="total_steps or epochs"):
        make_answers({"total_steps": 10, "epochs": 2})


def test_parse_set():
    assert parse_set("samples_per_prompt=8") == ("samples_per_prompt", "8")
    assert parse_set("logger=console,wandb") == ("logger", ["console", "wandb"])
    assert parse_set("logger=[console, tensorboard]") == ("logger", ["console", "tensorboard"])
    assert parse_set("rollout_tp=null") == ("rollout_tp", None)
    assert parse_set("model=a=b") == ("model", "a=b")
    with pytest.raises(WizardError, match="VI104"):
        parse_set("novalue")
    with pytest.raises(WizardError, match="did you mean 'nnodes'"):
        parse_set("nnode=2")


def test_set_values_are_typed_by_the_model():
    a = make_answers(dict([parse_set("samples_per_prompt=8"), parse_set("learning_rate=1e-6"),
                           parse_set("offload=true"), parse_set("model=123")]))
    assert a.samples_per_prompt == 8 and a.learning_rate == 1e-6 and a.offload is True and a.model == "123"


def test_precedence_profile_answers_set(tmp_path):
    f = tmp_path / "a.yaml"
    f.write_text("answers:\n  samples_per_prompt: 6\n  prompts_per_step: 96\n")
    a = merge_answers("single-node-8gpu", f, ["prompts_per_step=48"])
    assert a.model == "Qwen/Qwen2.5-7B-Instruct"  # profile
    assert a.samples_per_prompt == 6  # answers file beats profile
    assert a.prompts_per_step == 48  # --set beats both
    assert a.nnodes == 1 and a.gpu_memory_gb == 80


def test_every_field_has_a_description():
    for name, info in Answers.model_fields.items():
        assert info.description, name


def test_every_unknown_set_key_is_reported_at_once():
    import pytest

    from wizard.intent.errors import WizardError
    from wizard.intent.profiles import merge_answers

    with pytest.raises(WizardError) as info:
        merge_answers("single-gpu", sets=["modle=x", "promts_per_step=3", "samples_per_prompt=4", "lora_rnak=8"])
    keys = [p.keys[0] for p in info.value.problems]
    assert keys == ["modle", "promts_per_step", "lora_rnak"]
    assert all(p.rule == "VI101" for p in info.value.problems)
