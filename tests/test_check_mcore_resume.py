"""VI610: resuming a Megatron checkpoint in another parallel layout than it was saved in (R61-03, verl PR#5154);
VI611: resuming it with megatron.use_dist_checkpointing turned the other way than the save.

verl's Megatron checkpoint manager imports megatron.core at module level, which this machine lacks, so its functions
are taken from verl's installed source with ast and run as they are (stand-ins for `self`, parallel_state and
ShardedObject): _build_sharded_state_dict_metadata shows the optimizer format a default run saves, get_rng_state the
(pp_size, tp_size) shape the RNG state is keyed by. Each fault is planted in a tiny checkpoint folder and launch
beside valid controls. For VI611 the checkpoint's ckpt_contents.json is the one verl's own _build_checkpoint_manifest
writes for the save, and verl's should_load_* properties say which folder the resume reads.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from helpers_verl import verl_function
from wizard.check.lint import check
from wizard.check.rules.mcore_resume import table

ROOT = Path(__file__).resolve().parent.parent
A = "actor_rollout_ref.actor"
MANAGER = "utils/checkpoint/megatron_checkpoint_manager.py"


# --- the table -----------------------------------------------------------------------------------------------------

def test_table_matches_verl_source():
    spec = importlib.util.spec_from_file_location("verl_mcore_resume_script", ROOT / "scripts" / "verl_mcore_resume.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    assert mod.build() == table()


# --- verl's own code -----------------------------------------------------------------------------------------------

def _manager(flag: bool) -> SimpleNamespace:
    megatron = SimpleNamespace(dist_ckpt_optim_fully_reshardable=flag, distrib_optim_fully_reshardable_mem_efficient=False)
    return SimpleNamespace(use_megatron_fsdp=False, use_distributed_optimizer=True, role="actor",
                           config=SimpleNamespace(actor=SimpleNamespace(megatron=megatron)))


def test_verl_saves_the_optimizer_dp_reshardable_by_default():
    build = verl_function(MANAGER, "_build_sharded_state_dict_metadata", mcore_ge_014=True)
    t = table()
    assert t["optimizer_flag_default"] is False and t["optimizer_switch_default"] is True
    assert build(_manager(t["optimizer_flag_default"]))["distrib_optim_sharding_type"] == t["optimizer_default_format"]
    assert build(_manager(True))["distrib_optim_sharding_type"] == t["optimizer_reshardable_format"]


class _Recorder:
    def __init__(self, key, data, global_shape, global_offset, replica_id=0):
        self.key, self.global_shape, self.global_offset = key, global_shape, global_offset


def _rng_shape(tp: int, pp: int):
    mpu = SimpleNamespace(get_pipeline_model_parallel_rank=lambda: 0, get_tensor_model_parallel_rank=lambda: 0,
                          get_pipeline_model_parallel_world_size=lambda: pp,
                          get_tensor_model_parallel_world_size=lambda: tp,
                          get_data_parallel_rank=lambda with_context_parallel=False: 0,
                          get_data_parallel_world_size=lambda: 1)
    tracker = SimpleNamespace(get_states=lambda: {})
    get = verl_function(MANAGER, "get_rng_state", random=random, np=np, torch=torch, mpu=mpu,
                         tensor_parallel=SimpleNamespace(get_cuda_rng_tracker=lambda: tracker),
                         get_device_name=lambda: "cpu", is_device_available=lambda: False, ShardedObject=_Recorder)
    obj = get(SimpleNamespace(use_megatron_fsdp=False))
    return obj.key, obj.global_shape


def test_verl_keys_the_rng_state_by_pipeline_and_tensor_size():
    assert _rng_shape(tp=2, pp=2) == ("rng_state", (2, 2))
    assert _rng_shape(tp=4, pp=1) == ("rng_state", (1, 4))  # another shape: Megatron finds no such shard to load
    assert table()["rng_pinned"] == ["pipeline_model_parallel_size", "tensor_model_parallel_size"]


# --- VI610 ---------------------------------------------------------------------------------------------------------

def _data(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "q"}],
           "reward_model": {"style": "rule", "ground_truth": "1"}}
    pq.write_table(pa.Table.from_pylist([row] * 64), path)
    return path


def _saved(root: Path, **layout) -> Path:
    actor = root / "global_step_40" / "actor"
    actor.mkdir(parents=True)
    doc = {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2,
           "virtual_pipeline_model_parallel_size": None, "context_parallel_size": 1, "expert_model_parallel_size": 1,
           "expert_tensor_parallel_size": 2, "num_moe_experts": None, **layout}
    (actor / "transformer_config.json").write_text(json.dumps(doc), encoding="utf-8")
    (root / "latest_checkpointed_iteration.txt").write_text("40")
    return root


def _hits(tmp_path: Path, *args: str, rule: str = "VI610", root: Path | None = None, **layout):
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = _data(tmp_path / "train.parquet")
    root = root or _saved(tmp_path / "ckpt", **layout)
    base = ["--config-path=config", "--config-name=ppo_megatron_trainer.yaml",
            "algorithm.adv_estimator=grpo", f"data.train_files={data}", f"data.val_files={data}",
            "data.train_batch_size=32", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
            f"{A}.ppo_mini_batch_size=16", f"{A}.ppo_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "actor_rollout_ref.rollout.n=4",
            "trainer.n_gpus_per_node=8", "trainer.nnodes=1", "trainer.logger=[console]", "trainer.save_freq=10",
            "trainer.total_training_steps=100", "trainer.resume_mode=auto", f"trainer.default_local_dir={root}"]
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\nset -euo pipefail\npython3 -m verl.trainer.main_ppo \\\n  "
                      + " \\\n  ".join([*base, *args]) + "\n")
    report = check(str(script), env={"HOME": "/root"})
    return [f.problem for f in report.findings if f.problem.rule == rule]


SAME = (f"{A}.megatron.tensor_model_parallel_size=2", f"{A}.megatron.pipeline_model_parallel_size=2")
WIDER = (f"{A}.megatron.tensor_model_parallel_size=4", f"{A}.megatron.pipeline_model_parallel_size=1")


def test_vi610_new_tensor_and_pipeline_sizes(tmp_path):
    (hit,) = _hits(tmp_path, *WIDER)
    assert hit.severity == "error"
    assert f"{A}.megatron.tensor_model_parallel_size" in hit.keys and "trainer.resume_mode" in hit.keys
    assert "dp_reshardable" in hit.message and "(pipeline, tensor)" in hit.message
    assert "tensor_model_parallel_size=2" in hit.hint and f"{A}.checkpoint.load_contents=[model]" in hit.hint
    # a dense model: its expert-tensor size follows TP and is not a layout of its own
    assert f"{A}.megatron.expert_tensor_parallel_size" not in hit.keys


def test_vi610_controls(tmp_path):
    assert not _hits(tmp_path / "same", *SAME)  # the saved layout
    # more GPUs, same TP/PP: a new data-parallel size, which dp_reshardable and the RNG shards take
    assert not _hits(tmp_path / "dp", *SAME, "trainer.n_gpus_per_node=8", "trainer.nnodes=2")
    # the weights only: no optimizer, no RNG state to load
    assert not _hits(tmp_path / "model", *WIDER, f"{A}.checkpoint.load_contents=[model]")
    # Megatron-FSDP: one DTensor checkpoint, loaded by its own path (megatron_checkpoint_manager.py:884-886)
    assert not _hits(tmp_path / "mfsdp", *WIDER, f"{A}.megatron.use_megatron_fsdp=True")


def test_vi610_optimizer_alone(tmp_path):
    # RNG not loaded: the dp_reshardable optimizer alone stops the load; a fully reshardable one would not
    (hit,) = _hits(tmp_path / "dp_resh", *WIDER, f"{A}.checkpoint.load_contents=[model,optimizer]")
    assert "dp_reshardable" in hit.message and "(pipeline, tensor)" not in hit.message
    assert not _hits(tmp_path / "full", *WIDER, f"{A}.checkpoint.load_contents=[model,optimizer]",
                     f"{A}.megatron.dist_ckpt_optim_fully_reshardable=True")
    assert not _hits(tmp_path / "nodist", *WIDER, f"{A}.checkpoint.load_contents=[model,optimizer]",
                     f"{A}.megatron.use_distributed_optimizer=False")


def test_vi610_expert_parallel_of_a_moe(tmp_path):
    moe = {"num_moe_experts": 8, "expert_model_parallel_size": 4, "expert_tensor_parallel_size": 1}
    keep = (*SAME, f"{A}.megatron.expert_tensor_parallel_size=1")
    (hit,) = _hits(tmp_path / "ep", *keep, f"{A}.megatron.expert_model_parallel_size=2", **moe)
    assert hit.keys[0] == f"{A}.megatron.expert_model_parallel_size" and "(pipeline, tensor)" not in hit.message
    assert not _hits(tmp_path / "same", *keep, f"{A}.megatron.expert_model_parallel_size=4", **moe)


# --- VI611 ---------------------------------------------------------------------------------------------------------

def _manifest(use_dist: bool, save_contents: list[str]) -> dict:
    """verl's own _build_checkpoint_manifest for a save with this flag and save_contents (its path helpers stubbed
    to plain joins, the should_save_* properties taken from verl's source too)."""
    import os

    def rel(*parts):
        return lambda p: os.path.join(p, *parts)

    props = {name: verl_function(MANAGER, name) for name in
             ("should_save_hf_model", "should_save_dist_ckpt_model")}
    build = verl_function(MANAGER, "_build_checkpoint_manifest", os=os,
                           get_model_dist_checkpoint_path=rel("model", "dist_ckpt"),
                           get_optimizer_dist_checkpoint_path=rel("optimizer", "dist_ckpt"),
                           get_extra_dist_checkpoint_path=rel("extra", "dist_ckpt"),
                           get_hf_model_checkpoint_path=rel("model", "huggingface"),
                           get_transformer_config_checkpoint_path=rel("transformer_config.json"))
    me = SimpleNamespace(checkpoint_save_contents=save_contents, use_dist_checkpointing=use_dist, peft_cls=None,
                         lr_scheduler=None, processing_class=None, bridge=object(), role="actor", arch="Qwen2",
                         world_size=8, MANIFEST_SCHEMA_VERSION=2, should_save_optimizer="optimizer" in save_contents,
                         should_save_extra="extra" in save_contents)
    for name, fn in props.items():
        setattr(me, name, fn(me))
    return build(me, "/ckpt/global_step_40/actor", 40, True)


