"""verl's SFT trainer (verl.trainer.sft_trainer / sft_trainer_ray): VI812 extended to engine.ulysses_sequence_parallel_size
(R27-06: Qwen2.5-7B, 28 heads, SP 8), VI788 (a val set that makes no batch: val/loss nan, R27-02, verl#7464) and
VI789 (optim.lr left at the generic placeholder for a full fine-tune, R27-05).

The oracles are verl's own code on the CPU: apply_monkey_patch on a model built on the meta device from a local
config.json, SFTTrainer._build_dataloader on a stand-in engine (torch's DistributedSampler and torchdata's
StatefulDataLoader with verl's arguments), and verl's composed sft_trainer_engine config turned into its
optimizer dataclass, an AdamW and verl's LR schedule.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.sft_parallel import val_batches
from test_check_validation import HTTP_STUBS

ARGS = ["data.messages_key=messages", "trainer.logger=[console]", "optim.lr=1e-5"]


def _bash_or_skip():
    from wizard.check import bashtrace

    if not bashtrace.available():
        pytest.skip("no sandbox to trace the script with bash")


def _script(tmp_path: Path, launch: str, *args: str, name: str = "sft.sh") -> str:
    script = tmp_path / name
    script.write_text("#!/bin/bash\nset -euo pipefail\n" + launch + " \\\n  " + " \\\n  ".join(args) + "\n")
    return str(script)


def _rows(path: Path, n: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    pq.write_table(pa.Table.from_pylist([{"messages": chat}] * n), path)
    return path


def _valid(hint: str) -> set[int]:
    return {int(v) for v in hint.split(" (")[0].removeprefix("nearest valid: ").split(" or ")}


def _findings(report, rule: str) -> list:
    return [f.problem for f in report.findings if f.problem.rule == rule]


# --- VI812 on the SFT engine -------------------------------------------------------------------------------------

HEADS = {"num_attention_heads": 12, "num_key_value_heads": 4}  # a tiny Qwen2: 12 query heads, 4 KV heads
SPS = (2, 3, 4, 6, 8, 12)


def _tiny_qwen2(folder: Path, heads: dict[str, int] = HEADS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 96, "intermediate_size": 128,
           "num_hidden_layers": 1, "vocab_size": 128, "max_position_embeddings": 256, "torch_dtype": "bfloat16",
           "rope_theta": 10000.0, "tie_word_embeddings": False, **heads}
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return folder


def _verl_accepts_sp(model_dir: Path, sp: int) -> bool:
    """verl's apply_monkey_patch (the call FSDPEngine makes, workers/engine/fsdp/transformer_impl.py:324-330) on the
    model built from the same config.json."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from verl.models.transformers.monkey_patch import apply_monkey_patch

    cfg = transformers.AutoConfig.from_pretrained(str(model_dir))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    try:
        apply_monkey_patch(model=model, ulysses_sp_size=sp, use_remove_padding=True)
    except AssertionError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.parametrize("sp", SPS)
def test_sft_ulysses_heads_match_verls_monkey_patch(sp, tmp_path):
    pytest.importorskip("verl")
    _bash_or_skip()
    model = _tiny_qwen2(tmp_path / "model")
    accepted = _verl_accepts_sp(model, sp)
    # 24 ranks: every SP above divides the world, so only the heads decide
    report = check(_script(tmp_path, "torchrun --nnodes=1 --nproc_per_node=24 -m verl.trainer.sft_trainer", *ARGS,
                           f"data.train_files={_rows(tmp_path / 'train.parquet', 64)}", f"model.path={model}",
                           f"engine.ulysses_sequence_parallel_size={sp}"), env={"HOME": "/root"})
    heads = [p for p in _findings(report, "VI812") if "heads" in p.message]
    assert bool(heads) == (not accepted), (sp, accepted, [x.problem.line() for x in report.findings])
    if heads:
        assert heads[0].severity == "error" and "monkey_patch.py:343-350" in heads[0].message
        for valid in _valid(heads[0].hint):
            assert _verl_accepts_sp(model, valid), heads[0].hint


