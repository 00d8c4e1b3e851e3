"""VI908: a model whose tokenizer has no chat template (a base model's), with none given (real case verl#390). The
oracles are transformers, which refuses apply_chat_template on that tokenizer, and verl's own RLHFDataset, whose
overlong filter then keeps no row at all (utils/dataset/rl_dataset.py:248-266); with a template given through
verl's model.custom_chat_template (workers/config/model.py:170-174), it keeps them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from wizard.check.lint import check

M = "actor_rollout_ref.model"


@pytest.fixture()
def base_model(tmp_path, tiny_model) -> Path:
    """The tiny model without its chat template (the tokenizer saved it as chat_template.jinja)."""
    folder = tmp_path / "base-model"
    shutil.copytree(tiny_model, folder)
    template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    (folder / "chat_template.jinja").unlink()
    (tmp_path / "template.jinja").write_text(template, encoding="utf-8")
    return folder


def _data(tmp_path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist([{"prompt": [{"role": "user", "content": f"What is {i}+1?"}],
                                          "data_source": "openai/gsm8k", "reward_model": {"ground_truth": str(i + 1)}}
                                         for i in range(6)]), path)
    return path


def _verl_rows(model: Path, data: Path, template: str | None) -> int:
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from transformers import AutoTokenizer

    from verl.utils.dataset.rl_dataset import RLHFDataset

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = compose("ppo_trainer", overrides=["data.filter_overlong_prompts=true", "data.max_prompt_length=256",
                                                "data.dataloader_num_workers=0"]).data
    tok = AutoTokenizer.from_pretrained(str(model))
    if template is not None:
        tok.chat_template = template  # what verl's HFModelConfig does with model.custom_chat_template
    return len(RLHFDataset(data_files=[str(data)], tokenizer=tok, config=cfg, processor=None))


def _vi908(model: Path, data: Path, *extra: str):
    report = check(None, [f"{M}.path={model}", f"data.train_files={data}", f"data.val_files={data}",
                          "actor_rollout_ref.rollout.name=vllm", *extra])
    return [f.problem for f in report.findings if f.problem.rule == "VI908"]


@pytest.mark.slow
@pytest.mark.verl
def test_verl_keeps_no_row_and_check_says_why(tmp_path, base_model, tiny_model):
    from transformers import AutoTokenizer

    data = _data(tmp_path)
    with pytest.raises(ValueError):
        AutoTokenizer.from_pretrained(str(base_model)).apply_chat_template([{"role": "user", "content": "hi"}])
    template = (tmp_path / "template.jinja").read_text(encoding="utf-8")
    assert _verl_rows(base_model, data, None) == 0 and _verl_rows(base_model, data, template) == 6
    [hit] = _vi908(base_model, data)
    assert hit.severity == "error" and "has no chat template" in hit.message and "custom_chat_template" in hit.hint
    assert not _vi908(tiny_model, data)  # the same model with its template


def test_a_template_given_in_the_config_is_enough(tmp_path, base_model):
    data = _data(tmp_path)
    template = (tmp_path / "template.jinja").read_text(encoding="utf-8").replace("'", "\\'")
    assert not _vi908(base_model, data, f"{M}.custom_chat_template='{template}'")
    assert not _vi908(base_model, data, "+data.apply_chat_template_kwargs.chat_template='{{ messages }}'")


def test_a_hub_model_not_here_is_not_judged(tmp_path):
    assert not _vi908(Path("meta-llama/Meta-Llama-3-8B"), _data(tmp_path))


def _answers(model: Path, **more):
    from wizard.intent.answers import make_answers

    return make_answers(dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=80, gpu_type="H100", model=str(model),
                             model_params_b=0.001, dataset="gsm8k", max_prompt_length=128, max_response_length=64,
                             prompts_per_step=8, samples_per_prompt=4, updates_per_step=2, total_steps=1, **more))


def test_the_planner_refuses_a_local_model_without_a_template(tmp_path, base_model, tiny_model, monkeypatch):
    """The planner's side (VI549): the bundle's overlong filter would drop every row (the test above holds verl's
    dataset to it). A template given as an override, or the model with its template, plans."""
    import wizard
    from wizard.intent.errors import WizardError

    monkeypatch.setenv("VERL_INIT_TRACE_MEMORY", "0")
    with pytest.raises(WizardError) as err:
        wizard.plan(_answers(base_model), base_dir=str(tmp_path))
    assert "VI549" in str(err.value) and "custom_chat_template" in str(err.value)
    template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    plan = wizard.plan(_answers(base_model, overrides=[f"actor_rollout_ref.model.custom_chat_template={template!r}"]),
                       base_dir=str(tmp_path))
    assert plan is not None
    assert wizard.plan(_answers(tiny_model), base_dir=str(tmp_path)) is not None
