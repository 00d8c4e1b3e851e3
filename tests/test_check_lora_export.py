"""VI974: FSDP LoRA with 'hf_model' in actor.checkpoint.save_contents (real case verl#4761: a Qwen2.5-VL LoRA run whose
global_step_N/actor/huggingface was expected to be a merged model and held PEFT keys instead).

The oracle is verl's own FSDPCheckpointManager.save_checkpoint (utils/checkpoint/fsdp_checkpoint_manager.py), run in a
child process on the CPU over gloo (one rank) on a tiny random Qwen2 wrapped as verl's FSDP engine wraps it: peft's
get_peft_model (workers/engine/fsdp/transformer_impl.py:339-368), then FSDP1 (strategy fsdp) or FSDP2's fully_shard
(fsdp2). What it writes to huggingface/ is read back with transformers' from_pretrained: with LoRA every weight is
missing (base_model.model.…base_layer / lora_A / lora_B keys instead); without LoRA (the control) the folder loads
whole. The fix the hint names is run too: verl's model merger on the same checkpoint's 'model' shards gives base
weights that load and a peft adapter whose merge_and_unload equals peft's own merge of the trained model.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wizard.check.lint import check

M, A = "actor_rollout_ref.model", "actor_rollout_ref.actor"
SAVE = f"{A}.checkpoint.save_contents"

ORACLE = textwrap.dedent('''
    import copy, os, sys, torch, torch.distributed as dist
    from pathlib import Path
    model_dir, out, port, strategy, rank = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=0, world_size=1)
    from omegaconf import OmegaConf
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if rank:
        from peft import LoraConfig, TaskType, get_peft_model
        model = get_peft_model(model, LoraConfig(task_type=TaskType.CAUSAL_LM, r=rank, lora_alpha=16,
                                                 target_modules="all-linear", bias="none"))
        with torch.no_grad():  # a trained adapter: lora_B away from its zero initialisation
            for n, p in model.named_parameters():
                if "lora_B" in n:
                    p.normal_()
        merged = copy.deepcopy(model).merge_and_unload().state_dict()
    else:
        merged = model.state_dict()
    torch.save({k: v.to(torch.bfloat16) for k, v in merged.items()}, str(out) + ".expected.pt")
    if strategy == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        fully_shard(model, mesh=init_device_mesh("cpu", (1,), mesh_dim_names=["fsdp"]))
        wrapped = model
    else:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        wrapped = FSDP(model, device_id=torch.device("cpu"), use_orig_params=True)
    FSDPCheckpointManager(model=wrapped, processing_class=AutoTokenizer.from_pretrained(model_dir),
                          checkpoint_config=OmegaConf.create({"save_contents": ["model", "hf_model"]})
                          ).save_checkpoint(str(out), global_step=1)
    dist.destroy_process_group()
    print("SAVED")
''')


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    from wizard.smoketest.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-weights"), weights=True)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, weights):
    """verl's save for (strategy, LoRA rank), run once a module: the checkpoint's actor folder."""
    root, done = tmp_path_factory.mktemp("verl-saves"), {}

    def get(strategy: str, rank: int) -> Path:
        if (strategy, rank) not in done:
            done[strategy, rank] = _verl_saves(root, weights, strategy, rank)
        return done[strategy, rank]
    return get


def _verl_saves(root: Path, model: Path, strategy: str, rank: int) -> Path:
    """verl's FSDPCheckpointManager with save_contents [model, hf_model]: the checkpoint's actor folder."""
    script = root / "oracle.py"
    script.write_text(ORACLE, encoding="utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = root / f"{strategy}-r{rank}" / "actor"
    out.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, str(script), str(model), str(out), str(port), strategy, str(rank)],
                       capture_output=True, text=True, timeout=300)
    assert "SAVED" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]
    return out


def _load(folder: Path):
    """(state dict, missing keys) of transformers' from_pretrained on a folder."""
    import torch
    from transformers import AutoModelForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, output_loading_info=True)
    return model.state_dict(), set(info["missing_keys"])


def _saved_keys(folder: Path) -> list[str]:
    from safetensors import safe_open

    keys: list[str] = []
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), "pt") as s:
            keys += list(s.keys())
    return keys


def _vi974(*overrides: str) -> list:
    report = check(None, ["trainer.save_freq=10", "actor_rollout_ref.rollout.name=vllm", *overrides])
    return [f.problem for f in report.findings if f.problem.rule == "VI974"]


