"""Multi-turn tool RL on KubeRay: the ConfigMap carries the bundle's tool files (verl_init_tools/) to every pod.

- The manifests pass KubeRay's CRDs strictly and keep the cluster rules; the ConfigMap holds the tool files byte for
  byte, projected into `verl_init_tools/` of every pod's working folder (head and workers).
- Each pod's files, materialised from the manifests and the ConfigMap into a temporary folder as the kubelet would
  lay them out, load through verl's own `initialize_tools_from_config` from the pod's working folder, with only that
  folder on sys.path (what Ray gives its workers), and the tool scores an answer.
- A real Ray head started in such a folder (as KubeRay starts Ray in the container's workingDir) runs a job whose
  actor loads the tools, and `verl-init check --mode cluster` on the bundle against that head is clean.
- Kubernetes' 1 MiB ConfigMap limit is refused at render (VI767) with the PVC fix, which works; `check --mode cluster`
  flags manifests without the tool mount (VI768) and a ConfigMap whose copy differs from the bundle's (VI769).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli
from test_cluster_crd import cluster_files, validate_manifest

import wizard
from wizard.env.cluster import bundle_problems, load_expected, manifest_problems, pod_storage_problems, \
    pod_tool_problems
from wizard.intent.errors import WizardError

pytestmark = pytest.mark.slow  # ~15 s a test on 2 busy cores (verl's registries, the pods' files): full suite only

TOOLS = ("verl_init_tools/__init__.py", "verl_init_tools/tool_config.yaml", "verl_init_tools/gsm8k_tool.py")
ON_KUBERAY = dict(cluster="kuberay", checkpoint_pvc="verl-checkpoints")
PRE = "actor_rollout_ref.rollout"


def _files(**answers: Any) -> dict[str, str]:
    return cluster_files("multiturn-gsm8k-tool", **{**ON_KUBERAY, **answers})


def _docs(files: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {name: yaml.safe_load(files[name]) for name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml",
                                                          "k8s/configmap.yaml")}


def _templates(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    spec = doc["spec"]["rayClusterSpec"] if doc["kind"] == "RayJob" else doc["spec"]
    return [("head", spec["headGroupSpec"]["template"])] + [(g["groupName"], g["template"])
                                                            for g in spec["workerGroupSpecs"]]


def materialise(tpl: dict[str, Any], configmap: dict[str, Any], root: Path) -> Path:
    """The files the Ray container of a pod template sees, laid out under `root` as the kubelet mounts them: each
    ConfigMap volume's projection (its `items`, else every key; a `subPath` mount takes one file), an empty folder
    for any other volume (emptyDir, PVC). Returns the container's working folder under `root`."""
    spec = tpl["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    container = spec["containers"][0]
    for m in sorted(container["volumeMounts"], key=lambda m: len(m["mountPath"])):
        target = root / m["mountPath"].lstrip("/")
        volume = volumes[m["name"]]
        if "configMap" not in volume:
            target.mkdir(parents=True, exist_ok=True)
            continue
        assert volume["configMap"]["name"] == configmap["metadata"]["name"]
        items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in configmap["data"]]
        projected = {i["path"]: configmap["data"][i["key"]] for i in items}  # a missing key: KeyError, as the pod fails
        if "subPath" in m:
            projected = {"": projected[m["subPath"]]}
        for rel, text in projected.items():
            path = target / rel if rel else target
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return root / container["workingDir"].lstrip("/")


# What a Ray worker of the pod runs: verl's tool registry on the config's tool_config_path, relative to the working
# folder, with that folder on sys.path (Ray adds the driver's working folder to every worker's sys.path,
# ray/_private/worker.py:2715-2718; `python -I` adds nothing else), then one create/execute as tool_agent_loop.py does.
LOAD_TOOLS = r"""
import asyncio, inspect, json, os, sys
sys.path.insert(0, os.getcwd())
from verl.tools.tool_registry import initialize_tools_from_config
(tool,) = initialize_tools_from_config(sys.argv[1])
async def call(answer):
    iid, _ = await tool.create(create_kwargs={"ground_truth": "72"})
    try:
        return (await tool.execute(iid, {"answer": answer}))[2]["score"]
    finally:
        await tool.release(iid)
print(json.dumps({"name": tool.name, "file": inspect.getfile(type(tool)), "cwd": os.getcwd(),
                  "right": asyncio.run(call("72")), "wrong": asyncio.run(call("71"))}))
"""


