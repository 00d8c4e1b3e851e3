"""The split of GPUs between the rollout and training when the rollout has GPUs of its own (verl's one-step-off and
fully async modes), and the split of the same GPUs that the step-time model predicts fastest.

Such a run generates the next batch while the current one trains (one_step_off_policy/main_ppo.py:121-122,
fully_async_main.py:235-236): a step is the longer of the two sides plus the weight sync
(wizard.planner.steptime.StepTime.step_s), so the shorter side's GPUs wait for the rest of each step. verl sizes the
two pools from four keys, trainer.nnodes × trainer.n_gpus_per_node and rollout.nnodes × rollout.n_gpus_per_node.
verl's own scripts split them two ways, and the alternatives here keep the way a run chose:
- on the same nodes, a few GPUs of each node for the rollout (one_step_off_policy's dapo_7b_math_fsdp2_4_12.sh:
  trainer.nnodes = rollout.nnodes, n_gpus_per_node 6 + 2): the per-node counts move, their sum stays;
- on nodes of their own (fully_async_policy's dapo_7b_math_fsdp2_16_16.sh: both n_gpus_per_node 8): the node
  counts move, their sum stays.
A rollout replica (rollout TP GPUs) stays inside a node. Which alternatives training can run (verl's batch asserts,
the memory fit) is the caller's predicate."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional

from wizard.planner.steptime import StepTime, Workload, predict

# the shorter side must wait at least this share of the step, and another split must be predicted at least this
# much faster, for the imbalance to stand out of the step-time model's error (±30 % on the calibration reports:
# docs/time.md); verl's own one-step-off and fully async examples stay under it (tests/test_split.py)
IDLE_SHARE = 0.4
GAIN = 0.2
# GPUs of one node, where the run does not say: verl's pools of a per-node split share nodes of this size (8: the
# HGX/DGX and MI300X platforms verl's scripts are written for)
NODE_GPUS = 8


@dataclass(frozen=True)
class Split:
    trainer_nodes: int
    trainer_per_node: int
    rollout_nodes: int
    rollout_per_node: int

    @property
    def trainer_gpus(self) -> int:
        return self.trainer_nodes * self.trainer_per_node

    @property
    def rollout_gpus(self) -> int:
        return self.rollout_nodes * self.rollout_per_node

    def keys(self) -> dict[str, int]:
        return {"trainer.nnodes": self.trainer_nodes, "trainer.n_gpus_per_node": self.trainer_per_node,
                "rollout.nnodes": self.rollout_nodes, "rollout.n_gpus_per_node": self.rollout_per_node}

    def label(self) -> str:
        return f"{self.rollout_gpus} rollout + {self.trainer_gpus} training GPUs"


@dataclass(frozen=True)
class Balance:
    current: Split
    rollout_s: float  # the rollout side's seconds a step (generation)
    train_s: float  # the training side's (log-prob passes and updates)
    step_s: float
    best: Optional[Split]  # the fastest other split training can run, when it beats GAIN; else None
    best_step_s: Optional[float]
    table: tuple[tuple[Split, float], ...]  # every split tried and its predicted step

    @property
    def idle_side(self) -> str:
        return "rollout" if self.rollout_s < self.train_s else "training"

    @property
    def idle_share(self) -> float:
        """The share of each step the shorter side's GPUs wait."""
        longer = max(self.rollout_s, self.train_s)
        return 1 - min(self.rollout_s, self.train_s) / longer if longer > 0 else 0.0


def sides(st: StepTime) -> tuple[float, float]:
    """(rollout seconds, training seconds) of a step whose rollout runs beside training."""
    return st.phases.get("rollout", 0.0), st.training_s


def alternatives(cur: Split, rollout_tp: int, node_gpus: int = NODE_GPUS) -> list[Split]:
    """The other splits of the same GPUs the way `cur` splits them, each rollout replica of `rollout_tp` GPUs inside
    a node: per node when both pools span the same nodes and fit in one node's `node_gpus` together, else by nodes
    when their nodes are alike; [] when `cur` splits neither way."""
    tp = max(rollout_tp, 1)
    out: list[Split] = []
    if cur.trainer_nodes == cur.rollout_nodes and cur.trainer_per_node + cur.rollout_per_node <= node_gpus:
        total = cur.trainer_per_node + cur.rollout_per_node
        out = [Split(cur.trainer_nodes, total - r, cur.rollout_nodes, r) for r in range(tp, total, tp)]
    elif cur.trainer_per_node == cur.rollout_per_node and tp <= cur.rollout_per_node:
        nodes = cur.trainer_nodes + cur.rollout_nodes
        out = [Split(nodes - r, cur.trainer_per_node, r, cur.rollout_per_node) for r in range(1, nodes)]
    return [s for s in out if s != cur]


def with_split(w: Workload, s: Split) -> Workload:
    """The workload with training on `s`'s trainer GPUs and the rollout on its own."""
    return replace(w, n_gpus=s.trainer_gpus, gpus_per_node=s.trainer_per_node, rollout_gpus=s.rollout_gpus,
                   rollout_per_node=s.rollout_per_node)


def balance(w: Workload, cur: Split, runs: Callable[[Split], bool], node_gpus: int = NODE_GPUS) -> Balance:
    """The current split's two sides, and the fastest other split that `runs` accepts, when it is predicted at
    least GAIN faster."""
    now = predict(with_split(w, cur))
    rollout_s, train_s = sides(now)
    table = [(s, predict(with_split(w, s)).step_s) for s in alternatives(cur, w.rollout_tp, node_gpus) if runs(s)]
    best = min(table, key=lambda t: t[1], default=None)
    if best is None or best[1] > now.step_s * (1 - GAIN):
        return Balance(cur, rollout_s, train_s, now.step_s, None, None, tuple(table))
    return Balance(cur, rollout_s, train_s, now.step_s, best[0], best[1], tuple(table))


__all__ = ["Split", "Balance", "balance", "alternatives", "sides", "with_split", "IDLE_SHARE", "GAIN", "NODE_GPUS"]
