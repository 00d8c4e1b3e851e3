"""Hardware beyond NVIDIA (issue 16 item 3): the `accelerator` answer (nvidia | amd | ascend) sets verl's device
key, the Kubernetes / Ray / Slurm resource names, and refuses combinations verl 0.9.1 has no build for.

Oracles: verl's own platform classes (verl/plugin/platform/platform_{cuda,rocm,npu}.py) for the device and Ray
names, KubeRay's CRDs for the manifests (tests/test_cluster_crd.py), verl's own compose + validation for the
bundles (verify_with_verl, on CPU), and `check` for check-cleanliness.
"""

from __future__ import annotations

import sys
import types

import pytest
import yaml

import wizard
from test_cluster_crd import cluster_files, validate_manifest
from wizard.intent.answers import make_answers
from wizard.intent.errors import WizardError
from wizard.intent.profiles import load_profile
from wizard.verlspec.hardware import ACCELERATORS, accelerator_of_gpu_type, memory_of_gpu_type

PROFILES = {"amd-mi300x-kuberay": "amd", "ascend-910b": "ascend"}


def _plan(**answers):
    return wizard.plan(make_answers(answers), base_dir="/work/runs")


def _refused(rule: str, **answers) -> str:
    with pytest.raises(WizardError) as exc:
        _plan(**answers)
    lines = [p.line() for p in exc.value.problems if p.rule == rule]
    assert lines, [p.line() for p in exc.value.problems]
    return lines[0]


# --- verl's own names --------------------------------------------------------------------------------


@pytest.mark.slow
def test_names_agree_with_verls_platforms():
    """Device and Ray resource names read from verl 0.9.1's platform classes, not restated."""
    from verl.plugin.platform.platform_cuda import PlatformCUDA
    from verl.plugin.platform.platform_manager import PlatformRegistry
    from verl.plugin.platform.platform_npu import PlatformNPU
    from verl.plugin.platform.platform_rocm import PlatformROCm

    for acc, cls in (("nvidia", PlatformCUDA), ("amd", PlatformROCm), ("ascend", PlatformNPU)):
        a = ACCELERATORS[acc]
        obj = object.__new__(cls)  # no device needed: the names are plain properties
        assert a.device == cls.device_name.fget(obj)
        assert a.ray_resource == cls.ray_resource_name(obj)
        assert PlatformRegistry.get(a.verl_platform) is cls
        assert cls.vendor_name.fget(obj) == a.verl_platform
    assert ACCELERATORS["amd"].device == "cuda"  # ROCm keeps torch's "cuda" device type


def test_gpu_catalogue_knows_amd_and_ascend():
    assert memory_of_gpu_type("AMD Instinct MI300X") == 192
    assert memory_of_gpu_type("MI250X") == 64  # one GCD of the module, as ROCm shows it
    assert memory_of_gpu_type("Ascend910B") == 64 == memory_of_gpu_type("Ascend 910B")
    assert accelerator_of_gpu_type("MI300X") == "amd" and accelerator_of_gpu_type("Ascend910B") == "ascend"
    assert accelerator_of_gpu_type("NVIDIA H100 80GB HBM3") == "nvidia" and accelerator_of_gpu_type("TPU") is None


# --- the plan and its files ------------------------------------------------------------------------


def test_nvidia_default_sets_no_device_key():
    plan = _plan()
    assert "trainer.device" not in plan.settings


@pytest.mark.parametrize("profile, acc", sorted(PROFILES.items()))
def test_profiles_set_verls_device_keys(profile, acc):
    plan = wizard.plan(load_profile(profile), base_dir="/work/runs")
    assert plan.value("trainer.device") == ACCELERATORS[acc].device
    files = wizard.render(plan)
    assert "nvidia.com/gpu" not in "".join(files.values())
    text = files["PLAN.md"]
    assert "trainer.device" in text and ACCELERATORS[acc].label in text


@pytest.mark.slow
def test_amd_kuberay_manifests_name_amd_gpus_and_validate_against_the_crds():
    from wizard.env.cluster import manifest_problems

    files = cluster_files("amd-mi300x-kuberay")
    for name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml"):
        doc = yaml.safe_load(files[name])
        assert validate_manifest(doc) == [], name
        assert manifest_problems(doc, 2, 8, source=name) == [], name
        spec = doc["spec"]["rayClusterSpec"] if doc["kind"] == "RayJob" else doc["spec"]
        (worker,) = spec["workerGroupSpecs"]
        res = worker["template"]["spec"]["containers"][0]["resources"]
        assert res["limits"]["amd.com/gpu"] == res["requests"]["amd.com/gpu"] == "8"
        assert worker["rayStartParams"]["num-gpus"] == "8"  # Ray's GPU resource on ROCm (verl asks for "GPU")