# --- the manifests -------------------------------------------------------------------------------------------------

def test_tool_rl_on_kuberay_is_planned_not_refused():
    from wizard.intent.profiles import profile_answers

    plan = wizard.plan(wizard.make_answers({**profile_answers("multiturn-gsm8k-tool"), **ON_KUBERAY}))
    assert "VI565" not in {p.rule for p in plan.findings}  # the bundle's own gsm8k tool travels in the ConfigMap
    assert plan.value(f"{PRE}.multi_turn.tool_config_path") == "verl_init_tools/tool_config.yaml"
    assert "every pod's working folder" in plan.settings[f"{PRE}.multi_turn.tool_config_path"].reason


def test_your_own_tool_class_on_kuberay_is_a_warning_about_the_image():
    from wizard.intent.profiles import profile_answers

    plan = wizard.plan(wizard.make_answers({**profile_answers("multiturn-gsm8k-tool"), **ON_KUBERAY,
                                            "tool": "my_tools.Echo"}))
    (p,) = [p for p in plan.findings if p.rule == "VI565"]
    assert p.severity == "warning" and "import my_tools from their image" in p.message and "image" in p.hint
    assert "VI563" not in {x.rule for x in plan.findings}  # this machine says nothing about the pods' image


@pytest.mark.parametrize("answers", [{}, {"shared_pvc": "rl-shared", "nnodes": 2}, {"reward": "function"}],
                         ids=["profile", "shared-pvc-2-nodes", "reward-fn"])
def test_manifests_validate_strictly_and_carry_the_tool_files(answers):
    files = _files(**answers)
    docs = _docs(files)
    config = yaml.safe_load(files["verl_config.yaml"])
    nnodes = answers.get("nnodes", 1)
    cm = docs["k8s/configmap.yaml"]
    for path in TOOLS:  # byte for byte the bundle's files
        assert cm["data"][path.replace("/", ".")] == files[path], path
    for name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml"):
        doc = docs[name]
        assert validate_manifest(doc) == [], name
        assert manifest_problems(doc, nnodes, 8, source=name) == [], name
        assert pod_storage_problems(doc, config, source=name) == [], name
        assert pod_tool_problems(doc, config, source=name) == [], name
        for group, tpl in _templates(doc):
            mounts = {m["mountPath"]: m for m in tpl["spec"]["containers"][0]["volumeMounts"]}
            tools = mounts["/verl-init/run/verl_init_tools"]
            assert tools["readOnly"] is True and "subPath" not in tools, group  # a folder: ConfigMap updates reach it
            (volume,) = [v for v in tpl["spec"]["volumes"] if v["name"] == tools["name"]]
            assert sorted(i["path"] for i in volume["configMap"]["items"]) == \
                ["__init__.py", "gsm8k_tool.py", "tool_config.yaml"], group
    assert "verl_init_tools/ (the tool config and tool module" in files["k8s/rayjob.yaml"]
    assert "k8s/configmap.yaml puts `verl_init_tools/` into every pod's working folder" in files["PLAN.md"]


def test_single_turn_kuberay_bundles_carry_no_tool_files():
    files = cluster_files("cluster-8gpu")
    assert not [k for k in yaml.safe_load(files["k8s/configmap.yaml"])["data"] if k.startswith("verl_init_tools")]
    assert "verl-tools" not in files["k8s/rayjob.yaml"]


