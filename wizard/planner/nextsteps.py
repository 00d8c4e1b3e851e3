"""What to run after a bundle is written, per cluster type (printed by the CLI and the wizard)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wizard.planner.state import Plan


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
        # The PVCs the pods mount must exist before the pods are made (else they stay Pending): check them first.
        pvcs = list(dict.fromkeys(p for p in (a.shared_pvc, a.checkpoint_pvc) if p))
        check = f"kubectl{ns} get pvc {' '.join(pvcs)}" if pvcs else ""
        apply = _join(check, f"kubectl{ns} apply -f k8s/configmap.yaml -f k8s/rayjob.yaml")
        hub = dataprep.hub_prepared_in_place(a, the_plan.base_dir, str(the_plan.value("data.train_files")),
                                             str(the_plan.value("data.val_files")))
        own = [r for r in reads if not r.startswith(("/", "${")) and "://" not in r and r not in
               (dataprep.PREPARED_TRAIN, dataprep.PREPARED_VAL)]
        if a.shared_pvc and ((prep and hub is None) or own):
            # data of this machine: onto the shared PVC first (the planner refuses it without shared_pvc)
            files = "data/" if prep and hub is None else " ".join(own)
            return [prep or "see PLAN.md (Data)",
                    f"   (then copy {files} onto PVC {a.shared_pvc}, keeping the bundle-relative paths: see PLAN.md)",
                    f"   then: {apply}",
                    "   (or k8s/submit.sh for a long-lived RayCluster; secrets: see PLAN.md)"]
        return [apply, "   (or k8s/submit.sh for a long-lived RayCluster; data and secrets: see PLAN.md)"]
    return [_join(prep, "./run.sh")]


def next_commands(the_plan: "Plan", out: str, ray_url: str | None = None) -> list[str]:
    """What to type after writing the bundle to `out`."""
    first, *notes = launch_commands(the_plan, ray_url)
    if first == "verl-init smoke .":
        return [f"verl-init smoke {shlex.quote(out)}", *notes]
    return [_join(f"cd {shlex.quote(out)}", first), *notes]
