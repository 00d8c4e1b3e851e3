#!/usr/bin/env python3
"""Where verl runs the reference model, read from its source: writes wizard/check/data/verl_ref_placement.json,
read by check's VI668 and VI669.

    python scripts/verl_ref_placement.py           # regenerate the table with the installed verl
    python scripts/verl_ref_placement.py --check   # exit 1 when the committed table differs

- "forced_offload": the FSDP engine strategies whose module builder CPU-offloads the parameters of every
  forward_only engine whatever fsdp_config.param_offload / offload_policy say (an `if ...forward_only` branch that
  builds CPUOffload / CPUOffloadPolicy inside `if self.engine_config.strategy == "<strategy>"`), with file:line.
- "forward_only_ref": the ref config files (trainer/config/ref/*.yaml) whose engine block sets forward_only: True.
- "ref_in_actor": the trainer sites that decide the reference runs inside the actor (LoRA: the actor with its adapter
  disabled, no ref worker), and the model keys that decision reads (`lora.rank`, `lora_rank`, `lora_adapter_path`).
- "ref_required": the ref keys verl's validate_config requires whenever the reference is used without dynamic batch
  size (check_mutually_exclusive: one of the pair must be set), with file:line.
- "ref_log_prob_keys": the ref.log_prob_* keys the ref worker pops into its engine's sizing (engine_workers.py), whose
  rollout.* namesakes size the actor's forward, the one that computes the reference in a LoRA run.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_ref_placement.json"
OFFLOAD_CALLS = {"CPUOffload", "CPUOffloadPolicy"}
TRAINERS = ("trainer/ppo/v1/trainer_base.py", "trainer/ppo/ray_trainer.py", "trainer/main_ppo_v0.py",
            "experimental/fully_async_policy/fully_async_trainer.py")


def _verl() -> Path:
    import verl

    return Path(verl.__file__).resolve().parent


def _strategy(test: ast.expr) -> str | None:
    """"fsdp" for `self.engine_config.strategy == "fsdp"`, else None."""
    if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Attribute) and test.left.attr == "strategy"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)):
        return str(test.comparators[0].value)
    return None


def _forward_only_offload(node: ast.If) -> bool:
    reads = any(isinstance(n, ast.Attribute) and n.attr == "forward_only" for n in ast.walk(node.test))
    calls = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in OFFLOAD_CALLS
                for b in node.body for n in ast.walk(b))
    return reads and calls


def forced_offload(verl: Path) -> dict[str, str]:
    path = verl / "workers/engine/fsdp/transformer_impl.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, str] = {}

    def visit(node: ast.AST, strategy: str | None) -> None:
        if isinstance(node, ast.If):
            s = _strategy(node.test)
            if strategy and _forward_only_offload(node):
                out.setdefault(strategy, f"verl/workers/engine/fsdp/transformer_impl.py:{node.lineno}")
            for child in node.body:
                visit(child, s or strategy)
            for child in node.orelse:
                visit(child, strategy)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, strategy)

    visit(tree, None)
    return dict(sorted(out.items()))


def forward_only_ref(verl: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted((verl / "trainer/config/ref").glob("*.yaml")):
        block = None
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            top = re.match(r"^([A-Za-z_]\w*):", line)
            if top:
                block = top.group(1)
            if block and re.match(r"^\s+forward_only:\s*True\b", line):
                out[f"{path.stem}.{block}"] = f"verl/trainer/config/ref/{path.name}:{i}"
    return out


def ref_in_actor(verl: Path) -> dict[str, list[str]]:
    sites, keys = [], set()
    for rel in TRAINERS:
        lines = (verl / rel).read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if re.search(r"\bref_in_actor\s*=\s*lora_rank\s*>\s*0\s+or\b", line):
                sites.append(f"verl/{rel}:{i + 1}")
                for prev in lines[max(0, i - 3):i + 1]:
                    chain = re.findall(r'\.get\("(\w+)"', prev)
                    if chain:
                        keys.add(".".join(chain))
    return {"keys": sorted(keys), "sites": sites}


def ref_required(verl: Path) -> dict[str, object]:
    path = verl / "utils/config.py"
    text = path.read_text(encoding="utf-8")
    m = re.search(r'"actor_rollout_ref\.ref":\s*"(\w+)"', text)
    assert m, "validate_config's settings table moved"
    line = text[:m.start()].count("\n") + 1
    return {"keys": [m.group(1), f"{m.group(1)}_per_gpu"], "site": f"verl/utils/config.py:{line}"}


def ref_log_prob_keys(verl: Path) -> dict[str, object]:
    """The ref keys the ref worker pops into its engine's log-prob sizing (the rollout's keys of the same names size
    the actor's, which computes the reference in a LoRA run)."""
    text = (verl / "workers/engine_workers.py").read_text(encoding="utf-8")
    found = [(m.group(1), text[:m.start()].count("\n") + 1) for m in re.finditer(r'self\.config\.ref\.pop\(\s*"(\w+)"', text)]
    assert found, "the ref worker no longer pops its log-prob keys"
    return {"keys": sorted({k for k, _ in found}), "site": f"verl/workers/engine_workers.py:{found[0][1]}"}


def build() -> dict[str, object]:
    verl = _verl()
    return {"forced_offload": forced_offload(verl), "forward_only_ref": forward_only_ref(verl),
            "ref_in_actor": ref_in_actor(verl), "ref_required": ref_required(verl),
            "ref_log_prob_keys": ref_log_prob_keys(verl)}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
