"""The sibling rows of the calibration reports' source tables, as reports the step-time harness reads.

Six of the 17 reports of step-times.json (T01, T07, T08, T11, T13, T15) are one row each of a benchmark table in
ISEEKYAN/verl_megatron_practice (tests/data/reference/sibling-tables/, copied unchanged at commit dfd811a). The
other rows of those tables are the same recipe on other GPU counts, layouts, engines and budgets: runs the model
was never fitted on. Each row becomes a report: the table's shown report is the template for what a row does not
state (the recipe's rollout n, the verl of its date, its overrides), the row replaces everything it does state
(backend, GPUs, train and rollout parallelism, recompute, token budgets or micro-batches, offload, lengths, batch
sizes, its measured times, MFU, throughput and mean response), and the template's derived block is dropped, so
the row's lengths are read from its own metrics. benchmarks/step_times_siblings.py writes the error per row.

The same holds for other runs in a report's own log repository (tests/data/reference/sibling-logs.json: T26's
GRPO sibling on the same MI300X node): each names its template report, the settings and command it changes, and
its timings reduced as the template's were.
"""

from __future__ import annotations

import copy
import csv
import json
import re
from pathlib import Path
from typing import Any, Optional

from steptime_cases import cases

TABLES_DIR = Path(__file__).resolve().parent / "data" / "reference" / "sibling-tables"
LOGS = TABLES_DIR.parent / "sibling-logs.json"
DOCS = TABLES_DIR.parent / "sibling-docs.json"
# what an entry of sibling-logs.json / sibling-docs.json may replace in its template report
REPLACED = ("source_group", "algorithm", "rollout_tp", "rollout_mode", "rollout_gpus", "backend", "train_parallel",
            "config_source", "verl_version", "date")
SOURCE = "https://github.com/ISEEKYAN/verl_megatron_practice/blob/dfd811adc3e42edc0d5b32cdfca5e7ad9df5c4f0/"
# each table and the report of step-times.json that is one of its rows (the template)
TABLES = {"dapo7b.csv": "T01", "dapo14b.csv": "T07", "dapo32b.csv": "T08", "dapo_moe30b.csv": "T11",
          "dapo_moe235b.csv": "T13", "grpo_qwen2.5_7b.csv": "T15"}
GPU_MEMORY_GB = {"H100": 80, "H20": 96}
# a row whose model column names another checkpoint than its template's (dapo14b.csv's Qwen2.5-14B rows beside the
# Qwen3-14B-Base of T07): that checkpoint's hub id
ROW_MODELS = {"qwen2.5-14b": "Qwen/Qwen2.5-14B", "qwen3-14b-base": "Qwen/Qwen3-14B-Base"}


def _size(text: Optional[str]) -> Optional[int]:
    """"2k" → 2048, "8" → 8, anything else None (the tables write "\\" or "/" for not applicable)."""
    s = str(text or "").strip().lower()
    try:
        return int(float(s[:-1]) * 1024) if s.endswith("k") else int(s)
    except ValueError:
        return None


def _number(text: Optional[str]) -> Optional[float]:
    try:
        return float(str(text).strip())
    except (TypeError, ValueError):
        return None


def _degree(layout: str, name: str) -> Optional[int]:
    found = re.search(name + r"(\d+)", layout.lower())
    return int(found.group(1)) if found else None


def rows(table: str) -> list[dict[str, str]]:
    with open(TABLES_DIR / table, encoding="utf-8", newline="") as f:
        return [r for r in csv.DictReader(f) if str(r.get("number") or "").strip().isdigit()]


def _first(row: dict[str, str], *columns: str) -> Optional[str]:
    return next((row[c] for c in columns if row.get(c) not in (None, "")), None)


