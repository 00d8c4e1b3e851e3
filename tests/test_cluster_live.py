"""The cluster artefacts and `check --mode cluster` against real Ray processes on this machine.

Each Ray head runs `ray start --head --block` in its own process group with its own temporary
folder and free ports; it is stopped by its process group id (and any process still naming that
folder, by pid) — never `ray stop`, which would stop other people's Ray on a shared machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli
from test_cluster_crd import cluster_files

from wizard.env.cluster import check_cluster

VENV_BIN = Path(sys.executable).parent
RAY = shutil.which("ray", path=str(VENV_BIN)) or shutil.which("ray")
pytestmark = [pytest.mark.slow]

PORT_FLAGS = ("--port", "--dashboard-port", "--ray-client-server-port", "--dashboard-agent-listen-port",
              "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--metrics-export-port",
              "--node-manager-port", "--object-manager-port")


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = str(VENV_BIN) + os.pathsep + env.get("PATH", "")
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return env


def _pids_naming(text: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def stop_group(proc: subprocess.Popen, marker: str) -> None:
    """Stop a process group this test started, then any straggler that names our own temp folder."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    # Ray's own daemons (raylet, GCS, dashboard) run in sessions of their own: ask, then insist
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0)):
        pids = _pids_naming(marker)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline and _pids_naming(marker):
            time.sleep(0.2)


TOKEN = "vi-test-token-0123456789abcdef0123456789abcdef"


class RayHead:
    """A Ray head (and optional worker nodes) on this machine, on free ports.

    Ray's token authentication is pinned either way (`ray start` turns it on by itself once ~/.ray/auth_token
    exists, as on any machine where a `ray.init` ran): `token` set → RAY_AUTH_MODE=token with that token,
    None → RAY_AUTH_MODE=disabled. `client_env` is what a client of this cluster needs. Stops what it
    started when start-up fails."""

    def __init__(self, num_cpus: int, num_gpus: int, token: str | None = TOKEN, cwd: str | None = None):
        self.token = token
        self.cwd = cwd  # where `ray start` runs (a pod's working folder); default: the temp folder
        self.auth_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token} if token else {"RAY_AUTH_MODE": "disabled"}
        self.tmp = tempfile.mkdtemp(prefix="vi-ray-", dir="/tmp")  # short: Ray's socket paths are length-limited
        ports = dict(zip(PORT_FLAGS, free_ports(len(PORT_FLAGS))))
        self.gcs = f"127.0.0.1:{ports['--port']}"
        self.dashboard = f"http://127.0.0.1:{ports['--dashboard-port']}"
        self.procs: list[subprocess.Popen] = []
        self.log = open(Path(self.tmp) / "head.log", "wb")  # noqa: SIM115 - closed in stop()
        try:
            self._start(["--head", f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}", "--include-dashboard=true",
                         "--node-ip-address=127.0.0.1", *(f"{k}={v}" for k, v in ports.items())])
            self.wait_nodes(1)
        except BaseException:
            self.stop()
            raise

    @property
    def client_env(self) -> dict[str, str]:
        return {"RAY_AUTH_TOKEN": self.token} if self.token else {}

    def _start(self, args: list[str]) -> None:
        cmd = [RAY, "start", "--block", f"--temp-dir={self.tmp}", "--disable-usage-stats", *args]
        self.procs.append(subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                           env={**_env(), **self.auth_env}, start_new_session=True,
                                           cwd=self.cwd or self.tmp))

    def add_worker(self, num_cpus: int, num_gpus: int) -> None:
        ports = dict(zip(PORT_FLAGS[3:], free_ports(len(PORT_FLAGS) - 3)))
        self._start([f"--address={self.gcs}", f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}",
                     "--node-ip-address=127.0.0.1", *(f"{k}={v}" for k, v in ports.items())])
        self.wait_nodes(len(self.procs))

    def wait_nodes(self, n: int, timeout: float = 120) -> None:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"ray start exited: {(Path(self.tmp) / 'head.log').read_text()[-3000:]}")
            try:
                req = urllib.request.Request(self.dashboard + "/api/v0/nodes?detail=1", headers=headers)
                with urllib.request.urlopen(req, timeout=2) as r:
                    rows = json.load(r)["data"]["result"]["result"]
                if sum(1 for row in rows if row.get("state") == "ALIVE") >= n:
                    return
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(1)
        raise RuntimeError(f"Ray did not show {n} node(s): {(Path(self.tmp) / 'head.log').read_text()[-3000:]}")

    def stop(self) -> None:
        for p in reversed(self.procs):
            stop_group(p, self.tmp)
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def cpu_head() -> Iterator[RayHead]:
    """A CPU-only head: what a laptop or a CPU login node offers."""
    head = RayHead(num_cpus=4, num_gpus=0)
    yield head
    head.stop()


