"""VI936 (data.val_max_samples keeping the head of data.val_files, real case verl#7824) and VI937 (val_kwargs.n > 1 at
temperature 0: n copies of one greedy answer, real case verl#1352).

The oracles are verl 0.9.1's own code, run on the CPU:

- VI936: verl's RLHFDataset (utils/dataset/rl_dataset.py), built the way every PPO trainer builds its validation set
  (create_rl_dataset with max_samples=data.val_max_samples), on two tiny parquet files: with data.shuffle=False its
  subset holds no row of the second file; with data.shuffle=True and a seed it holds both; with data.seed null two
  builds draw different rows.
- VI937: verl's process_validation_metrics on n identical answers per prompt gives best@n = worst@n = mean@n (the
  metrics carry nothing beyond the greedy score); verl's rollout YAML sets val_kwargs.temperature to 0; verl's
  apply_greedy_sampling_params (run from its source: its module imports transfer_queue, not installed here) is
  temperature 0; both agent loops take the validation temperature from val_kwargs.temperature and never read
  val_kwargs.do_sample.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from wizard.check.lint import check

R = "actor_rollout_ref.rollout"
PPO = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
       f"{R}.name=vllm", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
       f"{R}.log_prob_micro_batch_size_per_gpu=8", f"{R}.n=4", "data.train_batch_size=16",
       "actor_rollout_ref.actor.ppo_mini_batch_size=8", "trainer.logger=[console]", "trainer.nnodes=1",
       "trainer.n_gpus_per_node=4"]


def _verl_root() -> Path:
    import verl

    return Path(verl.__file__).parent


def _parquet(path: Path, source: str, rows: int) -> Path:
    import pandas as pd

    pd.DataFrame([{"data_source": source, "prompt": [{"role": "user", "content": f"q{i}"}], "ability": "math",
                   "reward_model": {"style": "rule", "ground_truth": str(i)}} for i in range(rows)]).to_parquet(path)
    return path


@pytest.fixture()
def val_files(tmp_path: Path) -> list[Path]:
    return [_parquet(tmp_path / "math500.parquet", "HuggingFaceH4/MATH-500", 50),
            _parquet(tmp_path / "gsm8k.parquet", "openai/gsm8k", 30)]


def _verl_subset(files: list[Path], keep: int, tmp_path: Path, **data) -> list[str]:
    """The data_source of every row verl's own RLHFDataset keeps for max_samples=keep."""
    from omegaconf import OmegaConf

    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = OmegaConf.create({"filter_overlong_prompts": False, "cache_dir": str(tmp_path / "cache"), **data})
    ds = RLHFDataset(data_files=[str(p) for p in files], tokenizer=None, processor=None, config=config,
                     max_samples=keep)
    return list(ds.dataframe["data_source"])


def _lint(overrides: list[str]):
    return check(None, overrides=PPO + overrides)


def _hits(report, rule: str):
    return [f for f in report.findings if f.problem.rule == rule]


def _files_arg(files: list[Path]) -> str:
    return "data.val_files=[" + ",".join(f"'{p}'" for p in files) + "]"


# --- VI936 ------------------------------------------------------------------------------------------------------------

def test_verl_keeps_the_head_of_val_files_when_data_shuffle_is_false(val_files, tmp_path):
    kept = _verl_subset(val_files, 40, tmp_path, shuffle=False, validation_shuffle=True)
    assert len(kept) == 40 and set(kept) == {"HuggingFaceH4/MATH-500"}  # no gsm8k row: validation_shuffle is unread
    report = _lint([_files_arg(val_files), "data.val_max_samples=40", "data.shuffle=False",
                    "data.validation_shuffle=True"])
    [hit] = _hits(report, "VI936")
    assert hit.problem.severity == "warning" and "gsm8k.parquet (30 rows from row 50)" in hit.problem.message


def test_verl_draws_from_every_file_with_shuffle_and_a_seed_and_check_is_silent(val_files, tmp_path):
    kept = _verl_subset(val_files, 40, tmp_path, shuffle=True, seed=0)
    assert set(kept) == {"HuggingFaceH4/MATH-500", "openai/gsm8k"}
    assert _verl_subset(val_files, 40, tmp_path, shuffle=True, seed=0) == kept  # the seed fixes the draw
    assert not _hits(_lint([_files_arg(val_files), "data.val_max_samples=40", "data.shuffle=True", "data.seed=0"]),
                     "VI936")


