"""VI977 (warning): a Slurm batch script that lets verl start Ray itself with `ray_kwargs.ray_init.num_cpus` null.

verl's entry points call `ray.init(**ray_kwargs.ray_init)` when no Ray is running (trainer/main_ppo.py:56-74), and
`num_cpus: null` leaves the count to Ray, which takes `multiprocessing.cpu_count()` (the node's cores) unless the
root cgroup's CPU quota or a cgroup-v1 root cpuset says less (ray/_private/utils.py get_num_cpus, _get_docker_cpus).
It does not read the CPU affinity or the nested cpuset Slurm confines a job step to, so on a shared node Ray plans
for every core and starts more worker processes than the job may run ("Failed to register worker to Raylet", or a
hang; verl PR#1009). verl's own YAML says it: "Use a fixed number instead of null when using SLURM"
(trainer/config/ppo_trainer.yaml:514), and its Slurm tutorial starts Ray with `ray start --num-cpus
"${SLURM_CPUS_PER_TASK}"` (examples/tutorial/slurm/ray_on_slurm.slurm:83-84).

The rule reads the script's `#SBATCH` lines (bash skips them as comments; Slurm reads them) and stays silent where
the script starts or joins a Ray cluster itself (`ray start`, `RAY_ADDRESS`, `ray job submit`,
`ray_kwargs.ray_init.address`): then verl's ray.init only connects.
"""

from __future__ import annotations

import re
import shlex

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts, script_text, submit_words

NUM_CPUS = "ray_kwargs.ray_init.num_cpus"
SBATCH = re.compile(r"^#SBATCH[ \t]+(.*)$", re.M)
OWN_CLUSTER = re.compile(r"\bray[ \t]+start\b|\bRAY_ADDRESS\b")


def sbatch_options(text: str) -> dict[str, str]:
    """The `#SBATCH` options of a batch script, long names without dashes (`-c 8` → cpus-per-task: 8). Slurm stops
    reading them at the first command line; so does this."""
    short = {"c": "cpus-per-task", "n": "ntasks", "N": "nodes", "G": "gpus"}
    found: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
            continue
        m = SBATCH.match(stripped)
        if m is None:
            break
        try:
            words = shlex.split(m.group(1), comments=True)
        except ValueError:
            continue
        i = 0
        while i < len(words):
            w = words[i]
            name, eq, value = w.lstrip("-").partition("=")
            if w.startswith("-") and not w.startswith("--") and len(name) > 1 and not eq:  # -c8
                name, value, eq = name[0], name[1:], "="
            name = short.get(name, name) if not w.startswith("--") else name
            if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
                value, i = words[i + 1], i + 1
            found[name] = value
            i += 1
    return found


def rule_slurm_cpus(c: Ctx, f: Facts) -> None:
    ex = c.src.extraction
    if c.src.kind != "script" or ex is None or not ex.script or NUM_CPUS not in c.res.flat:
        return
    text = script_text(c)
    if not text:
        return
    options = sbatch_options(text)
    if not options or c.v(NUM_CPUS) is not None or c.res.flat.get("ray_kwargs.ray_init.address"):
        return  # (the keys are read, and reported as read, for a Slurm batch script only)
    if not options or OWN_CLUSTER.search(text) or "RAY_ADDRESS" in ex.env_names or submit_words(c) is not None:
        return
    cpus = options.get("cpus-per-task", "")
    count = int(cpus) if cpus.isdigit() and int(cpus) > 0 else None
    c.add("VI977", "warning", (NUM_CPUS,),
          f"a Slurm batch script (#SBATCH {' '.join(f'--{k}={v}' for k, v in list(options.items())[:4])}) lets verl "
          f"start Ray itself with {NUM_CPUS}=null: Ray counts the node's cores, not the CPUs Slurm gives the job "
          "(ray get_num_cpus reads neither the affinity nor the job's cpuset), and starts more workers than the job "
          "may run: 'Failed to register worker to Raylet' or a hang (verl's YAML: \"Use a fixed number instead of "
          "null when using SLURM\", trainer/config/ppo_trainer.yaml:514)",
          f"set {NUM_CPUS}={count if count else '$SLURM_CPUS_PER_TASK'}, or start Ray in the job with "
          "`ray start --head --num-cpus \"$SLURM_CPUS_PER_TASK\"` as verl's examples/tutorial/slurm/ray_on_slurm.slurm "
          "does",
          fix=Fix(set={NUM_CPUS: count}) if count else None)
