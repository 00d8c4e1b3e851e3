"""reward=sandbox (code RL, issue 15 item 5): the answers' rules, the data rows' test cases, and the reward path run
with verl 0.9.1's own sandbox scorer against a local run_code endpoint (the only fake: the network boundary)."""

from __future__ import annotations

import json
import socket

import pytest
from helpers_answers import answers

import wizard
from wizard.intent.errors import WizardError
from wizard.planner import dataprep
from wizard.planner.pipeline import plan
from wizard.smoketest.sandbox_stub import SandboxStandIn, probe_programs

URL = "http://127.0.0.1:8080/run_code"

# A tiny code dataset, written here (never downloaded): CodeContests' form (description, public_tests with
# input/output lists) and the inputs/outputs form verl's scorer reads.
ROWS = [
    {"question": "Read two integers a and b on one line; print a+b.",
     "answer": {"input": ["1 2\n", "10 -3\n"], "output": ["3\n", "7\n"]}},
    {"question": "Read a word; print it reversed.", "answer": {"inputs": ["abc\n"], "outputs": ["cba\n"]}},
]
RIGHT_SUM = "Here it is:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG_SUM = "```python\na, b = map(int, input().split())\nprint(a - b)\n```"


def write_rows(path, rows=ROWS, n=300):
    path.write_text("".join(json.dumps(rows[i % len(rows)]) + "\n" for i in range(n)))
    return path


