"""`verl-init check --mode cluster`: what a bundle or verl config expects, against a live Ray cluster.

What a config expects: `trainer.nnodes × trainer.n_gpus_per_node` GPUs in groups of
`n_gpus_per_node` on one node each (verl's STRICT_PACK placement groups), 3 logical CPUs per GPU on
the same node, plus one per TransferQueue actor (controller + `num_data_storage_units`), a
`RAY_ADDRESS` that names the GCS, and no hand-set `CUDA_VISIBLE_DEVICES`.

What the cluster has: read from the Ray dashboard's HTTP API (`/api/version`, the state API
`/api/v0/nodes`, `/api/cluster_status`) through wizard.env.http: each request within a wall-clock
deadline of at most 2 s (all of them within `COMMAND_BUDGET_S`), bodies of at most 8 MiB, no redirect
to another origin (Ray's token stays with the dashboard), credentials in URLs redacted. Never
`ray.init`: connecting a driver to a busy or half-started cluster can block for minutes.

A bundle's Kubernetes manifests are checked in wizard.env.cluster_files.

Only the standard library is imported at module level (the CLI's --help stays fast).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from wizard.env.cluster_files import (CPUS_PER_GPU_BUNDLE, _bounded_yaml, _bounded_yaml_all, _read_small, _select,
                                      manifest_problems, pod_storage_problems,
                                      pod_tool_problems)
from wizard.intent.errors import Problem

DEFAULT_STORAGE_UNITS = 8  # transfer_queue.backend.SimpleStorage.num_data_storage_units
VERL_DEFAULT_NNODES = 1  # verl/trainer/config/ppo_trainer.yaml
VERL_DEFAULT_GPUS_PER_NODE = 8
DEFAULT_DASHBOARD = "http://127.0.0.1:8265"
DASHBOARD_PORT = 8265
MAX_TIMEOUT_S = 2.0
COMMAND_BUDGET_S = 3 * MAX_TIMEOUT_S  # all dashboard requests of one probe (version, nodes, cluster status)
MAX_TOKEN_BYTES = 64 * 1024  # a Ray token is a few dozen bytes


# --- what the config expects ---------------------------------------------------------------------


@dataclass
class Expected:
    source: str
    nnodes: int = VERL_DEFAULT_NNODES
    gpus_per_node: int = VERL_DEFAULT_GPUS_PER_NODE
    storage_units: int = DEFAULT_STORAGE_UNITS
    cluster: Optional[str] = None  # from a bundle's verl-init.yaml
    bundle: Optional[Path] = None
    config: dict[str, Any] = field(default_factory=dict)
    # the reward model's own resource pool (reward.reward_model.enable_resource_pool): verl asks Ray for
    # [n_gpus_per_node] × nnodes more GPUs (trainer/ppo/v1/trainer_base.py:823-831); 0 when colocated or absent
    reward_nodes: int = 0
    reward_gpus_per_node: int = 0

    @property
    def n_gpus(self) -> int:
        return self.nnodes * self.gpus_per_node

    @property
    def reward_gpus(self) -> int:
        return self.reward_nodes * self.reward_gpus_per_node

    @property
    def all_gpus(self) -> int:
        """Every GPU the run asks Ray for: the trainer's pool and the reward model's own."""
        return self.n_gpus + self.reward_gpus

    @property
    def cluster_nodes(self) -> int:
        """Nodes verl-init's cluster files start: the trainer's, plus the reward pool's (more nodes of the same kind)."""
        return self.nnodes + self.reward_nodes

    @property
    def cpus_needed(self) -> int:
        return CPUS_PER_GPU_BUNDLE * self.all_gpus + 1 + self.storage_units

    def as_dict(self) -> dict[str, Any]:
        out = {"source": self.source, "cluster": self.cluster, "nnodes": self.nnodes,
               "n_gpus_per_node": self.gpus_per_node, "gpus": self.all_gpus, "logical_cpus": self.cpus_needed}
        if self.reward_gpus:
            out["reward_pool"] = {"nnodes": self.reward_nodes, "n_gpus_per_node": self.reward_gpus_per_node}
        return out


