"""A Hydra search path that does not resolve from the folder the launch runs in (real case verl#2735: the
one-step-off recipe launched from the user's own project folder): check's VI919. The oracle is Hydra's own compose
(initialize_config_dir + compose, as @hydra.main composes) run from the folder the launch would start in; every case
first asserts what Hydra does there. The valid control is verl's fully-async config, whose search path is
pkg://verl.trainer.config (verl PR#4393)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from wizard.check.entrypoints import CONFIGS, verl_config_dir
from wizard.check.lint import check
from wizard.check.rules.searchpath import OWN, needed
from wizard.check.source import read_yaml

pytestmark = pytest.mark.verl  # verl's own YAMLs are composed by Hydra

VERL = verl_config_dir().parent.parent  # the installed verl package
ROOT_WITH_VERL = VERL.parent  # a folder holding verl/trainer/config (site-packages), as a checkout's root does
ONE_STEP = VERL / "experimental/one_step_off_policy/config"
FULLY_ASYNC = VERL / "experimental/fully_async_policy/config"
OVERRIDES = ["algorithm.adv_estimator=grpo", "data.train_files=/d/train.parquet", "data.val_files=/d/val.parquet",
             "data.train_batch_size=64", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
             "actor_rollout_ref.hybrid_engine=False", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
             "actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.rollout.name=vllm",
             "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
             "trainer.nnodes=1", "trainer.n_gpus_per_node=4", "rollout.nnodes=1", "rollout.n_gpus_per_node=4"]
PKG = "'hydra.searchpath=[pkg://verl.trainer.config]'"


def _composes(folder: Path, name: str, cwd: Path, monkeypatch, overrides: tuple[str, ...] = ()) -> bool:
    """Hydra's verdict on composing `name` from `folder` with the process in `cwd`."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import MissingConfigException

    with monkeypatch.context() as m:
        m.chdir(cwd)
        GlobalHydra.instance().clear()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "provider=hydra.searchpath in main, path=... is not available"
                with initialize_config_dir(config_dir=str(folder), version_base=None):
                    compose(config_name=name, overrides=list(overrides))
        except MissingConfigException as exc:
            assert "Could not load" in str(exc), exc
            return False
        finally:
            GlobalHydra.instance().clear()
    return True


def _script(path: Path, cd: Path | None, launch: str, extra: list[str] = ()) -> Path:
    lines = ["#!/bin/bash", "set -x"] + ([f"cd {cd}"] if cd else []) + [launch + " \\"]
    words = [*OVERRIDES, *extra]
    path.write_text("\n".join(lines + [f"    {o} \\" for o in words[:-1]] + [f"    {words[-1]}", ""]), encoding="utf-8")
    return path


def _vi919(report):
    return [f.problem for f in report.findings if f.problem.rule == "VI919"]


ONE_STEP_LAUNCH = "python3 -m verl.experimental.one_step_off_policy.main_ppo"


def test_one_step_off_launched_from_a_project_folder_is_an_error(tmp_path, monkeypatch):
    proj = tmp_path / "myproj"
    proj.mkdir()
    assert not _composes(ONE_STEP, "one_step_off_ppo_trainer", proj, monkeypatch)  # verl#2735
    report = check(str(_script(tmp_path / "run.sh", proj, ONE_STEP_LAUNCH)), env={"HOME": str(tmp_path)})
    [one] = _vi919(report)
    assert one.severity == "error" and one.keys == ("hydra.searchpath",)
    assert "file://verl/trainer/config" in one.message and str(proj / "verl/trainer/config") in one.message
    assert "one_step_off_ppo_trainer.yaml:1-7" in one.message and "Could not load 'ppo_trainer'" in one.message
    assert "hydra.searchpath=[pkg://verl.trainer.config]" in one.hint


def test_one_step_off_launched_where_the_entry_resolves_is_clean(tmp_path, monkeypatch):
    # the control: from a folder holding verl/trainer/config (a verl checkout's root; here site-packages) it composes
    assert _composes(ONE_STEP, "one_step_off_ppo_trainer", ROOT_WITH_VERL, monkeypatch)
    report = check(str(_script(tmp_path / "run.sh", ROOT_WITH_VERL, ONE_STEP_LAUNCH)), env={"HOME": str(tmp_path)})
    assert _vi919(report) == [] and not report.errors, [f.problem.line() for f in report.findings]


