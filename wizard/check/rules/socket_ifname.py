"""A multi-node launch that pins the device backend's network interface but not Gloo's (VI948).

VI948 (warning): the workers of a multi-node run get NCCL_SOCKET_IFNAME (or HCCL_SOCKET_IFNAME on Ascend) and no
GLOO_SOCKET_IFNAME. verl 0.9.1 opens every worker's process group as `f"cpu:gloo,{device}:{nccl|hccl}"`
(utils/distributed.py:63 initialize_global_process_group, :89 initialize_global_process_group_ray, called by each
worker, workers/engine_workers.py:89; the lines come from wizard/check/data/verl_multinode.json, written by
scripts/verl_multinode.py), so each worker joins a Gloo group beside NCCL, and vLLM's rollout builds its own Gloo
CPU groups. Gloo reads only GLOO_SOCKET_IFNAME; without it it binds the address the node's hostname resolves to. On
nodes with several interfaces (a management 1 GbE beside InfiniBand / RoCE) that is often the management network, or an
address the other nodes cannot reach: "Gloo connectFullMesh failed" (verl#967) or collectives over the slow link.
A script that pins NCCL's interface says the nodes have more than one; verl PR#7386 (a four-node lan0 / ib0 cluster)
documents in docs/start/multinode.rst that Ray, Gloo and NCCL each need their own interface setting.

The names the workers get: the launch's exported variables when verl's workers inherit them (the script starts Ray,
or main_ppo starts its own cluster; wizard.check.bashtrace keeps these three variables' values), and the runtime env's
env_vars (ray_kwargs.ray_init.runtime_env.env_vars, a `ray job submit` runtime env). A variable exported before
joining a running cluster reaches no worker (VI772 / VI829 say so), and is not counted here.
"""

from __future__ import annotations

import re

from wizard.check.rules.cluster import job_runtime_env, joins_cluster, script_commands
from wizard.check.rules.context import Ctx, Facts, script_text, submit_words
from wizard.check.rules.nodes_table import multinode_table
from wizard.check.rules.scriptcluster import RAY_START
from wizard.check.rules.slurm import sbatch_options

GLOO = "GLOO_SOCKET_IFNAME"
DEVICE_IFNAMES = ("NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME")  # torch's NCCL / torch_npu's HCCL
ENV_VARS = "ray_kwargs.ray_init.runtime_env.env_vars"
_NAMES = "|".join((GLOO, *DEVICE_IFNAMES))
ASSIGN = re.compile(rf"(?<![A-Za-z0-9_])({_NAMES})=(\"[^\"]*\"|'[^']*'|[^\s,;&|]*)")
EXPORT_NAME = re.compile(rf"\bexport\s+(?:-\S+\s+)*(?:\S+\s+)*?({_NAMES})(?![=A-Za-z0-9_])")


def _nodes(c: Ctx, f: Facts) -> int:
    """The run's node count: trainer.nnodes, else --nnodes, else the batch script's #SBATCH --nodes."""
    if f.nnodes:
        return f.nnodes
    if c.hw.nnodes:
        return c.hw.nnodes
    nodes = sbatch_options(script_text(c) or "").get("nodes", "")
    return int(nodes) if re.fullmatch(r"\d+", nodes) else 1


def worker_env(c: Ctx) -> dict[str, str]:
    """Variables (name -> value, "" where only the name is known) verl's workers get from the launch."""
    env: dict[str, str] = {}
    given = c.res.flat.get(ENV_VARS)
    if isinstance(given, dict):
        env.update({str(k): str(v) for k, v in given.items()})
    env.update({k[len(ENV_VARS) + 1:]: str(v) for k, v in c.res.flat.items() if k.startswith(ENV_VARS + ".")})
    words = submit_words(c)
    if words is not None:
        job_vars = job_runtime_env(c, words)[0].get("env_vars")
        if isinstance(job_vars, dict):
            env.update({str(k): str(v) for k, v in job_vars.items()})
    ex = c.src.extraction
    if ex is not None and not (joins_cluster(c) and not RAY_START.search(script_commands(c))):
        env.update(_written(script_commands(c)))
        for n in ex.env_names:
            if n in (GLOO, *DEVICE_IFNAMES):
                env[n] = ex.temp_env.get(n) or env.get(n, "")
    return env


def _written(text: str) -> dict[str, str]:
    """The three variables as the script's text passes them on: `export NAME=value` (or a later `export NAME`), a
    `NAME=value command` prefix, srun's --export=...,NAME=value, apptainer's --env NAME=value. bash's trace sees only
    launches it reaches (not one wrapped in srun / apptainer), so the text is read too; a plain `NAME=value` line that
    nothing exports stays in the shell."""
    found: dict[str, str] = {}
    plain: dict[str, str] = {}
    for line in text.splitlines():
        for m in ASSIGN.finditer(line):
            value = m.group(2).strip("\"'")
            alone = line.strip() == m.group(0).strip()
            (plain if alone else found)[m.group(1)] = value
        for m in EXPORT_NAME.finditer(line):
            if m.group(1) in plain:
                found[m.group(1)] = plain[m.group(1)]
    return found


def rule_gloo_ifname(c: Ctx, f: Facts) -> None:
    """VI948."""
    env = worker_env(c)
    pinned = [n for n in DEVICE_IFNAMES if n in env]
    if not pinned or GLOO in env:
        return
    nodes = _nodes(c, f)
    if nodes <= 1:
        return
    name = pinned[0]
    value = env[name] or "…"
    where = ", ".join(multinode_table()["gloo"])
    c.add("VI948", "warning", (GLOO, name),
          f"{name}={value} pins the device backend's interface on a {nodes}-node run but {GLOO} is unset: every verl "
          f"worker also opens a Gloo group (\"cpu:gloo,...\" at {where}), which binds the address the hostname "
          "resolves to, often the management NIC (\"Gloo connectFullMesh failed\", verl#967; verl PR#7386)",
          f"export {GLOO}={env[name] or 'the same interface'} beside {name} (where the workers get it: before "
          "`ray start`, or in the runtime env's env_vars)")