def test_local_code_file_becomes_verl_rows(tmp_path):
    write_rows(tmp_path / "code.jsonl")
    p = plan(answers(reward="sandbox", sandbox_url=URL, dataset="./code.jsonl"), base_dir=str(tmp_path))
    prep = dataprep.resolve(p.answers, str(tmp_path))
    assert (prep.answer_format, prep.data_source, prep.ability) == ("code", "codecontests", "code")
    assert prep.data_source in dataprep.CODE_DATA_SOURCES
    truth = dataprep._ground_truth(json.dumps(ROWS[0]["answer"]), prep.extract)
    assert json.loads(truth) == {"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}
    assert dataprep.test_cases_problem(truth) is None
    prompt = dataprep.prompt_of(ROWS[0] | {"answer": json.dumps(ROWS[0]["answer"])}, prep)
    assert "```python" in prompt[-1]["content"]
    assert p.value("reward.sandbox_fusion.url") == URL
    assert p.value("reward.sandbox_fusion.max_concurrent") == 64
    assert p.value("reward.sandbox_fusion.memory_limit_mb") == 1024
    assert "sandbox" in p.roles and "512 calls in flight" in p.roles["sandbox"]


def test_rendered_prepare_data_writes_parseable_test_cases(tmp_path):
    """The bundle's own data/prepare_data.py (the template, not the mirror) on a local code file."""
    import runpy

    write_rows(tmp_path / "code.jsonl", ROWS + [{"question": "broken", "answer": {"inputs": ["1"], "outputs": []}}])
    files = wizard.render(plan(answers(reward="sandbox", sandbox_url=URL, dataset="./code.jsonl"),
                               base_dir=str(tmp_path)))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prepare_data.py").write_text(files["data/prepare_data.py"])
    mod = runpy.run_path(str(tmp_path / "data" / "prepare_data.py"), run_name="not_main")
    skipped: list = []
    rows = mod["convert"](mod["read_rows"](str(tmp_path / "code.jsonl")), "train", skipped)
    assert len(rows) == 200 and len(skipped) == 100
    assert "inputs and outputs" in skipped[0][2]
    for row in rows[:2]:
        assert row["data_source"] == "codecontests"
        assert dataprep.test_cases_problem(row["reward_model"]["ground_truth"]) is None
    # the planner's mirror (dataprep.prompt_of / _ground_truth) makes the same prompt and ground truth
    prep = dataprep.resolve(plan(answers(reward="sandbox", sandbox_url=URL, dataset="./code.jsonl"),
                                 base_dir=str(tmp_path)).answers, str(tmp_path))
    for raw, out in zip(ROWS, rows):
        assert dataprep.prompt_of(raw, prep) == out["prompt"]
        assert dataprep._ground_truth(json.dumps(raw["answer"]), prep.extract) == out["reward_model"]["ground_truth"]


BAD_CASES = [
    ("not json", "not JSON"),
    (json.dumps([1, 2]), "not an object"),
    (json.dumps({"inputs": ["1"]}), "no inputs/outputs"),
    (json.dumps({"inputs": [], "outputs": []}), "no test case"),
    (json.dumps({"inputs": ["1", "2"], "outputs": ["1"]}), "2 inputs but 1 outputs"),
    (json.dumps({"inputs": ["1"], "outputs": ["1"], "assert_case": ["a", "b"]}), "2 assert cases"),
]


@pytest.mark.parametrize("value,why", BAD_CASES)
def test_test_cases_verl_cannot_run_are_named(value, why):
    assert why in dataprep.test_cases_problem(value)


def test_verls_scorer_agrees_with_test_cases_problem(tmp_path):
    """Every case test_cases_problem refuses, verl's sandbox scorer scores 0 without a single call."""
    from verl.utils.reward_score import sandbox_fusion

    with SandboxStandIn() as sb:
        for value, _ in BAD_CASES:
            score, _meta = sandbox_fusion.compute_score(sb.url, None, 1024, RIGHT_SUM, value, continuous=True)
            assert score == 0.0
        assert sb.calls == []


def test_verls_sandbox_scorer_right_1_wrong_0_down_error():
    from verl.utils.reward_score import default_compute_score, sandbox_fusion

    truth = dataprep.code_tests(json.dumps(ROWS[0]["answer"]))
    with SandboxStandIn() as sb:
        # verl's routing: data_source codecontests + a URL → sandbox_fusion (continuous: share of cases passed)
        assert default_compute_score("codecontests", RIGHT_SUM, truth, sandbox_fusion_url=sb.url,
                                     memory_limit_mb=1024) == 1.0
        assert default_compute_score("codecontests", WRONG_SUM, truth, sandbox_fusion_url=sb.url,
                                     memory_limit_mb=1024) == 0.0
        assert len(sb.calls) == 4  # one call per test case
        call = sb.calls[0]
        assert call["language"] == "python" and call["memory_limit_MB"] == 1024 and call["stdin"] in ("1 2\n", "10 -3\n")
        # half right: 1 of 2 cases
        half = "```python\na, b = map(int, input().split())\nprint(3)\n```"
        assert default_compute_score("codecontests", half, truth, sandbox_fusion_url=sb.url) == 0.5
        # the smoke's probes: right passes every case of the row, wrong none
        right, wrong = probe_programs(truth)
        assert default_compute_score("codecontests", right, truth, sandbox_fusion_url=sb.url) == 1.0
        assert default_compute_score("codecontests", wrong, truth, sandbox_fusion_url=sb.url) == 0.0
        url = sb.url
    # server down: verl does not raise; it scores 0 and names the API error in each case's metadata
    with socket.socket() as s:
        s.connect_ex(("127.0.0.1", int(url.rsplit(":", 1)[1].split("/")[0])))
    score, meta = sandbox_fusion.compute_score(url, None, 1024, RIGHT_SUM, truth, continuous=True)
    assert score == 0.0
    assert {m["status"] for m in meta} == {"api_error"}
    assert all(m["api_request_error"].startswith("API Call Failed: API Request Error:") for m in meta)
    assert "Connection refused" in meta[0]["api_request_error"] or "Max retries" in meta[0]["api_request_error"]


def test_planned_config_reaches_verls_reward_manager(tmp_path, tiny_model):
    """verl's load_reward_manager binds the plan's reward.sandbox_fusion keys into its scorer."""
    from transformers import AutoTokenizer

    from verl.trainer.ppo.reward import load_reward_manager

    write_rows(tmp_path / "code.jsonl")
    with SandboxStandIn() as sb:
        p = plan(answers(reward="sandbox", sandbox_url=sb.url, sandbox_memory_mb=512, dataset="./code.jsonl"),
                 base_dir=str(tmp_path))
        from wizard.verify.harness import compose_bundle

        bundle = tmp_path / "bundle"
        wizard.write_bundle(wizard.render(p), str(bundle))
        cfg = compose_bundle(bundle)  # verl's own Hydra tree with the bundle's verl_config.yaml
        assert cfg.reward.sandbox_fusion.url == sb.url
        manager = load_reward_manager(cfg, AutoTokenizer.from_pretrained(str(tiny_model)))
        truth = dataprep.code_tests(json.dumps(ROWS[0]["answer"]))
        res = manager.compute_score(data_source="codecontests", solution_str=RIGHT_SUM, ground_truth=truth)
        assert float(res) == 1.0
        assert sb.calls and all(c["memory_limit_MB"] == 512 for c in sb.calls)


REJECTED = [
    ("VI580", dict(reward="sandbox", dataset="codecontests")),
    ("VI581", dict(reward="sandbox", dataset="codecontests", sandbox_url="ftp://host/run_code")),
    ("VI581", dict(reward="sandbox", dataset="codecontests", sandbox_url="http://bob:s3cret@host:8080/run_code")),
    ("VI581", dict(reward="sandbox", dataset="codecontests", sandbox_url="http://host:8080/run_code?token=s3cret")),
    ("VI581", dict(reward="sandbox", dataset="codecontests", sandbox_url="bob:s3cret@host:8080/run_code")),
    ("VI581", dict(reward="sandbox", dataset="codecontests", sandbox_url="http://bob:s3cret/x@host:8080/run_code")),
    ("VI581", dict(reward="sandbox", dataset="codecontests", sandbox_url="http://host:99999/run_code")),
    ("VI582", dict(reward="sandbox", sandbox_url=URL, dataset="codecontests", data_source="openai/gsm8k")),
    ("VI583", dict(reward="sandbox", sandbox_url=URL, dataset="gsm8k")),
    ("VI583", dict(reward="function", dataset="codecontests")),
    ("VI584", dict(sandbox_url=URL)),
    ("VI584", dict(reward="rule", sandbox_memory_mb=512)),
    ("VI761", dict(reward="sandbox", sandbox_url="http://localhost:8080/run_code", dataset="codecontests",
                   cluster="kuberay")),
    ("VI761", dict(reward="sandbox", sandbox_url=URL, dataset="codecontests", cluster="slurm", nnodes=2)),
]


@pytest.mark.parametrize("rule,changes", REJECTED, ids=[f"{r}-{i}" for i, (r, _) in enumerate(REJECTED)])
def test_bad_sandbox_answers_are_refused(rule, changes):
    with pytest.raises(WizardError) as info:
        plan(answers(**changes))
    assert rule in info.value.rules, info.value
    for problem in info.value.problems:
        assert problem.keys and problem.message and problem.hint and "\n" not in problem.line()
    assert "s3cret" not in str(info.value)  # credentials are redacted from every message


def test_kuberay_loopback_fix_names_the_in_cluster_service():
    with pytest.raises(WizardError) as info:
        plan(answers(reward="sandbox", sandbox_url=URL, dataset="codecontests", cluster="kuberay",
                     k8s_namespace="rl"))
    hint = next(p.hint for p in info.value.problems if p.rule == "VI761")
    assert "http://sandbox-fusion.rl.svc:8080/run_code" in hint


def test_rule_on_code_rows_warns_prime_code_is_unsandboxed():
    p = plan(answers(reward="rule", dataset="codecontests"))
    assert "VI585" in [f.rule for f in p.findings]
    assert "reward.sandbox_fusion.url" not in p.settings


def test_profile_code_sandbox_is_clean():
    p = wizard.plan(wizard.load_profile("code-sandbox"))
    assert not [f for f in p.findings if f.severity in ("error", "warning")], p.findings
    assert p.value("reward.sandbox_fusion.url") == URL
    assert p.value("data.train_files") == dataprep.PREPARED_TRAIN


def test_validate_dataset_flags_code_rows_verl_cannot_run(tmp_path):
    from wizard.env.datasets import Options, validate

    def row(i, truth):
        return {"data_source": "codecontests", "prompt": [{"role": "user", "content": f"task {i}"}],
                "ability": "code", "reward_model": {"style": "rule", "ground_truth": truth},
                "extra_info": {"index": i}}

    good = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})
    rows = [row(0, good), row(1, {"inputs": ["1"], "outputs": ["1"]}),  # a mapping: verl's scorer takes it too
            row(2, "print(3)"), row(3, json.dumps({"inputs": ["1", "2"], "outputs": ["3"]}))]
    path = tmp_path / "code.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = validate([str(path)], Options())
    found = [f for f in report.findings if f.rule == "VI586"]
    assert len(found) == 1 and found[0].severity == "error" and not report.ok
    assert [r for r, _ in found[0].examples] == [2, 3]  # 0-based rows
    assert "not JSON" in found[0].examples[0][1] and "2 inputs but 1 outputs" in found[0].examples[1][1]
    assert not [f for f in report.findings if f.rule == "VI524"]  # a mapping of test cases is not "not text" here
    path.write_text(json.dumps(rows[0]) + "\n")
    assert validate([str(path)], Options()).ok


