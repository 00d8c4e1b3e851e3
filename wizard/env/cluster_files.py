"""A bundle's Kubernetes manifests against its plan (`verl-init check --mode cluster`, wizard.env.cluster): the
RayCluster / RayJob pods' GPUs and CPUs, where their data and checkpoints live, and the tool files the pods read.

Only the standard library is imported at module level (the CLI's --help stays fast).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from wizard.intent.errors import Problem

CPUS_PER_GPU_BUNDLE = 3  # verl single_controller/ray/base.py:146
RAYJOB_NAME_MAX = 47
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Env names that hold secrets: a whole `_`-separated part is KEY, TOKEN, SECRET, ... (not TOKENIZERS_...).
SECRET_LIKE = re.compile(r"(^|_)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)", re.IGNORECASE)


def _select(doc: Any, dotted: str) -> Any:
    node = doc
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _containers(pod_template: Any) -> list[dict[str, Any]]:
    spec = (pod_template or {}).get("spec") or {}
    return list(spec.get("containers") or []) + list(spec.get("initContainers") or [])


def _quantity(value: Any) -> Optional[float]:
    """CPU / GPU quantities as numbers ('4', 4, '500m'); None when absent or unreadable."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        return float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        return None


def _device_name(amounts: dict[str, Any]) -> str | None:
    """The accelerator resource (nvidia.com/gpu, amd.com/gpu, huawei.com/Ascend910) a container's requests/limits name."""
    from wizard.verlspec.hardware import ACCELERATORS

    return next((acc.k8s_resource for acc in ACCELERATORS.values() if acc.k8s_resource in amounts), None)


def _device_amount(amounts: dict[str, Any]) -> Any:
    name = _device_name(amounts)
    return amounts.get(name) if name else None


