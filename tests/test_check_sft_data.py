"""verl's SFT trainer: torchrun's world size (wizard.check.torchrun), VI785 (a pad mode the engines refuse, R27-03),
VI786 (micro batch size ignored under the SFT default of dynamic batching, R27-07) and VI787 (truncation=left cuts the
end under no_padding, R27-01).

The oracles are torch's and verl's own code: torch.distributed.run's argument parser on the same argv, verl's
FSDPEngineWithLMHead.prepare_model_inputs and the other engines' source (ast), verl's prepare_micro_batches and
verl's MultiTurnSFTDataset on a tiny local tokenizer, all on the CPU.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.torchrun import UNKNOWN, torchrun_world

LAUNCH = "torchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer"
ARGS = ["data.train_files=/data/train.parquet", "data.messages_key=messages", "model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "trainer.logger=[console]"]

ARGVS = [
    ["--standalone", "--nnodes=1", "--nproc_per_node=8"],
    ["--nnodes", "2", "--nproc-per-node", "4", "--master_addr", "10.0.0.1", "--master_port=29500"],
    ["--nproc_per_node=2"],
    [],
    ["--nnodes=2:2", "--nproc-per-node=8", "--rdzv-backend=c10d", "--rdzv-endpoint", "host:1234"],
    ["--nnodes=1:4", "--nproc_per_node=8"],
    ["--nproc_per_node=auto"],
    ["--nproc_per_node=gpu", "--nnodes=2"],
    ["--nnode=2", "--nproc_per_node=4"],
    ["--nproc=4"],
    ["--standalone", "--nproc_per_node", "8", "--max-restarts", "3"],
]


def _verl():
    return pytest.importorskip("verl")


@pytest.mark.verl
@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a) or "defaults" for a in ARGVS])
def test_torchrun_world_is_torchs_own_reading(argv, monkeypatch):
    pytest.importorskip("torch")
    from torch.distributed import run

    for name in ("PET_NNODES", "PET_NPROC_PER_NODE"):
        monkeypatch.delenv(name, raising=False)
    ours = torchrun_world(["torchrun", *argv, "-m"])
    try:
        args = run.get_args_parser().parse_args([*argv, "-m", "verl.trainer.sft_trainer", "data.x=1"])
    except SystemExit:  # torch refuses it (an ambiguous abbreviation): the count is not one we may state
        assert not ours.known, argv
        return
    lo, hi = run.parse_min_max_nnodes(args.nnodes)
    try:
        per = int(args.nproc_per_node)  # determine_local_world_size's int branch (run.py:745-748)
    except ValueError:  # auto / gpu / cpu: counted on the node at launch
        per = None
    if per is None or lo != hi:
        assert not ours.known, argv
    elif not ours.known:  # an abbreviation torch takes: ours says "unknown", never a wrong count
        assert any(not w.split("=")[0] in ("--nnodes", "--nproc-per-node", "--nproc_per_node")
                   for w in argv if w.startswith("--n")), argv
    else:
        assert ours == (lo, per), argv
    assert args.module and args.training_script == "verl.trainer.sft_trainer"


def test_torchrun_world_other_launchers():
    assert torchrun_world(["python", "-m", "torch.distributed.run", "--nproc_per_node=4", "-m"]) == (1, 4)
    assert torchrun_world(["/opt/venv/bin/torchrun", "--nnodes=2", "--nproc-per-node=8", "-m"]) == (2, 8)
    assert torchrun_world(["python3"]) is None and torchrun_world([]) is None
    # PET_* in the launch's environment set what no flag gives (torch's action=env, run.py:425-438)
    assert torchrun_world(["torchrun", "-m"], ["PET_NPROC_PER_NODE"]) == UNKNOWN
    assert torchrun_world(["torchrun", "--nproc_per_node=2", "-m"], ["PET_NPROC_PER_NODE"]) == (1, 2)


@pytest.mark.verl
def test_verls_sft_trainer_takes_its_world_from_torchrun():
    """sft_trainer.main initialises the process group from torchrun's env and never reads trainer.n_gpus_per_node;
    sft_trainer_ray sizes its Ray pool from trainer.*."""
    verl = _verl()
    root = Path(verl.__file__).parent
    sft = (root / "trainer" / "sft_trainer.py").read_text()
    assert "initialize_global_process_group()" in sft and "n_gpus_per_node" not in sft
    assert "n_gpus_per_node = self.config.trainer.n_gpus_per_node" in (root / "trainer" / "sft_trainer_ray.py").read_text()
    dist = (root / "utils" / "distributed.py").read_text()
    assert 'world_size = int(os.environ["WORLD_SIZE"])' in dist


def _script(tmp_path: Path, launch: str, *args: str) -> str:
    script = tmp_path / "sft.sh"
    script.write_text("#!/bin/bash\nset -euo pipefail\n" + launch + " \\\n  " + " \\\n  ".join([*ARGS, *args]) + "\n")
    return str(script)


def _bash_or_skip():
    from wizard.check import bashtrace

    if not bashtrace.available():
        pytest.skip("no sandbox to trace the script with bash")


def test_check_reads_torchruns_gpus_for_sft_trainer(tmp_path):
    _bash_or_skip()
    report = check(_script(tmp_path, "torchrun --nnodes=2 --nproc_per_node=4 -m verl.trainer.sft_trainer"),
                   env={"HOME": "/root"})
    assert (report.hardware.nnodes, report.hardware.gpus_per_node, report.hardware.source) == (2, 4, "torchrun")
    report = check(_script(tmp_path, LAUNCH), env={"HOME": "/root"})
    assert (report.hardware.nnodes, report.hardware.gpus_per_node) == (1, 8)
    report = check(_script(tmp_path, "torchrun --nproc_per_node=auto -m verl.trainer.sft_trainer"), env={"HOME": "/root"})
    assert report.hardware.source == "torchrun" and report.hardware.gpus_per_node is None
    # flags win; sft_trainer_ray reads trainer.*; PPO's main_ppo is not torchrun's
    report = check(_script(tmp_path, LAUNCH), env={"HOME": "/root"}, nnodes=1, gpus_per_node=2)
    assert (report.hardware.gpus_per_node, report.hardware.source) == (2, "flags")
    report = check(_script(tmp_path, "python3 -m verl.trainer.sft_trainer_ray", "trainer.n_gpus_per_node=4"),
                   env={"HOME": "/root"})
    assert (report.hardware.gpus_per_node, report.hardware.source) == (4, "config")


# --- VI785 ---------------------------------------------------------------------------------------------------------

@pytest.mark.verl
def test_verls_fsdp_engine_refuses_right_padding():
    torch = pytest.importorskip("torch")
    _verl()
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    seqs = [torch.arange(5), torch.arange(7)]
    engine = types.SimpleNamespace(pad_to_length=None, use_ulysses_sp=False, ulysses_sequence_parallel_size=1,
                                   model_config=types.SimpleNamespace())
    for pad in ("right", "no_padding"):
        td = tu.get_tensordict(
            tensor_dict={"input_ids": torch.nested.as_nested_tensor(seqs, layout=torch.jagged),
                         "position_ids": torch.nested.as_nested_tensor(seqs, layout=torch.jagged)},
            non_tensor_dict={"pad_mode": pad, "use_remove_padding": True, "temperature": 1.0})
        try:
            FSDPEngineWithLMHead.prepare_model_inputs(engine, td)
            refused = False
        except AssertionError as exc:
            refused = "not supported" in str(exc)
        except AttributeError:  # past the assert, into what the stand-in engine lacks
            refused = False
        assert refused == (pad != "no_padding"), pad


@pytest.mark.verl
def test_every_engine_refuses_all_but_no_padding():
    """Each engine's prepare_model_inputs / forward asserts or raises on a pad mode other than NO_PADDING (ast)."""
    verl = _verl()
    root = Path(verl.__file__).parent / "workers" / "engine"
    for name in ("fsdp", "automodel", "torchtitan", "megatron"):
        tree = ast.parse((root / name / "transformer_impl.py").read_text())
        guards = [n for n in ast.walk(tree) if isinstance(n, (ast.Assert, ast.If))
                  and isinstance(n.test, ast.Compare) and ast.unparse(n.test) == "pad_mode == DatasetPadMode.NO_PADDING"]
        refuses = any(isinstance(g, ast.Assert) or (g.orelse and isinstance(g.orelse[-1], ast.Raise)) for g in guards)
        assert refuses, name
    veomni = (root / "veomni" / "transformer_impl.py").read_text()
    assert "class VeOmniEngineWithLMHead(VeOmniEngine, FSDPEngineWithLMHead)" in veomni
    assert "super().prepare_model_inputs(micro_batch)" in veomni


