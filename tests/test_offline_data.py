"""The built-in offline dataset: generated deterministically, correct, scored by verl's own gsm8k scorer,
shipped in CPU plans' bundles, and used -- saying so -- when the hub is unreachable, so that
`verl-init --profile cpu-smoke --out b && verl-init smoke b` passes offline (issue 14, item 5)."""

from __future__ import annotations

import ast
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import wizard
from conftest import ROOT
from wizard.intent.answers import make_answers
from wizard.resources import offline_data

FALLBACK = "hub unreachable: using the built-in offline dataset (320 rows) instead of openai/gsm8k"
CPU = dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=16, gpu_type="cpu", model="./tiny-model", model_params_b=0.001,
           dataset="gsm8k", max_prompt_length=128, max_response_length=64, prompts_per_step=8, samples_per_prompt=4,
           updates_per_step=2, total_steps=1, save_freq=-1, test_freq=-1)


def closed_port() -> int:
    """A local TCP port nothing listens on: a hub pointed there fails at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def offline_env(how: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    if how == "offline-mode":
        env["HF_HUB_OFFLINE"] = "1"
    else:  # a hub that refuses connections: the reachability test must notice, quickly
        env["HF_ENDPOINT"] = f"http://127.0.0.1:{closed_port()}"
    return env


class _AnswersEverything(http.server.BaseHTTPRequestHandler):
    """A hub endpoint that says yes to the reachability test and then serves nothing usable."""

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


def bundle(tmp_path: Path, **changes) -> Path:
    plan = wizard.plan(make_answers({**CPU, **changes}), base_dir=str(tmp_path))
    return wizard.write_bundle(wizard.render(plan), tmp_path / "bundle")


def prepare(b: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(b / "data" / "prepare_data.py"), "--out", str(b / "out"), *args],
                          capture_output=True, text=True, timeout=60, env=env, cwd=b)


def rows(split: str) -> list[dict]:
    return [json.loads(line) for line in (offline_data() / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]


def test_the_committed_files_are_what_the_script_generates(tmp_path):
    script = ROOT / "scripts" / "make_offline_dataset.py"
    r = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], check=True, timeout=60)
    for name in ("train.jsonl", "test.jsonl"):  # twice the same bytes: deterministic
        assert (tmp_path / name).read_bytes() == (offline_data() / name).read_bytes()
    (tmp_path / "test.jsonl").write_text("{}\n", encoding="utf-8")
    r = subprocess.run([sys.executable, str(script), "--check", "--out", str(tmp_path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "test.jsonl" in r.stderr


def _calc(expr: str) -> int:
    """`a+b`, `a*b`, ... of the calculator annotations, evaluated from the syntax tree (no eval)."""
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b}
    node = ast.parse(expr, mode="eval").body
    assert isinstance(node, ast.BinOp) and isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant)
    value = ops[type(node.op)](node.left.value, node.right.value)
    assert value == int(value)
    return int(value)


def test_rows_are_gsm8k_shaped_correct_and_unique():
    train, test = rows("train"), rows("test")
    assert (len(train), len(test)) == (256, 64)
    questions = [r["question"] for r in train + test]
    assert len(set(questions)) == len(questions)  # unique, so no test question is in train
    for row in train + test:
        assert set(row) == {"question", "answer"}
        steps = re.findall(r"<<([^=]+)=(\d+)>>(\d+)", row["answer"])
        assert steps, row
        for expr, annotated, written in steps:  # every step's arithmetic is right
            assert _calc(expr) == int(annotated) == int(written), row
        final = re.search(r"\n#### (\d+)$", row["answer"])
        assert final and int(final.group(1)) == int(steps[-1][1]), row


@pytest.mark.verl
def test_verls_gsm8k_scorer_scores_every_row():
    from verl.utils.reward_score import default_compute_score, gsm8k

    for row in rows("train") + rows("test"):
        truth = re.search(r"#### (\-?[0-9\.\,]+)", row["answer"]).group(1)  # verl's gsm8k preprocessing
        assert gsm8k.compute_score(row["answer"], truth) == 1.0
        assert default_compute_score("openai/gsm8k", f"So {truth}.\n#### {truth}", truth) == 1.0
        assert default_compute_score("openai/gsm8k", f"#### {int(truth) + 1}", truth) == 0.0


def test_the_cpu_smoke_bundle_ships_the_offline_data(tmp_path):
    b = tmp_path / "b"
    plan = wizard.plan(wizard.load_profile("cpu-smoke"), base_dir=str(tmp_path))
    wizard.write_bundle(wizard.render(plan), b)
    for name in ("train.jsonl", "test.jsonl"):
        assert (b / "data" / "offline" / name).read_bytes() == (offline_data() / name).read_bytes()
    assert "OFFLINE_DIR = 'offline'" in (b / "data" / "prepare_data.py").read_text()


@pytest.mark.parametrize("how", ["offline-mode", "closed-port"])
def test_prepare_data_falls_back_fast_and_says_so(how, tmp_path):
    import pyarrow.parquet as pq

    b = bundle(tmp_path)
    started = time.monotonic()
    r = prepare(b, offline_env(how))
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - started < 20  # bounded: one 3-second reachability test, no retries
    assert f"prepare_data: {FALLBACK}" in r.stdout
    assert ("HF_HUB_OFFLINE=1" if how == "offline-mode" else "Connection refused") in r.stdout
    train = pq.read_table(b / "out" / "train.parquet").to_pylist()
    val = pq.read_table(b / "out" / "val.parquet").to_pylist()
    assert (len(train), len(val)) == (256, 64)
    assert {r["data_source"] for r in train + val} == {"openai/gsm8k"}  # verl's gsm8k scorer
    first = rows("train")[0]
    assert train[0]["extra_info"]["question"] == first["question"]
    assert train[0]["reward_model"]["ground_truth"] == first["answer"].rsplit("#### ", 1)[1]


def test_a_download_that_fails_after_the_hub_answered_falls_back_too(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AnswersEverything)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = offline_env("closed-port")
        env["HF_ENDPOINT"] = f"http://127.0.0.1:{server.server_address[1]}"
        r = prepare(bundle(tmp_path), env)
    finally:
        server.shutdown()
    assert r.returncode == 0, r.stderr
    assert FALLBACK in r.stdout and "the download failed" in r.stdout


def test_a_gpu_plan_never_swaps_its_data_unasked(tmp_path):
    b = bundle(tmp_path, gpu_type="A10", gpu_memory_gb=24)
    assert not (b / "data" / "offline").exists()
    assert "OFFLINE_DIR = None" in (b / "data" / "prepare_data.py").read_text()
    r = prepare(b, offline_env("offline-mode"))
    assert r.returncode != 0 and "built-in" not in r.stdout + r.stderr
    r = prepare(b, offline_env("offline-mode"), "--offline-dir", str(offline_data()))  # asked for: it does
    assert r.returncode == 0 and FALLBACK in r.stdout, r.stderr


def test_offline_dir_is_for_gsm8k_only(tmp_path):
    b = bundle(tmp_path, dataset="math")
    r = prepare(b, offline_env("offline-mode"), "--offline-dir", str(offline_data()))
    assert r.returncode == 2 and "--offline-dir" in r.stderr and "gsm8k only" in r.stderr


@pytest.mark.verl
@pytest.mark.slow
def test_cpu_smoke_profile_passes_with_the_hub_unreachable(tmp_path):
    """README's laptop path, offline: render the profile and smoke it with no --data-dir."""
    env = offline_env("closed-port")
    r = subprocess.run([sys.executable, "-m", "wizard.cli.app", "--profile", "cpu-smoke", "--out", "b"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "wizard.cli.app", "smoke", "b"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "smoke PASSED" in r.stdout
    data_line = next(line for line in r.stdout.splitlines() if "] data " in line)
    assert FALLBACK in data_line and "Connection refused" in data_line
    assert not (tmp_path / "b" / "data" / "train.parquet").exists()  # the smoke prepared into its own folder


@pytest.mark.verl
@pytest.mark.slow
def test_smoke_of_a_gpu_plan_uses_the_packaged_rows_offline(tmp_path):
    """A GPU plan's bundle ships no offline rows; the smoke (a pipeline check) lends it verl-init's own."""
    b = bundle(tmp_path, gpu_type="A10", gpu_memory_gb=24)
    from wizard.smoketest.run import SmokeOptions

    report = wizard.smoke(b, options=SmokeOptions(engine="cpu"))
    assert report.ok, report.log_tail[-3000:]
    assert FALLBACK in report.data["source"]
