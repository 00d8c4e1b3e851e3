"""A MoE aux-loss coefficient the Megatron router never applies (real cases: verl#5232, where a user asked whether
setting moe_aux_loss_coeff through override_transformer_config turns the load-balancing loss on, and verl PR#4103,
which added moe_aux_loss_coeff=0.01 alone to examples/grpo_trainer/run_qwen3_vl_30b_a3b_megatron.sh): check's VI927.
The premise is read from verl's own engine: the provider settings it forces, and that the user's
override_transformer_config is copied over them afterwards (scripts/verl_megatron_provider.py)."""

from __future__ import annotations

import ast
import importlib.util
import json
import textwrap
from pathlib import Path

import pytest
from helpers_scripts import regenerated

from wizard.check.lint import check
from wizard.check.rules.moe_router import aux_loss_applied

SPEC = importlib.util.find_spec("verl")
VERL = Path(SPEC.origin).parent if SPEC and SPEC.origin else None
DATA = Path(__file__).resolve().parent.parent / "wizard" / "check" / "data"
A = "actor_rollout_ref.actor"
OTC = f"{A}.megatron.override_transformer_config"
BASE = ["model_engine=megatron", "algorithm.adv_estimator=grpo", "data.train_files=/d/train.parquet",
        "data.val_files=/d/val.parquet", "actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.n=4", f"{A}.ppo_mini_batch_size=8",
        f"{A}.use_dynamic_bsz=True", "data.train_batch_size=16", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
        f"{A}.megatron.tensor_model_parallel_size=4", f"{A}.megatron.expert_model_parallel_size=8",
        f"{A}.megatron.expert_tensor_parallel_size=1", "actor_rollout_ref.rollout.tensor_model_parallel_size=4"]


def _report(*extra: str):
    return check(None, [*BASE, *extra], defaults="snapshot", env={"HOME": "/nonexistent-home"})


def _vi927(*extra: str):
    return [f.problem for f in _report(*extra).findings if f.problem.rule == "VI927"]


@pytest.mark.verl
def test_the_table_is_verls_engine():
    if VERL is None:
        pytest.skip("verl is not installed")
    assert regenerated("verl_megatron_provider") == (DATA / "verl_megatron_provider.json").read_text(encoding="utf-8")


@pytest.mark.verl
def test_verl_forces_no_load_balancing_and_lets_only_a_named_key_win():
    """verl's own MegatronEngine source: 'none' goes into provider_overrides, and the loop that copies the user's
    override_transformer_config comes after it, so only an explicit moe_router_load_balancing_type replaces it."""
    if VERL is None:
        pytest.skip("verl is not installed")
    table = json.loads((DATA / "verl_megatron_provider.json").read_text(encoding="utf-8"))
    forced = table["provider_overrides"]["moe_router_load_balancing_type"]
    assert forced["value"] == "none"
    assert table["provider_overrides_line"] < forced["line"] < table["user_overrides_copied_at_line"]
    src = (VERL / "workers/engine/megatron/transformer_impl.py").read_text(encoding="utf-8").splitlines()
    assert '"moe_router_load_balancing_type": "none"' in src[forced["line"] - 1]
    loop = ast.parse(textwrap.dedent("\n".join(src[table["user_overrides_copied_at_line"] - 1:
                                                    table["user_overrides_copied_at_line"] + 1])))
    assert ast.unparse(loop.body[0].body[0]) == "provider_overrides[key] = value"
    # the legacy converter turns it off for the Qwen/Mixtral MoE families too
    assert {d["function"]: d["value"] for d in table["legacy_converter"]}["hf_to_mcore_config_qwen3moe"] == "none"


def test_megatron_routers_aux_loss_switch():
    """Megatron's TopKRouter.get_aux_loss_coeff / is_aux_loss_enabled, type by type."""
    assert not aux_loss_applied("none", 0.01)
    assert not aux_loss_applied("sinkhorn", 0.01)
    assert aux_loss_applied("aux_loss", 0.01) and aux_loss_applied("seq_aux_loss", 1e-3)
    assert aux_loss_applied("global_aux_loss", 1e-3)
    assert not aux_loss_applied("aux_loss", 0.0)
    assert aux_loss_applied(["aux_loss", "seq_aux_loss"], [0.0, 0.01])
    assert not aux_loss_applied(["none"], [0.01])


def test_the_coefficient_alone_is_a_warning_naming_both_keys():
    hits = _vi927(f"+{OTC}.moe_aux_loss_coeff=0.01")
    assert len(hits) == 1 and hits[0].severity == "warning"
    assert hits[0].keys == (f"{OTC}.moe_aux_loss_coeff", f"{OTC}.moe_router_load_balancing_type")
    assert "'none'" in hits[0].message and "transformer_impl.py:369" in hits[0].message
    assert f"+{OTC}.moe_router_load_balancing_type=aux_loss" in hits[0].hint


def test_an_explicit_type_that_names_no_aux_loss_is_the_same_fault():
    assert len(_vi927(f"+{OTC}.moe_aux_loss_coeff=0.01", f"+{OTC}.moe_router_load_balancing_type=sinkhorn")) == 1


def test_valid_controls_stay_clean():
    for extra in ([f"+{OTC}.moe_aux_loss_coeff=0.01", f"+{OTC}.moe_router_load_balancing_type=aux_loss"],
                  [f"+{OTC}.moe_aux_loss_coeff=0.001", f"+{OTC}.moe_router_load_balancing_type=seq_aux_loss"],
                  [f"+{OTC}.moe_aux_loss_coeff=0.0"],
                  [f"+{OTC}.moe_z_loss_coeff=0.001"],  # z-loss: Megatron's apply_z_loss reads it on its own
                  [f"+{OTC}.moe_aux_loss_coeff=0.01", f"{A}.megatron.vanilla_mbridge=True"],
                  []):
        report = _report(*extra)
        assert not [f for f in report.findings if f.problem.rule == "VI927"], extra
        assert not [f for f in report.findings if f.problem.severity == "error" and OTC in " ".join(f.problem.keys)]


def test_the_critic_is_its_own_engine():
    hits = _vi927("algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen3-30B-A3B", "critic.use_dynamic_bsz=True",
                  "+critic.megatron.override_transformer_config.moe_aux_loss_coeff=0.01")
    assert [h.keys[0] for h in hits] == ["critic.megatron.override_transformer_config.moe_aux_loss_coeff"]
