#!/usr/bin/env python3
"""Every benchmark, one after another, each in its own process:

    python benchmarks/run_all.py            # CLI speed, validate-dataset throughput, smoke wall time
    python benchmarks/run_all.py --quick    # the CLI one only (seconds)

Exit status: non-zero when any benchmark misses its target or fails.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ALL = [["bench_cli.py"], ["bench_check.py"], ["bench_validate_dataset.py"], ["bench_smoke.py", "--runs", "1"]]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="only the CLI benchmark")
    ns = p.parse_args()
    failed = []
    for args in ALL[:1] if ns.quick else ALL:
        print(f"== {' '.join(args)}", flush=True)
        if subprocess.run([sys.executable, str(HERE / args[0]), *args[1:]], check=False).returncode:
            failed.append(args[0])
    print("all benchmarks met their targets" if not failed else f"missed or failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
