"""Bundle files for the cluster capability (see renderer.ARTEFACT_PROVIDERS).

`cluster: kuberay` → k8s/configmap.yaml, k8s/rayjob.yaml, k8s/raycluster.yaml, k8s/submit.sh. The pods get the
bundle's files they run from the ConfigMap: verl_config.yaml, data/prepare_data.py, reward/reward_fn.py and, with
agent=tool, verl_init_tools/ (the tool config and tool module verl's agent-loop workers load), each mounted at the
path the config names relative to the pods' working folder (VI767: within Kubernetes' 1 MiB for a ConfigMap);
`cluster: slurm` → slurm/job.sbatch; `cluster: ray` → ray/submit.sh, ray/runtime_env.yaml;
`cluster: local` → nothing beyond run.sh.

Every number the artefacts place is computed here from the same plan that wrote verl_config.yaml
(trainer.nnodes × trainer.n_gpus_per_node, the CPUs verl asks Ray for), so the launch files cannot
disagree with the config. Manifests are built as Python data and dumped with a YAML dumper; the
templates only add comments around them. Shell templates receive values that go through `sh`.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from wizard.intent.errors import Problem, WizardError
from wizard.verlspec.hardware import ACCELERATORS
from wizard.renderer.images import image_choice, verl_runtime_env

if TYPE_CHECKING:
    from wizard.planner.state import Plan
    from wizard.renderer.render import Artefact

# --- what verl 0.9.1 asks of a Ray cluster (docs/verl-facts.md §1.4) ---------------------------
# single_controller/ray/base.py:146: every GPU bundle of a resource pool is {"CPU": 3, "GPU": 1}.
CPUS_PER_GPU_BUNDLE = 3
# TransferQueue (the v1 trainer always starts it): a controller plus num_data_storage_units (8)
# storage actors, one logical CPU each. Too few CPUs make verl hang silently, not fail.
TRANSFER_QUEUE_CPUS = 9
# The TaskRunner actor needs one free CPU to be scheduled.
TASK_RUNNER_CPUS = 1

# --- defaults for the pods / Slurm allocation (answers override them) --------------------------
DEFAULT_CPUS_PER_GPU = 8
DEFAULT_MEMORY_GB_PER_GPU = 32
HOST_MEMORY_SHARE = 0.9  # of host_memory_gb for the job; the rest stays with the system (kubelet, slurmd)
DEFAULT_HEAD_CPUS = TRANSFER_QUEUE_CPUS + TASK_RUNNER_CPUS
DEFAULT_HEAD_MEMORY_GB = 64

RAYJOB_NAME_MAX = 47  # KubeRay appends suffixes to the RayJob name for the cluster, pods and services
CONFIG_MOUNT = "/verl-init/config"  # the bundle's verl_config.yaml, from the ConfigMap, in the head pod
PREPARE_CPUS, PREPARE_MEMORY_GB = 1, 8  # the prepare-data init container (a hub download + a parquet write)
DATA_DIR = "data"  # dataprep.PREPARED_TRAIN / PREPARED_VAL live here, relative to WORKDIR
REWARD_FN = "reward/reward_fn.py"  # dataprep.BUNDLE_REWARD_FN
GENRM_FN = "reward/genrm_fn.py"  # genrm.BUNDLE_GENRM_FN
# Kubernetes refuses a ConfigMap whose values total more than 1 MiB (pkg/apis/core/validation/validation.go,
# ValidateConfigMap: the bytes of every data and binaryData value against core.MaxSecretSize = 1 MiB).
CONFIGMAP_MAX_BYTES = 1024 * 1024
WORKDIR = "/verl-init/run"  # working folder of every pod: relative paths (checkpoints/, outputs/) land here
RAY_PORT = 6379
DASHBOARD_PORT = 8265
CLIENT_PORT = 10001
WORKER_GROUP = "gpu-workers"
VERL_DEFAULT_CHECKPOINT_DIR = "checkpoints/${trainer.project_name}/${trainer.experiment_name}"

# Environment for every Ray process of the job: (name, value, why). Secrets are never listed here.
VERL_ENV: tuple[tuple[str, str, str], ...] = (
    ("TOKENIZERS_PARALLELISM", "true", "tokenizers use their threads inside Ray workers (verl's default)"),
    ("TORCH_NCCL_AVOID_RECORD_STREAMS", "1", "frees NCCL buffers promptly; verl's recipes set it"),
    ("RAY_DEDUP_LOGS", "1", "one line for N workers printing the same message, not N lines"),
    ("HYDRA_FULL_ERROR", "1", "full tracebacks when the config fails to compose"),
)
# Secret keys the pods may read (env name = key in the Secret).
HF_TOKEN = "HF_TOKEN"
WANDB_KEY = "WANDB_API_KEY"

ENTRYPOINT = f"python3 -m verl.trainer.main_ppo --config-path {CONFIG_MOUNT} --config-name verl_config"


@dataclass(frozen=True)
class Layout:
    """Every value the cluster artefacts place, with the reasons shown in their comments."""

    name: str
    name_reason: str
    namespace: Optional[str]
    nnodes: int
    gpus_per_node: int
    n_gpus: int
    node_cpus: int
    node_cpus_reason: str
    node_memory_gb: int
    node_memory_reason: str
    min_node_cpus: int  # 3 per GPU + 1
    head_cpus: int  # KubeRay only (0 elsewhere: the head is a GPU node)
    head_memory_gb: int
    cpus_needed: int  # 3 × GPUs + TransferQueue
    total_cpus: int
    image: str
    image_reason: str
    runtime_env: Optional[dict[str, Any]]  # the job's Ray runtime env (verl installed into a default image)
    secret: str
    secret_env: tuple[tuple[str, bool], ...]  # (env/key name, optional)
    shm_size_gb: Optional[int]
    shared_pvc: Optional[str]
    checkpoint_mount: Optional[str]  # an absolute trainer.default_local_dir outside WORKDIR: mounted there too
    wait_timeout_s: int
    ttl_seconds: int
    needs_wandb: bool
    # Data and reward delivered through the ConfigMap: "every" pod (or only the "head", whose writes every pod
    # sees on the shared PVC) prepares data/ in an init container before Ray starts; "" when it cannot
    # (a local data file, or paths that are not the bundle's data/train.parquet + data/val.parquet).
    prepare_data: str = ""
    dataset_hub: str = ""
    reward_fn: bool = False  # the bundle's reward/reward_fn.py, mounted at the same relative path in every pod
    genrm_fn: bool = False  # the bundle's reward/genrm_fn.py (reward=genrm's judge function), likewise
    judge_nodes: int = 0  # nodes of the judge's own resource pool (reward=genrm, judge_gpus), counted in nnodes
    # agent=tool: the bundle's verl_init_tools/ files (bundle-relative paths), from the ConfigMap into a folder of the
    # same name in every pod's working folder, where verl's tool registry opens tool_config.yaml and imports the class
    tool_files: tuple[str, ...] = ()
    checkpoint_pvc: Optional[str] = None  # a PVC of its own mounted at the checkpoint folder in every pod
    checkpoint_dir: str = ""  # where trainer.default_local_dir lands in a pod (its fixed leading folder)
    # the accelerator's names (wizard.verlspec.hardware.ACCELERATORS): Kubernetes extended resource, Ray resource,
    # Slurm GRES
    k8s_resource: str = "nvidia.com/gpu"
    ray_resource: str = "GPU"
    slurm_gres: str = "gpu"
    visible_devices: str = "CUDA_VISIBLE_DEVICES"

    @property
    def slurm_flag(self) -> str:
        return "--gpus-per-node" if self.slurm_gres == "gpu" else "--gres"

    @property
    def slurm_devices(self) -> str:
        """The sbatch option that asks for the accelerators of a node."""
        if self.slurm_gres == "gpu":
            return f"--gpus-per-node={self.gpus_per_node}"
        return f"--gres={self.slurm_gres}:{self.gpus_per_node}"

    @property
    def configmap_name(self) -> str:
        return f"{self.name}-config"


def dns1035(text: str, max_len: int = RAYJOB_NAME_MAX) -> str:
    """A DNS-1035 label (lower-case letters, digits, '-', starting with a letter) derived from text."""
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if not s or not s[0].isalpha():
        s = ("verl-" + s).strip("-")
    return s[:max_len].rstrip("-")


def one_line(text: Any) -> str:
    """Text safe for a `#` comment line in YAML or shell: no line breaks or other control characters."""
    return " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())


def checkpoint_mount(default_local_dir: str) -> str:
    """Where verl's `trainer.default_local_dir` lands in a pod: the fixed leading folder of that path
    (relative paths resolve in the pods' working folder, WORKDIR)."""
    fixed = default_local_dir.split("${", 1)[0]
    fixed = fixed.rsplit("/", 1)[0] if "/" in fixed else ""
    fixed = fixed.rstrip("/")
    if default_local_dir.startswith("/"):
        return fixed or WORKDIR
    return f"{WORKDIR}/{fixed}" if fixed else WORKDIR


def layout(plan: Plan) -> Layout:
    a = plan.answers
    from wizard.planner import genrm

    judge_nodes = genrm.extra_nodes(a)  # the judge's own pool is more nodes of the same kind (reward_pool)
    gpn, nnodes = a.gpus_per_node, a.nnodes + judge_nodes
    n_gpus = nnodes * gpn
    kuberay = a.cluster == "kuberay"
    cpus_needed = CPUS_PER_GPU_BUNDLE * n_gpus + TRANSFER_QUEUE_CPUS
    min_node_cpus = CPUS_PER_GPU_BUNDLE * gpn + 1

    head_cpus = (a.head_cpus or DEFAULT_HEAD_CPUS) if kuberay else 0
    head_memory = (a.head_memory_gb or DEFAULT_HEAD_MEMORY_GB) if kuberay else 0
    if a.cpus_per_node is not None:
        node_cpus, cpus_reason = a.cpus_per_node, "cpus_per_node (your answer)"
    else:
        # The rest of what verl needs beyond the head must fit on the GPU nodes.
        spread = -(-max(0, cpus_needed - head_cpus) // nnodes)
        node_cpus = max(DEFAULT_CPUS_PER_GPU * gpn, min_node_cpus, spread)
        cpus_reason = (
            f"{DEFAULT_CPUS_PER_GPU} per GPU; verl needs ≥ {CPUS_PER_GPU_BUNDLE} per GPU + 1 = {min_node_cpus}"
            if node_cpus == DEFAULT_CPUS_PER_GPU * gpn
            else f"{node_cpus}: the {cpus_needed} logical CPUs verl needs, spread over {nnodes} node(s)"
        )
    if a.memory_per_node_gb is not None:
        memory, memory_reason = a.memory_per_node_gb, "memory_per_node_gb (your answer)"
    elif a.host_memory_gb is not None:
        memory = max(1, int(a.host_memory_gb * HOST_MEMORY_SHARE))
        memory_reason = f"{HOST_MEMORY_SHARE:.0%} of host_memory_gb={a.host_memory_gb:g}"
    else:
        memory = DEFAULT_MEMORY_GB_PER_GPU * gpn
        memory_reason = f"{DEFAULT_MEMORY_GB_PER_GPU} GB per GPU"

    if a.job_name:
        name, name_reason = a.job_name, "job_name (your answer)"
    else:
        name = dns1035(str(plan.value("trainer.experiment_name")))
        name_reason = "from trainer.experiment_name as a DNS-1035 name of at most 47 characters"
    image, image_reason = image_choice(a, plan.verl_version)

    needs_wandb = any(lg in ("wandb", "vemlp_wandb") for lg in a.logger)
    secret_env: list[tuple[str, bool]] = [(WANDB_KEY, False)] if needs_wandb else []
    secret_env.append((HF_TOKEN, True))

    ckpt_dir = plan.settings["trainer.default_local_dir"].value if "trainer.default_local_dir" in plan.settings \
        else VERL_DEFAULT_CHECKPOINT_DIR
    ckpt = checkpoint_mount(str(ckpt_dir))
    acc = ACCELERATORS[a.accelerator]
    from wizard.planner import dataprep

    hub = dataprep.hub_prepared_in_place(a, plan.base_dir, str(plan.value("data.train_files")),
                                         str(plan.value("data.val_files")))
    prepare = ("head" if a.shared_pvc else "every") if hub else ""
    reward_fn = (str(plan.settings["reward.custom_reward_function.path"].value) == dataprep.BUNDLE_REWARD_FN
                 if "reward.custom_reward_function.path" in plan.settings else False)
    genrm_fn = (str(plan.settings["reward.custom_reward_function.path"].value) == genrm.BUNDLE_GENRM_FN
                if "reward.custom_reward_function.path" in plan.settings else False)
    from wizard.renderer.artefacts import agent as agent_files

    tool_files = tuple(agent_files.bundle_paths(plan)) if kuberay else ()
    return Layout(
        name=name, name_reason=name_reason, namespace=a.k8s_namespace,
        nnodes=nnodes, gpus_per_node=gpn, n_gpus=n_gpus,
        node_cpus=node_cpus, node_cpus_reason=cpus_reason, node_memory_gb=memory, node_memory_reason=memory_reason,
        min_node_cpus=min_node_cpus, head_cpus=head_cpus, head_memory_gb=head_memory,
        cpus_needed=cpus_needed, total_cpus=head_cpus + nnodes * node_cpus,
        image=image, image_reason=image_reason, runtime_env=verl_runtime_env(a, plan.verl_version),
        secret=a.k8s_secret, secret_env=tuple(secret_env),
        shm_size_gb=a.shm_size_gb, shared_pvc=a.shared_pvc,
        checkpoint_mount=ckpt if a.shared_pvc and not ckpt.startswith(WORKDIR + "/") and ckpt != WORKDIR else None,
        wait_timeout_s=a.gpu_wait_timeout_s, ttl_seconds=a.k8s_ttl_seconds, needs_wandb=needs_wandb,
        prepare_data=prepare, dataset_hub=hub or "", reward_fn=reward_fn, genrm_fn=genrm_fn, judge_nodes=judge_nodes,
        tool_files=tool_files,
        checkpoint_pvc=a.checkpoint_pvc, checkpoint_dir=ckpt,
        k8s_resource=acc.k8s_resource, ray_resource=acc.ray_resource, slurm_gres=acc.slurm_gres,
        visible_devices=acc.visible_devices,
    )


def cluster_problems(plan: Plan) -> list[Problem]:
    """Rules on the cluster answers (VI701-VI703); only for the clusters whose artefacts start Ray nodes."""
    a = plan.answers
    if a.cluster not in ("kuberay", "slurm"):
        return []
    lay = layout(plan)
    out: list[Problem] = []
    if lay.node_cpus < lay.min_node_cpus:
        out.append(Problem(
            "VI701", "error", ("cpus_per_node", "gpus_per_node"),
            f"cpus_per_node={lay.node_cpus} is below what verl asks Ray for on a node of {lay.gpus_per_node} GPU(s): "
            f"{CPUS_PER_GPU_BUNDLE} CPUs per GPU bundle + 1",
            f"set cpus_per_node ≥ {lay.min_node_cpus}, or leave it unset ({DEFAULT_CPUS_PER_GPU} per GPU)",
        ))
    elif lay.total_cpus < lay.cpus_needed:
        keys = ("head_cpus", "cpus_per_node") if a.cluster == "kuberay" else ("cpus_per_node", "nnodes")
        short = lay.cpus_needed - lay.total_cpus
        per_node = lay.node_cpus + -(-short // lay.nnodes)
        hint = f"set cpus_per_node ≥ {per_node}"
        if a.cluster == "kuberay":
            hint = f"set head_cpus ≥ {lay.head_cpus + short} or " + hint
        out.append(Problem(
            "VI702", "error", keys,
            f"the cluster would give Ray {lay.total_cpus} logical CPUs but verl needs "
            f"{CPUS_PER_GPU_BUNDLE} × {lay.n_gpus} GPUs + {TRANSFER_QUEUE_CPUS} for TransferQueue = {lay.cpus_needed} "
            "(with fewer it hangs silently)",
            hint,
        ))
    if a.cluster == "kuberay" and lay.shm_size_gb is not None and lay.shm_size_gb >= lay.node_memory_gb:
        out.append(Problem(
            "VI703", "error", ("shm_size_gb", "memory_per_node_gb"),
            f"shm_size_gb={lay.shm_size_gb} is memory-backed and counts against the worker pod's "
            f"{lay.node_memory_gb} GB",
            f"set shm_size_gb ≤ {max(1, lay.node_memory_gb // 2)} or raise memory_per_node_gb",
        ))
    if a.memory_per_node_gb is not None and a.host_memory_gb is not None and a.memory_per_node_gb > a.host_memory_gb:
        out.append(Problem(
            "VI704", "error", ("memory_per_node_gb", "host_memory_gb"),
            f"memory_per_node_gb={a.memory_per_node_gb} asks for more than a node has (host_memory_gb={a.host_memory_gb:g})",
            f"set memory_per_node_gb ≤ {int(a.host_memory_gb * HOST_MEMORY_SHARE)} ({HOST_MEMORY_SHARE:.0%}), "
            "or leave it unset",
        ))
    return out


# --- data the artefacts carry --------------------------------------------------------------------


def env_vars() -> dict[str, str]:
    return {name: value for name, value, _ in VERL_ENV}


def _container_env(lay: Layout) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in env_vars().items()]
    for key, optional in lay.secret_env:
        env.append({"name": key, "valueFrom": {"secretKeyRef": {"name": lay.secret, "key": key, "optional": optional}}})
    return env


def _resources(cpus: int, memory_gb: int, gpus: int = 0, device: str = "nvidia.com/gpu") -> dict[str, Any]:
    amount: dict[str, str] = {"cpu": str(cpus), "memory": f"{memory_gb}G"}
    if gpus:
        amount[device] = str(gpus)
    return {"requests": dict(amount), "limits": dict(amount)}


def _worker_ray_params(lay: Layout) -> dict[str, str]:
    """`ray start` parameters of a worker pod: Ray's GPU count (CUDA and ROCm: verl asks for "GPU"), or the
    custom resource verl's NPU platform asks for (platform_npu.py:139 ray_resource_name "NPU"), which KubeRay
    passes as --resources (a JSON string in quotes)."""
    if lay.ray_resource == "GPU":
        return {"num-cpus": str(lay.node_cpus), "num-gpus": str(lay.gpus_per_node)}
    import json

    return {"num-cpus": str(lay.node_cpus), "num-gpus": "0",
            "resources": '"' + json.dumps({lay.ray_resource: lay.gpus_per_node}).replace('"', '\\"') + '"'}


def raycluster_spec(lay: Layout) -> dict[str, Any]:
    """The RayCluster spec, shared by k8s/rayjob.yaml (rayClusterSpec) and k8s/raycluster.yaml."""
    # The working folder: the shared PVC when there is one (data/, checkpoints/, outputs/ seen by every pod),
    # else a pod-local emptyDir (writable whatever user the image runs as).
    run_volume: dict[str, Any] = (
        {"name": "run", "persistentVolumeClaim": {"claimName": lay.shared_pvc}} if lay.shared_pvc
        else {"name": "run", "emptyDir": {}}
    )
    run_mount = {"name": "run", "mountPath": WORKDIR}
    ckpt_mount: list[dict[str, Any]] = []
    ckpt_volume: list[dict[str, Any]] = []
    if lay.checkpoint_pvc:  # checkpoints on a PVC of their own, at the checkpoint folder of every pod
        ckpt_volume = [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": lay.checkpoint_pvc}}]
        ckpt_mount = [{"name": "checkpoints", "mountPath": lay.checkpoint_dir}]
    elif lay.checkpoint_mount:  # an absolute trainer.default_local_dir: the same PVC there as well
        ckpt_mount = [{"name": "run", "mountPath": lay.checkpoint_mount, "subPath": "checkpoints"}]
    shm_volume: list[dict[str, Any]] = []
    shm_mount: list[dict[str, Any]] = []
    if lay.shm_size_gb:
        shm_volume = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{lay.shm_size_gb}G"}}]
        shm_mount = [{"name": "dshm", "mountPath": "/dev/shm"}]
    env = _container_env(lay)
    config_volume = {"name": "verl-config", "configMap": {"name": lay.configmap_name}}
    config_mount = {"name": "verl-config", "mountPath": CONFIG_MOUNT, "readOnly": True}
    reward_mount: list[dict[str, Any]] = []
    if lay.reward_fn:  # reward.custom_reward_function.path is bundle-relative: the same path in every pod
        reward_mount = [{"name": "verl-config", "mountPath": f"{WORKDIR}/{REWARD_FN}", "subPath": "reward_fn.py",
                         "readOnly": True}]
    if lay.genrm_fn:  # likewise the judge function
        reward_mount.append({"name": "verl-config", "mountPath": f"{WORKDIR}/{GENRM_FN}", "subPath": "genrm_fn.py",
                             "readOnly": True})
    # rollout.multi_turn.tool_config_path is bundle-relative too: the tool files, as a folder of the same name in the
    # working folder of every pod (a projection of the ConfigMap's tool entries; mounted as a folder, not by subPath,
    # so a running RayCluster sees an updated ConfigMap). verl's agent-loop workers run in their raylet's working
    # folder (WORKDIR) and have the driver's working folder (WORKDIR) on sys.path (ray/_private/worker.py:2715-2718),
    # so `verl_init_tools.<module>` imports there.
    tools_volume: list[dict[str, Any]] = []
    tools_mount: list[dict[str, Any]] = []
    if lay.tool_files:
        tools_volume = [{"name": "verl-tools", "configMap": {"name": lay.configmap_name, "items": [
            {"key": configmap_key(path), "path": posixpath.relpath(path, tools_dir(lay))} for path in lay.tool_files]}}]
        tools_mount = [{"name": "verl-tools", "mountPath": f"{WORKDIR}/{tools_dir(lay)}", "readOnly": True}]
    prepare = {
        "name": "prepare-data",
        "image": lay.image,
        "workingDir": WORKDIR,
        "command": ["python3", f"{CONFIG_MOUNT}/prepare_data.py", "--out", f"{WORKDIR}/{DATA_DIR}"],
        "env": env,
        "resources": _resources(PREPARE_CPUS, PREPARE_MEMORY_GB),
        "volumeMounts": [config_mount, run_mount],
    }
    head = {
        "rayStartParams": {"num-cpus": str(lay.head_cpus), "num-gpus": "0"},
        "template": {"spec": {
            "containers": [{
                "name": "ray-head",
                "image": lay.image,
                "workingDir": WORKDIR,
                "ports": [
                    {"containerPort": RAY_PORT, "name": "gcs-server"},
                    {"containerPort": DASHBOARD_PORT, "name": "dashboard"},
                    {"containerPort": CLIENT_PORT, "name": "client"},
                ],
                "env": env,
                "resources": _resources(lay.head_cpus, lay.head_memory_gb),
                "volumeMounts": [config_mount, run_mount] + ckpt_mount + reward_mount + tools_mount,
            }],
            "volumes": [config_volume, run_volume, *ckpt_volume, *tools_volume],
        }},
    }
    if lay.prepare_data:
        head["template"]["spec"]["initContainers"] = [prepare]
    worker = {
        "groupName": WORKER_GROUP,
        "replicas": lay.nnodes,
        "minReplicas": lay.nnodes,
        "maxReplicas": lay.nnodes,
        "numOfHosts": 1,
        "rayStartParams": _worker_ray_params(lay),
        "template": {"spec": {
            "containers": [{
                "name": "ray-worker",
                "image": lay.image,
                "workingDir": WORKDIR,
                "env": env,
                "resources": _resources(lay.node_cpus, lay.node_memory_gb, lay.gpus_per_node, lay.k8s_resource),
                "volumeMounts": [run_mount] + ckpt_mount + shm_mount + reward_mount + tools_mount,
            }],
            "volumes": ([config_volume] if lay.reward_fn or lay.genrm_fn or lay.prepare_data == "every" else [])
            + [run_volume, *ckpt_volume, *shm_volume, *tools_volume],
        }},
    }
    if lay.prepare_data == "every":
        worker["template"]["spec"]["initContainers"] = [prepare]
    return {"headGroupSpec": head, "workerGroupSpecs": [worker]}


def _metadata(lay: Layout, name: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if lay.namespace:
        meta["namespace"] = lay.namespace
    meta["labels"] = {"app.kubernetes.io/managed-by": "verl-init", "app.kubernetes.io/instance": lay.name}
    return meta


def rayjob_doc(lay: Layout) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": _metadata(lay, lay.name),
        "spec": {
            "entrypoint": ENTRYPOINT,
            **({"runtimeEnvYAML": to_yaml(lay.runtime_env)} if lay.runtime_env else {}),
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": lay.ttl_seconds,
            "rayClusterSpec": raycluster_spec(lay),
        },
    }


def raycluster_doc(lay: Layout) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": _metadata(lay, lay.name),
            "spec": raycluster_spec(lay)}


def configmap_doc(lay: Layout, verl_config: str, extra: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The bundle's verl_config.yaml, and the bundle files the pods run (prepare_data.py, reward_fn.py)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _metadata(lay, lay.configmap_name),
            "data": {"verl_config.yaml": verl_config, **(extra or {})}}


def runtime_env_doc() -> dict[str, Any]:
    """ray/runtime_env.yaml: env for the driver and every worker; keeps run outputs out of the upload."""
    return {"env_vars": env_vars(), "excludes": ["checkpoints/", "outputs/", "wandb/", "tensorboard_log/"]}


def to_yaml(doc: Any) -> str:
    """YAML for manifests: renderer.dump_yaml's rules (control characters, NEL, U+2028 and trailing
    blanks only ever escaped in double quotes), except that a multi-line string that ends in line
    breaks, like the embedded verl_config.yaml, is still a readable literal block (|+)."""
    import yaml

    from wizard.renderer.yamlout import omegaconf_resolvers

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # shared sub-documents are written out, never as &anchors
            return True

    def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        lines = value.split("\n")
        style: Optional[str] = None
        if any(not line.isprintable() or line != line.rstrip() for line in lines):
            style = '"'
        elif len(lines) > 1:
            style = "|"
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    omegaconf_resolvers(_Dumper)  # a string OmegaConf would read as a number is quoted (1e3)
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=4096, default_flow_style=False)


def _verl_config_text(plan: Plan) -> str:
    """The bundle's verl_config.yaml, byte for byte (same template, same context as render())."""
    from wizard.renderer import render as renderer

    return renderer._env().get_template("verl_config.yaml.j2").render(**renderer.context(plan))


def configmap_key(path: str) -> str:
    """The ConfigMap key of a bundle file carried for the pods (keys take no '/': `verl_init_tools.gsm8k_tool.py`)."""
    return path.replace("/", ".")


def tools_dir(lay: Layout) -> str:
    """The bundle folder of the tool files (verl_init_tools)."""
    return posixpath.dirname(lay.tool_files[0])


def _pod_files(plan: Plan, lay: Layout) -> dict[str, str]:
    """The bundle's own data/prepare_data.py, reward/reward_fn.py and tool files, byte for byte, for the ConfigMap."""
    from wizard.renderer import render as renderer
    from wizard.renderer.artefacts import agent, data

    env, ctx = renderer._env(), renderer.context(plan)
    texts = {art.template: env.get_template(art.template).render(**{**ctx, **art.context})
             for art in [*data.artefacts(plan), *(agent.artefacts(plan) if lay.tool_files else [])]}
    out = {}
    if lay.prepare_data:
        out["prepare_data.py"] = texts["data/prepare_data.py.j2"]
    if lay.reward_fn:
        out["reward_fn.py"] = texts["reward/reward_fn.py.j2"]
    if lay.genrm_fn:
        out["genrm_fn.py"] = texts["reward/genrm_fn.py.j2"]
    for path in lay.tool_files:
        out[configmap_key(path)] = texts[path + ".j2"]
    return out


def configmap_problem(doc: dict[str, Any]) -> Optional[Problem]:
    """VI767: the ConfigMap is over Kubernetes' 1 MiB (the bytes of its values), so `kubectl apply` is refused."""
    sizes = {key: len(str(value).encode("utf-8")) for key, value in (doc.get("data") or {}).items()}
    total = sum(sizes.values())
    if total <= CONFIGMAP_MAX_BYTES:
        return None
    biggest = sorted(sizes, key=lambda k: -sizes[k])
    shown = ", ".join(f"{k} {sizes[k]}" for k in biggest[:3])
    fix = ("a long system_prompt or instruction is written into prepare_data.py: shorten it, or use a local dataset "
           "file with shared_pvc=<a ReadWriteMany PVC> (data/prepare_data.py then runs on this machine and its output "
           "goes onto the PVC, so the ConfigMap does not carry it)" if biggest[0] == "prepare_data.py"
           else f"shrink {biggest[0]}, or put the files on shared_pvc=<a ReadWriteMany PVC> instead")
    return Problem("VI767", "error", ("cluster",),
                   f"k8s/configmap.yaml would hold {total} bytes of files ({shown} bytes): Kubernetes refuses a "
                   f"ConfigMap over {CONFIGMAP_MAX_BYTES} bytes (1 MiB), so the pods would get none of them", fix)


# --- notes placed as comments -------------------------------------------------------------------


def _k8s_notes(lay: Layout, plan: Plan) -> list[str]:
    ns = f" -n {lay.namespace}" if lay.namespace else ""
    shm = f"{lay.shm_size_gb} GB (shm_size_gb)." if lay.shm_size_gb else "mounted by KubeRay."
    secrets = ", ".join(f"{k} ({'optional' if opt else 'required'})" for k, opt in lay.secret_env)
    literals = " ".join(f"--from-literal={k}=..." for k, _ in lay.secret_env)
    folder = (f"PVC {lay.shared_pvc}, shared by every pod" if lay.shared_pvc
              else "pod-local emptyDir, lost with the pod: set shared_pvc to share data and outputs")
    notes = [
        (f"{lay.nnodes} GPU worker pod(s) × {lay.gpus_per_node} {lay.k8s_resource} = {lay.n_gpus} GPUs = trainer.nnodes × "
         f"trainer.n_gpus_per_node ({lay.nnodes - lay.judge_nodes} × {lay.gpus_per_node})"
         + (f" + {lay.judge_nodes} node(s) for the judge's own pool (reward.reward_model.nnodes)" if lay.judge_nodes else "")
         + "; one worker pod per node."),
        (f"Worker pod: {lay.node_cpus} CPUs ({lay.node_cpus_reason}); {lay.node_memory_gb} GB "
         f"({lay.node_memory_reason}); /dev/shm {shm}"),
        (f"Head pod: no GPU, {lay.head_cpus} CPUs, {lay.head_memory_gb} GB; Ray sees {lay.total_cpus} logical CPUs, "
         f"verl needs ≥ {CPUS_PER_GPU_BUNDLE} × {lay.n_gpus} + {TRANSFER_QUEUE_CPUS} = {lay.cpus_needed}."),
        f"Image: {lay.image} ({lay.image_reason}).",
        f"Name: {lay.name} ({lay.name_reason}).",
        f"Secrets come only from Secret {lay.secret}: {secrets}. Create it with",
        f"  kubectl{ns} create secret generic {lay.secret} {literals}",
        (f"Working folder of every pod: {WORKDIR} ({folder}); relative paths in the config resolve there "
         "(data files, trainer.default_local_dir for checkpoints, Hydra's outputs/)."),
    ]
    files = [str(p) for p in (plan.value("data.train_files"), plan.value("data.val_files")) if "://" not in str(p)]
    files = [f.replace("${oc.env:HOME}", "$HOME") for f in dict.fromkeys(files)]
    relative = [f for f in files if not f.startswith(("/", "$HOME"))]
    for where in files:
        if where not in relative:
            notes.append(f"The config reads {where} in the pods: bake it into the image or mount a volume there.")
    if relative:  # the same explanation as PLAN.md's Data section
        from wizard.renderer.render import data_where

        notes += [line.replace("`", "") for line in data_where("kuberay", lay.shared_pvc, relative,
                                                              lay.dataset_hub or None)]
    if lay.checkpoint_pvc:
        notes.append(f"Checkpoints: PVC {lay.checkpoint_pvc} (checkpoint_pvc) is mounted at {lay.checkpoint_dir} in "
                     "every pod; it must exist in the namespace and be ReadWriteMany (every pod writes its shards).")
    if lay.reward_fn:
        notes.append(f"reward/reward_fn.py (the config's custom reward function) comes from the ConfigMap, mounted "
                     f"at {WORKDIR}/{REWARD_FN} in every pod.")
    if lay.genrm_fn:
        notes.append(f"reward/genrm_fn.py (the judge function) comes from the ConfigMap, mounted at {WORKDIR}/{GENRM_FN} "
                     "in every pod.")
    if lay.tool_files:
        notes.append(f"{tools_dir(lay)}/ (the tool config and tool module of verl's tool agent loop) comes from the "
                     f"ConfigMap, mounted at {WORKDIR}/{tools_dir(lay)} in every pod: verl's agent-loop workers open "
                     f"{tools_dir(lay)}/tool_config.yaml and import the tool there.")
    return [one_line(n) for n in notes]


def _apply_line(lay: Layout, *files: str) -> str:
    ns = f" -n {lay.namespace}" if lay.namespace else ""
    return "kubectl" + ns + " apply " + " ".join(f"-f {f}" for f in files)


# --- the provider --------------------------------------------------------------------------------


def artefacts(plan: Plan) -> list[Artefact]:
    from wizard.renderer.render import Artefact

    cluster = plan.answers.cluster
    if cluster == "local":
        return []
    problems = [p for p in cluster_problems(plan) if p.severity == "error"]
    if problems:
        raise WizardError(problems)
    lay = layout(plan)
    a = plan.answers
    common = {
        "lay": lay,
        "heading": one_line(f"{a.algorithm} on {plan.value('actor_rollout_ref.model.path')} ({a.nnodes}×{a.gpus_per_node} GPUs, cluster: {cluster})"),
        "total_gpus": lay.n_gpus,
        "env_pairs": list(env_vars().items()),
        "env_notes": list(VERL_ENV),
    }
    if cluster == "kuberay":
        notes = _k8s_notes(lay, plan)
        cm = configmap_doc(lay, _verl_config_text(plan), _pod_files(plan, lay))
        too_big = configmap_problem(cm)
        if too_big is not None:
            raise WizardError([too_big])
        from wizard.planner import sandbox

        before = [sandbox.K8S_FILE] if sandbox.renders_service(plan.facts) else []  # services the job needs first
        return [
            Artefact("k8s/configmap.yaml.j2", {
                **common, "doc_yaml": to_yaml(cm), "config_mount": CONFIG_MOUNT,
            }),
            Artefact("k8s/rayjob.yaml.j2", {
                **common, "notes": notes, "doc_yaml": to_yaml(rayjob_doc(lay)),
                "apply_line": _apply_line(lay, *before, "k8s/configmap.yaml", "k8s/rayjob.yaml"),
                "entrypoint": ENTRYPOINT,
            }),
            Artefact("k8s/raycluster.yaml.j2", {
                **common, "notes": notes, "doc_yaml": to_yaml(raycluster_doc(lay)),
            }),
            Artefact("k8s/submit.sh.j2", {
                **common, "namespace": lay.namespace or "", "entrypoint_args": ENTRYPOINT.split(),
                "runtime_env_json": json.dumps(lay.runtime_env, separators=(",", ":")) if lay.runtime_env else "",
                "config_mount": CONFIG_MOUNT,
                "dashboard_port": DASHBOARD_PORT,
                "required_secrets": [k for k, opt in lay.secret_env if not opt],
                "services": [{"file": f, "deployment": sandbox.SERVICE} for f in before],
            }),
        ]
    if cluster == "slurm":
        sbatch = [
            f"--job-name={lay.name}",
            f"--nodes={lay.nnodes}",
            "--ntasks-per-node=1",
            lay.slurm_devices,
            f"--cpus-per-task={lay.node_cpus}",
            f"--mem={lay.node_memory_gb * 10**9 // 2**20}M",  # GB → Slurm's MiB
            "--output=slurm-%x-%j.out",
        ]
        if a.slurm_partition:
            sbatch.append(f"--partition={a.slurm_partition}")
        if a.slurm_account:
            sbatch.append(f"--account={a.slurm_account}")
        if a.slurm_time:
            sbatch.append(f"--time={a.slurm_time}")
        return [Artefact("slurm/job.sbatch.j2", {
            **common, "sbatch_options": sbatch, "image": a.image or "", "ray_port": RAY_PORT,
            "cpu_note": one_line(f"{lay.node_cpus} CPUs per node: {lay.node_cpus_reason}. Ray gets them all: "
                                 f"{lay.nnodes} × {lay.node_cpus} = {lay.total_cpus} ≥ {lay.cpus_needed} "
                                 f"({CPUS_PER_GPU_BUNDLE} per GPU + {TRANSFER_QUEUE_CPUS} for TransferQueue)."),
            "memory_note": one_line(f"--mem: {lay.node_memory_gb} GB per node ({lay.node_memory_reason})."),
        })]
    if cluster == "ray":
        return [
            Artefact("ray/runtime_env.yaml.j2", {**common, "doc_yaml": to_yaml(runtime_env_doc())}),
            Artefact("ray/submit.sh.j2", {**common, "submission_prefix": lay.name,
                                          "min_cpus": lay.cpus_needed}),
        ]
    return []