# --- KubeRay: the in-cluster sandbox ---------------------------------------------------------------------------

IN_CLUSTER = dict(cluster="kuberay", sandbox_url="http://sandbox-fusion:8080/run_code", shared_pvc="rl-data")


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_kuberay_renders_a_sandbox_deployment_and_service_that_validate():
    """The Deployment's pod template against the Kubernetes PodTemplateSpec schema embedded in KubeRay's CRD (the
    strict validator tests/test_cluster_crd.py uses), the Service's selector against the pods' labels, and the
    RayJob / RayCluster of the same bundle against their CRDs."""
    import yaml
    from test_cluster_crd import _crd, cluster_files, validate_manifest

    import jsonschema

    files = cluster_files("code-sandbox", **IN_CLUSTER)
    deployment, service = [d for d in yaml.safe_load_all(files["k8s/sandbox-fusion.yaml"]) if d]
    _, schema = _crd("RayCluster")
    pod_template = schema["properties"]["spec"]["properties"]["headGroupSpec"]["properties"]["template"]
    errors = [e.message for e in jsonschema.Draft7Validator(pod_template).iter_errors(deployment["spec"]["template"])]
    assert errors == []
    assert (deployment["apiVersion"], deployment["kind"], service["apiVersion"], service["kind"]) == \
        ("apps/v1", "Deployment", "v1", "Service")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels == service["spec"]["selector"]
    assert service["metadata"]["name"] == "sandbox-fusion"
    assert service["spec"]["ports"][0]["port"] == 8080 == deployment["spec"]["template"]["spec"]["containers"][0][
        "ports"][0]["containerPort"]
    res = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"] == res["limits"] == {"cpu": "8", "memory": "10Gi"}  # 8 × 1024 MB + 2 GB
    for name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml"):
        assert validate_manifest(yaml.safe_load(files[name])) == []
    assert "kc apply -f \"$HERE/k8s/sandbox-fusion.yaml\"" in files["k8s/submit.sh"]
    assert "-f k8s/sandbox-fusion.yaml" in files["k8s/rayjob.yaml"]
    assert yaml.safe_load(files["k8s/configmap.yaml"])  # unchanged shape


