"""VI729: a vLLM engine argument under engine_kwargs.vllm that verl writes over after the spread.

verl 0.9.1's vLLMHttpServer.launch_server (workers/rollout/vllm_rollout/vllm_async_server.py:277) builds
`args = {...}` (:325-350) with the rollout's `engine_kwargs.vllm` spread last (:349), then writes more keys into
`args`. One of them runs for every launch: `args.update({"enable_expert_parallel": self.config.expert_parallel_size
> 1})` (:402). So `+actor_rollout_ref.rollout.engine_kwargs.vllm.enable_expert_parallel=True` with
rollout.expert_parallel_size left at 1 (the spelling verl's own docs/perf/best_practices.rst:141 suggests, v0.9.0)
starts vLLM without expert parallelism, silently; rollout.expert_parallel_size > 1, which must equal TP x DP
(workers/config/rollout.py:294-297), is verl's switch. The other later writes sit in a branch (multi-node address,
MTP speculative_config, routed-experts capture, served_model_name, ...): the user's value is replaced when it runs.

The keys, lines and expressions come from verl's source: wizard/check/data/verl_vllm_server_args.json, written by
scripts/verl_vllm_server_args.py (ast over launch_server).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

ROLLOUTS = ("actor_rollout_ref.rollout", "reward.reward_model.rollout")


@cache
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_vllm_server_args.json").read_text(encoding="utf-8")
    return json.loads(text)


def _where(entry: dict[str, Any]) -> str:
    return f"vllm_async_server.py:{entry['line']}"


def _expert_parallel(c: Ctx, section: str, key: str, value: Any, entry: dict[str, Any]) -> None:
    ep_key = f"{section}.expert_parallel_size"
    ep = c.int(ep_key)
    if ep is None or not isinstance(value, bool):
        return
    verl = ep > 1
    spread = f"vllm_async_server.py:{table()['spread_line']}"
    if value is verl:
        c.add("VI729", "info", (key, ep_key),
              f"{key}={value} repeats what verl derives from {ep_key}={ep} ({entry['expr']}, {_where(entry)})",
              f"remove {key}; {ep_key} decides it", fix=Fix(delete=[key]))
        return
    tp = c.int(f"{section}.tensor_model_parallel_size") or 1
    dp = c.int(f"{section}.data_parallel_size") or 1
    if value:
        fixable = tp * dp > 1
        c.add("VI729", "warning", (key, ep_key),
              f"{key}=True is replaced: after the engine_kwargs spread ({spread}) verl writes enable_expert_parallel = "
              f"{entry['expr']} = False ({ep_key}={ep}, {_where(entry)}), so vLLM runs the experts without expert "
              "parallelism",
              f"set {ep_key}={tp * dp} (= tensor_model_parallel_size x data_parallel_size, rollout.py:294-297) and "
              f"remove {key}" if fixable else
              f"expert parallelism needs tensor_model_parallel_size x data_parallel_size > 1; remove {key}",
              fix=Fix(set={ep_key: tp * dp}, delete=[key]) if fixable else None)
    else:
        c.add("VI729", "warning", (key, ep_key),
              f"{key}=False is replaced: verl writes enable_expert_parallel = {entry['expr']} = True "
              f"({ep_key}={ep}, {_where(entry)}), so vLLM runs with expert parallelism",
              f"set {ep_key}=1 to run without expert parallelism, and remove {key}",
              fix=Fix(set={ep_key: 1}, delete=[key]))


def rule_vllm_args(c: Ctx, f: Facts) -> None:
    after = table()["set_after"]
    for section in ROLLOUTS:
        if c.v(f"{section}.name") != "vllm":
            continue
        head = f"{section}.engine_kwargs.vllm."
        for key in sorted(k for k in c.res.user if k.startswith(head)):
            arg = key[len(head):]
            if "." in arg or arg not in after or c.unknown(key):
                continue
            value, entry = c.v(key), after[arg]
            if arg == "enable_expert_parallel" and not entry["conditional"]:
                _expert_parallel(c, section, key, value, entry)
            elif entry["conditional"]:
                c.add("VI729", "info", (key,),
                      f"{key}={value!r}: verl writes {arg} itself after the engine_kwargs spread ({_where(entry)}, "
                      f"{entry['expr']}), so this value is replaced whenever that branch runs",
                      f"remove {key}; verl sets {arg} from its own keys")
            else:
                c.add("VI729", "warning", (key,),
                      f"{key}={value!r} is replaced: verl always writes {arg} = {entry['expr']} after the "
                      f"engine_kwargs spread ({_where(entry)})", f"remove {key}; verl sets {arg} from its own keys")
