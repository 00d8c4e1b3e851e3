"""Issue 27 item 7: `--force` over a bundle of another cluster type removes the old render's files the new one does
not render (known from the old bundle's manifest, .verl-init-files.json) and keeps every user file, including a
rendered file the user edited."""

from __future__ import annotations

import json

import wizard
from wizard.intent.answers import make_answers
from wizard.renderer.writer import MANIFEST

BASE = dict(nnodes=2, gpus_per_node=8, gpu_memory_gb=80, model="Qwen/Qwen2.5-7B-Instruct", dataset="gsm8k")


def render(tmp_path, force=False, **changes):
    plan = wizard.plan(make_answers({**BASE, **changes}), base_dir=str(tmp_path))
    return wizard.write_bundle(wizard.render(plan), tmp_path / "b", force=force)


def test_force_removes_the_old_renders_stale_files_and_keeps_user_files(tmp_path):
    old = render(tmp_path, cluster="kuberay", k8s_secret="hf", shared_pvc="shared")
    assert (old / "k8s" / "rayjob.yaml").is_file()
    recorded = json.loads((old / MANIFEST).read_text())["files"]
    assert "k8s/rayjob.yaml" in recorded and "PLAN.md" in recorded
    (old / "notes.txt").write_text("mine")
    (old / "data").mkdir(exist_ok=True)
    (old / "data" / "train.parquet").write_bytes(b"PAR1")
    edited = sorted(n for n in recorded if n.startswith("k8s/") and n != "k8s/rayjob.yaml")[0]
    (old / edited).write_text("# my edit\n")
    new = render(tmp_path, force=True, cluster="ray")
    assert not (new / "k8s" / "rayjob.yaml").exists()  # another run's manifest: gone
    assert (new / "notes.txt").read_text() == "mine" and (new / "data" / "train.parquet").read_bytes() == b"PAR1"
    assert (new / edited).read_text() == "# my edit\n"  # edited since it was rendered: the user's now
    assert "k8s/rayjob.yaml" not in json.loads((new / MANIFEST).read_text())["files"]


def test_a_bundle_without_a_manifest_keeps_everything(tmp_path):
    old = render(tmp_path, cluster="kuberay", k8s_secret="hf", shared_pvc="shared")
    (old / MANIFEST).unlink()
    new = render(tmp_path, force=True, cluster="ray")
    assert (new / "k8s" / "rayjob.yaml").is_file()


def _vi877(bundle):
    from wizard.check.lint import check

    report = check(str(bundle), defaults="snapshot", env={"HOME": "/nonexistent-home"})
    return [f.problem for f in report.findings if f.problem.rule == "VI879"]


def test_check_bundle_flags_cluster_files_that_disagree_with_the_config(tmp_path):
    import shutil

    old = render(tmp_path, cluster="kuberay", k8s_secret="hf", shared_pvc="shared")
    assert not _vi877(old)  # a fresh bundle agrees with itself
    other = tmp_path / "other"
    shutil.copytree(old, other)
    # the same bundle re-rendered for 1 node and another model, its k8s/ files left from the 2-node render
    plan = wizard.plan(make_answers({**BASE, "nnodes": 1, "model": "Qwen/Qwen2.5-3B-Instruct", "cluster": "kuberay",
                                     "k8s_secret": "hf", "shared_pvc": "shared"}), base_dir=str(tmp_path))
    files = wizard.render(plan)
    (other / "verl_config.yaml").write_text(files["verl_config.yaml"])
    hits = _vi877(other)
    assert any("k8s/rayjob.yaml gives its GPU worker pods 16 GPU(s)" in p.message and "needs 8" in p.message
               for p in hits), [p.message for p in hits]
    assert any("k8s/configmap.yaml carries another verl_config.yaml" in p.message and "Qwen2.5-7B" in p.message
               for p in hits), [p.message for p in hits]
    assert all(p.severity == "error" for p in hits)