def test_kuberay_with_a_url_outside_the_cluster_renders_no_sandbox():
    from test_cluster_crd import cluster_files

    files = cluster_files("code-sandbox", **{**IN_CLUSTER, "sandbox_url": "https://sandbox.example.com/run_code"})
    assert "k8s/sandbox-fusion.yaml" not in files
    assert "sandbox-fusion" not in files["k8s/submit.sh"]


# --- the smoke's sandbox checks (probe phase), with verl's scorer and verl's client ----------------------------------


def _smoke_ctx(tmp_path, url, **changes):
    from wizard.intent.profiles import load_answers
    from wizard.smoketest.context import SmokeContext, SmokeOptions, make_display
    from wizard.smoketest.report import SmokeReport
    from wizard.verify.harness import compose_bundle

    write_rows(tmp_path / "code.jsonl")
    p = plan(answers(reward="sandbox", sandbox_url=url, dataset="./code.jsonl", **changes), base_dir=str(tmp_path))
    bundle = tmp_path / "bundle"
    wizard.write_bundle(wizard.render(p), str(bundle))
    ctx = SmokeContext(str(bundle), SmokeOptions(), SmokeReport(bundle=str(bundle), engine="cpu"), make_display(None))
    ctx.cfg = compose_bundle(bundle)
    ctx.answers = load_answers(str(bundle / "verl-init.yaml"))
    return ctx


def _checks(ctx):
    return {c.name: c for c in ctx.report.checks}


def test_smoke_proves_the_reward_path_and_the_live_service(tmp_path):
    from wizard.smoketest.sandbox_stub import sandbox_checks

    with SandboxStandIn() as service:  # stands in for the user's SandboxFusion at sandbox_url
        ctx = _smoke_ctx(tmp_path, service.url, sandbox_memory_mb=768)
        sandbox_checks(ctx)
        assert any(c["code"] == "print('verl-init')" and c["memory_limit_MB"] == 768 for c in service.calls)
    checks = _checks(ctx)
    path = checks["sandbox reward path through verl's scorer"]
    assert path.ok is True and path.evidence["scores"] == [1.0, 0.0] and path.evidence["calls"] == 4
    assert checks["configured sandbox answers"].ok is True
    assert checks["programs written by the policy scored in the sandbox"].ok is None  # said, not claimed


