"""Templates and profiles ship inside the wheel, and an installed wheel renders every profile."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT


@pytest.mark.slow
def test_wheel_contains_templates_and_profiles(tmp_path):
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path)],
                   cwd=ROOT, check=True, capture_output=True)
    (wheel,) = tmp_path.glob("verl_init-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for t in (ROOT / "templates").rglob("*.j2"):
        assert f"wizard/_data/templates/{t.relative_to(ROOT / 'templates').as_posix()}" in names
    for p in (ROOT / "profiles").glob("*.yaml"):
        assert f"wizard/_data/profiles/{p.name}" in names
    assert any(n.endswith("entry_points.txt") for n in names)
    assert "wizard/verlspec/key_history.json" in names  # package data: hatchling ships it with the package
    for name in ("train.jsonl", "test.jsonl"):  # the built-in offline dataset (cpu-smoke bundles copy it)
        assert f"wizard/offline_data/{name}" in names

    # install it alone (no checkout on the path) and render from the packaged data
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    code = ("import wizard, wizard.resources as r; "
            "assert '_data' in str(r.data_dir('templates')), r.data_dir('templates'); "
            "[wizard.render(wizard.plan(wizard.load_profile(p), base_dir='/r')) for p, _ in wizard.list_profiles()]; "
            "files = wizard.render(wizard.plan(wizard.load_profile('cpu-smoke'), base_dir='/r')); "
            "assert files['data/offline/train.jsonl'].count(chr(10)) == 256, 'offline rows'; "
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
