"""VI664: SGLang server arguments set under engine_kwargs.sglang that verl already sets from its own keys.

verl 0.9.1's SGLangHttpServer.launch_server (workers/rollout/sglang_rollout/async_sglang_server.py:266-424) reads the
rollout's `engine_kwargs.sglang` (:276), pops the three keys it consumes itself (attention_backend,
mm_attention_backend, custom_weight_loader: :277-282) and builds `args = {...}` (:314-341) from verl's config:
mem_fraction_static from rollout.gpu_memory_utilization (:317), disable_cuda_graph from rollout.enforce_eager (:318),
tp_size from the rollout's TP x DP (:313, :322), dtype, load_format, max_running_requests (rollout.max_num_seqs),
trust_remote_code (the model's), base_gpu_id / nnodes / node_rank from verl's placement of the replica (:320-327,
:810-814). `**engine_kwargs` is spread last in that literal (:340), so a repeated key silently replaces verl's value,
and ServerArgs(**args) (:424) runs inside the rollout worker, after the GPUs are booked: verl's own key (and every
estimate built on it) says one thing, the engine does another. An engine_kwargs tp_size unlike TP x DP, or any
base_gpu_id / gpu_id_step / nnodes / node_rank, also breaks verl's placement: verl books TP x DP GPUs per replica and
numbers them itself (:810-814). Keys verl writes after the literal (`args[k] = ...`, `args.update`: LoRA, CPU weight
backup, multi-node address, metrics, MTP; :345-418) replace the user's value when their branch runs.

Real cases (round 44): public verl launchers set `+...engine_kwargs.sglang.tp_size=1`, `dtype`, `trust_remote_code`
and `mem_fraction_static=0.4` next to the rollout's own TP and gpu_memory_utilization, and a troubleshooting table
advises lowering `engine_kwargs.sglang.mem_fraction_static` for an SGLang OOM while gpu_memory_utilization stays.

The table of keys comes from verl's source: wizard/check/data/verl_sglang_server_args.json, written by
scripts/verl_sglang_server_args.py (ast over launch_server), so check needs no verl and no SGLang.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

ROLLOUTS = {"actor_rollout_ref.rollout": "actor_rollout_ref.model", "reward.reward_model.rollout": None}
PLACEMENT = ("base_gpu_id", "gpu_id_step", "nnodes", "node_rank")  # verl numbers a replica's GPUs itself (:810-814)
MODEL_KEYS = {"model.local_path": "path", "model.trust_remote_code": "trust_remote_code"}


@cache
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_sglang_server_args.json").read_text(encoding="utf-8")
    return json.loads(text)


def _where(line: int) -> str:
    return f"async_sglang_server.py:{line}"


def _verl_key(section: str, source: str | None) -> str | None:
    """The user-facing key verl builds a ServerArgs field from, or None."""
    if not source:
        return None
    kind, _, name = source.partition(".")
    if kind == "rollout":
        return f"{section}.{name}"
    model = ROLLOUTS.get(section)
    return f"{model}.{MODEL_KEYS[source]}" if model and source in MODEL_KEYS else None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return a == b


def _tp_dp(c: Ctx, section: str) -> int | None:
    tp, dp = c.int(f"{section}.tensor_model_parallel_size"), c.int(f"{section}.data_parallel_size")
    return tp * (dp or 1) if tp else None


def _replaced(c: Ctx, section: str, key: str, arg: str, value: Any, entry: dict[str, Any]) -> None:
    where = _where(entry["line"])
    spread = _where(table()["spread_line"])
    if arg == "tp_size":
        want = _tp_dp(c, section)
        if want is not None and _same(value, want):
            return
        movable = isinstance(value, int) and not isinstance(value, bool) \
            and c.int(f"{section}.data_parallel_size") in (1, None)
        c.add("VI664", "error", (key, f"{section}.tensor_model_parallel_size"),
              f"{key}={value!r}: verl passes tp_size = tensor_model_parallel_size x data_parallel_size "
              f"(= {want if want is not None else '?'}, async_sglang_server.py:313, :322) and books that many GPUs per "
              f"replica (:810-814); **engine_kwargs ({spread}) replaces it, so SGLang runs another TP than verl placed",
              f"remove {key} and set {section}.tensor_model_parallel_size instead",
              fix=Fix(set={f"{section}.tensor_model_parallel_size": value}, delete=[key]) if movable else None)
        return
    if arg in PLACEMENT:
        c.add("VI664", "error", (key,),
              f"{key}={value!r}: verl sets {arg} itself from where it placed the replica ({where}, :810-814); "
              f"**engine_kwargs ({spread}) replaces it, so SGLang uses GPUs/nodes verl did not give this replica",
              f"remove {key}: verl computes it", fix=Fix(delete=[key]))
        return
    own = _verl_key(section, entry.get("from"))
    if own is not None and own in c.res.flat:
        mine = c.v(own)
        if _same(mine, value):
            c.add("VI664", "info", (key, own),
                  f"{key}={value!r} repeats {own} (verl passes it as {arg}, {where})",
                  f"remove {key}; {own} already sets it", fix=Fix(delete=[key]))
            return
        c.add("VI664", "warning", (key, own),
              f"{key}={value!r} replaces verl's {arg}={own}={mine!r} ({where}): **engine_kwargs is spread last "
              f"({spread}), so SGLang uses {value!r} while verl (and this check) reason with {own}={mine!r}",
              f"set {own}={value} and remove {key}", fix=Fix(set={own: value}, delete=[key]))
        return
    c.add("VI664", "warning", (key,),
          f"{key}={value!r} replaces the {arg} verl sets itself ({entry['expr']}, {where}): **engine_kwargs is "
          f"spread last ({spread}), so verl's own choice is silently dropped",
          f"remove {key} unless you mean to override verl's {arg}")


def rule_sglang_args(c: Ctx, f: Facts) -> None:
    t = table()
    popped = set(t["popped"])
    for section in ROLLOUTS:
        if c.v(f"{section}.name") != "sglang":
            continue
        head = f"{section}.engine_kwargs.sglang."
        for key in sorted(k for k in c.res.user if k.startswith(head)):
            arg = key[len(head):]
            if "." in arg or arg in popped or c.unknown(key):
                continue
            value = c.v(key)
            if arg in t["replaced_by_engine_kwargs"]:
                _replaced(c, section, key, arg, value, t["replaced_by_engine_kwargs"][arg])
            elif arg in t["set_after"]:
                c.add("VI664", "info", (key,),
                      f"{key}={value!r}: verl writes {arg} itself after the engine_kwargs spread "
                      f"({_where(t['set_after'][arg])}), so this value is replaced whenever that branch runs",
                      f"remove {key}; verl sets {arg} from its own keys")