@pytest.mark.slow
def test_each_pod_loads_the_tools_through_verls_registry(tmp_path):
    """Every pod template of both manifests, materialised from the ConfigMap: verl's initialize_tools_from_config
    opens the config's relative tool_config_path in the working folder and imports the tool class from there."""
    files = _files(nnodes=2, shared_pvc="rl-shared")
    docs = _docs(files)
    tool_config = yaml.safe_load(files["verl_config.yaml"])["actor_rollout_ref"]["rollout"]["multi_turn"][
        "tool_config_path"]
    seen = 0
    for name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml"):
        for group, tpl in _templates(docs[name]):
            root = tmp_path / f"{Path(name).stem}-{group}"
            workdir = materialise(tpl, docs["k8s/configmap.yaml"], root)
            assert workdir == root / "verl-init" / "run"
            r = subprocess.run([sys.executable, "-I", "-c", LOAD_TOOLS, tool_config], cwd=workdir,
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, f"{name} {group}: {r.stderr[-3000:]}"
            out = json.loads(r.stdout.strip().splitlines()[-1])
            assert out["name"] == "calc_gsm8k_reward"
            assert out["file"] == str(workdir / "verl_init_tools" / "gsm8k_tool.py")  # the pod's copy, not another
            assert (out["right"], out["wrong"]) == (1.0, 0.0)
            seen += 1
    assert seen == 4  # head and workers of the RayJob and of the RayCluster


def test_a_pod_without_the_tool_mount_cannot_load_them(tmp_path):
    """The same load fails on a pod whose tool mount is removed: the check above can fail."""
    files = _files()
    docs = _docs(files)
    _, tpl = _templates(docs["k8s/rayjob.yaml"])[1]
    container = tpl["spec"]["containers"][0]
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != "verl-tools"]
    workdir = materialise(tpl, docs["k8s/configmap.yaml"], tmp_path / "pod")
    r = subprocess.run([sys.executable, "-I", "-c", LOAD_TOOLS, "verl_init_tools/tool_config.yaml"], cwd=workdir,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "verl_init_tools/tool_config.yaml" in r.stderr


# --- the bundle through verl and `check --mode cluster` -----------------------------------------------------------

@pytest.mark.verl
def test_kuberay_tool_bundle_is_accepted_by_verl(tmp_path, tiny_model):
    from wizard.verify.harness import verify_with_verl

    bundle = wizard.write_bundle(_files(), tmp_path / "b")
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, report.summary()
    assert "tool registry loads tool_config_path (tool_registry.py:initialize_tools_from_config)" in \
        {c.name for c in report.checks}


def test_cluster_check_flags_pods_without_the_tools_and_a_stale_configmap(tmp_path, cli_env):
    bundle = wizard.write_bundle(_files(), tmp_path / "b")
    assert bundle_problems(load_expected(bundle)[0]) == []
    tool = bundle / "verl_init_tools" / "gsm8k_tool.py"
    tool.write_text(tool.read_text() + "# edited after render\n")
    (p,) = bundle_problems(load_expected(bundle)[0])  # once, though both manifests mount the ConfigMap
    assert p.rule == "VI769" and "verl_init_tools.gsm8k_tool.py" in p.message and "undo the edit" in p.hint
    tool.write_text(_files()["verl_init_tools/gsm8k_tool.py"])
    rayjob = bundle / "k8s" / "rayjob.yaml"  # an older bundle: no tool mount in the pods
    doc = yaml.safe_load(rayjob.read_text())
    for _, tpl in _templates(doc):
        c = tpl["spec"]["containers"][0]
        c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "verl-tools"]
    rayjob.write_text(yaml.safe_dump(doc))
    found = [p for p in bundle_problems(load_expected(bundle)[0])]
    assert {p.rule for p in found} == {"VI768"} and {p.keys[0] for p in found} == {"k8s/rayjob.yaml"}
    assert any("verl_init_tools/tool_config.yaml" in p.message and "head, gpu-workers" in p.message for p in found)
    assert any("verl_init_tools/gsm8k_tool.py" in p.message for p in found)  # the module, too
    r = run_cli(["check", "--mode", "cluster", str(bundle), "--address", "http://127.0.0.1:9", "--timeout", "1"],
                env=cli_env)
    assert r.returncode == 1 and "[VI768]" in r.stdout


