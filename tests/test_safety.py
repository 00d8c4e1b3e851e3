"""Hostile strings in every free-text answer cannot escape their slot in run.sh or the YAML."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wizard
from conftest import run_cli
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


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=HOSTILE.filter(lambda s: not os.path.expanduser(s).startswith("~") or s.startswith("~/")),
       experiment=HOSTILE, project=HOSTILE, gpu_type=HOSTILE)
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
    # `~user` (and a bare `~`) in a path answer is expanded; `~/...` stays home-relative (the planner's business)
    expanded = model if not model.startswith("~") or model.startswith("~/") else os.path.expanduser(model)
    assert answers_doc["answers"]["model"] == expanded
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


# --- issue 13 (hardening), writer side: F5 (killed writers), F6 (--out with a newline), F10 (OSErrors),
# and --force never deleting the user's files -------------------------------------------------------------------

OLD, NEW = "16", "64"  # prompts_per_step of the old and the new bundle, read back from verl-init.yaml


def _render_args(out, prompts: str, *extra: str) -> list[str]:
    return ["--profile", "single-gpu", "--set", f"prompts_per_step={prompts}", "--out", str(out), *extra]


def _bundle_version(out: Path) -> str:
    """Which bundle is complete at `out` (OLD or NEW); fails unless every rendered file is there."""
    for name in ("verl_config.yaml", "run.sh", "PLAN.md", "verl-init.yaml", "data/prepare_data.py"):
        assert (out / name).is_file(), f"{out} is incomplete: no {name}"
    doc = yaml.safe_load((out / "verl-init.yaml").read_text())
    cfg = yaml.safe_load((out / "verl_config.yaml").read_text())
    prompts = str(doc["answers"]["prompts_per_step"])
    assert str(cfg["data"]["train_batch_size"]) == prompts  # the files belong to one render
    return prompts


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def _user_files(out: Path) -> dict[str, bytes]:
    (out / "data" / "train.parquet").write_bytes(b"PAR1 my data")
    (out / "checkpoints" / "global_step_20").mkdir(parents=True)
    (out / "checkpoints" / "global_step_20" / "model.pt").write_bytes(b"weights")
    (out / "outputs").mkdir()
    (out / "run.log").write_text("step 1\n")
    (out / "notes.md").write_text("mine")
    (out / "big").symlink_to("/nonexistent-storage")
    return {"data/train.parquet": b"PAR1 my data", "checkpoints/global_step_20/model.pt": b"weights",
            "run.log": b"step 1\n", "notes.md": b"mine"}


def _spawn(args: list[str], env: dict[str, str], step: str, cwd: Path, code: str | None = None):
    """The CLI paused by the writer's test hook at `step`; returns the process once it says so."""
    import selectors
    import sys
    import time

    env = dict(env, VERL_INIT_TEST_PAUSE_AT=step)
    cmd = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "wizard.cli.app", *args]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    seen = b""
    deadline = time.monotonic() + 60
    while f"test pause at {step}".encode() not in seen:
        if time.monotonic() > deadline or not sel.select(timeout=1) and proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"the writer never paused at {step}: {seen.decode(errors='replace')}")
        chunk = os.read(proc.stderr.fileno(), 65536)
        if not chunk and proc.poll() is not None:
            raise AssertionError(f"the writer exited before pausing at {step}: {seen.decode(errors='replace')}")
        seen += chunk
    return proc, seen


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("step, expected", [("tmp", OLD), ("written", OLD), ("swapped", NEW)])
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_interrupted_force_leaves_one_complete_bundle_and_says_which(tmp_path, cli_env, sig, step, expected):
    import signal

    out = tmp_path / "b"
    assert run_cli(_render_args(out, OLD), env=cli_env, cwd=tmp_path).returncode == 0
    mine = _user_files(out)
    proc, seen = _spawn(_render_args(out, NEW, "--force"), cli_env, step, tmp_path)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    message = (seen + err).decode().splitlines()[-1]
    assert proc.returncode == 128 + getattr(signal, sig), message
    assert _bundle_version(out) == expected
    if expected == OLD:
        assert "nothing was written" in message and "old bundle" in message and "unchanged" in message
    else:
        assert "new bundle" in message and "complete" in message and "nothing was written" not in message
    assert _leftovers(tmp_path) == []
    assert {k: (out / k).read_bytes() for k in mine} == mine and (out / "big").is_symlink()