def test_smoke_fails_when_the_configured_sandbox_is_down(tmp_path):
    from wizard.smoketest.sandbox_stub import sandbox_checks

    with SandboxStandIn() as gone:
        url = gone.url
    ctx = _smoke_ctx(tmp_path, url)
    sandbox_checks(ctx)
    live = _checks(ctx)["configured sandbox answers"]
    assert live.ok is False and "API Call Failed" in live.detail and "docker run" in live.hint


def test_smoke_does_not_try_a_cluster_url_from_here(tmp_path):
    from wizard.smoketest.sandbox_stub import sandbox_checks

    ctx = _smoke_ctx(tmp_path, "http://sandbox.example.invalid:8080/run_code", cluster="ray")
    sandbox_checks(ctx)
    checks = _checks(ctx)
    assert checks["configured sandbox answers"].ok is None and "not tried from here" in checks["configured sandbox answers"].detail
    assert checks["sandbox reward path through verl's scorer"].ok is True


# --- verl-init check on configs that set reward.sandbox_fusion ----------------------------------------------------


def test_check_flags_a_sandbox_verl_never_calls_and_passes_the_profile(tmp_path):
    from wizard.check.lint import check

    def rows(name, source):
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = tmp_path / name
        pq.write_table(pa.table({"data_source": [source] * 4, "prompt": ["q"] * 4}), path)
        return path

    base = ["algorithm.adv_estimator=grpo", "data.train_batch_size=4", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", "actor_rollout_ref.rollout.n=2",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", "trainer.n_gpus_per_node=1", "trainer.nnodes=1",
            "reward.sandbox_fusion.url=http://127.0.0.1:8080/run_code"]

    def ids(train):
        report = check(None, base + [f"data.train_files={train}", f"data.val_files={train}"], defaults="snapshot",
                       env={"HOME": "/nonexistent-home"}, nnodes=1, gpus_per_node=1, gpu_memory_gb=80)
        return [f.problem for f in report.findings]

    never = [p for p in ids(rows("math.parquet", "openai/gsm8k")) if p.rule == "VI885"]
    assert never and "openai/gsm8k" in never[0].message and never[0].severity == "warning"
    assert "VI885" not in [p.rule for p in ids(rows("code.parquet", "codecontests"))]
    secret = [p for p in check(None, base[:-1] + ["reward.sandbox_fusion.url=http://bob:s3cret@h:8080/run_code"],
                                defaults="snapshot", env={"HOME": "/x"}, nnodes=1, gpus_per_node=1,
                                gpu_memory_gb=80).findings if p.problem.rule == "VI884"]
    assert secret and "s3cret" not in secret[0].problem.line() and "***@" in secret[0].problem.message

    # the shipped profile's bundle is check-clean
    bundle = tmp_path / "bundle"
    wizard.write_bundle(wizard.render(wizard.plan(wizard.load_profile("code-sandbox"))), str(bundle))
    report = check(str(bundle / "verl_config.yaml"))
    assert not [f.problem.line() for f in report.findings if f.problem.severity in ("error", "warning")]


def test_codecontests_rows_as_the_hub_gives_them(tmp_path):
    """The code-sandbox bundle's prepare_data.py on rows shaped as deepmind/code_contests yields them (description,
    public_tests {input, output}; written here, not downloaded)."""
    import runpy

    files = wizard.render(wizard.plan(wizard.load_profile("code-sandbox")))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prepare_data.py").write_text(files["data/prepare_data.py"])
    mod = runpy.run_path(str(tmp_path / "data" / "prepare_data.py"), run_name="not_main")
    hub_rows = [{"name": "1_A", "description": "Print the sum of two integers.",
                 "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
                 "private_tests": {"input": [], "output": []}},
                {"name": "1_B", "description": "No tests here.", "public_tests": {"input": [], "output": []}}]
    skipped: list = []
    rows = mod["convert"](hub_rows, "train", skipped)
    assert len(rows) == 1 and skipped[0][1] == 1
    row = rows[0]
    assert (row["data_source"], row["ability"]) == ("codecontests", "code")
    assert json.loads(row["reward_model"]["ground_truth"]) == {"inputs": ["1 2\n"], "outputs": ["3\n"]}
    with SandboxStandIn() as sb:
        from verl.utils.reward_score import default_compute_score

        right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
        assert default_compute_score(row["data_source"], right, row["reward_model"]["ground_truth"],
                                     sandbox_fusion_url=sb.url) == 1.0
