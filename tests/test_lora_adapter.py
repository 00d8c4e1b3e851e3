"""A pre-trained LoRA adapter on the FSDP engines (`actor_rollout_ref.model.lora_adapter_path`, real case verl#3400):
check's VI880 says when the adapter is never loaded (lora_rank 0) and when it is larger than vLLM's adapter slots.

Oracles: the adapter folder is written by peft itself (its adapter_config.json), peft loads it at its own rank
whatever verl's lora_rank says (what fsdp/transformer_impl.py:350 calls), verl's own source decides that LoRA is built
only for lora_rank > 0, and vLLM's slot sizes are read from verl's source (vllm_rollout/utils.py), not from ours.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.verlspec import lora

M = "actor_rollout_ref.model"
_SPEC = importlib.util.find_spec("verl")
VERL = Path(_SPEC.origin).parent if _SPEC and _SPEC.origin else None


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real peft adapter of rank 16 on a tiny Qwen2 model."""
    peft = pytest.importorskip("peft")
    from transformers import Qwen2Config, Qwen2ForCausalLM

    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=2))
    folder = tmp_path_factory.mktemp("adapter")
    peft.get_peft_model(model, peft.LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj"])).save_pretrained(folder)
    return folder


def _check(tmp_path: Path, *changes: str):
    for name in ("train.parquet", "val.parquet"):
        (tmp_path / name).write_bytes(b"PAR1")
    base = ["algorithm.adv_estimator=grpo", f"data.train_files={tmp_path / 'train.parquet'}",
            f"data.val_files={tmp_path / 'val.parquet'}", "data.train_batch_size=64", "data.max_prompt_length=512",
            "data.max_response_length=1024", f"{M}.path=Qwen/Qwen2.5-1.5B-Instruct",
            "actor_rollout_ref.actor.ppo_mini_batch_size=32", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
    return check(None, [*base, *changes], defaults="snapshot", env={"HOME": "/nonexistent-home"}, nnodes=1,
                 gpus_per_node=8, gpu_memory_gb=80)


def _vi880(report):
    return [f for f in report.findings if f.problem.rule == "VI880"]


def test_verl_builds_lora_only_for_a_positive_lora_rank():
    """The premise, from verl's FSDP engine: `_is_lora = lora_rank > 0`, and _build_lora_module (the only reader of
    lora_adapter_path) runs only under `if self._is_lora`."""
    if VERL is None:
        pytest.skip("verl is not installed")
    tree = ast.parse((VERL / "workers/engine/fsdp/transformer_impl.py").read_text(encoding="utf-8"))
    guards = [n for n in ast.walk(tree) if isinstance(n, ast.If) and isinstance(n.test, ast.Attribute)
              and n.test.attr == "_is_lora" and any(isinstance(c, ast.Call) and getattr(c.func, "attr", "") ==
                                                   "_build_lora_module" for c in ast.walk(n))]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "_build_lora_module"]
    assert guards and len(calls) == 1
    assigns = [ast.unparse(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
               and any(getattr(t, "attr", "") == "_is_lora" for t in n.targets)]
    assert assigns == ["self.model_config.lora_rank > 0"]


def test_an_adapter_with_lora_rank_0_is_an_error_fixed_with_the_adapters_rank(tmp_path, adapter):
    found = _vi880(_check(tmp_path, f"+{M}.lora_adapter_path={adapter}"))
    assert len(found) == 1 and found[0].problem.severity == "error"
    assert f"{M}.lora_adapter_path" in found[0].problem.keys
    assert "never loaded" in found[0].problem.message and "disable_adapter" in found[0].problem.message
    # the rank and alpha peft wrote
    assert found[0].fix is not None and found[0].fix.set == {f"{M}.lora_rank": 16, f"{M}.lora_alpha": 32}


def test_an_adapter_larger_than_vllms_slots_is_an_error(tmp_path, adapter):
    """peft loads the adapter at its own rank (16) whatever verl's lora_rank (8) says; vLLM's slots hold 8."""
    from peft import PeftModel
    from transformers import Qwen2Config, Qwen2ForCausalLM

    model = PeftModel.from_pretrained(Qwen2ForCausalLM(Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2)), str(adapter), is_trainable=True)
    a = next(p for n, p in model.named_parameters() if "lora_A" in n)
    assert a.shape[0] == 16 > lora.vllm_slots(8)
    found = _vi880(_check(tmp_path, f"+{M}.lora_adapter_path={adapter}", f"{M}.lora_rank=8"))
    assert len(found) == 1 and "r=16" in found[0].problem.message and found[0].fix.set == {f"{M}.lora_rank": 16}


@pytest.mark.parametrize("rank", [16, 10, 32])
def test_an_adapter_that_fits_the_slots_is_clean(tmp_path, adapter, rank):
    """lora_rank 10 rounds up to vLLM's 16: the rank-16 adapter fits."""
    assert not _vi880(_check(tmp_path, f"+{M}.lora_adapter_path={adapter}", f"{M}.lora_rank={rank}"))


def test_an_adapter_path_that_is_not_here_still_needs_a_rank(tmp_path):
    found = _vi880(_check(tmp_path, f"+{M}.lora_adapter_path=/elsewhere/adapter"))
    assert len(found) == 1 and found[0].fix is None and "adapter_config.json" in found[0].problem.hint


def test_vllms_lora_ranks_are_verls(tmp_path):
    """verl's fallback list of vLLM's allowed max_lora_rank values (the Literal in get_vllm_max_lora_rank)."""
    if VERL is None:
        pytest.skip("verl is not installed")
    tree = ast.parse((VERL / "workers/rollout/vllm_rollout/utils.py").read_text(encoding="utf-8"))
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_vllm_max_lora_rank")
    literal = next(n for n in ast.walk(fn) if isinstance(n, ast.Subscript) and ast.unparse(n.value) == "Literal")
    assert tuple(sorted(ast.literal_eval(literal.slice))) == lora.VLLM_LORA_RANKS
    assert [lora.vllm_slots(r) for r in (1, 2, 8, 9, 300, 512)] == [1, 8, 8, 16, 320, 512]
