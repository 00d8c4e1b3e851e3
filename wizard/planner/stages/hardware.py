"""Rule stage: the cluster and the accelerator (VI301, VI630-VI633).
"""

from __future__ import annotations

from wizard._version import VERL_TARGET
from wizard.planner.state import Build
from wizard.verlspec.algorithms import ALGORITHMS
from wizard.verlspec.hardware import ACCELERATORS, accelerator_of_gpu_type


def cluster(b: Build) -> None:
    a = b.a
    b.algo = ALGORITHMS[a.algorithm]
    b.n_gpus = a.nnodes * a.gpus_per_node
    b.facts["n_gpus"] = b.n_gpus
    if a.cluster == "local" and a.nnodes > 1:
        b.f.error("VI301", ("cluster", "nnodes"), f"cluster=local runs on one machine but nnodes={a.nnodes}",
                  "choose cluster=ray, kuberay or slurm for several nodes, or set nnodes=1")
    _accelerator(b)


def _accelerator(b: Build) -> None:
    """The accelerator's device keys and what runs on it (wizard.verlspec.hardware.ACCELERATORS)."""
    a = b.a
    acc = ACCELERATORS[a.accelerator]
    b.facts["accelerator"] = acc
    if a.rollout_engine not in acc.rollout_engines:
        b.f.error("VI630", ("accelerator", "rollout_engine"),
                  f"rollout_engine={a.rollout_engine} has no build verl 0.9.1 drives on accelerator={a.accelerator} "
                  f"({acc.label}): {acc.why}", f"set rollout_engine={' or '.join(acc.rollout_engines)}")
    if a.train_backend not in acc.train_backends:
        b.f.error("VI631", ("accelerator", "train_backend"),
                  f"train_backend={a.train_backend} is not known to run under verl 0.9.1 on accelerator={a.accelerator} "
                  f"({acc.label}): {acc.why}", f"set train_backend={' or '.join(acc.train_backends)}")
    vendor = accelerator_of_gpu_type(a.gpu_type)
    if vendor is not None and vendor != a.accelerator:
        default = "the default " if "gpu_type" not in b.given else ""
        b.f.error("VI632", ("accelerator", "gpu_type"),
                  f"{default}gpu_type={a.gpu_type} is a {ACCELERATORS[vendor].label} but accelerator={a.accelerator}",
                  f"set gpu_type to a {acc.label} (e.g. {acc.gpu_types[0]}) and gpu_memory_gb to its memory, "
                  f"or accelerator={vendor}")
    if a.accelerator != "nvidia" and a.cluster == "kuberay" and a.image is None:
        b.f.error("VI633", ("accelerator", "image"),
                  f"accelerator={a.accelerator} on KubeRay needs an image: verl's release images "
                  "(verlai/verl:*) are CUDA builds",
                  f"set image to a {acc.label} build of verl {VERL_TARGET} (verl's docker/ folder has its recipes)")
