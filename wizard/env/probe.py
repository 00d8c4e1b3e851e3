"""What this machine and its Ray cluster have: the wizard's defaults and `verl-init doctor`'s report.

- GPUs through NVML (nvidia-ml-py, imported as `pynvml`, lazily): count, name, total/free memory,
  compute capability, MIG mode and MIG slices, driver and CUDA versions, and for every pair of GPUs
  the common PCIe ancestor (same board / PCIe switch / host bridge / NUMA node / system), the NVLink
  links between them and the P2P status. No library, no driver or no GPU is not an error: the
  probe says "no NVIDIA GPU found" and the wizard asks instead.
- The Ray cluster through `wizard.env.cluster` (the dashboard's HTTP API via wizard.env.http, ≤ 2 s per request;
  never `ray.init`).
- Host memory, CPUs and /dev/shm from the operating system.

Each probe runs in a daemon thread with a deadline (`probe_all`), so a hung driver or a black-holed
RAY_ADDRESS cannot hold the wizard or `doctor`. Only the standard library is imported at module level.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from wizard.intent.errors import Problem

T = TypeVar("T")

GB = 1e9  # the planner's GB (wizard.planner.memory.GB)

# NVML constants (nvml.h; stable across driver versions). The fake NVML in the tests uses the same numbers.
TOPOLOGY_INTERNAL, TOPOLOGY_SINGLE, TOPOLOGY_MULTIPLE = 0, 10, 20
TOPOLOGY_HOSTBRIDGE, TOPOLOGY_NODE, TOPOLOGY_SYSTEM = 30, 40, 50
P2P_CAPS_INDEX_READ, P2P_CAPS_INDEX_NVLINK = 0, 2
P2P_STATUS_OK = 0
FEATURE_ENABLED = 1
NVLINK_MAX_LINKS = 36  # pynvml.NVML_NVLINK_MAX_LINKS in nvidia-ml-py 13; older drivers stop earlier

# What each NVML common-ancestor level means, and its `nvidia-smi topo -m` label.
ANCESTORS: dict[int, tuple[str, str]] = {
    TOPOLOGY_INTERNAL: ("same board", "BRD"),
    TOPOLOGY_SINGLE: ("one PCIe switch", "PIX"),
    TOPOLOGY_MULTIPLE: ("several PCIe switches", "PXB"),
    TOPOLOGY_HOSTBRIDGE: ("a PCIe host bridge", "PHB"),
    TOPOLOGY_NODE: ("host bridges within a NUMA node", "NODE"),
    TOPOLOGY_SYSTEM: ("the link between NUMA nodes", "SYS"),
}

# The planner's link levels (wizard.planner.stages.layout.LINK_LEVELS): 0 same GPU, 1 NVLink/NVSwitch, 2 PCIe switch,
# 3 PCIe host bridge, 4 NUMA boundary. Kept here so that probing imports no planner (a test keeps them equal).
LINK_LEVELS = {0: "same GPU", 1: "NVLink/NVSwitch", 2: "PCIe switch", 3: "PCIe host bridge", 4: "NUMA boundary"}
_LEVEL_OF_ANCESTOR = {TOPOLOGY_INTERNAL: 2, TOPOLOGY_SINGLE: 2, TOPOLOGY_MULTIPLE: 2, TOPOLOGY_HOSTBRIDGE: 3,
                      TOPOLOGY_NODE: 3, TOPOLOGY_SYSTEM: 4}

NO_GPU = "no NVIDIA GPU found"


# --- GPUs ----------------------------------------------------------------------------------------


@dataclass
class MigSlice:
    index: int
    memory_gb: float


@dataclass
class Gpu:
    index: int
    name: str
    memory_total_gb: float | None = None
    memory_free_gb: float | None = None
    compute_capability: str | None = None  # "9.0"
    mig_enabled: bool | None = None  # None: the GPU does not support MIG
    mig_pending: bool | None = None  # MIG mode after the next GPU reset
    mig_slices: list[MigSlice] = field(default_factory=list)
    pci_bus_id: str | None = None
    numa_node: int | None = None
    nvlinks_active: int = 0

    @property
    def short_name(self) -> str:
        return short_gpu_name(self.name)

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["mig_slices"] = [s.__dict__ for s in self.mig_slices]
        return d


@dataclass
class GpuReport:
    """What NVML reported. `found` is False with `reason` when there is no usable NVIDIA GPU."""

    found: bool
    reason: str = ""
    gpus: list[Gpu] = field(default_factory=list)
    driver_version: str | None = None
    cuda_version: str | None = None  # the driver's CUDA version ("12.4")
    ancestor: list[list[int | None]] = field(default_factory=list)  # NVML common-ancestor level per pair
    nvlinks: list[list[int]] = field(default_factory=list)  # NVLink links joining each pair (switch: via the fabric)
    p2p: list[list[bool | None]] = field(default_factory=list)  # P2P reads possible per pair (None: unknown)
    seconds: float = 0.0
    vendor: str = "nvidia"  # the `accelerator` answer these GPUs are: nvidia (NVML) or amd (amdsmi)

    @property
    def count(self) -> int:
        return len(self.gpus)

    @property
    def mig_gpus(self) -> list[Gpu]:
        return [g for g in self.gpus if g.mig_enabled]

    @property
    def whole_gpus(self) -> list[Gpu]:
        """GPUs verl can use as whole devices (MIG off)."""
        return [g for g in self.gpus if not g.mig_enabled]

    def link_label(self, i: int, j: int) -> str:
        """`nvidia-smi topo -m`-style label: X, NV<links>, PIX, PXB, PHB, NODE, SYS (or ? when unknown)."""
        if i == j:
            return "X"
        if self.nvlinks and self.nvlinks[i][j]:
            return f"NV{self.nvlinks[i][j]}"
        level = self.ancestor[i][j] if self.ancestor else None
        return ANCESTORS[level][1] if level in ANCESTORS else "?"

    def levels(self) -> list[list[int]] | None:
        """The planner's link level per pair (`plan(..., topology=)`), or None when any pair is unknown."""
        if not self.found or not self.gpus:
            return None
        n = self.count
        out = [[0] * n for _ in range(n)]
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                if self.nvlinks and self.nvlinks[i][j]:
                    out[i][j] = 1
                    continue
                level = self.ancestor[i][j] if self.ancestor else None
                if level not in _LEVEL_OF_ANCESTOR:
                    return None
                out[i][j] = _LEVEL_OF_ANCESTOR[level]  # type: ignore[index]
        return out

    def matrix_lines(self) -> list[str]:
        """The topology as a table, like `nvidia-smi topo -m`, with each GPU's NUMA node."""
        if not self.found or self.count < 1:
            return []
        n = self.count
        width = max(4, *(len(self.link_label(i, j)) for i in range(n) for j in range(n)))
        head = "      " + "".join(f"GPU{j}".ljust(width + 1) for j in range(n)) + "NUMA"
        rows = [head]
        for i in range(n):
            cells = "".join(self.link_label(i, j).ljust(width + 1) for j in range(n))
            numa = "-" if self.gpus[i].numa_node is None else str(self.gpus[i].numa_node)
            rows.append(f"GPU{i}".ljust(6) + cells + numa)
        return rows

    def describe(self) -> str:
        """One line for the wizard: what was found."""
        if not self.found:
            return self.reason
        names: dict[str, int] = {}
        for g in self.gpus:
            key = f"{g.name} ({g.memory_total_gb:.1f} GB)" if g.memory_total_gb else g.name
            names[key] = names.get(key, 0) + 1
        what = ", ".join(f"{k}× {name}" for name, k in names.items())
        extra = []
        if self.driver_version:
            extra.append(f"driver {self.driver_version}")
        if self.cuda_version:
            extra.append(f"CUDA {self.cuda_version}")
        link = self.interconnect()
        if link:
            extra.append(link)
        if self.mig_gpus:
            extra.append(f"MIG on GPU {', '.join(str(g.index) for g in self.mig_gpus)}")
        return what + (f" — {', '.join(extra)}" if extra else "")

    def interconnect(self) -> str:
        """'all pairs NVLink', 'PCIe only (worst: SYS)', ... for a one-line summary."""
        if self.count < 2:
            return ""
        pairs = [(i, j) for i in range(self.count) for j in range(i + 1, self.count)]
        nv = sum(1 for i, j in pairs if self.nvlinks and self.nvlinks[i][j])
        if nv == len(pairs):
            return "NVLink between all GPUs"
        known = [level for i, j in pairs if self.ancestor and (level := self.ancestor[i][j]) is not None]
        worst = ANCESTORS[max(known)][1] if known and max(known) in ANCESTORS else "?"
        if nv:
            return f"NVLink between {nv} of {len(pairs)} GPU pairs, the rest PCIe (worst: {worst})"
        return f"PCIe only (worst path: {worst})"

    def findings(self) -> list[Problem]:
        """What a verl user should know about these GPUs (VI740-VI745, VI763)."""
        out: list[Problem] = []
        if not self.found:
            # the reason (NVML's own words) is the GPUs line's (describe); said once, not again here
            out.append(Problem("VI740", "warning", ("gpus_per_node", "gpu_memory_gb"), "gpus_per_node and gpu_memory_gb cannot be read from this machine (no usable NVIDIA GPU)",
                               "if this machine should have GPUs, check `nvidia-smi`; otherwise give gpus_per_node and gpu_memory_gb of the machines the job runs on"))
            return out
        for g in self.mig_gpus:
            sizes = ", ".join(f"{s.memory_gb:.1f}" for s in g.mig_slices) or "none created yet"
            out.append(Problem(
                "VI741", "warning", ("gpus_per_node", "gpu_memory_gb"),
                f"GPU {g.index} ({g.name}) is MIG-partitioned (slices, GB: {sizes}): a CUDA process sees one slice, "
                "NCCL cannot join slices and Ray counts the whole GPU",
                "plan one slice (gpus_per_node=1, gpu_memory_gb=<slice>) or turn MIG off: sudo nvidia-smi -i "
                f"{g.index} -mig 0 (then reset the GPU)"))
        kinds = {(g.name, round(g.memory_total_gb or 0)) for g in self.whole_gpus}
        if len(kinds) > 1:
            out.append(Problem("VI742", "warning", ("gpu_memory_gb",),
                               f"this machine mixes GPUs: {sorted(k[0] for k in kinds)}",
                               "verl plans one memory size for all GPUs: use the smallest as gpu_memory_gb, "
                               "or hide the others before `ray start` (CUDA_VISIBLE_DEVICES on the Ray node)"))
        for g in self.whole_gpus:
            if g.memory_total_gb and g.memory_free_gb is not None and g.memory_free_gb < 0.9 * g.memory_total_gb:
                used = g.memory_total_gb - g.memory_free_gb
                out.append(Problem("VI743", "warning", ("gpu_memory_gb",),
                                   f"GPU {g.index} has {used:.1f} of {g.memory_total_gb:.1f} GB in use by other processes",
                                   "stop them (nvidia-smi shows which) before the run: verl's plan assumes empty GPUs"))
        old = [g for g in self.whole_gpus if _capability(g.compute_capability) < (8, 0)]
        if old:
            g = old[0]
            out.append(Problem(
                "VI763", "warning", ("gpu_type",),
                f"GPU {g.index} ({g.name}) has compute capability {g.compute_capability}, below 8.0: no bf16 in vLLM "
                "(it refuses verl's default rollout dtype) and no flash-attn 2 (verl's default attention)",
                "plans for it write fp16 and sdpa when gpu_type names the card (V100, T4, ...); in a config of your "
                "own: actor_rollout_ref.rollout.dtype=float16 and "
                "+actor_rollout_ref.model.override_config.attn_implementation=sdpa (`verl-init check` VI864/VI865)"))
        n = len(self.whole_gpus)
        if n >= 2 and self.ancestor:
            idx = [g.index for g in self.whole_gpus]
            sys_pairs = [(i, j) for a, i in enumerate(idx) for j in idx[a + 1:]
                         if not (self.nvlinks and self.nvlinks[i][j]) and self.ancestor[i][j] == TOPOLOGY_SYSTEM]
            if sys_pairs:
                shown = ", ".join(f"{i}-{j}" for i, j in sys_pairs[:6]) + (" ..." if len(sys_pairs) > 6 else "")
                out.append(Problem("VI744", "info", ("rollout_tp",),
                                   f"GPU pairs {shown} talk across NUMA nodes (SYS) without NVLink",
                                   "verl-init keeps tensor-parallel groups inside a NUMA node when the model fits"))
            no_p2p = [(i, j) for a, i in enumerate(idx) for j in idx[a + 1:]
                      if self.p2p and self.p2p[i][j] is False]
            if no_p2p:
                shown = ", ".join(f"{i}-{j}" for i, j in no_p2p[:6]) + (" ..." if len(no_p2p) > 6 else "")
                out.append(Problem("VI745", "warning", ("rollout_tp",),
                                   f"peer-to-peer access is not possible between GPUs {shown}",
                                   "NCCL copies through host memory there (slower); check IOMMU/ACS settings "
                                   "(NCCL_P2P_DISABLE is not needed: NCCL detects it)"))
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "found": self.found, "reason": self.reason, "count": self.count, "vendor": self.vendor,
            "driver_version": self.driver_version, "cuda_version": self.cuda_version,
            "gpus": [g.as_dict() for g in self.gpus],
            "topology": {
                "labels": [[self.link_label(i, j) for j in range(self.count)] for i in range(self.count)],
                "common_ancestor": self.ancestor, "nvlinks": self.nvlinks, "p2p_read": self.p2p,
                "levels": self.levels(),
            },
        }


