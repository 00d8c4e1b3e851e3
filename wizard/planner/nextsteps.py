"""What to run after a bundle is written, per cluster type (printed by the CLI and the wizard)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wizard.planner.pipeline import Plan


def _join(*parts: str) -> str:
    return " && ".join(p for p in parts if p)


def launch_commands(the_plan: "Plan", ray_url: str | None = None) -> list[str]:
    """The launch command for the bundle's cluster type, run from the bundle folder (then any notes)."""
    from wizard.planner import dataprep

    a = the_plan.answers
    # data/prepare_data.py only when the config reads what it writes (not for your own train/val files)
    reads = {str(the_plan.value("data.train_files")), str(the_plan.value("data.val_files"))}
    prep = "python3 data/prepare_data.py" if reads & {dataprep.PREPARED_TRAIN, dataprep.PREPARED_VAL} else ""
    if a.gpu_type.strip().lower() == "cpu":  # a CPU-only plan (cpu-smoke): the smoke run is what runs here
        return ["verl-init smoke .", "   (one rollout/update cycle on this CPU; ./run.sh needs GPUs)"]
    if a.cluster == "ray":
        return [_join(prep, f"ray/submit.sh --address {shlex.quote(ray_url or 'http://HEAD:8265')}")]
    if a.cluster == "slurm":
        return [_join(prep, "sbatch slurm/job.sbatch")]
    if a.cluster == "kuberay":
        ns = f" -n {a.k8s_namespace}" if a.k8s_namespace else ""
        return [f"kubectl{ns} apply -f k8s/configmap.yaml -f k8s/rayjob.yaml",
                "   (or k8s/submit.sh for a long-lived RayCluster; data and secrets: see PLAN.md)"]
    return [_join(prep, "./run.sh")]


def next_commands(the_plan: "Plan", out: str, ray_url: str | None = None) -> list[str]:
    """What to type after writing the bundle to `out`."""
    first, *notes = launch_commands(the_plan, ray_url)
    if first == "verl-init smoke .":
        return [f"verl-init smoke {shlex.quote(out)}", *notes]
    return [_join(f"cd {shlex.quote(out)}", first), *notes]