def report(table: str, row: dict[str, str], template: dict[str, Any]) -> dict[str, Any]:
    """One row of `table` as a step-times.json report."""
    r = copy.deepcopy(template)
    r["id"] = f"{table.removesuffix('.csv')}#{row['number']}"
    r["url"] = f"{SOURCE}{table}#row-{row['number']}"
    n, gpu = int(row["num_gpus"]), row["GPU"].strip()
    r["hardware"] = {**r["hardware"], "n_gpus_total": n, "nnodes": max(n // 8, 1), "n_gpus_per_node": min(n, 8),
                     "gpu": gpu, "gpu_memory_gb": GPU_MEMORY_GB.get(gpu, r["hardware"].get("gpu_memory_gb"))}
    megatron = not row["backend"].lower().startswith("fsdp")
    r["backend"] = "megatron" if megatron else "fsdp"
    cfg, layout = r["config"], row["train_parallel"].lower()
    for key in ("megatron_tp", "megatron_pp", "megatron_cp", "megatron_ep", "ulysses_sp", "recompute"):
        cfg[key] = None
    if megatron:
        cfg.update({f"megatron_{k}": _degree(layout, k) or 1 for k in ("tp", "pp", "cp", "ep")})
        notes = " ".join(str(row.get(c) or "") for c in ("Other", "Recompute", "train_parallel")).lower()
        cfg["recompute"] = "full" if "full" in notes else None
    else:
        cfg["ulysses_sp"] = _degree(layout, "sp") or 1
        cfg["fsdp_size"] = _degree(layout, "fsdp")  # "sp4fsdp32" on 64 GPUs: two replicas of a 32-GPU shard group
    r["rollout_tp"] = _degree(row["infer_parallel"], "tp") or 1
    r["train_parallel"] = row["train_parallel"]
    named = ROW_MODELS.get(str(_first(row, "model", "mdoel") or "").strip().lower())
    if named and named != r["model"].split(" ")[0]:
        r["model"], r["model_params_b"] = named, None
    actor = _first(row, "micro_bs_actor/dynamic_max_token", "dynamic_max_token(micro_bs_actor)")
    logp = _first(row, "micro_bs_logp/dynamic_max_token", "dynamic_max_token(micro_bs_logp)")
    dynamic = row.get("Dynamic batch")
    if dynamic is not None and dynamic.strip().upper() == "FALSE":
        cfg["use_dynamic_bsz"] = False  # its budget columns do not apply: the template's micro-batches
    elif actor and actor.strip().lower().endswith("k"):
        cfg.update(use_dynamic_bsz=True, ppo_max_token_len_per_gpu=_size(actor),
                   log_prob_max_token_len_per_gpu=_size(logp) or _size(actor))
    elif _size(actor):
        cfg.update(use_dynamic_bsz=False, ppo_micro_batch_size_per_gpu=_size(actor),
                   log_prob_micro_batch_size_per_gpu=_size(logp) or _size(actor))
    if row.get("Offload"):
        cfg["param_offload"] = cfg["optimizer_offload"] = row["Offload"].strip().upper() == "TRUE"
    if _number(row.get("gpu_memory_util")):
        cfg["gpu_memory_utilization"] = _number(row["gpu_memory_util"])
    for key, column in (("max_prompt_length", "max_prompt_len"), ("max_response_length", "max_response_len"),
                        ("train_batch_size", "bs"), ("ppo_mini_batch_size", "mini_bs")):
        if _size(row.get(column)):
            cfg[key] = _size(row[column])
    measured = {k: None for k in r["measured"]}
    measured.update({
        "timing_s/step": _number(row.get("step")), "timing_s/gen": _number(_first(row, "rollout", "rollout/gen")),
        "timing_s/generate_sequences": _number(row.get("generation")),
        "timing_s/update_actor": _number(row.get("update_actor")), "timing_s/old_log_prob": _number(row.get("old_logp")),
        "timing_s/update_weights": _number(row.get("reshard")), "perf/mfu/actor": _number(row.get("MFU")),
        "response_length/mean": _number(row.get("response_length")),
        "perf/throughput": _number(_first(row, "throughput", "Throughput")),
        "which_steps": "table value (representative step)"})
    r["measured"] = measured
    r["derived"] = None
    r["notes"] = f"sibling row of {template['id']}'s table ({table} row {row['number']}), built by tests/sibling_cases.py"
    r["sibling_of"], r["sibling_group"] = template["id"], table
    return r


def log_report(log: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    """One entry of sibling-logs.json or sibling-docs.json as a step-times.json report: its template with the
    entry's settings (config merged; hardware merged, its GPU total recounted; layout, rollout mode, launch script,
    version and date replaced where the entry gives them), its command and its timings, the template's derived
    block and per-step rows dropped."""
    r = copy.deepcopy(template)
    r.update(id=log["id"], url=log["url"], derived=None, per_step=None,
             notes=f"sibling run of {template['id']} ({log['what']}), built by tests/sibling_cases.py",
             sibling_of=template["id"], sibling_group=log["id"].split("/")[0])
    r.update({k: log[k] for k in REPLACED if k in log})
    if "overrides" in log:
        r["overrides"] = list(log["overrides"])
    r["config"] = {**r["config"], **log["config"]}
    hw = r["hardware"] = {**r["hardware"], **log.get("hardware", {})}
    if "nnodes" in log.get("hardware", {}) and "n_gpus_total" not in log["hardware"]:
        hw["n_gpus_total"] = hw["nnodes"] * hw["n_gpus_per_node"]
    r["measured"] = {**{k: None for k in r["measured"]}, **log["measured"]}
    return r


def sibling_cases() -> list[dict[str, Any]]:
    """Every row of the six tables that measured something, as a report (the shown reports' own rows included),
    then every run of sibling-logs.json."""
    shown = {c["id"]: c for c in cases()}
    out = []
    for table, tid in TABLES.items():
        for row in rows(table):
            r = report(table, row, shown[tid])
            if any(v for k, v in r["measured"].items() if k.startswith("timing_s/")):
                out.append(r)
    out += [log_report(log, shown[log["template"]]) for log in json.loads(LOGS.read_text(encoding="utf-8"))["logs"]]
    out += [log_report(row, shown[row["template"]]) for row in json.loads(DOCS.read_text(encoding="utf-8"))["rows"]]
    return out
