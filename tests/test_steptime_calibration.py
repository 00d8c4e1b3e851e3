"""The step-time model against the 17 real verl runs of tests/data/reference/step-times.json (each with its
source URL there). Every report's error is stated (pytest -rA prints them; benchmarks/step_times.md has the table
and the hold-out halves).

Where the model stands (issue 28 asks ≥ 80 % within ±30 %): 9 of 17 steps, 6 of 8 weight syncs, 7 of 12 old
log-prob passes, 7 of 14 updates, 3 of 14 rollouts. The floors below are today's results, so that a change that
makes the model worse fails here; raising them is the work left (docs/time.md says which runs miss and why).
"""

from __future__ import annotations

import math

import pytest
from steptime_cases import TOLERANCE, cases, compare, response_mean, within

from wizard.planner import steptime as st

CASES = cases()
IDS = [c["id"] for c in CASES]
# share of reports within ±30 % today, per measured quantity (see the module docstring)
FLOORS = {"step": 9 / 17, "weight sync": 6 / 8, "old log-prob": 7 / 12, "update actor": 7 / 14, "rollout": 3 / 14}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_report_is_predicted_and_its_error_stated(case, record_property):
    pairs = compare(case, CASES)
    assert "step" in pairs, case["id"]
    _, basis = response_mean(case, CASES)
    for k, (p, m) in pairs.items():
        assert math.isfinite(p) and p > 0, (case["id"], k)
        record_property(f"{k} error", f"{p / m - 1:+.0%} (predicted {p:.0f} s, measured {m:.0f} s)")
    record_property("response length", basis)
    # a step more than 5× off means a unit or an input went wrong, not a calibration miss (phases may be further
    # off where a run did what the model does not know: T13's cross-node TP 16 rollout, T27's unpadded GDN passes)
    p, m = pairs["step"]
    assert 0.2 < p / m < 5, {k: round(p / m, 2) for k, (p, m) in pairs.items()}


def test_shares_within_tolerance_do_not_regress():
    hits: dict[str, list[bool]] = {}
    for c in CASES:
        for k, (p, m) in compare(c, CASES).items():
            hits.setdefault(k, []).append(within(p, m, TOLERANCE))
    shares = {k: sum(v) / len(v) for k, v in hits.items()}
    assert all(shares[k] >= floor - 1e-9 for k, floor in FLOORS.items()), shares


def test_no_constant_is_per_report():
    """The model reads nothing of a report but its configuration, hardware and lengths: changing a report's
    measured numbers changes no prediction."""
    import copy

    c = copy.deepcopy(CASES[0])
    before = compare(c, CASES)
    c["measured"] = {k: (v * 2 if isinstance(v, (int, float)) else v) for k, v in c["measured"].items()}
    c["measured"]["response_length/mean"] = None
    after = compare(c, CASES)
    assert {k: p for k, (p, _) in before.items()} == {k: p for k, (p, _) in after.items()}
    assert not any(case["id"] in open(st.__file__, encoding="utf-8").read() for case in CASES)


def test_the_reported_comparisons_hold():
    """What the reports show, as the model must reproduce it: a rollout TP of 4 instead of 1 on a 7B model on the
    same 8 H100 makes generation slower (T01 vs its sibling row T02: 485 s vs 154 s); 4× the GPUs shorten the step
    (T01, 8 GPUs, TP 4 → T03, 32 GPUs, TP 1: 746 s → 171 s); fixed micro-batches of 2 are slower than token budgets
    (T15: update 300 s vs 102 s)."""
    from dataclasses import replace

    from steptime_cases import workload

    t01 = next(c for c in CASES if c["id"] == "T01")
    w = workload(t01, CASES)
    tp1 = st.predict(replace(w, rollout_tp=1, kv_bytes_per_token=w.kv_bytes_per_token * 4, kv_tokens=None))
    assert tp1.phases["rollout"] < st.predict(w).phases["rollout"]
    t15 = next(c for c in CASES if c["id"] == "T15")
    w15 = workload(t15, CASES)
    dyn = st.predict(replace(w15, dynamic_bsz=True, train_tokens=10240, logprob_tokens=10240))
    assert dyn.phases["update actor"] < 0.7 * st.predict(w15).phases["update actor"]
