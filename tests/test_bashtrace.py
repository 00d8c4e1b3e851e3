"""`check` reads a launch script as bash really expands it (wizard.check.bashtrace): bash runs the script in
a sandbox (read-only filesystem, fresh /tmp, no network, own process namespace) with the launcher stubbed.

Proof from an independent source: verl's own 79 launch scripts (tests/data/reference/verl-main-scripts),
each with `traced` — the argv bash passed to main_ppo when verl's scripts were run under bash with
python3/uv/hf/ray replaced by recording stubs. The reader must reproduce it, up to what differs by
construction: the date a script stamps into a run name, the sandbox folder (`<tmp>`), and values the
tracer's environment supplied where our trace marks them as taken from the environment (UNSET_<NAME>).

And the sandbox must hold: a script full of rm, touch, redirections, kill and network calls changes nothing.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REFERENCE
from wizard.check import bashtrace
from wizard.check.lint import check

SCRIPTS = REFERENCE / "verl-main-scripts"
INDEX = json.loads((SCRIPTS / "index.json").read_text(encoding="utf-8"))["scripts"]
# RW035 reads INFER_BACKEND (line 9) before it sets its default (line 10): under `set -u` it needs the variable
# from the environment; verl's tracer ran the default GPU path, INFER_BACKEND=vllm.
TRACER_ENV = {"RW035": {"INFER_BACKEND": "vllm"}}



def _normal(text: str) -> str:
    return re.sub(r"20\d{6}_\d{4}", "<date>", text)


def _matches(ours: str, theirs: str) -> bool:
    """ours == theirs, where each UNSET_<NAME> of ours stands for any value the tracer's environment gave."""
    pattern = "".join(".+?" if part.startswith("UNSET_") else re.escape(part)
                      for part in re.split(r"(UNSET_[A-Za-z0-9_]+)", _normal(ours)))
    return re.fullmatch(pattern, _normal(theirs), flags=re.S) is not None


def test_the_sandbox_is_available_here():
    assert bashtrace.available(), "bubblewrap (apt-get install bubblewrap) and user namespaces are needed"


@pytest.mark.parametrize("entry", INDEX, ids=lambda e: e["id"])
def test_verls_scripts_are_read_as_bash_ran_them(entry, tmp_path):
    # laid out like verl's tracer did: <tmp>/sandbox/run_<ID>/<script>
    folder = tmp_path / "sandbox" / f"run_{entry['id']}"
    folder.mkdir(parents=True)
    script = folder / Path(entry["file"]).name
    shutil.copy(SCRIPTS / entry["file"], script)
    env = {"HOME": "$HOME", **TRACER_ENV.get(entry["id"], {})}
    traced = bashtrace.trace(script, env)
    assert traced.ok, (traced.reason, traced.error)
    assert traced.module == entry["traced"]["module"]
    ours = [a.replace(str(tmp_path), "<tmp>") for a in traced.args]
    theirs = entry["traced"]["args"]
    assert len(ours) == len(theirs), (ours, theirs)
    wrong = [(o, t) for o, t in zip(ours, theirs) if not _matches(o, t)]
    assert not wrong, wrong


def test_check_uses_bashs_reading(tmp_path):
    """The uv launch wrapper of verl's scripts: arrays assigned inside an `if` (the static reader alone
    reported them as one UNSET_RAY placeholder) reach check as bash expands them."""
    entry = next(e for e in INDEX if e["path"].endswith("examples/grpo_trainer/run_glm4_1v_9b_fsdp.sh"))
    script = tmp_path / "run.sh"
    shutil.copy(SCRIPTS / entry["file"], script)
    report = check(str(script), env={"HOME": "$HOME"}, defaults="snapshot")
    keys = [o.partition("=")[0] for o in report.source.overrides]
    assert "ray_kwargs.ray_init.runtime_env.py_executable" in keys
    assert not any(k.startswith("UNSET_") for k in keys)
    assert not [f.problem.line() for f in report.errors if "UNSET_RAY" in f.problem.line()]
    assert any("read as bash runs it" in n for n in report.source.extraction.notes)


