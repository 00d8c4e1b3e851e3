"""verl 0.9.1's own engine workers measured on an H200 (tests/data/reference/gpu-memory, see SOURCE.md there): the
cases as `verl-init check` sees them and the measured peaks per pass. Shared by tests/test_memory_gpu_calibration.py
and benchmarks/memory_calibration.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "reference" / "gpu-memory"
PASSES = ("old_log_prob", "ref_log_prob", "values", "update_critic", "update_actor")


def records() -> list[dict]:
    """Every case record of the runs (ok, oom), the last record of a case winning."""
    out: dict[str, dict] = {}
    for path in sorted(DATA.glob("run*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec.get("record") == "case" and rec.get("status") in ("ok", "oom"):
                out[rec["case"]] = rec
    return list(out.values())


def measured(rec: dict) -> dict[str, tuple[float, float]]:
    """pass → (max allocated, max reserved) GiB of the last (steady-state) step."""
    last = rec["steps"][-1]["phases"]
    return {p: (last[p]["max_allocated_gib"], last[p]["max_reserved_gib"]) for p in PASSES if p in last}


def estimate(rec: dict):
    """The estimate of `verl-init check` for the case's overrides on one H200, re-estimated as the measurement ran:
    the training passes only, no rollout engine started (gpu_memory_utilization 0), no rollout between steps
    (nothing empties the allocator's cache)."""
    from wizard.check.lint import check
    from wizard.planner.memory import estimate as est_fn
    from wizard.planner.shapes import from_local

    model = DATA / "models" / rec["settings"]["model"]
    overrides = [o.replace("{MODEL}", str(model)) for o in rec["overrides"]]
    report = check(None, overrides, nnodes=1, gpus_per_node=1, gpu_type="H200", gpu_memory_gb=141)
    assert report.memory is not None, [f.problem.message for f in report.findings]
    est = report.memory
    return est, est_fn(from_local(str(model)), replace(est.layout, rollout_between_steps=False, gmu=0.0))