@pytest.mark.slow
def test_r27_06_qwen25_7b_sp8_from_the_catalogue_and_the_world(tmp_path):
    """The real case, with the model on the hub (heads from verl-init's catalogue), and SP against torchrun's world."""
    _bash_or_skip()
    launch = "torchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer"
    base = [*ARGS, "data.train_files=/data/train.parquet", "model.path=Qwen/Qwen2.5-7B-Instruct"]
    report = check(_script(tmp_path, launch, *base, "engine.ulysses_sequence_parallel_size=8"), env={"HOME": "/root"})
    bad = _findings(report, "VI812")
    assert len(bad) == 1 and "28 heads" in bad[0].message and _valid(bad[0].hint) == {2, 4}, bad
    for sp in (1, 2, 4):  # controls: 28 and 4 KV heads share 2 or 4 ranks
        report = check(_script(tmp_path, launch, *base, f"engine.ulysses_sequence_parallel_size={sp}"),
                       env={"HOME": "/root"})
        assert not _findings(report, "VI812"), [x.problem.line() for x in report.findings]
    # SP 4 on 6 ranks: the (dp, sp) mesh does not fit the world (fsdp/transformer_impl.py:246-250)
    report = check(_script(tmp_path, "torchrun --nproc_per_node=6 -m verl.trainer.sft_trainer", *base,
                           "engine.ulysses_sequence_parallel_size=4"), env={"HOME": "/root"})
    assert [_valid(p.hint) for p in _findings(report, "VI812")] == [{1, 2}]  # 3 and 6 do not divide 28 heads
    # without use_remove_padding: verl's FSDP engine raises ValueError first; a single safe fix
    report = check(_script(tmp_path, launch, *base, "engine.ulysses_sequence_parallel_size=2",
                           "model.use_remove_padding=false"), env={"HOME": "/root"})
    assert [p.keys[0] for p in _findings(report, "VI812")] == ["model.use_remove_padding"]


@pytest.mark.verl
def test_verls_fsdp_engine_refuses_sp_without_remove_padding():
    verl = pytest.importorskip("verl")
    src = (Path(verl.__file__).parent / "workers" / "engine" / "fsdp" / "transformer_impl.py").read_text()
    assert "if self.engine_config.ulysses_sequence_parallel_size > 1 and not self.use_remove_padding:" in src
    assert "return torch.distributed.get_world_size() // self.ulysses_sequence_parallel_size" in src


# --- VI788 ---------------------------------------------------------------------------------------------------------

ORACLE = HTTP_STUBS + r'''
import json, sys, types
from unittest import mock
from omegaconf import OmegaConf
from verl.trainer import sft_trainer, sft_trainer_ray

out = []
for module, rows, batch, dp in json.loads(sys.argv[1]):
    st = {"sft_trainer": sft_trainer, "sft_trainer_ray": sft_trainer_ray}[module]
    cfg = OmegaConf.create({"data": {"train_batch_size": batch, "pad_mode": "no_padding", "num_workers": 0},
                            "trainer": {"total_training_steps": None, "total_epochs": 1, "save_freq": -1,
                                        "test_freq": -1}})
    counts = []
    for rank in range(dp):
        engine = types.SimpleNamespace(get_data_parallel_rank=lambda r=rank: r, get_data_parallel_size=lambda: dp)
        me = types.SimpleNamespace(config=cfg, engine=engine, train_dataset=list(range(batch)),
                                   val_dataset=list(range(rows)), optimizer_config=types.SimpleNamespace())
        st.SFTTrainer._build_dataloader(me)
        counts.append(len(me.val_dataloader))
    out.append(counts)
print("RESULTS " + json.dumps(out))
'''
VAL_CASES = [(50, 256, 2), (255, 256, 1), (256, 256, 1), (130, 256, 2), (9, 10, 4), (7, 10, 4), (300, 256, 8),
             (200, 256, 8), (3, 8, 4), (1000, 256, 1)]


