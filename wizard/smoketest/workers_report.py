"""The report of `smoke --engine verl-workers`: the ranks' result files merged (wizard.smoketest.workers_child writes
them), held against the plan's `verl_metrics`, and printed as text (the JSON is WorkersReport.as_dict())."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional

from wizard.smoketest.workers_child import PHASES

CPU_NOTE = "not measured on CPU"
_VERL_FRAME = re.compile(r'File "[^"]*/site-packages/(verl/[^"]+)", line (\d+)')


def _ranks(work: Path) -> list[dict[str, Any]]:
    out = []
    for f in sorted(work.glob("rank*.json"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0)):
        try:
            out.append(json.loads(f.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return out


def verl_message(rec: dict[str, Any]) -> str:
    """The exception verl raised, on one line, with the verl source line it came from."""
    msg = " ".join(str(rec.get("error", "")).split())
    frames = _VERL_FRAME.findall(rec.get("traceback", ""))
    where = f" (raised at {frames[-1][0]}:{frames[-1][1]})" if frames else ""
    return (msg[:600] + ("…" if len(msg) > 600 else "")) + where


def _latest(ranks: list[dict[str, Any]], name: str) -> list[tuple[int, dict[str, Any]]]:
    """(step, record) of the phase's latest measurement on each rank that measured it."""
    got = []
    for r in ranks:
        for step in reversed(r.get("steps", [])):
            if name in step["phases"]:
                got.append((step["step"], step["phases"][name]))
                break
    return got


def _ratio(measured: Optional[float], predicted: Optional[float]) -> Optional[float]:
    if measured is None or not predicted:
        return None
    return round(measured / predicted, 2)


def _phase(name: str, ranks: list[dict[str, Any]], device: str, predicted: dict[str, Any],
           failed: Optional[str], steps: int) -> dict[str, Any]:
    got = _latest(ranks, name)
    done = [s for s, _ in got]
    status = "ok" if got and len(got) == len(ranks) and min(done) == steps else \
        "failed" if failed == name else "measured in an earlier step" if got else "not reached"
    ph: dict[str, Any] = {"name": name, "status": status, "step": min(done) if done else None,
                          "seconds": max((r["seconds"] for _, r in got), default=None),
                          "verl": got[0][1].get("verl", {}) if got else {}}
    pred = predicted.get(name)
    ph["predicted"] = dict(pred) if pred else None
    if device == "cuda" and got:
        ph["measured"] = {k: round(max(r.get(k, 0.0) for _, r in got), 3)
                          for k in ("max_memory_allocated_gb", "max_memory_reserved_gb")}
        ph["ratio"] = {k.split("_")[2]: _ratio(ph["measured"][k], (pred or {}).get(k)) for k in ph["measured"]}
    else:
        ph["measured"], ph["ratio"] = None, None
        if device == "cpu" and got:
            ph["measured_note"] = CPU_NOTE
    return ph


def _failure(ranks: list[dict[str, Any]], codes: list[int], timed_out: bool, timeout: float) -> Optional[dict]:
    bad = [r for r in ranks if r.get("status") != "ok"]
    if timed_out:
        where = bad[0].get("phase", "start") if bad else "start"
        return {"phase": where, "rule": "VI969",
                "message": f"stopped after --timeout {timeout:g} s in {where}", "hint": "raise --timeout"}
    if bad:
        r = bad[0]
        hint = ("the card ran out of memory in this phase: lower the micro-batch size or token budget, or offload"
                if r.get("status") == "oom" else "fix the bundle key verl names (verl-init check BUNDLE may say which)")
        out = {"phase": r.get("phase", "start"), "rank": r.get("rank"), "rule": "VI969", "message": verl_message(r),
               "hint": hint}
        if r.get("at_error"):
            out["at_error"] = r["at_error"]
            out["message"] += f" (peaks when it failed: {_pair(r['at_error'])} GiB allocated / reserved)"
        return out
    missing = [i for i, c in enumerate(codes) if c != 0] or ([] if len(ranks) == len(codes) else [len(ranks)])
    if missing:
        i = missing[0]
        return {"phase": "start", "rank": i, "rule": "VI969",
                "message": f"rank {i} exited with code {codes[i] if i < len(codes) else '?'} before writing a result",
                "hint": "run with --debug to see its log"}
    return None


