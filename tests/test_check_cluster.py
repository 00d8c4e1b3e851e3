"""VI770-VI773: launches on a Ray cluster (wizard/check/rules/cluster.py, launchenv.py), held to verl's and Ray's code."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wizard.check import bashtrace
from wizard.check.lint import check
from wizard.check.rules.cluster import SOCKET_MAX, ray_socket_path, ray_upload_limit
from wizard.check.rules.launchenv import FORWARDED

LAUNCH = ("python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct "
          "actor_rollout_ref.rollout.name=vllm trainer.n_gpus_per_node=8 trainer.save_freq=10 {extra}")
LONG = "/net/tdfcarhc/people/poebhkiwa/slurm_jobdir/1355700/tmp.t0016"
needs_bash = pytest.mark.skipif(not bashtrace.available(), reason="needs bubblewrap (bash's run of the script)")


def _ids(tmp_path, body, rule):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\n" + body + "\n", encoding="utf-8")
    return [f.problem for f in check(str(script), gpu_type="H100").findings if f.problem.rule == rule]


# --- oracles -----------------------------------------------------------------------------------------------------

@pytest.mark.verl
def test_verl_forwards_only_its_list_from_the_shell(monkeypatch):
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    for name in (*FORWARDED, "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "NCCL_DEBUG"):
        monkeypatch.setenv(name, "x1")
    got = {k for k, v in get_ppo_ray_runtime_env()["env_vars"].items() if v == "x1"}
    assert got == set(FORWARDED)  # GLOO/NCCL_SOCKET_IFNAME never reach the workers; NCCL_DEBUG is even dropped


def test_the_upload_limit_is_rays():
    from ray._private import ray_constants
    from ray._private.runtime_env import packaging

    assert ray_upload_limit({}) == ray_constants.GRPC_CPP_MAX_MESSAGE_SIZE == packaging.GCS_STORAGE_MAX_SIZE
    assert ray_upload_limit({"RAY_max_grpc_message_size": "2097152"}) == 2 << 20


def test_the_socket_path_is_rays(monkeypatch):
    import inspect

    from ray._common import utils as common
    from ray._private import node
    from ray._private.utils import validate_socket_filepath

    src = inspect.getsource(node)
    assert '"%Y-%m-%d_%H-%M-%S_%f"' in src and 'f"session_{date_str}_{os.getpid()}"' in src
    assert 'os.path.join(self._session_dir, "sockets")' in src and 'default_prefix="plasma_store"' in src
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setenv("TMPDIR", LONG)
    root = common.get_default_ray_temp_dir()
    with pytest.raises(OSError, match="AF_UNIX path length cannot exceed 107"):
        validate_socket_filepath(ray_socket_path(root))
    validate_socket_filepath(ray_socket_path("/tmp/ray"))  # the control
    assert SOCKET_MAX == 107


@pytest.mark.slow
def test_a_real_ray_init_fails_under_the_long_tmpdir(tmp_path):
    long = tmp_path / ("d" * max(1, 110 - len(str(tmp_path)) - len(ray_socket_path("/", 5))))
    long.mkdir()
    code = "import ray\ntry:\n ray.init(num_cpus=1, include_dashboard=False)\nexcept OSError as e:\n print('REFUSED', e)\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                       env={**os.environ, "TMPDIR": str(long), "RAY_TMPDIR": str(long)})
    assert "REFUSED" in r.stdout and "AF_UNIX" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


# --- check() -----------------------------------------------------------------------------------------------------

@needs_bash
def test_vi770_relative_checkpoints_on_several_nodes(tmp_path):
    [hit] = _ids(tmp_path, LAUNCH.format(extra="trainer.nnodes=2"), "VI770")
    assert hit.severity == "warning" and "fsdp_checkpoint_manager.py" in hit.message
    assert not _ids(tmp_path, LAUNCH.format(extra="trainer.nnodes=2 trainer.default_local_dir=/mnt/c"), "VI770")
    assert not _ids(tmp_path, LAUNCH.format(extra="trainer.nnodes=1"), "VI770")


@needs_bash
def test_vi770_in_a_job_working_dir_copy(tmp_path):
    body = (f"cd {tmp_path}\nray job submit --working-dir . -- " + LAUNCH.format(extra="trainer.nnodes=1"))
    [hit] = _ids(tmp_path, body, "VI770")
    assert "_ray_pkg_" in hit.message and "lost when the job ends" in hit.message


@needs_bash
def test_vi771_weights_in_the_working_dir(tmp_path):
    limit = 1 << 20
    (tmp_path / "m").mkdir()
    with open(tmp_path / "m" / "model.safetensors", "wb") as fh:
        fh.truncate(limit + 1)
    (tmp_path / "rt.yaml").write_text("working_dir: ./\nexcludes: ['/.git/']\n")
    body = f"cd {tmp_path}\nexport RAY_max_grpc_message_size={limit}\nray job submit --runtime-env=rt.yaml -- "
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\n" + body + LAUNCH.format(extra="") + "\n")
    hits = [f for f in check(str(script), env={"HOME": "/root", "RAY_max_grpc_message_size": str(limit)},
                             gpu_type="H100").findings if f.problem.rule == "VI771"]
    assert len(hits) == 1 and "m/model.safetensors" in hits[0].problem.message
    (tmp_path / ".rayignore").write_text("*.safetensors\n")  # Ray skips it: the control
    assert not [f for f in check(str(script), env={"HOME": "/root", "RAY_max_grpc_message_size": str(limit)},
                                 gpu_type="H100").findings if f.problem.rule == "VI771"]


@needs_bash
def test_vi772_exports_before_joining_a_cluster(tmp_path):
    body = "export GLOO_SOCKET_IFNAME=bond0 NCCL_SOCKET_IFNAME=bond0\n"
    [hit] = _ids(tmp_path, body + LAUNCH.format(extra="trainer.nnodes=2 trainer.default_local_dir=/mnt/c"), "VI772")
    assert "GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME" in hit.message and "bond0" not in hit.message
    assert not _ids(tmp_path, body + LAUNCH.format(extra="trainer.nnodes=1"), "VI772")  # verl starts Ray here
    started = body + "ray start --head\n" + LAUNCH.format(extra="trainer.nnodes=2 trainer.default_local_dir=/mnt/c")
    assert not _ids(tmp_path, started, "VI772")
    [hit] = _ids(tmp_path, "export RAY_ADDRESS=10.0.0.1:6379 " + body[7:] + LAUNCH.format(extra=""), "VI772")


@pytest.mark.slow
@needs_bash
def test_vi773_long_tmpdir(tmp_path):
    [hit] = _ids(tmp_path, f"export TMPDIR={LONG}\n" + LAUNCH.format(extra=""), "VI773")
    assert hit.severity == "error" and "RAY_TMPDIR" in hit.hint
    assert not _ids(tmp_path, "export TMPDIR=/tmp/job1\n" + LAUNCH.format(extra=""), "VI773")
    sbatch = f"#SBATCH --nodes=1\n#SBATCH --export=ALL,TMPDIR={LONG}\n" + LAUNCH.format(extra="")
    assert len(_ids(tmp_path, sbatch, "VI773")) == 1
    assert not _ids(tmp_path, f"export TMPDIR={LONG} RAY_TMPDIR=/tmp/r\n" + LAUNCH.format(extra=""), "VI773")