@pytest.mark.slow
def test_ray_started_in_the_pods_folder_loads_the_tools_and_the_cluster_check_is_clean(tmp_path, cli_env):
    """KubeRay starts Ray in the container's workingDir and submits the entrypoint there: a real Ray head started
    in the head pod's materialised working folder runs a job whose actor (a Ray worker, as verl's AgentLoopWorker)
    loads the tools from its working folder; `check --mode cluster` on the bundle against that head is clean."""
    from test_cluster_live import RAY, RayHead, _env

    files = _files()
    bundle = wizard.write_bundle(files, tmp_path / "b")
    docs = _docs(files)
    workdir = materialise(_templates(docs["k8s/rayjob.yaml"])[0][1], docs["k8s/configmap.yaml"], tmp_path / "head")
    driver = tmp_path / "driver" / "driver.py"
    driver.parent.mkdir()
    driver.write_text(
        "import asyncio, inspect, json, os, ray\n"
        "ray.init()\n"
        "@ray.remote(num_cpus=1)\n"
        "class AgentLoopWorker:  # a Ray worker process, as verl's agent-loop workers are\n"
        "    def load(self, path):\n"
        "        from verl.tools.tool_registry import initialize_tools_from_config\n"
        "        (tool,) = initialize_tools_from_config(path)\n"
        "        async def call(answer):\n"
        "            iid, _ = await tool.create(create_kwargs={'ground_truth': '72'})\n"
        "            return (await tool.execute(iid, {'answer': answer}))[2]['score']\n"
        "        return {'name': tool.name, 'file': inspect.getfile(type(tool)), 'cwd': os.getcwd(),\n"
        "                'right': asyncio.run(call('72')), 'wrong': asyncio.run(call('71'))}\n"
        "w = AgentLoopWorker.remote()\n"
        "print('RESULT', json.dumps(ray.get(w.load.remote('verl_init_tools/tool_config.yaml'))))\n")
    head = RayHead(num_cpus=40, num_gpus=8, cwd=str(workdir))  # the 8 GPUs of the profile's node, told to Ray
    try:
        r = subprocess.run([RAY, "job", "submit", "--address", head.dashboard, "--", "python3", str(driver)],
                           capture_output=True, text=True, env={**_env(), **head.auth_env}, timeout=300)
        assert r.returncode == 0 and "RESULT" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
        out = json.loads(r.stdout.split("RESULT", 1)[1].strip().splitlines()[0])
        assert out["cwd"] == str(workdir) and out["file"] == str(workdir / "verl_init_tools" / "gsm8k_tool.py")
        assert (out["name"], out["right"], out["wrong"]) == ("calc_gsm8k_reward", 1.0, 0.0)
        c = run_cli(["check", "--mode", "cluster", str(bundle), "--address", head.dashboard, "--json"],
                    env={**cli_env, **head.client_env})
        doc = json.loads(c.stdout)
        assert c.returncode == 0 and doc["ok"], c.stdout + c.stderr
        assert not [f for f in doc["findings"] if f["severity"] in ("error", "warning")], doc["findings"]
    finally:
        head.stop()


# --- Kubernetes' 1 MiB per ConfigMap -------------------------------------------------------------------------------

BIG_PROMPT = "Think step by step, then answer. " * 34000  # > 1 MiB written into data/prepare_data.py


def test_configmap_over_1_mib_is_refused_at_render_and_nothing_is_written(tmp_path, cli_env):
    with pytest.raises(WizardError) as exc:
        _files(system_prompt=BIG_PROMPT)
    (p,) = exc.value.problems
    assert p.rule == "VI767" and "over 1048576 bytes" in p.message and "prepare_data.py" in p.message
    assert "shared_pvc=" in p.hint
    from wizard.intent.profiles import profile_answers

    (tmp_path / "answers.yaml").write_text(yaml.safe_dump({"answers": {
        **profile_answers("multiturn-gsm8k-tool"), **ON_KUBERAY, "system_prompt": BIG_PROMPT}}))
    r = run_cli(["--answers", "answers.yaml", "--out", "b"], env=cli_env, cwd=tmp_path)
    assert r.returncode == 2 and not (tmp_path / "b").exists()
    (line,) = r.stderr.splitlines()
    assert line.endswith("[VI767]") and "k8s/configmap.yaml would hold" in line


def test_the_pvc_fix_of_vi767_renders(tmp_path):
    """The hint's fix: a local dataset file with shared_pvc; prepare_data.py runs here, the ConfigMap stays small."""
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"})
                                               + "\n" for i in range(300)))
    files = cluster_files("multiturn-gsm8k-tool", base_dir=str(tmp_path), **ON_KUBERAY, system_prompt=BIG_PROMPT,
                          shared_pvc="rl-shared", dataset="qa.jsonl")
    cm = yaml.safe_load(files["k8s/configmap.yaml"])
    assert "prepare_data.py" not in cm["data"] and "verl_init_tools.gsm8k_tool.py" in cm["data"]
    assert sum(len(v.encode()) for v in cm["data"].values()) < 1024 * 1024
