"""vLLM engine arguments set under engine_kwargs.vllm that verl already sets itself, in verl 0.9.1 (paths under
site-packages/verl).

vLLMHttpServer.launch_server (workers/rollout/vllm_rollout/vllm_async_server.py:277) reads the rollout's
`engine_kwargs.vllm` (:287-288), pops compilation_config, which it merges itself (:307-322), and builds
`args = {...}` (:325-350) from verl's own keys: dtype, load_format, max_model_len, max_num_seqs,
enable_chunked_prefill, max_num_batched_tokens, enable_prefix_caching, enforce_eager, gpu_memory_utilization,
disable_log_stats, tensor_parallel_size (the rollout's), trust_remote_code (the model's), the quantization
_apply_quantization derives from rollout.quantization (:305, :1209-1270), verl's worker extension and executor
(:329-330). `**engine_kwargs` is spread last in that literal (:349), so a repeated key silently replaces verl's
value, and nothing checks it before vLLM starts inside the rollout worker, after the GPUs are booked: verl's own
logic keeps using its key (max_tokens = rollout.max_model_len - prompt at :593, the chunked-prefill floor at
:1113-1119, every memory estimate built on rollout.gpu_memory_utilization) while vLLM runs with the other value.

- VI600 (warning; error for tensor_parallel_size unlike the rollout's TP, and for verl's worker extension /
  executor, which carry verl's weight sync, utils.py:248): a key of verl's literal under engine_kwargs.vllm.
  info when it only repeats verl's value. Real cases (round 74): public launchers with rollout.max_model_len=1024
  and +engine_kwargs.vllm.max_model_len=2048; +engine_kwargs.vllm.gpu_memory_utilization beside
  rollout.gpu_memory_utilization; +engine_kwargs.vllm.enforce_eager / trust_remote_code / max_model_len.
- VI612 (error): engine_kwargs.vllm.quantization. verl's quantization path reads only rollout.quantization
  (:1211): for fp8 it sets the 128x128 block-quant hf_overrides, applies the FP8 weight-loading patches and sets
  VERL_VLLM_FP8_QUANT_ENABLED for the worker processes (:1244-1261, vllm_rollout/utils.py:178-179), and it refuses
  anything but fp8 / torchao / ascend (:1240-1242). A quantization that arrives through engine_kwargs skips all of
  it: vLLM quantizes the checkpoint at load, and verl's bf16 weight sync of every step goes into the quantized
  layers without verl's on-the-fly quantization (fp8), or with no path at all (bitsandbytes). Real cases (round
  74): notes moving `quantization=fp8` to `engine_kwargs.vllm.quantization=fp8`, a launcher with
  rollout.quantization=null, load_format=bitsandbytes and +engine_kwargs.vllm.quantization=bitsandbytes.

The keys, lines and expressions come from verl's source: wizard/check/data/verl_vllm_server_args.json
(`replaced_by_engine_kwargs`, `popped`), written by scripts/verl_vllm_server_args.py (ast over launch_server).
"""

from __future__ import annotations

from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts
from wizard.check.rules.vllm_args import table

ROLLOUTS = {"actor_rollout_ref.rollout": "actor_rollout_ref.model", "reward.reward_model.rollout": None}
MACHINERY = ("worker_extension_cls", "distributed_executor_backend")  # verl's weight sync runs in its extension
VERL_QUANT = ("fp8", "torchao")  # rollout.quantization values _apply_quantization takes on GPUs (:1240; ascend: NPU)


def _where(line: int) -> str:
    return f"vllm_async_server.py:{line}"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return a == b


def _own(section: str, source: str | None) -> str | None:
    """The user-facing key verl builds the vLLM argument from, or None."""
    kind, _, name = (source or "").partition(".")
    if kind == "rollout":
        return f"{section}.{name}"
    model = ROLLOUTS.get(section)
    return f"{model}.{name}" if kind == "model" and model else None


def _quantization(c: Ctx, section: str, key: str, value: Any) -> None:
    own = f"{section}.quantization"
    mine = c.v(own)
    spread = _where(table()["spread_line"])
    movable = value in VERL_QUANT and mine in (None, value)
    c.add("VI612", "error", (key, own),
          f"{key}={value!r} reaches vLLM by the **engine_kwargs spread ({spread}) while {own}={mine!r}: verl's "
          f"quantization path reads only {own} (vllm_async_server.py:1211), so its block-quant hf_overrides, FP8 "
          "weight-loading patches and VERL_VLLM_FP8_QUANT_ENABLED (:1244-1261, utils.py:178-179) are skipped and the "
          "bf16 weights verl syncs every step go into quantized layers without its on-the-fly quantization",
          f"set {own}={value} and remove {key}" if value in VERL_QUANT else
          f"remove {key}: verl's rollout quantizes only with {own} in fp8/torchao (vllm_async_server.py:1240-1242)",
          fix=Fix(set={own: value}, delete=[key]) if movable else None)


def _replaced(c: Ctx, section: str, key: str, arg: str, value: Any, entry: dict[str, Any]) -> None:
    where, spread = _where(entry["line"]), _where(table()["spread_line"])
    if arg in MACHINERY:
        c.add("VI600", "error", (key,),
              f"{key}={value!r} replaces verl's {arg}={entry['expr']} ({where}): **engine_kwargs is spread last "
              f"({spread}) and verl's weight sync runs in its own worker extension (vllm_rollout/utils.py:248)",
              f"remove {key}", fix=Fix(delete=[key]))
        return
    own = _own(section, entry.get("from"))
    if arg == "hf_overrides" and c.v(f"{section}.quantization") is None and not c.v(f"{section}.qat.enable"):
        return  # verl's own hf_overrides is {} without quantization (:1212): the user's is the only one
    if own is None or own not in c.res.flat:
        c.add("VI600", "warning", (key,),
              f"{key}={value!r} replaces the {arg} verl sets itself ({entry['expr']}, {where}): **engine_kwargs is "
              f"spread last ({spread}), so verl's own choice is silently dropped",
              f"remove {key} unless you mean to override verl's {arg}")
        return
    mine = c.v(own)
    if _same(mine, value):
        c.add("VI600", "info", (key, own), f"{key}={value!r} repeats {own} (verl passes it as {arg}, {where})",
              f"remove {key}; {own} already sets it", fix=Fix(delete=[key]))
        return
    severity = "error" if arg == "tensor_parallel_size" else "warning"
    c.add("VI600", severity, (key, own),
          f"{key}={value!r} replaces verl's {arg}={own}={mine!r} ({where}): **engine_kwargs is spread last "
          f"({spread}), so vLLM uses {value!r} while verl (and this check) reason with {own}={mine!r}",
          f"set {own}={value} and remove {key}", fix=Fix(set={own: value}, delete=[key]))


def rule_vllm_spread(c: Ctx, f: Facts) -> None:
    t = table()
    popped, literal = set(t["popped"]), t["replaced_by_engine_kwargs"]
    for section in ROLLOUTS:
        if c.v(f"{section}.name") != "vllm":
            continue
        head = f"{section}.engine_kwargs.vllm."
        for key in sorted(k for k in c.res.user if k.startswith(head)):
            arg = key[len(head):]
            if "." in arg or arg in popped or arg not in literal or c.unknown(key):
                continue
            value = c.v(key)
            if value is None:
                continue  # verl drops None values before the spread (:288)
            if arg == "quantization":
                _quantization(c, section, key, value)
            else:
                _replaced(c, section, key, arg, value, literal[arg])
