"""VI600 / VI612: vLLM arguments under engine_kwargs.vllm that verl 0.9.1 already sets in its own args literal.

The oracle is verl's own code: the `args = {...}` literal of vLLMHttpServer.launch_server
(workers/rollout/vllm_rollout/vllm_async_server.py:325-350), evaluated with a rollout config and the user's
engine_kwargs, gives vLLM the engine_kwargs value for every key of the table; verl's own _apply_quantization
(:1209-1270), run on CPU, derives nothing from an engine_kwargs quantization. The table regenerates unchanged
(tests/test_router_replay.py::test_the_tables_are_verls_source covers verl_vllm_server_args.json, and this file too).
Real cases: round 74 (public launchers: rollout.max_model_len=1024 with +engine_kwargs.vllm.max_model_len=2048,
engine_kwargs.vllm.gpu_memory_utilization / enforce_eager / trust_remote_code, engine_kwargs.vllm.quantization=fp8
and =bitsandbytes).
"""

from __future__ import annotations

import ast
import json
import os
from types import SimpleNamespace
from typing import Any

import pytest

from wizard.check.lint import check

R = "actor_rollout_ref.rollout"
EK = f"{R}.engine_kwargs.vllm"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", f"{R}.name=vllm",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{R}.n=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=4",
        f"{R}.tensor_model_parallel_size=2", f"{R}.gpu_memory_utilization=0.5", f"{R}.max_model_len=1024"]


def _hits(*extra: str, rules: tuple[str, ...] = ("VI600", "VI612")):
    return [f for f in check(None, [*BASE, *extra]).findings if f.problem.rule in rules]


class _Config(SimpleNamespace):
    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)


class _Names(dict):
    def __missing__(self, key: str) -> Any:
        return None


def _server() -> ast.Module:
    from helpers_verl import verl_tree

    return verl_tree("workers/rollout/vllm_rollout/vllm_async_server.py")


def _verl_args(engine_kwargs: dict[str, Any]) -> dict[str, Any]:
    """verl's own `args = {...}` literal from launch_server, evaluated with a rollout config and engine_kwargs."""
    from helpers_verl import class_method

    fn = class_method(_server(), "vLLMHttpServer", "launch_server")
    lit = next(n.value for n in ast.walk(fn) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "args"
               and isinstance(n.value, ast.Dict))
    cfg = _Config(dtype="bfloat16", load_format="dummy", max_model_len=1024, max_num_seqs=1024,
                  enable_chunked_prefill=True, max_num_batched_tokens=8192, enable_prefix_caching=True,
                  enable_sleep_mode=True, logprobs_mode="processed_logprobs", enforce_eager=False,
                  gpu_memory_utilization=0.5, disable_log_stats=True, tensor_model_parallel_size=2, seed=0,
                  scheduling_policy="fcfs")
    me = SimpleNamespace(config=cfg, model_config=SimpleNamespace(trust_remote_code=False), replica_rank=0,
                         _get_worker_extension_cls=lambda: "verl.workers.rollout.vllm_rollout.utils.Ext")
    names = _Names(self=me, json=json, engine_kwargs=engine_kwargs, quantization=None, hf_overrides={},
                   override_generation_config={}, compilation_config="{}")
    return eval(compile(ast.Expression(lit), "vllm_async_server.py", "eval"), {}, names)  # noqa: S307 - verl's own


@pytest.mark.verl
def test_verls_literal_gives_vllm_the_engine_kwargs_value_for_every_table_key():
    from wizard.check.rules.vllm_args import table

    literal = table()["replaced_by_engine_kwargs"]
    assert {"max_model_len", "gpu_memory_utilization", "enforce_eager", "quantization"} <= set(literal)
    for arg in literal:
        planted = object()
        assert _verl_args({arg: planted})[arg] is planted, arg
    args = _verl_args({"max_model_len": 2048})  # R74-01: rollout.max_model_len=1024 beside engine_kwargs 2048
    assert args["max_model_len"] == 2048  # vLLM's; verl's max_tokens bound keeps 1024 (:593)
    assert "compilation_config" in table()["popped"]  # merged by verl itself (:307), not replaced


@pytest.mark.verl
def test_verls_apply_quantization_ignores_an_engine_kwargs_quantization(monkeypatch):
    """verl's own _apply_quantization, run on CPU: with rollout.quantization unset it returns no quantization, no
    hf_overrides and never enables the FP8 path, whatever engine_kwargs.vllm.quantization says; with
    rollout.quantization=fp8 it sets the block-quant config and the patches."""
    from helpers_verl import class_method

    fn = class_method(_server(), "vLLMHttpServer", "_apply_quantization")
    fn.returns = None
    patched: list[str] = []
    scope: dict[str, Any] = {"Optional": Any, "os": os, "logger": SimpleNamespace(info=print),
                             "apply_vllm_quant_patches": lambda: patched.append("fp8")}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "vllm_async_server.py", "exec"), scope)  # noqa: S102
    monkeypatch.delenv("VERL_VLLM_FP8_QUANT_ENABLED", raising=False)

    def me(quant):
        return SimpleNamespace(
            config=_Config(quantization=quant, quantization_config_file=None, qat={},
                           engine_kwargs={"vllm": {"quantization": "fp8"}}),
            model_config=SimpleNamespace(hf_config=SimpleNamespace(num_hidden_layers=2)))

    assert scope["_apply_quantization"](me(None)) == (None, {})
    assert patched == [] and "VERL_VLLM_FP8_QUANT_ENABLED" not in os.environ
    quant, overrides = scope["_apply_quantization"](me("fp8"))
    assert quant == "fp8" and overrides["quantization_config"]["weight_block_size"] == [128, 128]
    assert patched == ["fp8"] and os.environ["VERL_VLLM_FP8_QUANT_ENABLED"] == "1"
    with pytest.raises(ValueError):  # verl refuses this on its own key (:1240-1242), not through engine_kwargs
        scope["_apply_quantization"](me("bitsandbytes"))


