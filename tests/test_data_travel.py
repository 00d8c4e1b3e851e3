"""The data walks of issue 14, as a user runs them (the CLI in a subprocess, real files):

- a missing local data file is refused at render (VI539), one line naming the key, the value and the fix,
  and nothing is written;
- a relative data path is stored relative to the bundle, so the bundle works when copied elsewhere with its
  data beside it, and a replay from any folder gives the same bytes; one that cannot travel is refused (VI540);
- KubeRay without shared_pvc: data of this machine (VI756) and checkpoints on pod-local storage (VI757) are
  refused; checkpoint_pvc renders manifests KubeRay's CRDs accept, whose printed next step checks the PVC first.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from test_cluster_crd import validate_manifest

from wizard.env.cluster import pod_storage_problems

SINGLE = ["--profile", "single-gpu", "--set", "prompts_per_step=8", "--set", "updates_per_step=1"]


def _qa(path: Path, n: int = 60) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"}) + "\n"
                            for i in range(n)))
    return path


def test_missing_dataset_file_is_refused_and_nothing_written(tmp_path, cli_env):
    r = run_cli([*SINGLE, "--set", "dataset=mydata/nope.jsonl", "--out", str(tmp_path / "x1")], env=cli_env,
                cwd=tmp_path)
    assert r.returncode == 2
    (line,) = r.stderr.splitlines()
    assert line.startswith("verl-init: error: dataset: ") and line.endswith("[VI539]")
    assert "mydata/nope.jsonl" in line and str(tmp_path / "mydata" / "nope.jsonl") in line
    assert "does not exist" in line and "check the path" in line
    assert not (tmp_path / "x1").exists()


def test_missing_train_file_is_refused_too(tmp_path, cli_env):
    _qa(tmp_path / "v.jsonl")
    r = run_cli([*SINGLE, "--set", "train_files=t.parquet", "--set", "val_files=v.jsonl", "--out",
                 str(tmp_path / "b")], env=cli_env, cwd=tmp_path)
    assert r.returncode == 2 and "train_files: " in r.stderr and "t.parquet" in r.stderr and "[VI539]" in r.stderr
    assert not (tmp_path / "b").exists()


def test_relative_data_path_travels_with_the_bundle(tmp_path, cli_env):
    """Render runs/x beside mydata/, copy both to another machine's folder, delete the originals: the copied
    bundle's prepare_data.py reads the copied data, and a replay there (from any folder) gives the same bytes."""
    here, there = tmp_path / "here", tmp_path / "there"
    _qa(here / "mydata" / "train.jsonl")
    r = run_cli([*SINGLE, "--set", "dataset=mydata/train.jsonl", "--out", "runs/x"], env=cli_env, cwd=here)
    assert r.returncode == 0, r.stderr
    bundle = here / "runs" / "x"
    assert yaml.safe_load((bundle / "verl-init.yaml").read_text())["answers"]["dataset"] == "../../mydata/train.jsonl"
    assert "INPUT_FILE = '../../mydata/train.jsonl'" in (bundle / "data" / "prepare_data.py").read_text()
    assert str(here) not in "".join(p.read_text() for p in bundle.rglob("*") if p.is_file())
    plan_md = (bundle / "PLAN.md").read_text()
    assert "`../../mydata/train.jsonl` (relative to the bundle folder)" in plan_md and "on this machine" in plan_md

    shutil.copytree(here, there)
    shutil.rmtree(here)
    copied = there / "runs" / "x"
    r = subprocess.run([sys.executable, str(copied / "data" / "prepare_data.py")], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (copied / "data" / "train.parquet").is_file() and "57 rows" in r.stdout

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = {p.relative_to(copied): p.read_bytes() for p in copied.rglob("*") if p.is_file()}
    r = run_cli(["--answers", str(copied / "verl-init.yaml"), "--out", str(copied), "--force"], env=cli_env,
                cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    after = {p.relative_to(copied): p.read_bytes() for p in copied.rglob("*") if p.is_file()}
    assert after == before  # every rendered file byte-identical, data/*.parquet kept


def test_replay_into_another_folder_rewrites_the_path_for_it(tmp_path, cli_env):
    _qa(tmp_path / "mydata" / "train.jsonl")
    assert run_cli([*SINGLE, "--set", "dataset=mydata/train.jsonl", "--out", "runs/x"], env=cli_env,
                   cwd=tmp_path).returncode == 0
    r = run_cli(["--answers", "runs/x/verl-init.yaml", "--out", "deeper/runs/y"], env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    answers = yaml.safe_load((tmp_path / "deeper/runs/y/verl-init.yaml").read_text())["answers"]
    assert answers["dataset"] == "../../../mydata/train.jsonl"


def test_relative_path_that_cannot_travel_is_refused(tmp_path, cli_env):
    _qa(tmp_path / "mydata" / "train.jsonl")
    top = tmp_path.parts[1]  # a folder that shares only / with tmp_path (nothing is written there: refused)
    out = next(Path(p) for p in ("/dev/shm", "/var/tmp", "/run", "/opt") if Path(p).is_dir() and Path(p).parts[1] != top)
    target = out / f"verl-init-test-{tmp_path.name}"
    r = run_cli([*SINGLE, "--set", "dataset=mydata/train.jsonl", "--out", str(target)], env=cli_env, cwd=tmp_path)
    assert r.returncode == 2 and not target.exists()
    (line,) = r.stderr.splitlines()
    assert "dataset: " in line and "share no folder but /" in line and "[VI540]" in line
    assert f"dataset={tmp_path}/mydata/train.jsonl" in line


# -- KubeRay without a shared PVC -----------------------------------------------------------------------------------


def test_kuberay_without_pvc_refuses_local_data_and_lost_checkpoints(tmp_path, cli_env):
    _qa(tmp_path / "mydata" / "train.jsonl", 300)
    r = run_cli(["--profile", "cluster-8gpu", "--set", "checkpoint_pvc=null", "--set", "dataset=mydata/train.jsonl",
                 "--out", "b"], env=cli_env, cwd=tmp_path)
    assert r.returncode == 2 and not (tmp_path / "b").exists()
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[0].endswith("[VI756]") and lines[1].endswith("[VI757]")
    assert "dataset=mydata/train.jsonl is a file on this machine" in lines[0] and "shared_pvc" in lines[0]
    assert "lost when the pods go" in lines[1] and "checkpoint_pvc=" in lines[1] and "save_freq=-1" in lines[1]
    # a hub dataset is prepared in the pods; checkpoints alone are the problem
    r = run_cli(["--profile", "cluster-8gpu", "--set", "checkpoint_pvc=null", "--out", "b"], env=cli_env, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("[VI757]") == 1 and "VI756" not in r.stderr


def test_kuberay_with_checkpoint_pvc_renders_valid_manifests_and_a_next_step_that_works(tmp_path, cli_env):
    r = run_cli(["--profile", "cluster-8gpu", "--set", "k8s_namespace=rl", "--out", "b"], env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "next:    cd b && kubectl -n rl get pvc verl-checkpoints && kubectl -n rl apply -f k8s/configmap.yaml " \
           "-f k8s/rayjob.yaml" in r.stdout
    bundle = tmp_path / "b"
    config = yaml.safe_load((bundle / "verl_config.yaml").read_text())
    for name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml"):
        (doc,) = [d for d in yaml.safe_load_all((bundle / name).read_text()) if d]
        assert validate_manifest(doc) == [], name
        assert pod_storage_problems(doc, config, source=name) == [], name
        spec = doc["spec"]["rayClusterSpec"] if doc["kind"] == "RayJob" else doc["spec"]
        for tpl in [spec["headGroupSpec"]["template"]] + [g["template"] for g in spec["workerGroupSpecs"]]:
            volumes = {v["name"]: v for v in tpl["spec"]["volumes"]}
            mounts = {m["mountPath"]: m["name"] for m in tpl["spec"]["containers"][0]["volumeMounts"]}
            assert volumes[mounts["/verl-init/run/checkpoints"]]["persistentVolumeClaim"] == \
                {"claimName": "verl-checkpoints"}
    assert "kubectl -n rl get pvc verl-checkpoints" in (bundle / "PLAN.md").read_text()


def test_kuberay_with_shared_pvc_and_local_data_says_to_copy_it_first(tmp_path, cli_env):
    _qa(tmp_path / "mydata" / "train.jsonl", 300)
    r = run_cli(["--profile", "cluster-8gpu", "--set", "shared_pvc=rl-shared", "--set", "dataset=mydata/train.jsonl",
                 "--out", "b"], env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "next:    cd b && python3 data/prepare_data.py" in r.stdout
    assert "copy data/ onto PVC rl-shared" in r.stdout
    assert "then: kubectl get pvc rl-shared verl-checkpoints && kubectl apply" in r.stdout
    assert "copy that onto PVC `rl-shared` for the pods" in (tmp_path / "b" / "PLAN.md").read_text()


@pytest.mark.slow
def test_cluster_check_flags_manifests_whose_pods_lose_data_or_checkpoints(tmp_path, cli_env):
    """An edited (or older) bundle: the working folder is an emptyDir, no prepare-data, no checkpoint PVC."""
    r = run_cli(["--profile", "cluster-8gpu", "--out", "b"], env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rayjob = tmp_path / "b" / "k8s" / "rayjob.yaml"
    (doc,) = [d for d in yaml.safe_load_all(rayjob.read_text()) if d]
    spec = doc["spec"]["rayClusterSpec"]
    for tpl in [spec["headGroupSpec"]["template"]] + [g["template"] for g in spec["workerGroupSpecs"]]:
        tpl["spec"].pop("initContainers")
        tpl["spec"]["volumes"] = [v for v in tpl["spec"]["volumes"] if v["name"] != "checkpoints"]
        for c in tpl["spec"]["containers"]:
            c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "checkpoints"]
    rayjob.write_text(yaml.safe_dump(doc))
    r = run_cli(["check", "--mode", "cluster", "b", "--address", "http://127.0.0.1:9", "--timeout", "1"],
                env=cli_env, cwd=tmp_path)
    assert r.returncode == 1
    assert "[VI759]" in r.stdout and "does not reach the pods" in r.stdout and "shared_pvc" in r.stdout
    assert "[VI760]" in r.stdout and "lost when the pods go" in r.stdout
    r = run_cli(["check", "b"], env=cli_env, cwd=tmp_path)  # the linter: no advice to run prepare_data.py here
    assert "run: python3" not in r.stdout and "pod-local emptyDir" in r.stdout
