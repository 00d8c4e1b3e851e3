"""A local stand-in for a SandboxFusion service: the `POST /run_code` API as verl 0.9.1's client speaks it, on
127.0.0.1, so verl's own sandbox scorer can be run end to end without the real service (the CPU smoke and the tests;
the fake sits only at that network boundary).

The API, as verl's client uses it (verl/utils/reward_score/sandbox_fusion/utils.py:call_sandbox_api and
_process_single_case): the request is JSON {code, stdin, language, compile_timeout, run_timeout, memory_limit_MB,
files, fetch_files}; the answer is JSON {status: "Success" | "Failed" | "SandboxError", compile_result,
run_result: {status: "Finished" | "TimeLimitExceeded" | "Error", return_code, stdout, stderr, execution_time}}, with
status "Failed" when the program exits non-zero or runs out of time (as SandboxFusion reports it).

What it is not: a sandbox. It runs python programs in a subprocess of this machine with the request's run timeout
and (where the OS allows) an address-space limit of memory_limit_MB; it must only run programs the caller wrote
(the smoke's probes, the tests' solutions), never a model's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

MAX_BODY = 4 * 1024 * 1024  # bytes read from one request
MAX_OUTPUT = 64 * 1024  # stdout/stderr characters returned


def _limit(memory_mb: Any):  # -> Optional[Callable[[], None]]
    try:
        import resource
    except ImportError:  # not on this OS
        return None
    if not isinstance(memory_mb, int) or memory_mb <= 0:
        return None

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 1024 * 1024, memory_mb * 1024 * 1024))
    return apply


def run_code(request: dict[str, Any]) -> dict[str, Any]:
    """One run_code call: a python program with stdin → SandboxFusion's answer."""
    if request.get("language") != "python":
        return {"status": "SandboxError", "message": f"language {request.get('language')!r} not served by the stand-in",
                "compile_result": None, "run_result": None}
    timeout = float(request.get("run_timeout") or 10)
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-I", "-c", str(request.get("code", ""))],
                              input=(request.get("stdin") or "").encode(), capture_output=True, timeout=timeout,
                              preexec_fn=_limit(request.get("memory_limit_MB")))
    except subprocess.TimeoutExpired:
        run = {"status": "TimeLimitExceeded", "return_code": None, "stdout": "", "stderr": "",
               "execution_time": timeout}
        return {"status": "Failed", "message": "", "compile_result": None, "run_result": run}
    run = {"status": "Finished", "return_code": done.returncode,
           "stdout": done.stdout.decode(errors="replace")[:MAX_OUTPUT],
           "stderr": done.stderr.decode(errors="replace")[:MAX_OUTPUT],
           "execution_time": round(time.monotonic() - start, 4)}
    return {"status": "Success" if done.returncode == 0 else "Failed", "message": "", "compile_result": None,
            "run_result": run}


