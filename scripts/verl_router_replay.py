#!/usr/bin/env python3
"""Where verl 0.9.1 wires MoE router replay (R2/R3): writes wizard/check/data/verl_router_replay.json, read by
check's VI709/VI728.

    python scripts/verl_router_replay.py           # regenerate the table from the installed verl
    python scripts/verl_router_replay.py --check   # exit 1 when the committed table differs

Router replay has two halves in two sections: the actor engine's `router_replay.mode` (R2: record the routes in the
old-logprob pass, replay them in the update; R3: replay the routes the rollout engine returned) and the rollout's
`enable_rollout_routing_replay` (the rollout engine returns routed_experts). verl reads the mode only for the
strategies its ActorRolloutRefWorker names (workers/engine_workers.py: `if actor_strategy == "megatron": rr_mode =
self.config.actor.megatron.router_replay.mode`, veomni likewise, else "disabled"). The table records, each with the
line it stands on in the installed verl: those strategies and the config path of their mode (ast over the if-chain),
the modes EngineRouterReplayConfig accepts (workers/config/engine.py valid_modes), the rollout servers' capture
switches, the engines' errors for a replay with no routes, the R2 record gate, the legacy trainer's R2/R3 conflict
error and the bypass_mode branches that skip the old-logprob pass.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import marker_lines, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_router_replay.json"
WORKERS = "workers/engine_workers.py"
ENGINE_CFG = "workers/config/engine.py"
# file -> the source text whose line the table records (each must occur in that file)
MARKERS = {
    "replay_without_routes": {
        "workers/engine/megatron/transformer_impl.py": "micro_batch has no routed_experts",
        "workers/engine/veomni/transformer_impl.py": "micro_batch missing 'routed_experts'"},
    "r2_records_only_without_routes": {
        "workers/engine/megatron/transformer_impl.py": 'and data.get("routed_experts", None) is None'},
    "rollout_capture": {
        "workers/rollout/vllm_rollout/vllm_async_server.py": 'args.update({"enable_return_routed_experts": True})',
        "workers/rollout/sglang_rollout/async_sglang_server.py": 'args.update({"enable_return_routed_experts": True})'},
    "r2_conflict_error": {"trainer/ppo/ray_trainer.py": "Detected conflicting router replay configuration"},
    "bypass_skips_old_logprob": {"trainer/ppo/v1/trainer_base.py": "if bypass_recomputing_logprobs:  # Use `rollout_log_probs`",
                                 "trainer/ppo/ray_trainer.py": "if bypass_recomputing_logprobs:  # Use `rollout_log_probs`"},
}


def _verl() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


def mode_sources(tree: ast.Module) -> dict[str, dict[str, Any]]:
    """`if actor_strategy == "<s>": rr_mode = self.config.actor.<...>.router_replay.mode` -> {s: {key, line}}."""
    out: dict[str, dict[str, Any]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and ast.unparse(node.test.left) == "actor_strategy" and isinstance(node.test.ops[0], ast.Eq)
                and isinstance(node.test.comparators[0], ast.Constant)):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and ast.unparse(stmt.targets[0]) == "rr_mode":
                path = ast.unparse(stmt.value)
                assert path.startswith("self.config."), path
                out[node.test.comparators[0].value] = {"key": path.removeprefix("self.config."), "line": stmt.lineno}
    return dict(sorted(out.items()))


def valid_modes(tree: ast.Module) -> dict[str, Any]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "EngineRouterReplayConfig":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign) and ast.unparse(sub.targets[0]) == "valid_modes":
                    return {"modes": ast.literal_eval(sub.value), "line": sub.lineno}
    raise LookupError("EngineRouterReplayConfig.valid_modes not found")


def build() -> dict[str, Any]:
    root = _verl()
    version = (root / "version" / "version").read_text(encoding="utf-8").strip() \
        if (root / "version" / "version").is_file() else "unknown"
    return {"verl": version, "mode_by_strategy": mode_sources(ast.parse((root / WORKERS).read_text(encoding="utf-8"))),
            "mode_by_strategy_file": WORKERS,
            "valid_modes": valid_modes(ast.parse((root / ENGINE_CFG).read_text(encoding="utf-8"))),
            "valid_modes_file": ENGINE_CFG, "lines": marker_lines(root, MARKERS)}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
