"""VI651 / VI652 (wizard/check/rules/weightsync.py) and the moved bucket key (VI801 / VI804), on the held-out round 53
cases: verl#5952 (bucket below Qwen3-VL-8B's fp32 embed_tokens on Ascend), verl#7495 (LoRA adapters never reach a
fully-async rollout) and Azure/azureml-assets PR#5288 (+rollout.update_weights_bucket_megabytes, as verl's own
assertion names it).

The oracles are verl 0.9.1's own code, run in a child process on the CPU:
- BucketedWeightSender.async_send_weights with use_shm=True (the Ascend fallback) refuses a tensor over the bucket
  and sends it when it fits (zmq, uvicorn and fastapi are stand-ins when absent: only the socket calls touch them);
- collect_lora_params(base_sync_done=False), what the non-naive sync reaches through get_per_tensor_param()'s
  defaults, returns no lora_ tensor and the frozen base weights, on a two-layer PEFT model;
- omega_conf_to_dataclass(RolloutConfig) refuses update_weights_bucket_megabytes added to the rollout section.
NO_SPLIT's statements and the get_per_tensor_param() call are found in verl's source at the lines cited.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.weightsync import NO_SPLIT

VERL = Path(importlib.util.find_spec("verl").origin).parent
BUCKET = "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.name=vllm", "data.train_batch_size=64",
        "actor_rollout_ref.actor.ppo_mini_batch_size=16", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4", "data.max_prompt_length=512",
        "data.max_response_length=512", "trainer.logger=[console]", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
QWEN3_8B = ["actor_rollout_ref.model.path=Qwen/Qwen3-8B"]  # 151936 × 4096: fp32 2374 MiB, bf16 1187 MiB
SEP = ["trainer.use_v1=True", "trainer.v1.trainer_mode=separate_async", "trainer.n_gpus_per_node=4",
       "actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.n_gpus_per_node=4"]
LORA = ["actor_rollout_ref.model.lora_rank=32", "actor_rollout_ref.model.lora_alpha=64",
        "actor_rollout_ref.model.target_modules=all-linear"]


def _script(tmp_path: Path, launch: str, overrides: list[str]) -> Path:
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\nset -x\n" + launch + " \\\n" + " \\\n".join(f"    '{o}'" for o in overrides) + "\n",
                    encoding="utf-8")
    return path


def _run(tmp_path: Path, overrides: list[str], launch: str = "python3 -m verl.trainer.main_ppo", **hw):
    # the snapshot holds only main_ppo's trees: the other entry points compose with the installed verl
    defaults = "snapshot" if launch.endswith("main_ppo") else "verl"
    return check(str(_script(tmp_path, launch, [*BASE, *overrides])), env={"HOME": str(tmp_path)},
                 defaults=defaults, **hw)


def _rules(report, rule: str) -> list[str]:
    return [f.problem.severity for f in report.findings if f.problem.rule == rule]


def _child(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- VI651 ------------------------------------------------------------------------------------------------------

SENDER = r'''
import asyncio, importlib.util, json, os, sys, types
import torch, verl
class _Sock:
    def bind(self, h): pass
    def send_pyobj(self, o): pass
    def recv(self): return b""
    def close(self): pass
class _Ctx:
    @staticmethod
    def instance(): return _Ctx()
    def socket(self, kind): return _Sock()
for name, attrs in {"zmq": {"Context": _Ctx, "REQ": 3}, "uvicorn": {"Server": object, "Config": object},
                    "fastapi": {"FastAPI": object}}.items():
    if importlib.util.find_spec(name) is None:
        sys.modules[name] = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(sys.modules[name], k, v)
path = os.path.join(os.path.dirname(verl.__file__), "workers/rollout/vllm_rollout/bucketed_weight_transfer.py")
spec = importlib.util.spec_from_file_location("verl_bucketed_weight_transfer", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
class _Dev:  # no accelerator here: the cleanup's cache calls do nothing
    def synchronize(self): pass
    def empty_cache(self): pass
    def ipc_collect(self): pass
mod.get_torch_device = lambda: _Dev()
mod.is_support_ipc = lambda: False
embed = ("model.embed_tokens.weight", torch.zeros(1024, 384, dtype=torch.float32))  # 1.5 MiB
out = {}
for mb in (1, 2):
    sender = mod.BucketedWeightSender(zmq_handle="tcp://127.0.0.1:1", bucket_size_mb=mb, use_shm=True)
    try:
        asyncio.run(sender.async_send_weights(iter([embed])))
        out[mb] = "sent"
    except AssertionError as e:
        out[mb] = str(e)
print(json.dumps(out))
'''


def test_verls_shm_sender_refuses_a_tensor_over_the_bucket():
    out = _child(SENDER)
    assert "too large to fit in the bucket" in out["1"]  # 1.5 MiB embed, 1 MiB bucket
    assert out["2"] == "sent"


@pytest.mark.parametrize("path", sorted(NO_SPLIT))
def test_no_split_statements_are_where_cited(path):
    rel, line, statement = NO_SPLIT[path]
    assert (VERL / rel).read_text(encoding="utf-8").splitlines()[line - 1].strip().startswith(statement)


def test_vi651_ascend_vllm_default_bucket(tmp_path):
    """verl#5952: the FSDP actor sends fp32 embed_tokens (2374 MiB for Qwen3-8B) through the 2048 MB default."""
    report = _run(tmp_path, [*QWEN3_8B, "actor_rollout_ref.rollout.name=vllm", "trainer.device=npu"])
    assert _rules(report, "VI651") == ["warning"], [f.problem.line() for f in report.findings]
    finding = next(f for f in report.findings if f.problem.rule == "VI651")
    assert "2374 MiB" in finding.problem.message and f"{BUCKET}=3072" in finding.problem.hint


