"""VI709 / VI728: MoE router replay whose two halves do not match.

verl 0.9.1 splits router replay over two sections: the actor engine's `router_replay.mode` (EngineRouterReplayConfig,
workers/config/engine.py:71 accepts disabled / R2 / R3, and nothing checks it against the rollout) and the rollout's
`enable_rollout_routing_replay` (the vLLM / SGLang server asks the engine for routed_experts only then:
vllm_async_server.py:451, async_sglang_server.py:404). The worker reads the mode only for the strategies its if-chain
names (workers/engine_workers.py:500 `actor.megatron.router_replay.mode`, :502 `actor.veomni.router_replay.mode`,
every other strategy gets "disabled"), and turns routing replay on for compute_log_prob and update_actor
(engine_workers.py:702, :712). Faults, each found only after the GPUs are booked:

- R3 without the rollout capture (VI709, error): the engine replays in every forward (megatron/transformer_impl.py:
  953-955) and the first compute_log_prob finds no routed_experts: RuntimeError at transformer_impl.py:1312 (VeOmni:
  veomni/transformer_impl.py:909). verl PR#4101's example made R3 a one-variable switch with the rollout key apart.
- R2 with the rollout capture (VI709, error): the legacy trainer raises "conflicting router replay configuration"
  after the first old-logprob pass (trainer/ppo/ray_trainer.py:1604); on the V1 trainer the rollout's routes are in
  the batch, so R2 never records (megatron/transformer_impl.py:928 records only when no routed_experts came) and
  replays the rollout's routes: R2 silently runs as R3 (the case verl PR#4973 fixed in verl's README).
- R2 with algorithm.rollout_correction.bypass_mode=True (VI709, error): bypass skips the actor's old-logprob pass
  (trainer/ppo/v1/trainer_base.py:1642, ray_trainer.py:1576), the only pass where R2 records, so the first
  update_actor raises the RuntimeError at transformer_impl.py:1312 (verl PR#7805 rejects it at start-up, after 0.9.1).
- the rollout capture with no replay (VI728, warning): enable_rollout_routing_replay=True while the actor's mode is
  disabled, or the actor's strategy is one verl reads no mode for (fsdp/fsdp2/dp...): the rollout returns the routes
  and nothing replays them, so the run pays for the capture and trains with its own routing (R3 silently off).
  Not when rollout.moe_load_balance_metrics_interval > 0 on the V1 trainer: the routes feed verl's rollout MoE
  load-balance metrics (trainer/ppo/v1/trainer_base.py:1882, PR#6853; rules/moe_rollout.py).

The strategies, their mode keys and every line cited here come from verl's source: wizard/check/data/
verl_router_replay.json, written by scripts/verl_router_replay.py.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import A, R, Ctx, Facts

CAPTURE = f"{R}.enable_rollout_routing_replay"
BYPASS = "algorithm.rollout_correction.bypass_mode"


@cache
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_router_replay.json").read_text(encoding="utf-8")
    return json.loads(text)


def _at(kind: str, rel: str) -> str:
    return f"{rel.rsplit('/', 2)[-2]}/{rel.rsplit('/', 1)[-1]}:{table()['lines'][kind][rel]}"


def mode_key(strategy: Any) -> str | None:
    """The user key verl reads the actor's router replay mode from for this strategy, or None (verl reads none)."""
    entry = table()["mode_by_strategy"].get(str(strategy))
    return f"actor_rollout_ref.{entry['key']}" if entry else None


def _mismatch(c: Ctx, key: str, mode: str, capture: bool, bypass: bool) -> None:
    replay = "; ".join(_at("replay_without_routes", rel) for rel in table()["lines"]["replay_without_routes"])
    if mode == "R3" and not capture:
        c.add("VI709", "error", (key, CAPTURE),
              f"{key}=R3 with {CAPTURE}=False: the rollout returns no routed_experts, and R3 replays them in every "
              f"forward, so the first compute_log_prob raises RuntimeError 'no routed_experts' ({replay})",
              f"set {CAPTURE}=True (R3 needs both), or {key}=R2 to replay the old-logprob pass's own routes",
              fix=Fix(set={CAPTURE: True}))
    elif mode == "R2" and capture:
        c.add("VI709", "error", (key, CAPTURE),
              f"{key}=R2 with {CAPTURE}=True: the legacy trainer stops at the first step ('conflicting router replay "
              f"configuration', {_at('r2_conflict_error', 'trainer/ppo/ray_trainer.py')}), and the V1 trainer "
              "replays the rollout's routes instead of recording its own (R2 records only when no routed_experts "
              f"came, {_at('r2_records_only_without_routes', 'workers/engine/megatron/transformer_impl.py')}): "
              "R2 silently runs as R3",
              f"set {CAPTURE}=False for R2, or {key}=R3 to replay the rollout's routes",
              fix=Fix(set={CAPTURE: False}))
    elif mode == "R2" and bypass:
        skips = "; ".join(_at("bypass_skips_old_logprob", rel) for rel in table()["lines"]["bypass_skips_old_logprob"])
        c.add("VI709", "error", (key, BYPASS),
              f"{key}=R2 with {BYPASS}=True: bypass mode skips the actor's old-logprob pass ({skips}), the only pass "
              f"where R2 records routes, so the first update_actor raises RuntimeError 'no routed_experts' ({replay})",
              f"use {key}=R3 with {CAPTURE}=True (the rollout's routes), or {BYPASS}=False to keep R2")


def rule_router_replay(c: Ctx, f: Facts) -> None:
    strategy = c.v(f"{A}.strategy")
    key = mode_key(strategy)
    if c.unknown(f"{A}.strategy", CAPTURE, BYPASS) or (key is not None and c.unknown(key)):
        return
    mode = str(c.v(key)) if key is not None and key in c.res.flat else "disabled"
    capture, bypass = c.v(CAPTURE) is True, c.v(BYPASS) is True
    if key is not None and mode in ("R2", "R3"):
        _mismatch(c, key, mode, capture, bypass)
        return
    if not capture:
        return
    interval = c.int(f"{R}.moe_load_balance_metrics_interval")
    if interval is not None and interval > 0 and c.v("trainer.use_v1") is not False:
        return  # the routes feed the rollout MoE load-balance metrics (rules/moe_rollout.py, VI431)
    rollout = str(c.v(f"{R}.name"))
    why = (f"{key}={mode}" if key is not None else
           f"{A}.strategy={strategy}: verl reads a router replay mode only for "
           f"{'/'.join(table()['mode_by_strategy'])} (engine_workers.py:"
           f"{min(e['line'] for e in table()['mode_by_strategy'].values())}), every other strategy runs 'disabled'")
    hint = (f"set {key}=R3 to replay the rollout's routes, or {CAPTURE}=False" if key is not None else
            f"remove {CAPTURE} (nothing replays the routes), or train the MoE actor on megatron/veomni with "
            "router_replay.mode=R3")
    c.add("VI728", "warning", (CAPTURE, key or f"{A}.strategy"),
          f"{CAPTURE}=True but {why}: the {rollout} engine returns every token's routed experts "
          "and nothing replays them, so the actor trains on its own routing (no R3) and the rollout pays for the capture",
          hint)
