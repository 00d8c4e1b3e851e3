"""VI739: SFT messages carrying a per-message loss-mask field (loss_mask / trainable ...) that verl 0.9.1's
MultiTurnSFTDataset never reads (real case R88-01, verl#5316, PR#5472 unmerged).

The oracle is verl's own MultiTurnSFTDataset on a tiny local tokenizer, on the CPU: an assistant turn marked
`loss_mask: 0` is still trained. The rule is then planted on a local parquet and a plain messages file stays clean.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_check_sft_data import _tiny_tokenizer  # the word-level ChatML tokenizer verl's SFT dataset reads

from wizard.check.lint import check

LAUNCH = "torchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer"
MSGS = [{"role": "user", "content": "w1 w2"}, {"role": "assistant", "content": "w3 w4"},
        {"role": "user", "content": "w5"}, {"role": "assistant", "content": "FINAL ANSWER"}]


def _parquet(path: Path, field: str | None) -> Path:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [dict(m, **({field: 0 if i == 1 else 1} if field else {})) for i, m in enumerate(MSGS)]
    pq.write_table(pa.Table.from_pylist([{"messages": rows}]), str(path))
    return path


@pytest.mark.verl
def test_verls_dataset_trains_a_turn_marked_loss_mask_0(tmp_path):
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    hf = _tiny_tokenizer()
    cfg = OmegaConf.create({"pad_mode": "no_padding", "truncation": "error", "max_length": 256,
                            "messages_key": "messages", "ignore_input_ids_mismatch": True})
    masked = MultiTurnSFTDataset(str(_parquet(tmp_path / "m.parquet", "loss_mask")), hf, cfg)[0]
    plain = MultiTurnSFTDataset(str(_parquet(tmp_path / "p.parquet", None)), hf, cfg)[0]
    tokens = hf.convert_ids_to_tokens(masked["input_ids"].tolist())
    trained = {t for t, m in zip(tokens, masked["loss_mask"].tolist()) if m}
    assert {"w3", "w4"} <= trained  # the turn marked loss_mask: 0 is trained anyway
    assert masked["loss_mask"].tolist() == plain["loss_mask"].tolist()  # the field changes nothing


def _hits(tmp_path: Path, data: Path, *extra: str):
    script = tmp_path / "run.sh"
    script.write_text(f"{LAUNCH} data.train_files={data} data.messages_key=messages "
                      f"model.path=Qwen/Qwen2.5-0.5B-Instruct trainer.logger=[console] {' '.join(extra)}\n")
    report = check(str(script), env={"HOME": "/root"})
    return [f for f in report.findings if f.problem.rule == "VI739"]


@pytest.mark.parametrize("field", ["loss_mask", "trainable", "weight"])
def test_vi739_fires_on_a_mask_field(tmp_path, field):
    hit = _hits(tmp_path, _parquet(tmp_path / "d.parquet", field))
    assert hit and hit[0].problem.severity == "warning" and repr(field) in hit[0].problem.message
    assert "234-240" in hit[0].problem.message


def test_vi739_clean_on_plain_messages_and_custom_dataset(tmp_path):
    assert not _hits(tmp_path, _parquet(tmp_path / "p.parquet", None))
    data = _parquet(tmp_path / "d.parquet", "loss_mask")
    assert not _hits(tmp_path, data, "data.custom_cls.path=/data/my_ds.py", "data.custom_cls.name=MyDataset")


@pytest.mark.verl
def test_message_keys_table_is_regenerated_from_verl():
    pytest.importorskip("verl")
    from helpers_scripts import ROOT, regenerated

    committed = (ROOT / "wizard" / "check" / "data" / "verl_sft_message_keys.json").read_text("utf-8")
    assert regenerated("verl_sft_message_keys") == committed
    from wizard.check.rules.sft_message_fields import MASK_FIELDS, verl_message_keys

    assert "role" in verl_message_keys() and not set(MASK_FIELDS) & verl_message_keys()
