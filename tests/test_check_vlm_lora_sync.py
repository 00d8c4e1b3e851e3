"""`check` VI666: Megatron VLMLoRA with an unfrozen module (freeze_vision_model / freeze_vision_projection /
freeze_language_model False) and lora.merge=False: after the first sync verl sends the rollout the adapters only.

Real case (round 85): verl PR #6670 (training the vision part of a VLM with Megatron LoRA by setting
freeze_vision_model=False / freeze_vision_projection=False, vLLM rollout).

The oracle is verl's own code, on CPU: get_per_tensor_param, the Megatron engine's weight export, is taken from the
installed verl's workers/engine/megatron/transformer_impl.py (its source, compiled here: the module imports Megatron,
which this machine lacks) and run on a stub bridge. Once the base is synced it calls export_adapter_weights only, with
merge=False, and the full export with merge=True. check reports VI666 for the first and stays clean with merge=True,
with the switches left True, with plain LoRA, without LoRA and on FSDP. The table the rule reads is regenerated from
verl's source and compared with the committed one.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from wizard.check.lint import check

ROOT = Path(__file__).resolve().parent.parent
M = "actor_rollout_ref.model"
A = "actor_rollout_ref.actor"
BASE = [f"{A}.strategy=megatron", "critic.strategy=megatron", f"{M}.path=Qwen/Qwen2.5-VL-7B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", f"{M}.lora.rank=64", f"{M}.lora.alpha=64", f"{M}.lora.type=vlm_lora",
        f"{M}.lora.freeze_vision_model=False"]


def _script():
    spec = importlib.util.spec_from_file_location("verl_vlm_lora_sync", ROOT / "scripts" / "verl_vlm_lora_sync.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_table_is_what_verls_source_gives():
    committed = json.loads((ROOT / "wizard" / "check" / "data" / "verl_vlm_lora_sync.json").read_text())
    assert _script().build() == committed
    assert set(committed["freeze"]) == {"freeze_vision_model", "freeze_vision_projection", "freeze_language_model"}
    assert committed["merge_default"] is False and committed["type_default"] == "lora"


def _export_fn():
    """verl's MegatronEngine.get_per_tensor_param, compiled from the installed source with its two helpers stubbed."""
    spec = importlib.util.find_spec("verl")
    root = Path(list(spec.submodule_search_locations)[0])
    tree = ast.parse((root / "workers/engine/megatron/transformer_impl.py").read_text(encoding="utf-8"))
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_per_tensor_param")
    namespace = {"load_megatron_model_to_gpu": lambda *a, **k: None,
                 "build_peft_config_for_vllm": lambda lora: {"r": lora.get("rank")}}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "transformer_impl.py", "exec"), namespace)
    return namespace["get_per_tensor_param"]


class _Bridge:
    def __init__(self):
        self.calls = []

    def export_adapter_weights(self, module):
        self.calls.append("adapter")
        return iter([("language_model.layers.0.linear_qkv.adapter.linear_in.weight", None)])

    def export_hf_weights(self, module, conversion_tasks=None, merge_adapter_weights=True):
        self.calls.append("full")
        return iter([("visual.blocks.0.attn.qkv.weight", None)])


def _engine(merge: bool):
    return SimpleNamespace(peft_cls=object(), model_config=SimpleNamespace(lora={"rank": 64, "merge": merge}),
                           module=None, vanilla_bridge=False, bridge=_Bridge(), _qat_enabled=False,
                           _mbridge_export_tasks=lambda: None)


def test_verl_sends_adapters_only_once_the_base_is_synced():
    fn = _export_fn()
    engine = _engine(merge=False)
    first, peft = fn(engine, base_sync_done=False)
    assert [n for n, _ in first] == ["visual.blocks.0.attn.qkv.weight"] and peft == {"r": 64}
    later, _ = fn(engine, base_sync_done=True)
    assert engine.bridge.calls == ["full", "adapter"]
    assert not any(n.startswith("visual.") for n, _ in later)  # the trained tower never reaches the rollout again
    merged = _engine(merge=True)
    out, peft = fn(merged, base_sync_done=True)
    assert merged.bridge.calls == ["full"] and peft is None
    assert [n for n, _ in out] == ["visual.blocks.0.attn.qkv.weight"]


def test_check_warns_and_offers_merge():
    report = check(None, [*BASE, f"{M}.lora.freeze_vision_projection=False"], env={})
    (hit,) = [f for f in report.findings if f.problem.rule == "VI666"]
    assert hit.problem.severity == "warning"
    assert f"{M}.lora.freeze_vision_model" in hit.problem.keys
    assert "vision tower and vision projector" in hit.problem.message
    assert hit.fix.set == {f"{M}.lora.merge": True}


def test_an_unfrozen_language_model_is_the_same_class():
    extra = [f"{M}.lora.freeze_vision_model=True", f"{M}.lora.freeze_language_model=False"]
    assert "VI666" in check(None, [*BASE, *extra], env={}).ids()


@pytest.mark.parametrize("extra", [[f"{M}.lora.merge=True"], [f"{M}.lora.freeze_vision_model=True"],
                                   [f"{M}.lora.type=lora"], [f"{M}.lora.rank=0"],
                                   [f"{A}.strategy=fsdp", "critic.strategy=fsdp"]])
def test_clean_when_the_rollout_gets_what_trains(extra):
    assert "VI666" not in check(None, [*BASE, *extra], env={}).ids()


def test_a_text_model_is_not_concerned():
    assert "VI666" not in check(None, [*BASE, f"{M}.path=Qwen/Qwen2.5-7B-Instruct"], env={}).ids()
