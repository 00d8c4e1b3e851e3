"""VI639 (rollout.quantization the engine's server refuses) and VI645 (FP8 SGLang rollout of a Gated DeltaNet hybrid
without ignored layers): held-out cases R84-01/02 (verl PRs #7186, #7519: mxfp8) and R84-03 (verl PR #6906).

Oracles: verl 0.9.1's own vLLM `_apply_quantization` (loaded from the installed source with ast: importing the server
needs vLLM) run on the values VI639 judges; the committed table regenerated from the three servers' source; verl's
own `build_sglang_fp8_quant_config` and `_matches_ignored_layer` (utils/sglang/sglang_fp8_utils.py, loaded with ast:
its import chain needs the rollout server stack) showing that the FP8 config verl hands SGLang ignores no layer of a
BF16 checkpoint unless SGLANG_FP8_IGNORED_LAYERS names one.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from helpers_scripts import ROOT, regenerated
from wizard.check.lint import check
from wizard.check.rules.rollout_quant import BLOCK, refused

R = "actor_rollout_ref.rollout"
VALUES = ("fp8", "torchao", "ascend", "mxfp8", "awq", "int8", "FP8")
GDN = "Qwen/Qwen3.5-35B-A3B"  # catalogue shape: 30 linear-attention layers, linear_num_value_heads=32


def _verl_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    return Path(list(spec.submodule_search_locations)[0])


def _load(rel: str, names: set[str], scope: dict) -> dict:
    path = _verl_dir() / rel
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]
    assert {n.name for n in nodes} == names, rel
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec"), scope)
    return scope


def _vllm_raises(value: str, qat: bool = False) -> bool:
    fn = _load("workers/rollout/vllm_rollout/vllm_async_server.py", {"_apply_quantization"},
               {"Optional": Any, "logger": SimpleNamespace(info=lambda *a, **k: None)})["_apply_quantization"]
    hf = SimpleNamespace(num_hidden_layers=2)
    config = SimpleNamespace(quantization=value, qat={"enable": qat}, quantization_config_file=None)
    me = SimpleNamespace(config=config, model_config=SimpleNamespace(hf_config=hf))
    try:
        fn(me)
    except ValueError as e:
        return "only support" in str(e)
    except Exception:  # past the check (torchao/QAT helpers need their packages): accepted
        return False
    return False


@pytest.mark.verl
def test_table_is_verls():
    committed = (ROOT / "wizard" / "check" / "data" / "verl_rollout_quantization.json").read_text("utf-8")
    assert regenerated("verl_rollout_quantization") == committed


@pytest.mark.verl
def test_vllm_predicate_matches_verls_function():
    for value in VALUES:
        assert refused("vllm", value) == _vllm_raises(value), value


def _hits(rule: str, *overrides: str, **kw) -> list:
    report = check(None, list(overrides), **kw)
    return [f.problem for f in report.findings if f.problem.rule == rule]


@pytest.mark.verl
@pytest.mark.parametrize("engine,value", [("sglang", "mxfp8"), ("sglang", "torchao"), ("vllm", "mxfp8"),
                                          ("vllm", "awq"), ("trtllm", "int8")])
def test_vi639_fires(engine, value):
    [hit] = _hits("VI639", f"{R}.name={engine}", f"{R}.quantization={value}")
    assert hit.severity == "error" and f"{R}.quantization" in hit.keys and value in hit.message


@pytest.mark.verl
def test_vi639_reward_model_rollout():
    assert _hits("VI639", "reward.reward_model.enable=True", "reward.reward_model.model_path=Qwen/Qwen2.5-0.5B",
                 "reward.reward_model.rollout.name=sglang", "reward.reward_model.rollout.quantization=torchao")


@pytest.mark.verl
@pytest.mark.parametrize("engine,value", [("sglang", "fp8"), ("vllm", "torchao"), ("vllm", "fp8"), ("trtllm", "fp8"),
                                          ("sglang", "null")])
def test_vi639_controls(engine, value):
    assert not _hits("VI639", f"{R}.name={engine}", f"{R}.quantization={value}")


def test_qat_bypass_only_where_verl_has_it():
    assert not refused("vllm", "mxfp8", qat=True)
    assert refused("sglang", "mxfp8", qat=True)


# ---- VI645 -------------------------------------------------------------------------------------------------------

def _sglang_fp8() -> dict:
    scope: dict = {"Any": Any, "Iterable": Iterable, "os": os, "re": re, "torch": SimpleNamespace(bfloat16=None)}
    _load("utils/fp8_utils.py", {"FP8QuantizerHelper"}, scope)
    names = {"_get_config_value", "_normalize_ignored_layers", "_dedupe_layers", "_get_ignored_layers_from_env",
             "get_sglang_fp8_ignored_layers", "_matches_ignored_layer", "build_sglang_fp8_quant_config",
             "SGLangFP8QuantizerHelper"}
    return _load("utils/sglang/sglang_fp8_utils.py", names, scope)


@pytest.mark.verl
def test_verl_sends_sglang_no_ignored_layers_unless_told(monkeypatch):
    verl = _sglang_fp8()
    monkeypatch.delenv("SGLANG_FP8_IGNORED_LAYERS", raising=False)
    config = verl["build_sglang_fp8_quant_config"](SimpleNamespace())  # a BF16 checkpoint: no quantization_config
    assert config["weight_block_size"] == [BLOCK, BLOCK] and "ignored_layers" not in config
    monkeypatch.setenv("SGLANG_FP8_IGNORED_LAYERS", "linear_attn")  # the fix the finding names
    config = verl["build_sglang_fp8_quant_config"](SimpleNamespace())
    assert config["ignored_layers"] == ["linear_attn"]
    # verl's own matcher (the rules SGLang applies too) then covers every linear-attention projection
    for param in ("model.layers.0.linear_attn.in_proj_ba.weight", "model.layers.0.linear_attn.out_proj.weight"):
        assert verl["_matches_ignored_layer"](param, "linear_attn")
    assert not verl["_matches_ignored_layer"]("model.layers.3.self_attn.o_proj.weight", "linear_attn")


def _gdn(*extra: str) -> list[str]:
    return [f"actor_rollout_ref.model.path={GDN}", f"{R}.name=sglang", f"{R}.quantization=fp8",
            "trainer.n_gpus_per_node=8", *extra]


@pytest.mark.verl
def test_vi645_fires():
    [hit] = _hits("VI645", *_gdn(f"{R}.tensor_model_parallel_size=4"))
    assert hit.severity == "error" and "32 / 4 = 8" in hit.message and "SGLANG_FP8_IGNORED_LAYERS" in hit.hint
    # SGLang's tp_size is TP x DP
    assert _hits("VI645", *_gdn(f"{R}.tensor_model_parallel_size=1", f"{R}.data_parallel_size=2"))


@pytest.mark.verl
def test_vi645_controls(tmp_path):
    assert not _hits("VI645", *_gdn(f"{R}.tensor_model_parallel_size=1"))  # nothing is split
    assert not _hits("VI645", *_gdn(f"{R}.tensor_model_parallel_size=4"),
                     env={"SGLANG_FP8_IGNORED_LAYERS": "linear_attn"})
    script = tmp_path / "run.sh"
    script.write_text("export SGLANG_FP8_IGNORED_LAYERS=linear_attn\npython3 -m verl.trainer.main_ppo "
                      + " ".join(_gdn(f"{R}.tensor_model_parallel_size=4")) + "\n")
    assert not _hits("VI645", str(script))
    # a dense model, or vLLM, or no FP8
    assert not _hits("VI645", "actor_rollout_ref.model.path=Qwen/Qwen3-8B", f"{R}.name=sglang",
                     f"{R}.quantization=fp8", f"{R}.tensor_model_parallel_size=4")
    assert not _hits("VI645", f"actor_rollout_ref.model.path={GDN}", f"{R}.name=vllm", f"{R}.quantization=fp8",
                     f"{R}.tensor_model_parallel_size=4")
    assert not _hits("VI645", f"actor_rollout_ref.model.path={GDN}", f"{R}.name=sglang",
                     f"{R}.tensor_model_parallel_size=4")
