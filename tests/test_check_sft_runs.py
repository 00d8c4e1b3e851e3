"""verl's SFT trainer: VI680 (a relaunch resuming from an epoch-end checkpoint skips an epoch, R46-01 / verl#7401),
VI681 (data without the data.messages_key column, R46-03 / verl#1934) and VI682 (data.max_length above the
dynamic-batch token budget, R46-05 / verl#3088).

The oracles are verl's own code on the CPU: CheckpointHandler._load_dataloader_state restoring torchdata's
StatefulDataLoader built as trainer/sft_trainer.py:236-252 builds it and the fit loop's start_epoch / set_epoch
(sft_trainer.py:341, 356-357); MultiTurnSFTDataset's constructor; rearrange_micro_batches on a nested batch.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.sft_epoch_resume import steps_per_epoch

LAUNCH = "torchrun --standalone --nnodes=1 --nproc_per_node=4 -m verl.trainer.sft_trainer"


def _rows(path: Path, n: int, rl: bool = False) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    row = {"data_source": "openai/gsm8k", "prompt": chat[:1], "reward_model": {"style": "rule", "ground_truth": "1"}} \
        if rl else {"messages": chat}
    pq.write_table(pa.Table.from_pylist([row] * n), path)
    return path


def _script(tmp_path: Path, *args: str, data: Path | None = None) -> str:
    data = data or _rows(tmp_path / "train.parquet", 64)
    base = [f"data.train_files={data}", "data.train_batch_size=16", "model.path=Qwen/Qwen2.5-0.5B-Instruct",
            "optim.lr=1e-5", "trainer.logger=[console]"]
    script = tmp_path / "sft.sh"
    script.write_text("#!/bin/bash\nset -euo pipefail\n" + LAUNCH + " \\\n  " + " \\\n  ".join([*base, *args]) + "\n")
    return str(script)


def _hits(tmp_path: Path, rule: str, *args: str, data: Path | None = None):
    report = check(_script(tmp_path, *args, data=data), env={"HOME": "/root"})
    return [f.problem for f in report.findings if f.problem.rule == rule]


# ---- VI680 -------------------------------------------------------------------------------------------------------

def _resumed_steps(rows: int, batch: int, epochs: int, save_at: int) -> tuple[int, int]:
    """(steps a relaunch trains, steps it should train) after resuming from the checkpoint of step save_at, with
    verl's CheckpointHandler restoring the loader and the fit loop's epoch arithmetic (sft_trainer.py:341-357)."""
    import tempfile

    import torch
    from torch.utils.data import DistributedSampler
    from torchdata.stateful_dataloader import StatefulDataLoader

    from verl.utils.checkpoint.checkpoint_handler import CheckpointHandler

    def loader():
        data = list(range(rows))
        sampler = DistributedSampler(data, shuffle=True, num_replicas=1, rank=0, drop_last=True)
        return sampler, StatefulDataLoader(data, batch_size=batch, sampler=sampler, drop_last=True)

    sampler, dl = loader()
    per_epoch, step, state = len(dl), 0, None
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for _ in dl:
            step += 1
            if step == save_at:
                state = dl.state_dict()  # CheckpointHandler.save_checkpoint (checkpoint_handler.py:122)
    folder = tempfile.mkdtemp()
    torch.save(state, os.path.join(folder, "data_0.pt"))
    sampler, dl = loader()
    handler = object.__new__(CheckpointHandler)
    handler.dp_rank, handler.rank, handler.train_dataloader = 0, 0, dl
    handler._load_dataloader_state(folder)
    done = 0
    for epoch in range(save_at // per_epoch, epochs):
        sampler.set_epoch(epoch)
        done += sum(1 for _ in dl)
    return done, epochs * per_epoch - save_at


@pytest.mark.verl
def test_vi680_oracle_epoch_end_checkpoint_loses_an_epoch():
    pytest.importorskip("verl")
    pytest.importorskip("torchdata")
    assert steps_per_epoch(64, 16, 1) == 4
    assert _resumed_steps(64, 16, 3, 4) == (4, 8)  # an epoch-end checkpoint: the second epoch is skipped
    assert _resumed_steps(64, 16, 3, 8) == (0, 4)  # before the last epoch: the relaunch trains nothing
    assert _resumed_steps(64, 16, 3, 3) == (9, 9)  # mid-epoch: verl resumes exactly


def test_vi680_fires_for_after_each_epoch(tmp_path):
    hit = _hits(tmp_path, "VI680", "trainer.save_freq=after_each_epoch", "trainer.total_epochs=3")
    assert len(hit) == 1 and hit[0].severity == "warning", hit
    assert "global_step_4" in hit[0].message and "verl#7401" in hit[0].message  # 64 rows // 16 = 4 steps (dp 4)


def test_vi680_fires_for_a_multiple_of_the_epoch(tmp_path):
    hit = _hits(tmp_path, "VI680", "trainer.save_freq=2", "trainer.total_epochs=3")
    assert len(hit) == 1 and "global_step_4" in hit[0].message, hit
    assert "trainer.save_freq=3" in hit[0].hint or "trainer.save_freq=5" in hit[0].hint, hit[0].hint


def test_vi680_stays_quiet(tmp_path):
    assert not _hits(tmp_path, "VI680", "trainer.save_freq=3", "trainer.total_epochs=3")  # lcm 12 = the last step
    assert not _hits(tmp_path, "VI680", "trainer.save_freq=after_each_epoch", "trainer.total_epochs=1")
    assert not _hits(tmp_path, "VI680", "trainer.save_freq=after_each_epoch", "trainer.total_epochs=3",
                     "trainer.resume_mode=disable")
    assert not _hits(tmp_path, "VI680", "trainer.total_epochs=3")  # save_freq -1: only the last step's checkpoint


# ---- VI681 -------------------------------------------------------------------------------------------------------

@pytest.mark.verl
def test_vi681_oracle_multiturn_dataset_needs_the_column(tmp_path):
    pytest.importorskip("verl")
    from test_check_sft_data import _tiny_tokenizer

    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    config = {"messages_key": "messages", "max_length": 64, "ignore_input_ids_mismatch": True}
    with pytest.raises(KeyError, match="messages"):
        MultiTurnSFTDataset(str(_rows(tmp_path / "rl.parquet", 4, rl=True)), _tiny_tokenizer(), config)
    good = MultiTurnSFTDataset(str(_rows(tmp_path / "sft.parquet", 4)), _tiny_tokenizer(), config)
    assert len(good) == 4 and int(good[0]["loss_mask"].sum()) > 0  # the control: read and tokenized


def test_vi681_fires_on_rl_format_data(tmp_path):
    rl = _rows(tmp_path / "gsm8k_rl.parquet", 64, rl=True)
    hit = _hits(tmp_path, "VI681", data=rl)
    assert len(hit) == 1 and hit[0].severity == "error", hit
    assert "'prompt'" in hit[0].message and "gsm8k_multiturn_sft.py" in hit[0].hint


def test_vi681_names_another_chat_column_and_stays_quiet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    conv = tmp_path / "conv.parquet"
    pq.write_table(pa.Table.from_pylist([{"conversations": [{"role": "user", "content": "q"}]}] * 64), conv)
    hit = _hits(tmp_path, "VI681", data=conv)
    assert len(hit) == 1 and "data.messages_key=conversations" in hit[0].hint, hit
    assert not _hits(tmp_path, "VI681", "data.messages_key=conversations", data=conv)
    assert not _hits(tmp_path, "VI681")  # messages data
    assert not _hits(tmp_path, "VI681", "data.custom_cls.path=/x/ds.py", "data.custom_cls.name=DS", data=conv)


# ---- VI682 -------------------------------------------------------------------------------------------------------

@pytest.mark.verl
def test_vi682_oracle_rearrange_micro_batches_refuses_a_longer_sample():
    pytest.importorskip("verl")
    import torch
    from tensordict import TensorDict

    from verl.utils.seqlen_balancing import rearrange_micro_batches

    def batch(*lengths):
        ids = torch.nested.as_nested_tensor([torch.ones(n, dtype=torch.long) for n in lengths], layout=torch.jagged)
        return TensorDict({"input_ids": ids}, batch_size=[len(lengths)])

    with pytest.raises(AssertionError, match="max_token_len must be greater"):
        rearrange_micro_batches(batch(100, 8193, 50), max_token_len=8192)
    micro, _ = rearrange_micro_batches(batch(100, 8192, 50), max_token_len=8192)
    assert len(micro) >= 1


def test_vi682_fires_above_the_budget(tmp_path):
    hit = _hits(tmp_path, "VI682", "data.max_length=16384", "data.truncation=right")
    assert len(hit) == 1 and hit[0].severity == "warning" and "8193..16384" in hit[0].message, hit
    hit = _hits(tmp_path, "VI682", "data.max_length=16384", "engine.ulysses_sequence_parallel_size=1",
                "data.max_token_len_per_gpu=4096", "model.use_remove_padding=true")
    assert len(hit) == 1 and "data.max_token_len_per_gpu=16384" in hit[0].hint, hit


def test_vi682_stays_quiet(tmp_path):
    assert not _hits(tmp_path, "VI682")  # defaults: 1024 under 8192
    assert not _hits(tmp_path, "VI682", "data.max_length=16384", "data.max_token_len_per_gpu=16384")
    assert not _hits(tmp_path, "VI682", "data.max_length=16384", "engine.ulysses_sequence_parallel_size=2",
                     "model.use_remove_padding=true")  # 8192 x 2
    assert not _hits(tmp_path, "VI682", "data.max_length=16384", "data.use_dynamic_bsz=false",
                     "data.micro_batch_size_per_gpu=1")
