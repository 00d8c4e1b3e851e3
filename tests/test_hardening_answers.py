"""Issue 13 (hardening), answers side: F4 (OmegaConf syntax), F7 (`~user` paths), F8/F9 (control characters,
forged output lines, NUL), F10 (answers files the user got wrong), F14 (Markdown/HTML in PLAN.md).

Every string answer is refused when it holds a control character or OmegaConf syntax (naming the key, the
value shown escaped), or reaches the bundle literally; `~user/...` is expanded, never joined to the cwd.
"""

from __future__ import annotations

import os
import pwd
import re
import typing

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wizard
from conftest import run_cli
from helpers_answers import BASE
from wizard.intent.answers import Answers
from wizard.intent.errors import WizardError
from wizard.intent.text import PATH_FIELDS, PROSE_FIELDS, shown


def _string_keys() -> list[str]:
    keys = []
    for name, info in Answers.model_fields.items():
        args = [a for a in typing.get_args(info.annotation) if a is not type(None)]
        if (args[0] if args else info.annotation) is str:
            keys.append(name)
    return keys


STRING_KEYS = _string_keys()
BASE_SIZED = dict(BASE, model_params_b=1.5)  # a model answer need not be sizable by name
CONTROL = st.sampled_from(["\x00", "\n", "\r", "\t", "\x1b", "\x07", "\x7f", "\x85", "\x9b", "\u2028", "\u2029",
                           "\u202e", "\udce9"])
PLAIN = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=8)
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_every_string_key_is_covered():
    assert {"model", "experiment_name", "project_name", "reward_function", "instruction", "gpu_type"} <= set(STRING_KEYS)
    assert len(STRING_KEYS) >= 20


def _refused(key: str, value: str) -> str:
    """make_answers refuses `value` for `key` with one printable line naming the key and the value escaped."""
    with pytest.raises(WizardError) as info:
        wizard.make_answers(dict(BASE_SIZED, **{key: value}))
    (problem,) = [p for p in info.value.problems if key in p.keys]
    line = problem.line()
    assert line.startswith(f"{key}: ") and line.isprintable(), line
    assert shown(value) in line, line
    return line


def _rendered(data: dict) -> dict[str, str] | None:
    """The bundle's files, or None when a planner rule refuses the answers (its lines must be printable)."""
    try:
        plan = wizard.plan(wizard.make_answers(data), base_dir="/elsewhere/cwd")
    except WizardError as exc:
        assert all(p.line().isprintable() for p in exc.problems)
        return None
    return wizard.render(plan)


# --- F4: OmegaConf syntax ------------------------------------------------------------------------


@pytest.mark.parametrize("key", STRING_KEYS)
@SETTINGS
@given(before=PLAIN, after=PLAIN)
def test_interpolation_refused_or_literal_in_every_string_key(key, before, after):
    value = f"{before}${{{after}"
    if key not in PROSE_FIELDS:
        _refused(key, value)
        return
    a = wizard.make_answers(dict(BASE_SIZED, **{key: value}))  # prose never reaches OmegaConf: kept literally
    assert getattr(a, key) == value


@pytest.mark.parametrize("key", sorted(set(STRING_KEYS) - PROSE_FIELDS))
def test_omegaconf_missing_marker_refused(key):
    _refused(key, "???")


def test_secret_is_not_resolved_into_the_run_name(tmp_path, cli_env):
    env = dict(cli_env, WANDB_API_KEY="s3cr3t-token")
    out = tmp_path / "b"
    r = run_cli(["--profile", "single-gpu", "--set", "experiment_name=run-${oc.env:WANDB_API_KEY}", "--out", str(out)],
                env=env, cwd=tmp_path)
    assert r.returncode == 2 and not out.exists()
    assert "s3cr3t" not in r.stdout + r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith("verl-init: error: experiment_name:") and "'run-${oc.env:WANDB_API_KEY}'" in line
    assert "Traceback" not in r.stderr and "[VI102]" in line


def test_unterminated_interpolation_is_refused_not_rendered(tmp_path, cli_env):
    out = tmp_path / "b"
    r = run_cli(["--profile", "single-gpu", "--set", "experiment_name=a${b", "--out", str(out)], env=cli_env)
    assert r.returncode == 2 and not out.exists()
    assert "experiment_name" in r.stderr and "'a${b'" in r.stderr and len(r.stderr.splitlines()) == 1


LOOKALIKES = ["$x{y} a\\b", "\\$", "a\\", "{x}", "$", "price: $5 {q}", "~u/$HOME", "`x` <b>|c</b>", "[a](b)"]


@pytest.mark.parametrize("value", LOOKALIKES)
def test_allowed_lookalikes_load_literally_in_omegaconf(value):
    from omegaconf import OmegaConf

    files = _rendered(dict(BASE_SIZED, experiment_name=value, project_name=value))
    assert files is not None
    cfg = OmegaConf.to_container(OmegaConf.create(yaml.safe_load(files["verl_config.yaml"])), resolve=True)
    assert cfg["trainer"]["experiment_name"] == value and cfg["trainer"]["project_name"] == value


