"""What each benchmark measured, for run_all.py's summary: `record(name, seconds, target_s)` appends one JSON
line to the file named by VERL_INIT_BENCH_RESULTS (nothing when a benchmark runs on its own)."""

from __future__ import annotations

import json
import os
from typing import Optional


def record(name: str, seconds: float, target_s: Optional[float], anchor: str = "process") -> None:
    """`anchor`: what the time is compared with in the summary — "process" (a bare Python start-up) for
    commands run as a fresh process, "cpu" (a fixed pure-Python loop) for in-process work."""
    path = os.environ.get("VERL_INIT_BENCH_RESULTS")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"name": name, "seconds": seconds, "target_s": target_s, "anchor": anchor}) + "\n")