@pytest.fixture(scope="module")
def gpu_cluster() -> Iterator[RayHead]:
    """Two nodes with GPUs Ray was told about (--num-gpus): 2 GPUs / 16 CPUs and 1 GPU / 4 CPUs."""
    head = RayHead(num_cpus=16, num_gpus=2)
    try:
        head.add_worker(num_cpus=4, num_gpus=1)
        yield head
    finally:
        head.stop()


def _bundle(tmp_path: Path, profile: str, **answers) -> Path:
    from wizard.renderer.writer import write_bundle

    return write_bundle(cluster_files(profile, **answers), tmp_path / "bundle")


SMALL = dict(model="Qwen/Qwen2.5-0.5B-Instruct", prompts_per_step=32, samples_per_prompt=4, updates_per_step=2)


# --- check --mode cluster ----------------------------------------------------------------------------


def test_cpu_only_head_says_exactly_why_a_gpu_config_cannot_run(cpu_head, tmp_path, cli_env):
    bundle = _bundle(tmp_path, "cluster-8gpu")
    r = run_cli(["check", "--mode", "cluster", str(bundle), "--address", cpu_head.dashboard, "--json"],
                env={**cli_env, **cpu_head.client_env})
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["observed"]["gpus"] == 0 and doc["observed"]["logical_cpus"] == 4
    assert doc["observed"]["ray_version"]
    found = {f["id"]: f for f in doc["findings"]}
    assert found["VI712"]["severity"] == "error"
    assert "has 0 GPU(s) on 1 node(s) (0 GPU/4 CPU) but the config needs 8 " \
           "(trainer.nnodes=2 × trainer.n_gpus_per_node=4)" in found["VI712"]["message"]
    assert found["VI715"]["severity"] == "error" and "4 logical CPUs; verl needs ≥ 33" in found["VI715"]["message"]
    text = run_cli(["check", "--mode", "cluster", str(bundle), "--address", cpu_head.dashboard],
                   env={**cli_env, **cpu_head.client_env})
    assert text.returncode == 1 and "[VI712]" in text.stdout and "found: Ray" in text.stdout


def test_a_token_protected_dashboard_without_or_with_a_wrong_token(cpu_head, tmp_path):
    """Ray 2.59+ turns token authentication on: without the token the check says so (VI725), not 'not Ray'."""
    bundle = _bundle(tmp_path, "cluster-8gpu")
    home = tmp_path / "home"  # no ~/.ray/auth_token there
    home.mkdir()
    report = check_cluster(bundle, cpu_head.dashboard, env={"HOME": str(home)})
    (p,) = [f for f in report.findings if f.rule == "VI725"]
    assert p.severity == "error" and "wants a token" in p.message and "ray get-auth-token" in p.hint
    assert report.observed is None and not report.ok
    report = check_cluster(bundle, cpu_head.dashboard, env={"HOME": str(home), "RAY_AUTH_TOKEN": "wrong"})
    (p,) = [f for f in report.findings if f.rule == "VI725"]
    assert "refused the token from RAY_AUTH_TOKEN" in p.message and "wrong" not in p.line()
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text(TOKEN + "\n")  # Ray's default token file
    report = check_cluster(bundle, cpu_head.dashboard, env={"HOME": str(home)})
    assert report.observed is not None and report.observed.cpus == 4
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    report = check_cluster(bundle, cpu_head.dashboard, env={"HOME": str(home / "none"),
                                                            "RAY_AUTH_TOKEN_PATH": str(token_file)})
    assert report.observed is not None and "VI725" not in {f.rule for f in report.findings}


def test_matching_config_passes(gpu_cluster, tmp_path):
    bundle = _bundle(tmp_path, "ppo-16gpu", nnodes=1, gpus_per_node=2, **{**SMALL, "samples_per_prompt": 1})
    report = check_cluster(bundle, gpu_cluster.dashboard, env=gpu_cluster.client_env)
    assert report.ok, [p.line() for p in report.findings]
    assert report.observed is not None and report.observed.gpus == 3 and len(report.observed.alive) == 2
    assert {p.rule for p in report.findings} == {"VI714"}  # 2-GPU and 1-GPU nodes: a warning


