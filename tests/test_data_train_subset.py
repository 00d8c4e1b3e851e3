"""VI418: data.train_max_samples with data.shuffle=True and data.seed null (real case verl#7816).

The oracle is verl 0.9.1's own code, run on the CPU: its RLHFDataset (utils/dataset/rl_dataset.py), built as every
PPO trainer builds the training set (max_samples=data.train_max_samples), and its create_rl_sampler
(trainer/ppo/utils.py) driving torchdata's StatefulDataLoader, as the trainer does. A run is interrupted after two
batches and its loader state saved (data.pt); the "resumed" run rebuilds the dataset and loads that state, as
trainer_base.py:228/:392/:893-896 do. Without a seed the resumed batch is not the batch the uninterrupted run would
have trained on; with data.seed set it is, and check is then silent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_check_val_sampling import PPO, R  # the same small GRPO launch

from wizard.check.lint import check


@pytest.fixture()
def train_file(tmp_path: Path) -> Path:
    import pandas as pd

    path = tmp_path / "train.parquet"
    pd.DataFrame([{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": f"q{i}"}], "ability": "math",
                   "reward_model": {"style": "rule", "ground_truth": str(i)}} for i in range(80)]).to_parquet(path)
    return path


def _next_batch(train_file: Path, tmp_path: Path, state: dict | None, **data) -> tuple[list[str], dict]:
    """verl's training set (max_samples=40) and sampler in a StatefulDataLoader of batch 4: with `state`, the loader
    resumes from it and the next batch is returned; without, two batches are drawn and the third is returned with the
    state saved before it."""
    from omegaconf import OmegaConf
    from torchdata.stateful_dataloader import StatefulDataLoader

    from verl.trainer.ppo.utils import create_rl_sampler
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = OmegaConf.create({"filter_overlong_prompts": False, "cache_dir": str(tmp_path / "cache"), **data})
    ds = RLHFDataset(data_files=[str(train_file)], tokenizer=None, processor=None, config=config, max_samples=40)
    prompts = [str(p[0]["content"]) for p in ds.dataframe["prompt"]]
    loader = StatefulDataLoader(prompts, batch_size=4, sampler=create_rl_sampler(config, ds), drop_last=True)
    if state is not None:
        loader.load_state_dict(state)
        return list(next(iter(loader))), state
    it = iter(loader)
    next(it), next(it)
    saved = loader.state_dict()
    return list(next(it)), saved


def _lint(overrides: list[str]):
    return check(None, overrides=PPO + overrides)


def _hits(report):
    return [f for f in report.findings if f.problem.rule == "VI418"]


def test_verl_resumes_an_unseeded_subset_on_other_rows_and_check_warns(train_file, tmp_path):
    third, state = _next_batch(train_file, tmp_path, None, shuffle=True)
    resumed = [_next_batch(train_file, tmp_path, state, shuffle=True)[0] for _ in range(3)]
    assert all(batch != third for batch in resumed)  # 3 redraws of 40 of 80 rows: the same 4 prompts back ~never
    [hit] = _hits(_lint([f"data.train_files={train_file}", "data.train_max_samples=40", "trainer.save_freq=10"]))
    assert hit.problem.severity == "warning"
    assert "data.train_max_samples=40" in hit.problem.message and "data.seed=" in hit.problem.hint


def test_a_seed_makes_verl_resume_on_the_same_rows_and_check_is_silent(train_file, tmp_path):
    third, state = _next_batch(train_file, tmp_path, None, shuffle=True, seed=7)
    assert _next_batch(train_file, tmp_path, state, shuffle=True, seed=7)[0] == third
    assert not _hits(_lint([f"data.train_files={train_file}", "data.train_max_samples=40", "data.seed=7",
                            "trainer.save_freq=10"]))


def test_without_checkpoints_it_is_info_and_without_a_subsample_nothing(train_file):
    [hit] = _hits(_lint([f"data.train_files={train_file}", "data.train_max_samples=40"]))  # save_freq -1: no resume
    assert hit.problem.severity == "info"
    [hit] = _hits(_lint([f"data.train_files={train_file}", "data.train_max_samples=40", "trainer.save_freq=10",
                         "trainer.resume_mode=disable"]))  # checkpoints, but never resumed from
    assert hit.problem.severity == "info"
    # 80 rows, cap 80: verl keeps every row (rl_dataset.py:185), and with shuffle off the head is stable
    assert not _hits(_lint([f"data.train_files={train_file}", "data.train_max_samples=80", "trainer.save_freq=10"]))
    assert not _hits(_lint([f"data.train_files={train_file}", "data.train_max_samples=40", "data.shuffle=False",
                            "trainer.save_freq=10"]))
    assert not _hits(_lint([f"data.train_files={train_file}", "trainer.save_freq=10"]))  # verl's -1: no cap
