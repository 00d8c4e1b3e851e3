"""How verl 0.9.1 starts a rollout engine from rollout.load_format and from the parallel sizes of the rollout
config (paths under site-packages/verl).

- VI414 (error, `--fix`): rollout.load_format is a `dummy*` spelling other than `dummy` (dummy_dtensor, dummy_hf,
  dummy_megatron: the names verl's docs still list, docs/examples/config.rst:193 and :442-445, from the retired
  sharding-manager rollout that mapped every `dummy*` to `dummy`). RolloutConfig.load_format is a free string
  (workers/config/rollout.py:249, default `dummy`), and each engine server puts it verbatim into the engine's
  arguments (vllm_async_server.py:327, async_sglang_server.py:326, trtllm_async_server.py:239); verl itself only
  knows the exact `dummy` (trtllm_async_server.py:219 compares with it), and the engines reject the other names
  when the server starts inside the rollout worker, after the GPUs are booked (SGLang: "'dummy_dtensor' is not a
  valid LoadFormat", verl PR #1068 review). verl's weight sync keys on the substring (`"dummy" not in load_format`,
  workers/engine_workers.py:673), so `dummy` is the same choice with a name the engines accept. Real case: verl PR
  #7644 (the docs' stale names; R92-01).
- VI415 (error): a vLLM parallel size (pipeline_parallel_size, or data_parallel_size while rollout.
  data_parallel_size is 1) set under engine_kwargs.vllm, typically to get the pipeline parallelism that
  RolloutConfig refuses for vllm/sglang/trtllm (workers/config/rollout.py:319-323). verl sizes every rollout replica
  from the rollout config alone, world_size = tensor_model_parallel_size * data_parallel_size *
  pipeline_model_parallel_size (workers/rollout/replica.py:107-111), and launches each vLLM server on those
  replica GPUs only (vllm_async_server.py:1342-1360), while `**engine_kwargs` is spread into vLLM's arguments
  (:349) and data_parallel_size is written back only when rollout.data_parallel_size > 1 (:384-399). vLLM then
  asks for more ranks than the replica has and the server fails after the GPUs are booked; verl's own guard in
  _preprocess_engine_kwargs (:1157-1165) names these keys as "topology override paths that would bypass VERL's
  worker and IPC mapping". tensor_parallel_size there is VI600 (wizard/check/rules/vllm_spread.py). Real case:
  verl PR #6732 (vLLM pipeline parallel via engine_kwargs, closed unmerged; R92-02).

The lines, names and keys come from verl's source: wizard/check/data/verl_vllm_rollout_loading.json, written by
scripts/verl_vllm_rollout_loading.py (ast over RolloutConfig, the three engine servers, engine_workers.py and
RolloutReplica); the keys verl writes after the spread come from verl_vllm_server_args.json.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from math import prod
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts
from wizard.check.rules.vllm_args import table as server_args

ROLLOUTS = ("actor_rollout_ref.rollout", "reward.reward_model.rollout")


@cache
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_vllm_rollout_loading.json").read_text(encoding="utf-8")
    return json.loads(text)


def rule_vllm_load_format(c: Ctx, f: Facts) -> None:
    lf = table()["load_format"]
    dummy, verbatim = lf["compared"]["equals"]["name"], lf["verbatim"]
    contains = lf["compared"]["contains"]
    for section in ROLLOUTS:
        key, engine = f"{section}.load_format", c.v(f"{section}.name")
        value = c.v(key)
        if engine not in verbatim or not isinstance(value, str) or c.unknown(key):
            continue
        if dummy not in value or value == dummy:
            continue
        site = verbatim[engine]
        c.add("VI414", "error", (key, f"{section}.name"),
              f"{key}={value!r} reaches {engine} verbatim ({site['file']}:{site['line']}), which knows only "
              f"load_format={dummy!r} (verl compares with it, {lf['compared']['equals']['file']}:"
              f"{lf['compared']['equals']['line']}): the engine refuses {value!r} when its server starts, after the "
              f"GPUs are booked ({value!r} is a retired verl name still in docs/examples/config.rst)",
              f"set {key}={dummy}: the same random-init start, since verl's weight sync keys on the substring "
              f"{contains['name']!r} ({contains['file']}:{contains['line']})",
              fix=Fix(set={key: dummy}))


def _own_values(c: Ctx, section: str, factors: dict[str, str]) -> dict[str, int]:
    return {arg: (c.int(f"{section}.{cfg}") or 1) for cfg, arg in factors.items()}


def rule_vllm_topology(c: Ctx, f: Facts) -> None:
    topo = table()["topology"]
    factors: dict[str, str] = topo["world_size"]["factors"]  # rollout key -> vLLM argument
    by_arg = {arg: cfg for cfg, arg in factors.items()}
    args = server_args()
    literal, after = args["replaced_by_engine_kwargs"], args["set_after"]
    ws = f"replica.py:{topo['world_size']['line']}-{topo['world_size']['end_line']}"
    for section in ROLLOUTS:
        if c.v(f"{section}.name") != "vllm":
            continue
        own = _own_values(c, section, factors)
        for arg, guard_line in sorted(topo["engine_kwargs_guard"].items()):
            key = f"{section}.engine_kwargs.vllm.{arg}"
            if arg in literal or arg not in by_arg or key not in c.res.user or c.unknown(key):
                continue  # tensor_parallel_size sits in verl's literal: VI600
            value, mine = c.int(key), own[arg]
            cfg = f"{section}.{by_arg[arg]}"
            if value is None or value == mine:
                continue
            if arg in after and mine > 1:
                continue  # verl writes its own value after the spread (vllm_async_server.py:384-399)
            replica = prod(own.values())
            wants = replica // mine * value
            refused = by_arg[arg] == "pipeline_model_parallel_size"
            c.add("VI415", "error", (key, cfg),
                  f"{key}={value} reaches vLLM by the **engine_kwargs spread (vllm_async_server.py:"
                  f"{args['spread_line']}) but verl sizes each rollout replica from {cfg}={mine}: world_size = "
                  f"{' * '.join(f'{k}' for k in factors)} = {replica} GPUs ({ws}), and the vLLM server gets only "
                  f"those, so vLLM asks for {wants} ranks and fails at launch, after the GPUs are booked (verl's "
                  f"own guard calls this key a topology override that bypasses its worker mapping, :{guard_line})",
                  f"remove {key}" + (f"; verl refuses {cfg} > 1 for vllm (workers/config/rollout.py:"
                                     f"{topo['pp_refused_line']}): fit the model with a larger "
                                     f"{section}.tensor_model_parallel_size instead" if refused else
                                     f" and set {cfg}={value}"))
