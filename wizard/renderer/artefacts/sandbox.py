"""Bundle files for reward=sandbox on KubeRay (see renderer.ARTEFACT_PROVIDERS): `k8s/sandbox-fusion.yaml`, a
SandboxFusion Deployment and the Service `sandbox-fusion` that verl's reward workers in the pods reach, rendered when
sandbox_url names that Service (wizard.planner.sandbox.in_cluster_url; VI761 refuses a loopback URL on KubeRay and
names it as the fix). A sandbox_url elsewhere (a service outside the cluster) renders nothing: the pods must reach it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from wizard.planner import sandbox

if TYPE_CHECKING:
    from wizard.planner.state import Plan
    from wizard.renderer.render import Artefact

NAME = sandbox.SERVICE  # the Service name sandbox_url points at (fixed: one sandbox per namespace)
FILE = sandbox.K8S_FILE
CPUS = 8  # programs the pod runs at once, one CPU each; verl's further calls wait in the server's queue
SERVER_MEMORY_GB = 2  # the SandboxFusion server itself (FastAPI workers, the runtimes' interpreters)


def enabled(plan: "Plan") -> bool:
    return sandbox.renders_service(plan.facts)


def sizing(memory_mb: int) -> dict[str, Any]:
    """CPU and memory of the sandbox pod: CPUS programs at once, each up to memory_mb, plus the server."""
    memory_gb = math.ceil(CPUS * memory_mb / 1024) + SERVER_MEMORY_GB
    return {"cpus": CPUS, "memory_gb": memory_gb,
            "why": f"{CPUS} programs at once × {memory_mb} MB (reward.sandbox_fusion.memory_limit_mb) + "
                   f"{SERVER_MEMORY_GB} GB for the server"}


def docs(plan: "Plan") -> tuple[dict[str, Any], dict[str, Any]]:
    """(Deployment, Service) of the in-cluster sandbox."""
    from wizard.renderer.artefacts.cluster import _metadata, layout

    lay = layout(plan)
    size = sizing(plan.facts["sandbox"]["memory_mb"])
    labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/instance": lay.name}
    meta = _metadata(lay, NAME)
    meta["labels"] = {**meta["labels"], **labels}
    res = {"cpu": str(size["cpus"]), "memory": f"{size['memory_gb']}Gi"}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{
                    "name": NAME,
                    "image": sandbox.SANDBOX_IMAGE,
                    "ports": [{"name": "http", "containerPort": sandbox.SANDBOX_PORT, "protocol": "TCP"}],
                    "resources": {"requests": res, "limits": res},
                    "readinessProbe": {"tcpSocket": {"port": sandbox.SANDBOX_PORT}, "periodSeconds": 5},
                }]},
            },
        },
    }
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": meta,
        "spec": {"selector": labels, "ports": [{"name": "http", "port": sandbox.SANDBOX_PORT,
                                                  "targetPort": sandbox.SANDBOX_PORT, "protocol": "TCP"}]},
    }
    return deployment, service


def artefacts(plan: "Plan") -> "list[Artefact]":
    from wizard.renderer.artefacts.cluster import one_line, to_yaml
    from wizard.renderer.render import Artefact

    if not enabled(plan):
        return []
    deployment, service = docs(plan)
    fx = plan.facts["sandbox"]
    size = sizing(fx["memory_mb"])
    notes = [one_line(n) for n in (
        f"verl's reward workers post every test case to {fx['url']} (reward.sandbox_fusion.url): this Service.",
        f"Pod: {size['cpus']} CPUs, {size['memory_gb']} GiB ({size['why']}); verl keeps up to {fx['workers']} reward "
        f"workers × {fx['max_concurrent']} = {fx['in_flight']} calls in flight, which queue here: raise replicas "
        "(the Service spreads calls) if the reward phase is slow.",
        f"Image: {sandbox.SANDBOX_IMAGE} (SandboxFusion's server, port {sandbox.SANDBOX_PORT}); it runs untrusted "
        "programs: keep it away from secrets, and restrict who reaches it with a NetworkPolicy (verl's client sends no "
        "credentials).",
    )]
    return [Artefact("k8s/sandbox-fusion.yaml.j2", {"notes": notes, "deployment_yaml": to_yaml(deployment),
                                                     "service_yaml": to_yaml(service)})]
