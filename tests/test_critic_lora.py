"""VI422: LoRA on the PPO critic under verl 0.9.1's FSDP engine (verl#4620; the verl-based RAGEN#100).

The oracle is verl's own FSDPEngine._build_lora_module, run on CPU on a stand-in engine and a tiny Qwen2 built here:
it raises AttributeError on the critic's token-classification value model, builds the actor's causal LM, and builds
the value model from a TOKEN_CLS adapter folder. The table (task type, gate, value-model backends) is regenerated
from the installed verl and compared.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers_scripts import regenerated

from wizard.check.lint import check
from wizard.check.rules import critic_lora

ROOT = Path(__file__).resolve().parent.parent
A, M = "actor_rollout_ref.actor", "actor_rollout_ref.model"
BASE = ["algorithm.adv_estimator=gae", f"{M}.path=Qwen/Qwen2.5-0.5B-Instruct", "critic.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", "data.train_batch_size=64", f"{A}.ppo_mini_batch_size=32",
        f"{A}.ppo_micro_batch_size_per_gpu=4", "critic.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "trainer.nnodes=1",
        "trainer.n_gpus_per_node=4", "trainer.logger=[console]"]
CRITIC_LORA = ["critic.model.lora_rank=64", "critic.model.lora_alpha=64", "critic.model.target_modules=all-linear"]


def _hits(*extra: str):
    return [f for f in check(None, [*BASE, *extra]).findings if f.problem.rule == "VI422"]


def test_regenerating_the_critic_lora_table_gives_the_committed_one():
    committed = (ROOT / "wizard" / "check" / "data" / "verl_critic_lora.json").read_text(encoding="utf-8")
    assert regenerated("verl_critic_lora") == committed


# --- oracle: verl's own LoRA builder ----------------------------------------------------------------------------------

def _tiny(kind: str):
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, Qwen2Config

    cfg = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, num_labels=1)
    cls = AutoModelForTokenClassification if kind == "value" else AutoModelForCausalLM
    return cls.from_config(cfg)


def _build_lora(module, adapter: str | None = None):
    """verl's FSDPEngine._build_lora_module on a stand-in engine whose model config carries the LoRA keys."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            from verl.workers.engine.fsdp.transformer_impl import FSDPEngine
        finally:
            logging.disable(logging.NOTSET)
    cfg = SimpleNamespace(lora_adapter_path=adapter, lora_rank=8, lora_alpha=16, target_modules="all-linear",
                          target_parameters=None, exclude_modules=None, use_shm=False)
    return FSDPEngine._build_lora_module(SimpleNamespace(model_config=cfg), module)


def test_verls_lora_builder_fails_on_the_value_model_and_the_check_says_so():
    with pytest.raises(AttributeError, match="prepare_inputs_for_generation"):
        _build_lora(_tiny("value"))
    (hit,) = _hits(*CRITIC_LORA)
    assert hit.problem.severity == "error"
    assert hit.problem.keys[0] == "critic.model.lora_rank"
    assert "critic.model.lora_rank=64" in hit.problem.message and f"TaskType.{critic_lora.table()['task_type']}" \
        in hit.problem.message
    assert hit.fix is not None and hit.fix.set == {"critic.model.lora_rank": 0}


def test_actor_lora_builds_and_stays_clean():
    """Control: the same builder wraps the actor's causal LM; LoRA on the actor alone draws no VI422."""
    from peft import PeftModel

    assert isinstance(_build_lora(_tiny("causal")), PeftModel)
    assert not _hits(f"{M}.lora_rank=64", f"{M}.lora_alpha=64")


@pytest.mark.parametrize("extra", [
    ("critic.model.lora_rank=0",),                                    # no critic LoRA
    ("algorithm.adv_estimator=grpo", *CRITIC_LORA),                   # no critic is built
    ("model_engine=megatron", *CRITIC_LORA),                          # Megatron-Bridge LoRA (VI881's)
])
def test_no_finding_without_an_fsdp_critic_lora(extra):
    assert not _hits(*extra)


def test_fsdp2_critic_is_concerned_too():
    assert critic_lora.table()["value_model"]["backends"] == ["fsdp", "fsdp2"]
    assert _hits("critic.strategy=fsdp2", *CRITIC_LORA)


def _adapter(folder: Path, task: str) -> Path:
    """A LoRA adapter saved by peft from a tiny model of the same shape, with the given task type."""
    from peft import LoraConfig, TaskType, get_peft_model

    base = _tiny("value" if task == "TOKEN_CLS" else "causal")
    # named targets: peft 0.21 refuses TOKEN_CLS with "all-linear" (the score head is then both a LoRA target and a
    # module to save)
    model = get_peft_model(base, LoraConfig(task_type=getattr(TaskType, task), r=8, lora_alpha=16,
                                            target_modules=["q_proj", "v_proj"]))
    model.save_pretrained(folder)
    assert json.loads((folder / "adapter_config.json").read_text())["task_type"] == task
    return folder


def test_token_classification_adapter_builds_and_stays_clean(tmp_path):
    folder = _adapter(tmp_path / "adapter", "TOKEN_CLS")
    assert _build_lora(_tiny("value"), str(folder)) is not None
    assert not _hits(*CRITIC_LORA, f"critic.model.lora_adapter_path={folder}")


def test_causal_adapter_fails_and_is_caught(tmp_path):
    folder = _adapter(tmp_path / "adapter", "CAUSAL_LM")
    with pytest.raises(AttributeError, match="prepare_inputs_for_generation"):
        _build_lora(_tiny("value"), str(folder))
    (hit,) = _hits(*CRITIC_LORA, f"critic.model.lora_adapter_path={folder}")
    assert "CAUSAL_LM adapter" in hit.problem.message


def test_adapter_not_here_is_not_judged():
    assert not _hits(*CRITIC_LORA, "critic.model.lora_adapter_path=/nonexistent/critic_adapter")


# --- VI809's list of critic strategies: verl's value-model engine registrations (real case R94-03, PR#5356) ----------

def test_critic_strategies_are_verls_value_model_backends():
    from wizard.verlspec.keys import CRITIC_STRATEGIES

    assert set(CRITIC_STRATEGIES) == set(critic_lora.table()["value_model_backends_all"])


def test_ppo_on_torchtitan_names_the_missing_value_model_engine():
    """verl's own registry refuses a torchtitan value model (its assertion, on CPU); the check says so at VI809."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from verl.workers.engine.base import EngineRegistry
    with pytest.raises(AssertionError, match="Unknown backend: torchtitan"):
        EngineRegistry.get_engine_cls("value_model", "torchtitan")
    report = check(None, [*BASE, "model_engine=torchtitan"])
    (hit,) = [f for f in report.findings if f.problem.rule == "VI809" and f.problem.keys == ("critic.strategy",)]
    assert hit.problem.severity == "error" and "value-model engine" in hit.problem.hint
    grpo = check(None, [*BASE, "model_engine=torchtitan", "algorithm.adv_estimator=grpo"])
    assert not [f for f in grpo.findings if f.problem.rule == "VI809" and f.problem.keys == ("critic.strategy",)]
