"""What to run after a bundle is written, per cluster type (printed by the CLI and the wizard)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .planner import Plan


def next_commands(the_plan: "Plan", out: str, ray_url: str | None = None) -> list[str]:
    a = the_plan.answers
    cd = f"cd {shlex.quote(out)}"
    prep = "python3 data/prepare_data.py"
    if a.cluster == "ray":
        return [f"{cd} && {prep} && ray/submit.sh --address {shlex.quote(ray_url or 'http://HEAD:8265')}"]
    if a.cluster == "slurm":
        return [f"{cd} && {prep} && sbatch slurm/job.sbatch"]
    if a.cluster == "kuberay":
        ns = f" -n {a.k8s_namespace}" if a.k8s_namespace else ""
        return [f"{cd} && kubectl{ns} apply -f k8s/configmap.yaml -f k8s/rayjob.yaml",
                "   (or k8s/submit.sh for a long-lived RayCluster; data and secrets: see PLAN.md)"]
    return [f"{cd} && {prep} && ./run.sh"]
