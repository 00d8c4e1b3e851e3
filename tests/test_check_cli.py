"""`verl-init check` as a user runs it: output, JSON, exit codes, --fix round trips, --verl, modes, speed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REFERENCE, ROOT, run_cli

import wizard
from wizard.check.lint import check
from wizard.check.overrides import format_value, parse_value
from wizard.check.report import fixed_overrides


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("b")
    plan = wizard.plan(wizard.load_profile("single-node-8gpu"), base_dir=str(root))
    return wizard.write_bundle(wizard.render(plan), root / "bundle")


BROKEN = [
    "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.n=4",
    "data.train_batch_size=16",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.actor.use_dynamic_bsz=True",
    "trainer.logger=[console]",
    "trainer.nnodes=1",
    "trainer.n_gpus_per_node=1",
    # fixable, one safe fix each:
    "custom_reward_function.path=reward.py",  # VI805: legacy key -> reward.custom_reward_function.path
    "+actor_rollout_ref.rollout.gpu_memory_utilization=0.5",  # VI803: + on an existing key
    "actor_rollout_ref.rollout.mode=sync",  # VI853: removed mode -> async
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size=1",
    "actor_rollout_ref.model.use_remove_padding=True",
]


def _ids(report, severity="error"):
    return report.ids(severity)


def test_json_has_exactly_findings_config_memory_and_time(bundle, cli_env):
    r = run_cli(["check", str(bundle), "--json", "--defaults", "snapshot"], env=cli_env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    # the bundle says its GPU memory: the estimate is there; its model can be sized: the step time too (issue 28)
    assert set(doc) == {"findings", "config", "memory", "time"}
    assert {"step_s", "phases", "run_gpu_hours", "assumptions"} <= set(doc["time"])
    for f in doc["findings"]:
        assert set(f) == {"id", "severity", "keys", "message", "hint"}
        assert f["severity"] in ("error", "warning", "info") and isinstance(f["keys"], list)
    assert doc["config"]["trainer.n_gpus_per_node"] == 8


def test_exit_1_on_errors_and_a_readable_table(cli_env, tmp_path):
    r = run_cli(["check", "--defaults", "snapshot", "--", *BROKEN], env=cli_env, cwd=tmp_path)
    assert r.returncode == 1
    assert "error   VI810" in r.stdout and "→ nearest valid" in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("errors found:")


def test_script_input_with_env(cli_env, tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(textwrap.dedent("""\
        #!/usr/bin/env bash
        GPUS=${GPUS:-8}
        python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.rollout.name=vllm \\
            actor_rollout_ref.model.path=$MODEL trainer.n_gpus_per_node=$GPUS trainer.logger=[console] \\
            actor_rollout_ref.actor.use_dynamic_bsz=True actor_rollout_ref.rollout.n=4 \\
            data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=16
        """))
    r = run_cli(["check", str(script), "--json", "--defaults", "snapshot"], env=cli_env)
    doc = json.loads(r.stdout)
    vi800 = [f for f in doc["findings"] if f["id"] == "VI800"]
    assert vi800 and vi800[0]["keys"] == ["actor_rollout_ref.model.path"] and "environment" in vi800[0]["message"]
    r = run_cli(["check", str(script), "--json", "--defaults", "snapshot", "--env", "MODEL=Qwen/Qwen2.5-7B-Instruct",
                 "--env", "GPUS=3"], env=cli_env)
    doc = json.loads(r.stdout)
    assert not [f for f in doc["findings"] if f["id"] == "VI800"]
    assert doc["config"]["trainer.n_gpus_per_node"] == 3
    assert "VI822" in {f["id"] for f in doc["findings"]}  # 16×4 samples over 3 ranks


def test_mode_cluster_still_goes_to_cluster_check(monkeypatch):
    import wizard.env.cluster as cc
    from wizard.check import lint
    from wizard.cli.app import main

    seen = []
    monkeypatch.setattr(cc, "cli", lambda args: seen.append(("cluster", list(args))) or 0)
    monkeypatch.setattr(lint, "cli", lambda args: seen.append(("config", list(args))) or 0)
    assert main(["check", "--mode", "cluster", "b"]) == 0
    assert main(["check", "--mode=cluster", "b"]) == 0
    assert main(["check", "b.yaml"]) == 0
    assert main(["check", "--mode", "config", "b.yaml"]) == 0
    assert main(["check", "--", "x.mode=cluster"]) == 0
    assert [s[0] for s in seen] == ["cluster", "cluster", "config", "config", "config"]


# --- --fix -------------------------------------------------------------------------------------


def test_fix_round_trip_overrides(cli_env, tmp_path):
    (tmp_path / "reward.py").write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                                        "    return 0.0\n")
    before = check(None, BROKEN, defaults="snapshot", workdir=str(tmp_path))
    fixable = {f.problem.rule for f in before.findings if f.fix is not None}
    assert {"VI805", "VI803", "VI853", "VI810"} <= fixable
    out = tmp_path / "fixed.txt"
    r = run_cli(["check", "--defaults", "snapshot", "--workdir", str(tmp_path), "--fix", str(out), "--", *BROKEN],
                env=cli_env, cwd=tmp_path)
    assert r.returncode == 1  # the report was not clean before the fix
    for rule in fixable:  # never silently: every change is named with its rule
        assert f"--fix: {rule}" in r.stderr
    fixed = out.read_text().split("\n")[:-1]
    assert "reward.custom_reward_function.path=reward.py" in fixed
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.5" in fixed
    assert "actor_rollout_ref.rollout.mode=async" in fixed
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=1" in fixed
    assert not any(line.startswith("custom_reward_function") for line in fixed)
    after = check(None, fixed, defaults="snapshot", workdir=str(tmp_path))
    assert not after.errors, [f.problem.line() for f in after.errors]
    assert not (fixable & after.ids())


def test_fix_leaves_unsafe_findings_alone_and_says_so(cli_env, tmp_path):
    args = BROKEN[:10] + ["actor_rollout_ref.actor.ppo_mini_batch_size=32"]  # VI820: no single safe fix
    r = run_cli(["check", "--defaults", "snapshot", "--fix", "--", *args], env=cli_env, cwd=tmp_path)
    assert "have no single safe fix" in r.stderr and "VI820" in r.stderr
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=32" in r.stdout.splitlines()


def test_fix_for_a_yaml_appends_overrides(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(textwrap.dedent("""\
        hydra:
          searchpath: [pkg://verl.trainer.config]
        defaults: [ppo_trainer, _self_]
        algorithm: {adv_estimator: gae}
        actor_rollout_ref:
          model: {path: Qwen/Qwen2.5-1.5B-Instruct}
          actor: {ppo_mini_batch_size: 8, use_dynamic_bsz: true}
          rollout: {name: vllm, n: 1, tensor_model_parallel_size: 1}
        data: {train_batch_size: 16}
        critic: {use_dynamic_bsz: true}
        reward_model: {reward_manager: dapo}
        trainer: {nnodes: 1, n_gpus_per_node: 1, logger: [console]}
        """))
    before = check(str(cfg), defaults="snapshot")
    assert {"VI805", "VI846"} <= before.ids("error")
    lines, changes = fixed_overrides(before)
    assert "~reward_model.reward_manager" in lines
    assert "reward.reward_manager.name=dapo" in lines
    assert "critic.model.path=Qwen/Qwen2.5-1.5B-Instruct" in lines
    assert len(changes) == 2
    after = check(str(cfg), lines, defaults="snapshot")
    assert not after.errors, [f.problem.line() for f in after.errors]


def test_fix_deprecated_micro_batch_round_trip(tmp_path):
    args = BROKEN[:5] + ["actor_rollout_ref.actor.ppo_mini_batch_size=8", "trainer.logger=[console]", "trainer.nnodes=1",
                         "trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.ppo_micro_batch_size=8",
                         "actor_rollout_ref.rollout.log_prob_micro_batch_size=16",
                         "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]
    before = check(None, args, defaults="snapshot")
    assert "VI806" in before.ids("error")
    fixed, _ = fixed_overrides(before)
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2" in fixed
    assert "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4" in fixed
    after = check(None, fixed, defaults="snapshot")
    assert not after.errors, [f.problem.line() for f in after.errors]


@pytest.mark.parametrize("value", [None, True, False, 3, -1, 1e-6, 0.5, "vllm", "a b", "x,y", "[]", "~/d",
                                   ["console", "wandb"], [8, 16], {"a": 1, "b": "c"}, "${oc.env:HOME}/x", "1e-6", "true"])
def test_format_value_round_trips(value):
    assert parse_value(format_value(value)) == value


def test_parse_value_follows_hydra():
    assert parse_value("1e-6") == 1e-6 and parse_value("True") is True and parse_value("null") is None
    assert parse_value("[console,tensorboard]") == ["console", "tensorboard"]
    assert parse_value("['/a/b.parquet', '/c.parquet']") == ["/a/b.parquet", "/c.parquet"]
    assert parse_value('["console","wandb"]') == ["console", "wandb"]
    assert parse_value("${oc.select:a.b,1}") == "${oc.select:a.b,1}"
    assert parse_value("[8, 16, 32]") == [8, 16, 32]


# --- --verl ---------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.verl
def test_verl_verdict_beside_ours(bundle, tmp_path):
    report = check(str(bundle), defaults="verl", run_verl=True)
    assert report.verl is not None and report.verl.ok, report.verl.summary()
    assert report.ok
    broken = check(str(bundle / "run.sh"), ["actor_rollout_ref.actor.ppo_mini_batch_size=3"], defaults="verl", run_verl=True)
    assert "VI822" in broken.ids("error")
    assert not broken.verl.ok
    assert any("engine_workers.py:264" in c.name for c in broken.verl.failures)
    doc = broken.as_dict()
    assert set(doc) == {"findings", "config", "memory", "time", "verl"} and doc["verl"]["accepted"] is False


# --- speed and imports ----------------------------------------------------------------------------


def test_checking_configs_without_verl_imports_nothing_heavy():
    """Without --verl, check reads verl's tree from the shipped snapshot: no verl/torch/hydra import.
    (How fast it is lives in benchmarks/bench_check.py, not here.)"""
    code = textwrap.dedent(f"""\
        import json, sys
        from wizard.check.lint import check
        configs = json.load(open({str(REFERENCE / 'verl-examples.json')!r}))["configs"]
        for c in configs:
            check(None, c["overrides"], defaults="snapshot", env={{"HOME": "/root"}})
        heavy = [m for m in ("verl", "torch", "hydra", "omegaconf", "ray", "transformers") if m in sys.modules]
        print(json.dumps({{"n": len(configs), "heavy": heavy}}))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    stats = json.loads(out.stdout)
    assert stats["heavy"] == [] and stats["n"] >= 28, stats


def test_checking_with_verls_tree_imports_neither_verl_nor_torch(bundle):
    """With verl installed, check composes verl's own Hydra tree from its installed files: Hydra is imported,
    verl's Python package (and torch with it) is not (a bundle's pkg://verl.trainer.config search path
    would make Hydra import it)."""
    code = textwrap.dedent(f"""\
        import json, sys
        from wizard.check.lint import check
        r = check({str(bundle)!r}, defaults="verl")
        print(json.dumps({{"mode": r.defaults, "heavy": [m for m in ("verl", "torch", "tensordict") if m in sys.modules]}}))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    assert stats["heavy"] == [] and "Hydra tree" in stats["mode"], stats


def test_check_help_imports_nothing_heavy():
    code = ("import sys\nfrom wizard.cli.app import main\ntry:\n    main(['check', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('ray','torch','transformers','verl','jinja2','pydantic','questionary','yaml',"
            "'omegaconf','hydra') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_fix_renames_moved_keys_deletes_removed_ones_and_sets_remove_padding(tmp_path):
    args = BROKEN[:10] + ["trainer.n_gpus_per_node=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
                          "critic.model.fsdp_config.param_offload=False", "trainer.use_legacy_worker_impl=auto",
                          "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
                          "actor_rollout_ref.model.use_remove_padding=False"]
    before = check(None, args, defaults="snapshot")
    assert {"VI801", "VI812"} <= before.ids("error")
    fixed, changes = fixed_overrides(before)
    assert "critic.fsdp.param_offload=false" in fixed
    assert not any(x.startswith(("critic.model.fsdp_config", "trainer.use_legacy_worker_impl")) for x in fixed)
    assert "actor_rollout_ref.model.use_remove_padding=true" in fixed
    assert len(changes) == 3
    after = check(None, fixed, defaults="snapshot")
    assert not after.errors, [f.problem.line() for f in after.errors]


def test_gpu_type_gives_the_memory_when_unambiguous():
    args = BROKEN[:10] + ["actor_rollout_ref.rollout.tensor_model_parallel_size=1"]
    report = check(None, args, defaults="snapshot", gpu_type="NVIDIA H100 80GB HBM3")
    assert report.hardware.gpu_memory_gb == 80 and report.memory is not None
    assert any("assuming 80 GB" in f.problem.message for f in report.findings)
    unknown = check(None, args, defaults="snapshot", gpu_type="A100")  # 40 or 80 GB: not assumed
    assert unknown.memory is None and "VI861" in unknown.ids("info")