@pytest.mark.parametrize("name,overrides", [
    ("bucket raised (verl's ascend example)", [f"{BUCKET}=4096"]),
    ("bf16 actor weights", ["actor_rollout_ref.actor.fsdp_config.model_dtype=bf16"]),
    ("adapters over a base vLLM loads itself", [*LORA, "actor_rollout_ref.rollout.load_format=safetensors"]),
])
def test_vi651_ascend_controls(tmp_path, name, overrides):
    report = _run(tmp_path, [*QWEN3_8B, "actor_rollout_ref.rollout.name=vllm", "trainer.device=npu", *overrides])
    assert not _rules(report, "VI651"), name


def test_vi651_cuda_vllm_sends_a_large_tensor_on_its_own(tmp_path):
    report = _run(tmp_path, [*QWEN3_8B, "actor_rollout_ref.rollout.name=vllm"])
    assert not _rules(report, "VI651")


def test_vi651_trtllm_is_an_error(tmp_path):
    report = _run(tmp_path, [*QWEN3_8B, "actor_rollout_ref.rollout.name=trtllm"])
    assert _rules(report, "VI651") == ["error"]
    fixed = _run(tmp_path, [*QWEN3_8B, "actor_rollout_ref.rollout.name=trtllm", f"{BUCKET}=3072"])
    assert not _rules(fixed, "VI651")


def test_vi651_mooncake_counts_the_rollout_dtype(tmp_path):
    """mooncake casts to bf16 before it packs (mooncake_checkpoint_engine.py:181): Qwen3-8B's 1187 MiB fits 2048;
    a 1024 MB bucket does not."""
    mooncake = [*QWEN3_8B, *SEP, "actor_rollout_ref.rollout.checkpoint_engine.backend=mooncake"]
    assert not _rules(_run(tmp_path, mooncake), "VI651")
    assert _rules(_run(tmp_path, [*mooncake, f"{BUCKET}=1024"]), "VI651") == ["error"]


# --- VI652 ------------------------------------------------------------------------------------------------------

LORA_PARAMS = r'''
import json, torch
from transformers import LlamaConfig, LlamaForCausalLM
from peft import LoraConfig, get_peft_model
from verl.utils.fsdp_utils import collect_lora_params
cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=2)
model = get_peft_model(LlamaForCausalLM(cfg), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
for n, p in model.named_parameters():
    if "lora_B" in n:
        torch.nn.init.ones_(p)  # a trained adapter (B starts at 0)
sent = collect_lora_params(model, layered_summon=False, base_sync_done=False)
adapters = collect_lora_params(model, layered_summon=False, base_sync_done=True)
q = "model.layers.0.self_attn.q_proj.weight"
base = model.base_model.model.model.layers[0].self_attn.q_proj.base_layer.weight
print(json.dumps({"sent_lora": sum("lora_" in k for k in sent), "sent": len(sent),
                  "adapters": sum("lora_" in k for k in adapters), "q_is_base": torch.equal(sent[q], base)}))
'''


def test_verls_lora_export_without_base_sync_sends_no_adapter():
    out = _child(LORA_PARAMS)
    assert out["sent"] > 0 and out["sent_lora"] == 0 and out["q_is_base"]
    assert out["adapters"] > 0  # what the naive path sends after its base pass


def test_non_naive_branch_calls_get_per_tensor_param_with_defaults():
    """engine_workers.py:764, inside `if effective_mode != "naive"`: no base_sync_done, the peft config dropped."""
    tree = ast.parse((VERL / "workers/engine_workers.py").read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "get_per_tensor_param" and n.lineno == 764]
    assert len(calls) == 1 and not calls[0].args and not calls[0].keywords