class _Handler(BaseHTTPRequestHandler):
    server_version = "sandbox-stand-in/1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length") or 0)
        if self.path.rstrip("/") != "/run_code" or length > MAX_BODY:
            self.send_error(404 if length <= MAX_BODY else 413)
            return
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self.send_error(400, "body is not JSON")
            return
        self.server.calls.append(request)  # type: ignore[attr-defined]
        body = json.dumps(run_code(request)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class SandboxStandIn:
    """`with SandboxStandIn() as sb: sb.url` — a run_code endpoint on 127.0.0.1 (a free port) for the block."""

    def __init__(self, port: int = 0) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.server.daemon_threads = True
        self.server.calls = []  # type: ignore[attr-defined]
        self.thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/run_code"

    @property
    def calls(self) -> list[dict[str, Any]]:
        return self.server.calls  # type: ignore[attr-defined]

    def __enter__(self) -> "SandboxStandIn":
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def probe_programs(ground_truth: str) -> tuple[str, str]:
    """A right and a wrong response for a code row: the right one answers each of the row's own test inputs with its
    expected output (so it passes exactly the row's cases, as a correct solution would), the wrong one prints a
    marker. Both in the ```python block verl's scorer reads."""
    cases = json.loads(ground_truth)
    table = {str(i): str(o) for i, o in zip(cases.get("inputs", []), cases.get("outputs", []))}
    right = ("```python\nimport sys\n"
             f"ANSWERS = {table!r}\n"
             "sys.stdout.write(ANSWERS.get(sys.stdin.read(), ''))\n```")
    wrong = "```python\nprint('verl-init: a wrong answer')\n```"
    return right, wrong


# -- the smoke's checks of a reward=sandbox bundle ------------------------------------------------------------------

# A code row the smoke scores when it has none of the bundle's own at hand (the probe runs before the data phase).
PROBE_CASES = {"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}
LIVE_TIMEOUT_S = 5  # compile and run timeouts of the one call to the configured service (verl adds 10 s of API)


def sandbox_checks(ctx: Any) -> None:
    """reward.sandbox_fusion.url set: what the smoke can prove of the sandbox reward path, and what it cannot.

    1. verl's own scorer (default_compute_score, bound to the config's memory limit as load_reward_manager binds it)
       on a code row of the bundle's data_source, against the local stand-in: a right program scores 1, a wrong one
       0, with one call per test case carrying the config's memory_limit_mb.
    2. The configured service itself, with verl's client (call_sandbox_api), once, bounded: only for cluster=local
       (elsewhere the URL is for the nodes or pods and is not tried from here)."""
    sf = ctx.cfg.reward.get("sandbox_fusion")
    url = sf.get("url") if sf is not None else None
    if not url:
        return
    from verl.utils.reward_score import default_compute_score
    from verl.utils.reward_score.sandbox_fusion.utils import call_sandbox_api

    from wizard.planner import dataprep
    from wizard.planner.sandbox import redact

    memory = int(sf.get("memory_limit_mb") or 1024)
    a = ctx.answers
    source = dataprep.resolve(a, ctx.bundle).data_source if a is not None else dataprep.CODE_DATA_SOURCES[0]
    truth = json.dumps(PROBE_CASES)
    right, wrong = probe_programs(truth)
    with SandboxStandIn() as sb:
        scores = [default_compute_score(source, text, truth, sandbox_fusion_url=sb.url, memory_limit_mb=memory)
                  for text in (right, wrong)]
        calls = list(sb.calls)
    ok = scores == [1.0, 0.0] and len(calls) == 2 * len(PROBE_CASES["inputs"]) and \
        all(c.get("memory_limit_MB") == memory for c in calls)
    ctx.check(None, "sandbox reward path through verl's scorer", ok,
              f"verl's default_compute_score routes data_source {source} to sandbox_fusion: a right program scores "
              f"{scores[0]:g}, a wrong one {scores[1]:g}, {len(calls)} run_code calls (one per test case, "
              f"memory_limit_MB={memory}) to a local stand-in of the service's API",
              {"scores": scores, "calls": len(calls), "data_source": source},
              hint="data_source must be one verl routes to its code scorer (codecontests, apps, codeforces, taco)")
    shown = redact(str(url))
    cluster = getattr(a, "cluster", "local") if a is not None else "local"
    if cluster != "local":
        ctx.check(None, "configured sandbox answers", None,
                  f"not tried from here: {shown} must answer from the {cluster} nodes/pods where verl's reward "
                  "workers run")
    else:
        response, error = call_sandbox_api(str(url), "print('verl-init')", None, LIVE_TIMEOUT_S, LIVE_TIMEOUT_S,
                                           memory, "python")
        stdout = ((response or {}).get("run_result") or {}).get("stdout")
        live = response is not None and response.get("status") == "Success" and (stdout or "").strip() == "verl-init"
        ctx.check(None, "configured sandbox answers", live,
                  f"{shown} ran a one-line program (verl's client)" if live else
                  f"{shown} did not run a one-line program with verl's client: "
                  + (redact(str(error))[:300] if error else f"status {(response or {}).get('status')!r}"),
                  {"url": shown},
                  hint="start SandboxFusion (e.g. `docker run -d -p 8080:8080 volcengine/sandbox-fusion:"
                       "server-20241204`) or fix sandbox_url: verl would score every response 0")
    ctx.check(None, "programs written by the policy scored in the sandbox", None,
              "not here: the CPU miniature's tiny policy writes no programs; the bundle's first step on the GPUs "
              "scores real ones (the reward workers' log says `API Call Failed` if the sandbox does not answer)")