@pytest.mark.slow
def test_the_pkg_searchpath_resolves_anywhere(tmp_path, monkeypatch):
    """The fix the hint gives (a command-line search path replaces the YAML's) and verl's fully-async config, whose own
    search path is pkg:// (R14-07's control): Hydra composes both from the project folder, check is silent."""
    proj = tmp_path / "myproj"
    proj.mkdir()
    assert _composes(ONE_STEP, "one_step_off_ppo_trainer", proj, monkeypatch, (PKG.strip("'"),))
    fixed = check(str(_script(tmp_path / "fixed.sh", proj, ONE_STEP_LAUNCH, [PKG])), env={"HOME": str(tmp_path)})
    assert _vi919(fixed) == [] and not fixed.errors, [f.problem.line() for f in fixed.findings]
    assert _composes(FULLY_ASYNC, "fully_async_ppo_trainer", proj, monkeypatch)
    launch = "python3 -m verl.experimental.fully_async_policy.fully_async_main"
    control = check(str(_script(tmp_path / "async.sh", proj, launch, ["rollout.total_rollout_steps=100"])),
                    env={"HOME": str(tmp_path)})
    assert control.source.entry == "fully_async" and _vi919(control) == []


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_a_users_yaml_with_a_relative_searchpath(tmp_path, monkeypatch):
    """The user's own --config-path YAML: the relative entry is an error from the project folder, with the pkg://
    entry as the fix; the control: the same YAML naming verl's folder by its absolute path composes there."""
    cfg, proj = tmp_path / "cfg", tmp_path / "proj"
    cfg.mkdir()
    proj.mkdir()

    def yaml(entry: str) -> None:
        (cfg / "mine.yaml").write_text(f"hydra:\n  searchpath:\n    - {entry}\ndefaults:\n  - ppo_trainer\n  - _self_\n",
                                       encoding="utf-8")

    launch = f"python3 -m verl.trainer.main_ppo --config-path={cfg} --config-name=mine"
    yaml("file://verl/trainer/config")
    assert not _composes(cfg, "mine", proj, monkeypatch)
    [one] = _vi919(check(str(_script(tmp_path / "run.sh", proj, launch)), env={"HOME": str(tmp_path)}))
    assert one.severity == "error" and str(cfg / "mine.yaml") in one.message
    assert "Could not load 'ppo_trainer'" in one.message and "write pkg://verl.trainer.config" in one.hint
    yaml(f"file://{verl_config_dir()}")
    assert _composes(cfg, "mine", proj, monkeypatch)
    report = check(str(_script(tmp_path / "ok.sh", proj, launch)), env={"HOME": str(tmp_path)})
    assert _vi919(report) == [], [f.problem.line() for f in report.findings]


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_without_a_cd_the_folder_is_a_guess_and_an_info(tmp_path, monkeypatch):
    """No `cd` before the launch and no --workdir: check's own folder stands for the launch's (an info); --workdir
    names it (then an error or nothing, as Hydra would do there)."""
    assert not _composes(ONE_STEP, "one_step_off_ppo_trainer", tmp_path, monkeypatch)
    script = _script(tmp_path / "run.sh", None, ONE_STEP_LAUNCH)
    monkeypatch.chdir(tmp_path)
    guessed = _vi919(check(str(script), env={"HOME": str(tmp_path)}))
    assert [p.severity for p in guessed] == ["info"] and "--workdir" in guessed[0].hint
    assert [p.severity for p in _vi919(check(str(script), env={"HOME": str(tmp_path)}, workdir=str(tmp_path)))] == \
        ["error"]
    assert _vi919(check(str(script), env={"HOME": str(tmp_path)}, workdir=str(ROOT_WITH_VERL))) == []


def test_the_table_of_verls_own_search_paths_is_verls():
    """OWN (used where verl is not installed) holds what the installed YAMLs say, for every config of verl's that has
    a search path, and the lines it cites hold it."""
    with_searchpath = {}
    for name, (_, folder) in CONFIGS.items():
        path = VERL / folder / f"{name}.yaml"
        doc = read_yaml(path)
        if isinstance(doc.get("hydra"), dict) and doc["hydra"].get("searchpath"):
            with_searchpath[name] = (tuple(doc["hydra"]["searchpath"]), tuple(needed(doc["defaults"])))
            head = "".join(path.read_text(encoding="utf-8").splitlines(keepends=True)[:7])
            assert all(e in head for e in doc["hydra"]["searchpath"]) and f"- {needed(doc['defaults'])[0][:-5]}" in head
    assert with_searchpath == {n: (e, tuple(f"{d}.yaml" for d in ds)) for n, (e, ds, _) in OWN.items()}
    assert all(cite.endswith(f"{n}.yaml:1-7") for n, (_, _, cite) in OWN.items())
