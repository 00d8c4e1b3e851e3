"""VI684-VI687: the `verl.model_merger merge` a launch script runs after training (wizard/check/rules/merger.py), each
fault planted in a tiny script beside a valid control, and held to verl's own code.

verl's Megatron merger and checkpoint manager import megatron.core at module level, which this machine lacks, so their
functions are taken from verl's installed source with ast and run as they are (a stand-in `self`): the checkpoint
manager's should_save_* properties (VI684), the merger's _merge_state_dicts (VI685) and _replace_name (VI687). The
FSDP/LoRA path imports cleanly: BaseModelMerger.save_lora_adapter runs on a tiny peft-named state dict (VI686).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers_verl import verl_function
from wizard.check.lint import check
from wizard.check.rules.merger import merges, servers, table

ROOT = Path(__file__).resolve().parent.parent
M, A = "actor_rollout_ref.model", "actor_rollout_ref.actor"


def _model(tmp_path: Path, name: str, **config) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    doc = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1024,
           "max_position_embeddings": 512, "tie_word_embeddings": False, "torch_dtype": "bfloat16", **config}
    (folder / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    return folder


def _script(tmp_path: Path, model: Path, train: str, after: str, megatron: bool = False) -> Path:
    data = tmp_path / "train.parquet"
    data.write_bytes(b"")
    config = "--config-path=config --config-name=ppo_megatron_trainer.yaml " if megatron else ""
    text = ("#!/usr/bin/env bash\nCKPT=/ckpt/run\n"
            f"python3 -m verl.trainer.main_ppo {config}\\\n"
            f"    algorithm.adv_estimator=grpo data.train_files={data} data.val_files={data} \\\n"
            f"    data.train_batch_size=16 {M}.path={model} actor_rollout_ref.rollout.name=vllm \\\n"
            f"    {A}.ppo_mini_batch_size=8 {A}.ppo_micro_batch_size_per_gpu=2 \\\n"
            "    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2 actor_rollout_ref.rollout.n=2 \\\n"
            f"    {train} trainer.n_gpus_per_node=8 trainer.nnodes=1 trainer.save_freq=10 trainer.logger=console \\\n"
            "    trainer.default_local_dir=$CKPT\n" + after)
    path = tmp_path / "run.sh"
    path.write_text(text, encoding="utf-8")
    return path


def _hits(path: Path, rule: str):
    return [f.problem for f in check(str(path)).findings if f.problem.rule == rule]


DIST = f"{A}.megatron.use_dist_checkpointing=True {A}.megatron.dist_checkpointing_path=/ckpt/mcore_init"
MEGATRON_MERGE = "python -m verl.model_merger merge --backend megatron --local_dir $CKPT/global_step_10/actor " \
                 "--target_dir /out/hf\n"


# --- the table -----------------------------------------------------------------------------------------------------

def test_table_matches_verl_source():
    spec = importlib.util.spec_from_file_location("verl_merger_script", ROOT / "scripts" / "verl_merger.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    assert mod.build() == table()


def test_script_reader():
    text = ("torchrun --nproc_per_node 1 -m verl.model_merger merge --backend megatron \\\n  --tie-word-embedding "
            "--local_dir a/actor --target_dir=b  # trailing comment\n"
            "python -m verl.model_merger test --backend fsdp --local_dir a --test_hf_dir c\n"
            "vllm serve b --tensor-parallel-size 2\n"
            "python -m vllm.entrypoints.openai.api_server --model b/ --enable-lora\n")
    (m,) = merges(text)
    assert (m.line, m.backend, m.local_dir, m.target_dir) == (1, "megatron", "a/actor", "b")
    assert "--tie-word-embedding" in m.flags
    assert servers(text) == [("b", False), ("b", True)]


# --- VI684: a merger backend the run's checkpoint does not feed ----------------------------------------------------

def test_vi684_megatron_merge_of_a_default_megatron_run(tmp_path):
    model = _model(tmp_path, "m")
    fault = _script(tmp_path, model, "", MEGATRON_MERGE, megatron=True)
    (hit,) = _hits(fault, "VI684")
    assert hit.severity == "error" and "model/dist_ckpt" in hit.message and "model/huggingface" in hit.hint
    control = _script(tmp_path, model, DIST, MEGATRON_MERGE, megatron=True)
    assert not _hits(control, "VI684")
    # verl's own checkpoint manager: with use_dist_checkpointing False the 'model' slot is HF, no Megatron shards
    hf = verl_function("utils/checkpoint/megatron_checkpoint_manager.py", "should_save_hf_model")
    dist = verl_function("utils/checkpoint/megatron_checkpoint_manager.py", "should_save_dist_ckpt_model")
    default = SimpleNamespace(checkpoint_save_contents=["model", "optimizer", "extra"], use_dist_checkpointing=False)
    assert hf(default) and not dist(default)
    shards = SimpleNamespace(checkpoint_save_contents=["model", "optimizer", "extra"], use_dist_checkpointing=True)
    assert dist(shards)
    # ... and the merger reads only the Megatron shards' folder
    assert table()["megatron_reads"] == "get_model_dist_checkpoint_path" and table()["megatron_dist_ckpt"] == \
        "model/dist_ckpt"


def test_vi684_backend_of_the_other_engine(tmp_path):
    model = _model(tmp_path, "m")
    fsdp_merge = MEGATRON_MERGE.replace("megatron", "fsdp")
    assert [h.severity for h in _hits(_script(tmp_path, model, "", MEGATRON_MERGE), "VI684")] == ["error"]
    assert not _hits(_script(tmp_path, model, "", fsdp_merge), "VI684")
    assert [h.severity for h in _hits(_script(tmp_path, model, DIST, fsdp_merge, megatron=True), "VI684")] == ["error"]


# --- VI685: --tie-word-embedding for an untied model ---------------------------------------------------------------

def _merge_state_dicts():
    rel = "model_merger/megatron_model_merger.py"
    import warnings

    return verl_function(rel, "_merge_state_dicts", np=np, torch=torch, warnings=warnings), \
        verl_function(rel, "_check_megatron_state_key"), verl_function(rel, "_replace_name")


@pytest.mark.filterwarnings("ignore:hf_name .* will not be fixed:UserWarning")
@pytest.mark.parametrize("tie_flag", [True, False])
def test_vi685_verl_drops_lm_head_under_the_flag(tie_flag):
    merge, check_key, replace = _merge_state_dicts()
    self = SimpleNamespace(config=SimpleNamespace(tie_word_embedding=tie_flag, is_value_model=False), world_size=1,
                           pipeline_shards=[1], params_mapping=table()["megatron_params_mapping"], rank=0)
    self._check_megatron_state_key = lambda key: check_key(self, key)
    self._replace_name = lambda key, mapping: replace(self, key, mapping)
    self._split_tensors = lambda key, tensor, config, is_value_model=False: [tensor]
    self.hf_config = SimpleNamespace(tie_word_embeddings=False)
    weights = {"embedding.word_embeddings.weight": torch.ones(8, 4), "decoder.final_layernorm.weight": torch.ones(4),
               "output_layer.weight": torch.full((8, 4), 2.0)}
    out = merge(self, [weights])
    assert ("lm_head.weight" in out) is (not tie_flag)


def test_vi685_fault_and_control(tmp_path):
    flag = MEGATRON_MERGE.replace("merge --backend megatron", "merge --backend megatron --tie-word-embedding")
    untied = _script(tmp_path, _model(tmp_path, "untied"), DIST, flag, megatron=True)
    (hit,) = _hits(untied, "VI685")
    assert hit.severity == "error" and "tie_word_embeddings=false" in hit.message
    assert not _hits(_script(tmp_path, _model(tmp_path, "tied", tie_word_embeddings=True), DIST, flag, megatron=True),
                     "VI685")
    assert not _hits(_script(tmp_path, _model(tmp_path, "u2"), DIST, MEGATRON_MERGE, megatron=True), "VI685")


# --- VI686: the merger's export of a LoRA run ----------------------------------------------------------------------

def test_vi686_verl_writes_the_base_and_the_adapter_apart(tmp_path):
    from verl.model_merger.base_model_merger import BaseModelMerger

    base, a, b = torch.randn(6, 4), torch.randn(2, 4), torch.randn(6, 2)
    state = {"base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight": base.clone(),
             "base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight": a,
             "base_model.model.model.layers.0.self_attn.q_proj.lora_B.default.weight": b}
    self = SimpleNamespace(config=SimpleNamespace(target_dir=str(tmp_path / "out")),
                           _load_lora_train_meta=lambda: {"r": 2, "lora_alpha": 4})
    path = BaseModelMerger.save_lora_adapter(self, state)
    assert Path(path) == tmp_path / "out" / table()["lora_adapter_dir"]
    assert (Path(path) / "adapter_model.safetensors").is_file()
    assert list(state) == ["model.layers.0.self_attn.q_proj.weight"]
    assert torch.equal(state["model.layers.0.self_attn.q_proj.weight"], base)  # W, not W + (alpha/r)·B·A


LORA = f"{M}.lora_rank=16 {M}.lora_alpha=32 {A}.optim.lr=3e-5"
FSDP_MERGE = "python -m verl.model_merger merge --backend fsdp --local_dir $CKPT/global_step_10/actor " \
             "--target_dir /out/merged\n"


def test_vi686_fault_and_controls(tmp_path):
    model = _model(tmp_path, "m")
    served = _script(tmp_path, model, LORA, FSDP_MERGE + "vllm serve /out/merged\n")
    (hit,) = _hits(served, "VI686")
    assert hit.severity == "warning" and "/out/merged/lora_adapter" in hit.message
    (quiet,) = _hits(_script(tmp_path, model, LORA, FSDP_MERGE), "VI686")
    assert quiet.severity == "info"
    with_lora = _script(tmp_path, model, LORA, FSDP_MERGE + "vllm serve /out/merged --enable-lora "
                        "--lora-modules t=/out/merged/lora_adapter\n")
    assert [h.severity for h in _hits(with_lora, "VI686")] == ["info"]
    assert not _hits(_script(tmp_path, model, "", FSDP_MERGE + "vllm serve /out/merged\n"), "VI686")


# --- VI687: the Megatron merger on a vision-language model ---------------------------------------------------------

def test_vi687_verl_has_no_name_for_the_vision_tower():
    replace = verl_function("model_merger/megatron_model_merger.py", "_replace_name")
    mapping = table()["megatron_params_mapping"]
    assert not table()["megatron_maps_vision"]
    for key in ("vision_model.decoder.layers.0.self_attention.linear_qkv.weight", "vision_model.patch_embed.proj.weight"):
        name = replace(None, key, mapping)
        assert name is None or not name.startswith(("visual.", "model.visual.")), name  # HF Qwen2.5-VL: visual.*
    assert replace(None, "decoder.layers.0.self_attention.linear_proj.weight", mapping) == \
        "model.layers.0.self_attn.o_proj.weight"


def test_vi687_fault_and_control(tmp_path):
    vl = _model(tmp_path, "vl", architectures=["Qwen2_5_VLForConditionalGeneration"], model_type="qwen2_5_vl",
                vision_config={"depth": 2, "hidden_size": 32, "out_hidden_size": 64, "num_heads": 2})
    (hit,) = _hits(_script(tmp_path, vl, DIST, MEGATRON_MERGE, megatron=True), "VI687")
    assert hit.severity == "error" and "hf_model" in hit.hint
    assert not _hits(_script(tmp_path, _model(tmp_path, "text"), DIST, MEGATRON_MERGE, megatron=True), "VI687")


# --- VI655: the FSDP merger on a VeOmni checkpoint (verl PR#7942, after 0.9.1) ----------------------------------------

def test_vi655_verl_refuses_a_veomni_mesh():
    # verl's own FSDPModelMerger._calculate_shard_configuration (imports cleanly): the 1-D full shard under VeOmni's
    # dimension name is refused, the same layout under "fsdp" is accepted
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    merger = object.__new__(FSDPModelMerger)
    mesh = np.arange(4).reshape(4)
    assert merger._calculate_shard_configuration(mesh, ("fsdp",))
    with pytest.raises(AssertionError, match="dp_shard"):
        merger._calculate_shard_configuration(mesh, ("dp_shard",))
    assert ["dp_shard"] not in table()["fsdp_mesh_dim_names"]


def test_vi655_fault_and_controls(tmp_path):
    model = _model(tmp_path, "m")
    fsdp_merge = MEGATRON_MERGE.replace("megatron", "fsdp")
    (hit,) = _hits(_script(tmp_path, model, "model_engine=veomni", fsdp_merge), "VI655")
    assert hit.severity == "error" and "dp_shard" in hit.message and f"{A}.checkpoint.save_contents" in hit.hint
    # controls: the same merge of an FSDP run, and a VeOmni run with no merge
    assert not _hits(_script(tmp_path, model, "", fsdp_merge), "VI655")
    assert not _hits(_script(tmp_path, model, "model_engine=veomni", ""), "VI655")
