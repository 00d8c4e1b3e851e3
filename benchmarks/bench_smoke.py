#!/usr/bin/env python3
"""Wall time of `verl-init smoke --engine cpu` on the cpu-smoke profile (the issue's budget: ≤ 120 s
on 2 cores, Ray start included).

    python benchmarks/bench_smoke.py              # 3 runs, each in a fresh process (cold imports, own Ray)
    python benchmarks/bench_smoke.py --runs 1 --profile cpu-smoke --set algorithm=ppo --set samples_per_prompt=1

Each run renders the profile into a temporary folder and runs `verl-init smoke BUNDLE --engine cpu
--data-dir tests/data/gsm8k --json` in a new Python process, so the time includes interpreter start,
every import, Ray start and stop. Per-phase seconds come from the report itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import record  # benchmarks/ is on sys.path when a script here runs

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = 120.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--profile", default="cpu-smoke")
    p.add_argument("--set", dest="sets", action="append", default=[])
    ns = p.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    walls, failures = [], 0
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    for i in range(ns.runs):
        with tempfile.TemporaryDirectory() as tmp:
            bundle = Path(tmp) / "b"
            sets = [x for s in ns.sets for x in ("--set", s)]
            subprocess.run([sys.executable, "-m", "wizard.cli.app", "--profile", ns.profile, *sets, "--out", str(bundle)],
                           env=env, check=True, capture_output=True, cwd=tmp)
            started = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "wizard.cli.app", "smoke", str(bundle), "--engine", "cpu",
                                "--data-dir", str(ROOT / "tests" / "data" / "gsm8k"), "--json"],
                               env=env, capture_output=True, text=True, cwd=tmp, check=False)
            wall = time.perf_counter() - started
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            print(f"run {i + 1}: exit {r.returncode}, no JSON: {r.stderr[-500:]}")
            failures += 1
            continue
        walls.append(wall)
        failures += 0 if doc["ok"] else 1
        phases = ", ".join(f"{k} {v:.1f}" for k, v in doc["seconds"].items() if k != "total")
        print(f"run {i + 1}: {'ok' if doc['ok'] else 'FAILED'} in {wall:.1f} s wall (report total "
              f"{doc['seconds']['total']:.1f} s: {phases}); reward {doc['reward_mean']} ± {doc['reward_std']}")
    if walls:
        print(f"wall seconds: median {statistics.median(walls):.1f}, max {max(walls):.1f} (budget {BUDGET_S:g} s)")
        record(f"smoke {ns.profile} (cpu engine, worst run)", max(walls), BUDGET_S)
    return 0 if walls and not failures and max(walls) <= BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
