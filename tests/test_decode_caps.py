"""Issue 29: a parquet decompression bomb (a few KB of highly compressible strings that decode to 2.5 GiB) is one
clean line, exit 2, under 1 GiB and 10 s in every row reader: validate-dataset, the planner's prompt counter
(wizard.planner.overlong) and the bundle's data/prepare_data.py. Each reader runs in a child process whose own
peak RSS (ru_maxrss) is measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GIB = 1 << 30

MAKE = """
import sys, pyarrow as pa, pyarrow.parquet as pq
s = "a" * (40 << 20)  # 40 MiB, 64 times: 2.5 GiB decoded
arr = pa.DictionaryArray.from_arrays(pa.array([0] * 64, pa.int32()), pa.array([s]))
pq.write_table(pa.table({"prompt": arr, "data_source": pa.array(["x"] * 64)}), sys.argv[1], compression="zstd")
"""

# runs the reader named by argv[1] on argv[2]; prints its exit status and peak RSS as the last line
RUN = """
import json, resource, sys, io, contextlib
which, path = sys.argv[1], sys.argv[2]
out = io.StringIO()
code = 0
try:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        if which == "validate":
            from wizard.cli.app import main
            code = main(["validate-dataset", path])
        elif which == "overlong":
            from wizard.planner.overlong import _rows
            try:
                for _ in _rows(path):
                    pass
            except ValueError as exc:
                print(exc)
                code = 2
        else:
            import runpy
            sys.argv = [which, "--input", path, "--out", sys.argv[3]]
            runpy.run_path(which, run_name="__main__")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (print(exc.code, file=out) or 1)
print(json.dumps({"code": code, "out": out.getvalue(), "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bomb") / "bomb.parquet"
    subprocess.run([sys.executable, "-c", MAKE, str(path)], check=True, timeout=120)
    assert path.stat().st_size < 64 << 10  # a small file
    return path


# Linux keeps a process's peak RSS across fork and exec: a reader started straight from a pytest-xdist worker that
# has imported verl and torch would report the worker's peak. A small wrapper starts the reader and reports the
# reader's own peak (RUSAGE_CHILDREN of the wrapper).
SPAWN = """
import json, resource, subprocess, sys
r = subprocess.run([sys.executable, "-c", *sys.argv[1:]], capture_output=True, text=True, timeout=120)
sys.stderr.write(r.stderr)
if r.returncode == 0:
    result = json.loads(r.stdout.strip().splitlines()[-1])
    result["rss"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps(result))
sys.exit(r.returncode)
"""


def _run(*args: str) -> tuple[dict, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-c", SPAWN, RUN, *args], capture_output=True, text=True, timeout=150, env=env)
    took = time.monotonic() - start
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), took


def _assert_clean(result: dict, took: float) -> None:
    assert result["rss"] < GIB, f"peak RSS {result['rss'] >> 20} MiB"
    assert took < 10, f"{took:.1f} s"
    assert "Traceback" not in result["out"]
    assert "cap per value" in result["out"] or "cap per batch" in result["out"], result["out"][-500:]


def test_validate_dataset_stops_a_bomb(bomb):
    result, took = _run("validate", str(bomb))
    _assert_clean(result, took)
    assert result["code"] == 2
    assert len([line for line in result["out"].splitlines() if line.strip()]) == 1, result["out"]


def test_planner_prompt_counter_stops_a_bomb(bomb):
    result, took = _run("overlong", str(bomb))
    _assert_clean(result, took)
    assert result["code"] == 2


def test_prepare_data_stops_a_bomb(bomb, tmp_path):
    from wizard.intent.answers import make_answers
    import wizard

    shutil_copy = tmp_path / "bomb.parquet"
    shutil_copy.write_bytes(bomb.read_bytes())
    answers = make_answers(dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=24, model="Qwen/Qwen2.5-0.5B-Instruct",
                                prompts_per_step=2, samples_per_prompt=4, updates_per_step=1,
                                dataset=str(shutil_copy), question_field="prompt", answer_field="data_source"))
    bundle = wizard.write_bundle(wizard.render(wizard.plan(answers, base_dir=str(tmp_path))), tmp_path / "b")
    result, took = _run(str(bundle / "data" / "prepare_data.py"), str(shutil_copy), str(tmp_path / "out"))
    _assert_clean(result, took)
    assert result["code"] not in (0, None)
    assert len([line for line in result["out"].splitlines() if line.strip()]) == 1, result["out"]
