"""The command line as a user runs it (subprocesses, real files)."""

from __future__ import annotations

import ast
import os

import pytest
import yaml

from conftest import ROOT, run_cli
from wizard.cli.app import COMMANDS, main


def test_profiles_lists_names_and_descriptions(cli_env):
    r = run_cli(["profiles"], env=cli_env)
    assert r.returncode == 0
    names = [line.split()[0] for line in r.stdout.splitlines()]
    for required in ("single-gpu", "single-node-8gpu", "cluster-8gpu", "ppo-16gpu", "dapo-32gpu", "megatron-64gpu",
                     "cpu-smoke"):
        assert required in names
    assert all(len(line.split(None, 1)) == 2 for line in r.stdout.splitlines())


def test_render_profile_writes_bundle(tmp_path, cli_env):
    out = tmp_path / "qwen7b"
    r = run_cli(["--profile", "cluster-8gpu", "--out", str(out)], env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for name in ("verl_config.yaml", "run.sh", "PLAN.md", "verl-init.yaml"):
        assert (out / name).is_file()
    assert os.access(out / "run.sh", os.X_OK)
    assert "wrote" in r.stdout and "next:" in r.stdout
    cfg = yaml.safe_load((out / "verl_config.yaml").read_text())
    assert cfg["defaults"] == ["ppo_trainer", "_self_"]
    assert cfg["hydra"]["searchpath"] == ["pkg://verl.trainer.config"]
    assert cfg["trainer"]["nnodes"] == 2 and cfg["trainer"]["n_gpus_per_node"] == 4


def test_set_overrides_profile(tmp_path, cli_env):
    out = tmp_path / "x"
    r = run_cli(["--profile", "single-node-8gpu", "--set", "model=Qwen/Qwen2.5-3B-Instruct",
                 "--set", "samples_per_prompt=8", "--out", str(out)], env=cli_env)
    assert r.returncode == 0, r.stderr
    cfg = yaml.safe_load((out / "verl_config.yaml").read_text())
    assert cfg["actor_rollout_ref"]["model"]["path"] == "Qwen/Qwen2.5-3B-Instruct"
    assert cfg["actor_rollout_ref"]["rollout"]["n"] == 8


def test_replay_is_byte_identical(tmp_path, cli_env):
    first, again = tmp_path / "first", tmp_path / "again"
    assert run_cli(["--profile", "ppo-16gpu", "--set", "kl_coef=0.01", "--out", str(first)], env=cli_env,
                   cwd=tmp_path).returncode == 0
    r = run_cli(["--answers", str(first / "verl-init.yaml"), "--out", str(again)], env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    names = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for name in names:
        assert (first / name).read_bytes() == (again / name).read_bytes(), name


def test_existing_folder_refused_without_force(tmp_path, cli_env):
    out = tmp_path / "b"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = run_cli(["--profile", "single-gpu", "--out", str(out)], env=cli_env)
    assert r.returncode == 2
    assert "not empty" in r.stderr and "--force" in r.stderr and "[VI903]" in r.stderr
    assert (out / "keep.txt").read_text() == "mine" and sorted(os.listdir(out)) == ["keep.txt"]
    r = run_cli(["--profile", "single-gpu", "--out", str(out), "--force"], env=cli_env)
    assert r.returncode == 0, r.stderr
    # --force replaces the rendered files and never deletes the user's own (data, checkpoints, notes)
    assert (out / "keep.txt").read_text() == "mine" and (out / "verl_config.yaml").exists()


def test_dry_run_writes_nothing(tmp_path, cli_env):
    out = tmp_path / "dry"
    r = run_cli(["--profile", "single-gpu", "--out", str(out), "--dry-run"], env=cli_env)
    assert r.returncode == 0
    assert "verl_config.yaml" in r.stdout and "adv_estimator: grpo" in r.stdout
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir()]


def test_bad_input_one_line_per_problem_nonzero_nothing_written(tmp_path, cli_env):
    out = tmp_path / "bad"
    r = run_cli(["--profile", "single-node-8gpu", "--set", "samples_per_promt=3", "--out", str(out)], env=cli_env)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "samples_per_promt" in lines[0] and "did you mean" in lines[0]
    assert "Traceback" not in r.stderr

    r = run_cli(["--profile", "single-node-8gpu", "--set", "updates_per_step=3", "--set", "rollout_tp=3",
                 "--out", str(out)], env=cli_env)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and any("VI201" in line for line in lines) and any("VI304" in line for line in lines)
    assert not out.exists()


def test_unknown_profile(cli_env, tmp_path):
    r = run_cli(["--profile", "single-gpus", "--out", str(tmp_path / "x")], env=cli_env)
    assert r.returncode == 2 and "did you mean 'single-gpu'?" in r.stderr


def test_debug_shows_traceback(cli_env, tmp_path):
    r = run_cli(["--profile", "single-gpu", "--set", "rollout_tp=3", "--out", str(tmp_path / "x"), "--debug"], env=cli_env)
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_no_terminal_no_profile_is_one_line_not_a_hang(cli_env):
    r = run_cli([], env=cli_env)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "--profile" in r.stderr and "--answers" in r.stderr


def test_keys_lists_every_answer(cli_env):
    from wizard.intent.answers import Answers

    r = run_cli(["keys"], env=cli_env)
    assert r.returncode == 0
    listed = {line.split(":", 1)[0] for line in r.stdout.splitlines()}
    assert set(Answers.model_fields) <= listed


def test_api_round_trip(tmp_path):
    import wizard

    answers = wizard.load_profile("cluster-8gpu")
    assert isinstance(answers, wizard.Answers)
    p = wizard.plan(answers)
    assert isinstance(p, wizard.Plan)
    files = wizard.render(p)
    assert files == wizard.render(p)  # pure
    out = wizard.write_bundle(files, tmp_path / "api")
    from wizard.renderer.writer import MANIFEST  # the writer's record of the rendered files (for --force)

    assert sorted(x.name for x in out.iterdir() if x.is_file()) == sorted([MANIFEST, *(n for n in files if "/" not in n)])
    try:
        wizard.plan(wizard.make_answers({"updates_per_step": 7}))
    except wizard.WizardError as exc:
        assert "VI201" in exc.rules
    else:
        raise AssertionError("expected WizardError")


def test_rules_explains_an_id_and_refuses_an_unknown_one(cli_env):
    r = run_cli(["rules", "VI603", "vi816"], env=cli_env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("VI603  [memory]") and lines[1].startswith("VI816  [check (linter)]")
    from wizard.check.rule_index import all_rules

    unused = next(f"VI{n:03d}" for n in range(999, 0, -1) if f"VI{n:03d}" not in all_rules())  # none has it today
    r = run_cli(["rules", unused], env=cli_env)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert f"'{unused}' is not a verl-init rule ID" in r.stderr


@pytest.mark.slow
def test_next_command_matches_the_cluster(tmp_path, cli_env):
    expected = {"single-gpu": "./run.sh", "cluster-8gpu": "kubectl apply -f k8s/configmap.yaml -f k8s/rayjob.yaml",
                "ppo-16gpu": "ray/submit.sh --address http://HEAD:8265", "dapo-32gpu": "sbatch slurm/job.sbatch"}
    for profile, command in expected.items():
        r = run_cli(["--profile", profile, "--out", str(tmp_path / profile)], env=cli_env)
        assert r.returncode == 0, r.stderr
        (next_line,) = [line for line in r.stdout.splitlines() if line.strip().startswith("next:")]
        assert command in next_line, (profile, r.stdout)
        assert "./run.sh" not in next_line or profile == "single-gpu"


@pytest.mark.slow
def test_dry_run_names_a_folder_in_the_way_and_force_refuses_the_current_folder(tmp_path, cli_env):
    out = tmp_path / "full"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = run_cli(["--profile", "single-gpu", "--out", str(out), "--dry-run"], env=cli_env)
    assert r.returncode == 0 and "is not empty: writing it needs --force (VI903)" in r.stdout
    r = run_cli(["--profile", "single-gpu", "--out", ".", "--force"], env=cli_env, cwd=out)
    assert r.returncode != 0 and "[VI903]" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and (out / "keep.txt").read_text() == "mine"


def test_bundle_folder_gets_the_usual_mode(tmp_path, cli_env):
    out = tmp_path / "b"
    r = run_cli(["--profile", "single-gpu", "--out", str(out)], env=cli_env)
    assert r.returncode == 0, r.stderr
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's 0700: others on a shared FS can read it


def test_replay_from_another_folder_is_byte_identical(tmp_path, cli_env):
    """Relative model paths (cpu-smoke's ./tiny-model) are recorded as resolved, data paths relative to the bundle
    (verl-init.yaml's own folder), so a replay does not depend on the cwd."""
    first, elsewhere = tmp_path / "first", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "qa.jsonl").write_text("".join('{"question": "q%d", "answer": "#### %d"}\n' % (i, i) for i in range(300)))
    r = run_cli(["--profile", "cpu-smoke", "--set", "dataset=./qa.jsonl", "--out", str(first / "b")], env=cli_env,
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    recorded = yaml.safe_load((first / "b" / "verl-init.yaml").read_text())["answers"]
    assert recorded["model"] == str(tmp_path / "tiny-model") and recorded["dataset"] == "../../qa.jsonl"
    r = run_cli(["--answers", str(first / "b" / "verl-init.yaml"), "--out", str(elsewhere / "b")], env=cli_env,
                cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    for path in (first / "b").rglob("*"):
        if path.is_file():
            assert path.read_bytes() == (elsewhere / "b" / path.relative_to(first / "b")).read_bytes(), path


@pytest.mark.parametrize("word", sorted(COMMANDS))
def test_every_command_has_its_help(word, capsys):
    with pytest.raises(SystemExit) as stop:
        main([word, "--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: verl-init {word} ")


def _cli_imports() -> dict[str, set[str]]:
    """wizard.cli module -> the wizard.cli modules it imports, counting imports inside functions."""
    base = ROOT / "wizard" / "cli"
    names = {".".join(("wizard", "cli", *p.relative_to(base).with_suffix("").parts)).removesuffix(".__init__"): p
             for p in base.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in names and m != name}
    return graph


def test_cli_modules_import_no_cycle():
    """app.py dispatches to the command modules by name; none of them imports app.py or another in a loop."""
    graph = _cli_imports()
    assert not any("wizard.cli.app" in deps for deps in graph.values())
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join((*path, name))
        if name not in done:
            for dep in graph[name]:
                visit(dep, (*path, name))
            done.add(name)

    for name in graph:
        visit(name, ())
