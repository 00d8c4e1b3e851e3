#!/usr/bin/env python3
"""Speed of `verl-init check` (the target: ≤ 1 s per config or script, with or without verl installed).

    python benchmarks/bench_check.py

- every shipped profile rendered to a bundle, then `verl-init check BUNDLE` in a fresh process with
  `--defaults snapshot` and with `--defaults auto` (verl's own tree when verl is installed), wall clock,
  median of 3 runs;
- every config in tests/data/reference/verl-examples.json (verl's own example scripts' overrides): one fresh
  process each, `verl-init check --defaults snapshot -- OVERRIDES`;
- verl's 79 current launch scripts (tests/data/reference/verl-main-scripts): `verl-init check SCRIPT
  --defaults auto`, one fresh process each (bash's sandboxed reading included where bubblewrap is installed).

Each process is also run once under `python -X importtime` to show that verl, torch and ray are not
imported. Exit status 1 if a target is missed or one of them is imported.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import record  # benchmarks/ is on sys.path when a script here runs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
EXAMPLES = ROOT / "tests" / "data" / "reference" / "verl-examples.json"
SCRIPTS = ROOT / "tests" / "data" / "reference" / "verl-main-scripts"
TARGET_S = 1.0
HEAVY = ("verl", "torch", "ray")


def run(args: list[str], runs: int, defaults: str = "snapshot") -> tuple[float, set[str]]:
    cmd = [sys.executable, "-m", "wizard.cli.app", "check", "--defaults", defaults, *args]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False, env={"HOME": "/root", "PATH": "/usr/bin:/bin"})
        times.append(time.perf_counter() - t0)
    trace = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], cwd=ROOT, capture_output=True, text=True,
                           check=False).stderr
    modules = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in trace.splitlines() if "|" in line}
    return statistics.median(times), modules & set(HEAVY)


def main() -> int:
    import wizard
    from wizard.intent.profiles import profile_names

    ok = True
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in profile_names():
            out = Path(tmp) / name
            wizard.write_bundle(wizard.render(wizard.plan(wizard.load_profile(name), base_dir=str(out))), out)
            for defaults in ("snapshot", "auto"):
                seconds, heavy = run([str(out)], 3, defaults)
                good = seconds <= TARGET_S and not heavy
                ok &= good
                worst = max(worst, seconds)
                record(f"check bundle {name} ({defaults})", seconds, TARGET_S)
                print(f"check bundle {name:<18} {defaults:<8} {seconds * 1000:7.1f} ms   target {TARGET_S * 1000:.0f} ms   "
                      f"{'ok' if good else 'MISSED'}{'   imported ' + ', '.join(sorted(heavy)) if heavy else ''}")
    if EXAMPLES.is_file():
        configs = json.loads(EXAMPLES.read_text(encoding="utf-8"))["configs"]
        times = []
        for config in configs:
            seconds, heavy = run(["--", *config["overrides"]], 1)
            times.append(seconds)
            if seconds > TARGET_S or heavy:
                ok = False
                print(f"check {config['source']}: {seconds * 1000:.1f} ms MISSED {sorted(heavy)}")
        worst = max(worst, max(times))
        record(f"check verl's {len(configs)} example configs (worst)", max(times), TARGET_S)
        print(f"check verl's {len(configs)} example configs: median {statistics.median(times) * 1000:.1f} ms, "
              f"max {max(times) * 1000:.1f} ms   target {TARGET_S * 1000:.0f} ms   {'ok' if max(times) <= TARGET_S else 'MISSED'}")
    else:
        print(f"(verl's example configs not found at {EXAMPLES}: skipped)")
    index = json.loads((SCRIPTS / "index.json").read_text(encoding="utf-8"))["scripts"]
    times = []
    for entry in index:
        seconds, heavy = run([str(SCRIPTS / entry["file"]), "--env", "HOME=$HOME"], 1, "auto")
        times.append(seconds)
        if seconds > TARGET_S or heavy:
            ok = False
            print(f"check {entry['path']}: {seconds * 1000:.1f} ms MISSED {sorted(heavy)}")
    worst = max(worst, max(times))
    record(f"check verl's {len(index)} launch scripts (worst)", max(times), TARGET_S)
    print(f"check verl's {len(index)} launch scripts (auto): median {statistics.median(times) * 1000:.1f} ms, "
          f"max {max(times) * 1000:.1f} ms   target {TARGET_S * 1000:.0f} ms   {'ok' if max(times) <= TARGET_S else 'MISSED'}")
    print(f"worst {worst * 1000:.1f} ms per config")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
