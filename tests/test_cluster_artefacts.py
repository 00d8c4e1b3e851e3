"""Cluster artefacts (KubeRay, Slurm, plain Ray) are consistent with verl_config.yaml by construction."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cluster_crd import cluster_files

from wizard.intent.errors import WizardError

SHELLCHECK = shutil.which("shellcheck")
SCRIPTS = ("k8s/submit.sh", "slurm/job.sbatch", "ray/submit.sh")
CLUSTER_DIRS = ("k8s/", "slurm/", "ray/")


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def _workers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc["spec"].get("rayClusterSpec", doc["spec"])
    return spec["workerGroupSpecs"]


def _head(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"].get("rayClusterSpec", doc["spec"])["headGroupSpec"]


def _containers(group: dict[str, Any]) -> list[dict[str, Any]]:
    return group["template"]["spec"]["containers"]


# --- which files, per cluster ----------------------------------------------------------------------


@pytest.mark.parametrize("profile, expected", [
    ("cluster-8gpu", {"k8s/configmap.yaml", "k8s/rayjob.yaml", "k8s/raycluster.yaml", "k8s/submit.sh"}),
    ("dapo-32gpu", {"slurm/job.sbatch"}),
    ("ppo-16gpu", {"ray/submit.sh", "ray/runtime_env.yaml"}),
    ("megatron-64gpu", {"ray/submit.sh", "ray/runtime_env.yaml"}),
    ("single-node-8gpu", set()),
])
def test_files_per_cluster(profile, expected):
    files = cluster_files(profile)
    assert {n for n in files if n.startswith(CLUSTER_DIRS)} == expected
    assert "run.sh" in files and "verl_config.yaml" in files


@pytest.mark.parametrize("cluster", ["kuberay", "slurm", "ray"])
def test_every_cluster_type_renders_from_any_profile(cluster):
    extra = {"checkpoint_pvc": "ckpt"} if cluster == "kuberay" else {}  # else VI757: checkpoints lost with the pods
    files = cluster_files("single-node-8gpu", cluster=cluster, nnodes=2, **extra)
    assert any(n.startswith(CLUSTER_DIRS) for n in files)


# --- KubeRay ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("nnodes, gpn, prompts", [(1, 1, 32), (2, 4, 128), (3, 2, 96), (4, 8, 256), (16, 8, 1024)])
def test_worker_groups_carry_exactly_the_plans_gpus(nnodes, gpn, prompts):
    files = cluster_files("cluster-8gpu", nnodes=nnodes, gpus_per_node=gpn, prompts_per_step=prompts,
                          model="Qwen/Qwen2.5-0.5B-Instruct")
    config = yaml.safe_load(files["verl_config.yaml"])
    assert (config["trainer"]["nnodes"], config["trainer"]["n_gpus_per_node"]) == (nnodes, gpn)
    for name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml"):
        (doc,) = _docs(files[name])
        total = 0
        for group in _workers(doc):
            assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == nnodes
            assert group["numOfHosts"] == 1
            (c,) = _containers(group)
            req, lim = c["resources"]["requests"], c["resources"]["limits"]
            assert req == lim
            assert int(lim["nvidia.com/gpu"]) == gpn
            assert int(lim["cpu"]) >= 3 * gpn + 1
            assert group["rayStartParams"] == {"num-cpus": lim["cpu"], "num-gpus": str(gpn)}
            total += group["replicas"] * int(lim["nvidia.com/gpu"])
        assert total == nnodes * gpn
        head = _head(doc)
        assert head["rayStartParams"]["num-gpus"] == "0"
        for c in _containers(head):
            assert "nvidia.com/gpu" not in c["resources"]["limits"]
            assert "nvidia.com/gpu" not in c["resources"]["requests"]
        ray_cpus = int(head["rayStartParams"]["num-cpus"]) + sum(
            g["replicas"] * int(g["rayStartParams"]["num-cpus"]) for g in _workers(doc))
        assert ray_cpus >= 3 * nnodes * gpn + 9  # placement bundles + TransferQueue


def test_rayjob_runs_exactly_the_rendered_config():
    files = cluster_files("cluster-8gpu")
    (cm,) = _docs(files["k8s/configmap.yaml"])
    # byte for byte: the config, and the data script the pods' init containers run
    assert cm["data"] == {"verl_config.yaml": files["verl_config.yaml"], "prepare_data.py": files["data/prepare_data.py"]}
    (job,) = _docs(files["k8s/rayjob.yaml"])
    head = _containers(_head(job))[0]
    volumes = {v["name"]: v for v in _head(job)["template"]["spec"]["volumes"]}
    mounts = [m for m in head["volumeMounts"] if volumes[m["name"]].get("configMap", {}).get("name") == cm["metadata"]["name"]
              and "subPath" not in m]
    assert len(mounts) == 1 and mounts[0]["readOnly"] is True
    mount = mounts[0]["mountPath"]
    assert job["spec"]["entrypoint"] == f"python3 -m verl.trainer.main_ppo --config-path {mount} --config-name verl_config"
    assert job["spec"]["shutdownAfterJobFinishes"] is True
    assert job["spec"]["ttlSecondsAfterFinished"] == 3600
    (cluster,) = _docs(files["k8s/raycluster.yaml"])
    assert cluster["spec"] == job["spec"]["rayClusterSpec"]  # one spec, two manifests


def test_k8s_submit_runs_the_same_entrypoint_on_the_long_lived_cluster():
    files = cluster_files("cluster-8gpu")
    script = files["k8s/submit.sh"]
    words = re.search(r"^ENTRYPOINT=\((.*)\)$", script, re.MULTILINE).group(1).split()
    (job,) = _docs(files["k8s/rayjob.yaml"])
    assert " ".join(words) == job["spec"]["entrypoint"]
    assert "kc apply -f \"$HERE/k8s/configmap.yaml\" -f \"$HERE/k8s/raycluster.yaml\"" in script


def test_secrets_only_by_secret_key_ref():
    files = cluster_files("cluster-8gpu", logger=["console", "wandb"], k8s_secret="team-keys")
    for name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml"):
        (doc,) = _docs(files[name])
        for group in [_head(doc), *_workers(doc)]:
            env = {e["name"]: e for e in _containers(group)[0]["env"]}
            assert env["WANDB_API_KEY"] == {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {
                "name": "team-keys", "key": "WANDB_API_KEY", "optional": False}}}
            assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
            for e in env.values():
                if re.search(r"(^|_)(KEY|TOKEN|SECRET|PASSWORD)(_|$)", e["name"]):
                    assert "value" not in e
    no_wandb = cluster_files("cluster-8gpu")
    assert "WANDB_API_KEY" not in no_wandb["k8s/rayjob.yaml"].split("apiVersion", 1)[1]
    assert "require_secret 'WANDB_API_KEY'" not in no_wandb["k8s/submit.sh"]
    assert "require_secret WANDB_API_KEY" in files["k8s/submit.sh"]


@pytest.mark.parametrize("profile", ["cluster-8gpu", "dapo-32gpu", "ppo-16gpu", "megatron-64gpu"])
def test_no_hand_set_cuda_visible_devices(profile):
    for name, text in cluster_files(profile, logger=["console", "wandb"]).items():
        if name.startswith(CLUSTER_DIRS):
            assert not re.search(r"CUDA_VISIBLE_DEVICES\s*[=:]", text), name
            for doc in _docs(text) if name.endswith(".yaml") else []:
                assert "CUDA_VISIBLE_DEVICES" not in yaml.safe_dump(doc.get("spec", {}))


def test_names_are_dns1035_and_at_most_47_characters():
    long = "My Experiment: GRPO on Qwen2.5-72B-Instruct with a very long name indeed!"
    files = cluster_files("cluster-8gpu", experiment_name=long)
    (job,) = _docs(files["k8s/rayjob.yaml"])
    name = job["metadata"]["name"]
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 47
    assert name.startswith("my-experiment-grpo-on-qwen2-5-72b")
    files = cluster_files("cluster-8gpu", experiment_name="7b run", job_name="rl-7b")
    (job,) = _docs(files["k8s/rayjob.yaml"])
    assert job["metadata"]["name"] == "rl-7b"
    assert yaml.safe_load(files["k8s/configmap.yaml"])["metadata"]["name"] == "rl-7b-config"
    assert _docs(cluster_files("cluster-8gpu", experiment_name="7b run")["k8s/rayjob.yaml"])[0]["metadata"]["name"] \
        == "verl-7b-run"


@pytest.mark.parametrize("bad", ["Upper", "a" * 48, "-x", "x-", "a_b", "a\nb", "1abc"])
def test_job_name_is_checked_as_an_answer(bad):
    with pytest.raises(WizardError, match="VI102"):
        cluster_files("cluster-8gpu", job_name=bad)


def test_shared_pvc_and_shm():
    files = cluster_files("cluster-8gpu", shared_pvc="rl-shared", shm_size_gb=32, k8s_namespace="rl")
    (job,) = _docs(files["k8s/rayjob.yaml"])
    assert job["metadata"]["namespace"] == "rl"
    for group in [_head(job), *_workers(job)]:
        c = _containers(group)[0]
        volumes = {v["name"]: v for v in group["template"]["spec"]["volumes"]}
        mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
        # the config reads data/… and verl writes checkpoints/<project>/<experiment> relative to this folder
        assert c["workingDir"] == "/verl-init/run"
        assert mounts["/verl-init/run"] == {"name": "run", "persistentVolumeClaim": {"claimName": "rl-shared"}}
    worker = _containers(_workers(job)[0])[0]
    shm = {m["mountPath"]: m["name"] for m in worker["volumeMounts"]}["/dev/shm"]
    vol = {v["name"]: v for v in _workers(job)[0]["template"]["spec"]["volumes"]}[shm]
    assert vol == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32G"}}
    (plain,) = _docs(cluster_files("cluster-8gpu")["k8s/rayjob.yaml"])
    assert "/dev/shm" not in str(plain)
    assert {"name": "run", "emptyDir": {}} in _workers(plain)[0]["template"]["spec"]["volumes"]
    assert "NAMESPACE=rl" in files["k8s/submit.sh"]


def test_checkpoint_mount_follows_default_local_dir():
    from wizard.renderer.artefacts.cluster import checkpoint_mount

    assert checkpoint_mount("checkpoints/${trainer.project_name}/${trainer.experiment_name}") == "/verl-init/run/checkpoints"
    assert checkpoint_mount("/mnt/ckpt/${trainer.experiment_name}") == "/mnt/ckpt"
    assert checkpoint_mount("out/ckpt/run1") == "/verl-init/run/out/ckpt"


# --- rules on the cluster answers ------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["cluster-8gpu", "dapo-32gpu"])
def test_vi701_cpus_per_gpu(profile):
    with pytest.raises(WizardError, match="VI701") as err:
        cluster_files(profile, cpus_per_node=3)
    assert "cpus_per_node ≥" in str(err.value)


def test_vi702_logical_cpus_for_transfer_queue_kuberay():
    with pytest.raises(WizardError, match="VI702") as err:
        cluster_files("cluster-8gpu", nnodes=1, gpus_per_node=1, cpus_per_node=4, head_cpus=1,
                      model="Qwen/Qwen2.5-0.5B-Instruct")
    assert "head_cpus ≥ 8" in str(err.value)  # 3 × 1 + 9 = 12 = 1 + 4 + 7 short
    cluster_files("cluster-8gpu", nnodes=1, gpus_per_node=1, cpus_per_node=4, head_cpus=8,
                  model="Qwen/Qwen2.5-0.5B-Instruct")


def test_vi702_logical_cpus_for_transfer_queue_slurm():
    with pytest.raises(WizardError, match="VI702"):
        cluster_files("dapo-32gpu", nnodes=1, gpus_per_node=1, cpus_per_node=4, model="Qwen/Qwen2.5-0.5B",
                      prompts_per_step=64)
    # the default leaves room by construction: max(8 per GPU, what verl needs over the nodes)
    files = cluster_files("dapo-32gpu", nnodes=1, gpus_per_node=1, model="Qwen/Qwen2.5-0.5B", prompts_per_step=64)
    assert "#SBATCH --cpus-per-task=12" in files["slurm/job.sbatch"]


def test_vi703_shm_counts_against_pod_memory():
    with pytest.raises(WizardError, match="VI703"):
        cluster_files("cluster-8gpu", shm_size_gb=128, memory_per_node_gb=128)


def test_vi704_memory_within_the_node():
    with pytest.raises(WizardError, match="VI704"):
        cluster_files("dapo-32gpu", memory_per_node_gb=600, host_memory_gb=512)


def test_memory_defaults_from_host_memory():
    (job,) = _docs(cluster_files("cluster-8gpu", host_memory_gb=1000)["k8s/rayjob.yaml"])
    assert _containers(_workers(job)[0])[0]["resources"]["limits"]["memory"] == "900G"
    (job,) = _docs(cluster_files("cluster-8gpu")["k8s/rayjob.yaml"])
    assert _containers(_workers(job)[0])[0]["resources"]["limits"]["memory"] == "128G"  # 32 GB per GPU
    sbatch = cluster_files("dapo-32gpu", memory_per_node_gb=512)["slurm/job.sbatch"]
    assert "#SBATCH --mem=488281M" in sbatch


def test_cluster_answers_do_not_touch_local_bundles():
    base = cluster_files("single-node-8gpu")
    changed = cluster_files("single-node-8gpu", cpus_per_node=2, shm_size_gb=1000)
    assert {k: v for k, v in changed.items() if k != "verl-init.yaml"} == {
        k: v for k, v in base.items() if k != "verl-init.yaml"}  # verl-init.yaml records the answers


# --- Slurm -------------------------------------------------------------------------------------------


def test_sbatch_matches_the_plan():
    files = cluster_files("dapo-32gpu", slurm_partition="gpu,gpu-long", slurm_account="rl", slurm_time="2-00:00:00")
    text = files["slurm/job.sbatch"]
    directives = re.findall(r"^#SBATCH (\S+)$", text, re.MULTILINE)
    assert "--nodes=4" in directives and "--gpus-per-node=8" in directives and "--ntasks-per-node=1" in directives
    assert "--cpus-per-task=64" in directives and "--mem=244140M" in directives  # 256 GB in Slurm's MiB
    assert {"--partition=gpu,gpu-long", "--account=rl", "--time=2-00:00:00"} <= set(directives)
    first_command = next(i for i, line in enumerate(text.splitlines()) if line and not line.startswith("#"))
    assert all(i < first_command for i, line in enumerate(text.splitlines()) if line.startswith("#SBATCH"))
    assert re.search(r"^TOTAL_GPUS=32$", text, re.MULTILINE) and re.search(r"^WAIT_TIMEOUT=600$", text, re.MULTILINE)
    assert 'python3 -m verl.trainer.main_ppo --config-path "$BUNDLE" --config-name verl_config' in text
    assert "--num-gpus=" not in text  # Ray counts the GPUs Slurm gave each step


@pytest.mark.parametrize("answers", [{"slurm_partition": "gpu;rm"}, {"slurm_time": "1:00:00 --wrap=x"},
                                     {"slurm_account": "a b"}])
def test_slurm_answers_are_shape_checked(answers):
    with pytest.raises(WizardError, match="VI102"):
        cluster_files("dapo-32gpu", **answers)


# --- shell: bash -n and shellcheck -------------------------------------------------------------------

SCRIPT_VARIANTS = [
    ("cluster-8gpu", {}),
    ("cluster-8gpu", {"logger": ["console", "wandb"], "k8s_namespace": "ns", "image": "img:1"}),
    ("dapo-32gpu", {}),
    ("dapo-32gpu", {"image": "nvcr.io#verl/verl:0.9.1", "logger": ["console", "wandb"], "slurm_time": "04:00:00"}),
    ("ppo-16gpu", {}),
    ("megatron-64gpu", {"logger": ["wandb"]}),
]


def _scripts() -> list[tuple[str, str, str]]:
    out = []
    for profile, answers in SCRIPT_VARIANTS:
        for name, text in cluster_files(profile, **answers).items():
            if name in SCRIPTS:
                out.append((f"{profile}{'+' if answers else ''}:{name}", name, text))
    return out


@pytest.mark.parametrize("label, name, text", _scripts(), ids=lambda v: v if ":" in str(v) else "")
def test_scripts_pass_bash_n_and_shellcheck(label, name, text, tmp_path):
    path = tmp_path / Path(name).name
    path.write_text(text, encoding="utf-8")
    assert text.startswith("#!/usr/bin/env bash\n")
    r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert SHELLCHECK, "shellcheck is not installed (apt-get install shellcheck; .ci/run installs it)"
    r = subprocess.run([SHELLCHECK, "-s", "bash", "-S", "style", str(path)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout


# --- ray/submit.sh: the address shape is checked before anything is sent ------------------------------


@pytest.fixture(scope="module")
def ray_submit(tmp_path_factory) -> Path:
    from wizard.renderer.writer import write_bundle

    out = tmp_path_factory.mktemp("raybundle") / "b"
    write_bundle(cluster_files("ppo-16gpu"), out)
    return out / "ray" / "submit.sh"


def _run_submit(script: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=60,
                          env={**base, **(env or {})}, check=False)


@pytest.mark.parametrize("args, env, message", [
    ((), {}, "no Ray address"),
    (("--address", "10.1.2.3:6379"), {}, "looks like the GCS address"),
    ((), {"RAY_ADDRESS": "head.example:6379"}, "dashboard URL, e.g. http://head.example:8265"),
    (("--address=ray://head:10001",), {}, "Ray Client address"),
    (("--address", "http://head:8265/api/jobs"), {}, "not a dashboard URL of the form http://HOST:PORT"),
    (("--address", "auto"), {}, "not a cluster address"),
    (("--address", "head"), {}, "not a Ray dashboard URL"),
    (("trainer.total_epochs=1",), {}, "unknown argument"),
])
def test_ray_submit_refuses_wrong_address_shapes(ray_submit, args, env, message):
    r = _run_submit(ray_submit, *args, env=env)
    assert r.returncode == 1
    assert message in r.stderr, r.stderr


def test_ray_submit_accepts_a_dashboard_url_then_asks_the_cluster(ray_submit):
    venv_bin = str(Path(os.sys.executable).parent)
    r = _run_submit(ray_submit, "--address", "http://127.0.0.1:9/",
                    env={"PATH": venv_bin + os.pathsep + os.environ.get("PATH", "")})
    assert r.returncode == 1
    assert "no Ray dashboard answers at http://127.0.0.1:9" in r.stderr, r.stderr


def test_ray_runtime_env():
    files = cluster_files("ppo-16gpu")
    env = yaml.safe_load(files["ray/runtime_env.yaml"])
    assert env["env_vars"]["TORCH_NCCL_AVOID_RECORD_STREAMS"] == "1"
    assert env["env_vars"]["RAY_DEDUP_LOGS"] == "1"
    assert env["env_vars"]["TOKENIZERS_PARALLELISM"] == "true"
    assert not {"CUDA_VISIBLE_DEVICES", "RAY_ADDRESS", "WANDB_API_KEY", "HF_TOKEN"} & set(env["env_vars"])
    assert "working_dir" not in env  # ray/submit.sh uploads the bundle with --working-dir


# --- hostile answers stay data ---------------------------------------------------------------------

HOSTILE = st.one_of(
    st.sampled_from([
        "$(touch /tmp/pwned)", "`id`", "'; rm -rf / #", '"quoted"', "a\nb: c", "line\n# comment", "{{ 7 * 7 }}",
        "{% raw %}", "- item", "key: value", "&anchor *alias", "!!python/object:os.system", "x\r\ny", "tab\there",
        "\u2028sep\u2029", "nel\x85x", "back\\slash", "${HOME}", "%x %j", "...\n---", "\x00nul", "ünïcødé 😀",
    ]),
    st.text(min_size=1, max_size=30),
)


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(HOSTILE, st.text(), st.lists(st.text(max_size=20), max_size=5).map("\n".join)))
def test_manifest_yaml_round_trips_any_string(value):
    from wizard.renderer.artefacts.cluster import to_yaml

    doc = {"data": {"k": value, "nested": [{"v": value}]}}
    assert yaml.safe_load(to_yaml(doc)) == doc


def _values_block(text: str) -> str:
    return text.split("# >>> values", 1)[1].split("# <<< values", 1)[0]


def _shell_value(text: str, var: str) -> str:
    prog = _values_block(text) + f'\nprintf "%s" "${var}"'
    r = subprocess.run(["bash", "-c", prog], capture_output=True, timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode("utf-8", "surrogateescape")


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(image=HOSTILE, experiment=HOSTILE, project=HOSTILE, data=HOSTILE)
def test_hostile_answers_stay_single_values(image, experiment, project, data):
    if "\x00" in image:  # no shell variable can hold NUL; the YAML side is checked with the other examples
        image = image.replace("\x00", "")
        if not image:
            return
    answers = dict(image=image, experiment_name=experiment, project_name=project,
                   train_files=f"/data/{data}.parquet", val_files=f"/data/{data}-val.parquet")
    baseline = dict(image="img", experiment_name="e", project_name="p",
                    train_files="/data/t.parquet", val_files="/data/v.parquet")
    for profile in ("cluster-8gpu", "dapo-32gpu", "ppo-16gpu"):
        try:
            files = cluster_files(profile, **answers)
        except WizardError:
            continue  # rejected as an answer is fine; it never reaches a file
        plain = cluster_files(profile, **baseline)
        for name, text in files.items():
            if not name.startswith(CLUSTER_DIRS):
                continue
            if name.endswith(".yaml"):
                docs = _docs(text)
                if name == "k8s/configmap.yaml":
                    assert docs[0]["data"]["verl_config.yaml"] == files["verl_config.yaml"]
                if name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml"):
                    for group in [_head(docs[0]), *_workers(docs[0])]:
                        assert _containers(group)[0]["image"] == image
                # comments and values cannot add documents or keys
                assert [sorted(d) for d in docs] == [sorted(d) for d in _docs(plain[name])]
            else:
                # nothing broke out of its line: only a quoted IMAGE may hold line breaks of its own
                extra = image.count("\n") if name == "slurm/job.sbatch" else 0
                assert text.count("\n") == plain[name].count("\n") + extra, name
                r = subprocess.run(["bash", "-n"], input=text.encode(), capture_output=True, check=False)
                assert r.returncode == 0, (name, r.stderr)
                if name == "slurm/job.sbatch":
                    assert _shell_value(text, "IMAGE") == image
                if name == "ray/submit.sh":
                    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", _shell_value(text, "PREFIX"))


# --- k8s/submit.sh with a stand-in for kubectl -------------------------------------------------------

FAKE_KUBECTL = """#!/usr/bin/env bash
# kubectl stand-in: answers like a cluster whose RayCluster is ready with {gpus} GPUs; logs every call.
printf '%s\\n' "$*" >> "$KUBECTL_LOG"
args=("$@")
[ "${{args[0]}}" = --namespace ] && args=("${{args[@]:2}}")
case "${{args[0]}}" in
  get)
    case "${{args[1]}}" in
      secret) printf '%s' "$FAKE_SECRET_DATA" ;;
      pods) printf 'rc-head-x1' ;;
    esac ;;
  apply|wait) ;;
  exec)
    shift_to=$(printf '%s\\n' "${{args[@]}}" | grep -n -- '^--$' | head -1 | cut -d: -f1)
    cmd=("${{args[@]:$shift_to}}")
    case "${{cmd[0]}} ${{cmd[1]}}" in
      "cat "*) cat "$FAKE_CONFIG" ;;
      "ray status") printf 'Resources\\nTotal Usage:\\n 0.0/90.0 CPU\\n 0.0/{gpus}.0 GPU\\n' ;;
      "ray job") printf '%s\\n' "${{cmd[@]}}" > "$SUBMITTED" ;;
    esac ;;
