"""The GPU probe against a fake NVML at the `pynvml` boundary, and the time bounds of `probe_all`.

`FakeNVML` is a stand-in module exposing the `nvml*` functions, constants and error classes the
probe calls, built from a list of GPUs and per-pair links. Four machines: 8×H100 on NVSwitch, four
PCIe GPUs split over two NUMA nodes, a MIG-partitioned A100, and no driver. Other test modules
import it (`from test_probe import FakeNVML, ...`); `fake_nvml_dir` writes a `pynvml.py` that
builds one from $VI_FAKE_NVML for subprocesses (the pexpect tests).
"""

from __future__ import annotations

import json
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from wizard.env import probe as probe_mod
from wizard.env.probe import NO_GPU, probe_all, probe_gpus, probe_host

GiB = 2**30


# --- the fake ---------------------------------------------------------------------------------------


class NVMLError(Exception):
    """Like pynvml.NVMLError: `.value` is the NVML return code; str() its text."""

    TEXT: ClassVar[dict[int, str]] = {3: "Not Supported", 2: "Invalid Argument", 6: "Not Found", 9: "Driver Not Loaded",
            12: "NVML Shared Library Not Found"}

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self.TEXT.get(self.value, f"NVML error {self.value}")


class NVMLError_NotSupported(NVMLError):
    def __init__(self) -> None:
        super().__init__(3)


class NVMLError_InvalidArgument(NVMLError):
    def __init__(self) -> None:
        super().__init__(2)


class NVMLError_NotFound(NVMLError):
    def __init__(self) -> None:
        super().__init__(6)


class NVMLError_LibraryNotFound(NVMLError):
    def __init__(self) -> None:
        super().__init__(12)


class NVMLError_DriverNotLoaded(NVMLError):
    def __init__(self) -> None:
        super().__init__(9)


@dataclass
class FakeGpu:
    name: str
    total_gb: float  # in GiB, as NVML reports bytes
    used_gb: float = 0.0
    cc: tuple[int, int] = (9, 0)
    mig: tuple[int, int] | None = None  # (current, pending); None: MIG not supported
    mig_slices: dict[int, float] = field(default_factory=dict)  # slot -> GiB
    mig_slots: int = 7
    bus: str = ""
    numa: int | None = None
    links: list[str | None] = field(default_factory=list)  # per NVLink: remote PCI bus id (None: link down)


