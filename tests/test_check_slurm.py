"""VI977: a Slurm batch script that lets verl's ray.init start Ray with ray_kwargs.ray_init.num_cpus null (real case
verl PR#1009: "Failed to register worker to Raylet" under Slurm; the fix there is num_cpus from the allocation).

The oracles: Ray's own CPU count (ray._private.utils.get_num_cpus, what ray.init uses for num_cpus=None), run in a
process whose CPU affinity is cut to one core the way Slurm confines a job step, still counts every core of the node;
and verl's own YAML says to set a number under Slurm.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from wizard.check.lint import check
from wizard.check.rules.slurm import NUM_CPUS, sbatch_options

LAUNCH = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
          "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct actor_rollout_ref.rollout.name=vllm "
          "data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.rollout.n=4 "
          "actor_rollout_ref.actor.use_dynamic_bsz=True trainer.n_gpus_per_node=2 trainer.nnodes=1 "
          "trainer.logger=[console] {extra}\n")
HEAD = "#!/bin/bash\n#SBATCH --job-name=grpo\n#SBATCH --cpus-per-task=8\n#SBATCH --gres=gpu:2\n\n"


@pytest.mark.skipif((os.cpu_count() or 1) < 2 or not hasattr(os, "sched_setaffinity"), reason="needs two cores")
def test_rays_cpu_count_ignores_the_cores_a_job_is_confined_to():
    code = textwrap.dedent("""
        import os
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        from ray._private.utils import get_num_cpus
        print(len(os.sched_getaffinity(0)), get_num_cpus())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    allowed, ray_counts = map(int, out.stdout.split()[-2:])
    assert allowed == 1 and ray_counts > allowed  # Ray would plan for cores this process may not use


@pytest.mark.verl
def test_verls_yaml_says_to_fix_the_count_under_slurm():
    from pathlib import Path

    import verl

    text = (Path(verl.__file__).parent / "trainer/config/ppo_trainer.yaml").read_text(encoding="utf-8")
    assert "Use a fixed number instead of null when using SLURM" in text


def _findings(tmp_path, script: str):
    path = tmp_path / "job.sh"
    path.write_text(script, encoding="utf-8")
    return [f for f in check(str(path)).findings if f.problem.rule == "VI977"]


@pytest.mark.slow
def test_check_warns_and_fixes_from_the_allocation(tmp_path):
    [hit] = _findings(tmp_path, HEAD + LAUNCH.format(extra=""))
    assert hit.problem.severity == "warning" and hit.fix.set == {NUM_CPUS: 8}
    [no_count] = _findings(tmp_path, "#!/bin/bash\n#SBATCH -N 1\n" + LAUNCH.format(extra=""))
    assert no_count.fix is None and "$SLURM_CPUS_PER_TASK" in no_count.problem.hint


@pytest.mark.parametrize("script", [
    HEAD + LAUNCH.format(extra=f"{NUM_CPUS}=8"),  # the count given
    HEAD + 'ray start --head --num-cpus "$SLURM_CPUS_PER_TASK"\n' + LAUNCH.format(extra=""),  # a cluster of its own
    HEAD + "export RAY_ADDRESS=http://head:8265\n" + LAUNCH.format(extra=""),  # joins one
    "#!/bin/bash\n" + LAUNCH.format(extra=""),  # not a Slurm batch script
    "#!/bin/bash\necho start\n#SBATCH --cpus-per-task=8\n" + LAUNCH.format(extra=""),  # Slurm stops at the first command
])
def test_check_is_silent_where_ray_does_not_count_the_node(tmp_path, script):
    assert not _findings(tmp_path, script)


def test_sbatch_options_read_as_slurm_reads_them():
    text = "#!/bin/bash\n# a comment\n#SBATCH -c 16\n#SBATCH --gres=gpu:8 --nodes 2  # trailing\n#SBATCH -n4\nhostname\n#SBATCH --mem=1G\n"
    assert sbatch_options(text) == {"cpus-per-task": "16", "gres": "gpu:8", "nodes": "2", "ntasks": "4"}
