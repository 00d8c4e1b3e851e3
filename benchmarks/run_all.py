#!/usr/bin/env python3
"""Every benchmark, one after another, each in its own process, then one table of what each measured
against its target and against anchors measured in the same run on the same machine:

    python benchmarks/run_all.py            # CLI speed, check, validate-dataset throughput, smoke wall time
    python benchmarks/run_all.py --quick    # the CLI one only (seconds)

Anchors: "process" = a bare `python -c pass` start-up (median of 15), "cpu" = a fixed pure-Python loop
(median of 5). A ratio (× anchor) compares machines fairly: a slow or loaded machine scales both.
Exit status: non-zero when any benchmark misses its target or fails.
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

HERE = Path(__file__).resolve().parent
ALL = [["bench_cli.py"], ["bench_check.py"], ["bench_validate_dataset.py"], ["bench_smoke.py", "--runs", "1"]]


def anchors() -> dict[str, float]:
    starts = []
    for _ in range(15):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        starts.append(time.perf_counter() - t0)
    loops = []
    for _ in range(5):
        t0 = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i * i % 7
        loops.append(time.perf_counter() - t0)
    return {"process": statistics.median(starts), "cpu": statistics.median(loops)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="only the CLI benchmark")
    ns = p.parse_args()
    anchor = anchors()
    print(f"anchors: python start-up {anchor['process'] * 1000:.1f} ms, cpu loop {anchor['cpu'] * 1000:.1f} ms", flush=True)
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.jsonl"
        env = {**os.environ, "VERL_INIT_BENCH_RESULTS": str(results)}
        for args in ALL[:1] if ns.quick else ALL:
            print(f"== {' '.join(args)}", flush=True)
            if subprocess.run([sys.executable, str(HERE / args[0]), *args[1:]], check=False, env=env).returncode:
                failed.append(args[0])
        rows = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    print(f"\n{'benchmark':<52} {'seconds':>9} {'target':>8} {'× anchor':>10}")
    for r in rows:
        target = f"{r['target_s']:g}" if r["target_s"] is not None else "-"
        ratio = r["seconds"] / anchor[r["anchor"]]
        print(f"{r['name'][:52]:<52} {r['seconds']:>9.3f} {target:>8} {ratio:>8.1f} × {r['anchor']}")
    print("all benchmarks met their targets" if not failed else f"missed or failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
