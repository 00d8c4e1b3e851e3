"""An uneven Megatron pipeline split whose first/last stage layer counts do not cover the model (real case:
NVIDIA/Megatron-LM#2718, Qwen3-30B-A3B's 48 layers with PP=2, num_layers_in_first_pipeline_stage=11 and
num_layers_in_last_pipeline_stage=13: 24 layers never built), set through verl's override_transformer_config:
check's VI813. verl copies override_transformer_config onto the Megatron-Bridge provider unchecked (the table
scripts/verl_megatron_provider.py reads from verl's engine records where); the split arithmetic is megatron-core's
(wizard.verlspec.arithmetic.MEGATRON_CHECKS["layers"])."""

from __future__ import annotations

import json
from pathlib import Path

from wizard.check.lint import check

DATA = Path(__file__).resolve().parent.parent / "wizard" / "check" / "data"
A = "actor_rollout_ref.actor"
OTC = f"+{A}.megatron.override_transformer_config"
BASE = ["model_engine=megatron", "algorithm.adv_estimator=grpo", "data.train_files=/d/train.parquet",
        "data.val_files=/d/val.parquet", "actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.n=4", f"{A}.ppo_mini_batch_size=8",
        f"{A}.use_dynamic_bsz=True", "data.train_batch_size=16", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
        f"{A}.megatron.tensor_model_parallel_size=2", f"{A}.megatron.expert_model_parallel_size=4",
        f"{A}.megatron.expert_tensor_parallel_size=1", "actor_rollout_ref.rollout.tensor_model_parallel_size=4"]


def _split(pp: int, *extra: str):
    report = check(None, [*BASE, f"{A}.megatron.pipeline_model_parallel_size={pp}", *extra], defaults="snapshot",
                   env={"HOME": "/nonexistent-home"})
    # the layer split only (a PP of 4 with EP 4 also overflows the 8-GPU expert grid: another VI813)
    return [f.problem for f in report.findings if f.problem.rule == "VI813" and "layers" in f.problem.message]


def test_verl_hands_the_split_to_megatron_unchecked():
    table = json.loads((DATA / "verl_megatron_provider.json").read_text(encoding="utf-8"))
    assert table["user_overrides_copied_at_line"] > table["provider_overrides_line"]


def test_the_issues_split_leaves_half_the_layers_out():
    hits = _split(2, f"{OTC}.num_layers_in_first_pipeline_stage=11", f"{OTC}.num_layers_in_last_pipeline_stage=13")
    assert len(hits) == 1 and hits[0].severity == "error"
    assert "48 layers" in hits[0].message and "first 11 + last 13" in hits[0].message
    assert hits[0].keys[-1] == f"{A}.megatron.pipeline_model_parallel_size"
    assert "num_layers_in_last_pipeline_stage=37" in hits[0].hint


def test_a_middle_remainder_and_a_split_without_pipeline_are_the_same_fault():
    assert _split(4, f"{OTC}.num_layers_in_first_pipeline_stage=10", f"{OTC}.num_layers_in_last_pipeline_stage=13")
    assert _split(1, f"{OTC}.num_layers_in_last_pipeline_stage=13")


def test_valid_controls_stay_clean():
    assert _split(4, f"{OTC}.num_layers_in_first_pipeline_stage=11", f"{OTC}.num_layers_in_last_pipeline_stage=13") == []
    assert _split(2, f"{OTC}.num_layers_in_last_pipeline_stage=13") == []  # the first stage takes the other 35
    assert _split(2, f"{OTC}.num_layers_in_first_pipeline_stage=23", f"{OTC}.num_layers_in_last_pipeline_stage=25") == []
    assert _split(2) == []
    # a custom layout is Megatron's own business: unjudged
    assert _split(2, f"{OTC}.num_layers_in_first_pipeline_stage=11", f"{OTC}.num_layers_in_last_pipeline_stage=13",
                  f"{OTC}.account_for_loss_in_pipeline_split=True") == []