def test_allowed_lookalikes_compose_literally_with_verls_hydra(tmp_path):
    from wizard.verify.harness import compose_bundle

    value = "$x{y} a\\b \\$ {z} `q` <b>|c"
    files = _rendered(dict(BASE_SIZED, experiment_name=value, project_name="a\\"))
    bundle = wizard.write_bundle(files, tmp_path / "b")
    cfg = compose_bundle(bundle)
    assert cfg.trainer.experiment_name == value and cfg.trainer.project_name == "a\\"


# --- F8/F9: control characters -------------------------------------------------------------------


@pytest.mark.parametrize("key", STRING_KEYS)
@SETTINGS
@given(before=PLAIN, ch=CONTROL, after=PLAIN)
def test_control_characters_refused_in_every_string_key(key, before, ch, after):
    value = before + ch + after
    if key in PROSE_FIELDS and ch in "\n\t":  # a multi-line system prompt or instruction stays possible
        assert getattr(wizard.make_answers(dict(BASE_SIZED, **{key: value})), key) == value
        return
    _refused(key, value)


@pytest.mark.parametrize("item", ["wandb\n", "console\x00", "file\u2028"])
def test_control_characters_refused_in_list_answers(item):
    with pytest.raises(WizardError) as info:
        wizard.make_answers(dict(BASE, logger=["console", item]))
    line = info.value.problems[0].line()
    assert line.startswith("logger: ") and line.isprintable() and repr(item) in line


def test_forged_output_line_is_refused_and_shown_escaped(tmp_path, cli_env):
    out = tmp_path / "b"
    r = run_cli(["--profile", "single-gpu", "--set", "reward=function",
                 "--set", "reward_function=/x\nverl-init: wrote ok\n.py:f", "--out", str(out)], env=cli_env)
    assert r.returncode == 2 and not out.exists() and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith("verl-init: error: reward_function:")
    assert "'/x\\nverl-init: wrote ok\\n.py:f'" in line and "control character" in line


def test_unknown_key_with_a_newline_is_one_line(cli_env):
    r = run_cli(["--profile", "single-gpu", "--set", "nno\nverl-init: wrote x=2"], env=cli_env)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "\\n" in r.stderr


def test_nul_in_an_answers_file_is_refused(tmp_path, cli_env):
    f = tmp_path / "a.yaml"
    f.write_text('answers:\n  model: "Qwen/Qwen2.5-0.5B\\0-Instruct"\n')  # YAML's \0 escape: a NUL character
    r = run_cli(["--answers", str(f), "--out", str(tmp_path / "b")], env=cli_env)
    assert r.returncode == 2 and not (tmp_path / "b").exists()
    (line,) = r.stderr.splitlines()
    assert line.startswith("verl-init: error: model:") and "\\x00" in line and "\x00" not in line


def test_undecodable_set_value_is_refused(tmp_path, cli_env):
    import subprocess
    import sys

    out = tmp_path / "b"
    r = subprocess.run([sys.executable, "-m", "wizard.cli.app", "--profile", "single-gpu",
                        b"--set", b"experiment_name=caf\xe9", "--out", str(out)], env=cli_env, capture_output=True)
    assert r.returncode == 2 and not out.exists() and b"Traceback" not in r.stderr
    assert r.stderr.count(b"\n") == 1 and b"experiment_name" in r.stderr


# --- F7: ~ paths ---------------------------------------------------------------------------------

ME = pwd.getpwuid(os.getuid()).pw_name
MY_HOME = os.path.expanduser(f"~{ME}")


def test_tilde_user_is_expanded_not_joined_to_the_cwd():
    a = wizard.make_answers(dict(BASE_SIZED, model=f"~{ME}/models/X", train_files=f"~{ME}/d/t.parquet",
                                 val_files=f"~{ME}/d/v.parquet", reward="function",
                                 reward_function=f"~{ME}/r.py:score"))
    assert a.model == f"{MY_HOME}/models/X" and a.train_files == f"{MY_HOME}/d/t.parquet"
    assert a.reward_function == f"{MY_HOME}/r.py:score"
    # cluster=ray: the data files are read on the nodes (not on this machine, where they do not exist: VI539)
    plan = wizard.plan(a.model_copy(update={"reward": "rule", "reward_function": None, "cluster": "ray", "nnodes": 2}),
                       base_dir="/elsewhere/cwd")
    assert plan.value("actor_rollout_ref.model.path") == f"{MY_HOME}/models/X"


def test_tilde_home_stays_home_relative_never_cwd():
    plan = wizard.plan(wizard.make_answers(dict(BASE_SIZED, model="~/models/X", val_files="~/v.parquet",
                                                train_files="~/t.parquet", cluster="ray", nnodes=2)),
                       base_dir="/elsewhere/cwd")
    assert plan.value("actor_rollout_ref.model.path") == "${oc.env:HOME}/models/X"  # resolved where verl runs
    files = wizard.render(plan)
    assert "/elsewhere/cwd" not in "".join(files.values())
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(yaml.safe_load(files["verl_config.yaml"]))
    assert cfg.actor_rollout_ref.model.path == os.environ["HOME"] + "/models/X"