def _hits(rule: str, *extra: str, tmp_path: Path):
    report = check(_script(tmp_path, LAUNCH, *extra), env={"HOME": "/root"})
    return [f for f in report.findings if f.problem.rule == rule]


def test_vi785_fires_on_right_padding(tmp_path):
    _bash_or_skip()
    hit = _hits("VI785", "data.pad_mode=right", "model.use_remove_padding=false", tmp_path=tmp_path)
    assert hit and hit[0].problem.severity == "error" and "transformer_impl.py:1166" in hit[0].problem.message
    assert hit[0].fix.set == {"data.pad_mode": "no_padding"}
    hit = _hits("VI785", "data.pad_mode=right", "engine=megatron", tmp_path=tmp_path)
    assert hit and "1329-1332" in hit[0].problem.message
    assert not _hits("VI785", tmp_path=tmp_path)
    assert not _hits("VI785", "data.pad_mode=no_padding", "model.use_remove_padding=false", tmp_path=tmp_path)


# --- VI786 ---------------------------------------------------------------------------------------------------------

@pytest.mark.verl
def test_verl_packs_by_tokens_whatever_the_micro_batch():
    torch = pytest.importorskip("torch")
    _verl()
    import yaml
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches

    data = yaml.safe_load((Path(_verl().__file__).parent / "trainer" / "config" / "sft_trainer_engine.yaml")
                          .read_text())["data"]
    assert data["use_dynamic_bsz"] is True  # the SFT default
    ids = torch.nested.as_nested_tensor([torch.arange(900 + i) for i in range(32)], layout=torch.jagged)
    counts = {}
    for dyn in (True, False):
        td = tu.get_tensordict(tensor_dict={"input_ids": ids}, non_tensor_dict={
            "use_dynamic_bsz": dyn, "max_token_len_per_gpu": data["max_token_len_per_gpu"],
            "micro_batch_size_per_gpu": 1})
        counts[dyn] = [len(mb) for mb in prepare_micro_batches(td)[0]]
    assert counts[False] == [1] * 32
    assert max(counts[True]) > 1 and sum(counts[True]) == 32  # 8192 tokens hold ~8 samples of ~1k


