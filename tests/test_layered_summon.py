"""VI790: rollout.layered_summon (real case verl#3516: LoRA GRPO with layered_summon=True as the workaround for
adapters not reaching vLLM, load_format left at verl's default 'dummy').

The oracles are verl's own code. collect_lora_params (utils/fsdp_utils.py:715-730) runs on the CPU on a tiny peft
model whose class is made an FSDP2 module the way fully_shard makes it (module.__class__ = (FSDPModule, cls)): with
layered_summon and base_sync_done=False it raises verl's ValueError, with base_sync_done=True it returns the adapters.
The worker's base_sync_done and its base-weight pass are read from engine_workers.py with ast and evaluated as
written (the worker needs a GPU, Ray and a rollout engine to build). The no-op half reads every place verl's code
reads layered_summon or the rollout's sleep_level.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.layered_summon import FIX_FORMAT, FSDP_LINEAGE, LF, LS

R = "actor_rollout_ref.rollout"
M = "actor_rollout_ref.model"
BASE = ["algorithm.adv_estimator=grpo", f"{M}.path=Qwen/Qwen2.5-3B-Instruct", "data.train_batch_size=16",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{R}.n=4", "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=4", f"{R}.name=vllm"]
LORA = [f"{M}.lora_rank=64", f"{M}.lora_alpha=32"]


def _verl() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def _hits(*extra: str):
    return [f for f in check(None, [*BASE, *extra]).findings if f.problem.rule == "VI790"]


def _fsdp2_peft_model():
    import torch.nn as nn
    from peft import LoraConfig, get_peft_model

    from verl.utils import fsdp_utils

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(4, 4)

    model = get_peft_model(Tiny(), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]))
    # what fully_shard does to a module (torch/distributed/fsdp/_fully_shard/_fully_shard.py): a subclass of
    # FSDPModule and the module's own class, set on the instance
    model.__class__ = type(f"FSDP{type(model).__name__}", (fsdp_utils.FSDPModule, type(model)), {})
    assert fsdp_utils.fsdp_version(model) == 2
    return model


@pytest.mark.verl
def test_verls_collect_lora_params_refuses_layered_summon_before_the_base_sync():
    from verl.utils.fsdp_utils import collect_lora_params

    model = _fsdp2_peft_model()
    with pytest.raises(ValueError, match="load_format=safetensors"):
        collect_lora_params(model, layered_summon=True, base_sync_done=False)
    # control: once the base model is in the engine, layered summon collects the adapters
    params = collect_lora_params(model, layered_summon=True, base_sync_done=True)
    assert params and all("lora_" in k for k in params)


def _function(tree: ast.AST, name: str) -> ast.AST:
    return next(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name)


@pytest.mark.verl
def test_verls_worker_asks_for_the_base_sync_exactly_when_load_format_is_dummy():
    tree = ast.parse((_verl() / "workers" / "engine_workers.py").read_text(encoding="utf-8"))
    assign = next(n for n in ast.walk(tree) if isinstance(n, ast.AnnAssign)
                  and ast.unparse(n.target) == "self.base_sync_done")
    expr = compile(ast.Expression(assign.value), "engine_workers.py", "eval")

    class Obj:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    for fmt in ("dummy", "dummy_dtensor", "dummy_megatron", "safetensors", "auto", "hf"):
        worker = Obj(config=Obj(rollout=Obj(load_format=fmt)))
        base_sync_done = eval(expr, {}, {"self": worker})  # noqa: S307 - verl's own expression, from its source
        assert base_sync_done is ("dummy" not in fmt)  # the rule's test: "dummy" in load_format
    update = ast.unparse(_function(tree, "update_weights"))
    assert "do_lora_base_sync = not self.base_sync_done" in update
    assert "layered_summon=self.layered_summon, base_sync_done=False" in update
    assert "if not self.peft_merge and peft_config is not None" in update
    # the other checkpoint engines sync with get_per_tensor_param()'s defaults (layered_summon=False)
    assert "per_tensor_param, _ = self.actor.engine.get_per_tensor_param()" in update


@pytest.mark.slow
@pytest.mark.verl
def test_only_the_fsdp_engines_and_vllms_unread_sleep_level_take_layered_summon():
    root = _verl()
    readers: set[str] = set()
    sleep_reads: list[str] = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("tests/", "workers/config/", "trainer/config/")):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "layered_summon" and isinstance(node.ctx, ast.Load):
                readers.add(rel)
            if isinstance(node, ast.Constant) and node.value == "layered_summon":
                readers.add(rel)
            if isinstance(node, ast.keyword) and node.arg == "layered_summon":
                readers.add(rel)
            if (isinstance(node, ast.Attribute) and node.attr == "sleep_level" and isinstance(node.ctx, ast.Load)) or \
                    (isinstance(node, ast.Constant) and node.value == "sleep_level"):
                sleep_reads.append(rel)
    assert readers == {"workers/engine_workers.py", "workers/engine/fsdp/transformer_impl.py",
                       "workers/rollout/vllm_rollout/vllm_rollout.py"}
    # vLLM's adapter sets self.sleep_level from layered_summon; the only reads are SGLang's own attribute and the
    # worker's SGLang branch
    assert set(sleep_reads) == {"workers/engine_workers.py", "workers/rollout/sglang_rollout/sglang_rollout.py"}
    update = ast.unparse(_function(ast.parse((root / "workers" / "engine_workers.py").read_text(encoding="utf-8")),
                                   "update_weights"))
    branch = update[update.index("if is_sglang:"):update.index("else:", update.index("if is_sglang:"))]
    assert "sleep_level" in branch
    # the FSDP engines (fsdp, fsdp2, fsdp_turbo) are the ones FSDPEngine.get_per_tensor_param serves
    fsdp = (root / "workers" / "engine" / "fsdp" / "transformer_impl.py").read_text(encoding="utf-8")
    assert 'backend=["fsdp", "fsdp2"]' in fsdp and set(FSDP_LINEAGE) == {"fsdp", "fsdp2", "fsdp_turbo"}
    assert "class FSDPTurboEngineWithLMHead(FSDPEngineWithLMHead)" in (
        root / "workers" / "engine" / "fsdp" / "fsdp_turbo_impl.py").read_text(encoding="utf-8")


@pytest.mark.slow
def test_check_reports_lora_layered_summon_with_a_dummy_format():
    (hit,) = _hits(*LORA, f"{LS}=True")
    assert hit.problem.severity == "error" and "fsdp_utils.py:725-730" in hit.problem.message
    assert hit.fix is not None and hit.fix.set == {LF: FIX_FORMAT}
    (hit,) = _hits(*LORA, f"{LS}=True", f"{LF}=dummy_dtensor")
    assert hit.problem.severity == "error"


@pytest.mark.parametrize("extra", [
    [f"{LF}=safetensors"], [f"{LF}=auto"],
])
def test_check_is_silent_when_the_base_model_is_loaded(extra):
    assert _hits(*LORA, f"{LS}=True", *extra) == []


@pytest.mark.parametrize("extra", [
    [],  # no LoRA
    [*LORA, f"{M}.lora.merge=True"],  # merged adapters: the full weights are synced
    [*LORA, f"{R}.checkpoint_engine.backend=nccl"],  # get_per_tensor_param() with its defaults
    [f"{M}.lora.rank=64", "actor_rollout_ref.actor.strategy=megatron"],  # the Megatron engine drops it
])
def test_check_notes_layered_summon_that_nothing_reads(extra):
    hits = _hits(*extra, f"{LS}=True")
    assert [h.problem.severity for h in hits] == ["info"], hits


@pytest.mark.slow
def test_check_is_silent_without_layered_summon():
    assert _hits(*LORA) == [] and _hits() == []
