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

- VI615 (warning): a key verl writes into engine_kwargs itself before the literal, set by the user too:
  `if self.config.get("limit_images"): engine_kwargs["limit_mm_per_prompt"] = {"image": limit_images}` (:289-290)
  replaces the whole engine_kwargs.vllm.limit_mm_per_prompt, so a video/audio limit (or another image count) set
  there is silently dropped whenever rollout.limit_images is set too.

The keys, lines and expressions come from verl's source: wizard/check/data/verl_vllm_server_args.json
(`replaced_by_engine_kwargs`, `popped`, `written_into_engine_kwargs`), written by scripts/verl_vllm_server_args.py
(ast over launch_server).
"""

from __future__ import annotations

import ast
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


def _config_value(node: ast.expr, section: str, c: Ctx) -> Any:
    """verl's expression over self.config, read from the user's config: dict literals, constants, self.config.X and
    self.config.get("X"[, default]); AssertionError on anything else (the table then needs a reader here)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        return {_config_value(k, section, c): _config_value(v, section, c) for k, v in zip(node.keys, node.values)
                if k is not None}
    if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "self.config":
        return c.v(f"{section}.{node.attr}")
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "self.config.get" and node.args \
            and isinstance(node.args[0], ast.Constant):
        default = _config_value(node.args[1], section, c) if len(node.args) > 1 else None
        return c.v(f"{section}.{node.args[0].value}", default)
    raise AssertionError(f"no reader for verl's expression {ast.unparse(node)}")


def _reads(entry: dict[str, Any], section: str) -> list[str]:
    """The rollout keys verl's write reads (self.config.get("X") / self.config.X in its guard and value)."""
    out: list[str] = []
    for text in (entry["when"] or "", entry["expr"]):
        for n in ast.walk(ast.parse(text or "None", mode="eval")):
            name = n.args[0].value if isinstance(n, ast.Call) and ast.unparse(n.func) == "self.config.get" \
                and n.args and isinstance(n.args[0], ast.Constant) else \
                n.attr if isinstance(n, ast.Attribute) and ast.unparse(n.value) == "self.config" and n.attr != "get" \
                else None
            if name and f"{section}.{name}" not in out:
                out.append(f"{section}.{name}")
    return out


def _user_value(c: Ctx, key: str) -> Any:
    if key in c.res.flat:
        return c.v(key)
    sub = {k[len(key) + 1:]: v for k, v in c.res.flat.items() if k.startswith(key + ".")}
    return sub or None


def _written(c: Ctx, section: str, head: str) -> None:
    for arg, entry in table()["written_into_engine_kwargs"].items():
        key = f"{head}{arg}"
        if not any(k == key or k.startswith(key + ".") for k in c.res.user) or c.unknown(key):
            continue
        when = entry["when"]
        if when is not None and not _config_value(ast.parse(when, mode="eval").body, section, c):
            continue
        mine, verl = _user_value(c, key), _config_value(ast.parse(entry["expr"], mode="eval").body, section, c)
        if _same(mine, verl):
            continue
        reads = _reads(entry, section)
        guard = f" because {' / '.join(f'{k}={c.v(k)!r}' for k in reads)} is set" if when else ""
        c.add("VI615", "warning", (key, *reads),
              f"{key}={mine!r} is replaced: verl writes engine_kwargs[{arg!r}] = {verl!r}{guard} "
              f"(vllm_async_server.py:{entry['line']}) before the spread, so vLLM never sees {mine!r}",
              f"set only one of them: remove {' / '.join(reads)} and keep every limit in {key}, "
              f"or remove {key}")


def rule_vllm_spread(c: Ctx, f: Facts) -> None:
    t = table()
    popped, literal = set(t["popped"]), t["replaced_by_engine_kwargs"]
    for section in ROLLOUTS:
        if c.v(f"{section}.name") != "vllm":
            continue
        head = f"{section}.engine_kwargs.vllm."
        _written(c, section, head)
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
