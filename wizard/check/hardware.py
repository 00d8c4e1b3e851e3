"""The hardware a config is checked against: `--nnodes/--gpus-per-node/--gpu-memory-gb/--gpu-type`, else the
bundle's verl-init.yaml, else the config's own trainer.nnodes × n_gpus_per_node; for verl.trainer.sft_trainer under torchrun, torchrun's own
--nnodes × --nproc-per-node (wizard.check.torchrun).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wizard.check.source import Source, read_yaml
from wizard.intent.errors import Problem, UserError
from wizard.verlspec.hardware import GPU_MEMORY_GB, memory_of_gpu_type


@dataclass
class Hardware:
    """The hardware a config is checked against, and where it came from."""

    nnodes: int | None = None
    gpus_per_node: int | None = None
    gpu_memory_gb: float | None = None
    gpu_type: str | None = None
    source: str = "config"  # flags | bundle | config | torchrun
    per_node: tuple[int, ...] | None = None  # nodes of unequal size (--gpus-per-node 4,2): each node's GPUs

    @property
    def label(self) -> str:
        if self.per_node:
            return f"nodes of {'+'.join(str(n) for n in self.per_node)} GPUs"
        return f"{self.nnodes}×{self.gpus_per_node} GPUs"

    @property
    def given(self) -> bool:
        return self.source in ("flags", "bundle") and self.nnodes is not None and self.gpus_per_node is not None


def _bundle_nodes(ans: dict[str, Any]) -> Any:
    """The nodes a bundle's answers give Ray: nnodes, plus the judge's own pool (reward=genrm, judge_gpus), which the
    bundle's cluster files start as more nodes of the same kind (wizard.planner.genrm.pool_of)."""
    from wizard.planner.genrm import pool_of

    nnodes, gpn, judge = ans.get("nnodes"), ans.get("gpus_per_node"), ans.get("judge_gpus")
    if ans.get("reward") == "genrm" and isinstance(nnodes, int) and isinstance(gpn, int) and isinstance(judge, int):
        return nnodes + pool_of(judge, gpn)[0]
    return nnodes


def node_gpus(text: str) -> int | tuple[int, ...]:
    """--gpus-per-node: one count (every node), or one count per node, comma-separated (nodes of unequal size)."""
    try:
        counts = tuple(int(t) for t in str(text).split(","))
    except ValueError:
        raise ValueError(f"--gpus-per-node={text!r}: give a count (8) or one count per node (4,2)") from None
    if not counts or min(counts) < 1:
        raise ValueError(f"--gpus-per-node={text!r}: every node has at least one GPU")
    return counts[0] if len(counts) == 1 else counts


TORCHRUN_ENTRY = "verl.trainer.sft_trainer"  # its world is torchrun's (wizard.check.torchrun's docstring)


def _torchrun_hardware(src: Source, hw: Hardware) -> None:
    """For verl.trainer.sft_trainer under torchrun: the nodes and GPUs per node are torchrun's --nnodes and
    --nproc-per-node (sft_trainer.py:453-455 takes WORLD_SIZE from torchrun), not trainer.* (which it never reads);
    unresolved where torchrun counts them only at launch (--nproc-per-node=auto)."""
    from wizard.check.torchrun import torchrun_world

    ex = src.extraction
    if src.entry != "sft" or ex is None or ex.launch is None or ex.launch.module != TORCHRUN_ENTRY:
        return
    world = torchrun_world(ex.via, ex.env_names)
    if world is None:
        return
    hw.source = "torchrun"
    hw.nnodes, hw.gpus_per_node = world


def resolve_hardware(src: Source, res_flat: dict[str, Any], nnodes: int | None,
                     gpus_per_node: int | Sequence[int] | None, gpu_memory_gb: float | None,
                     gpu_type: str | None) -> tuple[Hardware, list[Problem]]:
    """The hardware to check against, and a VI861 info when the GPU memory comes from --gpu-type (or
    --gpu-type names no GPU whose memory is known). Unequal nodes (a count per node) give nnodes = their number and
    gpus_per_node = the largest."""
    notes: list[Problem] = []
    per_node = None
    if isinstance(gpus_per_node, Sequence) and not isinstance(gpus_per_node, str):
        per_node = tuple(int(g) for g in gpus_per_node)
        if nnodes is not None and nnodes != len(per_node):
            raise UserError(f"--nnodes={nnodes} but --gpus-per-node names {len(per_node)} nodes: give one count per "
                            "node, or drop --nnodes")
        nnodes, gpus_per_node = len(per_node), max(per_node)
        per_node = per_node if len(set(per_node)) > 1 else None
    hw = Hardware(nnodes, gpus_per_node, gpu_memory_gb, gpu_type, "flags", per_node)
    if nnodes is None and gpus_per_node is None and src.bundle_dir is not None:
        try:
            doc = read_yaml(src.bundle_dir / "verl-init.yaml") or {}
            ans = doc.get("answers", doc) if isinstance(doc, dict) else {}
            hw = Hardware(_bundle_nodes(ans), ans.get("gpus_per_node"), gpu_memory_gb or ans.get("gpu_memory_gb"),
                          gpu_type or ans.get("gpu_type"), "bundle")
        except UserError:
            pass
    if hw.nnodes is None and hw.gpus_per_node is None:
        hw.source = "config"
        nn, g = res_flat.get("trainer.nnodes"), res_flat.get("trainer.n_gpus_per_node")
        hw.nnodes = nn if isinstance(nn, int) else None
        hw.gpus_per_node = g if isinstance(g, int) else None
        _torchrun_hardware(src, hw)
    elif hw.source == "flags":
        if hw.nnodes is None:
            hw.nnodes = 1
        if hw.gpus_per_node is None:
            g = res_flat.get("trainer.n_gpus_per_node")
            hw.gpus_per_node = g if isinstance(g, int) else None
    if hw.gpu_memory_gb is None and hw.gpu_type:
        memory = memory_of_gpu_type(hw.gpu_type)
        if memory is not None:
            hw.gpu_memory_gb = float(memory)
            notes.append(Problem("VI861", "info", (), f"assuming {memory} GB per GPU for --gpu-type {hw.gpu_type}",
                                 "pass --gpu-memory-gb to be exact"))
        else:
            known = ", ".join(sorted(GPU_MEMORY_GB)[:12])
            notes.append(Problem("VI861", "info", ("--gpu-type",),
                                 f"--gpu-type {hw.gpu_type} does not name a GPU whose memory verl-init knows "
                                 "(the memory-fit check is off)", f"pass --gpu-memory-gb, or a known type ({known}, ...)"))
    return hw, notes