esac
"""


def _k8s_submit(tmp_path: Path, gpus: int, secret_data: str = "eA==", **answers) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    from wizard.renderer.writer import write_bundle

    bundle = write_bundle(cluster_files("cluster-8gpu", **answers), tmp_path / "b")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text(FAKE_KUBECTL.format(gpus=gpus))
    (bin_dir / "kubectl").chmod(0o755)
    log, submitted = tmp_path / "kubectl.log", tmp_path / "submitted.txt"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "KUBECTL_LOG": str(log),
           "SUBMITTED": str(submitted), "FAKE_CONFIG": str(bundle / "verl_config.yaml"), "FAKE_SECRET_DATA": secret_data}
    r = subprocess.run(["bash", str(bundle / "k8s" / "submit.sh")], capture_output=True, text=True, env=env, timeout=120, check=False)
    return r, log, submitted


def test_k8s_submit_applies_waits_and_submits_the_config(tmp_path):
    r, log, submitted = _k8s_submit(tmp_path, gpus=8, k8s_namespace="rl", logger=["console", "wandb"])
    assert r.returncode == 0, r.stdout + r.stderr
    calls = log.read_text().splitlines()
    assert all(c.startswith("--namespace rl ") for c in calls)
    assert any("get secret verl-secrets -o jsonpath={.data.WANDB_API_KEY}" in c for c in calls)
    assert any(c.endswith("apply -f " + str(tmp_path / "b/k8s/configmap.yaml") + " -f "
                          + str(tmp_path / "b/k8s/raycluster.yaml")) for c in calls)
    assert any("wait --for=jsonpath={.status.state}=ready raycluster/grpo-qwen2-5-7b-instruct" in c for c in calls)
    words = submitted.read_text().split()
    (job,) = _docs(cluster_files("cluster-8gpu")["k8s/rayjob.yaml"])
    assert words[:3] == ["ray", "job", "submit"] and "--no-wait" in words
    assert " ".join(words[words.index("--") + 1:]) == job["spec"]["entrypoint"]


def test_k8s_submit_refuses_a_missing_secret(tmp_path):
    r, _, submitted = _k8s_submit(tmp_path, gpus=8, secret_data="", logger=["wandb"])
    assert r.returncode == 1 and "Secret verl-secrets has no key WANDB_API_KEY" in r.stderr
    assert not submitted.exists()


@pytest.mark.slow
def test_k8s_submit_waits_for_gpus_then_fails_clearly(tmp_path):
    r, _, submitted = _k8s_submit(tmp_path, gpus=4, gpu_wait_timeout_s=10)
    assert r.returncode == 1
    assert "after 10s Ray shows 4 of 8 GPUs (2 worker pod(s) × 4)" in r.stderr, r.stderr
    assert not submitted.exists()


def test_absolute_checkpoint_dir_gets_the_shared_pvc_too():
    import dataclasses

    import wizard
    from wizard.renderer.artefacts.cluster import layout, raycluster_spec
    from wizard.intent.profiles import load_profile

    lay = layout(wizard.plan(load_profile("cluster-8gpu"), base_dir="/work/runs"))
    spec = raycluster_spec(dataclasses.replace(lay, shared_pvc="pvc", checkpoint_mount="/mnt/ckpt", checkpoint_pvc=None))
    mounts = spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "run", "mountPath": "/mnt/ckpt", "subPath": "checkpoints"} in mounts


def _init(group: dict) -> list[dict]:
    return group["template"]["spec"].get("initContainers", [])


def test_pods_prepare_the_hub_dataset_before_ray_starts(tmp_path):
    """The config reads bundle-relative data/*.parquet: without a shared PVC every pod writes its own copy with
    the bundle's prepare_data.py (from the ConfigMap); with one, only the head; a local file cannot be."""
    files = cluster_files("cluster-8gpu")
    (job,) = _docs(files["k8s/rayjob.yaml"])
    (cm,) = _docs(files["k8s/configmap.yaml"])
    for group in [_head(job), *_workers(job)]:
        (init,) = _init(group)
        mounts = {m["mountPath"]: m["name"] for m in init["volumeMounts"]}
        volumes = {v["name"]: v for v in group["template"]["spec"]["volumes"]}
        assert volumes[mounts["/verl-init/config"]]["configMap"]["name"] == cm["metadata"]["name"]
        assert "emptyDir" in volumes[mounts["/verl-init/run"]]
        assert init["command"] == ["python3", "/verl-init/config/prepare_data.py", "--out", "/verl-init/run/data"]
        assert init["image"] == _containers(group)[0]["image"]
        assert not any("value" in e and e["name"] == "HF_TOKEN" for e in init["env"])  # the secret only by reference
    assert "every pod writes its own copy before Ray starts" in files["PLAN.md"]

    shared = cluster_files("cluster-8gpu", shared_pvc="rl-shared")
    (job,) = _docs(shared["k8s/rayjob.yaml"])
    assert len(_init(_head(job))) == 1 and all(not _init(w) for w in _workers(job))
    assert "the head pod writes them on PVC `rl-shared`" in shared["PLAN.md"]

    mine = tmp_path / "my.jsonl"
    mine.write_text("".join('{"question": "1 + %d?", "answer": "#### %d"}\n' % (i, i + 1) for i in range(300)))
    with pytest.raises(WizardError) as info:  # a file of this machine: no pod would see what prepare_data.py writes
        cluster_files("cluster-8gpu", dataset=str(mine))
    assert info.value.rules == ["VI756"] and "pod-local emptyDir" in info.value.problems[0].message
    local = cluster_files("cluster-8gpu", dataset=str(mine), shared_pvc="rl-shared")
    (job,) = _docs(local["k8s/rayjob.yaml"])
    (cm,) = _docs(local["k8s/configmap.yaml"])
    assert not _init(_head(job)) and set(cm["data"]) == {"verl_config.yaml"}
    assert "copy that onto PVC `rl-shared` for the pods" in local["PLAN.md"]


def test_the_bundle_reward_function_is_mounted_where_the_config_reads_it():
    files = cluster_files("cluster-8gpu", reward="function")
    cfg = yaml.safe_load(files["verl_config.yaml"])
    assert cfg["reward"]["custom_reward_function"]["path"] == "reward/reward_fn.py"
    (cm,) = _docs(files["k8s/configmap.yaml"])
    assert cm["data"]["reward_fn.py"] == files["reward/reward_fn.py"]
    (job,) = _docs(files["k8s/rayjob.yaml"])
    for group in [_head(job), *_workers(job)]:
        (mount,) = [m for m in _containers(group)[0]["volumeMounts"] if m.get("subPath") == "reward_fn.py"]
        assert mount["mountPath"] == "/verl-init/run/reward/reward_fn.py" and mount["readOnly"] is True
        volumes = {v["name"]: v for v in group["template"]["spec"]["volumes"]}
        assert volumes[mount["name"]]["configMap"]["name"] == cm["metadata"]["name"]
