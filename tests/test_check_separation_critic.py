"""VI951: a critic under verl 0.9.1's separation-family trainers (wizard/check/rules/separation_critic.py).

The oracle is verl's own SeparateRayPPOTrainer._create_critic_class, compiled unchanged from its source (the trainer
module does not import on a CPU box without its serving dependencies) and run on the CriticConfig that verl's own
omega_conf_to_dataclass builds from verl's own generated ppo_trainer.yaml, for a tiny model folder the test writes.
Only the worker-side imports the method makes before it fails are stubbed; nothing of verl's logic is.

Real cases: verl#7822 (one_step_off_policy with algorithm.adv_estimator=gae: AttributeError on
critic.model.fsdp_config), PR#7969 (a fsdp2 critic there: NotImplementedError). Controls: the same launches with a
critic-free estimator, and GAE under verl.trainer.main_ppo.
"""

from __future__ import annotations

import ast
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from helpers_verl import verl_root, verl_tree
from wizard.check.lint import check

A, R = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", f"{R}.name=vllm", "trainer.logger=[console]",
        f"{A}.ppo_mini_batch_size=64", f"{A}.ppo_micro_batch_size_per_gpu=4", "data.max_prompt_length=512",
        "data.max_response_length=1024", "critic.model.path=Qwen/Qwen2.5-1.5B-Instruct",
        "critic.ppo_micro_batch_size_per_gpu=4", "trainer.nnodes=1", "trainer.n_gpus_per_node=4",
        "actor_rollout_ref.hybrid_engine=False", "rollout.nnodes=1", "rollout.n_gpus_per_node=4"]
MODULES = {"one_step_off": "verl.experimental.one_step_off_policy.main_ppo",
           "fully_async": "verl.experimental.fully_async_policy.fully_async_main",
           "ppo": "verl.trainer.main_ppo"}






def _class(tree: ast.AST, name: str) -> ast.ClassDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)


def _method(cls: ast.ClassDef, name: str) -> Any:
    return next((n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
                None)


def _tiny_model(folder: Path) -> Path:
    """A Qwen2 config.json and a three-token tokenizer: all verl's HFModelConfig reads on the CPU."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 3,
        "max_position_embeddings": 256}), encoding="utf-8")
    tok = Tokenizer(models.WordLevel({"<unk>": 0, "a": 1, "b": 2}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<unk>",
                            eos_token="<unk>").save_pretrained(str(folder))
    return folder


def _critic_config(model: Path, strategy: str) -> Any:
    """verl's own CriticConfig for a GAE run, from verl's own generated trainer config."""
    import yaml
    from omegaconf import OmegaConf

    from verl.utils.config import omega_conf_to_dataclass

    full = OmegaConf.create(yaml.safe_load((verl_root() / "trainer/config/_generated_ppo_trainer.yaml")
                                           .read_text(encoding="utf-8")))
    full.actor_rollout_ref.model.path = str(model)
    full.critic.model.path = str(model)
    full.critic.strategy = strategy
    full.critic.ppo_micro_batch_size_per_gpu = 4
    full.algorithm.adv_estimator = "gae"
    return full, omega_conf_to_dataclass


def _create_critic_class(namespace: dict[str, Any]) -> Any:
    """verl's SeparateRayPPOTrainer._create_critic_class, compiled from its source under its own file name."""
    rel = "experimental/separation/ray_trainer.py"
    node = _method(_class(verl_tree(rel), "SeparateRayPPOTrainer"), "_create_critic_class")
    code = compile(ast.Module(body=[node], type_ignores=[]), str(verl_root() / rel), "exec")
    exec(code, namespace)
    return namespace["_create_critic_class"]


@pytest.mark.verl
@pytest.mark.parametrize("strategy, error, text", [("fsdp", AttributeError, "fsdp_config"),
                                                   ("fsdp2", NotImplementedError, "Unknown strategy")])
def test_verls_separation_trainer_cannot_build_a_critic(tmp_path, monkeypatch, strategy, error, text):
    full, omega_conf_to_dataclass = _critic_config(_tiny_model(tmp_path / "m"), strategy)
    critic = omega_conf_to_dataclass(full.critic)
    assert not hasattr(critic.model, "fsdp_config") and hasattr(critic, "engine")  # the engine sits on the critic
    # the method imports the worker module (it needs uvicorn and friends) before it fails: stub only that import
    stub = types.ModuleType("verl.workers.engine_workers")
    stub.TrainingWorkerConfig = object  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "verl.workers.engine_workers", stub)
    method = _create_critic_class({"omega_conf_to_dataclass": omega_conf_to_dataclass, "Role": types.SimpleNamespace(
        Critic="critic")})
    trainer = types.SimpleNamespace(use_critic=True, config=full, resource_pool_to_cls={"pool": {}},
                                    resource_pool_manager=types.SimpleNamespace(get_resource_pool=lambda role: "pool"))
    with pytest.raises(error, match=text):
        method(trainer)