@dataclass
class FakeNVML:
    gpus: list[FakeGpu]
    ancestor: Callable[[int, int], int] = lambda i, j: 50
    p2p_nvlink: Callable[[int, int], bool] = lambda i, j: False
    p2p_read: Callable[[int, int], bool] = lambda i, j: True
    init_error: Callable[[], NVMLError] | None = None
    driver: str = "550.54.15"
    cuda: int = 12040
    init_delay_s: float = 0.0
    calls: list[str] = field(default_factory=list)

    def module(self) -> types.ModuleType:
        m = types.ModuleType("pynvml")
        fake = self
        state = {"init": 0}

        def record(fn: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any) -> Any:
                fake.calls.append(fn.__name__)
                if fn.__name__ not in ("nvmlInit", "nvmlShutdown") and not state["init"]:
                    raise NVMLError(1)  # Uninitialized
                return fn(*args)
            wrapper.__name__ = fn.__name__
            setattr(m, fn.__name__, wrapper)
            return wrapper

        def gpu(h: Any) -> FakeGpu:
            if isinstance(h, tuple):
                raise NVMLError_InvalidArgument()
            return fake.gpus[h]

        @record
        def nvmlInit() -> None:
            if fake.init_delay_s:
                time.sleep(fake.init_delay_s)
            if fake.init_error is not None:
                raise fake.init_error()
            state["init"] += 1

        @record
        def nvmlShutdown() -> None:
            state["init"] = max(0, state["init"] - 1)

        @record
        def nvmlSystemGetDriverVersion() -> str:
            return fake.driver

        @record
        def nvmlSystemGetCudaDriverVersion() -> int:
            return fake.cuda

        @record
        def nvmlDeviceGetCount() -> int:
            return len(fake.gpus)

        @record
        def nvmlDeviceGetHandleByIndex(i: int) -> int:
            if not 0 <= i < len(fake.gpus):
                raise NVMLError_InvalidArgument()
            return i

        @record
        def nvmlDeviceGetName(h: int) -> str:
            return gpu(h).name

        @record
        def nvmlDeviceGetMemoryInfo(h: Any) -> Any:
            if isinstance(h, tuple):  # a MIG device handle
                total = fake.gpus[h[1]].mig_slices[h[2]] * GiB
                return types.SimpleNamespace(total=int(total), free=int(total), used=0)
            g = gpu(h)
            return types.SimpleNamespace(total=int(g.total_gb * GiB), free=int((g.total_gb - g.used_gb) * GiB),
                                         used=int(g.used_gb * GiB))

        @record
        def nvmlDeviceGetCudaComputeCapability(h: int) -> tuple[int, int]:
            return gpu(h).cc

        @record
        def nvmlDeviceGetMigMode(h: int) -> list[int]:
            g = gpu(h)
            if g.mig is None:
                raise NVMLError_NotSupported()
            return list(g.mig)

        @record
        def nvmlDeviceGetMaxMigDeviceCount(h: int) -> int:
            g = gpu(h)
            if g.mig is None:
                raise NVMLError_NotSupported()
            return g.mig_slots

        @record
        def nvmlDeviceGetMigDeviceHandleByIndex(h: int, k: int) -> tuple[str, int, int]:
            if k not in gpu(h).mig_slices:
                raise NVMLError_NotFound()
            return ("mig", h, k)

        @record
        def nvmlDeviceGetPciInfo(h: int) -> Any:
            return types.SimpleNamespace(busId=gpu(h).bus.encode(), busIdLegacy=gpu(h).bus[4:].encode())

        @record
        def nvmlDeviceGetNumaNodeId(h: int) -> int:
            g = gpu(h)
            if g.numa is None:
                raise NVMLError_NotSupported()
            return g.numa

        @record
        def nvmlDeviceGetNvLinkState(h: int, link: int) -> int:
            g = gpu(h)
            if not g.links:
                raise NVMLError_NotSupported()
            if link >= len(g.links):
                raise NVMLError_InvalidArgument()
            return 1 if g.links[link] else 0

        @record
        def nvmlDeviceGetNvLinkRemotePciInfo(h: int, link: int) -> Any:
            g = gpu(h)
            if link >= len(g.links) or not g.links[link]:
                raise NVMLError_InvalidArgument()
            return types.SimpleNamespace(busId=g.links[link])

        @record
        def nvmlDeviceGetTopologyCommonAncestor(h1: int, h2: int) -> int:
            gpu(h1), gpu(h2)
            return 0 if h1 == h2 else fake.ancestor(h1, h2)

        @record
        def nvmlDeviceGetP2PStatus(h1: int, h2: int, index: int) -> int:
            gpu(h1), gpu(h2)
            if index == 2:  # NVML_P2P_CAPS_INDEX_NVLINK
                return 0 if fake.p2p_nvlink(h1, h2) else 5  # OK / NOT_SUPPORTED
            if index == 0:  # READ
                return 0 if fake.p2p_read(h1, h2) else 3  # OK / IOH_TOPOLOGY_NOT_SUPPORTED
            return 5

        m.NVMLError = NVMLError  # type: ignore[attr-defined]
        for cls in (NVMLError_NotSupported, NVMLError_InvalidArgument, NVMLError_NotFound, NVMLError_LibraryNotFound,
                    NVMLError_DriverNotLoaded):
            setattr(m, cls.__name__, cls)
        m.NVML_TOPOLOGY_SYSTEM = 50  # type: ignore[attr-defined]
        m.NVML_P2P_CAPS_INDEX_NVLINK = 2  # type: ignore[attr-defined]
        return m