def _capability(text: str | None) -> tuple[int, int]:
    """"7.5" → (7, 5); unknown → (99, 0) (never below a bound)."""
    try:
        major, minor = (int(x) for x in str(text).split(".", 1))
    except ValueError:
        return (99, 0)
    return major, minor


def short_gpu_name(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' → 'H100 80GB HBM3' (for gpu_type, which is only displayed)."""
    text = " ".join(name.split())
    for prefix in ("NVIDIA ", "Tesla "):
        text = text.removeprefix(prefix)
    return text or name


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _bus(value: Any) -> str | None:
    """PCI bus ids compared across NVML calls: '00000000:18:00.0' and '0000:18:00.0' are the same."""
    if value is None:
        return None
    parts = _text(value).strip().lower().split(":")
    if len(parts) != 3:
        return _text(value).strip().lower()
    try:
        return f"{int(parts[0], 16):x}:{parts[1]}:{parts[2]}"
    except ValueError:
        return ":".join(parts)


def _import_nvml() -> Any:
    with warnings.catch_warnings():  # the deprecated `pynvml` package warns on import
        warnings.simplefilter("ignore")
        import pynvml  # type: ignore[import-untyped]

    return pynvml


def probe_gpus() -> GpuReport:
    """The NVIDIA GPUs of this machine, through NVML. Never raises."""
    start = time.monotonic()
    try:
        nv = _import_nvml()
    except ImportError:
        return GpuReport(False, f"{NO_GPU} (nvidia-ml-py is not installed: pip install nvidia-ml-py)")
    try:
        nv.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound / DriverNotLoaded / ...
        return GpuReport(False, f"{NO_GPU} (NVML: {_nvml_reason(exc)})", seconds=time.monotonic() - start)
    try:
        report = _read(nv)
    except Exception as exc:  # noqa: BLE001 - a driver that fails half-way: report what it said
        report = GpuReport(False, f"{NO_GPU} (NVML failed: {_nvml_reason(exc)})")
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()
    report.seconds = time.monotonic() - start
    return report


def _nvml_reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    low = text.lower()
    if "library not found" in low or "libnvidia-ml" in low:
        return f"{text}: no NVIDIA driver on this machine"
    if "driver not loaded" in low:
        return f"{text}: the NVIDIA kernel driver is not running"
    return text


def _try(fn: Callable[..., T], *args: Any) -> T | None:
    """One optional NVML query: None when the driver does not support it (NotSupported, FunctionNotFound, ...)."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - every NVMLError subclass, and AttributeError on older bindings
        return None


def _call(nv: Any, name: str, *args: Any) -> Any:
    fn = getattr(nv, name, None)
    return None if fn is None else _try(fn, *args)


def _read(nv: Any) -> GpuReport:
    count = int(nv.nvmlDeviceGetCount())
    driver = _call(nv, "nvmlSystemGetDriverVersion")
    cuda = _call(nv, "nvmlSystemGetCudaDriverVersion_v2") or _call(nv, "nvmlSystemGetCudaDriverVersion")
    report = GpuReport(count > 0, "" if count else f"{NO_GPU} (the driver reports 0 GPUs)",
                       driver_version=_text(driver) if driver is not None else None,
                       cuda_version=f"{int(cuda) // 1000}.{(int(cuda) % 1000) // 10}" if cuda else None)
    if not count:
        return report
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    links_to: list[dict[str, int]] = []  # per GPU: remote PCI bus id -> active links
    for i, h in enumerate(handles):
        gpu = Gpu(index=i, name=_text(_call(nv, "nvmlDeviceGetName", h) or "NVIDIA GPU"))
        mem = _call(nv, "nvmlDeviceGetMemoryInfo", h)
        if mem is not None:
            gpu.memory_total_gb = round(float(mem.total) / GB, 2)
            gpu.memory_free_gb = round(float(mem.free) / GB, 2)
        cc = _call(nv, "nvmlDeviceGetCudaComputeCapability", h)
        if cc is not None:
            gpu.compute_capability = f"{cc[0]}.{cc[1]}"
        mig = _call(nv, "nvmlDeviceGetMigMode", h)
        if mig is not None:
            gpu.mig_enabled = bool(mig[0] == FEATURE_ENABLED)
            gpu.mig_pending = bool(mig[1] == FEATURE_ENABLED)
        if gpu.mig_enabled:
            for k in range(int(_call(nv, "nvmlDeviceGetMaxMigDeviceCount", h) or 0)):
                mh = _call(nv, "nvmlDeviceGetMigDeviceHandleByIndex", h, k)
                if mh is None:  # NotFound: an empty slot
                    continue
                mmem = _call(nv, "nvmlDeviceGetMemoryInfo", mh)
                gpu.mig_slices.append(MigSlice(k, round(float(mmem.total) / GB, 2) if mmem is not None else 0.0))
        pci = _call(nv, "nvmlDeviceGetPciInfo", h)
        gpu.pci_bus_id = _bus(getattr(pci, "busId", None)) if pci is not None else None
        numa = _call(nv, "nvmlDeviceGetNumaNodeId", h)
        gpu.numa_node = int(numa) if isinstance(numa, int) and numa >= 0 else None
        remote: dict[str, int] = {}
        for link in range(NVLINK_MAX_LINKS):
            try:
                state = nv.nvmlDeviceGetNvLinkState(h, link)
            except Exception:  # noqa: BLE001 - NotSupported (no NVLink) or InvalidArgument (past the last link)
                if link == 0:
                    break
                continue
            if state != FEATURE_ENABLED:
                continue
            gpu.nvlinks_active += 1
            bus = _bus(getattr(_call(nv, "nvmlDeviceGetNvLinkRemotePciInfo", h, link), "busId", None))
            if bus:
                remote[bus] = remote.get(bus, 0) + 1
        links_to.append(remote)
        report.gpus.append(gpu)

    n = count
    report.ancestor = [[None] * n for _ in range(n)]
    report.nvlinks = [[0] * n for _ in range(n)]
    report.p2p = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            level = _call(nv, "nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j])
            report.ancestor[i][j] = int(level) if level is not None else None
            direct = links_to[i].get(report.gpus[j].pci_bus_id or "", 0)
            via_fabric = _call(nv, "nvmlDeviceGetP2PStatus", handles[i], handles[j], P2P_CAPS_INDEX_NVLINK)
            if direct:
                report.nvlinks[i][j] = direct
            elif via_fabric == P2P_STATUS_OK and report.gpus[i].nvlinks_active:
                report.nvlinks[i][j] = report.gpus[i].nvlinks_active  # NVSwitch: every link reaches every GPU
            read = _call(nv, "nvmlDeviceGetP2PStatus", handles[i], handles[j], P2P_CAPS_INDEX_READ)
            report.p2p[i][j] = None if read is None else read == P2P_STATUS_OK
    return report


# --- AMD GPUs (amdsmi) ------------------------------------------------------------------------------

NO_AMD_GPU = "no AMD GPU found"


def _import_amdsmi() -> Any:
    import amdsmi  # type: ignore[import-not-found]  # ROCm's Python binding, shipped with ROCm (pip: amdsmi)

    return amdsmi


def probe_amd_gpus() -> GpuReport:
    """The AMD Instinct GPUs of this machine, through amdsmi (imported lazily). Never raises; `found` is False
    with the reason when amdsmi is missing, fails, or lists no GPU. Names and memory only: the NVLink/NUMA
    topology fields stay empty (the planner then keeps its default rollout layout)."""
    start = time.monotonic()
    try:
        smi = _import_amdsmi()
    except ImportError:
        return GpuReport(False, f"{NO_AMD_GPU} (amdsmi is not installed: it ships with ROCm, or pip install amdsmi)")
    try:
        smi.amdsmi_init()
    except Exception as exc:  # noqa: BLE001 - AmdSmiLibraryException: no amdgpu driver, no permission, ...
        return GpuReport(False, f"{NO_AMD_GPU} (amdsmi: {exc or type(exc).__name__})", seconds=time.monotonic() - start)
    try:
        handles = list(smi.amdsmi_get_processor_handles() or [])
        report = GpuReport(bool(handles), "" if handles else f"{NO_AMD_GPU} (amdsmi lists 0 GPUs)", vendor="amd")
        vram = getattr(getattr(smi, "AmdSmiMemoryType", None), "VRAM", None)
        for i, h in enumerate(handles):
            info = _try(smi.amdsmi_get_gpu_asic_info, h) or {}
            gpu = Gpu(index=i, name=_text(info.get("market_name") or "AMD GPU"))
            total = _try(smi.amdsmi_get_gpu_memory_total, h, vram)
            used = _try(smi.amdsmi_get_gpu_memory_usage, h, vram)
            if total is not None:
                gpu.memory_total_gb = round(float(total) / GB, 2)
                if used is not None:
                    gpu.memory_free_gb = round(float(total - used) / GB, 2)
            report.gpus.append(gpu)
    except Exception as exc:  # noqa: BLE001 - a library that fails half-way: report what it said
        report = GpuReport(False, f"{NO_AMD_GPU} (amdsmi failed: {exc or type(exc).__name__})", vendor="amd")
    finally:
        with contextlib.suppress(Exception):
            smi.amdsmi_shut_down()
    report.seconds = time.monotonic() - start
    return report


def probe_any_gpus() -> GpuReport:
    """NVIDIA GPUs through NVML; when NVML finds none, AMD GPUs through amdsmi (when it is installed).
    The NVML report (its reason) stands when neither finds a GPU."""
    nvidia = probe_gpus()
    if nvidia.found:
        return nvidia
    amd = probe_amd_gpus()
    return amd if amd.found else nvidia


# --- host ------------------------------------------------------------------------------------------


@dataclass
class HostReport:
    memory_gb: float | None = None
    cpus: int | None = None
    shm_gb: float | None = None  # size of /dev/shm
    shm_free_gb: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def probe_host(meminfo: str = "/proc/meminfo", shm: str = "/dev/shm") -> HostReport:
    out = HostReport()
    try:
        with open(meminfo, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    out.memory_gb = round(int(line.split()[1]) * 1024 / GB, 1)
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        out.cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        out.cpus = os.cpu_count()
    try:
        st = os.statvfs(shm)
        out.shm_gb = round(st.f_blocks * st.f_frsize / GB, 2)
        out.shm_free_gb = round(st.f_bavail * st.f_frsize / GB, 2)
    except (OSError, AttributeError):
        pass
    return out


# --- Ray -------------------------------------------------------------------------------------------


@dataclass
class RayReport:
    """The Ray cluster at RAY_API_SERVER_ADDRESS / RAY_ADDRESS, or a local head on 127.0.0.1:8265."""

    url: str
    origin: str  # where the address came from (cluster_check.dashboard_url)
    explicit: bool  # an address was set (not the local default)
    observed: Any | None = None  # cluster_check.Observed
    problem: Problem | None = None
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def found(self) -> bool:
        return self.observed is not None

    @property
    def gpu_nodes(self) -> list[Any]:
        return [n for n in self.observed.alive if n.gpus] if self.observed is not None else []

    @property
    def gpus_per_node(self) -> int | None:
        """The GPU count verl can use on every GPU node (the smallest)."""
        nodes = self.gpu_nodes
        return min(n.gpus for n in nodes) if nodes else None

    def describe(self) -> str:
        if self.observed is None:
            if self.timed_out:
                return f"no answer from {self.url} in time (from {self.origin})"
            if not self.explicit:
                return "no Ray cluster (RAY_ADDRESS is unset and no local head answers on 127.0.0.1:8265)"
            return self.problem.message if self.problem else f"no Ray cluster at {self.url}"
        obs = self.observed
        counts = [n.gpus for n in self.gpu_nodes]
        shape = f"GPUs per node {counts}" if counts else "no GPUs"
        return (f"Ray {obs.ray_version} at {self.url}: {len(obs.alive)} node(s), {obs.gpus} GPU(s) ({shape}), "
                f"{obs.cpus} logical CPUs")

    def findings(self) -> list[Problem]:
        out: list[Problem] = []
        if self.observed is None:
            if self.timed_out:
                out.append(Problem("VI746", "warning", ("RAY_ADDRESS",),
                                   f"the Ray dashboard at {self.url} did not answer in time (from {self.origin})",
                                   "check the address and that the head is up; verl-init never waits on ray.init"))
            elif self.problem is not None and self.explicit:
                out.append(self.problem)
            elif self.problem is not None and self.problem.rule in ("VI711", "VI725", "VI726", "VI727"):
                # something else listens on 8265, a local head wants a token, answers past a limit, or the
                # token file is unusable
                out.append(self.problem)
            return out
        counts = sorted({n.gpus for n in self.gpu_nodes})
        if len(counts) > 1:
            out.append(Problem("VI747", "warning", ("nnodes", "gpus_per_node"),
                               f"the Ray cluster's GPU nodes differ: {[n.gpus for n in self.gpu_nodes]} GPUs; verl needs "
                               "the same GPU count on every node",
                               f"plan gpus_per_node={counts[0]} (the smallest) with nnodes={len(self.gpu_nodes)}, or "
                               "leave the odd nodes out"))
        dead = len(self.observed.nodes) - len(self.observed.alive)
        if dead:
            out.append(Problem("VI722", "info", (), f"{dead} node(s) are listed as DEAD", "ignored in the counts above"))
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "origin": self.origin, "explicit": self.explicit, "found": self.found,
                "timed_out": self.timed_out, "observed": self.observed.as_dict() if self.observed else None,
                "problem": self.problem.as_dict() if self.problem else None}


def ray_address_set(env: Mapping[str, str]) -> bool:
    return bool((env.get("RAY_API_SERVER_ADDRESS") or env.get("RAY_ADDRESS") or "").strip())


def probe_ray_cluster(env: Mapping[str, str], timeout: float = 1.0, address: str | None = None) -> RayReport:
    """The Ray cluster through cluster_check's dashboard prober (no ray import, no ray.init)."""
    from wizard.env.cluster import MAX_TIMEOUT_S, ProbeError, dashboard_url, probe_ray, ray_auth_token
    from wizard.env.http import redact

    url, origin = dashboard_url(address, env)
    report = RayReport(redact(url), origin, bool(address) or ray_address_set(env))  # credentials never shown
    start = time.monotonic()
    try:
        # each request within `timeout`, all three within 3 × timeout (wizard.env.http: wall clock, capped bodies)
        report.observed = probe_ray(url, timeout, ray_auth_token(env), budget=3 * min(timeout, MAX_TIMEOUT_S))
    except ProbeError as exc:
        report.problem = exc.problem
    report.seconds = time.monotonic() - start
    return report


# --- everything, bounded -------------------------------------------------------------------------------


@dataclass
class Probes:
    gpus: GpuReport
    ray: RayReport
    host: HostReport

    def findings(self) -> list[Problem]:
        return self.gpus.findings() + self.ray.findings()

    def as_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus.as_dict(), "ray": self.ray.as_dict(), "host": self.host.as_dict()}


