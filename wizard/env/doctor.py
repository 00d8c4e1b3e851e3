"""`verl-init doctor [--json]`: the environment report a user pastes into a bug.

Versions (verl, torch, ray, vllm, sglang, transformers, flash-attn, megatron-core, flash-linear-attention, CUDA),
this machine's GPUs with their topology matrix, the Ray cluster, and the environment pitfalls of docs/pitfalls.md
§5: a hand-set CUDA_VISIBLE_DEVICES, the shape of RAY_ADDRESS, a small /dev/shm, NCCL variables, RAY_DEDUP_LOGS.

It reports and never judges a bundle (that is `verl-init check --mode cluster`): the exit status is 0
whatever it finds. It answers within ~3 s even when RAY_ADDRESS points at a dead or black-holed host:
the probes run in daemon threads with deadlines (wizard.env.probe.probe_all), versions are read from
package metadata, and no heavy module (torch, ray, verl, vllm) is imported.
"""

from __future__ import annotations

import ast
import json
import os
import platform
import re
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from wizard.intent.errors import Problem
from wizard.planner import patch_embed

# the engines' kernels a report needs too: flash-attn (FSDP's remove-padding path), megatron-core (the Megatron
# engine), flash-linear-attention (the Gated DeltaNet layers of Qwen3.5 / Qwen3-Next: its version decides whether
# verl's packed and Ulysses paths run, verl 0.9.1 models/transformers/qwen3_5.py _packed_chunk_gated_delta_rule)
PACKAGES = ("verl", "torch", "ray", "vllm", "sglang", "transformers", "nvidia-ml-py", "flash-attn", "megatron-core",
            "flash-linear-attention", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13")
# /dev/shm below this: NCCL's shared-memory transport, vLLM and Ray's object store run short (Docker's default is 64 MB).
MIN_SHM_GB = 8.0
# NCCL switches that turn a fast path off; set by hand they explain slow or hanging collectives.
NCCL_DISABLING = ("NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "NCCL_SHM_DISABLE")
SHOWN_ENV = ("CUDA_VISIBLE_DEVICES", "RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_DEDUP_LOGS", "RAY_AUTH_MODE",
             "HF_HUB_OFFLINE", "HF_HOME", "TOKENIZERS_PARALLELISM", "VLLM_USE_V1", "PYTORCH_CUDA_ALLOC_CONF")
SECRET_ENV = ("RAY_AUTH_TOKEN", "HF_TOKEN", "WANDB_API_KEY")  # shown as "set", never their values
TIME_BUDGET_S = 2.5  # probes; the whole command stays under 3 s


@dataclass
class Doctor:
    versions: dict[str, str | None]
    cuda: dict[str, str | None]
    probes: Any  # wizard.env.probe.Probes
    environment: dict[str, str]
    findings: list[Problem] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        from wizard._version import VERL_TARGET, __version__

        return {
            "verl_init": __version__, "verl_target": VERL_TARGET,
            "python": platform.python_version(), "platform": platform.platform(),
            "versions": self.versions, "cuda": self.cuda,
            **self.probes.as_dict(),
            "environment": self.environment,
            "findings": [p.as_dict() for p in self.findings],
            "seconds": round(self.seconds, 2),
        }


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def torch_cuda_build() -> tuple[bool, str | None]:
    """(torch installed, the CUDA version torch was built for), read from torch/version.py without importing torch."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return False, None
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return True, None
    for node in tree.body:
        target: ast.expr
        expr: ast.expr | None
        if isinstance(node, ast.AnnAssign):
            target, expr = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, expr = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "cuda" and expr is not None:
            try:
                value = ast.literal_eval(expr)
            except ValueError:
                return True, None
            return True, str(value) if value else None
    return True, None


def _redact(value: str) -> str:
    """User info in URLs (ray://user:pass@host) is not pasted into bug reports."""
    from wizard.env.http import redact

    return redact(value)


def shown_environment(env: Mapping[str, str]) -> dict[str, str]:
    out = {k: _redact(env[k]) for k in SHOWN_ENV if k in env}
    out.update({k: _redact(v) for k, v in sorted(env.items()) if k.startswith("NCCL_")})
    out.update({k: "(set)" for k in SECRET_ENV if env.get(k)})
    return out


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def environment_findings(env: Mapping[str, str], probes: Any, versions: Mapping[str, str | None],
                         torch_cuda: str | None, torch_installed: bool) -> list[Problem]:
    """The environment pitfalls (VI749-VI755, VI762), plus cluster_check's RAY_ADDRESS / CUDA_VISIBLE_DEVICES rules."""
    from wizard._version import VERL_TARGET
    from wizard.env.cluster import Expected, env_problems

    out: list[Problem] = []
    # RAY_ADDRESS shape (VI717/VI718) and CUDA_VISIBLE_DEVICES (VI719): the rules `check --mode cluster` applies.
    ray_env = {k: v for k, v in env.items() if k == "RAY_ADDRESS"}
    out += env_problems(Expected("doctor", cluster="ray"), ray_env)
    if "CUDA_VISIBLE_DEVICES" in env:
        out += env_problems(Expected("doctor", cluster="ray"), {"CUDA_VISIBLE_DEVICES": env["CUDA_VISIBLE_DEVICES"]})

    host = probes.host
    if host.shm_gb is not None and host.shm_gb < MIN_SHM_GB:
        out.append(Problem("VI749", "warning", ("/dev/shm",),
                           f"/dev/shm is {host.shm_gb:g} GB: NCCL's shared-memory transport, vLLM and Ray's object store "
                           "need several GB (a container's default is 64 MB)",
                           f"give it ≥ {MIN_SHM_GB:g} GB: docker run --shm-size=16g (or --ipc=host); KubeRay: "
                           "shm_size_gb; a host: mount -o remount,size=16G /dev/shm"))
    for name in NCCL_DISABLING:
        value = env.get(name)
        if value is not None and value.strip() not in ("", "0"):
            out.append(Problem("VI750", "warning", (name,),
                               f"{name}={value} turns an NCCL transport off for every process started from this shell",
                               "unset it unless a known hardware problem needs it: NCCL picks transports itself, "
                               "and disabled P2P/IB/SHM makes verl's weight sync and gradients slow"))
    others = [k for k in sorted(env) if k.startswith("NCCL_") and k not in NCCL_DISABLING]
    if others:
        debug = env.get("NCCL_DEBUG", "").upper()
        hint = ("NCCL_DEBUG=INFO/TRACE prints per-rank lines on every node: keep it for debugging"
                if debug in ("INFO", "TRACE") else "they reach every Ray worker started from this shell")
        out.append(Problem("VI751", "info", tuple(others),
                           "NCCL variables set: " + ", ".join(f"{k}={_redact(env[k])}" for k in others), hint))
    dedup = env.get("RAY_DEDUP_LOGS")
    if dedup is not None and dedup.strip() == "0":
        out.append(Problem("VI752", "warning", ("RAY_DEDUP_LOGS",),
                           "RAY_DEDUP_LOGS=0: every Ray worker's identical log lines are printed, once per GPU",
                           "unset it (Ray deduplicates by default) unless you are debugging one worker"))

    gpus = probes.gpus
    if gpus.found and torch_installed and torch_cuda is None:
        out.append(Problem("VI753", "warning", ("torch",),
                           f"torch {versions.get('torch')} is a CPU build, but this machine has NVIDIA GPUs",
                           "install a CUDA build of torch (the one your vllm/sglang release pins)"))
    drv, built = _version_tuple(gpus.cuda_version), _version_tuple(torch_cuda)
    if gpus.found and drv and built and built > drv:
        out.append(Problem("VI753", "warning", ("torch", "CUDA"),
                           f"torch is built for CUDA {torch_cuda} but the driver supports CUDA {gpus.cuda_version}",
                           "update the NVIDIA driver, or install a torch built for the driver's CUDA"))
    verl = versions.get("verl")
    if verl is None:
        out.append(Problem("VI754", "warning", ("verl",), "verl is not installed in this Python",
                           f"pip install 'verl[vllm]=={VERL_TARGET}' on GPU machines; bundles target verl {VERL_TARGET}"))
    elif verl != VERL_TARGET:
        out.append(Problem("VI754", "warning", ("verl",),
                           f"verl {verl} is installed; verl-init's bundles are written for verl {VERL_TARGET}",
                           f"pip install 'verl=={VERL_TARGET}', or expect config keys that differ"))
    slow = patch_embed.slow_conv3d(patch_embed.installed(dict(versions)))
    if slow is not None and torch_installed and torch_cuda is not None:  # a CUDA build
        out.append(Problem("VI762", "warning", ("torch", "cuDNN"),
                           f"{slow}: the patch embedding of a Qwen2.5-VL / Qwen3-VL / Qwen3.5 vision tower then costs "
                           "seconds per image in every log-prob and update pass (`verl-init check` says how many)",
                           patch_embed.FIX))
    if versions.get("vllm") is None and versions.get("sglang") is None:
        can = "plan and verify bundles" if verl is not None else "plan bundles (verify needs verl)"
        out.append(Problem("VI755", "info", ("rollout_engine",),
                           f"neither vllm nor sglang is installed: this Python can {can}, not run them",
                           f"on the GPU machines: pip install 'verl[vllm]=={VERL_TARGET}' (or verl[sglang])"))

    ray = probes.ray
    local_ray = versions.get("ray")
    if ray.found and ray.observed.ray_version and local_ray and ray.observed.ray_version != local_ray:
        out.append(Problem("VI721", "warning", ("ray",),
                           f"the cluster runs Ray {ray.observed.ray_version}, this machine {local_ray}",
                           "use the same Ray version on both sides of `ray job submit`"))
    if ray.problem is not None and ray.problem.rule == "VI725":
        out.append(Problem("VI748", "warning", ("RAY_AUTH_TOKEN",),
                           f"{ray.problem.message}: the wizard and `check --mode cluster` cannot see the cluster",
                           ray.problem.hint))
    return out


def collect(env: Mapping[str, str] | None = None, *, budget_s: float = TIME_BUDGET_S) -> Doctor:
    from wizard.env.probe import probe_all

    start = time.monotonic()
    env = dict(os.environ if env is None else env)
    probes = probe_all(env, gpu_timeout=budget_s, ray_timeout=budget_s, request_timeout=min(1.0, budget_s / 2))
    versions = package_versions()
    torch_installed, torch_cuda = torch_cuda_build()
    cuda = {"driver": probes.gpus.cuda_version, "torch_build": torch_cuda, "nvidia_driver": probes.gpus.driver_version}
    findings = probes.findings() + environment_findings(env, probes, versions, torch_cuda, torch_installed)
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda p: order[p.severity])
    return Doctor(versions, cuda, probes, shown_environment(env), findings, time.monotonic() - start)


def format_text(doc: Doctor) -> str:
    from wizard._version import VERL_TARGET, __version__

    p = doc.probes
    lines = [f"verl-init doctor — verl-init {__version__} (bundles for verl {VERL_TARGET}); paste this into a bug report",
             f"python {platform.python_version()} on {platform.platform()}", "versions:"]
    width = max(len(k) for k in doc.versions)
    for name, version in doc.versions.items():
        lines.append(f"  {name.ljust(width)}  {version or 'not installed'}")
    lines.append(f"  {'CUDA'.ljust(width)}  driver supports {doc.cuda['driver'] or '-'}, torch built for "
                 f"{doc.cuda['torch_build'] or ('CPU only' if doc.versions.get('torch') else '-')}"
                 + (f" (NVIDIA driver {doc.cuda['nvidia_driver']})" if doc.cuda.get("nvidia_driver") else ""))
    lines.append(f"GPUs: {p.gpus.describe()}")
    for g in p.gpus.gpus:
        mig = " MIG on" + (f" ({len(g.mig_slices)} slices)" if g.mig_slices else "") if g.mig_enabled else ""
        mem = (f"{g.memory_total_gb:.1f} GB, {g.memory_free_gb:.1f} GB free" if g.memory_total_gb is not None
               else "memory unknown")
        lines.append(f"  GPU{g.index}  {g.name}  {mem}  cc {g.compute_capability or '?'}{mig}"
                     + (f"  bus {g.pci_bus_id}" if g.pci_bus_id else ""))
    matrix = p.gpus.matrix_lines()
    if len(matrix) > 2:
        lines.append("topology (X self, NV# NVLink links, PIX/PXB PCIe switch, PHB/NODE host bridge, SYS across NUMA):")
        lines += [f"  {row}" for row in matrix]
    lines.append(f"Ray: {p.ray.describe()}  [probed {p.ray.url}, from {p.ray.origin}]")
    if p.ray.found:
        for n in p.ray.observed.nodes:
            lines.append(f"  node {n.ip or n.node_id[:8]}{' (head)' if n.head else ''}: {n.gpus} GPU, {n.cpus} CPU"
                         + ("" if n.alive else " DEAD"))
    h = p.host
    lines.append(f"host: {h.cpus or '?'} CPUs, {h.memory_gb if h.memory_gb is not None else '?'} GB memory, "
                 f"/dev/shm {h.shm_gb if h.shm_gb is not None else '?'} GB")
    if doc.environment:
        lines.append("environment: " + ", ".join(f"{k}={v}" for k, v in doc.environment.items()))
    else:
        lines.append("environment: none of CUDA_VISIBLE_DEVICES, RAY_ADDRESS, NCCL_*, RAY_DEDUP_LOGS is set")
    if doc.findings:
        lines.append("findings:")
        lines += [f"  {f.severity}: {f.line()}" for f in doc.findings]
    count = {s: sum(1 for f in doc.findings if f.severity == s) for s in ("error", "warning", "info")}
    lines.append(f"doctor: {count['error']} error(s), {count['warning']} warning(s), {count['info']} note(s) in "
                 f"{doc.seconds:.1f} s (to judge a bundle against this machine or a cluster: "
                 "verl-init check --mode cluster BUNDLE)")
    return "\n".join(lines)


def cli(argv: Iterable[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="verl-init doctor",
        description="Report versions, GPUs and their topology, the Ray cluster and environment pitfalls "
                    "(for bug reports). Always exits 0; never starts or joins Ray.")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    ns = p.parse_args(list(argv))
    doc = collect()
    if ns.json:
        print(json.dumps(doc.as_dict(), indent=2, default=str))
    else:
        print(format_text(doc))
    sys.stdout.flush()
    return 0