@pytest.mark.verl
def test_both_entry_trainers_take_the_separation_critic_path_after_booking_gpus():
    """Structural evidence: one_step_off and fully_async subclass SeparateRayPPOTrainer, keep its
    _create_critic_class and _create_worker_classes, and create the resource pools before the worker classes."""
    sep = _class(verl_tree("experimental/separation/ray_trainer.py"), "SeparateRayPPOTrainer")
    calls = [ast.unparse(n.func) for n in ast.walk(_method(sep, "_create_worker_classes")) if isinstance(n, ast.Call)]
    assert "self._create_critic_class" in calls
    for rel, name in (("experimental/one_step_off_policy/ray_trainer.py", "OneStepOffRayTrainer"),
                      ("experimental/fully_async_policy/fully_async_trainer.py", "FullyAsyncTrainer")):
        cls = _class(verl_tree(rel), name)
        assert [ast.unparse(b) for b in cls.bases] == ["SeparateRayPPOTrainer"]
        assert _method(cls, "_create_critic_class") is None and _method(cls, "_create_worker_classes") is None
        init = _method(cls, "init_workers") or _method(sep, "init_workers")
        order = [ast.unparse(n.func) for n in ast.walk(init) if isinstance(n, ast.Call)]
        assert order.index("self._init_resource_pools") < order.index("self._create_worker_classes")
        assert "need_critic(self.config)" in ast.unparse(cls)


def _hits(tmp_path: Path, entry: str, overrides: list[str]) -> list[Any]:
    script = tmp_path / f"run_{entry}.sh"
    script.write_text(f"#!/bin/bash\npython3 -m {MODULES[entry]} " + " ".join(f"'{o}'" for o in [*BASE, *overrides])
                      + "\n", encoding="utf-8")
    return [f for f in check(str(script), workdir=str(tmp_path)).findings if f.problem.rule == "VI951"]


def test_gae_under_one_step_off_is_an_error_naming_the_attribute(tmp_path):
    [hit] = _hits(tmp_path, "one_step_off", ["algorithm.adv_estimator=gae", "data.train_batch_size=256"])
    assert hit.problem.severity == "error" and "critic.model.fsdp_config" in hit.problem.message
    assert "verl.trainer.main_ppo" in hit.problem.hint and "grpo" in hit.problem.hint


def test_fsdp2_critic_under_fully_async_is_an_error_naming_the_strategy(tmp_path):
    [hit] = _hits(tmp_path, "fully_async", ["algorithm.adv_estimator=gae", "data.train_batch_size=0",
                                            f"{A}.strategy=fsdp2", "critic.strategy=fsdp2"])
    assert hit.problem.severity == "error" and "Unknown strategy fsdp2" in hit.problem.message


def test_an_enabled_critic_without_gae_is_caught_too(tmp_path):
    [hit] = _hits(tmp_path, "one_step_off", ["algorithm.adv_estimator=grpo", "critic.enable=True",
                                             "data.train_batch_size=256", f"{R}.n=4"])
    assert "critic.enable=True" in hit.problem.message


@pytest.mark.parametrize("entry, overrides", [
    ("one_step_off", ["algorithm.adv_estimator=grpo", "data.train_batch_size=256", f"{R}.n=4"]),
    ("fully_async", ["algorithm.adv_estimator=grpo", "data.train_batch_size=0", f"{R}.n=4"]),
    ("one_step_off", ["algorithm.adv_estimator=gae", "critic.enable=False", "data.train_batch_size=256"]),
    ("ppo", ["algorithm.adv_estimator=gae", "data.train_batch_size=256"]),
])
def test_controls_without_a_separation_critic_stay_clean(tmp_path, entry, overrides):
    assert not _hits(tmp_path, entry, overrides)
