"""Sandbox reward rules: reward.sandbox_fusion set so that verl never calls the sandbox, or cannot (VI883-VI885).

verl 0.9.1 (paths under verl/): load_reward_manager binds reward.sandbox_fusion.{url, memory_limit_mb,
max_concurrent} into verl's default scorer only when no custom reward function is configured
(trainer/ppo/reward.py:126-146: `if compute_score is None`); the default scorer sends only data_source codecontests /
apps / codeforces / taco to the sandbox (utils/reward_score/__init__.py:79-94); the client posts with `requests`
(sandbox_fusion/utils.py:call_sandbox_api), which refuses a non-http(s) URL, and every failed call scores the case
as not passed, so a wrong URL trains on all-zero rewards without an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wizard.check.rules.context import Ctx, Facts, local_path
from wizard.check.shellargs import PLACEHOLDER
from wizard.planner.dataprep import CODE_DATA_SOURCES
from wizard.planner.sandbox import redact, url_problem

S = "reward.sandbox_fusion"
_HEAD_BYTES = 1 << 20  # a JSONL file's first row is read from at most this much


def _first_data_source(path: Path) -> str | None:
    """The data_source of a local data file's first row (parquet: its first batch of one row; JSONL: its first
    line); None when it cannot be read here."""
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(path)
            if "data_source" not in pf.schema_arrow.names:
                return None
            for batch in pf.iter_batches(batch_size=1, columns=["data_source"]):
                values = batch.column(0).to_pylist()
                return str(values[0]) if values else None
            return None
        if path.suffix == ".jsonl":
            with path.open("rb") as fh:
                row: Any = json.loads(fh.readline(_HEAD_BYTES))
            return str(row["data_source"]) if isinstance(row, dict) and "data_source" in row else None
    except Exception:  # noqa: BLE001 - unreadable here: the data rules (VI870) speak about it
        return None
    return None


def _train_sources(c: Ctx) -> list[str] | None:
    value = c.v("data.train_files")
    if c.unknown("data.train_files") or value is None:
        return None
    found = []
    for path in ([value] if isinstance(value, str) else value if isinstance(value, list) else []):
        local = local_path(c, path) if isinstance(path, str) and PLACEHOLDER not in path else None
        ds = _first_data_source(local) if local is not None and local.is_file() else None
        if ds is None:
            return None
        found.append(ds)
    return found or None


def rule_sandbox(c: Ctx, f: Facts) -> None:
    url = c.v(f"{S}.url")
    if c.unknown(f"{S}.url") or not isinstance(url, str) or not url or PLACEHOLDER in url:
        return
    fn = c.v("reward.custom_reward_function.path")
    if isinstance(fn, str) and fn and not c.unknown("reward.custom_reward_function.path"):
        c.add("VI883", "warning", (f"{S}.url", "reward.custom_reward_function.path"),
              f"{S}.url is set but so is a custom reward function ({fn}): verl binds the sandbox only into its "
              "default scorer (trainer/ppo/reward.py: `if compute_score is None`), so your function gets no "
              "sandbox_fusion_url and the sandbox is never called by verl",
              "remove reward.custom_reward_function.path to score code with verl's sandbox scorer, or call "
              "verl.utils.reward_score.sandbox_fusion.compute_score(url, ...) from your function")
    why = url_problem(url)
    if why is not None:
        scheme_bad = not redact(url).lower().startswith(("http://", "https://"))
        c.add("VI884", "error" if scheme_bad else "warning", (f"{S}.url",), why.replace("sandbox_url=", f"{S}.url="),
              "give SandboxFusion's run_code URL (http://HOST:8080/run_code) without credentials: verl's client "
              "sends none, protect the service by network policy" if not scheme_bad else
              "verl's client posts with requests: use http://HOST:8080/run_code (a failed call scores 0, silently)")
    sources = _train_sources(c)
    if sources is not None and not any(ds in CODE_DATA_SOURCES for ds in sources):
        c.add("VI885", "warning", (f"{S}.url", "data.train_files"),
              f"{S}.url is set but the training rows' data_source is {', '.join(sorted(set(sources)))}: verl's "
              f"default scorer sends only {', '.join(CODE_DATA_SOURCES)} to the sandbox, so it is never called",
              f"write data_source as one of {', '.join(CODE_DATA_SOURCES)} in the code rows, or remove {S}.url")
