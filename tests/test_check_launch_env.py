"""VI829: variables a launch script exports before `ray job submit` never reach the job (real case verl#1472:
`export CUDA_VISIBLE_DEVICES=2,5,6,7` then `ray job submit ... -- python3 -m verl.trainer.main_ppo`, expecting four
of the node's GPUs).

The oracle is a real Ray cluster on this machine (slow): a job submitted from a shell that exported the variables
sees none of them, and sees those its runtime env's env_vars set. The rule's other tests hold check to that: it
names exactly the exported job variables the runtime env does not set, only for `ray job submit`, never the values.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from wizard.check import bashtrace
from wizard.check.lint import check

pytestmark = pytest.mark.skipif(not bashtrace.available(), reason="needs bubblewrap (bash's run of the script)")

LAUNCH = "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm trainer.n_gpus_per_node=4"
SUBMIT = 'ray job submit --address="http://127.0.0.1:8265" {flags} --no-wait -- ' + LAUNCH


def _vi829(tmp_path: Path, body: str, env: dict[str, str] | None = None):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\nset -x\n" + body + "\n", encoding="utf-8")
    report = check(str(script), env=env)
    return [f.problem for f in report.findings if f.problem.rule == "VI829"]


def test_exported_gpu_mask_before_a_submit_is_named(tmp_path):
    [hit] = _vi829(tmp_path, "export CUDA_VISIBLE_DEVICES=2,5,6,7\nexport VLLM_USE_V1=1\n"
                   + SUBMIT.format(flags=""))
    assert hit.severity == "warning"
    assert "CUDA_VISIBLE_DEVICES, VLLM_USE_V1" in hit.message and "picks no GPUs" in hit.message
    assert "ray start" in hit.hint and "VLLM_USE_V1 in the runtime env's env_vars" in hit.hint
    assert "2,5,6,7" not in hit.message + hit.hint  # names only, never values


def test_a_submit_behind_a_launcher_is_the_same(tmp_path):
    [hit] = _vi829(tmp_path, "export HF_HOME=/cache\nuv run " + SUBMIT.format(flags=""))
    assert "HF_HOME" in hit.message


def test_the_runtime_env_forwards_what_it_lists(tmp_path):
    (tmp_path / "runtime_env.yaml").write_text("env_vars:\n  VLLM_USE_V1: '1'\n  WANDB_API_KEY: x\n")
    body = "export VLLM_USE_V1=1 WANDB_API_KEY=secret\n" + SUBMIT.format(flags="--runtime-env=runtime_env.yaml")
    assert not _vi829(tmp_path, "cd " + str(tmp_path) + "\n" + body)
    as_json = SUBMIT.format(flags="--runtime-env-json '{\"env_vars\": {\"VLLM_USE_V1\": \"1\"}}'")
    [hit] = _vi829(tmp_path, "export VLLM_USE_V1=1 WANDB_API_KEY=secret\n" + as_json)
    assert "WANDB_API_KEY" in hit.message and "VLLM_USE_V1" not in hit.message and "secret" not in hit.message


def test_an_unreadable_runtime_env_is_said(tmp_path):
    [hit] = _vi829(tmp_path, "export NCCL_DEBUG=INFO\n" + SUBMIT.format(flags="--runtime-env=/nowhere/env.yaml"))
    assert "not readable here" in hit.message and "NCCL_DEBUG" in hit.message


@pytest.mark.parametrize("body", [
    "export CUDA_VISIBLE_DEVICES=0,1\n" + LAUNCH,  # a local launch: Ray starts here and inherits the mask
    "export RAY_ADDRESS=http://head:8265 MY_DATA=/data\n" + SUBMIT.format(flags=""),  # the CLI's own, not the job's
    "CUDA_VISIBLE_DEVICES=0 echo set\n" + SUBMIT.format(flags=""),  # not exported to the submit
])
def test_nothing_to_say(tmp_path, body):
    assert not _vi829(tmp_path, body)


def test_a_variable_given_with_env_is_not_the_scripts(tmp_path):
    assert not _vi829(tmp_path, SUBMIT.format(flags=""), env={"HOME": "/root", "HF_HOME": "/cache"})


@pytest.mark.slow
def test_a_real_ray_job_does_not_see_the_submitting_shells_exports(tmp_path):
    """The oracle: `ray job submit` from a shell that exported the variables, to a real Ray head on this machine."""
    from test_cluster_live import RAY, RayHead, _env

    probe = tmp_path / "probe.py"
    probe.write_text("import json, os\nprint('ENV', json.dumps({k: os.environ.get(k) for k in "
                     "('CUDA_VISIBLE_DEVICES', 'VLLM_USE_V1', 'NCCL_DEBUG')}))\n")
    head = RayHead(num_cpus=2, num_gpus=0)
    try:
        shell = (f"export CUDA_VISIBLE_DEVICES=2,5 VLLM_USE_V1=1 NCCL_DEBUG=INFO\n"
                 f"{RAY} job submit --address {head.dashboard} --runtime-env-json "
                 "'{\"env_vars\": {\"NCCL_DEBUG\": \"INFO\"}}' -- python3 " + str(probe))
        r = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=300,
                           env={**_env(), **head.auth_env, "PATH": str(Path(RAY).parent) + ":/usr/bin:/bin"})
        assert r.returncode == 0 and "ENV" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
        seen = json.loads(r.stdout.split("ENV", 1)[1].strip().splitlines()[0])
    finally:
        head.stop()
    assert seen["VLLM_USE_V1"] is None and seen["CUDA_VISIBLE_DEVICES"] != "2,5"  # exported, not forwarded
    assert seen["NCCL_DEBUG"] == "INFO"  # the runtime env's env_vars are


def test_a_variable_verls_own_code_reads_is_named(tmp_path):
    """verl#1853: TENSORBOARD_DIR exported before the submit; verl's tracking reads it in the job. The name comes from
    the table scripts/verl_env_reads.py builds from verl's source (tests/test_verl_env_reads.py)."""
    [hit] = _vi829(tmp_path, "export TENSORBOARD_DIR=/logs/tb\nexport MY_OWN_FLAG=1\n" + SUBMIT.format(flags=""))
    assert "TENSORBOARD_DIR" in hit.message and "MY_OWN_FLAG" not in hit.message