def test_ascend_on_kuberay_asks_for_npus_as_verl_does():
    from wizard.env.cluster import manifest_problems

    files = cluster_files("ascend-910b", cluster="kuberay", image="registry.example.com/verl:0.9.1-ascend",
                          checkpoint_pvc="verl-checkpoints")
    doc = yaml.safe_load(files["k8s/rayjob.yaml"])
    assert validate_manifest(doc) == []
    assert manifest_problems(doc, 2, 8, source="k8s/rayjob.yaml") == []
    (worker,) = doc["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert worker["template"]["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910"] == "8"
    params = worker["rayStartParams"]
    assert params["num-gpus"] == "0" and params["resources"] == '"{\\"NPU\\": 8}"'  # KubeRay's quoted-JSON form
    assert '$2 == "NPU"' in files["k8s/submit.sh"]


def test_ascend_slurm_asks_for_the_npu_gres():
    files = wizard.render(wizard.plan(load_profile("ascend-910b"), base_dir="/work/runs"))
    sbatch = files["slurm/job.sbatch"]
    assert "#SBATCH --gres=npu:8" in sbatch and "--gpus-per-node" not in sbatch.split("\n\n")[0]
    assert "ray_total NPU" in sbatch


def test_amd_slurm_keeps_the_gpu_gres():
    files = wizard.render(_plan(accelerator="amd", gpu_type="MI300X", gpu_memory_gb=192, cluster="slurm",
                                nnodes=2, model="Qwen/Qwen2.5-7B-Instruct"))
    assert "#SBATCH --gpus-per-node=8" in files["slurm/job.sbatch"]
    assert "ray_total GPU" in files["slurm/job.sbatch"]


# --- refusals with the reason ----------------------------------------------------------------------


def test_sglang_on_ascend_is_refused():
    line = _refused("VI630", accelerator="ascend", gpu_type="Ascend910B", gpu_memory_gb=64, rollout_engine="sglang")
    assert "rollout_engine=sglang" in line and "vllm-ascend" in line and "set rollout_engine=vllm" in line


def test_megatron_on_amd_is_refused():
    line = _refused("VI631", accelerator="amd", gpu_type="MI300X", gpu_memory_gb=192, train_backend="megatron")
    assert "train_backend=megatron" in line and "fsdp" in line


def test_a_gpu_type_of_another_vendor_is_refused():
    line = _refused("VI632", accelerator="amd")
    assert "the default gpu_type=H100" in line and "MI300X" in line
    assert "accelerator=ascend" in _refused("VI632", accelerator="nvidia", gpu_type="Ascend910B")


def test_kuberay_off_nvidia_needs_an_image():
    line = _refused("VI633", accelerator="amd", gpu_type="MI300X", gpu_memory_gb=192, cluster="kuberay",
                    checkpoint_pvc="ckpt")
    assert "image" in line and "CUDA builds" in line


def test_unknown_accelerator_is_a_one_line_error():
    with pytest.raises(WizardError) as exc:
        make_answers({"accelerator": "tpu"})
    (p,) = exc.value.problems
    assert p.rule == "VI102" and "nvidia, amd, ascend" in p.hint


# --- accepted by verl, check-clean ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_profiles_are_accepted_by_verl_on_cpu_and_check_clean(profile, tmp_path, tiny_model, monkeypatch):
    from wizard.check.lint import check
    from wizard.verify.harness import verify_with_verl

    files = wizard.render(wizard.plan(load_profile(profile), base_dir=str(tmp_path)))
    bundle = wizard.write_bundle(files, tmp_path / profile)
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, report.summary()
    assert any(c.name.startswith("validate_config") for c in report.checks)
    linted = check(str(bundle), defaults="snapshot", env={"HOME": str(tmp_path)})
    assert not linted.errors and not linted.warnings, [f.problem.line() for f in linted.findings]


# --- the amdsmi probe (faked at the library boundary) ----------------------------------------------


def _fake_amdsmi(gpus: list[tuple[str, int, int]], fail_init: bool = False) -> types.ModuleType:
    mod = types.ModuleType("amdsmi")

    class AmdSmiMemoryType:
        VRAM = 0

    class AmdSmiLibraryException(Exception):
        pass

    def init():
        if fail_init:
            raise AmdSmiLibraryException("AMDSMI_STATUS_DRIVER_NOT_LOADED")

    mod.AmdSmiMemoryType = AmdSmiMemoryType
    mod.amdsmi_init = init
    mod.amdsmi_shut_down = lambda: None
    mod.amdsmi_get_processor_handles = lambda: list(range(len(gpus)))
    mod.amdsmi_get_gpu_asic_info = lambda h: {"market_name": gpus[h][0], "vendor_id": 0x1002}
    mod.amdsmi_get_gpu_memory_total = lambda h, t: gpus[h][1] if t == AmdSmiMemoryType.VRAM else 0
    mod.amdsmi_get_gpu_memory_usage = lambda h, t: gpus[h][2]
    return mod


def test_amdsmi_probe_reads_eight_mi300x(monkeypatch):
    from wizard.env.probe import probe_amd_gpus

    gib = 1 << 30
    monkeypatch.setitem(sys.modules, "amdsmi", _fake_amdsmi([("AMD Instinct MI300X", 192 * gib, 2 * gib)] * 8))
    report = probe_amd_gpus()
    assert report.found and report.count == 8
    g = report.gpus[0]
    assert g.name == "AMD Instinct MI300X" and abs(g.memory_total_gb - 192 * gib / 1e9) < 0.01
    assert memory_of_gpu_type(g.name) == 192 and accelerator_of_gpu_type(g.name) == "amd"


def test_amdsmi_probe_without_the_library_or_driver(monkeypatch):
    from wizard.env.probe import probe_amd_gpus

    monkeypatch.setitem(sys.modules, "amdsmi", None)  # import amdsmi raises ImportError
    report = probe_amd_gpus()
    assert not report.found and "amdsmi is not installed" in report.reason
    monkeypatch.setitem(sys.modules, "amdsmi", _fake_amdsmi([], fail_init=True))
    report = probe_amd_gpus()
    assert not report.found and "DRIVER_NOT_LOADED" in report.reason
    monkeypatch.setitem(sys.modules, "amdsmi", _fake_amdsmi([]))
    assert "0 GPUs" in probe_amd_gpus().reason


def test_without_nvidia_gpus_the_probe_finds_amd_ones_and_the_wizard_plans_for_them(monkeypatch):
    from wizard.cli.interactive.questions import Context, _probed_gpus
    from wizard.env.probe import HostReport, probe_any_gpus

    gib = 1 << 30
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no nvidia-ml-py: NVML finds nothing
    monkeypatch.setitem(sys.modules, "amdsmi", _fake_amdsmi([("AMD Instinct MI300X", 192 * gib, 0)] * 8))
    report = probe_any_gpus()
    assert report.found and report.vendor == "amd" and report.as_dict()["vendor"] == "amd"
    assert "8× AMD Instinct MI300X" in report.describe() and not report.findings()
    answers = _probed_gpus(Context(probes=types.SimpleNamespace(gpus=report, host=HostReport()), base_dir="."))
    assert answers["accelerator"] == "amd" and answers["gpus_per_node"] == 8
    plan = _plan(**answers, model="Qwen/Qwen2.5-7B-Instruct")  # the probed GPU name is accepted for amd
    assert plan.value("trainer.device") == "cuda"
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    none = probe_any_gpus()
    assert not none.found and none.vendor == "nvidia" and "nvidia-ml-py is not installed" in none.reason


def test_check_reads_the_device_and_ascend_gpu_types():
    from wizard.check.lint import check

    base = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
    on_npu = check(None, base + ["trainer.device=npu", "actor_rollout_ref.rollout.name=vllm"], defaults="snapshot", env={})
    assert not [f for f in on_npu.findings if f.problem.rule == "VI817"]
    sgl = check(None, base + ["actor_rollout_ref.rollout.name=sglang"], defaults="snapshot", env={}, gpu_type="Ascend910B")
    (hit,) = [f.problem for f in sgl.findings if f.problem.rule == "VI817"]
    assert hit.severity == "warning" and "--gpu-type Ascend910B" in hit.message
    assert any("assuming 64 GB per GPU" in f.problem.message for f in sgl.findings if f.problem.rule == "VI861")
    amd = check(None, base + ["actor_rollout_ref.rollout.name=sglang"], defaults="snapshot", env={}, gpu_type="MI300X")
    assert not [f for f in amd.findings if f.problem.rule == "VI817"]
    assert any("assuming 192 GB per GPU" in f.problem.message for f in amd.findings if f.problem.rule == "VI861")


def test_check_mode_cluster_counts_ascend_npus_as_verl_does():
    """A Ray dashboard whose Ascend nodes report the NPU custom resource: the cluster probe counts it as verl's
    resource pool does (single_controller/ray/base.py:230), not as 0 GPUs."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from wizard.env.cluster import probe_ray

    nodes = [{"node_id": "h", "node_ip": "10.0.0.1", "state": "ALIVE", "is_head_node": True,
              "resources_total": {"CPU": 10}}] + [
             {"node_id": f"w{i}", "node_ip": f"10.0.0.{i + 2}", "state": "ALIVE", "is_head_node": False,
              "resources_total": {"CPU": 64, "NPU": 8, "memory": 1e12}} for i in range(2)]
    answers = {"/api/version": {"ray_version": "2.60.0", "version": "5"},
               "/api/v0/nodes": {"data": {"result": {"result": nodes}}},
               "/api/cluster_status": {"data": {"clusterStatus": {"loadMetricsReport": {"usage": {"NPU": [4.0, 16.0]}}}}}}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps(next((v for k, v in answers.items() if self.path.startswith(k)), {})).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        seen = probe_ray(f"http://127.0.0.1:{httpd.server_address[1]}", timeout=2.0)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert sorted(n.gpus for n in seen.nodes) == [0, 8, 8]
    assert seen.gpus_used == 4.0
