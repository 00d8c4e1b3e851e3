"""Overrides cut off the launch command (real case: verl PR#4103 put a `# Use aux_loss and z_loss ...` comment line
inside the backslash-continued launch of examples/grpo_trainer/run_qwen3_vl-30b-megatron.sh): check's VI928.
The oracle is bash itself: the test runs each tiny script with `python3` replaced by a function that records the
arguments it is given, and sees which overrides the launch received."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from wizard.check.lint import check

HEAD = "#!/bin/bash\npython3 -m verl.trainer.main_ppo \\\n    algorithm.adv_estimator=grpo \\\n"
TAIL = "    trainer.n_gpus_per_node=8 \\\n    trainer.nnodes=1\n"
CASES = {
    "comment": HEAD + "    # load balancing for the MoE\n    +actor_rollout_ref.actor.megatron.override_transformer_config"
                      ".moe_aux_loss_coeff=0.01 \\\n" + TAIL,
    "no_backslash": HEAD + "    actor_rollout_ref.rollout.n=4\n    data.train_batch_size=16 \\\n" + TAIL,
    "blank_after_backslash": HEAD + "    actor_rollout_ref.rollout.n=4 \\ \n    data.train_batch_size=16 \\\n" + TAIL,
}
VALID = {
    "continued": HEAD + "    actor_rollout_ref.rollout.n=4 \\\n" + TAIL,
    "comment_above": "#!/bin/bash\n# load balancing for the MoE\n" + HEAD + TAIL,
    "arrays": "#!/bin/bash\nARGS=(\n    algorithm.adv_estimator=grpo\n    # a comment inside an array is fine\n"
              "    trainer.nnodes=1\n)\npython3 -m verl.trainer.main_ppo \"${ARGS[@]}\" trainer.n_gpus_per_node=8\n",
}


def _bash_args(script: Path, tmp: Path) -> tuple[list[str], str]:
    """What bash hands python3 when it runs the script, and what it writes to stderr."""
    out = tmp / "args.txt"
    run = subprocess.run(["bash", "-c", f'python3() {{ printf "%s\\n" "$@" >> "{out}"; }}; source "{script}"'],
                         capture_output=True, text=True, timeout=30)
    return (out.read_text().splitlines() if out.exists() else []), run.stderr


def _vi928(script: Path):
    return [f.problem for f in check(str(script)).findings if f.problem.rule == "VI928"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("name", sorted(CASES))
def test_bash_drops_the_overrides_and_check_says_so(name, tmp_path):
    script = tmp_path / f"{name}.sh"
    script.write_text(CASES[name])
    args, err = _bash_args(script, tmp_path)
    assert "trainer.nnodes=1" not in args and "command not found" in err  # bash's own verdict
    hits = _vi928(script)
    assert len(hits) == 1 and hits[0].severity == "error"
    assert hits[0].message.startswith("line 5:")  # the line after the break (HEAD is lines 1-3)
    cause = {"comment": "comment at line", "no_backslash": "does not end with a backslash",
             "blank_after_backslash": "blanks after its backslash"}[name]
    assert cause in hits[0].message


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("name", sorted(VALID))
def test_a_whole_launch_stays_clean(name, tmp_path):
    script = tmp_path / f"{name}.sh"
    script.write_text(VALID[name])
    args, err = _bash_args(script, tmp_path)
    assert "trainer.nnodes=1" in args and "trainer.n_gpus_per_node=8" in args and not err
    assert _vi928(script) == []