def _verls_val_batches(cases: list) -> list[list[int]]:
    """Batches each rank's val DataLoader yields, built by verl's SFTTrainer._build_dataloader on a stand-in engine
    (trainer/sft_trainer.py:224-269; sft_trainer_ray.py's, which fixes dp = 1), in a child process (the rollout
    server's HTTP modules get stand-ins there when missing, as in tests/test_check_validation.py)."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", ORACLE, json.dumps(cases)], capture_output=True, text=True,
                         timeout=300)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("RESULTS ")), None)
    assert line is not None, run.stderr[-3000:]
    return json.loads(line.removeprefix("RESULTS "))


@pytest.mark.slow
@pytest.mark.verl
def test_val_batches_is_verls_dataloader():
    pytest.importorskip("verl")
    pytest.importorskip("torchdata")
    cases = [["sft_trainer", *c] for c in VAL_CASES] + [["sft_trainer_ray", rows, batch, 1]
                                                         for rows, batch, _ in VAL_CASES]
    got = _verls_val_batches(cases)
    for (module, rows, batch, dp), counts in zip(cases, got):
        assert counts == [val_batches(rows, batch, dp)] * dp, (module, rows, batch, dp, counts)
    assert [0, 0] in got and [1] in got  # the fault and the control both occur


@pytest.mark.verl
def test_no_val_batch_makes_val_loss_nan():
    """sft_trainer.py:419-429 takes torch.mean of the losses it collected: of none, nan."""
    torch = pytest.importorskip("torch")
    verl = pytest.importorskip("verl")
    src = (Path(verl.__file__).parent / "trainer" / "sft_trainer.py").read_text()
    assert "val_loss = torch.mean(torch.tensor(val_losses, device=self.device_name))" in src
    assert torch.isnan(torch.mean(torch.tensor([]))).item()


@pytest.mark.parametrize("launch,rows,extra,fires", [
    ("torchrun --nnodes=1 --nproc_per_node=2 -m verl.trainer.sft_trainer", 50, [], True),  # R27-02
    ("torchrun --nnodes=1 --nproc_per_node=2 -m verl.trainer.sft_trainer", 256, [], False),
    ("torchrun --nnodes=1 --nproc_per_node=2 -m verl.trainer.sft_trainer", 50, ["data.train_batch_size=32"], False),
    ("torchrun --nnodes=1 --nproc_per_node=2 -m verl.trainer.sft_trainer", 1000, ["data.val_max_samples=100"], True),
    # Ulysses 4 of 8 ranks: dp 2, 128 rows a rank; 200 rows give each rank 100
    ("torchrun --nproc_per_node=8 -m verl.trainer.sft_trainer", 200, ["engine.ulysses_sequence_parallel_size=4",
                                                                      "model.path=Qwen/Qwen2.5-0.5B-Instruct"], True),
    ("torchrun --nproc_per_node=8 -m verl.trainer.sft_trainer", 200, [], True),  # dp 8: 32 rows a rank, 25 each
    ("torchrun --nproc_per_node=8 -m verl.trainer.sft_trainer", 300, [], False),  # 37 each: one batch
    ("torchrun --nproc_per_node=auto -m verl.trainer.sft_trainer", 50, [], False),  # world unknown here: silent
    ("python3 -m verl.trainer.sft_trainer_ray", 200, ["trainer.n_gpus_per_node=8"], True),  # dp = 1: 256 rows
    ("python3 -m verl.trainer.sft_trainer_ray", 300, ["trainer.n_gpus_per_node=8"], False),
])
def test_check_names_a_val_set_that_makes_no_batch(tmp_path, launch, rows, extra, fires):
    _bash_or_skip()
    train, val = _rows(tmp_path / "train.parquet", 1000), _rows(tmp_path / "val.parquet", rows)
    report = check(_script(tmp_path, launch, *ARGS, f"data.train_files={train}", f"data.val_files={val}", *extra),
                   env={"HOME": "/root"})
    found = _findings(report, "VI788")
    assert bool(found) == fires, [x.problem.line() for x in report.findings]
    if found:
        assert found[0].severity == "warning" and "nan" in found[0].message


def test_vi788_hint_is_a_batch_verl_validates_with(tmp_path):
    _bash_or_skip()
    val = _rows(tmp_path / "val.parquet", 50)
    report = check(_script(tmp_path, "torchrun --nproc_per_node=2 -m verl.trainer.sft_trainer", *ARGS,
                           "data.train_files=/data/train.parquet", f"data.val_files={val}"), env={"HOME": "/root"})
    hint = _findings(report, "VI788")[0].hint
    lower = int(hint.split("at most ")[1].split()[0])
    assert val_batches(50, lower, 2) >= 1 and val_batches(50, lower + 2, 2) == 0


# --- VI789 ---------------------------------------------------------------------------------------------------------

def _verls_sft_optim(*overrides: str):
    pytest.importorskip("hydra")
    verl = pytest.importorskip("verl")
    from hydra import compose, initialize_config_dir
    from verl.utils.config import omega_conf_to_dataclass

    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        cfg = compose(config_name="sft_trainer_engine", overrides=["model.path=/tmp/x", *overrides])
    return omega_conf_to_dataclass(cfg.optim)


@pytest.mark.verl
def test_verls_sft_default_lr_is_what_check_reports(tmp_path):
    """verl composes the SFT optimizer with the generic lr and a constant schedule without warmup: the first AdamW
    step runs at that lr (verl's build_optimizer and the schedule FSDPEngine builds, transformer_impl.py:502-530)."""
    torch = pytest.importorskip("torch")
    _bash_or_skip()
    from verl.utils.torch_functional import get_constant_schedule_with_warmup
    from verl.workers.config.optimizer import build_optimizer

    optim = _verls_sft_optim("engine=fsdp")
    opt = build_optimizer(torch.nn.Linear(4, 4).parameters(), optim)
    sched = get_constant_schedule_with_warmup(opt, num_warmup_steps=int(optim.lr_warmup_steps_ratio * 100))
    assert sched.get_last_lr()[0] == optim.lr and optim.lr_scheduler_type == "constant"
    args = [a for a in ARGS if not a.startswith("optim.lr=")]
    report = check(_script(tmp_path, "torchrun --nproc_per_node=8 -m verl.trainer.sft_trainer", *args,
                           "data.train_files=/data/train.parquet", "model.path=Qwen/Qwen2.5-0.5B-Instruct",
                           "engine=fsdp"), env={"HOME": "/root"})
    found = _findings(report, "VI789")
    assert len(found) == 1 and found[0].severity == "warning", [x.problem.line() for x in report.findings]
    assert f"lr={optim.lr:g}" in found[0].message and "constant" in found[0].message


@pytest.mark.parametrize("extra,fires", [
    ([], True),                                   # R27-05: verl's multi-turn example run for real
    (["optim.lr=1e-5"], False),                   # set: the user's choice
    (["optim.lr=1e-3"], False),                   # set explicitly, even high: the user's choice
    (["model.lora_rank=32", "model.lora_alpha=16"], False),  # LoRA: 1e-4..1e-3 is usual for adapters
    (["model.lora.rank=16"], False),
])
def test_check_names_an_sft_lr_left_at_the_placeholder(tmp_path, extra, fires):
    _bash_or_skip()
    args = [a for a in ARGS if not a.startswith("optim.lr=")]
    report = check(_script(tmp_path, "torchrun --nproc_per_node=8 -m verl.trainer.sft_trainer", *args,
                           "data.train_files=/data/train.parquet", "model.path=Qwen/Qwen2.5-0.5B-Instruct", *extra),
                   env={"HOME": "/root"})
    assert bool(_findings(report, "VI789")) == fires, [x.problem.line() for x in report.findings]


@pytest.mark.verl
def test_an_optim_group_with_a_low_lr_is_silent(tmp_path):
    """optim=automodel brings verl's lr 1e-5 (optim/automodel.yaml:10): the value is read, not assumed."""
    _bash_or_skip()
    assert _verls_sft_optim("engine=automodel", "optim=automodel").lr <= 1e-4
    args = [a for a in ARGS if not a.startswith("optim.lr=")]
    report = check(_script(tmp_path, "torchrun --nproc_per_node=8 -m verl.trainer.sft_trainer", *args,
                           "data.train_files=/data/train.parquet", "model.path=Qwen/Qwen2.5-0.5B-Instruct",
                           "engine=automodel", "optim=automodel"), env={"HOME": "/root"})
    assert not _findings(report, "VI789"), [x.problem.line() for x in report.findings]
