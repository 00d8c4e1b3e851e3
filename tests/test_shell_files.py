"""Every shell file a bundle holds (run.sh, ray/submit.sh, k8s/submit.sh, slurm/job.sbatch, ...) passes
`bash -n` and `shellcheck -S style`, for every shipped profile and for answers that change the scripts'
text (a local data file, a reward function, loggers, cluster types)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import wizard
from wizard.intent.profiles import profile_names

VARIANTS = [(name, {}) for name in profile_names()] + [
    ("single-gpu", {"dataset": "./mydata/train.jsonl", "val_fraction": 0.1}),
    ("single-gpu", {"reward": "function"}),
    ("single-node-8gpu", {"logger": ["console", "wandb"], "cluster": "ray"}),
    ("cluster-8gpu", {"cluster": "slurm", "slurm_time": "04:00:00"}),
]


def _shell_files(tmp_path, profile, answers):
    data = {**wizard.load_profile(profile).model_dump(mode="json", exclude_unset=True), **answers}
    if "dataset" in answers:
        (tmp_path / "mydata").mkdir(exist_ok=True)
        (tmp_path / "mydata" / "train.jsonl").write_text(  # rows enough for one step (VI519)
            "".join(f'{{"question": "{i}+1?", "answer": "{i + 1}"}}\n' for i in range(600)))
    bundle = wizard.write_bundle(wizard.render(wizard.plan(wizard.make_answers(data), base_dir=str(tmp_path))),
                                 tmp_path / "b")
    out = []
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        head = path.read_bytes()[:40]
        if head.startswith((b"#!/usr/bin/env bash", b"#!/bin/bash")):
            out.append(path)
    return bundle, out


@pytest.mark.parametrize("profile, answers", VARIANTS, ids=lambda v: v if isinstance(v, str) else ",".join(v) or "-")
def test_every_rendered_shell_file_passes_shellcheck(profile, answers, tmp_path):
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "apt-get install shellcheck"
    bundle, files = _shell_files(tmp_path, profile, answers)
    assert bundle / "run.sh" in files
    for path in files:
        r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
        assert r.returncode == 0, (path, r.stderr)
        r = subprocess.run([shellcheck, "-s", "bash", "-S", "style", str(path)], capture_output=True, text=True,
                           check=False)
        assert r.returncode == 0, (str(path.relative_to(bundle)), r.stdout)
