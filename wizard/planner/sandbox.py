"""Code RL with a sandbox reward: `reward=sandbox`, `sandbox_url`, `sandbox_max_concurrent`, `sandbox_memory_mb`
→ verl's `reward.sandbox_fusion` keys (VI580-VI585, VI761).

`b` is the planner's working state (wizard.planner.state.Build); this module does not import the pipeline (the
import graph has no cycle), so it is typed loosely here.

verl 0.9.1 facts, each with its source (paths under the installed `verl/`):

- Routing: `default_compute_score` sends data_source codecontests / apps / codeforces / taco to a code scorer
  (utils/reward_score/__init__.py:79-94): `sandbox_fusion.compute_score` when a sandbox URL is passed, else
  `prime_code.compute_score`, which runs the program in the reward worker itself under `reliability_guard`,
  whose docstring says it "is NOT a security sandbox" (prime_code/testing_util.py:616-626). Any other data_source
  never reaches the sandbox.
- Keys: `reward.sandbox_fusion.{url, max_concurrent, memory_limit_mb}` (workers/config/reward.py:66-78, defaults
  None, 64, 1024; the legacy top-level `sandbox_fusion.*` is moved there, experimental/reward_loop/reward_loop.py:
  79-82). `load_reward_manager` (trainer/ppo/reward.py:134-146) binds url, memory limit and a semaphore of
  `max_concurrent` into the scorer, once per reward manager: each of the `reward.num_workers` reward loop workers
  (default 8, trainer/config/reward/reward.yaml:5) holds its own, so up to num_workers × max_concurrent calls are
  in flight at once.
- Calls: one POST per test case to the URL (sandbox_fusion/utils.py:call_sandbox_api) with compile and run
  timeouts of 10 s each (request timeout 30 s), memory_limit_MB, language python; a 504 is retried 3 times, any
  other failure scores the case -1 (not passed). The score is the share of the first 10 cases passed
  (continuous=True, sandbox_fusion/__init__.py:97-103); a response without a ``` code block scores 0 unsent.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from typing import Any, Optional

from wizard.planner.dataprep import CODE_DATA_SOURCES, SCORED_CASES

ANSWERS = ("sandbox_url", "sandbox_max_concurrent", "sandbox_memory_mb")
DEFAULT_CONCURRENT = 64  # workers/config/reward.py:77
DEFAULT_MEMORY_MB = 1024  # workers/config/reward.py:78
REWARD_WORKERS = 8  # reward.num_workers default (trainer/config/reward/reward.yaml:5)
CASE_TIMEOUT_S = 10  # compute_score(timeout=10): compile and run timeouts of each call
# SandboxFusion's published server image (github.com/bytedance/SandboxFusion README: docker run -p 8080:8080)
SANDBOX_IMAGE = "volcengine/sandbox-fusion:server-20241204"
SANDBOX_PORT = 8080
SANDBOX_PATH = "/run_code"
SERVICE = "sandbox-fusion"  # the in-cluster Service KubeRay bundles render (wizard.renderer.artefacts.sandbox)
K8S_FILE = "k8s/sandbox-fusion.yaml"
_SECRET_QUERY = ("token", "key", "secret", "password", "passwd", "auth", "signature", "sig")


def redact(url: str) -> str:
    """The URL with any user:password@ and credential-like query values replaced by ***."""
    import re

    # userinfo before the host, with or without a scheme (a password may hold ':' or '/': up to the last '@')
    url = re.sub(r"^((?i:[a-z][a-z0-9+.\-]*)://)?[^@]*@", lambda m: (m.group(1) or "") + "***@", url) if "@" in url else url
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = "&".join(
        (f"{k}=***" if any(s in k.lower() for s in _SECRET_QUERY) else f"{k}={v}") if sep else k
        for k, sep, v in (item.partition("=") for item in parts.query.split("&") if item))
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_problem(url: str) -> Optional[str]:
    """Why verl's sandbox client cannot (or must not) use this URL, or None. The message holds the URL redacted."""
    shown = redact(url)
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in 0-65535
    except ValueError:  # its text may quote a piece of a password: not shown
        return f"sandbox_url={shown} is not a URL (its host or port cannot be read)"
    if "@" in url.split("?", 1)[0]:
        return (f"sandbox_url={shown} carries credentials (user:password@): they would be written into "
                "verl_config.yaml and every log line verl's sandbox client prints")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"sandbox_url={shown} is not an http(s)://host[:port]/run_code URL"
    if any(any(s in k.lower() for s in _SECRET_QUERY) for k, _, _ in
           (item.partition("=") for item in parts.query.split("&") if item)):
        return f"sandbox_url={shown} carries a credential in its query string; it would be written into verl_config.yaml"
    return None