def test_without_the_sandbox_the_static_reader_answers(tmp_path, monkeypatch):
    script = tmp_path / "run.sh"
    script.write_text("N=4\npython3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$N data.train_files=$DATA/x\n")
    monkeypatch.setenv("VERL_INIT_NO_SANDBOX", "1")
    report = check(str(script), env={}, defaults="snapshot")
    assert "trainer.n_gpus_per_node=4" in report.source.overrides
    assert "data.train_files=UNSET_DATA/x" in report.source.overrides
    assert not any("read as bash runs it" in n for n in report.source.extraction.notes)


def test_values_from_the_environment_stay_marked(tmp_path):
    """bash expands an unset variable to nothing; check keeps saying the value comes from the environment."""
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo data.train_files=$DATA/x trainer.nnodes=${NODES:?set NODES}\n")
    traced = bashtrace.trace(script, {})
    assert traced.ok and traced.needed == ["NODES"]
    report = check(str(script), env={}, defaults="snapshot")
    assert "data.train_files=UNSET_DATA/x" in report.source.overrides
    assert "trainer.nnodes=UNSET_NODES" in report.source.overrides


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802
        _Recorder.hits.append(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):  # noqa: D401
        pass


def test_a_hostile_script_changes_nothing(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sentinel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        url = f"http://127.0.0.1:{server.server_port}/pwned"
        script = tmp_path / "evil.sh"
        script.write_text(f"""#!/bin/bash
rm -rf {victim}
/bin/rm -rf {victim}/keep.txt
command rm -f {victim}/keep.txt
\\rm -f {victim}/keep.txt
touch {tmp_path}/touched
echo owned > {tmp_path}/redirected
echo owned >> {victim}/keep.txt
cp /etc/hostname {tmp_path}/copied
/usr/bin/env touch {tmp_path}/touched-too
kill -9 {sentinel.pid}
curl -s {url} || true
python3 -c "import urllib.request; urllib.request.urlopen('{url}')"
exec 3>{tmp_path}/fd3
bash -c 'echo x > {tmp_path}/nested'
python3 -m verl.trainer.main_ppo trainer.nnodes=1
""")
        before = sorted(p.name for p in tmp_path.iterdir())
        traced = bashtrace.trace(script, {})
        report = check(str(script), env={}, defaults="snapshot")
        time.sleep(0.2)
        assert traced.ok and traced.args == ["trainer.nnodes=1"]
        assert "trainer.nnodes=1" in report.source.overrides
        assert (victim / "keep.txt").read_text() == "precious"
        assert sorted(p.name for p in tmp_path.iterdir()) == before
        assert sentinel.poll() is None  # still alive: the script could not signal it
        assert _Recorder.hits == []  # no request left the sandbox
    finally:
        sentinel.kill()
        server.shutdown()


@pytest.mark.slow
def test_runaway_scripts_are_bounded(tmp_path):
    cases = {
        "loop.sh": "while true; do :; done\n",
        "grow.sh": 'X=x; for i in $(seq 40); do X="$X$X"; done\npython3 -m verl.trainer.main_ppo a=1\n',
        "spew.sh": "set -x\nwhile true; do echo spam; done\n",
    }
    for name, body in cases.items():
        script = tmp_path / name
        script.write_text(body)
        started = time.monotonic()
        traced = bashtrace.trace(script, {}, timeout=1.5)  # the mechanism; the default bound is asserted below
        elapsed = time.monotonic() - started
        assert not traced.ok, name
        assert elapsed < 1.5 + 20, (name, elapsed)  # generous watchdog, not a speed target
    assert bashtrace.TIMEOUT_S <= 10 and bashtrace.MEMORY_BYTES <= 1 << 30
    assert not list(tmp_path.glob("*.out"))


def test_the_stub_records_only_the_launch(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text('LAUNCH=(uv run --frozen python3)\n"${LAUNCH[@]}" -m verl.trainer.main_ppo "a=1 2" b=$(date +%Y)\n')
    traced = bashtrace.trace(script, {})
    assert traced.module == "verl.trainer.main_ppo"
    assert traced.args[0] == "a=1 2" and re.fullmatch(r"b=\d{4}", traced.args[1])


ACCEPTED = [e for e in INDEX if e["verl_0_9_1_verdict"]["result"] == "ACCEPTED"]
REJECTED = [e for e in INDEX if e["verl_0_9_1_verdict"]["result"] != "ACCEPTED"]


def _verls_key(message: str) -> str | None:
    """The key verl 0.9.1's own error names (Hydra's override/append messages, a dataclass field, a path)."""
    m = re.search(r"(?:override|at) '([\w.]+)'|([\w.]+) does not exist|argument '(\w+)'|Could not find '(\w+)/", message)
    return next((g for g in m.groups() if g), None) if m else None


def _allowed(entry: dict) -> set[str]:
    """Errors true of a script whose config verl accepts and that then stops at its first step: the same
    allowances as verl's example configs (tests/test_check_examples.py ALLOWED_ERRORS, each with its reason)."""
    from test_check_examples import ALLOWED_ERRORS

    name = entry["file"].rsplit("verl-project__verl__examples__", 1)[-1].replace("__", "/")
    return ALLOWED_ERRORS.get(name, set())


@pytest.mark.parametrize("entry", ACCEPTED, ids=lambda e: e["id"])
def test_no_error_on_scripts_verl_accepts(entry):
    report = check(str(SCRIPTS / entry["file"]), env={"HOME": "$HOME"}, defaults="snapshot")
    allowed = _allowed(entry)
    assert not [f for f in report.errors if f.problem.rule not in allowed], [f.problem.line() for f in report.errors]
    assert not allowed or allowed <= {f.problem.rule for f in report.errors}  # an allowance still matches


@pytest.mark.parametrize("entry", REJECTED, ids=lambda e: e["id"])
def test_scripts_verl_rejects_are_flagged_for_the_same_key(entry):
    verdict = entry["verl_0_9_1_verdict"]
    report = check(str(SCRIPTS / entry["file"]), env={"HOME": "$HOME"}, defaults="snapshot")
    key = _verls_key(verdict["message"])
    if key is None:  # a worker-time assert: verl names no key, only the arithmetic
        assert report.errors, verdict
        return
    flagged = {k for f in report.findings if f.problem.severity in ("error", "warning") for k in f.problem.keys}
    assert any(k == key or k.endswith("." + key) or k.startswith(key) for k in flagged), (key, sorted(flagged))


def test_the_split_is_meaningful():
    assert len(ACCEPTED) >= 40 and len(REJECTED) >= 20


def test_retries_share_one_deadline(monkeypatch, tmp_path):
    """A script that needs a new variable on every try (bash's `line N: VAR: unbound variable`) cannot amplify the
    per-try timeout: all tries together stop at bashtrace.TOTAL_S (scaled with the caller's timeout)."""
    import itertools
    import time

    from wizard.check import bashtrace

    counter = itertools.count()
    tries: list[float] = []

    def slow_try(script, env, workdir, timeout):
        tries.append(timeout)
        time.sleep(min(timeout, 0.25))
        return bashtrace.Traced(reason="stopped", error=f"x.sh: line 1: V{next(counter)}: unbound variable")

    monkeypatch.setattr(bashtrace, "_trace_once", slow_try)
    monkeypatch.setattr(bashtrace, "available", lambda: True)
    start = time.monotonic()
    result = bashtrace.trace(tmp_path / "x.sh", {}, timeout=0.5)  # deadline: TOTAL_S × 0.5 / TIMEOUT_S = 1 s
    assert time.monotonic() - start < 1.0 + 0.5
    assert len(tries) < bashtrace.RETRIES + 1  # stopped before every retry was spent
    assert "in all" in result.reason and result.needed
