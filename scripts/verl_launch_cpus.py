#!/usr/bin/env python3
"""Regenerate wizard/check/data/launch_cpus.json: the CPUs verl 0.9.1 holds in Ray placement groups at start-up.

    python scripts/verl_launch_cpus.py            # from the installed verl's source
    python scripts/verl_launch_cpus.py --check    # exit 1 if the shipped table is stale

Read with `ast` and the YAML loader from the installed verl (nothing of verl imported):

- `cpus_per_gpu`: `ResourcePoolManager.max_colocate_count` (verl/single_controller/ray/base.py), the CPUs of each
  GPU bundle `RayResourcePool.get_placement_groups` requests (`bundle = {"CPU": self.max_colocate_count}`), then
  `ray.get([pg.ready() for pg in pgs])` with no timeout: a bundle Ray cannot place waits forever.
- `tq_forced_line`: where the V1 TaskRunner sets `config.transfer_queue.enable = True` (verl/trainer/main_ppo.py)
  before `tq.init(config.transfer_queue)`, so TransferQueue runs whatever transfer_queue.enable says.
- `use_v1_default` and `num_data_storage_units_default`: the defaults of trainer.use_v1
  (trainer/config/ppo_trainer.yaml) and transfer_queue.backend.SimpleStorage.num_data_storage_units
  (trainer/config/transfer_queue/transfer_queue.yaml).
- `tq_controller_cpus` (1) is TransferQueue's, not verl's: its SimpleStorage places one 1-CPU bundle per storage unit
  plus a 1-CPU controller (verl#7656, Ascend/TransferQueue#164); the package is not installed here to read.

VI434 (wizard.check.rules.launch_cpus) reads this table.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "launch_cpus.json"
BASE = "verl/single_controller/ray/base.py"
MAIN = "verl/trainer/main_ppo.py"
TQ_YAML = "verl/trainer/config/transfer_queue/transfer_queue.yaml"
PPO_YAML = "verl/trainer/config/ppo_trainer.yaml"
BUNDLE = "bundle = {'CPU': self.max_colocate_count}"


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise SystemExit(f"{BASE} has no class {name}")


def _line(tree: ast.AST, text: str) -> int:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.Expr)) and ast.unparse(node) == text:
            return node.lineno
    raise SystemExit(f"no `{text}` in the source")


def _yaml_line(path: Path, key: str) -> int:
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip().startswith(key + ":"):
            return i
    raise SystemExit(f"no {key} in {path}")


def build_from(root: Path) -> dict[str, Any]:
    top = root.parent
    base = ast.parse((top / BASE).read_text(encoding="utf-8"))
    manager = _class(base, "ResourcePoolManager")
    per_gpu = next(n for n in manager.body if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) ==
                   "max_colocate_count")
    pool = _class(base, "RayResourcePool")
    main = ast.parse((top / MAIN).read_text(encoding="utf-8"))
    tq = yaml.safe_load((top / TQ_YAML).read_text(encoding="utf-8"))
    trainer = yaml.safe_load((top / PPO_YAML).read_text(encoding="utf-8"))["trainer"]
    return {
        "cpus_per_gpu": ast.literal_eval(per_gpu.value),
        "cpus_per_gpu_line": f"{BASE[5:]}:{per_gpu.lineno}",
        "bundle_line": f"{BASE[5:]}:{_line(pool, BUNDLE)}",
        "pg_ready_line": f"{BASE[5:]}:{_line(pool, 'ray.get([pg.ready() for pg in pgs])')}",
        "tq_forced_line": f"{MAIN[5:]}:{_line(main, 'config.transfer_queue.enable = True')}",
        "tq_init_line": f"{MAIN[5:]}:{_line(main, 'tq.init(config.transfer_queue)')}",
        "use_v1_default": trainer["use_v1"],
        "use_v1_line": f"{PPO_YAML[5:]}:{_yaml_line(top / PPO_YAML, 'use_v1')}",
        "storage_backend_default": tq["backend"]["storage_backend"],
        "num_data_storage_units_default": tq["backend"]["SimpleStorage"]["num_data_storage_units"],
        "num_data_storage_units_line": f"{TQ_YAML[5:]}:{_yaml_line(top / TQ_YAML, 'num_data_storage_units')}",
        "tq_controller_cpus": 1,
    }


def build() -> dict[str, Any]:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    raise SystemExit(table_main(__doc__, build, OUT))