def test_interrupt_of_a_first_write_leaves_nothing(tmp_path, cli_env):
    import signal

    out = tmp_path / "b"
    proc, seen = _spawn(_render_args(out, NEW), cli_env, "tmp", tmp_path)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "nothing was written" in err.decode() and not out.exists() and _leftovers(tmp_path) == []


@pytest.mark.parametrize("step, expected", [("tmp", OLD), ("written", OLD), ("swapped", NEW)])
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_sigkill_during_force_leaves_a_complete_bundle_at_out(tmp_path, cli_env, step, expected):
    out = tmp_path / "b"
    assert run_cli(_render_args(out, OLD), env=cli_env, cwd=tmp_path).returncode == 0
    mine = _user_files(out)
    proc, _ = _spawn(_render_args(out, NEW, "--force"), cli_env, step, tmp_path)
    proc.kill()
    proc.communicate(timeout=60)
    assert _bundle_version(out) == expected
    assert {k: (out / k).read_bytes() for k in mine} == mine


NO_EXCHANGE = ("import sys; import wizard.renderer.writer as w; w._exchange = lambda a, b: False; "
               "from wizard.cli.app import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_sigkill_between_the_fallback_renames_leaves_the_old_bundle_at_the_printed_backup(tmp_path, cli_env):
    out = tmp_path / "b"
    assert run_cli(_render_args(out, OLD), env=cli_env, cwd=tmp_path).returncode == 0
    mine = _user_files(out)
    proc, seen = _spawn(_render_args(out, NEW, "--force"), cli_env, "backup", tmp_path, code=NO_EXCHANGE)
    proc.kill()
    proc.communicate(timeout=60)
    (announce,) = [line for line in seen.decode().splitlines() if "the old one is at" in line]
    backup = Path(announce.rsplit("the old one is at ", 1)[1])
    assert not out.exists() and backup.parent == tmp_path
    assert _bundle_version(backup) == OLD
    assert {k: (backup / k).read_bytes() for k in mine} == mine


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_fallback_without_exchange_replaces_and_cleans_up(tmp_path, cli_env):
    out = tmp_path / "b"
    assert run_cli(_render_args(out, OLD), env=cli_env, cwd=tmp_path).returncode == 0
    mine = _user_files(out)
    r = subprocess.run([__import__("sys").executable, "-c", NO_EXCHANGE, *_render_args(out, NEW, "--force")],
                       cwd=tmp_path, env=cli_env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _bundle_version(out) == NEW and _leftovers(tmp_path) == []
    assert {k: (out / k).read_bytes() for k in mine} == mine


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_force_keeps_every_file_the_render_does_not_produce(tmp_path, cli_env):
    out = tmp_path / "b"
    assert run_cli(_render_args(out, OLD), env=cli_env, cwd=tmp_path).returncode == 0
    (out / "run.sh").write_text("# my edits\n")  # a rendered file: replaced by the new render
    mine = _user_files(out)
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    r = run_cli(_render_args(out, NEW, "--force"), env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _bundle_version(out) == NEW and "# my edits" not in (out / "run.sh").read_text()
    assert {k: (out / k).read_bytes() for k in mine} == mine
    assert os.readlink(out / "big") == "/nonexistent-storage" and (out / "outputs").is_dir()
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    assert _leftovers(tmp_path) == []


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_force_refuses_when_a_user_file_is_in_the_way(tmp_path, cli_env):
    out = tmp_path / "b"
    assert run_cli(_render_args(out, OLD), env=cli_env, cwd=tmp_path).returncode == 0
    (out / "PLAN.md").unlink()
    (out / "PLAN.md").mkdir()  # a folder where the render writes a file
    (out / "PLAN.md" / "mine.txt").write_text("mine")
    r = run_cli(_render_args(out, NEW, "--force"), env=cli_env, cwd=tmp_path)
    assert r.returncode == 2 and "PLAN.md" in r.stderr and "move them out" in r.stderr
    assert (out / "PLAN.md" / "mine.txt").read_text() == "mine" and _leftovers(tmp_path) == []


@pytest.mark.parametrize("bad", ["b\n", "b\r", "\tb", "b\x1b[2J", "b\u2028"])
def test_out_with_control_characters_is_refused(tmp_path, cli_env, bad):
    r = run_cli(_render_args(bad, NEW), env=cli_env, cwd=tmp_path)
    assert r.returncode == 2 and list(tmp_path.iterdir()) == []
    (line,) = r.stderr.splitlines()
    assert line.startswith("verl-init: error: --out:") and shown(bad) in line
    with pytest.raises(wizard.WizardError, match="--out"):
        wizard.write_bundle({"a.txt": "x"}, tmp_path / bad)


def _one_line_naming(r, path: str) -> str:
    assert r.returncode == 2, r.stdout + r.stderr
    (line,) = r.stderr.splitlines()
    assert path in line and "bug" not in line and "Traceback" not in r.stderr
    return line


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_out_under_a_regular_file_is_one_line(tmp_path, cli_env):
    (tmp_path / "file").write_text("x")
    line = _one_line_naming(run_cli(_render_args(tmp_path / "file" / "x", NEW), env=cli_env), str(tmp_path / "file"))
    assert "not a folder" in line
    _one_line_naming(run_cli(_render_args("/etc/hostname/x", NEW), env=cli_env), "/etc/hostname")


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_name_too_long_is_one_line_and_255_bytes_work(tmp_path, cli_env):
    line = _one_line_naming(run_cli(_render_args(tmp_path / ("a" * 300), NEW), env=cli_env), "aaaa")
    assert "too long" in line
    r = run_cli(_render_args(tmp_path / ("é" * 127 + "b"), NEW), env=cli_env)  # 255 bytes
    assert r.returncode == 0, r.stderr
    assert _leftovers(tmp_path) == []


def test_dangling_symlink_as_out_is_one_line(tmp_path, cli_env):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "missing" / "deeper")
    line = _one_line_naming(run_cli(_render_args(link, NEW), env=cli_env), str(link))
    assert "symbolic link" in line
    assert not (tmp_path / "missing").exists() and _leftovers(tmp_path) == []


@pytest.mark.parametrize("err, words", [(PermissionError(13, "Permission denied"), "permission denied"),
                                        (OSError(28, "No space left on device"), "no space left"),
                                        (OSError(30, "Read-only file system"), "read-only")])
def test_os_errors_while_writing_restore_the_old_bundle(tmp_path, monkeypatch, err, words):
    out = tmp_path / "b"
    files = wizard.render(wizard.plan(wizard.make_answers(BASE), base_dir=str(tmp_path)))
    wizard.write_bundle(files, out)
    (out / "mine.txt").write_text("mine")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    real = Path.write_text

    def failing(self, *a, **k):
        if self.name == "PLAN.md":
            err.filename = str(self)
            raise err
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", failing)
    with pytest.raises(wizard.WizardError) as info:
        wizard.write_bundle(files, out, force=True)
    line = info.value.problems[0].line()
    assert words in line and "PLAN.md" in line and line.startswith("--out:")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert _leftovers(tmp_path) == []


def test_unclassified_exceptions_still_say_bug(monkeypatch, capsys):
    from wizard.cli import app

    def boom(args):
        raise ValueError("internal")

    monkeypatch.setattr(app, "_dispatch", boom)
    assert app.main(["--profile", "x"]) == 1
    assert "this is a bug in verl-init" in capsys.readouterr().err


@pytest.mark.parametrize("exc", [PermissionError(13, "Permission denied", "/srv/x"), OSError(28, "No space left", "/srv/x"),
                                 OSError(36, "File name too long", "/srv/x")])
def test_user_caused_os_errors_anywhere_are_one_line_not_a_bug(monkeypatch, capsys, exc):
    from wizard.cli import app

    def boom(args):
        raise exc

    monkeypatch.setattr(app, "_dispatch", boom)
    assert app.main(["--profile", "x"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "/srv/x" in line and "bug" not in line