def _count(doc: Any, key: str, default: int, problems: list[Problem]) -> int:
    value = _select(doc, key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        problems.append(Problem("VI723", "error", (key,), f"{key} is not a whole number ({value!r})",
                                "check --mode cluster reads literal values; resolve interpolations first"))
        return default
    return int(value)


def load_expected(target: str | os.PathLike[str]) -> tuple[Expected, list[Problem]]:
    """A bundle folder (verl_config.yaml, verl-init.yaml) or a verl config YAML file."""
    import yaml

    problems: list[Problem] = []
    path = Path(target)
    bundle: Optional[Path] = None
    if path.is_dir():
        bundle, path = path, path / "verl_config.yaml"
    exp = Expected(str(target), bundle=bundle)
    if not path.is_file():
        what = "no verl_config.yaml in that folder" if bundle else "no such file"
        problems.append(Problem("VI723", "error", ("target",), f"{what} ({path})",
                                "pass a bundle folder written by verl-init or a verl config YAML file"))
        return exp, problems
    try:
        doc = _bounded_yaml(path)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        problems.append(Problem("VI723", "error", ("target",), f"not valid YAML ({path}: {type(exc).__name__})",
                                "fix the YAML syntax"))
        return exp, problems
    if not isinstance(doc, dict):
        problems.append(Problem("VI723", "error", ("target",), f"not a YAML mapping ({path})", "pass a verl config"))
        return exp, problems
    exp.config = doc
    exp.nnodes = _count(doc, "trainer.nnodes", VERL_DEFAULT_NNODES, problems)
    exp.gpus_per_node = _count(doc, "trainer.n_gpus_per_node", VERL_DEFAULT_GPUS_PER_NODE, problems)
    exp.storage_units = _count(doc, "transfer_queue.backend.SimpleStorage.num_data_storage_units",
                               DEFAULT_STORAGE_UNITS, problems)
    if _select(doc, "reward.reward_model.enable") is True and _select(doc, "reward.reward_model.enable_resource_pool") is True:
        exp.reward_nodes = _count(doc, "reward.reward_model.nnodes", 0, problems)
        exp.reward_gpus_per_node = _count(doc, "reward.reward_model.n_gpus_per_node", 8, problems)
    if bundle is not None and (bundle / "verl-init.yaml").is_file():
        try:
            answers = (_bounded_yaml(bundle / "verl-init.yaml") or {}).get("answers", {})
            if isinstance(answers, dict):  # verl-init.yaml lists the answers given; the rest are defaults
                from wizard.intent.answers import Answers

                exp.cluster = answers.get("cluster", Answers.model_fields["cluster"].default)
        except (yaml.YAMLError, AttributeError, UnicodeDecodeError):
            exp.cluster = None
    return exp, problems


# --- what the cluster has ------------------------------------------------------------------------


@dataclass
class Node:
    node_id: str
    ip: str
    alive: bool
    head: bool
    gpus: int
    cpus: int


@dataclass
class Observed:
    source: str  # dashboard URL, or "this machine"
    ray_version: Optional[str]
    nodes: list[Node]
    gpus_used: Optional[float] = None  # None: usage unknown

    @property
    def alive(self) -> list[Node]:
        return [n for n in self.nodes if n.alive]

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.alive)

    @property
    def cpus(self) -> int:
        return sum(n.cpus for n in self.alive)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "ray_version": self.ray_version, "alive_nodes": len(self.alive),
                "dead_nodes": len(self.nodes) - len(self.alive), "gpus": self.gpus, "logical_cpus": self.cpus,
                "gpus_used": self.gpus_used,
                "nodes": [n.__dict__ for n in self.nodes]}


class ProbeError(Exception):
    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem


def _redact(text: str) -> str:
    from wizard.env.http import redact

    return redact(text)


def dashboard_url(address: Optional[str], env: Mapping[str, str]) -> tuple[str, str]:
    """(dashboard URL to probe, where it came from). The URL keeps credentials written into it (they are sent to
    that dashboard only); the second part is for messages and has them redacted."""
    given = address or env.get("RAY_API_SERVER_ADDRESS") or env.get("RAY_ADDRESS") or ""
    origin = "--address" if address else ("RAY_API_SERVER_ADDRESS" if env.get("RAY_API_SERVER_ADDRESS")
                                          else ("RAY_ADDRESS" if env.get("RAY_ADDRESS") else "default"))
    text = given.strip()
    if not text or text in ("auto", "local", "localhost"):
        return DEFAULT_DASHBOARD, origin
    if re.match(r"^https?://", text):
        return text.rstrip("/"), origin
    host = re.sub(r"^ray://", "", text).rsplit(":", 1)[0] if ":" in text else text
    host = host.rsplit("@", 1)[-1]
    return (f"http://{host}:{DASHBOARD_PORT}",
            _redact(f"{origin} {text}, not a dashboard URL: its dashboard on port {DASHBOARD_PORT}"))