@pytest.mark.parametrize("nnodes, gpn, rules", [
    (2, 2, {"VI712", "VI715"}),  # 3 GPUs for 4; 20 logical CPUs for 3 × 4 + 9
    (1, 3, {"VI713"}),  # 3 GPUs in all, but no node holds 3
    (3, 1, set()),
])
def test_live_cluster_shapes(gpu_cluster, tmp_path, nnodes, gpn, rules):
    bundle = _bundle(tmp_path, "ppo-16gpu", nnodes=nnodes, gpus_per_node=gpn,
                     **{**SMALL, "samples_per_prompt": 1, "prompts_per_step": 12 * nnodes * gpn})
    report = check_cluster(bundle, gpu_cluster.dashboard, env=gpu_cluster.client_env)
    assert {p.rule for p in report.errors} == rules, [p.line() for p in report.findings]


def test_gcs_address_in_ray_address_is_flagged_and_probed_on_its_dashboard(gpu_cluster, tmp_path):
    bundle = _bundle(tmp_path, "ppo-16gpu", nnodes=1, gpus_per_node=2, **{**SMALL, "samples_per_prompt": 1})
    report = check_cluster(bundle, None, env={"RAY_ADDRESS": gpu_cluster.dashboard, **gpu_cluster.client_env})
    assert "VI717" in {p.rule for p in report.errors}  # a dashboard URL where ray.init wants the GCS
    assert report.observed is not None and report.observed.gpus == 3


# --- ray/submit.sh against the running cluster -----------------------------------------------------------


def test_ray_submit_waits_for_gpus_then_fails_clearly(gpu_cluster, tmp_path):
    bundle = _bundle(tmp_path, "ppo-16gpu", nnodes=2, gpus_per_node=2, gpu_wait_timeout_s=10,
                     **{**SMALL, "samples_per_prompt": 1, "prompts_per_step": 48})
    t = time.monotonic()
    r = subprocess.run(["bash", str(bundle / "ray" / "submit.sh"), "--address", gpu_cluster.dashboard],
                       capture_output=True, text=True, env={**_env(), **gpu_cluster.client_env}, timeout=120,
                       check=False)
    assert r.returncode == 1
    assert 10 <= time.monotonic() - t < 60
    assert "shows 3 GPU(s) on 2 node(s); the config needs 4 (2 node(s) × 2)" in r.stderr, r.stderr


def test_ray_submit_runs_the_bundle_on_the_cluster(gpu_cluster, tmp_path):
    """The job runs run.sh from the uploaded bundle; run.sh stops at its data check (no data here),
    which proves the bundle, its config and run.sh arrived and ran on the cluster."""
    bundle = _bundle(tmp_path, "ppo-16gpu", nnodes=1, gpus_per_node=2, train_files="/nonexistent/train.parquet",
                     val_files="/nonexistent/val.parquet", **{**SMALL, "samples_per_prompt": 1})
    r = subprocess.run(["bash", str(bundle / "ray" / "submit.sh"), "--address", gpu_cluster.dashboard],
                       capture_output=True, text=True, env={**_env(), **gpu_cluster.client_env}, timeout=300,
                       check=False)
    out = r.stdout + r.stderr
    assert "submitting" in out, out
    assert "missing data file: /nonexistent/train.parquet" in out, out
    assert r.returncode != 0


# --- slurm/job.sbatch with stand-ins for srun / scontrol / main_ppo ---------------------------------------

FAKE_SRUN = """#!/usr/bin/env bash
# srun stand-in: drop srun's own options, run the command here.
while [ $# -gt 0 ]; do
  case "$1" in
    -w) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
exec "$@"
"""
FAKE_SCONTROL = """#!/usr/bin/env bash
[ "$1 $2" = "show hostnames" ] && echo "node-a" && exit 0
exit 1
"""
# `ray` stand-in: the real CLI, with this test's ports, temp folder and pretend GPUs for `ray start`.
FAKE_RAY = """#!/usr/bin/env bash
if [ "$1" = start ]; then
  exec {ray} "$@" --temp-dir={tmp} --disable-usage-stats --num-gpus={gpus} {ports}
fi
exec {ray} "$@"
"""
FAKE_PYTHON3 = """#!/usr/bin/env bash
# python3 stand-in for the driver: record what verl would be started with, and that Ray answers there.
if [ "$1 $2" = "-m verl.trainer.main_ppo" ]; then
  {{ printf '%s\\n' "$@"; echo "RAY_ADDRESS=$RAY_ADDRESS"; echo "PWD=$PWD";
     echo "TORCH_NCCL_AVOID_RECORD_STREAMS=$TORCH_NCCL_AVOID_RECORD_STREAMS"; }} > {record}
  {ray} status --address="$RAY_ADDRESS" >> {record} 2>&1
  exit 0
fi
exec {python} "$@"
"""