def is_loopback(url: str) -> bool:
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host in ("localhost", "localhost.localdomain") or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def in_cluster_url(namespace: Optional[str]) -> str:
    """The URL of the bundle's k8s/sandbox-fusion.yaml Service, as the pods reach it."""
    host = SERVICE + (f".{namespace}.svc" if namespace else "")
    return f"http://{host}:{SANDBOX_PORT}{SANDBOX_PATH}"


def rules(b: Any) -> None:
    """Rule stage (with the reward rules): the sandbox answers against the reward, the data and the cluster."""
    from wizard.planner.dataprep import resolve

    a, f = b.a, b.f
    given = [k for k in ANSWERS if getattr(a, k) is not None]
    prep = resolve(a, b.base)
    code_source = prep.data_source in CODE_DATA_SOURCES
    if a.reward != "sandbox":
        if given:
            f.error("VI584", ("reward", *given), f"{' and '.join(given)} set but reward={a.reward}: verl calls the "
                    "sandbox only with reward.sandbox_fusion.url under its default scorer",
                    "set reward=sandbox, or remove " + " and ".join(given))
        if prep.answer_format == "code" and a.reward in ("function", "model"):
            f.error("VI583", ("answer_format", "reward"), f"answer_format=code with reward={a.reward}: "
                    + ("the bundle's reward_fn.py compares answers, it does not run programs" if a.reward == "function"
                       else "a reward model does not run the programs against their test cases"),
                    "set reward=sandbox and sandbox_url (or reward=rule: verl's prime_code runs them unsandboxed)")
        elif a.reward == "rule" and prep.answer_format == "code" and not code_source:
            f.error("VI582", ("data_source", "reward"), f"data_source={prep.data_source}: verl's default scorer does "
                    "not route it to a code scorer, so every response fails with NotImplementedError or is scored "
                    "as text", f"set data_source to one of {', '.join(CODE_DATA_SOURCES)}")
        elif a.reward == "rule" and code_source:
            f.warning("VI585", ("reward", "data_source"), f"reward=rule on code rows (data_source="
                      f"{prep.data_source}): without a sandbox URL verl's prime_code runs every model-written program "
                      "inside the reward worker; its reliability_guard 'is NOT a security sandbox' "
                      "(verl/utils/reward_score/prime_code/testing_util.py)",
                      "set reward=sandbox and sandbox_url=<a SandboxFusion run_code URL> to run them isolated")
        return
    if a.sandbox_url is None:
        f.error("VI580", ("reward", "sandbox_url"), "reward=sandbox needs sandbox_url: verl runs each program in a "
                "SandboxFusion service at that address", "set sandbox_url=http://HOST:8080/run_code (start one with "
                "`docker run -p 8080:8080 " + SANDBOX_IMAGE + "`), or use reward=rule to run the programs unsandboxed "
                "with verl's prime_code (unsafe)")
    else:
        why = url_problem(a.sandbox_url)
        if why is not None:
            f.error("VI581", ("sandbox_url",), why, "give the run_code URL without credentials, e.g. "
                    "http://sandbox-fusion:8080/run_code; protect the service by network policy (verl's client sends "
                    "no auth headers)")
        elif a.cluster != "local" and is_loopback(a.sandbox_url):
            where = {"kuberay": "pods", "slurm": "Slurm nodes", "ray": "Ray cluster's nodes"}[a.cluster]
            fix = (f"`kubectl apply -f k8s/sandbox-fusion.yaml` (a SandboxFusion Deployment + Service) and set "
                   f"sandbox_url={in_cluster_url(a.k8s_namespace)}" if a.cluster == "kuberay" else
                   "run SandboxFusion on a host every node reaches and set sandbox_url to its address")
            f.error("VI761", ("sandbox_url", "cluster"), f"sandbox_url={redact(a.sandbox_url)} is this machine's "
                    f"loopback, but verl's reward workers run on the {where}, where it names the node itself", fix)
    if prep.answer_format != "code":
        f.error("VI583", ("answer_format", "reward"), f"reward=sandbox runs programs, but answer_format="
                f"{prep.answer_format} makes the rows ask for and hold a plain answer",
                "remove answer_format (reward=sandbox implies code), or set answer_format=code")
    if not code_source:
        f.error("VI582", ("data_source", "reward"), f"data_source={prep.data_source}: verl's default scorer sends only "
                f"{', '.join(CODE_DATA_SOURCES)} to the sandbox (verl/utils/reward_score/__init__.py)",
                f"set data_source to one of {', '.join(CODE_DATA_SOURCES)} (or remove it)")
    concurrent = a.sandbox_max_concurrent or DEFAULT_CONCURRENT
    b.facts["sandbox"] = {
        "url": redact(a.sandbox_url) if a.sandbox_url else None,
        "data_source": prep.data_source,
        "max_concurrent": concurrent,
        "memory_mb": a.sandbox_memory_mb or DEFAULT_MEMORY_MB,
        "workers": REWARD_WORKERS,
        "in_flight": REWARD_WORKERS * concurrent,
        "in_cluster": bool(a.sandbox_url) and a.cluster == "kuberay" and
        (urllib.parse.urlsplit(a.sandbox_url).hostname or "").split(".")[0] == SERVICE,
    }