@pytest.mark.verl
@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["fsdp", "fsdp2"])
def test_verl_writes_unmerged_peft_keys_and_check_warns(saved, strategy):
    actor = saved(strategy, 8)
    keys = _saved_keys(actor / "huggingface")
    # the premise, from verl's own save: PEFT's names, adapters unmerged, no adapter folder
    assert keys and all(k.startswith("base_model.model.") for k in keys), keys[:5]
    assert any(".lora_A." in k for k in keys) and any(".lora_B." in k for k in keys)
    assert any(k.endswith(".base_layer.weight") for k in keys)
    assert not list(actor.rglob("adapter_config.json"))
    state, missing = _load(actor / "huggingface")
    assert missing == set(state), sorted(set(state) - missing)  # not one weight of the model is loaded
    [hit] = _vi974(f"{M}.lora_rank=8", f"{A}.strategy={strategy}", f"{SAVE}=[model,optimizer,extra,hf_model]")
    assert hit.severity == "warning" and SAVE in hit.keys
    assert "fsdp_checkpoint_manager.py:422" in hit.message and "unmerged" in hit.message
    assert "verl.model_merger merge --backend fsdp" in hit.hint and "lora_adapter" in hit.hint


@pytest.mark.verl
@pytest.mark.slow
def test_without_lora_the_export_loads_and_check_is_quiet(saved):
    import torch

    actor = saved("fsdp", 0)
    state, missing = _load(actor / "huggingface")
    assert not missing
    expected = torch.load(str(actor) + ".expected.pt")
    assert all(torch.equal(state[k].to(torch.bfloat16), v) for k, v in expected.items())
    assert not _vi974(f"{M}.lora_rank=0", f"{SAVE}=[model,optimizer,extra,hf_model]")


@pytest.mark.verl
@pytest.mark.slow
def test_the_hints_merger_gives_base_weights_and_the_adapter(tmp_path, saved):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    actor = saved("fsdp", 8)
    target = tmp_path / "export"
    r = subprocess.run([sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir",
                        str(actor), "--target_dir", str(target)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (target / "lora_adapter" / "adapter_config.json").is_file()
    assert json.loads((target / "lora_adapter" / "adapter_config.json").read_text())["r"] == 8
    state, missing = _load(target)
    assert not missing  # the base weights under their own names
    base = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, str(target / "lora_adapter")).merge_and_unload().state_dict()
    expected = torch.load(str(actor) + ".expected.pt")
    far = [k for k, v in expected.items() if not torch.allclose(merged[k].to(torch.bfloat16).float(), v.float(),
                                                                   atol=2e-2, rtol=2e-2)]
    assert not far, far[:5]
    # the fixed configuration: hf_model dropped, the 'model' shards kept
    assert not _vi974(f"{M}.lora_rank=8", f"{SAVE}=[model,optimizer,extra]")


# the real case's keys (verl#4761, from examples/grpo_trainer/run_qwen2_5_vl-7b_lora.sh plus hf_model)
REAL_CASE = [f"{M}.path=Qwen/Qwen2.5-VL-7B-Instruct", f"{M}.lora_rank=64", f"{M}.lora_alpha=32",
             f"{M}.target_modules=all-linear", f"{M}.exclude_modules=.*visual.*",
             f"{SAVE}=['model','optimizer','extra','hf_model']", "trainer.n_gpus_per_node=8", "trainer.save_freq=20"]


def test_the_real_case_is_named():
    [hit] = _vi974(*REAL_CASE)
    assert "lora_rank=64" in hit.message and "verl#4761" in hit.message


@pytest.mark.parametrize("change", [
    f"{SAVE}=[model,optimizer,extra]",  # no hf_model: nothing unmerged is written
    f"{M}.lora_rank=0",  # no LoRA: the export is a plain model (the control above)
    "trainer.save_freq=-1",  # no checkpoint is ever written (trainer_base.py:481)
    f"{A}.strategy=megatron",  # another checkpoint manager, another LoRA block
])
def test_valid_neighbours_get_no_warning(change):
    import importlib.util

    verl = Path(importlib.util.find_spec("verl").submodule_search_locations[0])
    # the premises in verl's source: checkpoints only with save_freq > 0; Megatron saves through its own manager
    assert "self.config.trainer.save_freq > 0" in (verl / "trainer/ppo/v1/trainer_base.py").read_text().splitlines()[480]
    megatron = (verl / "workers/engine/megatron/transformer_impl.py").read_text()
    assert "MegatronCheckpointManager(" in megatron and "FSDPCheckpointManager" not in megatron
    assert _vi974(*REAL_CASE)  # the case itself is named
    assert not _vi974(*REAL_CASE, change)