@dataclass(frozen=True)
class Token:
    """A Ray auth token and where it came from (never printed)."""

    value: str = field(repr=False)
    source: str = ""


_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def _token_problem(source: str, path: Path, what: str) -> ProbeError:
    fix = ("point RAY_AUTH_TOKEN_PATH at the token file (`ray get-auth-token` on the head prints the token) or set "
           "RAY_AUTH_TOKEN" if source == "RAY_AUTH_TOKEN_PATH" else
           "replace it with the token file (`ray get-auth-token` on the head prints the token) or set RAY_AUTH_TOKEN")
    shown = f"RAY_AUTH_TOKEN_PATH={path}" if source == "RAY_AUTH_TOKEN_PATH" else f"{path} (~/.ray/auth_token)"
    return ProbeError(Problem("VI727", "error", (source,), f"{shown} {what}; Ray's token is read from a regular file",
                              fix))


def read_token_file(path: Path, source: str, max_bytes: int = MAX_TOKEN_BYTES) -> Optional[str]:
    """The stripped text of a token file; None when it does not exist or is empty. Opened without blocking (a FIFO
    cannot hold it), read only when it is a regular file and up to `max_bytes` (/dev/zero cannot fill memory);
    anything else raises ProbeError (VI727) naming the file and `source`."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket file (or a FIFO opened for writing): not a file to read
            raise _token_problem(source, path, "is not a regular file") from None
        raise _token_problem(source, path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _FILE_KINDS if test(st.st_mode)), "not a regular file")
            raise _token_problem(source, path, f"is {kind}, not a regular file")
        if st.st_size > max_bytes:
            raise _token_problem(source, path, f"is {st.st_size} bytes, more than a token's {max_bytes // 1024} KiB")
        data = b""
        while len(data) <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - len(data))
            if not chunk:
                break
            data += chunk
        if len(data) > max_bytes:
            raise _token_problem(source, path, f"holds more than a token's {max_bytes // 1024} KiB")
    except OSError as exc:
        raise _token_problem(source, path, f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    try:
        value = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise _token_problem(source, path, "is not UTF-8 text") from None
    return value or None


def ray_auth_token(env: Mapping[str, str]) -> Optional[Token]:
    """The token Ray's own clients would send, in Ray's order: RAY_AUTH_TOKEN, the file named by
    RAY_AUTH_TOKEN_PATH, then ~/.ray/auth_token. None when there is none; ProbeError (VI727) when a token file is
    not a regular file (a FIFO, a device), is larger than 64 KiB or cannot be read."""
    value = (env.get("RAY_AUTH_TOKEN") or "").strip()
    if value:
        return Token(value, "RAY_AUTH_TOKEN")
    candidates = []
    if (env.get("RAY_AUTH_TOKEN_PATH") or "").strip():
        candidates.append((Path(env["RAY_AUTH_TOKEN_PATH"].strip()).expanduser(), "RAY_AUTH_TOKEN_PATH"))
    home = env.get("HOME") or str(Path.home())
    candidates.append((Path(home) / ".ray" / "auth_token", "~/.ray/auth_token"))
    for path, source in candidates:
        text = read_token_file(path, source)
        if text:
            return Token(text, source)
    return None


def _get(url: str, timeout: float, token: Optional[Token] = None, deadline: Any = None) -> Any:
    """The JSON at `url` (ValueError when it is not JSON); HttpError (wizard.env.http) for a failed request, with
    `kind="status"` for an HTTP error status; ProbeError (VI725) when the dashboard wants a token or refuses it."""
    from wizard.env import http

    response = http.get(url, timeout=timeout, deadline=deadline, token=token.value if token is not None else None)
    if response.status in (401, 403):
        base = _redact(url.split("/api/", 1)[0])
        if token is None:
            message = f"the Ray dashboard at {base} wants a token (Ray token authentication, HTTP {response.status})"
            fix = ("set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the cluster's token: "
                   "`ray get-auth-token` on the head prints it")
        else:
            message = f"the Ray dashboard at {base} refused the token from {token.source} (HTTP {response.status})"
            fix = "use the cluster's token: `ray get-auth-token` on the head prints it"
        raise ProbeError(Problem("VI725", "error", ("RAY_AUTH_TOKEN",), message, fix))
    if response.status >= 400:
        raise http.HttpError("status", url, f"{response.url} answers HTTP {response.status}", status=response.status)
    return response.json()


def _limit_problem(exc: Any) -> ProbeError:
    """A redirect to another origin or a body over the cap (VI726)."""
    return ProbeError(Problem("VI726", "error", ("address",), exc.message, exc.hint))


def probe_ray(dashboard: str, timeout: float = MAX_TIMEOUT_S, token: Optional[Token] = None,
              budget: float = COMMAND_BUDGET_S) -> Observed:
    """Nodes and resources of the Ray cluster behind `dashboard`, through its HTTP API only
    (with Ray's bearer token when one is given: Ray 2.59+ turns token authentication on by default).
    Each request ends within `timeout` seconds (at most 2), all of them within `budget` seconds."""
    from wizard.env.http import Deadline, HttpError

    timeout = min(timeout, MAX_TIMEOUT_S)
    deadline = Deadline(budget)
    shown = _redact(dashboard)
    parsed = urllib.parse.urlsplit(dashboard)
    try:
        port_ok = parsed.port is None or parsed.port > 0
    except ValueError:
        port_ok = False
    if parsed.scheme not in ("http", "https") or not parsed.hostname or not port_ok:
        raise ProbeError(Problem("VI710", "error", ("address",), f"not a dashboard URL ({shown!r})",
                                 "pass --address http://HEAD:8265"))
    try:
        version = _get(dashboard + "/api/version", timeout, token, deadline)
    except HttpError as exc:
        if exc.kind == "status":
            raise ProbeError(Problem(
                "VI711", "error", ("address",), f"{shown} answers but is not a Ray dashboard (HTTP {exc.status})",
                "pass the Ray dashboard URL, e.g. http://HEAD:8265")) from None
        if exc.kind in ("too_large", "redirect"):
            raise _limit_problem(exc) from None
        hint = exc.hint if exc.kind == "timeout" else (
            "start it (ray start --head ...) or pass --address http://HEAD:8265; "
            "for KubeRay: kubectl port-forward svc/<cluster>-head-svc 8265:8265")
        raise ProbeError(Problem("VI710", "error", ("address",), exc.message, hint)) from None
    except ValueError:
        version = None
    if not isinstance(version, dict) or "ray_version" not in version:
        raise ProbeError(Problem("VI711", "error", ("address",), f"{shown} answers but not as a Ray dashboard",
                                 "pass the Ray dashboard URL, e.g. http://HEAD:8265"))
    try:
        body = _get(dashboard + "/api/v0/nodes?detail=1&limit=10000", timeout, token, deadline)
        rows = body["data"]["result"]["result"]
    except HttpError as exc:
        if exc.kind in ("too_large", "redirect"):
            raise _limit_problem(exc) from None
        raise ProbeError(Problem(
            "VI711", "error", ("address",), f"Ray {version.get('ray_version')} at {shown}: the state API "
            f"did not list the nodes ({exc.message})",
            "the dashboard must run with its state API (ray[default]); retry when the head is fully up")) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ProbeError(Problem(
            "VI711", "error", ("address",), f"Ray {version.get('ray_version')} at {shown}: the state API "
            f"did not list the nodes ({type(exc).__name__}: {_redact(str(exc))})",
            "the dashboard must run with its state API (ray[default]); retry when the head is fully up")) from None
    nodes = []
    for row in rows:
        res = row.get("resources_total") or {}
        nodes.append(Node(
            node_id=str(row.get("node_id", "")), ip=str(row.get("node_ip", "")), alive=row.get("state") == "ALIVE",
            head=bool(row.get("is_head_node")), gpus=int(_accelerators(res)), cpus=int(res.get("CPU", 0)),
        ))
    used: Optional[float] = None
    try:
        status = _get(dashboard + "/api/cluster_status", timeout, token, deadline)
        usage = status["data"]["clusterStatus"]["loadMetricsReport"]["usage"]
        used = float(usage.get("GPU" if "GPU" in usage else "NPU", [0.0, 0.0])[0])
    except HttpError as exc:
        if exc.kind in ("too_large", "redirect"):
            raise _limit_problem(exc) from None
        used = None
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        used = None
    return Observed(shown, str(version.get("ray_version")), nodes, used)


def _accelerators(resources: Mapping[str, Any]) -> float:
    """A node's accelerators as verl counts them: Ray's GPU, else the NPU custom resource of Ascend nodes
    (verl single_controller/ray/base.py:230)."""
    return float(resources.get("GPU", 0) if "GPU" in resources else resources.get("NPU", 0))


def probe_this_machine(env: Mapping[str, str]) -> Observed:
    """What a local `ray.init` (cluster: local) would find here: NVML GPUs (limited by
    CUDA_VISIBLE_DEVICES) and the CPUs this process may use."""
    gpus = 0
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            gpus = int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        gpus = 0
    visible = _visible_devices(env)
    if visible is not None:
        gpus = min(gpus, visible)
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return Observed("this machine", None, [Node("local", "127.0.0.1", True, True, gpus, cpus)], None)


def _visible_devices(env: Mapping[str, str]) -> Optional[int]:
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return len([p for p in value.split(",") if p.strip() and p.strip() != "-1"])


# --- comparisons ---------------------------------------------------------------------------------

_NEED = ("trainer.nnodes", "trainer.n_gpus_per_node")


def compare(exp: Expected, obs: Observed) -> list[Problem]:
    """Findings for a config against a cluster's nodes (pure; the probes are done before)."""
    out: list[Problem] = []
    gpn, need = exp.gpus_per_node, exp.all_gpus
    rgpn, rnodes = exp.reward_gpus_per_node, exp.reward_nodes
    alive = obs.alive
    where = f"Ray at {obs.source}" if obs.source != "this machine" else "this machine"
    shape = ", ".join(f"{n.gpus} GPU/{n.cpus} CPU" for n in alive) or "no alive node"
    if obs.gpus < need:
        out.append(Problem(
            "VI712", "error", _NEED,
            f"{where} has {obs.gpus} GPU(s) on {len(alive)} node(s) ({shape}) but the config needs {need} "
            f"(trainer.nnodes={exp.nnodes} × trainer.n_gpus_per_node={gpn}"
            + (f" + the reward model's own pool of {rnodes} × {rgpn}" if exp.reward_gpus else "") + "); verl stops with "
            f"'Total available GPUs {obs.gpus} is less than total desired GPUs {need}'",
            "add the missing GPU nodes (each started with `ray start --address=<GCS>`), or re-plan for this cluster"
            + (f": nnodes={max(1, obs.gpus // gpn)}" if obs.gpus >= gpn else
               (f": nnodes=1, gpus_per_node={obs.gpus}" if obs.gpus else "")),
        ))
    elif gpn > 0:
        from wizard.verlspec.arithmetic import placement_groups

        fit_gpu = placement_groups([n.gpus for n in alive], gpn)
        fit = sum(min(n.gpus // gpn, n.cpus // (CPUS_PER_GPU_BUNDLE * gpn)) for n in alive)
        if fit_gpu < exp.nnodes:
            out.append(Problem(
                "VI713", "error", _NEED,
                f"verl places {exp.nnodes} group(s) of {gpn} GPUs, each on one node, but the nodes have "
                f"{[n.gpus for n in alive if n.gpus]} GPUs: only {fit_gpu} group(s) fit",
                "re-plan with gpus_per_node equal to the GPUs of the smallest GPU node and nnodes = number of GPU nodes",
            ))
        elif fit < exp.nnodes:
            out.append(Problem(
                "VI713", "error", _NEED,
                f"each group of {gpn} GPUs needs {CPUS_PER_GPU_BUNDLE * gpn} logical CPUs on the same node, but "
                f"the GPU nodes have {[(n.gpus, n.cpus) for n in alive if n.gpus]} (GPUs, CPUs): only {fit} "
                f"of {exp.nnodes} group(s) fit; verl's placement groups would wait forever",
                f"start each GPU node with `ray start --num-cpus` ≥ {CPUS_PER_GPU_BUNDLE * gpn + 1}",
            ))
        elif exp.reward_gpus and obs.gpus >= need:
            placed = _reward_groups_placed(exp, [n.gpus for n in alive])
            if placed < rnodes:
                out.append(Problem(
                    "VI764", "error", ("reward.reward_model.nnodes", "reward.reward_model.n_gpus_per_node"),
                    f"beside the trainer's {exp.nnodes} group(s) of {gpn} GPUs, the reward model's own pool needs "
                    f"{rnodes} group(s) of {rgpn} GPUs, each on one node, but the nodes have "
                    f"{[n.gpus for n in alive if n.gpus]} GPUs: only {placed} fit; its placement group would wait forever",
                    f"add {rnodes - placed} node(s) with ≥ {rgpn} free GPUs, or set reward.reward_model.n_gpus_per_node "
                    "to GPUs a node has left",
                ))
        if obs.gpus_used is not None and obs.gpus - obs.gpus_used < need:
            out.append(Problem(
                "VI716", "error", _NEED,
                f"{obs.gpus_used:g} of the {obs.gpus} GPUs are in use by other jobs or actors; "
                f"{obs.gpus - obs.gpus_used:g} free, the config needs {need}",
                "wait for them to finish (ray list actors / ray job list) or stop them",
            ))
        elif obs.gpus_used:
            out.append(Problem("VI716", "warning", _NEED,
                               f"{obs.gpus_used:g} of the {obs.gpus} GPUs are already in use",
                               "another job shares this cluster; the run fits beside it"))
    gpu_nodes = [n for n in alive if n.gpus]
    counts = sorted({n.gpus for n in gpu_nodes})
    if len(counts) > 1 or (counts and counts[0] != gpn):
        out.append(Problem(
            "VI714", "warning", ("trainer.n_gpus_per_node",),
            f"GPU nodes differ from the config: nodes have {[n.gpus for n in gpu_nodes]} GPUs, "
            f"the config assumes {gpn} on each of {exp.nnodes} node(s)",
            "verl needs the same GPU count on every node it uses; GPUs beyond the plan stay idle",
        ))
    if obs.cpus < exp.cpus_needed:
        out.append(Problem(
            "VI715", "error", _NEED,
            f"{where} has {obs.cpus} logical CPUs; verl needs ≥ {exp.cpus_needed} "
            f"({CPUS_PER_GPU_BUNDLE} per GPU × {need} + TransferQueue's {1 + exp.storage_units} actors) "
            "and hangs silently with fewer",
            f"start the nodes with more `ray start --num-cpus` (≥ {exp.cpus_needed} in total)",
        ))
    dead = len(obs.nodes) - len(alive)
    if dead:
        out.append(Problem("VI722", "info", (), f"{dead} node(s) are listed as DEAD", "ignored in the counts above"))
    return out


def _reward_groups_placed(exp: Expected, node_gpus: list[int]) -> int:
    """How many of the reward pool's groups (n_gpus_per_node GPUs on one node each) fit once the trainer's groups are
    placed, largest nodes first (Ray packs each group on one node: single_controller/ray/base.py)."""
    free = sorted(node_gpus, reverse=True)
    left = exp.nnodes
    for i, g in enumerate(free):
        take = min(left, g // exp.gpus_per_node) if exp.gpus_per_node else 0
        free[i] -= take * exp.gpus_per_node
        left -= take
    rgpn = exp.reward_gpus_per_node
    return sum(g // rgpn for g in free) if rgpn > 0 else 0


def env_problems(exp: Expected, env: Mapping[str, str]) -> list[Problem]:
    """The environment of this shell: RAY_ADDRESS shape, hand-set CUDA_VISIBLE_DEVICES."""
    out: list[Problem] = []
    raw = env.get("RAY_ADDRESS")
    if raw is not None:
        text = raw.strip()
        addr = _redact(raw)  # credentials in the address are never printed
        if re.match(r"^https?://", text):
            host = urllib.parse.urlparse(text).hostname or "HEAD"
            out.append(Problem(
                "VI717", "error", ("RAY_ADDRESS",),
                f"RAY_ADDRESS={addr} is the dashboard URL; ray.init in verl's main_ppo needs the GCS address",
                f"set RAY_ADDRESS={host}:6379 (the dashboard URL goes to `ray job submit --address` only)",
            ))
        elif text.startswith("ray://"):
            out.append(Problem(
                "VI718", "warning", ("RAY_ADDRESS",),
                f"RAY_ADDRESS={addr} goes through Ray Client; verl's driver then runs here, far from the cluster",
                "submit with `ray job submit` (ray/submit.sh) or use the GCS address HEAD:6379 on a cluster node",
            ))
        elif text not in ("auto", "local") and not re.match(r"^[^\s/:]+:\d+$", text):
            out.append(Problem("VI718", "warning", ("RAY_ADDRESS",), f"RAY_ADDRESS={addr!r} is not HOST:PORT",
                               "set RAY_ADDRESS to the GCS address, e.g. HEAD:6379"))
    visible = _visible_devices(env)
    if visible is not None:
        local = exp.cluster in (None, "local") and exp.nnodes == 1
        if local and visible != exp.gpus_per_node:
            out.append(Problem(
                "VI719", "error", ("CUDA_VISIBLE_DEVICES", "trainer.n_gpus_per_node"),
                f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} shows {visible} GPU(s) but the config needs "
                f"{exp.gpus_per_node} on this node",
                "unset CUDA_VISIBLE_DEVICES (Ray assigns GPUs itself), or re-plan with gpus_per_node="
                f"{visible}" if visible else "unset CUDA_VISIBLE_DEVICES",
            ))
        else:
            out.append(Problem(
                "VI719", "warning", ("CUDA_VISIBLE_DEVICES",),
                f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} is set by hand in this shell: a `ray start` "
                f"from here gives Ray only {visible} GPU(s)",
                "unset it before `ray start`; Ray assigns GPUs to verl's workers itself",
            ))
    return out


def config_problems(exp: Expected) -> list[Problem]:
    """CUDA_VISIBLE_DEVICES in the config's Ray runtime env, and drift in a bundle's cluster files."""
    out: list[Problem] = []
    env_vars = _select(exp.config, "ray_kwargs.ray_init.runtime_env.env_vars")
    if isinstance(env_vars, Mapping) and "CUDA_VISIBLE_DEVICES" in env_vars:
        out.append(Problem(
            "VI720", "error", ("ray_kwargs.ray_init.runtime_env.env_vars.CUDA_VISIBLE_DEVICES",),
            "the config sets CUDA_VISIBLE_DEVICES for every Ray worker; Ray assigns each worker its GPU itself",
            "remove it from ray_kwargs.ray_init.runtime_env.env_vars"))
    if exp.bundle is None:
        return out
    out.extend(bundle_problems(exp))
    return out


def bundle_problems(exp: Expected) -> list[Problem]:
    """A bundle's cluster files against its verl_config.yaml (they drift when edited by hand)."""
    import yaml

    assert exp.bundle is not None
    out: list[Problem] = []
    configmap: Optional[dict[str, Any]] = None
    cm_text = _read_small(exp.bundle / "k8s/configmap.yaml")
    if cm_text is not None:
        try:
            cm_doc = _bounded_yaml(None, cm_text)
        except yaml.YAMLError:
            cm_doc = None
        configmap = cm_doc if isinstance(cm_doc, dict) and cm_doc.get("kind") == "ConfigMap" else None
    for name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml"):
        path = exp.bundle / name
        if path.is_file():
            try:
                docs = [d for d in _bounded_yaml_all(path) if d]
            except yaml.YAMLError as exc:
                out.append(Problem("VI724", "error", (name,), f"{name} is not valid YAML ({type(exc).__name__})",
                                   "re-render the bundle"))
                continue
            for doc in docs:
                out.extend(manifest_problems(doc, exp.cluster_nodes, exp.gpus_per_node, source=name))
                out.extend(pod_storage_problems(doc, exp.config, source=name))
                out.extend(pod_tool_problems(doc, exp.config, exp.bundle, source=name, configmap=configmap))
    rt = exp.bundle / "ray/runtime_env.yaml"
    if rt.is_file():
        try:
            rt_doc = _bounded_yaml(rt) or {}
        except yaml.YAMLError:
            rt_doc = {}
        if isinstance(rt_doc, dict) and "CUDA_VISIBLE_DEVICES" in (rt_doc.get("env_vars") or {}):
            out.append(Problem("VI720", "error", ("ray/runtime_env.yaml",),
                               "ray/runtime_env.yaml sets CUDA_VISIBLE_DEVICES for every Ray worker",
                               "remove it; Ray assigns each worker its GPU itself"))
    for name in ("slurm/job.sbatch", "ray/submit.sh", "k8s/submit.sh"):
        path = exp.bundle / name
        if not path.is_file():
            continue
        values = dict(re.findall(r"^(NNODES|GPUS_PER_NODE)=(\d+)$", path.read_text(encoding="utf-8"), re.MULTILINE))
        want = {"NNODES": exp.cluster_nodes, "GPUS_PER_NODE": exp.gpus_per_node}
        for key, value in values.items():
            if int(value) != want[key]:
                out.append(Problem(
                    "VI724", "error", (name, "trainer.nnodes" if key == "NNODES" else "trainer.n_gpus_per_node"),
                    f"{name} has {key}={value} but verl_config.yaml says {want[key]}",
                    "re-render the bundle with verl-init so both come from one plan"))
    unique: dict[tuple[str, str], Problem] = {}  # k8s/rayjob.yaml and k8s/raycluster.yaml share one ConfigMap (VI769)
    for p in out:
        unique.setdefault((p.rule, p.message), p)
    return list(unique.values())




























# --- the whole check -----------------------------------------------------------------------------


@dataclass
class Report:
    expected: Expected
    observed: Optional[Observed]
    findings: list[Problem]
    probed: str = ""  # which address was probed, and where it came from

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.findings if p.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        return {"mode": "cluster", "target": self.expected.source, "ok": self.ok, "probed": self.probed,
                "expected": self.expected.as_dict(),
                "observed": self.observed.as_dict() if self.observed else None,
                "findings": [p.as_dict() for p in self.findings]}


def check_cluster(target: str | os.PathLike[str], address: Optional[str] = None, *,
                  env: Optional[Mapping[str, str]] = None, timeout: float = MAX_TIMEOUT_S) -> Report:
    """Compare `target` (bundle folder or verl config) with the Ray cluster at `address`.

    Without `address` (and no RAY_ADDRESS / RAY_API_SERVER_ADDRESS), a bundle planned for
    `cluster: local` is compared with this machine, where main_ppo would start its own Ray."""
    env = dict(os.environ if env is None else env)
    exp, findings = load_expected(target)
    if any(p.severity == "error" for p in findings):
        return Report(exp, None, findings)
    findings += config_problems(exp)
    findings += env_problems(exp, env)
    observed: Optional[Observed] = None
    explicit = address or env.get("RAY_API_SERVER_ADDRESS") or env.get("RAY_ADDRESS")
    if not explicit and exp.cluster == "local":
        observed = probe_this_machine(env)
        probed = "this machine (cluster: local; main_ppo starts its own Ray here)"
    else:
        url, origin = dashboard_url(address, env)
        probed = f"{_redact(url)} (from {origin})"
        try:
            observed = probe_ray(url, timeout, ray_auth_token(env))
        except ProbeError as exc:
            findings.append(exc.problem)
    if observed is not None:
        findings += compare(exp, observed)
        if observed.ray_version:
            local = _local_ray_version()
            if local and local != observed.ray_version:
                findings.append(Problem("VI721", "warning", ("ray",),
                                        f"the cluster runs Ray {observed.ray_version}, this machine {local}",
                                        "use the same Ray version on both sides of `ray job submit`"))
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda p: order[p.severity])
    return Report(exp, observed, findings, probed)


def _local_ray_version() -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version("ray")
    except metadata.PackageNotFoundError:
        return None


def format_report(report: Report) -> str:
    exp, obs = report.expected, report.observed
    lines = [f"verl-init check --mode cluster: {exp.source} expects {exp.nnodes} node(s) × {exp.gpus_per_node} GPUs "
             f"= {exp.n_gpus} GPUs" + (f" + {exp.reward_nodes} × {exp.reward_gpus_per_node} for the reward model's own pool"
                                       if exp.reward_gpus else "") + f" and ≥ {exp.cpus_needed} logical CPUs"
             + (f" (cluster: {exp.cluster})" if exp.cluster else "")]
    if report.probed:
        lines.append(f"  probed: {report.probed}")
    if obs is not None:
        ver = f"Ray {obs.ray_version} at " if obs.ray_version else ""
        lines.append(f"  found: {ver}{obs.source}: {len(obs.alive)} node(s), {obs.gpus} GPU(s), {obs.cpus} logical CPUs"
                     + (f", {obs.gpus_used:g} GPU(s) in use" if obs.gpus_used else ""))
    for p in report.findings:
        lines.append(f"  {p.severity}: {p.line()}")
    n_err = len(report.errors)
    n_warn = sum(1 for p in report.findings if p.severity == "warning")
    verdict = "ok" if report.ok else "FAILED"
    lines.append(f"cluster check {verdict}: {n_err} error(s), {n_warn} warning(s)")
    return "\n".join(lines)


def cli(argv: Iterable[str]) -> int:
    """`verl-init check --mode cluster TARGET [--address URL] [--json]`."""
    import argparse

    p = argparse.ArgumentParser(
        prog="verl-init check",
        description="Compare a bundle or verl config with the live environment. --mode cluster: the Ray cluster "
                    "at --address (dashboard URL; default $RAY_API_SERVER_ADDRESS, $RAY_ADDRESS, or "
                    f"{DEFAULT_DASHBOARD}); a cluster: local bundle without an address is compared with this machine.",
    )
    p.add_argument("--mode", required=True, choices=("cluster",), help="what to check against")
    p.add_argument("target", help="bundle folder or verl config YAML")
    p.add_argument("--address", help="Ray dashboard URL, e.g. http://HEAD:8265 (a GCS HOST:PORT probes HOST:8265)")
    p.add_argument("--timeout", type=float, default=MAX_TIMEOUT_S,
                   help=f"seconds (wall clock) per HTTP request to the dashboard (at most {MAX_TIMEOUT_S:g}; "
                        f"all requests within {COMMAND_BUDGET_S:g})")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    ns = p.parse_args(list(argv))
    report = check_cluster(ns.target, ns.address, timeout=ns.timeout)
    if ns.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(format_report(report))
    return 0 if report.ok else 1
