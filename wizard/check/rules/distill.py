"""VI973: the on-policy distillation teacher pool against the teachers' GPUs (real case verl PR#6358, whose
multi-teacher example first wired distillation.nnodes to the trainer's node count).

With `distillation.enabled`, every PPO-family trainer builds verl's DistillationConfig from the resolved
`distillation` section (omega_conf_to_dataclass, trainer/ppo/v1/trainer_base.py:360; ray_trainer.py:934;
fully_async_trainer.py:88), inside the Ray job, after the GPUs are booked. Its __post_init__
(workers/config/distillation.py:269-286, _resolve_teacher_models at :289-310) does this arithmetic:

- one teacher (only the default `teacher_model` entry): its replica of TP × DP × PP GPUs
  (`per_replica_world_size`, distillation.py:153-158) must divide the pool n_gpus_per_node × nnodes, else
  ValueError "Single teacher's per_replica_world_size ... must divide the distillation resource pool size"
  (:300-305); verl then sets num_replicas itself (:306);
- several teachers: the default entry is dropped (:308-310) and the sum over the others of
  num_replicas × TP × DP × PP (`world_size`, :160-162) must equal the pool, else ValueError "Sum of teacher
  (num_replicas * per_replica_world_size) ... must match the distillation resource pool size" (:281-286).

A teacher added with `+distillation.teacher_models.NAME...` holds only the keys given: the rest are the
dataclasses' defaults (num_replicas 0, distillation.py:150; RolloutConfig tensor_model_parallel_size 2, data and
pipeline parallel 1, workers/config/rollout.py:191-194). Importing verl's class would import torch and Ray (seconds):
the rule does the arithmetic, and tests/test_distill_pool.py holds it to verl's own class.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

D = "distillation"
TEACHERS = f"{D}.teacher_models"
DEFAULT_TEACHER = "teacher_model"  # the entry distillation.yaml ships, dropped when others are added
# RolloutConfig's defaults for what a teacher's inference section leaves out (workers/config/rollout.py:191-194)
INFERENCE_DEFAULTS = {"tensor_model_parallel_size": 2, "data_parallel_size": 1, "pipeline_model_parallel_size": 1}


@dataclass
class Teacher:
    name: str
    replicas: int  # num_replicas (verl sets it itself for a single teacher)
    per_replica: int  # TP × DP × PP
    parts: tuple[int, int, int]


@dataclass
class PoolProblem:
    single: bool  # the one-teacher divisibility check (:300-305), else the sum check (:281-286)
    teachers: list[Teacher]
    gpn: int
    nnodes: int

    @property
    def pool(self) -> int:
        return self.gpn * self.nnodes

    @property
    def used(self) -> int:
        return sum(t.replicas * t.per_replica for t in self.teachers)


def teacher_names(flat: Mapping[str, Any]) -> list[str]:
    """The entries of distillation.teacher_models in the resolved config, in their order."""
    names: dict[str, None] = {}
    for key in flat:
        if key.startswith(TEACHERS + "."):
            names.setdefault(key[len(TEACHERS) + 1:].split(".", 1)[0], None)
    return list(names)


def _whole(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        return None
    return int(value)


def pool_problem(flat: Mapping[str, Any]) -> PoolProblem | None:
    """What DistillationConfig.__post_init__ would raise about the pool for the resolved flat config, or None (no
    such problem, distillation off, or a value that is not a whole number: another rule's, or unresolved)."""
    if flat.get(f"{D}.enabled") is not True:
        return None
    gpn, nnodes = _whole(flat.get(f"{D}.n_gpus_per_node")), _whole(flat.get(f"{D}.nnodes"))
    names = teacher_names(flat)
    if gpn is None or nnodes is None or DEFAULT_TEACHER not in names:
        return None  # without the default entry verl stops on its own assert (distillation.py:290)
    single = len(names) == 1
    teachers = []
    for name in names if single else [n for n in names if n != DEFAULT_TEACHER]:
        base = f"{TEACHERS}.{name}"
        parts = [_whole(flat.get(f"{base}.inference.{k}", default)) for k, default in INFERENCE_DEFAULTS.items()]
        replicas = 0 if single else _whole(flat.get(f"{base}.num_replicas", 0))
        if replicas is None or any(p is None or p < 1 for p in parts):
            return None
        tp, dp, pp = parts  # type: ignore[misc]
        teachers.append(Teacher(name, replicas, tp * dp * pp, (tp, dp, pp)))
    problem = PoolProblem(single, teachers, gpn, nnodes)
    if single:
        return problem if problem.pool % teachers[0].per_replica else None
    return problem if problem.used != problem.pool else None


def _hint(p: PoolProblem) -> tuple[str, Fix | None]:
    gpn_key, nodes_key = f"{D}.n_gpus_per_node", f"{D}.nnodes"
    if p.single:
        t = p.teachers[0]
        return (f"make distillation.n_gpus_per_node × nnodes a multiple of {t.per_replica} (the teacher's "
                f"TP×DP×PP), or change its inference parallel sizes"), None
    want = p.used
    if want and want % p.gpn == 0:
        return (f"set {nodes_key}={want // p.gpn} ({p.gpn} GPUs a node hold the teachers' {want}), or change the "
                f"teachers' num_replicas to fill {p.pool} GPUs (distillation.nnodes is the teacher pool's own "
                "node count, not trainer.nnodes)"), Fix(set={nodes_key: want // p.gpn})
    if want and want % p.nnodes == 0:
        return (f"set {gpn_key}={want // p.nnodes}, or change the teachers' num_replicas to fill {p.pool} GPUs"), \
            Fix(set={gpn_key: want // p.nnodes})
    return (f"make {gpn_key} × {nodes_key} equal the teachers' {want} GPUs (each teacher: num_replicas × TP × DP × "
            "PP), or change their num_replicas"), None


def rule_distill_pool(c: Ctx, f: Facts) -> None:
    if c.v(f"{D}.enabled") is not True:
        return
    names = teacher_names(c.res.flat)
    keys = [f"{D}.n_gpus_per_node", f"{D}.nnodes"]
    for name in names:
        keys += [f"{TEACHERS}.{name}.num_replicas", *(f"{TEACHERS}.{name}.inference.{k}" for k in INFERENCE_DEFAULTS)]
    if c.unknown(*[k for k in keys if k in c.res.flat]):
        return
    p = pool_problem(c.res.flat)
    if p is None:
        return
    hint, fix = _hint(p)
    pool = f"distillation.n_gpus_per_node={p.gpn} × distillation.nnodes={p.nnodes} = {p.pool} GPUs"
    if p.single:
        t = p.teachers[0]
        c.add("VI973", "error", keys[:2] + [f"{TEACHERS}.{t.name}.inference.tensor_model_parallel_size"],
              f"the distillation teacher's replica of {t.per_replica} GPUs (TP {t.parts[0]} × DP {t.parts[1]} × PP "
              f"{t.parts[2]}) does not divide the teacher pool {pool}: verl's DistillationConfig raises "
              "\"Single teacher's per_replica_world_size must divide the distillation resource pool size\" "
              "(workers/config/distillation.py:300-305) inside the Ray job, after the GPUs are booked "
              "(trainer/ppo/v1/trainer_base.py:360)", hint, fix=fix)
        return
    each = ", ".join(f"{t.name} {t.replicas}×{t.per_replica}" for t in p.teachers)
    c.add("VI973", "error", keys[:2] + [f"{TEACHERS}.{t.name}.num_replicas" for t in p.teachers],
          f"the distillation teachers occupy {p.used} GPUs (num_replicas × TP·DP·PP: {each}) but the teacher pool is "
          f"{pool}: verl's DistillationConfig raises \"Sum of teacher (num_replicas * per_replica_world_size) "
          f"({p.used}) must match the distillation resource pool size\" (workers/config/distillation.py:281-286) "
          "inside the Ray job, after the GPUs are booked (trainer/ppo/v1/trainer_base.py:360)", hint, fix=fix)