def _fake_slurm(tmp_path: Path, gpus: int) -> tuple[dict[str, str], Path, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tempfile.mkdtemp(prefix="vi-slurm-", dir="/tmp")
    ports = dict(zip(PORT_FLAGS[1:], free_ports(len(PORT_FLAGS) - 1)))
    record = tmp_path / "driver.txt"
    scripts = {
        "srun": FAKE_SRUN,
        "scontrol": FAKE_SCONTROL,
        "ray": FAKE_RAY.format(ray=RAY, tmp=marker, gpus=gpus, ports=" ".join(f"{k}={v}" for k, v in ports.items())),
        "python3": FAKE_PYTHON3.format(ray=RAY, record=record, python=sys.executable),
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = _env()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env.update(SLURM_JOB_ID="4242", SLURM_JOB_NODELIST="node-a", VERL_INIT_RAY_PORT=str(free_ports(1)[0]))
    return env, record, marker


def _run_sbatch(bundle: Path, env: dict[str, str], marker: str, timeout: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(["bash", str(bundle / "slurm" / "job.sbatch")], cwd=bundle, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        stop_group(proc, marker)
        shutil.rmtree(marker, ignore_errors=True)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _home(tmp_path: Path, token: str | None) -> str:
    """A home folder with (or without) Ray's default token file, ~/.ray/auth_token."""
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    if token:
        (home / ".ray" / "auth_token").write_text(token)
    return str(home)


@pytest.mark.parametrize("token", [TOKEN, None], ids=["token-in-home", "no-token"])
def test_sbatch_starts_ray_waits_for_gpus_and_runs_the_config(tmp_path, token):
    """With ~/.ray/auth_token, `ray start --head` turns token auth on by itself and `ray status` would not see
    the cluster: the job pins RAY_AUTH_MODE for every step."""
    bundle = _bundle(tmp_path, "dapo-32gpu", nnodes=1, gpus_per_node=1, model="Qwen/Qwen2.5-0.5B",
                     prompts_per_step=16, samples_per_prompt=4, updates_per_step=2)
    env, record, marker = _fake_slurm(tmp_path, gpus=1)
    env["SLURM_SUBMIT_DIR"] = str(bundle)
    env["HOME"] = _home(tmp_path, token)
    r = _run_sbatch(bundle, env, marker, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"RAY_AUTH_MODE={'token' if token else 'disabled'}" in r.stdout
    assert "Ray shows 1 GPUs on 1 node(s); launching verl" in r.stdout
    driver = record.read_text()
    lines = driver.splitlines()
    assert lines[:6] == ["-m", "verl.trainer.main_ppo", "--config-path", str(bundle), "--config-name", "verl_config"]
    assert f"RAY_ADDRESS=127.0.0.1:{env['VERL_INIT_RAY_PORT']}" in lines
    assert f"PWD={bundle}" in lines and "TORCH_NCCL_AVOID_RECORD_STREAMS=1" in lines
    assert "1.0 GPU" in driver and "12.0 CPU" in driver  # ray status: the GPU, and --cpus-per-task CPUs
    assert not _pids_naming(marker)  # the job's Ray is gone with it


def test_sbatch_fails_clearly_when_gpus_are_missing(tmp_path):
    bundle = _bundle(tmp_path, "dapo-32gpu", nnodes=1, gpus_per_node=2, model="Qwen/Qwen2.5-0.5B",
                     prompts_per_step=16, samples_per_prompt=4, updates_per_step=2, gpu_wait_timeout_s=10)
    env, record, marker = _fake_slurm(tmp_path, gpus=1)
    env["VERL_INIT_BUNDLE"] = str(bundle)
    env["HOME"] = _home(tmp_path, TOKEN)
    r = _run_sbatch(bundle, env, marker, timeout=240)
    assert r.returncode == 1
    assert "after 10s Ray shows 1 of 2 GPUs (1 node(s) × 2)" in r.stderr, r.stderr
    assert not record.exists()  # verl never started
    assert not _pids_naming(marker)


def test_sbatch_refuses_the_wrong_allocation(tmp_path):
    bundle = _bundle(tmp_path, "dapo-32gpu")  # 4 nodes
    env, _record, marker = _fake_slurm(tmp_path, gpus=1)
    env["SLURM_SUBMIT_DIR"] = str(bundle)
    r = _run_sbatch(bundle, env, marker, timeout=60)
    assert r.returncode == 1 and "Slurm allocated 1 node(s) but the config needs 4" in r.stderr
