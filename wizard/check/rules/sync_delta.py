"""Checkpoint-engine settings verl 0.9.1 refuses only once the GPUs are booked (paths under site-packages/verl).

- VI454 (error): checkpoint_engine.backend=delta_sharded with a rollout its delta consumer refuses. Nothing checks the
  pairing at config time (CheckpointEngineConfig takes any backend string, workers/config/rollout.py:124-141):
  * a rollout engine with no delta consumer (rollout.name not sglang / vllm, e.g. trtllm): every standalone
    rollout's CheckpointEngineWorker raises NotImplementedError "has no delta weight consumer" at init
    (checkpoint_engine/base.py:327-331). Judged where standalone replicas sync through the checkpoint engine: the
    one-step-off and fully async entry points and trainer.v1.trainer_mode=separate_async.
  * vLLM: the server's _preprocess_engine_kwargs refuses the delta sync at launch, every vLLM server of the run
    (vllm_rollout/vllm_async_server.py:292 -> 1142-1195): engine_kwargs.delta_sharded.verify_every > 0 (:1151-1152),
    rollout.data_parallel_size > 1 (:1153-1154), PD disaggregation (rollout.disaggregation.enabled, :1155-1156),
    engine_kwargs.vllm data_parallel_size / pipeline_parallel_size > 1 (:1160-1163), an engine_kwargs.vllm
    tensor_parallel_size other than rollout.tensor_model_parallel_size (:1165-1169), and for an MoE model an
    engine_kwargs.vllm.moe_backend other than auto / triton (:1173-1176) or enable_eplb (:1178-1179), and a
    weight_transfer_config backend other than verl's verl_delta_ipc (:1189-1194).
  * SGLang with PD disaggregation: the delta apply asserts "delta checkpoint engine does not support PD
    disaggregation" at the first delta sync (sglang_rollout/sglang_rollout.py:403), in the disaggregated runs above.
  Real cases (round 102): PR #7181's verify_every knob, PR #7227's vLLM delta consumer limits (DP > 1), PR #6243's
  vLLM PD rollout, and verl-omni PR #613 (verl's gate keeping trtllm off the delta sync), each set on verl's own
  delta_sharded one-step-off example.
- VI455 (error): checkpoint_engine.engine_kwargs.<backend> that the backend's constructor refuses. verl builds the
  engine with `CheckpointEngineRegistry.new(backend, ..., **engine_kwargs[backend])` in every actor worker
  (workers/engine_workers.py:680-687, with bucket_size and is_master) and every standalone rollout's
  CheckpointEngineWorker (checkpoint_engine/base.py:332-339, with bucket_size): a key the engine's __init__ does not
  take raises TypeError "unexpected keyword argument" (e.g. nccl_parallel's `phase` from the RFC verl#7262 under
  engine_kwargs.nccl), bucket_size / is_master raise "got multiple values" (the bucket is
  checkpoint_engine.update_weights_bucket_megabytes), and delta_sharded asserts encoding == "indices"
  (checkpoint_engine/delta_checkpoint_engine.py:402) although verl's own delta example comment also names
  "deltas". Only engine_kwargs[backend] is read, so other backends' entries are not judged.

The tables come from verl's source: wizard/check/data/verl_sync_delta.json, written by scripts/verl_sync_delta.py
(tests/test_sync_delta.py regenerates and compares it, and calls verl's own constructors on CPU as the oracle).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import M, R, Ctx, Facts, model_shape
from wizard.check.rules.modes import v1_mode

BACKEND = f"{R}.checkpoint_engine.backend"
EK = f"{R}.checkpoint_engine.engine_kwargs"
CUSTOM = f"{R}.checkpoint_engine.custom_backend_module"
DELTA = "delta_sharded"
VLLM_EK = f"{R}.engine_kwargs.vllm"
PD = f"{R}.disaggregation.enabled"
SAFE_MOE = (None, "auto", "triton")


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_sync_delta.json").read_text(encoding="utf-8")
    return json.loads(text)


def _guard(tag: str) -> str:
    return table()["delta"]["vllm_guards"][tag]["at"]


def disaggregated(c: Ctx) -> bool:
    """Whether standalone rollout replicas sync through the configured checkpoint engine."""
    return getattr(c.src, "entry", "ppo") in ("one_step_off", "fully_async") or v1_mode(c) == "separate_async"


def _kwargs(c: Ctx, backend: str) -> dict[str, tuple[str, Any]]:
    """kwarg name -> (the flat key, its value) of checkpoint_engine.engine_kwargs.<backend>."""
    prefix = f"{EK}.{backend}."
    out: dict[str, tuple[str, Any]] = {}
    for key in list(c.res.flat):
        if key.startswith(prefix):
            name = key[len(prefix):].split(".", 1)[0]
            out.setdefault(name, (prefix + name, c.v(prefix + name, c.v(key))))
    return out


def _positive(value: Any) -> bool:
    try:
        return not isinstance(value, bool) and int(value) > 0
    except (TypeError, ValueError):
        return False


def _vllm_refusals(c: Ctx) -> list[tuple[tuple[str, ...], str, str]]:
    """(keys, what, where) of each guard of the vLLM server's delta_sharded block the config trips."""
    out: list[tuple[tuple[str, ...], str, str]] = []
    verify = f"{EK}.{DELTA}.verify_every"
    if _positive(c.v(verify)):
        out.append(((verify,), f"{verify}={c.v(verify)} (vLLM has no verify sweep; SGLang does)", _guard("verify_every")))
    dp = c.int(f"{R}.data_parallel_size")
    if dp is not None and dp != 1:
        out.append(((f"{R}.data_parallel_size",), f"{R}.data_parallel_size={dp}", _guard("data_parallel_size")))
    if c.v(PD) is True:
        out.append(((PD,), f"{PD}=True (prefill-decode disaggregated vLLM)", _guard("disaggregation")))
    for name in ("data_parallel_size", "pipeline_parallel_size"):
        value = c.int(f"{VLLM_EK}.{name}")
        if value is not None and value > 1:
            out.append(((f"{VLLM_EK}.{name}",), f"{VLLM_EK}.{name}={value}", _guard(f"engine_{name}")))
    tp, rtp = c.int(f"{VLLM_EK}.tensor_parallel_size"), c.int(f"{R}.tensor_model_parallel_size")
    if tp is not None and rtp is not None and tp != rtp:
        out.append(((f"{VLLM_EK}.tensor_parallel_size", f"{R}.tensor_model_parallel_size"),
                    f"{VLLM_EK}.tensor_parallel_size={tp} ≠ {R}.tensor_model_parallel_size={rtp}",
                    _guard("engine_tensor_parallel_size")))
    moe, eplb = c.v(f"{VLLM_EK}.moe_backend"), c.v(f"{VLLM_EK}.enable_eplb")
    if (moe not in SAFE_MOE or eplb is True) and getattr(model_shape(c, f"{M}.path")[0], "experts", 0):
        if moe not in SAFE_MOE:
            out.append(((f"{VLLM_EK}.moe_backend",), f"{VLLM_EK}.moe_backend={moe!r} for the MoE {c.v(f'{M}.path')}",
                        _guard("moe_backend")))
        if eplb is True:
            out.append(((f"{VLLM_EK}.enable_eplb",), f"{VLLM_EK}.enable_eplb=True for an MoE model",
                        _guard("enable_eplb")))
    wtb = c.v(f"{VLLM_EK}.weight_transfer_config.backend")
    ours = table()["delta"]["vllm_weight_transfer_backend"]
    if isinstance(wtb, str) and wtb != ours:
        out.append(((f"{VLLM_EK}.weight_transfer_config.backend",),
                    f"{VLLM_EK}.weight_transfer_config.backend={wtb!r} (verl installs {ours!r})",
                    _guard("weight_transfer_backend")))
    return out


