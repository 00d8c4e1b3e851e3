"""Data paths verl's RLHFDataset cannot read (real case: verl PR#890, a folder of parquet shards as train_files):
check's VI914, and data-file patterns (folder/*.parquet), which verl reads and check must not call missing.

The oracle is verl's own RLHFDataset on the same paths: each case asserts what verl does with it first, so the test
fails if the rule's premise is wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wizard.check.lint import check

pytestmark = pytest.mark.verl
ROWS = [{"prompt": [{"role": "user", "content": f"What is {i} + {i}?"}], "data_source": "openai/gsm8k",
         "reward_model": {"style": "rule", "ground_truth": str(2 * i)}} for i in range(6)]


@pytest.fixture()
def shards(tmp_path: Path) -> Path:
    """A Spark-style folder named train.parquet of two part files."""
    import pandas as pd

    folder = tmp_path / "train.parquet"
    folder.mkdir()
    pd.DataFrame(ROWS[:4]).to_parquet(folder / "part-0.parquet")
    pd.DataFrame(ROWS[4:]).to_parquet(folder / "part-1.parquet")
    return folder


def _verl_rows(tmp_path: Path, path: str) -> int:
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from wizard.smoketest.tiny import build_tokenizer

    build_tokenizer(tmp_path / "tok")
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512, "filter_overlong_prompts": False})
    return len(RLHFDataset([path], AutoTokenizer.from_pretrained(str(tmp_path / "tok")), cfg, processor=None))


def _findings(train: str, val: str, *extra: str) -> dict[str, list]:
    report = check(None, ["algorithm.adv_estimator=grpo", f"data.train_files={train}", f"data.val_files={val}",
                          "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
                          *extra], defaults="snapshot", env={"HOME": "/nonexistent-home"})
    out: dict[str, list] = {}
    for f in report.findings:
        if f.problem.rule in ("VI870", "VI914"):
            out.setdefault(f.problem.rule, []).append(f.problem)
    return out


def test_a_folder_of_shards_is_an_error_and_its_pattern_is_read(tmp_path, shards):
    with pytest.raises(FileNotFoundError):
        _verl_rows(tmp_path, str(shards))
    pattern = f"{shards}/*.parquet"
    assert _verl_rows(tmp_path, pattern) == len(ROWS)
    found = _findings(pattern, str(shards))
    assert [p.keys for p in found["VI914"]] == [("data.val_files",)] and "VI870" not in found
    assert found["VI914"][0].severity == "error" and f"data.val_files='{pattern}'" in found["VI914"][0].hint
    assert "FileNotFoundError" in found["VI914"][0].message


def test_a_csv_file_is_an_error(tmp_path, shards):
    import pandas as pd

    csv = tmp_path / "train.csv"
    pd.DataFrame(ROWS).to_csv(csv)
    with pytest.raises(ValueError, match="Unsupported file format"):
        _verl_rows(tmp_path, str(csv))
    found = _findings(str(csv), f"{shards}/*.parquet")
    assert [p.keys for p in found["VI914"]] == [("data.train_files",)]


def test_a_pattern_that_matches_nothing_is_named(tmp_path):
    found = _findings(f"{tmp_path}/none/*.parquet", f"{tmp_path}/none/*.parquet")
    assert len(found["VI870"]) == 2 and all("matches no file" in p.message for p in found["VI870"])
    assert "VI914" not in found


def test_a_custom_dataset_class_reads_what_it_likes(tmp_path, shards):
    assert "VI914" not in _findings(str(shards), str(tmp_path / "val.csv"), "data.custom_cls.path=/x/ds.py",
                                    "data.custom_cls.name=MyDataset")


def test_a_folder_without_a_data_suffix_is_verls_unsupported_format(tmp_path, shards):
    plain = shards.rename(tmp_path / "shards")
    with pytest.raises(ValueError, match="Unsupported file format"):
        _verl_rows(tmp_path, str(plain))
    (problem,) = _findings(f"{plain}/*.parquet", str(plain))["VI914"]
    assert "Unsupported file format" in problem.message and f"'{plain}/*.parquet'" in problem.hint
