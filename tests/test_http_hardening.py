"""Every Ray dashboard call is bounded and keeps secrets (issue 13, F1/F2/F13): `check --mode cluster`, the
wizard's probe, `doctor` and the rendered `ray/submit.sh`, against hostile HTTP servers on 127.0.0.1.

- a dashboard that redirects (302/307) to another origin: that origin never sees Ray's token;
- a dashboard that drips one byte every 0.5 s, and one whose body never ends: each command ends with a clear
  error long before the watchdog, in bounded memory (max RSS of the command's processes ≤ 300 MB);
- RAY_AUTH_TOKEN_PATH at a FIFO or at /dev/zero: refused by name, fast;
- RAY_ADDRESS with user:password: the password never appears in any output.

Every command runs in a subprocess under a wrapper that kills it at the watchdog and reports the largest
resident set of its processes (getrusage RUSAGE_CHILDREN), with an address-space limit so that a runaway
reader cannot take the machine with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_cluster_crd import cluster_files

import wizard

CODE = Path(wizard.__file__).resolve().parent.parent  # the checkout whose wizard these tests import
VENV_BIN = Path(sys.executable).parent
TOKEN = "vi-secret-token-5f3c9a0e1d2b4c6a8e7f"
PASSWORD = "pw-Zq8xK3vT"
WATCHDOG_S = 30  # the hostile servers keep going for 120 s
MAX_RSS_MB = 300
PROBE = ("import os\nfrom wizard.env.probe import probe_ray_cluster\nr = probe_ray_cluster(os.environ)\n"
         "print(r.url, r.origin)\nprint(r.describe())\nfor p in r.findings():\n    print(p.line())\n")
WRAPPER = r"""
import json, os, resource, signal, subprocess, sys, time
cmd, env, cwd, limit = json.loads(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a runaway reader stops at 4 GiB, not at the machine's
start = time.monotonic()
proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, start_new_session=True)
try:
    out, err = proc.communicate(timeout=limit)
    timed_out = False
except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate()
    timed_out = True
try:
    os.killpg(proc.pid, signal.SIGKILL)  # nothing of it outlives the run
except ProcessLookupError:
    pass