def reward_keys(b: Any) -> None:
    """Key stage (in _reward_keys, for reward=sandbox): verl's reward.sandbox_fusion keys and the sandbox role."""
    a, s, given, fx = b.a, b.s, b.given, b.facts["sandbox"]
    s.set("reward.sandbox_fusion.url", a.sandbox_url, "sandbox_url: verl's code scorer posts each test case there",
          "answer")
    s.set("reward.sandbox_fusion.max_concurrent", fx["max_concurrent"],
          "sandbox_max_concurrent" if "sandbox_max_concurrent" in given else
          f"verl's default: calls in flight per reward worker ({fx['workers']} workers: {fx['in_flight']} at most)",
          "answer" if "sandbox_max_concurrent" in given else "default")
    s.set("reward.sandbox_fusion.memory_limit_mb", fx["memory_mb"],
          "sandbox_memory_mb" if "sandbox_memory_mb" in given else "verl's default memory limit of each program",
          "answer" if "sandbox_memory_mb" in given else "default")
    per_step = b.prompts * b.n
    fx["responses_per_step"] = per_step
    b.roles["reward"] = (f"verl's code scorer (sandbox_fusion) for data_source {fx['data_source']}: the program in each response's ```python block, scored by the share of the first "
                         f"{SCORED_CASES} test cases passed")
    b.roles["sandbox"] = (f"SandboxFusion at {fx['url']}: {per_step} responses per step, one call per test case; at "
                          f"most {fx['workers']} reward workers × {fx['max_concurrent']} = {fx['in_flight']} calls in "
                          f"flight, each program limited to {fx['memory_mb']} MB and {CASE_TIMEOUT_S} s")


ANSWER_KEYS = {
    "reward.sandbox_fusion.url": "sandbox_url",
    "reward.sandbox_fusion.max_concurrent": "sandbox_max_concurrent",
    "reward.sandbox_fusion.memory_limit_mb": "sandbox_memory_mb",
}


def renders_service(facts: dict[str, Any]) -> bool:
    """Whether the bundle carries the in-cluster sandbox (K8S_FILE): KubeRay with sandbox_url naming SERVICE."""
    fx = facts.get("sandbox")
    return bool(fx and fx.get("in_cluster"))