def manifest_problems(doc: Any, nnodes: int, gpus_per_node: int, *, source: str = "manifest") -> list[Problem]:
    """Rules a KubeRay RayJob / RayCluster must keep that its CRD schema cannot express (VI730-VI736)."""
    out: list[Problem] = []
    if not isinstance(doc, dict) or doc.get("kind") not in ("RayJob", "RayCluster"):
        return out
    kind = doc["kind"]
    name = str((doc.get("metadata") or {}).get("name", ""))
    limit = RAYJOB_NAME_MAX if kind == "RayJob" else 63
    if not DNS1035.match(name) or len(name) > limit:
        out.append(Problem("VI730", "error", (source, "metadata.name"),
                           f"{kind} name {name!r} must be a DNS-1035 label of at most {limit} characters",
                           "lower-case letters, digits and '-', starting with a letter (set job_name)"))
    spec = doc.get("spec") or {}
    cluster = spec.get("rayClusterSpec") if kind == "RayJob" else spec
    if kind == "RayJob" and (spec.get("shutdownAfterJobFinishes") is not True
                             or "ttlSecondsAfterFinished" not in spec):
        out.append(Problem("VI736", "error", (source, "spec.shutdownAfterJobFinishes"),
                           "the RayJob keeps its GPUs after the job ends",
                           "set shutdownAfterJobFinishes: true and ttlSecondsAfterFinished"))
    if not isinstance(cluster, dict):
        if kind == "RayJob" and spec.get("clusterSelector"):
            return out  # runs on an existing cluster: nothing to count here
        out.append(Problem("VI731", "error", (source,), f"{kind} has no cluster spec", "re-render the bundle"))
        return out
    head_tpl = (cluster.get("headGroupSpec") or {}).get("template")
    for c in _containers(head_tpl):
        res = c.get("resources") or {}
        gpus = max(_quantity(_device_amount(res.get("limits") or {})) or 0,
                   _quantity(_device_amount(res.get("requests") or {})) or 0)
        if gpus:
            out.append(Problem("VI735", "error", (source, "headGroupSpec"),
                               f"the head pod asks for {gpus:g} GPU(s); verl's GPU pool lives on the worker pods",
                               "keep the head GPU-less"))
    head_params = (cluster.get("headGroupSpec") or {}).get("rayStartParams") or {}
    if str(head_params.get("num-gpus", "0")) not in ("0", "0.0"):
        out.append(Problem("VI735", "error", (source, "headGroupSpec.rayStartParams.num-gpus"),
                           "the head advertises GPUs to Ray", "set num-gpus: '0' on the head"))
    total = 0.0
    groups = cluster.get("workerGroupSpecs") or []
    for g in groups:
        gname = g.get("groupName", "?")
        replicas = g.get("replicas", 0)
        hosts = g.get("numOfHosts", 1)
        if not (g.get("minReplicas") == replicas == g.get("maxReplicas")) or hosts != 1:
            out.append(Problem("VI731", "error", (source, f"workerGroupSpecs[{gname}]"),
                               f"worker group {gname} must have replicas = minReplicas = maxReplicas and numOfHosts 1 "
                               f"(got {g.get('minReplicas')}/{replicas}/{g.get('maxReplicas')}, {hosts})",
                               "a fixed set of one pod per node keeps the GPU count equal to the plan"))
        pod_gpus = 0.0
        for c in _containers(g.get("template")):
            res = c.get("resources") or {}
            req, lim = res.get("requests") or {}, res.get("limits") or {}
            g_req, g_lim = _quantity(_device_amount(req)), _quantity(_device_amount(lim))
            if (g_req or g_lim) and g_req != g_lim:
                out.append(Problem("VI731", "error", (source, f"workerGroupSpecs[{gname}]"),
                                   f"container {c.get('name')} requests {g_req} but limits {g_lim} "
                                   f"{_device_name(req) or _device_name(lim)}",
                                   "GPU requests must equal limits"))
            gpus = g_lim or g_req or 0
            pod_gpus += gpus
            cpus = _quantity(lim.get("cpu")) or _quantity(req.get("cpu"))
            if gpus and (cpus is None or cpus < CPUS_PER_GPU_BUNDLE * gpus + 1):
                out.append(Problem(
                    "VI732", "error", (source, f"workerGroupSpecs[{gname}]"),
                    f"container {c.get('name')} has {cpus if cpus is not None else 'no'} CPUs for {gpus:g} GPUs; "
                    f"verl asks Ray for {CPUS_PER_GPU_BUNDLE} per GPU + 1",
                    f"give it ≥ {CPUS_PER_GPU_BUNDLE * int(gpus) + 1} CPUs"))
        if pod_gpus and pod_gpus != gpus_per_node:
            out.append(Problem("VI731", "error", (source, f"workerGroupSpecs[{gname}]", "trainer.n_gpus_per_node"),
                               f"worker group {gname} pods have {pod_gpus:g} GPUs, the config {gpus_per_node} per node",
                               "one worker pod per node with trainer.n_gpus_per_node GPUs"))
        total += pod_gpus * (replicas or 0)
    if total != nnodes * gpus_per_node:
        out.append(Problem("VI731", "error", (source, "trainer.nnodes", "trainer.n_gpus_per_node"),
                           f"the worker groups carry {total:g} GPUs, the config needs {nnodes} × {gpus_per_node} = "
                           f"{nnodes * gpus_per_node}", "re-render the bundle so both come from one plan"))
    for tpl in [head_tpl] + [g.get("template") for g in groups]:
        for c in _containers(tpl):
            for e in c.get("env") or []:
                ename = str(e.get("name", ""))
                if ename == "CUDA_VISIBLE_DEVICES":
                    out.append(Problem("VI734", "error", (source, f"container {c.get('name')}"),
                                       "CUDA_VISIBLE_DEVICES is set by hand; Ray assigns GPUs to verl's workers",
                                       "remove it"))
                elif SECRET_LIKE.search(ename) and "value" in e:
                    out.append(Problem("VI733", "error", (source, f"container {c.get('name')}", ename),
                                       f"{ename} is written inline in the manifest",
                                       "read it from a Secret: valueFrom.secretKeyRef"))
            for src in c.get("envFrom") or []:
                if "configMapRef" in src:
                    out.append(Problem("VI733", "warning", (source, f"container {c.get('name')}"),
                                       "environment from a ConfigMap: secrets belong in a Secret",
                                       "use secretRef / secretKeyRef for keys and tokens"))
    return out


