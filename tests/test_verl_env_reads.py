"""The environment variables verl's own code reads (scripts/verl_env_reads.py → wizard/check/data/verl_env_reads.json),
which VI829 names when a script exports them before `ray job submit`."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

SCRIPT = ROOT / "scripts" / "verl_env_reads.py"


def _script():
    from helpers_scripts import load_script

    return load_script("verl_env_reads")


@pytest.mark.slow
@pytest.mark.verl
def test_regenerating_gives_the_committed_table():
    fresh = json.dumps(_script().build(), indent=1, sort_keys=True) + "\n"
    assert fresh == (ROOT / "wizard" / "check" / "data" / "verl_env_reads.json").read_text(encoding="utf-8")


@pytest.mark.verl
def test_the_table_holds_verls_own_reads():
    import verl

    reads = json.loads((ROOT / "wizard" / "check" / "data" / "verl_env_reads.json").read_text(encoding="utf-8"))["reads"]
    from pathlib import Path

    text = (Path(verl.__file__).parent / "utils" / "tracking.py").read_text(encoding="utf-8")
    assert 'os.environ.get("TENSORBOARD_DIR"' in text and "verl/utils/tracking.py" in reads["TENSORBOARD_DIR"]
    assert not any(name.startswith("PYTEST_") for name in reads)


def test_each_reading_form_is_seen(tmp_path):
    import ast

    mod = _script()
    code = ('import os\nos.environ.get("A")\nos.getenv("B", "")\nos.environ["C"]\n"D" in os.environ\n'
            'os.environ.setdefault("E", "1")\nos.environ["F"] = "1"\nos.environ.get(name)\n')
    seen = {mod._read(n) for n in ast.walk(ast.parse(code))} - {None}
    assert seen == {"A", "B", "C", "D", "E"}  # a write (F) and a name known only at run time are not reads


def test_an_added_key_verl_reads_from_the_environment_names_the_variable():
    """verl#1853: `+trainer.tensorboard_dir=...` is accepted and never read; verl's tracking reads TENSORBOARD_DIR."""
    from wizard.check.lint import check

    def hint(key: str) -> str:
        [hit] = [f.problem for f in check(None, ["actor_rollout_ref.rollout.name=vllm", f"+{key}=/logs"]).findings
                 if f.problem.rule == "VI802"]
        return hit.hint

    assert "environment variable TENSORBOARD_DIR" in hint("trainer.tensorboard_dir")
    assert "environment variable" not in hint("trainer.tensorboard_folder")  # no variable of that name
