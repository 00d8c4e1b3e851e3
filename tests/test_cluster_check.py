"""`verl-init check --mode cluster` without a live cluster: expectations, comparisons, one test per rule.
(tests/test_cluster_live.py runs it against real Ray heads.)"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from test_cluster_crd import cluster_files

from wizard.env.cluster import (
    Expected,
    Node,
    Observed,
    bundle_problems,
    check_cluster,
    compare,
    dashboard_url,
    env_problems,
    load_expected,
)


def _obs(*nodes: tuple[int, int], used: float | None = 0.0) -> Observed:
    return Observed("http://h:8265", "2.60.0",
                    [Node(f"n{i}", f"10.0.0.{i}", True, i == 0, g, c) for i, (g, c) in enumerate(nodes)], used)


def _rules(problems) -> dict[str, str]:
    return {p.rule: p.severity for p in problems}


@pytest.fixture()
def bundle(tmp_path) -> Path:
    from wizard.renderer.writer import write_bundle

    return write_bundle(cluster_files("cluster-8gpu"), tmp_path / "b")


# --- what a config expects ---------------------------------------------------------------------------


def test_load_expected_from_bundle(bundle):
    exp, problems = load_expected(bundle)
    assert problems == []
    assert (exp.nnodes, exp.gpus_per_node, exp.n_gpus, exp.cluster) == (2, 4, 8, "kuberay")
    assert exp.cpus_needed == 3 * 8 + 9


def test_load_expected_from_config_file_uses_verl_defaults(tmp_path):
    cfg = tmp_path / "my.yaml"
    cfg.write_text("trainer:\n  nnodes: 3\ntransfer_queue:\n  backend:\n    SimpleStorage:\n"
                   "      num_data_storage_units: 4\n")
    exp, problems = load_expected(cfg)
    assert problems == [] and (exp.nnodes, exp.gpus_per_node) == (3, 8)  # verl's default n_gpus_per_node
    assert exp.cpus_needed == 3 * 24 + 1 + 4
    cfg.write_text("trainer:\n  nnodes: ${oc.env:NODES}\n")
    assert [p.rule for p in load_expected(cfg)[1]] == ["VI723"]


@pytest.mark.parametrize("content", [None, "a: [", "- 1\n- 2\n"])
def test_vi723_unreadable_target(tmp_path, content):
    target = tmp_path / "x.yaml"
    if content is not None:
        target.write_text(content)
    report = check_cluster(target, "http://127.0.0.1:9", env={})
    assert [p.rule for p in report.errors] == ["VI723"] and report.observed is None


# --- one test per rule ------------------------------------------------------------------------------

EXP = Expected("t", nnodes=2, gpus_per_node=4)  # 8 GPUs, ≥ 33 logical CPUs


def test_matching_cluster_has_no_findings():
    assert compare(EXP, _obs((0, 10), (4, 32), (4, 32))) == []


def test_vi712_too_few_gpus_says_exactly_why():
    (p,) = [p for p in compare(EXP, _obs((0, 8))) if p.rule == "VI712"]
    assert p.severity == "error"
    assert "has 0 GPU(s) on 1 node(s) (0 GPU/8 CPU)" in p.message
    assert "needs 8 (trainer.nnodes=2 × trainer.n_gpus_per_node=4)" in p.message
    assert "Total available GPUs 0 is less than total desired GPUs 8" in p.message


def test_vi713_gpus_do_not_fit_per_node():
    found = _rules(compare(EXP, _obs((0, 10), (2, 16), (2, 16), (2, 16), (2, 16))))
    assert found.get("VI713") == "error" and "VI712" not in found


def test_vi713_cpus_do_not_fit_per_node():
    found = compare(EXP, _obs((0, 40), (4, 8), (4, 13)))
    (p,) = [p for p in found if p.rule == "VI713"]
    assert "needs 12 logical CPUs on the same node" in p.message


def test_vi714_heterogeneous_nodes():
    assert _rules(compare(EXP, _obs((0, 10), (8, 32), (4, 32)))).get("VI714") == "warning"


def test_vi715_too_few_logical_cpus():
    found = compare(EXP, _obs((4, 13), (4, 13)))
    assert _rules(found).get("VI715") == "error"


def test_vi716_gpus_in_use():
    assert _rules(compare(EXP, _obs((0, 10), (4, 32), (4, 32), used=2.0))).get("VI716") == "error"
    assert _rules(compare(EXP, _obs((0, 10), (4, 32), (4, 32), (4, 32), used=2.0))).get("VI716") == "warning"


def test_vi722_dead_nodes_are_reported_not_counted():
    obs = _obs((0, 10), (4, 32), (4, 32))
    obs.nodes.append(Node("dead", "10.0.0.9", False, False, 8, 64))
    assert _rules(compare(EXP, obs)) == {"VI722": "info"}


@pytest.mark.parametrize("value, rule, severity", [
    ("http://head:8265", "VI717", "error"),
    ("https://head:8265/", "VI717", "error"),
    ("ray://head:10001", "VI718", "warning"),
    ("head 6379", "VI718", "warning"),
    ("head:6379", None, None),
    ("auto", None, None),
])
def test_vi717_vi718_ray_address_shape(value, rule, severity):
    found = _rules(env_problems(EXP, {"RAY_ADDRESS": value}))
    assert found == ({rule: severity} if rule else {})


def test_vi717_hint_names_the_gcs_address():
    (p,) = env_problems(EXP, {"RAY_ADDRESS": "http://head.example:8265"})
    assert "RAY_ADDRESS=head.example:6379" in p.hint


def test_vi719_hand_set_cuda_visible_devices():
    local = Expected("t", nnodes=1, gpus_per_node=4, cluster="local")
    assert _rules(env_problems(local, {"CUDA_VISIBLE_DEVICES": "0,1"})) == {"VI719": "error"}
    assert _rules(env_problems(local, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"})) == {"VI719": "warning"}
    assert _rules(env_problems(EXP, {"CUDA_VISIBLE_DEVICES": "0"})) == {"VI719": "warning"}


def test_vi720_cuda_visible_devices_in_the_config(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"trainer": {"nnodes": 1, "n_gpus_per_node": 1}, "ray_kwargs": {"ray_init": {
        "runtime_env": {"env_vars": {"CUDA_VISIBLE_DEVICES": "0"}}}}}))
    report = check_cluster(cfg, "http://127.0.0.1:9", env={})
    assert "VI720" in _rules(report.findings)


def test_vi720_cuda_visible_devices_in_runtime_env(tmp_path):
    from wizard.renderer.writer import write_bundle

    b = write_bundle(cluster_files("ppo-16gpu"), tmp_path / "b")
    rt = b / "ray" / "runtime_env.yaml"
    doc = yaml.safe_load(rt.read_text())
    doc["env_vars"]["CUDA_VISIBLE_DEVICES"] = "0,1"
    rt.write_text(yaml.safe_dump(doc))
    assert _rules(bundle_problems(load_expected(b)[0])) == {"VI720": "error"}


def test_vi724_bundle_files_drift_from_the_config(bundle):
    assert bundle_problems(load_expected(bundle)[0]) == []
    cfg = bundle / "verl_config.yaml"
    cfg.write_text(cfg.read_text().replace("n_gpus_per_node: 4", "n_gpus_per_node: 8"))
    found = bundle_problems(load_expected(bundle)[0])
    assert {"VI724", "VI731"} <= {p.rule for p in found}  # k8s/submit.sh values, manifests' GPU totals


def test_vi724_sbatch_drift(tmp_path):
    from wizard.renderer.writer import write_bundle

    b = write_bundle(cluster_files("dapo-32gpu"), tmp_path / "b")
    sb = b / "slurm" / "job.sbatch"
    sb.write_text(sb.read_text().replace("\nNNODES=4\n", "\nNNODES=3\n"))
    (p,) = bundle_problems(load_expected(b)[0])
    assert p.rule == "VI724" and "NNODES=3" in p.message


# --- addresses and the probe ---------------------------------------------------------------------------


@pytest.mark.parametrize("address, env, url", [
    (None, {}, "http://127.0.0.1:8265"),
    ("http://head:8265/", {}, "http://head:8265"),
    ("head:6379", {}, "http://head:8265"),
    ("ray://head:10001", {}, "http://head:8265"),
    (None, {"RAY_ADDRESS": "10.0.0.5:6379"}, "http://10.0.0.5:8265"),
    (None, {"RAY_ADDRESS": "10.0.0.5:6379", "RAY_API_SERVER_ADDRESS": "http://h2:8265"}, "http://h2:8265"),
])
def test_dashboard_url(address, env, url):
    assert dashboard_url(address, env)[0] == url


def test_dead_address_answers_fast(bundle):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    report = check_cluster(bundle, f"http://127.0.0.1:{port}", env={})
    assert [p.rule for p in report.errors] == ["VI710"]
    assert f"no Ray cluster answers at http://127.0.0.1:{port}" in report.errors[0].message


def test_silent_address_times_out_within_two_seconds(bundle):
    # a listening socket that never answers: the HTTP read must time out, not hang
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        report = check_cluster(bundle, f"http://127.0.0.1:{s.getsockname()[1]}", env={}, timeout=30)
    assert [p.rule for p in report.errors] == ["VI710"]


def test_vi711_not_a_ray_dashboard(bundle):
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<html>hello</html>" if self.path == "/api/version" else b""
            self.send_response(200 if self.path == "/api/version" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # quiet
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        report = check_cluster(bundle, f"http://127.0.0.1:{server.server_port}", env={})
    finally:
        server.shutdown()
        server.server_close()
    assert [p.rule for p in report.errors] == ["VI711"]


def test_local_bundle_without_address_is_compared_with_this_machine(tmp_path):
    from wizard.renderer.writer import write_bundle

    b = write_bundle(cluster_files("single-node-8gpu"), tmp_path / "b")
    report = check_cluster(b, None, env={})
    assert report.observed is not None and report.observed.source == "this machine"
    assert "VI712" in _rules(report.errors)  # this CPU box has no 8 GPUs


@pytest.mark.slow
def test_cli_json_and_exit_codes(bundle, cli_env):
    r = run_cli(["check", "--mode", "cluster", str(bundle), "--address", "http://127.0.0.1:9", "--json"], env=cli_env)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["expected"]["gpus"] == 8
    assert doc["findings"][0]["id"] == "VI710"
    assert set(doc["findings"][0]) == {"id", "severity", "keys", "message", "hint"}
    r = run_cli(["check", "--mode", "cluster", str(bundle), "--address", "http://127.0.0.1:9"], env=cli_env)
    assert r.returncode == 1 and "[VI710]" in r.stdout and "cluster check FAILED" in r.stdout
    r = run_cli(["check", str(bundle)], env=cli_env)  # without --mode cluster: lint the bundle, probe nothing
    assert r.returncode == 0 and "no errors" in r.stdout and "VI710" not in r.stdout, r.stdout + r.stderr