def _pod_local(path: str, tpl: Any) -> bool:
    """No PersistentVolumeClaim is mounted at `path` or a folder above it in this pod template."""
    spec = (tpl or {}).get("spec") or {}
    volumes = {v.get("name"): v for v in spec.get("volumes") or [] if isinstance(v, dict)}
    for c in spec.get("containers") or []:
        for m in c.get("volumeMounts") or []:
            mount = str(m.get("mountPath", "")).rstrip("/") or "/"
            if (path == mount or path.startswith(mount.rstrip("/") + "/")) and \
                    "persistentVolumeClaim" in (volumes.get(m.get("name")) or {}):
                return False
    return True


def ray_cluster_spec(doc: Any) -> Optional[dict]:
    """The RayCluster spec of a KubeRay RayJob (its rayClusterSpec) or RayCluster; None for any other document."""
    if not isinstance(doc, dict) or doc.get("kind") not in ("RayJob", "RayCluster"):
        return None
    spec = doc.get("spec") or {}
    cluster = spec.get("rayClusterSpec") if doc["kind"] == "RayJob" else spec
    return cluster if isinstance(cluster, dict) else None


def pod_storage_problems(doc: Any, config: Mapping[str, Any], *, source: str = "manifest") -> list[Problem]:
    """Where a KubeRay RayJob / RayCluster's pods find the config's data files and keep its checkpoints
    (VI759, VI760): relative paths resolve in each pod's working folder, lost with the pod unless a PVC is there."""
    out: list[Problem] = []
    cluster = ray_cluster_spec(doc)
    if cluster is None:
        return out
    head = (cluster.get("headGroupSpec") or {}).get("template")
    templates = [head] + [g.get("template") for g in cluster.get("workerGroupSpecs") or [] if isinstance(g, dict)]
    workdir = next((str(c.get("workingDir")) for c in ((head or {}).get("spec") or {}).get("containers") or []
                    if c.get("workingDir")), "/")
    files: list[str] = []
    for key in ("data.train_files", "data.val_files"):
        value = _select(config, key)
        for path in ([value] if isinstance(value, str) else value if isinstance(value, list) else []):
            if isinstance(path, str) and not path.startswith(("/", "$", "~")) and "://" not in path:
                files.append(path)
    files = list(dict.fromkeys(files))
    prepared = all(any(i.get("name") == "prepare-data" for i in ((t or {}).get("spec") or {}).get("initContainers") or [])
                   for t in templates)
    lost = [t for t in templates if _pod_local(posixpath.join(workdir, files[0]) if files else workdir, t)]
    if files and lost and not prepared:
        out.append(Problem(
            "VI759", "error", (source, "data.train_files", "data.val_files"),
            f"the pods read {', '.join(files)} from their working folder {workdir}, which is pod-local, and no init "
            "container prepares them there: running data/prepare_data.py on this machine does not reach the pods",
            "re-render with shared_pvc=<a ReadWriteMany PVC> and copy the data onto it, or dataset=gsm8k / math "
            "(prepared in the pods)"))
    save_freq = _select(config, "trainer.save_freq")
    if isinstance(save_freq, int) and not isinstance(save_freq, bool) and save_freq > 0:
        ckpt = str(_select(config, "trainer.default_local_dir") or "checkpoints/${trainer.project_name}")
        fixed = ckpt.split("${", 1)[0].rstrip("/") or "."
        where = fixed if fixed.startswith("/") else posixpath.normpath(posixpath.join(workdir, fixed))
        if any(_pod_local(where, t) for t in templates):
            out.append(Problem(
                "VI760", "error", (source, "trainer.save_freq", "trainer.default_local_dir"),
                f"trainer.save_freq={save_freq} writes checkpoints to {where}, pod-local storage: they are lost "
                "when the pods go", "re-render with checkpoint_pvc=<a ReadWriteMany PVC> or shared_pvc=<PVC> "
                "(or save_freq=-1)"))
    return out


