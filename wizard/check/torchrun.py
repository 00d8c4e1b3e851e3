"""The world size a `torchrun` launch gives its workers, read from torchrun's own words as torch.distributed.run
parses them (torch 2.x, torch/distributed/run.py): `--nnodes` (run.py:425-431, default "1:1", "N" or "MIN:MAX",
parse_min_max_nnodes :731-742), `--nproc-per-node` / `--nproc_per_node` (run.py:432-438, default "1"; an int, or
auto/cpu/gpu/xpu counted on the node at launch, determine_local_world_size :745-787). `--standalone` (run.py:477-484)
only picks a local c10d rendezvous (run.py:988-992): the node count stays --nnodes'. Both options are `action=env`:
with no flag, PET_NNODES / PET_NPROC_PER_NODE in the launch's environment set them. `python -m torch.distributed.run`
is the same launcher.

verl 0.9.1's `verl.trainer.sft_trainer` takes its world from torchrun: main() calls
initialize_global_process_group (trainer/sft_trainer.py:453-455), which reads WORLD_SIZE / RANK / LOCAL_RANK from
torchrun's environment (utils/distributed.py:62-75); trainer.nnodes / trainer.n_gpus_per_node are not read there
(only sft_trainer_ray.py:135-137 reads them, for its Ray resource pool).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

NNODES = ("--nnodes",)
NPROC = ("--nproc-per-node", "--nproc_per_node")
LAUNCHER_MODULES = ("torch.distributed.run",)


def _launcher_at(words: Sequence[str]) -> int | None:
    """Index of the first torchrun option in the launcher words (after `torchrun` or `-m torch.distributed.run`)."""
    for i, w in enumerate(words):
        if w.rsplit("/", 1)[-1] == "torchrun":
            return i + 1
        if w == "-m" and i + 1 < len(words) and words[i + 1] in LAUNCHER_MODULES:
            return i + 2
        if w.startswith("-m") and w[2:] in LAUNCHER_MODULES:
            return i + 1
    return None


def _value(words: Sequence[str], i: int, names: tuple[str, ...]) -> tuple[str | None, int] | None:
    """(value, next index) when words[i] is one of `names` (`--opt V` or `--opt=V`), else None."""
    w = words[i]
    for name in names:
        if w == name:
            return (words[i + 1] if i + 1 < len(words) else None), i + 2
        if w.startswith(name + "="):
            return w[len(name) + 1:], i + 1
    return None


class TorchrunWorld(NamedTuple):
    """The nodes and processes per node a torchrun launch gives its workers; both None (`known` false) where the
    count is set only when the launch runs."""

    nnodes: int | None
    nproc_per_node: int | None

    @property
    def known(self) -> bool:
        return self.nnodes is not None and self.nproc_per_node is not None


UNKNOWN = TorchrunWorld(None, None)


def torchrun_world(via: Sequence[str], env_names: Sequence[str] = ()) -> TorchrunWorld | None:
    """The world a torchrun launch gives its workers; UNKNOWN where the launch is torchrun's but the count is not
    known before it runs (auto/gpu, an elastic MIN:MAX with MIN != MAX, an abbreviated option, the PET_*
    environment); None where `via` does not launch torchrun."""
    at = _launcher_at(via)
    if at is None:
        return None
    nnodes, nproc = "1:1", "1"
    seen: set[str] = set()
    i = at
    while i < len(via):
        w = via[i]
        if w in ("-m", "--module", "--no-python", "--no_python") or not w.startswith("-"):
            i += 1
            continue
        got = _value(via, i, NNODES)
        if got is not None:
            nnodes, i = got[0], got[1]
            seen.add("nnodes")
            continue
        got = _value(via, i, NPROC)
        if got is not None:
            nproc, i = got[0], got[1]
            seen.add("nproc")
            continue
        head = w.split("=", 1)[0]
        if len(head) > 2 and any(n.startswith(head) for n in (*NNODES, *NPROC)):
            return UNKNOWN  # an abbreviation argparse may take (or refuse as ambiguous): not read here
        i += 1
    if ("nnodes" not in seen and "PET_NNODES" in env_names) or ("nproc" not in seen and "PET_NPROC_PER_NODE" in env_names):
        return UNKNOWN
    if nnodes is None or nproc is None:
        return UNKNOWN
    parts = nnodes.split(":")
    try:
        lo, hi = (int(parts[0]), int(parts[0])) if len(parts) == 1 else (int(parts[0]), int(parts[1]))
        per = int(nproc)
    except (ValueError, IndexError):
        return UNKNOWN
    if len(parts) > 2 or lo != hi or lo < 1 or per < 1:
        return UNKNOWN
    return TorchrunWorld(lo, per)