print(json.dumps({"rc": proc.returncode, "timed_out": timed_out, "seconds": time.monotonic() - start,
                  "out": out.decode("utf-8", "replace"), "err": err.decode("utf-8", "replace"),
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


# --- local servers ------------------------------------------------------------------------------------------


class Server:
    """An HTTP server on 127.0.0.1 in a thread; `behaviour(handler, server)` answers each GET; `seen` records every
    request's path and headers."""

    def __init__(self, behaviour: Callable[[BaseHTTPRequestHandler, Server], None]):
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append((self.path, dict(self.headers.items())))
                try:
                    behaviour(self, outer)
                except OSError:  # the client went away
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def serve() -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(behaviour: Callable[[BaseHTTPRequestHandler, Server], None]) -> Server:
        servers.append(Server(behaviour))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def _json(h: BaseHTTPRequestHandler, doc: Any, status: int = 200) -> None:
    body = json.dumps(doc).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def fake_ray(h: BaseHTTPRequestHandler, _s: Server) -> None:
    """A Ray dashboard with one alive 4-CPU node."""
    if h.path.startswith("/api/version"):
        _json(h, {"ray_version": "2.60.0", "version": "5"})
    elif h.path.startswith("/api/v0/nodes"):
        _json(h, {"data": {"result": {"result": [{"node_id": "n1", "node_ip": "127.0.0.1", "state": "ALIVE",
                                                  "is_head_node": True, "resources_total": {"CPU": 4}}]}}})
    elif h.path.startswith("/api/cluster_status"):
        _json(h, {"data": {"clusterStatus": {"loadMetricsReport": {"usage": {}}}}})
    else:
        _json(h, {}, 404)


def wants_token(h: BaseHTTPRequestHandler, _s: Server) -> None:
    _json(h, {"error": "unauthorized"}, 401)


def redirect_to(target: Server, code: int) -> Callable[[BaseHTTPRequestHandler, Server], None]:
    """401 without a token (Ray's token authentication); with one, a redirect to `target` (another origin)."""

    def behaviour(h: BaseHTTPRequestHandler, _s: Server) -> None:
        if "Authorization" not in h.headers:
            wants_token(h, _s)
            return
        h.send_response(code)
        h.send_header("Location", target.url + h.path)
        h.send_header("Content-Length", "0")
        h.end_headers()

    return behaviour


def drip(h: BaseHTTPRequestHandler, s: Server) -> None:
    """Headers at once, then one byte of a 1 MB body every 0.5 s, for up to 120 s."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(10**6))
    h.end_headers()
    end = time.monotonic() + 120
    while not s.stop.is_set() and time.monotonic() < end:
        h.wfile.write(b" ")
        h.wfile.flush()
        s.stop.wait(0.5)


def endless(h: BaseHTTPRequestHandler, s: Server) -> None:
    """A body without a length that never ends (until the client leaves)."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.end_headers()
    chunk = b"[" * 65536
    while not s.stop.is_set():
        h.wfile.write(chunk)


# --- the commands -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cluster: ray bundle (ray/submit.sh), rendered by the wizard under test."""
    from wizard.renderer.writer import write_bundle

    out = tmp_path_factory.mktemp("net") / "b"
    write_bundle(cluster_files("ppo-16gpu"), out)
    return out


@pytest.fixture()
def base_env(tmp_path: Path) -> dict[str, str]:
    """No RAY_* from the caller's shell, an empty home (no ~/.ray/auth_token), a `ray` stand-in on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "CUDA_VISIBLE_DEVICES"}
    home = tmp_path / "home"
    home.mkdir()
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "ray").write_text("#!/usr/bin/env bash\necho \"fake ray $*\"\nexit 0\n")
    (fake_bin / "ray").chmod(0o755)
    env.update(HOME=str(home), PYTHONPATH=str(CODE), PATH=f"{fake_bin}{os.pathsep}{VENV_BIN}{os.pathsep}{env['PATH']}")
    return env


def command(name: str, bundle: Path, address: str | None) -> tuple[list[str], dict[str, str]]:
    """argv, and the env entries that carry the address (None: the caller's env already does)."""
    py = sys.executable
    if name == "check":
        return [py, "-m", "wizard.cli.app", "check", "--mode", "cluster", str(bundle),
                *(["--address", address] if address else [])], {}
    if name == "check-json":
        return [py, "-m", "wizard.cli.app", "check", "--mode", "cluster", str(bundle), "--json",
                *(["--address", address] if address else [])], {}
    if name == "probe":
        return [py, "-c", PROBE], ({"RAY_API_SERVER_ADDRESS": address} if address else {})
    if name == "doctor":
        return [py, "-m", "wizard.cli.app", "doctor"], ({"RAY_API_SERVER_ADDRESS": address} if address else {})
    if name == "doctor-json":
        return [py, "-m", "wizard.cli.app", "doctor", "--json"], ({"RAY_API_SERVER_ADDRESS": address} if address else {})
    if name == "submit":
        return ["bash", str(bundle / "ray" / "submit.sh"), *(["--address", address] if address else [])], {}
    raise AssertionError(name)


def run(name: str, bundle: Path, address: str | None, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    argv, extra = command(name, bundle, address)
    job = json.dumps([argv, {**env, **extra}, str(cwd), WATCHDOG_S])
    r = subprocess.run([sys.executable, "-c", WRAPPER, job], capture_output=True, text=True,
                       timeout=WATCHDOG_S + 30, check=False)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    result["text"] = result["out"] + result["err"]
    return result


FAILS = {"check": 1, "submit": 1, "probe": 0, "doctor": 0}  # doctor reports and exits 0; the probe is a library call
COMMANDS = tuple(FAILS)


# --- (a) a redirect to another origin never carries the token ------------------------------------------------


@pytest.mark.parametrize("code", [302, 307])
@pytest.mark.parametrize("name", COMMANDS)
def test_redirect_to_another_origin_never_carries_the_token(name, code, serve, bundle, base_env, tmp_path):
    elsewhere = serve(fake_ray)
    dashboard = serve(redirect_to(elsewhere, code))
    r = run(name, bundle, dashboard.url, {**base_env, "RAY_AUTH_TOKEN": TOKEN}, tmp_path)
    for _path, headers in elsewhere.seen:
        assert "authorization" not in {k.lower() for k in headers}, (name, elsewhere.seen)
        assert TOKEN not in json.dumps(headers)
    assert not r["timed_out"], r["text"]
    assert any("Authorization" in h for _p, h in dashboard.seen)  # the token went to the dashboard only
    assert "another origin" in r["text"], r["text"]
    assert TOKEN not in r["text"]
    assert r["rc"] == FAILS[name], r["text"]
    if name != "submit":
        assert "[VI726]" in r["text"], r["text"]


# --- (b) dripping and endless answers: bounded in time and memory --------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("kind", ["drip", "endless"])
def test_slow_or_endless_answers_end_with_a_clear_error(kind, name, serve, bundle, base_env, tmp_path):
    dashboard = serve(drip if kind == "drip" else endless)
    r = run(name, bundle, dashboard.url, base_env, tmp_path)
    assert not r["timed_out"], f"{name} still ran after {WATCHDOG_S} s: {r['text'][-2000:]}"
    assert r["max_rss_mb"] <= MAX_RSS_MB, (name, r["max_rss_mb"])
    assert r["rc"] == FAILS[name], r["text"]
    if kind == "drip":
        assert "did not answer" in r["text"] and " s (wall-clock deadline)" in r["text"], r["text"]
    else:
        assert "larger than 8 MiB" in r["text"], r["text"]
    if name != "submit":
        assert ("[VI710]" if kind == "drip" else "[VI726]") in r["text"], r["text"]


# --- (c) token files that are not files --------------------------------------------------------------------------


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_token_path_at_a_fifo_or_a_device_is_refused_by_name(kind, name, serve, bundle, base_env, tmp_path):
    if kind == "fifo":
        path = tmp_path / "token.fifo"
        os.mkfifo(path)
        what = "FIFO"
    else:
        path = Path("/dev/zero")
        what = "device"
    dashboard = serve(wants_token)  # ray/submit.sh looks for the token once the dashboard asks for it
    r = run(name, bundle, dashboard.url, {**base_env, "RAY_AUTH_TOKEN_PATH": str(path)}, tmp_path)
    assert not r["timed_out"], f"{name} still ran after {WATCHDOG_S} s: {r['text'][-2000:]}"
    assert r["max_rss_mb"] <= MAX_RSS_MB, (name, r["max_rss_mb"])
    assert r["rc"] == FAILS[name], r["text"]
    assert "RAY_AUTH_TOKEN_PATH" in r["text"] and str(path) in r["text"] and what in r["text"], r["text"]
    assert "not a regular file" in r["text"], r["text"]
    if name != "submit":
        assert "[VI727]" in r["text"], r["text"]


def test_token_file_size_cap(tmp_path):
    from wizard.env.cluster import ProbeError, ray_auth_token

    big = tmp_path / "token"
    big.write_bytes(b"x" * (64 * 1024 + 1))
    with pytest.raises(ProbeError, match="more than a token's 64 KiB") as err:
        ray_auth_token({"RAY_AUTH_TOKEN_PATH": str(big), "HOME": str(tmp_path)})
    assert err.value.problem.rule == "VI727" and "RAY_AUTH_TOKEN_PATH" in err.value.problem.hint
    big.write_text(f"  {TOKEN}\n")
    token = ray_auth_token({"RAY_AUTH_TOKEN_PATH": str(big), "HOME": str(tmp_path)})
    assert token is not None and (token.value, token.source) == (TOKEN, "RAY_AUTH_TOKEN_PATH")


# --- (d) credentials in RAY_ADDRESS are never printed --------------------------------------------------------


@pytest.mark.parametrize("name", ["check", "check-json", "probe", "doctor", "doctor-json", "submit"])
@pytest.mark.parametrize("form", ["dashboard", "ray-client"])
def test_password_in_ray_address_never_appears(form, name, serve, bundle, base_env, tmp_path):
    dashboard = serve(fake_ray)
    port = dashboard.url.rsplit(":", 1)[1]
    address = (f"http://vi-user:{PASSWORD}@127.0.0.1:{port}" if form == "dashboard"
               else f"ray://vi-user:{PASSWORD}@127.0.0.1:10001")
    env = {**base_env, "RAY_ADDRESS": address}
    r = run(name, bundle, None, env, tmp_path)
    assert not r["timed_out"], r["text"]
    assert PASSWORD not in r["text"], r["text"]
    assert "***@127.0.0.1" in r["text"], r["text"]
    if form == "dashboard" and name == "check":  # the credentials still reach their own dashboard
        assert f"found: Ray 2.60.0 at http://***@127.0.0.1:{port}" in r["text"], r["text"]


# --- the client itself ------------------------------------------------------------------------------------------


def test_same_origin_redirects_are_followed_with_the_token(serve):
    from wizard.env import http

    def moved(h: BaseHTTPRequestHandler, s: Server) -> None:
        if h.path == "/old":
            h.send_response(307)
            h.send_header("Location", "/api/version")
            h.send_header("Content-Length", "0")
            h.end_headers()
        else:
            fake_ray(h, s)

    server = serve(moved)
    response = http.get(server.url + "/old", timeout=2, token=TOKEN)
    assert response.status == 200 and response.json()["ray_version"] == "2.60.0"
    assert [h.get("Authorization") for _p, h in server.seen] == [f"Bearer {TOKEN}"] * 2


def test_deadline_is_wall_clock_and_shared(serve):
    from wizard.env import http

    server = serve(drip)
    budget = http.Deadline(1.0)
    start = time.monotonic()
    with pytest.raises(http.HttpError) as err:
        http.get(server.url + "/x", timeout=30, deadline=budget)
    assert err.value.kind == "timeout" and time.monotonic() - start < 10
    with pytest.raises(http.HttpError, match="within 1 s"):  # the command's budget is spent: no new request
        http.get(server.url + "/y", timeout=30, deadline=budget)


@pytest.mark.parametrize("text, shown", [
    (f"http://u:{PASSWORD}@h:8265/api", "http://***@h:8265/api"),
    (f"at https://{PASSWORD}@h:8265 (x)", "at https://***@h:8265 (x)"),
    (f"RAY_ADDRESS=ray://u:{PASSWORD}@h:10001", "RAY_ADDRESS=ray://***@h:10001"),
    (f"'u:{PASSWORD}@h:6379' is", "'***@h:6379' is"),
    ("http://h:8265 and head:6379", "http://h:8265 and head:6379"),
])
def test_redact(text, shown):
    from wizard.env.http import redact

    assert redact(text) == shown
