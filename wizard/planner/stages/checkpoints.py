"""Rule stage of checkpoints: the resume mode and where checkpoints land per cluster type (VI555-VI557).
"""

from __future__ import annotations

import posixpath
import re

from wizard.intent.answers import Answers
from wizard.planner.state import Build, experiment_name


# verl's trainer.resume_mode for each `resume` answer (verl/trainer/config/ppo_trainer.yaml, trainer.resume_mode)
RESUME_MODES = {"auto": "auto", "path": "resume_path", "disable": "disable"}


# verl reads the step from the folder name: int(path.split("global_step_")[-1]) (trainer/ppo/v1/trainer_base.py:876)
STEP_FOLDER = re.compile(r"global_step_(\d+)$")


def checkpoint_dir(a: Answers) -> str:
    """Where verl writes checkpoints: the answer (`~/` as `${oc.env:HOME}/`, as OmegaConf resolves it on the node
    that runs verl) or verl's default, checkpoints/<project>/<experiment> under the folder verl runs in."""
    if a.checkpoint_dir is not None:
        return "${oc.env:HOME}/" + a.checkpoint_dir[2:] if a.checkpoint_dir.startswith("~/") else a.checkpoint_dir
    return posixpath.join("checkpoints", a.project_name, experiment_name(a))


def node_relative(where: str) -> bool:
    """A checkpoint folder each node resolves against its own working folder (not absolute, no interpolation)."""
    return not where.startswith(("/", "${"))


# VI556's wording, shared with check's VI770 (wizard.check.rules.cluster)
WORKING_DIR_COPY = ("inside the Ray job's working_dir, a temporary copy of the {what} on each node: they are lost when "
                    "the job ends, and a relaunch (resume=auto) finds none")
SHARED_STORAGE = "an absolute path on storage every node mounts"


def checkpoints(b: Build) -> None:
    """Resume mode (auto / a path / disable) and where checkpoints land per cluster type (VI555-VI557)."""
    a, f = b.a, b.f
    mode = a.resume or ("path" if a.resume_from_path else "auto")
    b.facts["resume"] = mode
    b.facts["checkpoint_dir"] = where = checkpoint_dir(a)
    if mode == "path" and not a.resume_from_path:
        f.error("VI555", ("resume", "resume_from_path"), "resume=path needs resume_from_path",
                f"set resume_from_path={where}/global_step_N (a saved step), or resume=auto")
    if a.resume_from_path and mode != "path":
        f.error("VI555", ("resume_from_path", "resume"), f"resume_from_path is set but resume={mode}",
                "set resume=path, or remove resume_from_path")
    if a.resume_from_path and not STEP_FOLDER.search(a.resume_from_path):
        f.error("VI555", ("resume_from_path",), f"verl resumes only from a step folder ending in global_step_N "
                f"(got {a.resume_from_path!r}); it reads the step from that name", "point it at the step folder "
                f"itself, e.g. {where}/global_step_20 (no trailing / and not its actor/ subfolder)")
    if a.resume_from_path and a.cluster == "ray" and not a.resume_from_path.startswith(("/", "~/")):
        f.warning("VI556", ("resume_from_path", "cluster"), f"resume_from_path={a.resume_from_path} resolves inside the "
                  "Ray job's working_dir, a fresh copy of the bundle that holds no checkpoint",
                  "give the absolute path of the step folder on storage every node mounts")
    if a.keep_checkpoints is not None and a.save_freq <= 0:
        f.warning("VI557", ("keep_checkpoints", "save_freq"), f"keep_checkpoints has no effect: save_freq={a.save_freq} "
                  "saves no checkpoint", "set save_freq to a step count, or remove keep_checkpoints")
    if a.save_freq <= 0:
        return
    relative = node_relative(where)
    if a.cluster == "ray" and relative:
        f.warning("VI556", ("checkpoint_dir", "cluster"), f"checkpoints go to {where} "
                  + WORKING_DIR_COPY.format(what="bundle"), f"set checkpoint_dir to {SHARED_STORAGE}, "
                  f"e.g. /mnt/shared/{where}")
