"""VI608 / VI609: rollout sampling settings that never reach the engine (paths under site-packages/verl 0.9.1).

VI608: every vLLM / SGLang / TensorRT-LLM rollout runs an agent loop whose generate_sequences builds one sampling
dict for all requests, with `repetition_penalty=1.0` written as a constant (experimental/agent_loop/agent_loop.py:594;
the V1 trainer's trainer/ppo/v1/agent_loop_tq.py:68). RolloutConfig keeps the field (workers/config/rollout.py:168),
so `+actor_rollout_ref.rollout.repetition_penalty=1.05` composes, and vLLM's fallback from the config,
`sampling_params.setdefault("repetition_penalty", self.config.get(...))` (workers/rollout/vllm_rollout/
vllm_async_server.py:623), finds the key already set; SGLang's server never reads it. The run samples without the
penalty (real case verl#7270: the penalty was meant to damp repetition and never applied; filed on HFRollout, which
does not read it either, workers/rollout/hf_rollout.py:54-100).

VI609: reproducible rollouts (`rollout.full_determinism=True`, or a `rollout.seed` of one's own) on an engine whose
server reads neither key. Only vLLM's does (vllm_async_server.py:149-156 enable_full_determinism with the replica
seed, :343 the engine seed, :626-627 the per-request seed); SGLang's server builds its ServerArgs without a seed
(sglang_rollout/async_sglang_server.py:314-341) and TensorRT-LLM's reads neither. trainer/main_ppo.py:47-50 reads both
for any engine but only exports VLLM_BATCH_INVARIANT and PYTHONHASHSEED, so runs on SGLang still differ (real case
verl#3126: SGLang runs with a fixed seed, response lengths far apart; verl's docs/advance/determinism.md: "Backend:
only vLLM is supported"). The reward model's rollout (reward.reward_model.rollout, when reward.reward_model.enable)
runs the same servers and is checked the same way (experimental/reward_loop/reward_loop.py:288-296 reads its
full_determinism).

Both tables come from verl's source (scripts/verl_sampling_reach.py -> wizard/check/data/verl_sampling_reach.json).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import R, Ctx, Facts
from wizard.check.rules.engine_kwargs import engine_names


@cache
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_sampling_reach.json").read_text(encoding="utf-8")
    return json.loads(text)


def rule_pinned_sampling(c: Ctx, f: Facts) -> None:
    name = c.v(f"{R}.name")
    if name not in engine_names(c):  # the agent-loop engines; hf/naive have their own (also blind) paths
        return
    for field, pin in table()["pinned"].items():
        key = f"{R}.{field}"
        value = c.num(key)
        if c.unknown(key) or value is None or value == pin["value"]:
            continue
        sites = ", ".join(pin["sites"])
        c.add("VI608", "warning", (key,),
              f"{key}={value:g}: verl's agent loop sends {field}={pin['value']!r} in every request ({sites}), so "
              f"{name} never applies {value:g} (verl#7270)",
              f"remove {key}: verl 0.9.1 cannot apply it (a custom agent loop may set {field} in its own "
              "sampling_params)",
              fix=Fix(delete=[key]))


def _lines(sites: list[str]) -> str:
    """Sites as verl/-relative "dir/file.py:149" → "file.py:149, :626" (the file named once per run of its lines)."""
    out, last = [], None
    for site in sites:
        path, line = site.rsplit(":", 1)
        name = path.rsplit("/", 1)[-1]
        out.append(f":{line}" if name == last else f"{name}:{line}")
        last = name
    return ", ".join(out)


def rule_unseeded_engine(c: Ctx, f: Facts) -> None:
    engines = table()["server_reads"]
    readers = sorted(e for e, r in engines.items() if r["full_determinism"] and r["seed"])
    where = {k: "; ".join(f"{e}: {_lines(engines[e][k])}" for e in readers) or "no engine"
             for k in ("full_determinism", "seed")}
    # the reward model's rollout runs the same servers (reward_loop.py:288-296 asks full_determinism of it too)
    for sec in (R, *(["reward.reward_model.rollout"] if c.v("reward.reward_model.enable") is True else [])):
        name = c.v(f"{sec}.name")
        reads = engines.get(name) if isinstance(name, str) else None
        if reads is not None:
            _unseeded(c, sec, name, reads, readers, where)


def _unseeded(c: Ctx, sec: str, name: str, reads: dict[str, list[str]], readers: list[str],
              where: dict[str, str]) -> None:
    det, seed = f"{sec}.full_determinism", f"{sec}.seed"
    if c.v(det) is True and not reads["full_determinism"]:
        c.add("VI609", "warning", (det, f"{sec}.name"),
              f"{det}=True with {sec}.name={name}: verl's {name} server reads neither full_determinism nor seed (only "
              f"{where['full_determinism']} does), so the rollouts are not reproducible (verl#3126; "
              "docs/advance/determinism.md: only vLLM)",
              f"use {sec}.name={readers[0]} for reproducible rollouts, or drop {det}" if readers else f"drop {det}")
    elif c.set_by_user(seed) and not c.unknown(seed) and not reads["seed"]:
        c.add("VI609", "warning", (seed, f"{sec}.name"),
              f"{seed}={c.v(seed)} with {sec}.name={name}: verl's {name} server never reads rollout.seed (only "
              f"{where['seed']} does), so it does not seed sampling (verl#3126)",
              f"remove {seed}, or use {sec}.name={readers[0]} for seeded rollouts" if readers else f"remove {seed}",
              fix=Fix(delete=[seed]))
