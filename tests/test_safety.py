"""Hostile strings in every free-text answer cannot escape their slot in run.sh or the YAML."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wizard
from helpers_answers import BASE
from wizard.intent.text import shown

HOSTILE = st.one_of(
    st.sampled_from([
        "it's", 'say "hi"', "$(touch /tmp/pwned)", "`touch /tmp/pwned`", "# not a comment",
        "key: value", "a; rm -rf /", "ünïcødé ✓", "--flag", "-", "*", "{a,b}", "~root", "a\\b",
        "'; echo x; '", "[list]", "{map: 1}", "&anchor", "!tag", "%percent", "@at", "null",
        "true", "1e3", "0x1F", "  spaced  ", "$x{y}", "$", "a\\", "\\$", "<script>alert(1)</script>",
        "a|b", "``code``", "[x](javascript:1)",
    ]),
    # control characters (newline, NUL, ESC, C1, U+2028 ...) are refused: see REFUSED below
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"),
                                   blacklist_characters="\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"),
            min_size=1, max_size=30),
).filter(lambda s: "${" not in s and s != "???" and s.strip() != "")  # OmegaConf syntax is refused: see REFUSED

# Strings no slot can hold: refused by `make_answers`, naming the key and showing the value escaped.
REFUSED = ["a\nb", "tab\there", "line1\r\nline2", "nul\x00", "esc\x1b[2J", "del\x7f", "nel\x85x", "ls\u2028x",
           "ps\u2029x", "bidi\u202ex", "run-${oc.env:WANDB_API_KEY}", "a${b", "???", "x\udce9"]

VALUES_BLOCK = ("# >>> values", "# <<< values")


def _shell_values(run_sh: str) -> dict[str, str]:
    start = run_sh.index(VALUES_BLOCK[0])
    end = run_sh.index(VALUES_BLOCK[1])
    block = run_sh[start:end]
    names = ["MODEL", "EXPERIMENT", "PROJECT"]
    script = block + "\n" + "".join(f'printf "%s\\0" "${name}"\n' for name in names)
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout
    return dict(zip(names, [part.decode("utf-8", "surrogateescape") for part in out.split(b"\0")[:-1]]))


def _omegaconf_value(text: str, key: str):
    from omegaconf import OmegaConf

    return OmegaConf.select(OmegaConf.create(yaml.safe_load(text)), key)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=HOSTILE, experiment=HOSTILE, project=HOSTILE, gpu_type=HOSTILE)
def test_hostile_strings_stay_in_their_slot(tmp_path_factory, model, experiment, project, gpu_type):
    data = dict(BASE, model=model, experiment_name=experiment, project_name=project, gpu_type=gpu_type,
                model_params_b=1.5)
    plan = wizard.plan(wizard.make_answers(data), base_dir="/runs")
    files = wizard.render(plan)

    run_sh = files["run.sh"]
    path = tmp_path_factory.mktemp("b") / "run.sh"
    path.write_text(run_sh)
    subprocess.run(["bash", "-n", str(path)], check=True)
    values = _shell_values(run_sh)
    expected_model = plan.value("actor_rollout_ref.model.path")
    assert values == {"MODEL": expected_model, "EXPERIMENT": experiment, "PROJECT": project}

    cfg_text = files["verl_config.yaml"]
    doc = yaml.safe_load(cfg_text)
    assert doc["actor_rollout_ref"]["model"]["path"] == expected_model
    assert doc["trainer"]["experiment_name"] == experiment
    assert doc["trainer"]["project_name"] == project
    # ...and through OmegaConf, as verl reads it
    assert _omegaconf_value(cfg_text, "trainer.experiment_name") == experiment
    assert _omegaconf_value(cfg_text, "trainer.project_name") == project

    answers_doc = yaml.safe_load(files["verl-init.yaml"])
    assert answers_doc["answers"]["model"] == model
    assert answers_doc["answers"]["gpu_type"] == gpu_type
    # PLAN.md table rows stay one line each
    for line in files["PLAN.md"].splitlines():
        if line.startswith("| `"):
            assert len(re.split(r"(?<!\\)\|", line)) == 6, line


def test_hostile_data_paths_in_run_sh(tmp_path):
    weird = tmp_path / "d$(touch pwned) 'x' \"y\" `z` <b>"  # a newline in a path is refused (test below)
    weird.mkdir()
    train = weird / "train.parquet"
    train.write_text("")
    data = dict(BASE, train_files=str(train), val_files=str(train))
    files = wizard.render(wizard.plan(wizard.make_answers(data), base_dir=str(tmp_path)))
    bundle = wizard.write_bundle(files, tmp_path / "bundle")
    # run only the data-file checks: cut the script before python is needed
    text = (bundle / "run.sh").read_text()
    checks = text[text.index("# Data files the config reads."): text.index("# Paths inside the bundle")]
    r = subprocess.run(["bash", "-c", f"set -eu; HERE={bundle}; die() {{ echo \"DIE $*\"; exit 3; }}\n" + checks], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (tmp_path / "pwned").exists()
    train.unlink()
    r = subprocess.run(["bash", "-c", f"set -eu; HERE={bundle}; die() {{ echo \"DIE $*\"; exit 3; }}\n" + checks], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 3 and "missing data file" in r.stdout
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("value", REFUSED)
@pytest.mark.parametrize("key", ["model", "experiment_name", "project_name", "gpu_type"])
def test_unsafe_strings_are_refused_naming_the_key(key, value):
    with pytest.raises(wizard.WizardError) as info:
        wizard.make_answers(dict(BASE, **{key: value}))
    (problem,) = info.value.problems
    line = problem.line()
    assert problem.keys == (key,) and line.startswith(f"{key}: ") and "\n" not in line and line.isprintable()
    assert shown(value) in line  # the value, escaped as repr shows it
