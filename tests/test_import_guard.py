"""`verl-init --help` and rendering stay light: no heavy imports on those paths."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

HEAVY_HELP = ("ray", "torch", "transformers", "verl", "jinja2", "pydantic", "questionary", "pandas", "pyarrow",
              "hydra", "omegaconf", "yaml", "rich")
HEAVY_RENDER = ("ray", "torch", "transformers", "verl", "hydra", "pandas", "pyarrow")


def _imported(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    mods = set()
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            mods.add(name.split(".")[0])
    return mods


def test_help_imports_nothing_heavy():
    mods = _imported("import sys; sys.argv=['verl-init','--help']\nfrom wizard.cli.app import main\n"
                     "try:\n    main(['--help'])\nexcept SystemExit:\n    pass")
    assert not (mods & set(HEAVY_HELP)), sorted(mods & set(HEAVY_HELP))


def test_import_wizard_is_light():
    mods = _imported("import wizard")
    assert not (mods & set(HEAVY_HELP)), sorted(mods & set(HEAVY_HELP))


def test_render_path_imports_no_ray_torch_transformers_verl():
    mods = _imported("import wizard\nfor p in ['single-gpu','ppo-16gpu','megatron-64gpu','cluster-8gpu','dapo-32gpu']:\n"
                     "    wizard.render(wizard.plan(wizard.load_profile(p), base_dir='/r'))")
    assert not (mods & set(HEAVY_RENDER)), sorted(mods & set(HEAVY_RENDER))