def rule_sync_delta_consumer(c: Ctx, f: Facts) -> None:
    """VI454."""
    if c.unknown(BACKEND, f"{R}.name") or c.v(BACKEND) != DELTA:
        return
    name, d = c.v(f"{R}.name"), table()["delta"]
    if name not in d["consumers"]:
        if disaggregated(c):
            c.add("VI454", "error", (BACKEND, f"{R}.name"),
                  f"{BACKEND}={DELTA} with {R}.name={name}: only {' and '.join(d['consumers'])} have a delta weight "
                  f"consumer, so every standalone rollout worker raises NotImplementedError at init "
                  f"({d['consumer_gate']}), after the GPUs are booked",
                  f"use {R}.name=sglang or vllm, or {BACKEND}=nccl (full-weight broadcast)",
                  fix=Fix(set={BACKEND: "nccl"}))
        return
    if name == "vllm":
        for keys, what, where in _vllm_refusals(c):
            c.add("VI454", "error", (BACKEND, *keys),
                  f"{BACKEND}={DELTA} with a vLLM rollout and {what}: the vLLM server refuses the delta weight sync "
                  f"at launch ({where}), after the GPUs are booked",
                  f"drop that setting for the delta sync, or use {BACKEND}=nccl (full-weight broadcast)"
                  + (", or an SGLang rollout" if "verify_every" in keys[0] else ""))
    elif name == "sglang" and c.v(PD) is True and disaggregated(c):
        c.add("VI454", "error", (BACKEND, PD),
              f"{BACKEND}={DELTA} with {PD}=True: SGLang's delta apply asserts 'delta checkpoint engine does not "
              f"support PD disaggregation' at the first weight sync ({d['sglang_pd_assert']})",
              f"turn PD disaggregation off, or use {BACKEND}=nccl")