def test_vi786_fires_when_micro_batch_is_set_under_dynamic_batching(tmp_path):
    _bash_or_skip()
    hit = _hits("VI786", "data.micro_batch_size_per_gpu=1", "data.max_length=1024", tmp_path=tmp_path)
    assert hit and hit[0].problem.severity == "info" and "8192 tokens" in hit[0].problem.message
    hit = _hits("VI786", "data.micro_batch_size_per_gpu=1", "engine.ulysses_sequence_parallel_size=2",
                "data.max_token_len_per_gpu=4096", tmp_path=tmp_path)
    assert hit and "8192 tokens (data.max_token_len_per_gpu=4096 × Ulysses 2)" in hit[0].problem.message
    assert not _hits("VI786", "data.micro_batch_size_per_gpu=1", "data.use_dynamic_bsz=false", tmp_path=tmp_path)
    assert not _hits("VI786", tmp_path=tmp_path)  # the default micro batch size, not set


# --- VI787 ---------------------------------------------------------------------------------------------------------

def _tiny_tokenizer():
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<|im_start|>", "<|im_end|>", "user", "assistant", "\n"] + [f"w{i}" for i in range(80)] + \
        ["FINAL", "ANSWER"]
    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<|im_end|>")
    hf.chat_template = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
                        "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}")
    return hf


@pytest.mark.verl
def test_verls_no_padding_branch_keeps_the_start_under_left_truncation(tmp_path):
    _verl()
    pd = pytest.importorskip("pandas")
    from omegaconf import OmegaConf
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    hf = _tiny_tokenizer()
    msgs = [{"role": "user", "content": " ".join(f"w{i}" for i in range(40))},
            {"role": "assistant", "content": " ".join(f"w{i}" for i in range(40, 60)) + " FINAL ANSWER"}]
    path = tmp_path / "t.parquet"
    pd.DataFrame({"messages": [msgs]}).to_parquet(path)
    kept = {}
    for pad in ("no_padding", "right"):
        cfg = OmegaConf.create({"pad_mode": pad, "truncation": "left", "max_length": 16, "messages_key": "messages",
                                "ignore_input_ids_mismatch": True})
        item = MultiTurnSFTDataset(str(path), hf, cfg)[0]
        kept[pad] = (hf.convert_ids_to_tokens(item["input_ids"].tolist()), int(item["loss_mask"].sum()))
    assert "ANSWER" not in kept["no_padding"][0] and kept["no_padding"][0][0] == "<|im_start|>"
    assert kept["no_padding"][1] == 0  # nothing left to train on
    assert "ANSWER" in kept["right"][0] and kept["right"][1] > 0  # the control: right padding honours 'left'


def test_vi787_fires_on_left_truncation_without_padding(tmp_path):
    _bash_or_skip()
    hit = _hits("VI787", "data.truncation=left", tmp_path=tmp_path)
    assert hit and hit[0].problem.severity == "warning" and "404-411" in hit[0].problem.message
    assert not _hits("VI787", "data.truncation=right", tmp_path=tmp_path)
    assert not _hits("VI787", "data.truncation=error", tmp_path=tmp_path)
    assert not _hits("VI787", "data.truncation=left", "data.custom_cls.path=/data/my_ds.py",
                     "data.custom_cls.name=MyDataset", tmp_path=tmp_path)
    # pad_mode=right honours 'left' in the dataset, but the engines refuse it: VI785, not VI787
    assert not _hits("VI787", "data.truncation=left", "data.pad_mode=right", tmp_path=tmp_path)