@pytest.mark.parametrize("launch,overrides", [
    ("python -m verl.experimental.fully_async_policy.fully_async_main",  # verl#7495: nccl from its own YAML
     ["actor_rollout_ref.hybrid_engine=False", "rollout.nnodes=1", "rollout.n_gpus_per_node=4",
      "trainer.n_gpus_per_node=4", "data.train_batch_size=0", "data.gen_batch_size=1"]),
    ("python3 -m verl.trainer.main_ppo", [*SEP, "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl"]),
])
def test_vi652_adapters_through_a_non_naive_sync(tmp_path, launch, overrides):
    model = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", *LORA]
    report = _run(tmp_path, [*model, *overrides], launch=launch)
    assert _rules(report, "VI652") == ["error"], [f.problem.line() for f in report.findings]
    merged = _run(tmp_path, [*model, *overrides, "actor_rollout_ref.model.lora.merge=True"], launch=launch)
    assert not _rules(merged, "VI652")


def test_vi652_colocated_sync_sends_adapters(tmp_path):
    report = _run(tmp_path, ["actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", *LORA, "trainer.use_v1=True",
                             "trainer.v1.trainer_mode=colocate_async"])
    assert not _rules(report, "VI652")


# --- the moved bucket key ----------------------------------------------------------------------------------------

ROLLOUT_CONFIG = r'''
import json, os, verl
from omegaconf import OmegaConf
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import RolloutConfig
tree = OmegaConf.load(os.path.join(os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml"))
rollout = OmegaConf.to_container(tree.actor_rollout_ref.rollout, resolve=False)
rollout = {k: v for k, v in rollout.items() if not (isinstance(v, str) and "${" in v)}
rollout = {k: v for k, v in rollout.items() if v != "???"}
rollout.update(name="vllm", prompt_length=512, response_length=512)
out = {}
for key in ("update_weights_bucket_megabytes", "skip_rollout", None):
    cfg = dict(rollout, **({key: 4096} if key else {}))
    try:
        omega_conf_to_dataclass(OmegaConf.create(cfg), RolloutConfig)
        out[str(key)] = "built"
    except Exception as e:
        out[str(key)] = type(e).__name__
print(json.dumps(out))
'''


def test_verl_refuses_keys_added_to_the_rollout_dataclass():
    out = _child(ROLLOUT_CONFIG)
    assert out == {"update_weights_bucket_megabytes": "ConfigKeyError", "skip_rollout": "ConfigKeyError",
                   "None": "built"}


def test_bucket_key_from_verls_message_points_to_checkpoint_engine(tmp_path):
    report = _run(tmp_path, [*QWEN3_8B, "+actor_rollout_ref.rollout.update_weights_bucket_megabytes=4096"])
    found = [f for f in report.findings if "actor_rollout_ref.rollout.update_weights_bucket_megabytes" in f.problem.keys]
    assert [(f.problem.rule, f.problem.severity) for f in found] == [("VI801", "error")]
    assert BUCKET in found[0].problem.hint
    gone = _run(tmp_path, [*QWEN3_8B, "+actor_rollout_ref.rollout.skip_rollout=True"])
    assert _rules(gone, "VI804") == ["error"] and not _rules(gone, "VI802")


def test_the_ascend_plan_sizes_the_bucket_for_the_fp32_embedding(tmp_path):
    """The planner's side of VI651: an Ascend vLLM plan of an FSDP actor writes a bucket that holds the embedding
    the actor sends in fp32. Qwen2.5-7B: 152064 × 3584 × 4 B = 2,179,989,504 B = 2079 MiB > verl's 2048, so 3072;
    Qwen2.5-0.5B: 151936 × 896 × 4 B = 519 MiB, verl's default holds it and the plan leaves the key alone. The planted
    fault (the key dropped from the bundle) draws VI651."""
    import wizard

    answers = wizard.load_profile("ascend-910b")
    plan = wizard.plan(answers)
    assert plan.value(BUCKET) == 3072
    assert 152064 * 3584 * 4 // (1 << 20) == 2079
    small = wizard.plan(answers.model_copy(update={"model": "Qwen/Qwen2.5-0.5B-Instruct"}))
    assert BUCKET not in small.settings
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    assert "VI651" not in check(str(bundle / "verl_config.yaml"), defaults="snapshot").ids()
    del plan.settings[BUCKET]
    bare = wizard.write_bundle(wizard.render(plan), tmp_path / "bare")
    assert "VI651" in check(str(bare / "verl_config.yaml"), defaults="snapshot").ids()
