#!/usr/bin/env python3
"""Throughput and peak memory of `verl-init validate-dataset` on generated parquet files.

    python benchmarks/bench_validate_dataset.py                       # 200k and 800k rows, schema checks
    python benchmarks/bench_validate_dataset.py --tokenizer           # + chat template and token counts (tiny tokenizer)
    python benchmarks/bench_validate_dataset.py --rows 2000000 --keep # one size; keep the file

Each file is written in chunks (the generator never holds it whole) to a temporary folder, then
validated in a fresh subprocess; peak RSS is that subprocess's maximum resident set size. If memory
is bounded, peak RSS stays nearly flat while the file grows (only 12 bytes per row are kept: a
prompt hash for duplicate/overlap checks and a prompt length for the percentiles).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import record  # benchmarks/ is on sys.path when a script here runs

ROOT = Path(__file__).resolve().parent.parent


def write_parquet(path: Path, rows: int, chunk: int = 50_000) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    try:
        for start in range(0, rows, chunk):
            batch = []
            for i in range(start, min(rows, start + chunk)):
                a, b = i % 997, i // 997
                question = f"Row {i}: a shop sells {a} pens on Monday and {b} pens on Tuesday. How many pens in total?"
                batch.append({
                    "data_source": "openai/gsm8k",
                    "prompt": [{"role": "user", "content": question + ' Let\'s think step by step and output the final answer after "####".'}],
                    "ability": "math",
                    "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                    "extra_info": {"split": "train", "index": i},
                })
            table = pa.Table.from_pylist(batch)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


CHILD = """
import json, resource, sys, time
from wizard.env.datasets import Options, validate, load_tokenizer
path, batch_rows, tok = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tokenizer = load_tokenizer(tok) if tok else None
t0 = time.perf_counter()
report = validate([path], Options(tokenizer=tokenizer, batch_rows=batch_rows, max_prompt_length=512))
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "rows": report.files[0].rows, "ok": report.ok,
                  "findings": [f.rule for f in report.findings],
                  # VmHWM: this program's own peak (ru_maxrss would keep the parent's from before exec)
                  "maxrss_kb": next((int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")),
                                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)}))
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="200000,800000", help="comma-separated row counts (default 200000,800000)")
    p.add_argument("--batch-rows", type=int, default=2048, help="rows per parquet batch (validate-dataset's default)")
    p.add_argument("--tokenizer", action="store_true", help="also apply the chat template and count tokens")
    p.add_argument("--keep", action="store_true", help="keep the generated files (prints where)")
    ns = p.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-validate-"))
    tok = ""
    if ns.tokenizer:
        sys.path.insert(0, str(ROOT))
        from wizard.smoketest.tiny import build_tokenizer

        tok = str(tmp / "tokenizer")
        build_tokenizer(tok)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    print(f"validate-dataset benchmark ({'schema + tokens' if tok else 'schema checks, no tokenizer'}; "
          f"batches of {ns.batch_rows} rows; {tmp})")
    print(f"{'rows':>10}  {'file MB':>8}  {'seconds':>8}  {'rows/s':>10}  {'peak RSS MB':>11}")
    try:
        for rows in [int(x) for x in ns.rows.split(",") if x.strip()]:
            path = tmp / f"bench-{rows}.parquet"
            write_parquet(path, rows)
            r = subprocess.run([sys.executable, "-c", CHILD, str(path), str(ns.batch_rows), tok],
                               capture_output=True, text=True, env=env)
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                return 1
            out = json.loads(r.stdout.strip().splitlines()[-1])
            assert out["rows"] == rows and out["ok"], out
            rss_mb = out["maxrss_kb"] / 1024  # Linux reports kilobytes
            record(f"validate-dataset {rows} rows", out["seconds"], None)
            print(f"{rows:>10}  {path.stat().st_size / 2**20:>8.1f}  {out['seconds']:>8.2f}  "
                  f"{rows / out['seconds']:>10.0f}  {rss_mb:>11.1f}")
            if not ns.keep:
                path.unlink()
    finally:
        if not ns.keep:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