def test_unknown_user_is_refused():
    line = _refused("model", "~no_such_user_verl_init/models/X")
    assert "no_such_user_verl_init" in line and "absolute path" in line


@pytest.mark.parametrize("key", STRING_KEYS)
@settings(max_examples=15, deadline=None)
@given(rest=PLAIN)
def test_tilde_in_every_string_key_is_expanded_refused_or_literal(key, rest):
    value = "~" + rest
    try:
        a = wizard.make_answers(dict(BASE_SIZED, **{key: value}))
    except WizardError as exc:
        assert all(p.line().isprintable() for p in exc.problems)
        return
    got = getattr(a, key)
    if key in PATH_FIELDS and not value.startswith("~/"):
        path = got.rpartition(":")[0] if key == "reward_function" else got
        assert path == os.path.expanduser(value.rpartition(":")[0] if key == "reward_function" else value)
        assert not path.startswith("~")
    else:
        assert got == value
    files = _rendered(dict(BASE_SIZED, **{key: value}))
    if files is not None:
        assert "/elsewhere/cwd/~" not in "".join(files.values())
        if key not in PATH_FIELDS:
            assert yaml.safe_load(files["verl-init.yaml"])["answers"][key] == value


def test_replay_with_tilde_user_from_another_folder_is_identical(tmp_path, cli_env):
    first, again = tmp_path / "one" / "b", tmp_path / "two" / "b"
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    assert run_cli(["--profile", "single-gpu", "--set", f"model=~{ME}/models/X", "--set", "model_params_b=0.5",
                    "--out", str(first)], env=cli_env, cwd=tmp_path / "one").returncode == 0
    r = run_cli(["--answers", str(first / "verl-init.yaml"), "--out", str(again)], env=cli_env, cwd=tmp_path / "two")
    assert r.returncode == 0, r.stderr
    for name in ("verl_config.yaml", "run.sh", "verl-init.yaml", "PLAN.md"):
        assert (first / name).read_bytes() == (again / name).read_bytes(), name
    assert f"{MY_HOME}/models/X" in (first / "verl_config.yaml").read_text()
    assert str(tmp_path) not in (first / "verl_config.yaml").read_text()


# --- F10: answers files the user got wrong ------------------------------------------------------


@pytest.mark.parametrize("name, content, words", [
    ("latin1.yaml", b"answers:\n  model: caf\xe9\n", "not UTF-8"),
    ("deep.yaml", b"answers:\n  model: " + b"[" * 20000 + b"]" * 20000 + b"\n", "nested too deeply"),
    ("list.yaml", b"- a\n- b\n", "not a YAML mapping"),
    ("folder", None, "is a folder"),
])
def test_bad_answers_file_is_one_line_not_a_bug(tmp_path, cli_env, name, content, words):
    f = tmp_path / name
    if content is None:
        f.mkdir()
    else:
        f.write_bytes(content)
    r = run_cli(["--answers", str(f), "--out", str(tmp_path / "b")], env=cli_env)
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.splitlines()
    assert words in line and str(f) in line and "bug" not in line and "Traceback" not in r.stderr


def test_deep_list_in_set_is_one_line(cli_env):
    r = run_cli(["--profile", "single-gpu", "--set", "logger=" + "[" * 5000 + "]" * 5000], env=cli_env)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "logger" in r.stderr and "bug" not in r.stderr


# --- F14: PLAN.md ------------------------------------------------------------------------------


HTML_VALUES = ["`x` <script>alert(1)</script>", "[a](javascript:alert(1))", "a|b`` c", "<img src=x onerror=y>",
               "``", "`", "x\\|y"]


@pytest.mark.parametrize("value", HTML_VALUES)
def test_plan_md_shows_values_literally(value):
    from markdown_it import MarkdownIt

    files = _rendered(dict(BASE_SIZED, model="org/" + value, experiment_name=value, gpu_type=value))
    assert files is not None
    html = MarkdownIt("commonmark").enable("table").render(files["PLAN.md"])
    assert "<script" not in html and "<img" not in html and 'href="javascript' not in html
    rows = [line for line in files["PLAN.md"].splitlines() if line.startswith("| `")]
    assert all(len(re.split(r"(?<!\\)\|", line)) == 6 for line in rows)  # no row split by a value
    # the experiment name's table cell is one code span holding the value
    assert re.search(r"<td><code>trainer\.experiment_name</code></td>\s*<td><code>(.*?)</code></td>", html)
    cell = re.search(r"<td><code>trainer\.experiment_name</code></td>\s*<td><code>(.*?)</code></td>", html).group(1)
    import html as html_mod

    assert html_mod.unescape(cell).replace("\\\\", "\\") == value
