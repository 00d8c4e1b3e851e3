"""A launch script that reads an environment variable under `set -u` and never sets it (VI938).

`set -u` (`set -euo pipefail`, `set -o nounset`, `#!/bin/bash -u`) makes bash stop at the first expansion of a
variable that is not set: "NAME: unbound variable", exit status 1, and the commands after it never run. A script that
branches on `${DEVICE}` (or passes `$MODEL_PATH` on) without a default, `${DEVICE:-gpu}`, therefore never reaches
`python3 -m verl.trainer.main_ppo` unless whoever starts it exports the variable first: real case verl PR#6430
(examples/grpo_trainer/run_qwen3_4b_fsdp.sh and run_qwen2_5_32b_fsdp.sh read `case "${DEVICE}"` under
`set -xeuo pipefail`; verl 0.9's examples/grpo_trainer/run_qwen3_4b_fsdp.sh:10 now reads
`DEVICE=${DEVICE:-$(python3 -c 'import torch_npu' ...)}`). The same slip is still in verl 0.9's
examples/grpo_trainer/run_qwen3_vl_30b_a3b_fsdp.sh, whose line 9 expands ${INFER_BACKEND} one line before line 10
gives it its default. Under `sbatch` or `ray job submit` the script dies only once the job is scheduled.

Not verl's code but bash's: the evidence is bash's own run of the script (wizard.check.bashtrace runs it in the
sandbox, the launchers stubbed), which records each variable bash stopped on as unbound and the line, gives it a
placeholder and runs on. Variables given with `--env` are set for that run, so they draw nothing; `${X:?message}`
(a deliberate "give me X") is not reported; neither are variables a scheduler or launcher sets in the job's
environment (SCHEDULER_SET: Slurm, PBS, LSF, MPI, Kubernetes/Kubeflow, torchrun's rendezvous variables) nor those
every login shell has. Without a sandbox (no bubblewrap) nothing is reported. The test holds the finding to bash
itself: the planted script, run by a real bash with the launcher stubbed, stops with "unbound variable" before the
launch; the same script with a default reaches it.
"""

from __future__ import annotations

import re

from wizard.check.rules.context import Ctx, Facts

# set for the job by a scheduler or launcher, or by every login shell: a script may rely on them under set -u
SCHEDULER_SET = re.compile(
    r"(SLURM|SBATCH|SRUN|PBS|LSB|LSF|OMPI|PMI|PMIX|MPI|KUBERNETES|PET|MLP|ARNOLD|VC|TORCHELASTIC|GROUP|ROLE|LC)_\w+|"
    r"MASTER_ADDR|MASTER_PORT|RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|NODE_RANK|GROUP_RANK|"
    r"HOME|PATH|USER|LOGNAME|SHELL|TERM|LANG|LANGUAGE|HOSTNAME|PWD|OLDPWD|TMPDIR|SHLVL|MAIL|TZ")


def rule_unbound_env(c: Ctx, f: Facts) -> None:
    seen: set[str] = set()
    for name, line in getattr(c.src, "unbound", ()):
        if name in seen or name in c.env or SCHEDULER_SET.fullmatch(name):
            continue
        seen.add(name)
        c.add("VI938", "warning", ("target",),
              f"${name}: the script reads {name} under `set -u` (line {line}) and never sets it: bash stops there with "
              f"'{name}: unbound variable' before the launch unless the caller exports {name} (verl's own fix "
              "in PR#6430: a default at the top)",
              f"give it a default ({name}=${{{name}:-VALUE}}) or export {name} before running the script; "
              f"--env {name}=VALUE checks it with that value")