TOOL_CONFIG_KEY = "actor_rollout_ref.rollout.multi_turn.tool_config_path"


MAX_BUNDLE_FILE_BYTES = 1024 * 1024  # a tool config or module read from a bundle (a ConfigMap holds at most 1 MiB)


def _bounded_yaml(path: Optional[Path], text: Optional[str] = None) -> Any:
    """A bundle's YAML read with wizard._io's bounds (a regular file of at most 16 MiB, aliases expanding to at
    most a million values, nesting); what passes a bound is a yaml.YAMLError here, as invalid YAML is."""
    import yaml

    from wizard._io import UnsafeInput, read_user_file, safe_yaml

    try:
        if text is None:
            text = read_user_file(str(path)).decode("utf-8")
        return safe_yaml(text, unique_keys=False)
    except UnsafeInput as exc:
        raise yaml.YAMLError(str(exc)) from None


def _bounded_yaml_all(path: Path) -> list[Any]:
    """Every document of a multi-document bundle YAML (a k8s manifest), each bounded as _bounded_yaml."""
    import yaml

    from wizard._io import UnsafeInput, read_user_file

    try:
        text = read_user_file(str(path)).decode("utf-8")
    except UnsafeInput as exc:
        raise yaml.YAMLError(str(exc)) from None
    return [_bounded_yaml(None, part) for part in re.split(r"(?m)^---[ \t]*$", text)]


