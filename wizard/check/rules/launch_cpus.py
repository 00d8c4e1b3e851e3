"""VI434 (error): the launch gives Ray fewer CPUs than verl 0.9.1 holds in placement groups at start-up.

verl reserves CPUs in Ray placement groups before any training starts, and waits for them with no timeout:

- every GPU of the trainer's resource pool is a bundle of `max_colocate_count` CPUs plus the GPU
  (single_controller/ray/base.py:146, ResourcePoolManager.max_colocate_count = 3 at :192), placed STRICT_PACK per
  node, then `ray.get([pg.ready() for pg in pgs])` (:160);
- the V1 trainer (trainer.use_v1, default true, trainer/config/ppo_trainer.yaml:232) sets
  `config.transfer_queue.enable = True` whatever the config says (trainer/main_ppo.py:143) and calls
  `tq.init(config.transfer_queue)` (:149); TransferQueue's SimpleStorage backend places one 1-CPU bundle per
  transfer_queue.backend.SimpleStorage.num_data_storage_units (default 8, trainer/config/transfer_queue/
  transfer_queue.yaml:29) plus a 1-CPU controller. The legacy trainer (use_v1=False) does so only with
  transfer_queue.enable=true.

So a Ray cluster of N CPUs runs a trainer of G GPUs only if 3·G + units + 1 <= N (and 3·G_node fits each node). When
the launch states the CPUs (`ray start --num-cpus N` on every node it starts, or ray_kwargs.ray_init.num_cpus=N when
verl's ray.init starts the cluster itself, trainer/main_ppo.py:61-74), a smaller N leaves a placement group pending
forever: the driver prints the config and then nothing, GPUs at 0% (verl#7656: 1 GPU, 8 CPUs, 3 + 8 + 1 = 12; verl
PR#6663, open). The table (wizard/check/data/launch_cpus.json) is read from verl's source by
scripts/verl_launch_cpus.py; the 1-CPU controller is TransferQueue's (Ascend/TransferQueue#164). The count is a lower
bound: a standalone reward-model or teacher pool, and any other CPU-holding actor, need more; the hint and the fix
leave one CPU free for the default (1-CPU-to-schedule) agent-loop and reward-loop workers verl starts afterwards.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.cluster import joins_cluster, script_commands
from wizard.check.rules.context import Ctx, Facts
from wizard.check.rules.scriptcluster import ray_starts

TABLE = Path(__file__).resolve().parent.parent / "data" / "launch_cpus.json"
NUM_CPUS = "ray_kwargs.ray_init.num_cpus"
UNITS = "transfer_queue.backend.SimpleStorage.num_data_storage_units"
BACKEND = "transfer_queue.backend.storage_backend"


@cache
def cpu_table() -> dict[str, Any]:
    return json.loads(TABLE.read_text(encoding="utf-8"))


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def ray_cpus(c: Ctx) -> tuple[int, str, tuple[str, ...]] | None:
    """(CPUs of the smallest node, where the launch says so, keys) or None when the launch does not state them."""
    starts = ray_starts(script_commands(c))
    if starts:
        counts = [_int(s.get("--num-cpus")) for s in starts]
        if any(n is None for n in counts):
            return None  # a node Ray sizes itself (or a count bash leaves to the environment): unknown here
        return min(n for n in counts if n is not None), "`ray start --num-cpus`", ("target",)
    if joins_cluster(c):
        return None  # a cluster started elsewhere: its CPUs are not in this launch
    n = _int(c.v(NUM_CPUS))
    return (n, NUM_CPUS, (NUM_CPUS,)) if n is not None else None


def _tq_cpus(c: Ctx, t: dict[str, Any]) -> tuple[int, str]:
    """CPUs TransferQueue's SimpleStorage holds (0 when it does not run), and why it runs."""
    v1 = c.v("trainer.use_v1")
    v1 = t["use_v1_default"] if v1 is None else v1
    on = "trainer.use_v1=true (the V1 trainer turns TransferQueue on, trainer/main_ppo.py:143)" if v1 is not False \
        else ("transfer_queue.enable=true" if c.v("transfer_queue.enable") is True else "")
    if not on or (c.v(BACKEND) or t["storage_backend_default"]) != "SimpleStorage":
        return 0, ""
    units = _int(c.v(UNITS))
    units = t["num_data_storage_units_default"] if units is None else units
    return units + t["tq_controller_cpus"], f"{on}: {UNITS}={units} storage units + 1 controller"


def rule_launch_cpus(c: Ctx, f: Facts) -> None:
    """VI434."""
    if c.src.entry != "ppo" or c.src.recipe:
        return
    got = ray_cpus(c)
    gpus, nodes = _int(c.v("trainer.n_gpus_per_node")), _int(c.v("trainer.nnodes"))
    if got is None or not gpus or not nodes:
        return
    per_node, where, keys = got
    t = cpu_table()
    pool = t["cpus_per_gpu"] * gpus
    tq, why = _tq_cpus(c, t)
    need_total = pool * nodes + tq
    if pool <= per_node and need_total <= per_node * nodes:
        return
    short = f"each node's {gpus} GPU bundles alone hold {pool}" if pool > per_node else \
        f"{pool * nodes} for the GPU bundles + {tq} for TransferQueue ({why})"
    # leave one CPU free: the agent-loop and reward-loop workers verl starts next are default actors, which Ray
    # schedules only where a CPU is available (they hold none once running)
    fit = per_node * nodes - pool * nodes - t["tq_controller_cpus"] - 1
    lower = f", or lower {UNITS} to {fit} or less" if tq and pool <= per_node and fit >= 1 else ""
    c.add("VI434", "error", (*keys, "trainer.n_gpus_per_node", "trainer.nnodes"),
          f"{where} gives Ray {per_node} CPUs per node ({per_node * nodes} on {nodes} node(s)), but verl holds "
          f"{need_total} in placement groups before training: {short}; each GPU bundle takes "
          f"{t['cpus_per_gpu']} CPUs ({t['bundle_line']}, max_colocate_count at {t['cpus_per_gpu_line']}). A bundle "
          f"Ray cannot place waits forever ({t['pg_ready_line']}, no timeout): the run hangs after printing its "
          "config, GPUs idle (verl#7656)",
          f"give Ray at least {max(need_total + 1 - per_node * (nodes - 1), pool + 1)} CPUs per node "
          f"(`ray start --num-cpus` on every node, or {NUM_CPUS} when verl starts Ray itself){lower}",
          fix=Fix(set={UNITS: fit}) if lower else None)


LAUNCH_CPU_RULES = (rule_launch_cpus,)  # lint's ppo_rules
