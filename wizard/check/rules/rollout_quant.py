"""Rollout quantization the rollout server refuses at launch (verl 0.9.1, paths under site-packages/verl).

- VI639 (error): rollout.quantization set to a value the chosen engine's server does not accept. RolloutConfig types
  the key as any string (workers/config/rollout.py:261) and nothing checks it at config time; each server checks it
  only when it launches, inside the rollout worker, after the GPUs are booked: SGLang accepts only "fp8"
  (workers/rollout/sglang_rollout/async_sglang_server.py:302-312, `ValueError("Currently only support fp8
  quantization")`), TensorRT-LLM only "fp8" (trtllm_rollout/trtllm_async_server.py:209-222), vLLM "fp8", "torchao"
  and "ascend" (vllm_rollout/vllm_async_server.py:1238-1242), except that with rollout.qat.enable vLLM takes its
  quantization from the QAT config and never reads the key (:1215-1236). Real cases (round 84): the MXFP8 rollout of
  the open verl PRs #7186 (SGLang) and #7519 (vLLM), `actor_rollout_ref.rollout.quantization=mxfp8`, dies at launch
  on 0.9.1. The table comes from verl's source: wizard/check/data/verl_rollout_quantization.json, written by
  scripts/verl_rollout_quantization.py (ast over the three servers).

- VI645 (error): an FP8 SGLang rollout of a Gated DeltaNet hybrid model (config.json layer_types with
  "linear_attention": Qwen3.5, Qwen3-Next) at an SGLang tensor-parallel size above 1, with no ignored layers. verl
  builds SGLang's FP8 config as 128×128 blocks and adds ignored layers only from the model's own
  quantization_config (ignored_layers / modules_to_not_convert) or the SGLANG_FP8_IGNORED_LAYERS environment variable
  (utils/sglang/sglang_fp8_utils.py:61-70, 99-115, called with the HF config alone at async_sglang_server.py:310);
  SGLang's tp_size is rollout TP × DP (:313, :322). The linear-attention in_proj_b / in_proj_a (in_proj_ba) outputs
  are one column per value head, linear_num_value_heads wide (32 on Qwen3.5-35B-A3B): split over TP > 1 a rank's
  slice is narrower than one 128-wide FP8 block, and the block-wise FP8 layer refuses it while the rollout server
  loads the model (verl PR #6906, which made verl honour the ignored layers; docs/low_precision/fp8.md gives
  `SGLANG_FP8_IGNORED_LAYERS=linear_attn`). Only a model shape with its own sizes (catalogue or local config.json)
  is judged.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from wizard.check.rules.context import R, Ctx, Facts

ROLLOUTS = ("actor_rollout_ref.rollout", "reward.reward_model.rollout")
BLOCK = 128  # weight_block_size of verl's SGLang FP8 config (sglang_fp8_utils.py:101-106)
IGNORED_ENV = "SGLANG_FP8_IGNORED_LAYERS"  # sglang_fp8_utils.py:61-62


@cache
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_rollout_quantization.json").read_text(encoding="utf-8")
    return json.loads(text)


def refused(engine: str, value: Any, qat: bool = False) -> bool:
    """Whether verl's server for this engine raises at launch on rollout.quantization=value."""
    server = table()["servers"].get(engine)
    if server is None or value is None or (qat and server["qat_bypass"]):
        return False
    return str(value) not in server["accepted"]


def rule_rollout_quantization(c: Ctx, f: Facts) -> None:
    """VI639."""
    for sec in ROLLOUTS:
        name, key = f"{sec}.name", f"{sec}.quantization"
        if c.unknown(name, key) or c.v(key) is None:
            continue
        engine, value = str(c.v(name)), c.v(key)
        qat = c.v(f"{sec}.qat.enable") is True
        if not refused(engine, value, qat):
            continue
        server = table()["servers"][engine]
        accepted = ", ".join(server["accepted"])
        c.add("VI639", "error", (key, name),
              f"{key}={value} with {name}={engine}: verl's {engine} server accepts only {accepted} and raises "
              f"ValueError when it launches ({server['file']}:{server['line']}), inside the rollout worker after the "
              "GPUs are booked; the config does not check the value",
              f"set {key} to {accepted.replace(', ', ' or ')}, or to null (no rollout quantization)")


def _ignored_env(c: Ctx) -> bool:
    ex = c.src.extraction
    exported = dict(ex.temp_env) if ex is not None and ex.temp_env else {}
    runtime = c.v("ray_kwargs.ray_init.runtime_env.env_vars")
    runtime = runtime if isinstance(runtime, dict) else {}
    return any(str(d.get(IGNORED_ENV) or "").strip() for d in (exported, runtime, c.env))


def sglang_tp(c: Ctx) -> int | None:
    """The tp_size verl starts SGLang with: rollout TP × DP (async_sglang_server.py:313)."""
    tp, dp = c.int(f"{R}.tensor_model_parallel_size"), c.int(f"{R}.data_parallel_size")
    return None if tp is None else tp * (dp or 1)


def gdn_misfit(shape: Any, tp: int) -> int | None:
    """The per-rank width of the linear-attention b/a projections at SGLang tp_size `tp` when it is no whole block."""
    heads = getattr(shape, "linear_v_heads", 0)
    if tp <= 1 or not getattr(shape, "linear_layers", 0) or not heads or heads % tp:
        return None
    width = heads // tp
    return width if width % BLOCK else None


def rule_sglang_fp8_linear_attention(c: Ctx, f: Facts, shape: Any) -> None:
    """VI645."""
    if shape is None or shape.source not in ("catalogue", "local") or c.unknown(f"{R}.name", f"{R}.quantization") \
            or c.v(f"{R}.name") != "sglang" or c.v(f"{R}.quantization") != "fp8" or _ignored_env(c):
        return
    tp = sglang_tp(c)
    width = gdn_misfit(shape, tp or 1)
    if width is None:
        return
    c.add("VI645", "error", (f"{R}.quantization", f"{R}.tensor_model_parallel_size"),
          f"{R}.quantization=fp8 with {R}.name=sglang on {shape.name}, a Gated DeltaNet hybrid "
          f"({shape.linear_layers} linear-attention layers), at SGLang tp_size {tp}: each rank's slice of the "
          f"linear_attn b/a projections is {shape.linear_v_heads} / {tp} = {width} columns, not a whole {BLOCK}-wide "
          "FP8 block, and verl adds no ignored layers of its own (sglang_fp8_utils.py:99-115), so SGLang refuses the "
          "layer while the rollout server loads the model (verl PR #6906)",
          f"export {IGNORED_ENV}=linear_attn before the launch (docs/low_precision/fp8.md), or run the rollout "
          f"at tensor_model_parallel_size=1, or set {R}.quantization=null")
