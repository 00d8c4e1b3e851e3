"""Rule stage: the cluster and the accelerator (VI301, VI630-VI634).

VI634: a critic on the FSDP engine on an NVIDIA card below compute capability 8.0. verl 0.9.1's FSDP engine loads a
value model with load_valuehead_model (workers/engine/fsdp/transformer_impl.py:291-305), which asks transformers for
attn_implementation="flash_attention_2" in both of its loads (utils/model.py:649, 674) whatever the critic's
override_config says, and flash-attn runs only on compute capability 8.0 and later: the first critic forward pass
stops. The actor and reference can use sdpa there (wizard.planner.precision); the critic cannot.
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
    _old_card_critic(b)


def _old_card_critic(b: Build) -> None:
    from wizard.planner.precision import card_without_bf16

    a = b.a
    card = card_without_bf16(a.gpu_type, a.accelerator) if b.algo.critic and a.train_backend != "megatron" else None
    if card is not None:
        b.f.error("VI634", ("algorithm", "gpu_type", "train_backend"),
                  f"algorithm={a.algorithm} trains a critic, and on gpu_type={a.gpu_type} ({card}) an FSDP critic "
                  "cannot run: verl 0.9.1 loads it with flash-attn 2 whatever its attention setting "
                  "(utils/model.py:649, 674), which needs compute capability 8.0",
                  "set train_backend=megatron, or a critic-free algorithm (algorithm=grpo, rloo, ...), or a GPU of "
                  "compute capability 8.0 or later")


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
