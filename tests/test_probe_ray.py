"""The Ray probe (wizard.env.probe → wizard.env.cluster's dashboard prober) against real local Ray nodes, and a dead
address. The head is started by the test (`ray start --head --block` on free ports, its own temp folder) with a
second node of a different GPU count, and stopped by its process group — never `ray stop`.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from test_cluster_live import RAY, TOKEN, RayHead

from wizard.env import doctor
from wizard.env.probe import probe_all, probe_ray_cluster
from wizard.cli.interactive.questions import (
    Context,
    default_cluster,
    default_gpus_per_node,
    default_nnodes,
)


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --- a dead address: fast, no Ray needed -------------------------------------------------------------------


def test_dead_address_is_reported_quickly():
    env = {"RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{closed_port()}"}
    r = probe_ray_cluster(env)
    assert not r.found and r.explicit and r.problem is not None and r.problem.rule == "VI710"
    assert [p.rule for p in r.findings()] == ["VI710"]
    assert "no Ray cluster answers at" in r.describe()


def test_no_address_and_no_local_head_is_not_a_problem(monkeypatch):
    import wizard.env.cluster as cc

    monkeypatch.setattr(cc, "DEFAULT_DASHBOARD", f"http://127.0.0.1:{closed_port()}")
    r = probe_ray_cluster({})
    assert not r.found and not r.explicit and r.findings() == []
    assert r.describe().startswith("no Ray cluster (RAY_ADDRESS is unset")


def test_a_gcs_address_is_probed_on_its_dashboard_port():
    r = probe_ray_cluster({"RAY_ADDRESS": f"127.0.0.1:{closed_port()}"})
    assert r.url == "http://127.0.0.1:8265" and "not a dashboard URL" in r.origin


def test_black_holed_address_is_bounded():
    """A dashboard port that accepts connections and never answers (on this machine, never another address)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        p = probe_all({"RAY_ADDRESS": f"http://127.0.0.1:{port}"}, gpu_timeout=1.5, ray_timeout=1.5,
                      request_timeout=1.0)
    assert not p.ray.found
    assert "timed out" in p.ray.describe() or "did not answer" in p.ray.describe(), p.ray.describe()


# --- a live cluster ------------------------------------------------------------------------------------------


Head = RayHead  # token-authenticated by default, as Ray 2.59+ runs a local head


@pytest.fixture(scope="module")
def two_nodes():
    assert RAY, "the ray CLI is not installed (pip install -e '.[verl]')"
    head = Head(num_cpus=4, num_gpus=2)
    try:
        head.add_worker(num_cpus=2, num_gpus=1)
        yield head
    finally:
        head.stop()


@pytest.mark.slow
def test_live_cluster_nodes_gpus_and_version(two_nodes):
    from importlib import metadata

    r = probe_ray_cluster({"RAY_API_SERVER_ADDRESS": two_nodes.dashboard, **two_nodes.client_env})
    assert r.found and r.explicit and r.url == two_nodes.dashboard
    assert r.observed.ray_version == metadata.version("ray")
    assert sorted(n.gpus for n in r.gpu_nodes) == [1, 2] and len(r.observed.alive) == 2
    assert r.gpus_per_node == 1
    (vi808,) = [p for p in r.findings() if p.rule == "VI747"]
    assert "same GPU count on every node" in vi808.message and "gpus_per_node=1" in vi808.hint
    assert f"Ray {r.observed.ray_version} at {two_nodes.dashboard}: 2 node(s), 3 GPU(s)" in r.describe()


@pytest.mark.slow
def test_live_cluster_sets_the_wizard_defaults(two_nodes):
    probes = probe_all({"RAY_API_SERVER_ADDRESS": two_nodes.dashboard, **two_nodes.client_env})
    ctx = Context(probes=probes, base_dir="/r")
    assert default_cluster(ctx) == "ray"
    ctx.answers["cluster"] = "ray"
    assert (default_nnodes(ctx), default_gpus_per_node(ctx)) == (2, 1)


@pytest.mark.slow
def test_live_cluster_in_the_questionnaire(two_nodes, tmp_path, monkeypatch):
    from test_interactive import ENTER, drive, typed

    probes = probe_all({"RAY_API_SERVER_ADDRESS": two_nodes.dashboard, **two_nodes.client_env})
    r = drive(tmp_path, monkeypatch, {"gpu_memory_gb": typed("80"), "prompts_per_step": "32" + ENTER}, probes)
    assert r.rc == 0, r.out
    a = r.answers()
    assert (a["cluster"], a["nnodes"], a["gpus_per_node"]) == ("ray", 2, 1)
    assert "VI747" in r.out
    assert f"ray/submit.sh --address {two_nodes.dashboard}" in r.out
    assert (r.bundle() / "ray" / "submit.sh").is_file()


@pytest.mark.slow
def test_doctor_with_a_dashboard_url_in_ray_address(two_nodes):
    doc = doctor.collect({"RAY_ADDRESS": two_nodes.dashboard, **two_nodes.client_env})
    d = doc.as_dict()
    assert d["ray"]["found"] and d["ray"]["observed"]["alive_nodes"] == 2
    ids = {f["id"] for f in d["findings"]}
    assert "VI717" in ids and "VI747" in ids  # RAY_ADDRESS must name the GCS; nodes differ
    text = doctor.format_text(doc)
    assert re.search(r"\n  node \S+ \(head\): 2 GPU, 4 CPU\n", text) and re.search(r"\n  node \S+: 1 GPU, 2 CPU\n", text), text


@pytest.mark.slow
def test_a_token_protected_dashboard_is_named_as_such(tmp_path):
    """Ray 2.59+ with token auth answers 401 without the token: the probe says so (VI725), doctor says what it
    means (VI748); with RAY_AUTH_TOKEN the probe sees the cluster, and the token is never printed."""
    assert RAY, "the ray CLI is not installed (pip install -e '.[verl]')"
    head = Head(num_cpus=2, num_gpus=0, token=TOKEN)
    try:
        env = {"RAY_API_SERVER_ADDRESS": head.dashboard, "HOME": str(tmp_path)}
        r = probe_ray_cluster(env)
        assert not r.found and r.problem is not None and r.problem.rule == "VI725" and "HTTP 401" in r.problem.message
        doc = doctor.collect(env)
        ids = {f.rule for f in doc.findings}
        assert {"VI725", "VI748"} <= ids
        env["RAY_AUTH_TOKEN"] = TOKEN
        r = probe_ray_cluster(env)
        assert r.found and r.observed.cpus == 2
        doc = doctor.collect(env)
        assert doc.environment["RAY_AUTH_TOKEN"] == "(set)" and TOKEN not in doctor.format_text(doc)
        assert "VI748" not in {f.rule for f in doc.findings}
    finally:
        head.stop()