def test_an_unseeded_draw_changes_between_launches_and_check_says_so(val_files, tmp_path):
    from omegaconf import OmegaConf

    from verl.utils.dataset.rl_dataset import RLHFDataset

    def prompts() -> list[str]:
        config = OmegaConf.create({"filter_overlong_prompts": False, "cache_dir": str(tmp_path / "c"), "shuffle": True})
        ds = RLHFDataset(data_files=[str(p) for p in val_files], tokenizer=None, processor=None, config=config,
                         max_samples=40)
        return [str(p) for p in ds.dataframe["prompt"]] + list(ds.dataframe["data_source"])

    assert prompts() != prompts()  # 40 of 80 drawn twice without a seed: the same draw has odds ~1e-23
    [hit] = _hits(_lint([_files_arg(val_files), "data.val_max_samples=40"]), "VI936")  # verl's defaults: shuffle, no seed
    assert hit.problem.severity == "info" and "data.seed" in hit.problem.message


def test_head_slice_of_one_file_is_an_info_and_a_cap_above_the_rows_is_silent(val_files, tmp_path):
    assert len(_verl_subset(val_files, 200, tmp_path, shuffle=False)) == 80  # fewer rows than the cap: all kept
    assert not _hits(_lint([_files_arg(val_files), "data.val_max_samples=200", "data.shuffle=False"]), "VI936")
    [hit] = _hits(_lint([f"data.val_files={val_files[0]}", "data.val_max_samples=10", "data.shuffle=False"]), "VI936")
    assert hit.problem.severity == "info"
    assert not _hits(_lint([_files_arg(val_files), "data.shuffle=False"]), "VI936")  # no cap: verl's -1


# --- VI937 ------------------------------------------------------------------------------------------------------------

def test_verls_metrics_of_identical_answers_are_the_greedy_score():
    from verl.trainer.ppo.metric_utils import process_validation_metrics

    uids = ["a"] * 4 + ["b"] * 4
    same = process_validation_metrics(["gsm8k"] * 8, uids, {"reward": [1, 1, 1, 1, 0, 0, 0, 0]})["gsm8k"]["reward"]
    assert same["mean@4"] == same["best@4/mean"] == same["worst@4/mean"] == 0.5
    varied = process_validation_metrics(["gsm8k"] * 8, uids, {"reward": [1, 0, 0, 0, 1, 0, 0, 0]})["gsm8k"]["reward"]
    assert varied["best@4/mean"] > varied["mean@4"] > varied["worst@4/mean"]  # sampled answers: the @n metrics differ


def test_verl_validates_greedily_by_default_and_ignores_do_sample():
    from omegaconf import OmegaConf

    root = _verl_root()
    assert OmegaConf.load(root / "trainer/config/rollout/rollout.yaml").val_kwargs.temperature == 0
    for rel in ("trainer/ppo/v1/agent_loop_tq.py", "experimental/agent_loop/agent_loop.py"):
        source = (root / rel).read_text(encoding="utf-8")
        tree = ast.parse(source)
        [greedy] = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                    and n.name == "apply_greedy_sampling_params"]
        scope: dict = {"Any": object}
        exec(compile(ast.Module(body=[greedy], type_ignores=[]), rel, "exec"), scope)  # noqa: S102 - verl's own code
        params: dict = {}
        scope["apply_greedy_sampling_params"](params)
        assert params["temperature"] == 0
        assert 'sampling_params["temperature"] = config.val_kwargs.temperature' in source
        assert "val_kwargs.do_sample" not in source


def test_check_warns_on_n_greedy_copies_and_offers_n_1():
    [hit] = _hits(_lint([f"{R}.val_kwargs.n=8"]), "VI937")  # the temperature left at verl's 0
    assert hit.problem.severity == "warning" and "8 copies of one greedy answer" in hit.problem.message
    assert hit.fix is not None and hit.fix.set == {f"{R}.val_kwargs.n": 1}


@pytest.mark.parametrize("extra", [[f"{R}.val_kwargs.n=8", f"{R}.val_kwargs.temperature=0.6"],
                                   [f"{R}.val_kwargs.n=1"], []])
def test_check_is_silent_on_sampled_or_single_validation(extra):
    assert not _hits(_lint(extra), "VI937")


def test_do_sample_with_zero_temperature_stays_vi852():
    report = _lint([f"{R}.val_kwargs.n=8", f"{R}.val_kwargs.do_sample=True"])
    assert not _hits(report, "VI937") and _hits(report, "VI852")


def test_the_real_cases_rebuilt(val_files, tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\npython3 -m verl.trainer.main_ppo \\\n" + " \\\n".join(
        f"    \"{o}\"" for o in PPO + [_files_arg(val_files), "data.val_max_samples=40", "data.shuffle=False",
                                     f"{R}.val_kwargs.n=8"]) + "\n", encoding="utf-8")
    report = check(str(script))
    assert _hits(report, "VI936") and _hits(report, "VI937")
