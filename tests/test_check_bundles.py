"""`verl-init check` on every bundle verl-init renders: 0 errors and 0 warnings, from the bundle's
verl_config.yaml and from its run.sh (read, not run), with verl-init's snapshot and with verl's tree.
The memory the checker estimates from the config equals the planner's estimate for the same plan."""

from __future__ import annotations

from pathlib import Path

import pytest

import wizard
from wizard.check.lint import check
from wizard.intent.profiles import profile_names

PROFILES = profile_names()


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, object]]:
    from wizard.smoketest.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("bundles")
    build_tiny_model(root / "tiny-model")  # cpu-smoke's ./tiny-model (the smoke run builds it there)
    out = {}
    for name in PROFILES:
        plan = wizard.plan(wizard.load_profile(name), base_dir=str(root))
        out[name] = (wizard.write_bundle(wizard.render(plan), root / name), plan)
    return out


def _clean(report) -> None:
    assert not report.errors and not report.warnings, [f.problem.line() for f in report.findings]


@pytest.mark.parametrize("entry", ["verl_config.yaml", "run.sh"])
@pytest.mark.parametrize("profile", PROFILES)
def test_bundle_is_clean_snapshot(bundles, profile, entry):
    bundle, plan = bundles[profile]
    report = check(str(bundle / entry), defaults="snapshot")
    _clean(report)
    assert report.hardware.source == "bundle"
    # the only findings are the data files that data/prepare_data.py has not written yet
    # and the predicted step time (VI895, info: the same seconds as PLAN.md's "Time and cost")
    # (on Ascend the memory fit is not checked: VI861, the memory model is calibrated on NVIDIA runs;
    # a MoE model's memory is estimated like a dense one's, its experts sharded over the Megatron EP and the
    # rollout's TP × DP, and must equal the planner's)
    npu = plan.answers.accelerator == "ascend"
    # (a plan that saves no checkpoint, as cpu-smoke's save_freq=-1, is told so: VI916, info)
    unsaved = {"VI916"} if (plan.value("trainer.save_freq") or 0) <= 0 else set()
    # (a plan that bounds its checkpoints and resumes is told that restarts leave older ones: VI992, info, verl#7395)
    unsaved |= {"VI992"} if plan.settings.get("trainer.max_actor_ckpt_to_keep") else set()
    assert {f.problem.rule for f in report.findings} <= {"VI870", "VI895"} | ({"VI861"} if npu else set()) | unsaved, \
        [f.problem.line() for f in report.findings]
    from wizard.planner.steptime_plan import of_plan

    planned = of_plan(plan)
    if planned is not None and plan.answers.model_params_b is None and not npu:
        # check reads the same seconds per phase from the bundle as PLAN.md shows (told the plan's GPU type)
        typed = check(str(bundle / entry), defaults="snapshot", gpu_type=plan.answers.gpu_type)
        assert typed.time is not None
        assert typed.time["phases_detail"] == pytest.approx(planned["phases_detail"], rel=1e-3, abs=0.11)
    if plan.facts.get("moe_experts"):
        assert report.memory is not None and plan.memory is not None
    if plan.memory is not None and plan.answers.model_params_b is None and not npu:
        # (cpu-smoke sizes its tiny model from model_params_b; the checker reads the folder's config.json)
        assert report.memory.peak_gb == pytest.approx(plan.memory.peak_gb, abs=1e-6)


def test_bundle_folder_means_its_verl_config(bundles):
    bundle, _ = bundles["single-gpu"]
    report = check(str(bundle), defaults="snapshot")
    assert report.source.label.endswith("verl_config.yaml")
    _clean(report)


@pytest.mark.slow
def test_run_sh_and_yaml_resolve_the_same(bundles):
    for name in PROFILES:
        bundle, _ = bundles[name]
        a = check(str(bundle / "verl_config.yaml"), defaults="snapshot").config
        b = check(str(bundle / "run.sh"), defaults="snapshot").config
        assert a == b, name


def test_run_sh_extra_overrides_are_checked_too(bundles):
    bundle, _ = bundles["single-node-8gpu"]
    report = check(str(bundle / "run.sh"), ["actor_rollout_ref.rollout.tensor_model_parallel_size=3"], defaults="snapshot")
    assert "VI810" in report.ids("error")


@pytest.mark.verl
@pytest.mark.parametrize("entry", ["verl_config.yaml", "run.sh"])
@pytest.mark.parametrize("profile", PROFILES)
def test_bundle_is_clean_with_verls_hydra_tree(bundles, profile, entry):
    bundle, _ = bundles[profile]
    report = check(str(bundle / entry), defaults="verl")
    assert report.defaults.startswith("verl ")
    _clean(report)


def test_typos_inside_a_bundle_yaml_are_caught(bundles, tmp_path):
    """Hydra merges unknown YAML keys silently; verl ignores them (or its dataclass fails later)."""
    import shutil

    import yaml

    bundle = tmp_path / "edited"
    shutil.copytree(bundles["single-node-8gpu"][0], bundle)
    path = bundle / "verl_config.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["trainer"]["n_gpus"] = 8
    doc["actor_rollout_ref"]["actor"]["ppo_mini_batchsize"] = 8
    doc["custom_reward_function"] = {"path": "reward.py"}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    report = check(str(path), defaults="snapshot")
    by_rule = {(f.problem.rule, f.problem.keys[0]) for f in report.errors}
    assert ("VI801", "trainer.n_gpus") in by_rule
    assert ("VI804", "actor_rollout_ref.actor.ppo_mini_batchsize") in by_rule
    assert ("VI805", "custom_reward_function.path") in by_rule