def h100_nvswitch() -> FakeNVML:
    """A DGX/HGX H100: 8 GPUs, 18 NVLinks each into the NVSwitch fabric; NUMA 0 holds 0-3, NUMA 1 holds 4-7."""
    gpus = []
    for i in range(8):
        bus = f"00000000:{0x18 + 0x10 * i:02X}:00.0"
        switches: list[str | None] = [f"00000000:{0xA0 + (k % 4):02X}:00.0" for k in range(18)]  # 4 NVSwitch chips
        gpus.append(FakeGpu("NVIDIA H100 80GB HBM3", 79.65, used_gb=0.5, cc=(9, 0), mig=(0, 0), bus=bus,
                            numa=i // 4, links=switches))
    return FakeNVML(gpus, ancestor=lambda i, j: 40 if i // 4 == j // 4 else 50, p2p_nvlink=lambda i, j: True)


def pcie_two_numa() -> FakeNVML:
    """4 PCIe GPUs without NVLink: 0-1 under one PCIe switch on NUMA 0, 2-3 under one on NUMA 1; no P2P across."""
    gpus = [FakeGpu("NVIDIA GeForce RTX 4090", 23.99, cc=(8, 9), bus=f"00000000:{b:02X}:00.0", numa=i // 2)
            for i, b in enumerate((0x01, 0x02, 0x81, 0x82))]
    return FakeNVML(gpus, ancestor=lambda i, j: 10 if i // 2 == j // 2 else 50,
                    p2p_read=lambda i, j: i // 2 == j // 2)


def mig_a100() -> FakeNVML:
    """One A100 80GB with MIG on: slices of 19.5, 19.5 and 39.25 GiB in slots 0, 1, 3."""
    g = FakeGpu("NVIDIA A100-SXM4-80GB", 79.25, cc=(8, 0), mig=(1, 1), mig_slices={0: 19.5, 1: 19.5, 3: 39.25},
                bus="00000000:07:00.0", numa=0)
    return FakeNVML([g])


def no_driver() -> FakeNVML:
    return FakeNVML([], init_error=NVMLError_LibraryNotFound)


MACHINES = {"h100_nvswitch": h100_nvswitch, "pcie_two_numa": pcie_two_numa, "mig_a100": mig_a100,
            "no_driver": no_driver}


def install(monkeypatch: pytest.MonkeyPatch, fake: FakeNVML) -> FakeNVML:
    monkeypatch.setitem(sys.modules, "pynvml", fake.module())
    return fake


FAKE_MODULE = '''\
"""A fake pynvml for subprocess tests: the machine named by $VI_FAKE_NVML (see tests/test_probe.py)."""
import os, sys
sys.path.insert(0, {tests!r})
import test_probe as _t
_fake = _t.MACHINES[os.environ.get("VI_FAKE_NVML", "no_driver")]()
globals().update({{k: v for k, v in vars(_fake.module()).items() if not k.startswith("__")}})
'''


def write_fake_nvml(folder: Path) -> Path:
    """A folder with a `pynvml.py` that stands in for nvidia-ml-py in a subprocess (put it first on PYTHONPATH)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pynvml.py").write_text(FAKE_MODULE.format(tests=str(Path(__file__).resolve().parent)))
    return folder


# --- the four machines -----------------------------------------------------------------------------------


def test_eight_h100_on_nvswitch(monkeypatch):
    fake = install(monkeypatch, h100_nvswitch())
    r = probe_gpus()
    assert r.found and r.count == 8
    g = r.gpus[0]
    assert g.name == "NVIDIA H100 80GB HBM3" and g.short_name == "H100 80GB HBM3"
    assert g.memory_total_gb == pytest.approx(85.52, abs=0.01)  # 79.65 GiB in the planner's GB (1e9)
    assert g.memory_free_gb == pytest.approx(85.0, abs=0.05)
    assert g.compute_capability == "9.0" and g.mig_enabled is False and g.numa_node == 0
    assert g.pci_bus_id == "0:18:00.0" and g.nvlinks_active == 18
    assert r.driver_version == "550.54.15" and r.cuda_version == "12.4"
    # every pair talks over the NVSwitch fabric: NV18 like nvidia-smi, planner level 1
    assert all(r.link_label(i, j) == "NV18" for i in range(8) for j in range(8) if i != j)
    assert r.levels() == [[0 if i == j else 1 for j in range(8)] for i in range(8)]
    assert r.ancestor[0][5] == 50 and r.ancestor[0][3] == 40  # PCIe paths are still reported
    assert r.interconnect() == "NVLink between all GPUs"
    assert not [p for p in r.findings() if p.severity != "info"]
    lines = r.matrix_lines()
    assert lines[0].split() == [*(f"GPU{j}" for j in range(8)), "NUMA"]
    assert lines[1].split() == ["GPU0", "X", *["NV18"] * 7, "0"] and lines[8].split()[-1] == "1"
    assert fake.calls[0] == "nvmlInit" and fake.calls[-1] == "nvmlShutdown"


def test_four_pcie_gpus_over_two_numa_nodes(monkeypatch):
    fake = install(monkeypatch, pcie_two_numa())
    r = probe_gpus()
    assert r.found and r.count == 4 and {g.nvlinks_active for g in r.gpus} == {0}
    assert [[r.link_label(i, j) for j in range(4)] for i in range(4)] == [
        ["X", "PIX", "SYS", "SYS"], ["PIX", "X", "SYS", "SYS"], ["SYS", "SYS", "X", "PIX"], ["SYS", "SYS", "PIX", "X"]]
    assert r.levels() == [[0, 2, 4, 4], [2, 0, 4, 4], [4, 4, 0, 2], [4, 4, 2, 0]]
    assert r.p2p[0][1] is True and r.p2p[0][2] is False
    assert [g.numa_node for g in r.gpus] == [0, 0, 1, 1]
    rules = {p.rule: p for p in r.findings()}
    assert rules["VI744"].severity == "info" and "0-2, 0-3, 1-2, 1-3" in rules["VI744"].message
    assert rules["VI745"].severity == "warning" and "0-2" in rules["VI745"].message
    assert r.interconnect() == "PCIe only (worst path: SYS)"
    assert fake.calls.count("nvmlShutdown") == 1


def test_pcie_topology_keeps_tensor_parallel_groups_inside_a_numa_node(monkeypatch):
    """The probed levels feed the planner: TP=2 groups (0,1) and (2,3) stay under one switch; TP=4 must cross."""
    from wizard.intent.answers import Answers
    from wizard.planner.pipeline import plan
    from wizard.planner.stages.layout import LINK_LEVELS

    assert probe_mod.LINK_LEVELS == LINK_LEVELS
    install(monkeypatch, pcie_two_numa())
    levels = probe_gpus().levels()
    ok = plan(Answers(gpus_per_node=4, gpu_memory_gb=24, gpu_type="A10G", model="Qwen/Qwen2.5-3B-Instruct",
                      prompts_per_step=64, lora_rank=32), base_dir="/r", topology=levels)
    # the memory planner's roomy choice is TP 2; ranked by predicted step a TP 1 that also fits may win, but never
    # a TP 4 that crosses the switches
    assert ok.facts["rollout_tp"] <= 2 and "VI311" not in {p.rule for p in ok.findings}
    assert not any(label.startswith("rollout TP 4") for label, _ in ok.facts["layout_ranking"].table)
    wide = plan(Answers(gpus_per_node=4, gpu_memory_gb=24, gpu_type="A10G", model="Qwen/Qwen2.5-7B-Instruct",
                        prompts_per_step=64, lora_rank=32), base_dir="/r", topology=levels)
    assert wide.facts["rollout_tp"] == 4 and "VI311" in {p.rule for p in wide.findings}


def test_mig_partitioned_gpu(monkeypatch):
    install(monkeypatch, mig_a100())
    r = probe_gpus()
    assert r.found and r.count == 1
    g = r.gpus[0]
    assert g.mig_enabled is True and g.mig_pending is True
    assert [(s.index, s.memory_gb) for s in g.mig_slices] == [(0, 20.94), (1, 20.94), (3, 42.14)]
    assert r.mig_gpus == [g] and r.whole_gpus == []
    (vi802,) = [p for p in r.findings() if p.rule == "VI741"]
    assert vi802.severity == "warning" and "MIG-partitioned" in vi802.message and "-mig 0" in vi802.hint
    assert "MIG on GPU 0" in r.describe()


def test_no_driver(monkeypatch):
    install(monkeypatch, no_driver())
    r = probe_gpus()
    assert not r.found and r.count == 0
    assert r.reason.startswith(NO_GPU) and "no NVIDIA driver" in r.reason
    assert r.levels() is None and r.matrix_lines() == []
    assert [p.rule for p in r.findings()] == ["VI740"]


def test_driver_not_loaded_and_zero_gpus(monkeypatch):
    install(monkeypatch, FakeNVML([], init_error=NVMLError_DriverNotLoaded))
    r = probe_gpus()
    assert not r.found and "kernel driver is not running" in r.reason
    install(monkeypatch, FakeNVML([]))
    r = probe_gpus()
    assert not r.found and r.reason == f"{NO_GPU} (the driver reports 0 GPUs)"


def test_no_nvidia_ml_py(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    r = probe_gpus()
    assert not r.found and "nvidia-ml-py is not installed" in r.reason


def test_busy_and_mixed_gpus_are_reported(monkeypatch):
    fake = pcie_two_numa()
    fake.gpus[1].used_gb = 10
    fake.gpus[3] = FakeGpu("NVIDIA RTX A5000", 23.99, cc=(8, 6), bus="00000000:82:00.0", numa=1)
    install(monkeypatch, fake)
    rules = {p.rule: p for p in probe_gpus().findings()}
    assert "GPU 1 has 10.7 of 25.8 GB in use" in rules["VI743"].message
    assert "mixes GPUs" in rules["VI742"].message


def test_direct_nvlink_pairs_without_a_switch(monkeypatch):
    """Two pairs bridged by NVLink (0-1, 2-3), nothing between the pairs: NV4 inside, PCIe across."""
    buses = [f"00000000:{b:02X}:00.0" for b in (0x3B, 0x5E, 0x86, 0xAF)]
    peer = {0: 1, 1: 0, 2: 3, 3: 2}
    gpus = [FakeGpu("NVIDIA A100-PCIE-40GB", 39.5, cc=(8, 0), bus=buses[i], numa=i // 2,
                    links=[buses[peer[i]]] * 4 + [None] * 8) for i in range(4)]
    install(monkeypatch, FakeNVML(gpus, ancestor=lambda i, j: 30 if i // 2 == j // 2 else 50))
    r = probe_gpus()
    assert r.link_label(0, 1) == "NV4" and r.link_label(0, 2) == "SYS" and r.link_label(2, 3) == "NV4"
    assert r.levels() == [[0, 1, 4, 4], [1, 0, 4, 4], [4, 4, 0, 1], [4, 4, 1, 0]]
    assert r.interconnect() == "NVLink between 2 of 6 GPU pairs, the rest PCIe (worst: SYS)"


def test_as_dict_is_json(monkeypatch):
    install(monkeypatch, h100_nvswitch())
    doc = json.loads(json.dumps(probe_gpus().as_dict()))
    assert doc["count"] == 8 and doc["topology"]["labels"][0][1] == "NV18" and doc["topology"]["levels"][0][1] == 1


# --- bounded in time ---------------------------------------------------------------------------------


def test_a_hung_driver_cannot_hold_the_probe(monkeypatch):
    fake = h100_nvswitch()
    fake.init_delay_s = 5.0
    install(monkeypatch, fake)
    probes = probe_all({"RAY_API_SERVER_ADDRESS": "http://127.0.0.1:9"}, gpu_timeout=0.5, ray_timeout=0.5)
    assert not probes.gpus.found and "did not answer within 0.5 s" in probes.gpus.reason


def test_host_probe_reads_meminfo_and_shm(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       263842876 kB\nMemFree: 1 kB\n")
    h = probe_host(str(meminfo), str(tmp_path))
    assert h.memory_gb == pytest.approx(270.2, abs=0.1) and h.cpus and h.shm_gb is not None
    assert probe_host("/nonexistent", "/nonexistent").memory_gb is None


def test_probe_module_imports_only_the_standard_library():
    import subprocess

    code = "import sys, wizard.env.probe; print(sorted(m for m in ('pynvml','ray','torch','pydantic','rich') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "[]"


def test_a_gpu_below_compute_capability_8_is_named(monkeypatch):
    """NVML's compute capability (nvmlDeviceGetCudaComputeCapability) of a Tesla V100: 7.0, below what vLLM's bf16 and
    flash-attn 2 need (check's VI864/VI865 have the sources); the probe says so once, naming the GPU and the fix. The
    name of that card plans fp16 (wizard.planner.precision); an H100 machine gets no such finding."""
    from wizard.verlspec.hardware import without_bf16

    install(monkeypatch, FakeNVML([FakeGpu("Tesla V100-SXM2-32GB", 31.75, cc=(7, 0)) for _ in range(2)]))
    r = probe_gpus()
    [hit] = [p for p in r.findings() if p.rule == "VI763"]
    assert hit.severity == "warning" and "GPU 0 (Tesla V100-SXM2-32GB)" in hit.message and "7.0" in hit.message
    assert "rollout.dtype=float16" in hit.hint
    assert without_bf16(r.gpus[0].short_name) is not None  # the name the wizard answers gpu_type with plans fp16
    install(monkeypatch, h100_nvswitch())
    assert not [p for p in probe_gpus().findings() if p.rule == "VI763"]