def test_verl_records_the_weights_format_and_loads_by_the_flag():
    formats = table()["model_formats"]
    assert _manifest(False, ["model", "optimizer", "extra"])["contents"]["model"]["format"] == formats["mbridge"]
    shards = _manifest(True, ["model", "optimizer", "extra"])["contents"]
    assert shards["model"]["format"] == formats["dist_checkpointing"] and "hf_model" not in shards
    assert "hf_model" in _manifest(True, ["model", "hf_model", "optimizer", "extra"])["contents"]
    dist = verl_function(MANAGER, "should_load_dist_ckpt_model")
    hf = verl_function(MANAGER, "should_load_hf_model")
    load = ["model", "optimizer", "extra"]
    assert dist(SimpleNamespace(checkpoint_load_contents=load, use_dist_checkpointing=True))
    assert hf(SimpleNamespace(checkpoint_load_contents=load, use_dist_checkpointing=False))


def _with_manifest(tmp_path: Path, use_dist: bool, save_contents: list[str], *args: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "ckpt"
    _saved(root)
    doc = _manifest(use_dist, save_contents)
    (root / "global_step_40" / "actor" / table()["manifest_file"]).write_text(json.dumps(doc), encoding="utf-8")
    return _hits(tmp_path, *SAME, *args, rule="VI611", root=root)


DIST = (f"{A}.megatron.use_dist_checkpointing=True", f"{A}.megatron.dist_checkpointing_path=/ckpt/mcore_init")
DEFAULT_SAVE = ["model", "optimizer", "extra"]


def test_vi611_flag_turned_on_after_a_default_save(tmp_path):
    (hit,) = _with_manifest(tmp_path / "on", False, DEFAULT_SAVE, *DIST)
    assert hit.severity == "error" and hit.keys[0] == f"{A}.megatron.use_dist_checkpointing"
    assert "model/dist_ckpt" in hit.message and "use_dist_checkpointing=False" in hit.hint
    assert not _with_manifest(tmp_path / "same", False, DEFAULT_SAVE)  # saved and resumed without the flag
    # the weights not loaded: nothing to look for
    assert not _with_manifest(tmp_path / "nomodel", False, DEFAULT_SAVE, *DIST,
                              f"{A}.checkpoint.load_contents=[optimizer,extra]")


def test_vi611_flag_turned_off_after_a_shard_save(tmp_path):
    (hit,) = _with_manifest(tmp_path / "off", True, DEFAULT_SAVE)
    assert "model/huggingface" in hit.message and "use_dist_checkpointing=True" in hit.hint
    assert not _with_manifest(tmp_path / "same", True, DEFAULT_SAVE, *DIST)
    # Hugging Face weights written beside the shards ('hf_model'): the bridge finds them
    assert not _with_manifest(tmp_path / "both", True, ["model", "hf_model", "optimizer", "extra"])
