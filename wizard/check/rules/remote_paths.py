"""Relative config-file paths that verl's agent-loop workers resolve on their own node (VI953).

VI953 (warning): a multi-node run (trainer.nnodes > 1) that names the agent-loop or tool config files by a relative
path, launched without a Ray job working_dir and without starting Ray in the launch's own folder. verl 0.9.1's
AgentLoopWorker (a Ray actor on any node) passes rollout.agent.agent_loop_config_path,
rollout.multi_turn.tool_config_path and rollout.multi_turn.function_tool_path to resolve_config_path
(experimental/agent_loop/agent_loop.py:529-536; the keys and lines come from wizard/check/data/verl_multinode.json,
written by scripts/verl_multinode.py), which tries the worker's own working folder and then verl's package and project
root only (utils/import_utils.py:91-144) and raises FileNotFoundError otherwise. On another node a Ray worker's working
folder is the one `ray start` ran in there, not the folder the launch ran in: verl PR#4029 (two nodes,
FileNotFoundError for /dfs/data/recipe/langgraph_agent/example/agent.yaml) taught resolve_config_path the verl
root, which helps a file inside verl's own tree, not the user's project. The test calls verl's resolve_config_path from
another folder and sees it raise.

Quiet when the path is absolute, when it resolves under the installed verl's package or project root (as
resolve_config_path would), when `ray job submit` carries a working_dir (each node gets a copy and runs in it), and when
the script starts Ray itself (its workers start in the script's folder) — VI770's conditions for checkpoints.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from wizard.check.rules.cluster import job_runtime_env, script_commands
from wizard.check.rules.context import Ctx, Facts, submit_words
from wizard.check.rules.nodes_table import multinode_table
from wizard.check.rules.slurm import OWN_CLUSTER


def _verl_roots() -> list[Path]:
    """verl's package folder and the folder above it (resolve_config_path's two fallbacks), without importing verl."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return []
    pkg = Path(list(spec.submodule_search_locations)[0]).resolve()
    return [pkg.parent, pkg]


def resolves_in_verl(path: str) -> bool:
    for root in _verl_roots():
        candidate = (root / path).resolve()
        if (candidate == root or root in candidate.parents) and candidate.exists():
            return True
    return False


def rule_remote_config_paths(c: Ctx, f: Facts) -> None:
    """VI953."""
    nodes = f.nnodes or 1
    if nodes <= 1 or c.src.bundle_dir is not None:
        return
    words = submit_words(c)
    if words is not None and job_runtime_env(c, words)[0].get("working_dir"):
        return
    if words is None and (c.src.kind != "script" or OWN_CLUSTER.search(script_commands(c))):
        return
    table = multinode_table()
    for key, line in table["resolved_paths"].items():
        value = c.v(key)
        if not isinstance(value, str) or not value or c.unknown(key) or os.path.isabs(value) or "://" in value:
            continue
        if value.startswith("~") or "$" in value or resolves_in_verl(value):
            continue
        c.add("VI953", "warning", (key, "trainer.nnodes"),
              f"{key}={value} is relative on a {nodes}-node run: each agent-loop worker resolves it on its own node "
              f"({line}) against the folder `ray start` ran in there, then verl's root only "
              f"({table['resolve_config_path']}), so a worker on another node stops with FileNotFoundError "
              "(verl PR#4029)",
              f"give {key} an absolute path on storage every node mounts, or submit with `ray job submit "
              "--working-dir .` so each node runs in a copy of this folder")