def test_max_model_len_in_engine_kwargs_unlike_verls_key_is_flagged():  # R74-01
    hits = _hits(f"+{EK}.max_model_len=2048")
    assert [(h.problem.severity, h.problem.keys) for h in hits] == [("warning", (f"{EK}.max_model_len", f"{R}.max_model_len"))]
    assert "2048" in hits[0].problem.message and "1024" in hits[0].problem.message
    assert hits[0].fix.set == {f"{R}.max_model_len": 2048} and hits[0].fix.delete == [f"{EK}.max_model_len"]


@pytest.mark.parametrize("arg,value,own", [("gpu_memory_utilization", "0.85", f"{R}.gpu_memory_utilization"),
                                           ("enforce_eager", "True", f"{R}.enforce_eager"),
                                           ("max_num_seqs", "64", f"{R}.max_num_seqs"),
                                           ("trust_remote_code", "True", "actor_rollout_ref.model.trust_remote_code")])
def test_other_verl_keys_in_engine_kwargs_are_flagged(arg, value, own):  # R74-02, R74-03
    hits = _hits(f"+{EK}.{arg}={value}")
    assert [(h.problem.severity, h.problem.keys) for h in hits] == [("warning", (f"{EK}.{arg}", own))]


def test_repeating_verls_value_is_info_and_tp_unlike_verls_is_an_error():
    assert [h.problem.severity for h in _hits(f"+{EK}.gpu_memory_utilization=0.5")] == ["info"]
    assert [h.problem.severity for h in _hits(f"+{EK}.tensor_parallel_size=1")] == ["error"]
    assert [h.problem.severity for h in _hits(f"+{EK}.worker_extension_cls=my.Ext")] == ["error"]


@pytest.mark.parametrize("value,fix", [("fp8", True), ("bitsandbytes", False)])
def test_quantization_through_engine_kwargs_is_an_error(value, fix):  # R74-04, R74-05
    hits = _hits(f"+{EK}.quantization={value}")
    assert [(h.problem.rule, h.problem.severity) for h in hits] == [("VI612", "error")]
    assert (hits[0].fix is not None) is fix


def test_keys_verl_does_not_set_stay_clean():  # control R74-C1
    assert _hits(f"+{EK}.kv_cache_dtype=fp8", f"+{EK}.mm_processor_cache_gb=0", f"{R}.quantization=fp8",
                 f"+{EK}.compilation_config.cudagraph_mode=FULL_DECODE_ONLY",
                 f"+{EK}.hf_overrides.rope_theta=1000000") == []


def test_another_engine_is_not_read():
    assert _hits(f"{R}.name=sglang", f"+{EK}.max_model_len=2048") == []


LIMIT = f"{EK}.limit_mm_per_prompt"


@pytest.mark.verl
def test_verls_limit_images_write_replaces_the_whole_engine_kwargs_limit():
    """verl's own `if self.config.get("limit_images"): engine_kwargs["limit_mm_per_prompt"] = ...` (:289-290),
    executed on the user's engine_kwargs: the video limit is gone; without limit_images the user's dict stays."""
    from helpers_verl import class_method

    from wizard.check.rules.vllm_args import table

    entry = table()["written_into_engine_kwargs"]["limit_mm_per_prompt"]
    fn = class_method(_server(), "vLLMHttpServer", "launch_server")
    stmt = next(n for n in ast.walk(fn) if isinstance(n, ast.If) and n.lineno == entry["line"] - 1)
    code = compile(ast.Module(body=[stmt], type_ignores=[]), "vllm_async_server.py", "exec")
    for limit, want in ((2, {"image": 2}), (None, {"image": 5, "video": 1})):
        engine_kwargs = {"limit_mm_per_prompt": {"image": 5, "video": 1}}
        exec(code, {}, {"self": SimpleNamespace(config=_Config(limit_images=limit)),  # noqa: S102 - verl's own
                        "engine_kwargs": engine_kwargs})
        assert engine_kwargs["limit_mm_per_prompt"] == want


def test_limit_images_beside_an_engine_kwargs_limit_is_flagged():
    hits = _hits(f"+{R}.limit_images=2", f"+{LIMIT}.image=5", f"+{LIMIT}.video=1", rules=("VI615",))
    assert [(h.problem.severity, h.problem.keys) for h in hits] == [("warning", (LIMIT, f"{R}.limit_images"))]
    assert "video" in hits[0].problem.message and f"{R}.limit_images" in hits[0].problem.hint


@pytest.mark.parametrize("extra", [(f"+{LIMIT}.image=5", f"+{LIMIT}.video=0"),  # verl's VL example spelling
                                   (f"+{R}.limit_images=2",),
                                   (f"+{R}.limit_images=2", f"+{LIMIT}.image=2")])  # the same limit twice
def test_one_limit_or_the_same_limit_stays_clean(extra):
    assert _hits(*extra, rules=("VI615",)) == []