def rule_sync_engine_kwargs(c: Ctx, f: Facts) -> None:
    """VI455."""
    backend = c.v(BACKEND)
    engines = table()["engines"]
    if c.unknown(BACKEND, CUSTOM) or c.v(CUSTOM) or not isinstance(backend, str) or backend not in engines:
        return
    passed = sorted({k for call in table()["new"] for k in call["passed"]})
    where = ", ".join(call["at"] for call in table()["new"])
    params, at = engines[backend]["params"], ", ".join(engines[backend]["at"])
    for name, (key, value) in sorted(_kwargs(c, backend).items()):
        if name in passed:
            c.add("VI455", "error", (key,),
                  f"{key}={value!r}: verl passes {name} to the {backend} engine itself ({where}), so the engine's "
                  f"constructor gets it twice and raises TypeError 'got multiple values' at worker init",
                  f"remove {key}" + ("; size the bucket with checkpoint_engine.update_weights_bucket_megabytes"
                                     if name == "bucket_size" else ""),
                  fix=Fix(delete=[key]))
        elif name not in params:
            c.add("VI455", "error", (key,),
                  f"{key}={value!r}: the {backend} engine's constructor takes no {name} ({at}: "
                  f"{', '.join(p for p in params if p not in passed)}), so CheckpointEngineRegistry.new raises "
                  f"TypeError 'unexpected keyword argument' in every actor worker at init ({where})",
                  f"remove {key}, or set a {backend} engine argument it takes", fix=Fix(delete=[key]))
        elif backend == DELTA and name == "encoding" and value not in table()["delta"]["encodings"]:
            allowed = table()["delta"]["encodings"]
            c.add("VI455", "error", (key,),
                  f"{key}={value!r}: the delta_sharded engine asserts encoding in {allowed} "
                  f"({table()['delta']['encoding_assert']}) when each actor worker builds it",
                  f"set {key}={allowed[0]}", fix=Fix(set={key: allowed[0]}))
