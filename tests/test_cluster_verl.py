"""verl accepts every bundle of every cluster type, and the config the KubeRay pods receive."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_cluster_crd import cluster_files

from wizard.renderer.writer import write_bundle

pytestmark = [pytest.mark.verl, pytest.mark.slow]

CASES = [
    ("cluster-8gpu", {}),  # kuberay
    ("cluster-8gpu", {"cluster": "slurm", "logger": ["console", "wandb"], "shared_pvc": "ckpt"}),
    ("dapo-32gpu", {}),  # slurm
    ("ppo-16gpu", {}),  # ray
    ("megatron-64gpu", {"cluster": "kuberay", "shm_size_gb": 64, "k8s_namespace": "rl", "checkpoint_pvc": "ckpt"}),
]


@pytest.mark.parametrize("profile, answers", CASES, ids=lambda v: v if isinstance(v, str) else ",".join(v) or "-")
def test_cluster_bundles_are_accepted_by_verl(profile, answers, tmp_path, tiny_model):
    from wizard.verify.harness import verify_with_verl

    files = cluster_files(profile, base_dir=str(tmp_path), **answers)
    bundle = write_bundle(files, tmp_path / "bundle")
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, report.summary()
    if "k8s/configmap.yaml" in files:
        # what the head pod mounts at --config-path composes and validates the same way
        pod_dir = tmp_path / "pod-config"
        pod_dir.mkdir()
        text = yaml.safe_load(files["k8s/configmap.yaml"])["data"]["verl_config.yaml"]
        (pod_dir / "verl_config.yaml").write_text(text, encoding="utf-8")
        pod = verify_with_verl(pod_dir, model_dir=str(tiny_model))
        assert pod.ok, pod.summary()
        assert [c.name for c in pod.checks] == [c.name for c in report.checks]


def test_tiny_model_fixture_is_local(tiny_model):
    assert Path(tiny_model, "config.json").is_file()
