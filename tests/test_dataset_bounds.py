"""validate-dataset and check read data files in bounded memory: JSONL line by line with each line capped
(a file without newlines is never held whole), parquet a batch at a time with the system allocator, 8 bytes a
row for duplicate detection (no sorted copy of the column), prompt lengths as a histogram whose percentiles
equal numpy's on the full column."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np

from conftest import ROOT
from wizard._io import LineTooLong, bounded_lines, count_rows


def test_bounded_lines_skips_an_overlong_line_without_keeping_it():
    data = b'{"a": 1}\n' + b"x" * 5000 + b'\n{"b": 2}\n' + b"y" * 5000
    out = list(bounded_lines(io.BytesIO(data), max_line=1000))
    assert out[0] == b'{"a": 1}' and isinstance(out[1], LineTooLong) and out[2] == b'{"b": 2}'
    assert isinstance(out[3], LineTooLong) and len(out) == 4


def test_count_rows_stops_early_and_gives_up_on_huge_lines():
    assert count_rows(io.BytesIO(b"a\n\n b \nc"), enough=10) == 3
    assert count_rows(io.BytesIO(b"a\n" * 1000), enough=5) == 5
    assert count_rows(io.BytesIO(b"z" * (3 << 20)), enough=2, max_bytes=1 << 20) is None


def test_histogram_percentiles_equal_numpys(tmp_path):
    from wizard.env.datasets import Options, _FileCheck

    rng = np.random.default_rng(0)
    check = _FileCheck(str(tmp_path / "x.jsonl"), Options())
    lengths = rng.integers(1, 5000, size=20_000)
    for start in range(0, len(lengths), 1234):
        check._count_lengths(lengths[start:start + 1234])
    for q in (50, 90, 99):
        assert check.percentile(q) == int(np.percentile(lengths, q, method="higher"))


def _peak_kb(code: str, *args: str) -> tuple[int, str]:
    full = code + "\nprint(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')))\n"
    r = subprocess.run([sys.executable, "-c", full, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    return int(lines[-1]), "\n".join(lines[:-1])


def test_a_jsonl_without_newlines_is_not_read_whole(tmp_path):
    big = tmp_path / "train.jsonl"
    row = json.dumps({"prompt": [{"role": "user", "content": "hi"}], "data_source": "openai/gsm8k",
                      "reward_model": {"style": "rule", "ground_truth": "1"}})
    with open(big, "w") as fh:
        fh.write(row + "\n")
        fh.write('{"prompt": "' + "x" * (200 << 20) + "\n")  # a 200 MiB line
        fh.write(row + "\n")
    code = ("import sys, json\nfrom wizard.env.datasets import validate, Options\n"
            "r = validate([sys.argv[1]], Options())\n"
            "print(json.dumps([(f.rule, f.count, [e[1] for e in f.examples]) for f in r.findings]))")
    peak, out = _peak_kb(code, str(big))
    findings = json.loads(out)
    assert any(rule == "VI520" and any("longer than" in e for e in ex) for rule, _, ex in findings), findings
    assert peak < 300 * 1024, peak  # the 200 MiB line was never held
    code = ("import sys\nfrom pathlib import Path\nfrom wizard.check.rules.files import _count_rows\n"
            "print(_count_rows(Path(sys.argv[1]), 5))")
    peak, out = _peak_kb(code, str(big))
    assert out.strip() == "3" and peak < 200 * 1024, (out, peak)  # streamed in 1 MiB pieces


def test_duplicates_are_found_exactly_across_blocks(tmp_path, monkeypatch):
    """Planted repeats across hash-store blocks (a small block size): counted and located as written."""
    from wizard.env import datasets as ds

    monkeypatch.setattr(ds._HashStore, "BLOCK", 64)
    path = tmp_path / "train.jsonl"
    rows = []
    for i in range(500):
        q = f"question {i % 450}"  # rows 450..499 repeat rows 0..49
        rows.append(json.dumps({"prompt": [{"role": "user", "content": q}], "data_source": "openai/gsm8k",
                                "reward_model": {"style": "rule", "ground_truth": "1"}}))
    path.write_text("\n".join(rows) + "\n")
    report = ds.validate([str(path)], ds.Options())
    (dup,) = [f for f in report.findings if f.rule == "VI529"]
    assert dup.count == 50
    assert dup.examples[0] == (450, "same prompt as row 0")
