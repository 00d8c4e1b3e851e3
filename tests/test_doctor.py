"""`verl-init doctor`: versions, GPUs + topology, Ray, environment pitfalls; exit 0; fast with a dead RAY_ADDRESS."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from test_probe import h100_nvswitch, install, pcie_two_numa, write_fake_nvml

from wizard.env import doctor
from wizard.intent.errors import Problem
from wizard.env.probe import Gpu, GpuReport, HostReport, Probes, RayReport


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RAY_", "NCCL_")) and k not in ("CUDA_VISIBLE_DEVICES",)}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def probes(gpus: GpuReport | None = None, host: HostReport | None = None, ray: RayReport | None = None) -> Probes:
    return Probes(gpus or GpuReport(False, "no NVIDIA GPU found (test)"),
                  ray or RayReport("http://127.0.0.1:8265", "default", False),
                  host or HostReport(memory_gb=64.0, cpus=16, shm_gb=32.0, shm_free_gb=32.0))


VERSIONS = {"verl": "0.9.1", "torch": "2.13.0", "ray": "2.60.0", "vllm": "0.17.0", "sglang": None,
            "transformers": "5.10.4", "nvidia-ml-py": "13.615.71"}


def rules(env: dict[str, str], p: Probes | None = None, versions=None, torch_cuda="12.8", torch_installed=True):
    found = doctor.environment_findings(env, p or probes(), versions or VERSIONS, torch_cuda, torch_installed)
    return {f.rule: f for f in found}


# --- one test per rule --------------------------------------------------------------------------------------


def test_clean_environment_has_no_findings():
    assert rules({}) == {}


def test_hand_set_cuda_visible_devices_vi719():
    f = rules({"CUDA_VISIBLE_DEVICES": "0,1"})["VI719"]
    assert f.severity == "warning" and "gives Ray only 2 GPU(s)" in f.message


def test_dashboard_url_in_ray_address_vi717():
    f = rules({"RAY_ADDRESS": "http://head:8265"})["VI717"]
    assert "dashboard URL" in f.message and "RAY_ADDRESS=head:6379" in f.hint
    assert "VI718" in rules({"RAY_ADDRESS": "ray://head:10001"})
    assert rules({"RAY_ADDRESS": "head:6379"}) == {}


def test_small_dev_shm_vi810():
    f = rules({}, probes(host=HostReport(memory_gb=64.0, cpus=8, shm_gb=0.07)))["VI749"]
    assert f.severity == "warning" and "/dev/shm is 0.07 GB" in f.message and "--shm-size" in f.hint


def test_nccl_switches_vi811_and_variables_vi812():
    found = rules({"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "0", "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0"})
    assert found["VI750"].keys == ("NCCL_P2P_DISABLE",)  # IB_DISABLE=0 changes nothing
    assert found["VI751"].severity == "info" and "NCCL_DEBUG=INFO, NCCL_SOCKET_IFNAME=eth0" in found["VI751"].message
    assert "debugging" in found["VI751"].hint


def test_ray_dedup_logs_off_vi813():
    assert rules({"RAY_DEDUP_LOGS": "0"})["VI752"].severity == "warning"
    assert "VI752" not in rules({"RAY_DEDUP_LOGS": "1"})


def test_torch_cuda_vi814():
    gpus = GpuReport(True, gpus=[Gpu(0, "NVIDIA H100 80GB HBM3", 85.5, 85.0)], cuda_version="12.4")
    assert "CPU build" in rules({}, probes(gpus=gpus), torch_cuda=None)["VI753"].message
    assert "built for CUDA 12.8 but the driver supports CUDA 12.4" in rules({}, probes(gpus=gpus))["VI753"].message
    assert "VI753" not in rules({}, probes(gpus=gpus), torch_cuda="12.4")
    assert "VI753" not in rules({}, torch_cuda=None)  # no GPUs here: a CPU torch is fine


def test_verl_version_vi815():
    assert "verl 0.8.0 is installed" in rules({}, versions={**VERSIONS, "verl": "0.8.0"})["VI754"].message
    assert "not installed" in rules({}, versions={**VERSIONS, "verl": None})["VI754"].message


def test_no_rollout_engine_vi816():
    assert rules({}, versions={**VERSIONS, "vllm": None})["VI755"].severity == "info"
    assert "VI755" not in rules({}, versions={**VERSIONS, "vllm": None, "sglang": "0.5.9"})


def test_ray_token_auth_vi809():
    ray = RayReport("http://head:8265", "RAY_ADDRESS head:6379", True,
                    problem=Problem("VI725", "error", ("RAY_AUTH_TOKEN",), "the Ray dashboard at http://head:8265 "
                                    "wants a token (Ray token authentication, HTTP 401)", "set RAY_AUTH_TOKEN"))
    found = rules({}, probes(ray=ray))["VI748"]
    assert "wants a token" in found.message and found.hint == "set RAY_AUTH_TOKEN"
    ray.problem = Problem("VI711", "error", ("address",), "http://head:8265 answers but is not a Ray dashboard", "x")
    assert "VI748" not in rules({}, probes(ray=ray))


def test_ray_version_differs_vi721():
    from wizard.env.cluster import Node, Observed

    ray = RayReport("http://h:8265", "RAY_ADDRESS", True,
                    observed=Observed("http://h:8265", "2.49.0", [Node("a", "h", True, True, 8, 64)]))
    assert "the cluster runs Ray 2.49.0, this machine 2.60.0" in rules({}, probes(ray=ray))["VI721"].message


def test_secrets_and_url_credentials_are_not_shown():
    shown = doctor.shown_environment({"HF_TOKEN": "hf_secret", "RAY_ADDRESS": "ray://me:pw@head:10001",
                                      "NCCL_DEBUG": "WARN", "UNRELATED": "x"})
    assert shown == {"RAY_ADDRESS": "ray://***@head:10001", "NCCL_DEBUG": "WARN", "HF_TOKEN": "(set)"}


def test_torch_cuda_build_is_read_without_importing_torch():
    code = ("import json, sys; from wizard.env.doctor import torch_cuda_build; "
            "print(json.dumps([*torch_cuda_build(), 'torch' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    installed, cuda, imported = json.loads(out.stdout)
    assert installed is True and imported is False
    assert cuda is None or cuda[0].isdigit()  # None for a CPU build (this checkout's torch 2.13.0+cpu)


# --- the report ----------------------------------------------------------------------------------------------------


def test_text_report_shows_gpus_and_topology_matrix(monkeypatch):
    install(monkeypatch, h100_nvswitch())
    doc = doctor.collect({"RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{free_port()}", "NCCL_DEBUG": "INFO"})
    text = doctor.format_text(doc)
    assert "GPUs: 8× NVIDIA H100 80GB HBM3 (85.5 GB) — driver 550.54.15, CUDA 12.4, NVLink between all GPUs" in text
    assert "GPU0  NVIDIA H100 80GB HBM3  85.5 GB, 85.0 GB free  cc 9.0  bus 0:18:00.0" in text
    matrix = [line.split() for line in text.splitlines() if line.strip().startswith("GPU") and "NV18" in line]
    assert len(matrix) == 8 and matrix[0] == ["GPU0", "X", *["NV18"] * 7, "0"]
    assert "versions:" in text and "verl" in text and "transformers" in text and "CUDA" in text
    assert "VI710" in text  # an explicit address nobody answers on
    assert "[VI751]" in text and text.rstrip().splitlines()[-1].startswith("doctor: ")


def test_pcie_topology_in_json(monkeypatch):
    install(monkeypatch, pcie_two_numa())
    doc = doctor.collect({"RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{free_port()}"}).as_dict()
    assert doc["gpus"]["topology"]["labels"][0] == ["X", "PIX", "SYS", "SYS"]
    assert {f["id"] for f in doc["findings"]} >= {"VI744", "VI745", "VI710"}
    json.dumps(doc)


def test_doctor_cli_json_exits_zero_and_imports_nothing_heavy(tmp_path):
    fake = write_fake_nvml(tmp_path / "fake")
    env = clean_env(PYTHONPATH=f"{fake}{os.pathsep}{ROOT}", VI_FAKE_NVML="mig_a100",
                    RAY_API_SERVER_ADDRESS=f"http://127.0.0.1:{free_port()}", CUDA_VISIBLE_DEVICES="0")
    code = ("import sys; from wizard.cli.app import main; rc = main(['doctor', '--json']); "
            "print('HEAVY', sorted(m for m in ('torch','ray','verl','vllm','transformers','pydantic','jinja2') "
            "if m in sys.modules), file=sys.stderr); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) >= {"versions", "cuda", "gpus", "ray", "host", "environment", "findings", "verl_init"}
    assert set(doc["versions"]) == set(doctor.PACKAGES)
    assert doc["gpus"]["gpus"][0]["mig_enabled"] is True
    ids = {f["id"] for f in doc["findings"]}
    assert {"VI741", "VI719", "VI710"} <= ids
    assert doc["environment"]["CUDA_VISIBLE_DEVICES"] == "0"


@pytest.mark.parametrize("address", [
    "silent",  # a dashboard port on this machine that accepts and never answers
    "ray-head.invalid:6379",  # a name that does not resolve
    "127.0.0.1:1",  # refused at once
])
def test_doctor_answers_with_a_dead_ray_address(tmp_path, address):
    """doctor finishes (its probes are bounded; the 30 s below is only a watchdog against a hang)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        if address == "silent":
            address = f"http://127.0.0.1:{silent.getsockname()[1]}"
        env = clean_env(RAY_ADDRESS=address)
        r = subprocess.run([sys.executable, "-m", "wizard.cli.app", "doctor"], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    assert "Ray:" in r.stdout and "RAY_ADDRESS" in r.stdout


def test_doctor_without_nvidia_says_so(tmp_path, cli_env):
    fake = write_fake_nvml(tmp_path / "fake")
    env = clean_env(PYTHONPATH=f"{fake}{os.pathsep}{ROOT}", VI_FAKE_NVML="no_driver",
                    RAY_API_SERVER_ADDRESS=f"http://127.0.0.1:{free_port()}")
    r = run_cli(["doctor"], cwd=tmp_path, env=env)
    assert r.returncode == 0
    assert "GPUs: no NVIDIA GPU found (NVML: NVML Shared Library Not Found: no NVIDIA driver on this machine)" in r.stdout
    assert "[VI740]" in r.stdout
    assert r.stdout.count("NVML Shared Library Not Found") == 1 and r.stdout.count("no NVIDIA GPU found") == 1, r.stdout


def test_help_lists_doctor(cli_env):
    r = run_cli(["--help"], env=cli_env)
    assert "verl-init doctor [--json]" in r.stdout
    assert run_cli(["doctor", "--help"], env=cli_env).returncode == 0


def test_doctor_module_is_light():
    assert Path(doctor.__file__).read_text().count("import torch") == 0


def test_without_verl_doctor_does_not_claim_it_can_verify():
    """verify runs verl's own code: a Python without verl can plan, not verify."""
    no_engines = {**VERSIONS, "vllm": None, "sglang": None}
    assert "plan and verify bundles" in rules({}, versions=no_engines)["VI755"].message
    without_verl = rules({}, versions={**no_engines, "verl": None})["VI755"].message
    assert "plan bundles (verify needs verl)" in without_verl and "plan and verify" not in without_verl
