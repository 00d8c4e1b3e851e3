"""VI869: trainer.total_training_steps beyond what trainer.total_epochs of the training file hold (real case: verl PR
#7516, a run stopped at step 237 of 500). verl runs total_epochs epochs of a drop_last dataloader (ray_trainer.py:409,
:1465) and marks the last step only at global_steps >= total_training_steps (:1507). The oracle for batches per epoch
is torch's own DataLoader with drop_last, as verl builds it: 100 rows in batches of 8 are 12 batches.
"""

from __future__ import annotations

from pathlib import Path

from wizard.check.lint import check

ROWS, BATCH = 100, 8


def _file(tmp_path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist([{"prompt": [{"role": "user", "content": f"q{i}"}], "data_source": "x"}
                                         for i in range(ROWS)]), path)
    return path


def _vi869(path: Path, *extra: str) -> list:
    report = check(None, ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", f"data.train_files={path}",
                          f"data.train_batch_size={BATCH}", "trainer.nnodes=1", "trainer.n_gpus_per_node=8", *extra])
    return [f.problem for f in report.findings if f.problem.rule == "VI869"]


def test_batches_per_epoch_as_torchs_dataloader_counts_them():
    from torch.utils.data import DataLoader

    assert len(DataLoader(range(ROWS), batch_size=BATCH, drop_last=True)) == 12


def test_steps_the_epochs_never_reach(tmp_path):
    path = _file(tmp_path)
    [hit] = _vi869(path, "trainer.total_epochs=2", "trainer.total_training_steps=30")  # 2 × 12 = 24 < 30
    assert hit.severity == "warning" and "at most 12 batches" in hit.message and "24 in total_epochs=2" in hit.message
    assert "trainer.total_epochs ≥ 3" in hit.hint and "total_training_steps ≤ 24" in hit.hint
    assert not _vi869(path, "trainer.total_epochs=2", "trainer.total_training_steps=24")
    assert not _vi869(path, "trainer.total_epochs=2")  # null: verl counts 24 itself