def probe_all(env: Mapping[str, str] | None = None, *, gpu_timeout: float = 2.5, ray_timeout: float = 2.5,
              request_timeout: float = 1.0) -> Probes:
    """GPUs, Ray and host probed at once; returns within max(gpu_timeout, ray_timeout) seconds."""
    env = dict(os.environ if env is None else env)
    start = time.monotonic()
    box: dict[str, Any] = {}

    def run(name: str, fn: Callable[[], Any]) -> threading.Thread:
        def target() -> None:
            try:
                box[name] = fn()
            except Exception as exc:  # noqa: BLE001 - a probe bug must not stop the wizard
                box[name + ":error"] = exc

        t = threading.Thread(target=target, name=f"verl-init-probe-{name}", daemon=True)
        t.start()
        return t

    t_gpu = run("gpus", probe_any_gpus)
    t_ray = run("ray", lambda: probe_ray_cluster(env, request_timeout))
    host = probe_host()
    t_gpu.join(max(0.0, gpu_timeout - (time.monotonic() - start)))
    t_ray.join(max(0.0, ray_timeout - (time.monotonic() - start)))

    gpus = box.get("gpus")
    if gpus is None:
        err = box.get("gpus:error")
        gpus = GpuReport(False, f"{NO_GPU} (NVML " + (f"failed: {err}" if err else
                                                      f"did not answer within {gpu_timeout:g} s") + ")")
    ray = box.get("ray")
    if ray is None:
        from wizard.env.cluster import dashboard_url
        from wizard.env.http import redact

        url, origin = dashboard_url(None, env)
        ray = RayReport(redact(url), origin, ray_address_set(env), timed_out="ray:error" not in box)
        if "ray:error" in box:
            ray.problem = Problem("VI746", "warning", ("RAY_ADDRESS",),
                                  redact(f"Ray probe failed: {box['ray:error']}"), "")
    return Probes(gpus, ray, host)
