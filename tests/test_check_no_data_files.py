"""VI870 on a null or empty data.val_files / train_files (real case verl#1676: `data.val_files=null` to skip
validation). The oracle is verl's own create_rl_dataset, which both PPO trainers call for the validation set whatever
test_freq says (trainer/ppo/v1/trainer_base.py:718): it raises on both, and reads a real file.
"""

from __future__ import annotations

import pytest

from wizard.check.lint import check


@pytest.fixture(scope="module")
def verl_data_config():
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        return compose("ppo_trainer").data


def _verl_builds(paths, data_config, tokenizer) -> bool:
    from verl.trainer.ppo.utils import create_rl_dataset

    try:
        create_rl_dataset(paths, data_config, tokenizer, None, is_train=False)
    except (TypeError, ValueError):
        return False
    return True


@pytest.mark.verl
@pytest.mark.parametrize("value, text", [(None, "null"), ([], "[]")])
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_errs_where_verls_dataset_cannot_be_built(tmp_path, tiny_model, verl_data_config, value, text):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    good = tmp_path / "val.parquet"
    pq.write_table(pa.Table.from_pylist([{"prompt": [{"role": "user", "content": "1+1?"}], "data_source": "x",
                                          "reward_model": {"ground_truth": "2"}}]), good)
    assert not _verl_builds(value, verl_data_config, tok) and _verl_builds(str(good), verl_data_config, tok)
    for key in ("data.val_files", "data.train_files"):
        report = check(None, [f"{key}={text}", "actor_rollout_ref.rollout.name=vllm"])
        hits = [f.problem for f in report.findings if f.problem.rule == "VI870" and f.problem.keys == (key,)
                and f.problem.severity == "error"]
        assert hits and f"{key}={text}" in hits[0].message, [f.problem.line() for f in report.findings]
    fine = check(None, [f"data.val_files={good}", "actor_rollout_ref.rollout.name=vllm"])
    assert not [f for f in fine.findings if f.problem.rule == "VI870" and f.problem.severity == "error"]


def test_a_custom_dataset_class_may_take_none():
    report = check(None, ["data.val_files=null", "data.custom_cls.path=my_dataset.py", "data.custom_cls.name=MyDataset",
                          "actor_rollout_ref.rollout.name=vllm"])
    assert not [f for f in report.findings if f.problem.rule == "VI870" and "=null" in f.problem.message]
