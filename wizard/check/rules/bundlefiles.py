"""Bundle cluster files against the config (VI879): `check BUNDLE` reads the cluster files beside verl_config.yaml
and flags those that disagree with it — a KubeRay RayJob/RayCluster whose GPU worker pods hold another number of
GPUs than trainer.nnodes × trainer.n_gpus_per_node (plus a reward model's own pool), a ConfigMap carrying another
verl_config.yaml (another model, other GPU counts), a Slurm job asking for another number of nodes. Such files are
left over from an earlier render (or edited by hand): applying them runs another job than the config describes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from wizard.check.rules.context import Ctx, Facts

MAX_BYTES = 4 << 20


def _read(path: Path) -> str | None:
    try:
        if not path.is_file() or path.is_symlink():
            return None
        with open(path, "rb") as fh:
            return fh.read(MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


def _docs(text: str) -> list[Any]:
    import yaml

    try:
        return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except Exception:  # noqa: BLE001 - an unreadable manifest is kubectl's to refuse
        return []


def _worker_gpus(doc: dict[str, Any]) -> int | None:
    spec = doc.get("spec") or {}
    cluster = spec.get("rayClusterSpec") if doc.get("kind") == "RayJob" else spec
    groups = (cluster or {}).get("workerGroupSpecs")
    if not isinstance(groups, list):
        return None
    total = 0
    for g in groups:
        try:
            replicas = int(g.get("replicas", 1)) * int(g.get("numOfHosts", 1))
            gpus = 0
            for c in g["template"]["spec"]["containers"]:
                limits = (c.get("resources") or {}).get("limits") or {}
                gpus += sum(int(v) for k, v in limits.items() if str(k).endswith("/gpu"))
            total += replicas * gpus
        except (KeyError, TypeError, ValueError):
            return None
    return total


def rule_bundle_files(c: Ctx, f: Facts) -> None:
    bundle = c.src.bundle_dir
    if bundle is None:
        return
    nnodes, per_node = c.int("trainer.nnodes"), c.int("trainer.n_gpus_per_node")
    if not nnodes or not per_node:
        return
    expected, rm_nodes = nnodes * per_node, 0
    if c.v("reward.reward_model.enable") and c.v("reward.reward_model.enable_resource_pool"):
        rm_nodes = c.int("reward.reward_model.nnodes") or 0
        expected += rm_nodes * (c.int("reward.reward_model.n_gpus_per_node") or 0)
    keys = ("trainer.nnodes", "trainer.n_gpus_per_node")
    for name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml"):
        text = _read(bundle / name)
        for doc in _docs(text) if text else []:
            gpus = _worker_gpus(doc)
            if gpus is not None and gpus != expected:
                c.add("VI879", "error", keys, f"{name} gives its GPU worker pods {gpus} GPU(s), but verl_config.yaml "
                      f"needs {expected} (trainer.nnodes × trainer.n_gpus_per_node = {nnodes} × {per_node}"
                      + (f", plus the reward model's {rm_nodes} node(s)" if rm_nodes else "") + ")",
                      "re-render the bundle (verl-init --answers verl-init.yaml --out <folder> --force); a file "
                      "left from an earlier render describes another job")
    config = _read(bundle / "verl_config.yaml")
    cm = _read(bundle / "k8s" / "configmap.yaml")
    if config is not None and cm is not None:
        for doc in _docs(cm):
            carried = (doc.get("data") or {}).get("verl_config.yaml") if doc.get("kind") == "ConfigMap" else None
            if isinstance(carried, str) and carried.strip() != config.strip():
                model = re.search(r"^\s+path:\s*(\S+)", carried, re.M)
                c.add("VI879", "error", ("actor_rollout_ref.model.path", *keys),
                      "k8s/configmap.yaml carries another verl_config.yaml than the bundle's" +
                      (f" (its model path: {model.group(1)})" if model else "") + ": the pods would run that one",
                      "re-render the bundle with --force (the ConfigMap is verl_config.yaml byte for byte)")
    sbatch = _read(bundle / "slurm" / "job.sbatch")
    found = re.search(r"^#SBATCH\s+--nodes=(\d+)", sbatch or "", re.M)
    if found and int(found.group(1)) != nnodes + rm_nodes:
        c.add("VI879", "error", ("trainer.nnodes",), f"slurm/job.sbatch asks for {found.group(1)} node(s), but "
              f"verl_config.yaml needs {nnodes + rm_nodes} (trainer.nnodes"
              + (" plus the reward model's pool" if rm_nodes else "") + ")", "re-render the bundle with --force")