def merge(report: Any, work: Path, codes: list[int], timed_out: bool, predicted: dict[str, Any], opts: Any) -> None:
    """Fill `report` from the ranks' files in `work`."""
    ranks = _ranks(work)
    logs = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(work.glob("rank*.log"))]
    report.log_tail = "\n".join(logs)[-6000:]
    first = ranks[0] if ranks else {}
    report.shims = list(first.get("shims", []))
    report.failure = _failure(ranks, codes, timed_out, opts.timeout)
    report.status = "timeout" if timed_out else "failed" if report.failure else "ok"
    use_ref, use_critic = first.get("use_ref"), first.get("use_critic")
    wanted = [p for p in PHASES if (p != "ref_log_prob" or use_ref is not False)
              and (p not in ("values", "update_critic") or use_critic is not False)]
    if use_ref is None:  # setup did not get as far as verl's config: the phases it would run are unknown
        wanted = [p for p in wanted if _latest(ranks, p)] or ["old_log_prob"]
    failed = report.failure["phase"] if report.failure else None
    report.phases = [_phase(p, ranks, report.device, predicted, failed, opts.steps) for p in wanted]
    if report.failure and report.failure["phase"] not in wanted:  # setup, init: its own line
        report.phases.insert(0, {"name": report.failure["phase"], "status": "failed", "measured": None,
                                 "predicted": None, "ratio": None, "verl": {}})
    report.notes = _notes(report, opts)


def _notes(report: Any, opts: Any) -> list[str]:
    notes = [f"peaks of step {opts.steps} of {opts.steps} (step 1 creates Adam's states in its update; the plan "
             "predicts the steady state)" if opts.steps > 1 else
             "one step: the log-prob passes ran before Adam's states existed (the plan predicts the steady state; "
             "--steps 2 measures it)"]
    if report.device == "cpu":
        notes.append("CPU: verl's engine workers ran every phase on the CPU (gloo); GPU memory is not measured "
                     "there (verl's own perf/cpu_memory_used_gb is shown)")
    gpus = report.plan.get("gpus")
    if report.device == "cuda" and gpus and gpus != report.world_size:
        notes.append(f"the plan shards over {gpus} GPUs, this run over {report.world_size} (FSDP shards weights, "
                     "gradients and Adam states over the ranks): the ratios carry that difference")
    planned = report.plan.get("model")
    if opts.model_dir and planned:
        notes.append(f"--model-dir {opts.model_dir} stands in for the bundle's model ({planned}); the plan predicts "
                     f"{planned}")
    if report.plan.get("note"):
        notes.append(f"plan: {report.plan['note']}")
    return notes


def _pair(d: Optional[dict[str, Any]], a: str = "max_memory_allocated_gb", r: str = "max_memory_reserved_gb") -> str:
    if not d:
        return "—"
    return f"{d[a]:.2f} / {d[r]:.2f}" if d.get(a) is not None and d.get(r) is not None else "—"


def format_text(report: Any) -> str:
    head = {"ok": "ok", "failed": "FAILED", "timeout": "TIMED OUT"}.get(report.status, report.status)
    b = report.batch
    lines = [f"verl-init smoke --engine verl-workers {report.bundle}: {head} ({report.seconds:.0f} s)",
             f"verl 0.9.1's engine workers on {report.world_size} × {report.device} (one process per device, as "
             f"verl's Ray workers); the bundle's plan: {report.bundle_gpus} GPU(s); model {report.model}",
             f"batch per rank: {b.get('sequences_per_rank')} full-length sequences of {b.get('prompt_length')} + "
             f"{b.get('response_length')} tokens; micro-batches (sequences): "
             + ", ".join(f"{k} {v}" for k, v in b.get("micro_batch_sequences", {}).items()),
             "", f"{'phase':15s} {'':12s} {'measured alloc / reserved GiB':31s} {'plan verl_metrics GiB':23s} "
             f"{'measured ÷ plan':16s} verl's metrics"]
    for ph in report.phases:
        measured = _pair(ph.get("measured")) if ph.get("measured") else ph.get("measured_note", "—")
        ratio = ph.get("ratio") or {}
        rtxt = f"{ratio['allocated']} / {ratio['reserved']}" if ratio and None not in ratio.values() else "—"
        verl = ", ".join(f"{k}={v:g}" for k, v in sorted(ph.get("verl", {}).items())
                         if k in ("loss", "grad_norm", "perf/cpu_memory_used_gb", "perf/max_memory_allocated_gb",
                                  "perf/max_memory_reserved_gb"))
        status = "" if ph["status"] == "ok" else ph["status"]
        lines.append(f"{ph['name']:15s} {status:12s} {measured:31s} {_pair(ph.get('predicted')):23s} {rtxt:16s} {verl}")
    if report.failure:
        f = report.failure
        lines += ["", f"{f['rule']} {f['phase']}: {f['message']} — {f['hint']}"]
    lines += [""] + [f"note: {n}" for n in report.notes] + [f"shim: {s}" for s in report.shims]
    return "\n".join(lines)
