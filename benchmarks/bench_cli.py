"""Speed targets for the CLI (not timed tests): run `python benchmarks/bench_cli.py`.

- `verl-init --help` ≤ 0.25 s (a fresh process, wall clock, median of 15 runs)
- rendering a profile end to end ≤ 0.5 s (`verl-init --profile X --dry-run` in a fresh process,
  median of 5 runs per profile), and the in-process plan+render time per profile.
Exit status 1 if a target is missed.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import record  # noqa: E402


def wall(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    import wizard
    from wizard.intent.profiles import profile_names

    ok = True
    help_s = wall([sys.executable, "-m", "wizard.cli.app", "--help"], 15)
    ok &= help_s <= 0.25
    record("verl-init --help", help_s, 0.25)
    print(f"verl-init --help                      {help_s * 1000:7.1f} ms   target 250 ms   {'ok' if help_s <= 0.25 else 'MISSED'}")
    for name in profile_names():
        cli_s = wall([sys.executable, "-m", "wizard.cli.app", "--profile", name, "--dry-run", "--out", "/tmp/x"], 5)
        t0 = time.perf_counter()
        for _ in range(20):
            wizard.render(wizard.plan(wizard.load_profile(name), base_dir="/r"))
        inproc = (time.perf_counter() - t0) / 20
        ok &= cli_s <= 0.5
        record(f"render {name} (process)", cli_s, 0.5)
        record(f"plan+render {name} (in-process)", inproc, None, "cpu")
        print(f"render {name:<18} process {cli_s * 1000:7.1f} ms   target 500 ms   {'ok' if cli_s <= 0.5 else 'MISSED'}"
              f"   (in-process plan+render {inproc * 1000:.1f} ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
