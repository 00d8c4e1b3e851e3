"""VI694: a relaunch that resumes a checkpoint already at the step budget (R60-03 / verl#6232).

Oracles from verl 0.9.1 itself on the CPU: verl's find_latest_ckpt_path names the folder the relaunch resumes (the
step it restores), and the two trainers' loop conditions are read from verl's installed source, so a verl that
changes them (the #6232 fix) fails the pin here rather than leaving the rule stale.
"""

from __future__ import annotations

from pathlib import Path

from wizard.check.lint import check

LAUNCH = "python3 -m verl.trainer.main_ppo"


def _data(path: Path, n: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "q"}],
           "reward_model": {"style": "rule", "ground_truth": "1"}}
    pq.write_table(pa.Table.from_pylist([row] * n), path)
    return path


def _ckpt(root: Path, step: int) -> Path:
    (root / f"global_step_{step}" / "actor").mkdir(parents=True)
    (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    return root


def _hits(tmp_path: Path, *args: str, step: int = 20, rows: int = 64):
    data = _data(tmp_path / "train.parquet", rows)
    root = _ckpt(tmp_path / "ckpt", step)
    base = ["algorithm.adv_estimator=grpo", f"data.train_files={data}", f"data.val_files={data}",
            "data.train_batch_size=32", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
            "actor_rollout_ref.actor.ppo_mini_batch_size=16", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8", "actor_rollout_ref.rollout.n=4",
            "trainer.n_gpus_per_node=8", "trainer.nnodes=1", "trainer.logger=[console]", "trainer.save_freq=10",
            f"trainer.default_local_dir={root}"]
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\nset -euo pipefail\n" + LAUNCH + " \\\n  " + " \\\n  ".join([*base, *args]) + "\n")
    report = check(str(script), env={"HOME": "/root"})
    return [f.problem for f in report.findings if f.problem.rule == "VI694"]


def test_verl_resumes_the_tracked_step(tmp_path):
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    root = _ckpt(tmp_path / "ckpt", 20)
    assert find_latest_ckpt_path(str(root)) == str(root / "global_step_20")


def _fit_source(module: str, cls: str) -> str:
    """A trainer's fit() as verl ships it, read with ast (importing the V1 trainer needs rollout extras)."""
    import ast
    import importlib.util

    path = importlib.util.find_spec("verl").submodule_search_locations[0] + "/" + module
    text = Path(path).read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            fit = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "fit")
            return ast.get_source_segment(text, fit)
    raise AssertionError(f"{cls}.fit not in {module}")


def test_verl_loops_as_the_rule_says():
    legacy = _fit_source("trainer/ppo/ray_trainer.py", "RayPPOTrainer")
    plus, loop = legacy.index("self.global_steps += 1"), legacy.index("for epoch in range(current_epoch")
    assert plus < loop < legacy.index("is_last_step = self.global_steps >= self.total_training_steps")
    v1 = _fit_source("trainer/ppo/v1/trainer_base.py", "PPOTrainer")
    assert "self.global_steps <= self.total_training_steps" in v1


def test_legacy_trains_past_the_budget(tmp_path):
    hit = _hits(tmp_path, "trainer.use_v1=False", "trainer.total_epochs=15", "trainer.total_training_steps=20")
    assert len(hit) == 1 and hit[0].severity == "warning"
    assert "step 21" in hit[0].message and "global_step_21" in hit[0].message and "verl#6232" in hit[0].message


def test_v1_trains_nothing(tmp_path):
    hit = _hits(tmp_path, "trainer.total_epochs=15", "trainer.total_training_steps=20")
    assert len(hit) == 1 and "exits 0 without training a step" in hit[0].message


def test_budget_from_epochs(tmp_path):
    # 64 rows // 32 = 2 batches an epoch, 10 epochs = 20 steps; resuming step 20 leaves nothing to train
    hit = _hits(tmp_path, "trainer.total_epochs=10")
    assert len(hit) == 1 and "10 × 2 batches an epoch = 20 steps" in hit[0].message


def test_controls_stay_clean(tmp_path):
    for sub in "abc":
        (tmp_path / sub).mkdir()
    assert not _hits(tmp_path / "a", "trainer.total_epochs=15", "trainer.total_training_steps=40")  # steps left
    assert not _hits(tmp_path / "b", "trainer.total_epochs=15")  # 30 steps from the epochs
    assert not _hits(tmp_path / "c", "trainer.total_epochs=15", "trainer.total_training_steps=20",
                     "trainer.resume_mode=disable")