def _read_small(path: Path) -> Optional[str]:
    """A bundle file's text, or None when it is missing, not a regular file, over 1 MiB or not UTF-8."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_BUNDLE_FILE_BYTES:
            return None
        with open(path, "rb") as fh:
            return fh.read(MAX_BUNDLE_FILE_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _pod_source(path: str, tpl: Any) -> tuple[str, str, str]:
    """Where the Ray container of a pod template finds the absolute `path`: ("configmap", ConfigMap name, key),
    ("pvc", claim, ""), or ("pod-local", volume or "", "") for an emptyDir, an image folder or anything else."""
    spec = (tpl or {}).get("spec") or {}
    volumes = {v.get("name"): v for v in spec.get("volumes") or [] if isinstance(v, dict)}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    mounts = [m for m in (containers[0].get("volumeMounts") or [] if containers else []) if isinstance(m, dict)]
    covering = [m for m in mounts if path == str(m.get("mountPath", "")).rstrip("/")
                or path.startswith(str(m.get("mountPath", "")).rstrip("/") + "/")]
    if not covering:
        return "pod-local", "", ""
    m = max(covering, key=lambda x: len(str(x.get("mountPath", ""))))
    rel = path[len(str(m["mountPath"]).rstrip("/")) + 1:]
    rel = posixpath.join(str(m["subPath"]), rel).rstrip("/") if m.get("subPath") else rel
    vol = volumes.get(m.get("name")) or {}
    if isinstance(vol.get("configMap"), dict):
        cm = vol["configMap"]
        items = cm.get("items")
        if isinstance(items, list):
            key = next((str(i.get("key")) for i in items if isinstance(i, dict) and i.get("path") == rel), "")
        else:
            key = rel if "/" not in rel else ""
        return ("configmap", str(cm.get("name", "")), key) if key else ("pod-local", str(m.get("name")), "")
    if isinstance(vol.get("persistentVolumeClaim"), dict):
        return "pvc", str(vol["persistentVolumeClaim"].get("claimName", "")), ""
    return "pod-local", str(m.get("name", "")), ""


def _tool_paths(config: Mapping[str, Any], bundle: Optional[Path]) -> list[str]:
    """The files of a multi-turn config that verl's agent-loop workers read relative to their working folder: the
    tool config, and (from the bundle's copy of it) the modules of its classes that the bundle folder holds."""
    import yaml

    if _select(config, "actor_rollout_ref.rollout.multi_turn.enable") is not True:
        return []
    tool_config = _select(config, TOOL_CONFIG_KEY)
    if not isinstance(tool_config, str) or not tool_config or tool_config.startswith(("/", "$", "~")):
        return []
    out = [posixpath.normpath(tool_config)]
    text = _read_small(bundle / tool_config) if bundle is not None else None
    try:
        tools = (_bounded_yaml(None, text) or {}).get("tools") if text else None
    except (yaml.YAMLError, AttributeError):
        tools = None
    for tool in tools if isinstance(tools, list) else []:
        module = str((tool or {}).get("class_name", "")).rpartition(".")[0] if isinstance(tool, dict) else ""
        for candidate in (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py"):
            if module and bundle is not None and (bundle / candidate).is_file():
                out.append(candidate)
                break
    return out


def pod_tool_problems(doc: Any, config: Mapping[str, Any], bundle: Optional[Path] = None, *,
                      source: str = "manifest", configmap: Optional[Mapping[str, Any]] = None) -> list[Problem]:
    """VI768: a multi-turn config's tool files (tool_config_path, relative to the working folder, and the bundle's
    tool module) must reach every pod of a KubeRay RayJob / RayCluster: from a ConfigMap projected there, or a PVC.
    VI769: the bundle's k8s/configmap.yaml (`configmap`) carries another copy of them than the bundle folder."""
    out: list[Problem] = []
    cluster = ray_cluster_spec(doc)
    paths = _tool_paths(config, bundle) if cluster is not None else []
    if cluster is None or not paths:
        return out
    head = (cluster.get("headGroupSpec") or {}).get("template")
    groups = [("head", head)] + [(str(g.get("groupName", "workers")), g.get("template"))
                                 for g in cluster.get("workerGroupSpecs") or [] if isinstance(g, dict)]
    workdir = next((str(c.get("workingDir")) for c in ((head or {}).get("spec") or {}).get("containers") or []
                    if isinstance(c, dict) and c.get("workingDir")), "/")
    data = (configmap or {}).get("data") if isinstance(configmap, Mapping) else None
    missing: dict[str, list[str]] = {}
    drift: dict[str, str] = {}
    for path in paths:
        where = posixpath.join(workdir, path)
        for group, tpl in groups:
            kind, name, key = _pod_source(where, tpl)
            if kind == "pod-local":
                missing.setdefault(path, []).append(group)
            elif kind == "configmap" and isinstance(data, Mapping) and bundle is not None and \
                    name == ((configmap or {}).get("metadata") or {}).get("name"):
                own = _read_small(bundle / path)
                if key not in data:
                    missing.setdefault(path, []).append(f"{group} (k8s/configmap.yaml has no key {key})")
                elif own is not None and data[key] != own:
                    drift[path] = key
    for path, groups_missing in missing.items():
        out.append(Problem(
            "VI768", "error", (source, TOOL_CONFIG_KEY),
            f"the pods of {', '.join(dict.fromkeys(groups_missing))} open {path} in their working folder {workdir}, "
            "where no ConfigMap or PVC puts it: verl's agent-loop workers cannot load the tools",
            "re-render the bundle with verl-init (its ConfigMap carries the tool files to every pod), or copy them "
            "onto shared_pvc=<PVC> mounted there"))
    for path, key in drift.items():
        out.append(Problem(
            "VI769", "error", ("k8s/configmap.yaml", path),
            f"k8s/configmap.yaml carries another {path} (key {key}) than the bundle folder: the pods run the "
            "ConfigMap's copy",
            f"put the bundle's {path} into k8s/configmap.yaml under key {key}, or undo the edit"))
    return out
