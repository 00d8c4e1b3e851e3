"""The `cpu` smoke engine end to end: one rollout → reward → advantage → update cycle on a local Ray
instance with one process per role, per algorithm family, and deliberately broken bundles that must
fail in the right phase. Each run starts and stops its own small Ray instance (2 logical CPUs).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import wizard
from conftest import ROOT
from wizard.intent.answers import make_answers
from wizard.smoketest.report import SmokeReport, format_report
from wizard.smoketest.run import SmokeOptions

pytestmark = [pytest.mark.verl, pytest.mark.slow]

DATA = ROOT / "tests" / "data"
GSM8K = str(DATA / "gsm8k")
BASE = dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=16, gpu_type="cpu", model="./tiny-model", model_params_b=0.001,
            dataset="gsm8k", max_prompt_length=128, max_response_length=64, prompts_per_step=8, samples_per_prompt=4,
            updates_per_step=2, total_steps=1, save_freq=-1, test_freq=-1)


def bundle(tmp_path: Path, **changes) -> Path:
    plan = wizard.plan(make_answers({**BASE, **changes}), base_dir=str(tmp_path))
    return wizard.write_bundle(wizard.render(plan), tmp_path / "bundle")


def run(b: Path, **options) -> SmokeReport:
    report = wizard.smoke(b, options=SmokeOptions(engine="cpu", data_dir=GSM8K, **options))
    import ray

    assert not ray.is_initialized(), "the smoke run must stop its Ray instance"
    return report


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "wizard.cli.app", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=400)


def assert_pitfalls_absent(r: SmokeReport, *, critic: bool, reference: bool) -> None:
    """The five pitfalls of docs/pitfalls.md, each shown absent by numbers measured in the run."""
    assert r.ok, format_report(r) + "\n" + r.log_tail[-3000:]
    assert [p.status for p in r.phases] == ["ok"] * 6
    assert r.pitfalls() == {"1": True, "2": True, "3": True, "4": True, "5": True}
    checks = {c.name: c for c in r.checks}
    # 1. every role its own instance and weights
    assert r.actor_updated is True
    before, after = r.update["digests"]["before"], r.update["digests"]["after"]
    assert before["actor"] != after["actor"]
    lora = bool(r.geometry["smoke"]["lora"])
    if reference and lora:  # the reference is the actor's base weights, in the actor's process (verl's ref_in_actor)
        assert r.reference_unchanged is True and before["reference"] == after["reference"]
        assert r.placement["reference"]["pid"] == r.placement["actor"]["pid"]
        assert checks["lora_adapters_only"].ok and checks["reference_inside_actor"].ok
    elif reference:
        assert r.reference_unchanged is True and before["reference"] == after["reference"] == before["actor"]
        assert r.placement["reference"]["pid"] != r.placement["actor"]["pid"]
        assert checks["kl_moves"].evidence["mean_abs_logprob_diff"] > 0
        assert checks["kl_moves"].evidence["reference_drift"] == 0.0
        assert r.kl is not None and math.isfinite(r.kl)
    else:
        assert r.reference_unchanged is None and "reference" not in r.placement
    assert r.critic_used is critic and ("critic" in r.placement) is critic
    if critic:
        assert r.critic_updated is True and before["critic"] != after["critic"]
    # 2. every rolled-out sample used exactly once; one optimizer step per mini-batch
    assert r.samples_used == r.samples == r.prompts * r.geometry["smoke"]["n"]
    steps = r.update["actor_steps"]
    assert len(steps) == r.geometry["smoke"]["updates"] == r.geometry["bundle"]["updates"]
    assert all(s["samples"] == r.geometry["smoke"]["samples_per_update"] for s in steps)
    assert checks["every_sample_used_once"].ok and checks["mini_and_micro_batches"].ok
    # 3. placement and layout from the plan
    assert checks["device_layout"].ok and checks["role_placement"].ok
    assert "GiB per GPU" in checks["device_layout"].detail and checks["device_layout"].evidence["memory_peak_gib"] > 0
    gpu_roles = [k for k in r.placement if k != "reward"]
    assert all(r.placement[k]["ray_resources"].get("GPU") for k in gpu_roles)
    assert len({r.placement[k]["pid"] for k in r.placement}) == len(r.placement) - (1 if reference and lora else 0)
    # 4. rows in verl's schema, non-degenerate rewards from a scorer that tells right from wrong
    assert r.data["kept_by_verl_rlhfdataset"] >= 1 and r.reward_std and r.reward_std > 0
    assert checks["scorer_discriminates"].ok and checks["rewards_vary"].ok
    # 5. static: the launching environment; Ray's own resources are recorded, not checked (the smoke started it)
    assert checks["launch_environment"].kind == "static" and "ray_resources" not in checks
    assert r.resources["ray_cluster"]["GPU"] == r.geometry["bundle"]["gpus_per_node"]
    # finite numbers
    assert all(math.isfinite(x) for x in (r.policy_loss, r.entropy))
    doc = r.as_dict()
    json.dumps(doc)
    assert doc["seconds"]["total"] > 0 and set(doc["pitfalls"].values()) == {True}


# ---------------------------------------------------------------------------------------------
# passing runs


def test_cpu_smoke_profile_from_the_cli_json(tmp_path):
    """The cpu-smoke profile, rendered and smoked from the command line (grpo, KL loss, reference)."""
    r = cli("--profile", "cpu-smoke", "--out", "b", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = cli("smoke", "b", "--engine", "cpu", "--data-dir", GSM8K, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["ok"] and doc["engine"] == "cpu" and doc["algorithm"] == "grpo"
    assert (doc["prompts"], doc["samples"], doc["samples_used"]) == (8, 32, 32)
    assert doc["actor_updated"] is True and doc["reference_unchanged"] is True and doc["critic_used"] is False
    assert doc["reward_std"] > 0 and math.isfinite(doc["policy_loss"]) and math.isfinite(doc["kl"])
    assert set(doc["pitfalls"].values()) == {True}
    assert doc["seconds"]["total"] < 180, doc["seconds"]  # benchmarks/bench_smoke.py holds the ≤ 120 s budget
    assert not list(tmp_path.glob("b/outputs")) and not (tmp_path / "b" / "data" / "train.parquet").exists()


def test_render_then_smoke_flag(tmp_path):
    """`verl-init --profile X --out DIR --smoke` renders the bundle, then smokes it (a local data file)."""
    r = cli("--profile", "cpu-smoke", "--set", f"dataset={DATA / 'qa' / 'plain.jsonl'}", "--out", "b", "--smoke",
            cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "wrote b/" in r.stdout and "smoke PASSED" in r.stdout
    assert "pitfall checks" in r.stdout and "smoke: update ok" in r.stderr


def test_ppo_with_a_critic(tmp_path):
    r = run(bundle(tmp_path, algorithm="ppo", samples_per_prompt=1))
    assert_pitfalls_absent(r, critic=True, reference=True)
    assert r.adv_estimator == "gae" and r.update["critic_steps"] and len(r.update["critic_steps"]) == 2
    assert r.update["reward_kl_penalty"] is not None  # ppo: KL folded into the reward


def test_dapo_filters_groups_and_refills(tmp_path):
    r = run(bundle(tmp_path, algorithm="dapo", samples_per_prompt=4))
    assert_pitfalls_absent(r, critic=False, reference=False)
    assert r.reward["manager"] == "DAPORewardManager"
    evicted = r.reward["groups_evicted_identical_rewards"]
    assert r.samples_generated == r.reward["generation_batches"] * r.prompts * 4
    assert evicted is not None and r.samples_generated >= r.samples + evicted * 4 - r.prompts * 4


def test_rloo(tmp_path):
    r = run(bundle(tmp_path, algorithm="rloo"))
    assert_pitfalls_absent(r, critic=False, reference=True)
    assert r.update["advantage"]["estimator"] == "rloo"


def test_grpo_two_ranks_fixed_micro_batches(tmp_path):
    """dp=2, fixed micro-batches: the batch splits over two emulated ranks, each into its micro-batches."""
    r = run(bundle(tmp_path, gpus_per_node=2, dynamic_batch=False, micro_batch_per_gpu=2))
    assert_pitfalls_absent(r, critic=False, reference=True)
    sg = r.geometry["smoke"]
    assert sg["dp"] == 2 and sg["micro"] == 2 and sg["micro_batches"] == 4
    assert all(s["micro_batches_per_rank"] == [4, 4] for s in r.update["actor_steps"])
    assert r.resources["ray_cluster"]["GPU"] == 2


def test_grpo_lora_four_ranks_dynamic_batches(tmp_path):
    """LoRA on 4 GPUs with dynamic batching: 4 emulated ranks (the bundle's dp), token-budget micro-batches for the
    update and the log-prob passes, adapters only, the reference inside the actor."""
    r = run(bundle(tmp_path, gpus_per_node=4, lora_rank=8, prompts_per_step=8, samples_per_prompt=4))
    assert_pitfalls_absent(r, critic=False, reference=True)
    sg = r.geometry["smoke"]
    assert sg["dp"] == r.geometry["bundle"]["dp"] == 4 and sg["dynamic"] and sg["lora"]
    assert len(r.update["logprob_micro_batches_per_rank"]) == 4 and len(r.update["ref_micro_batches_per_rank"]) == 4
    ev = {c.name: c for c in r.checks}["mini_and_micro_batches"].evidence
    assert 0 < ev["micro_tokens_max"] <= ev["token_budget"]


@pytest.mark.parametrize("algorithm", ["reinforce_plus_plus", "remax", "gspo"])
def test_other_algorithms(algorithm, tmp_path):
    r = run(bundle(tmp_path, algorithm=algorithm))
    assert_pitfalls_absent(r, critic=False, reference=algorithm != "gspo")


# ---------------------------------------------------------------------------------------------
# broken bundles fail loudly, in the right phase


def test_reward_function_that_always_returns_zero(tmp_path):
    fn = tmp_path / "zero.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
                  "    return 0.0\n")
    r = run(bundle(tmp_path, dataset=str(DATA / "qa" / "plain.jsonl"), reward="function",
                   reward_function=f"{fn}:compute_score"))
    assert not r.ok and r.failure is not None and r.failure.phase == "reward"
    assert "every reward is 0" in r.failure.message and "reward function" in r.failure.hint
    checks = {c.name: c.ok for c in r.checks}
    assert checks["rewards_vary"] is False and checks["scorer_discriminates"] is False
    assert [p.status for p in r.phases][3:] == ["failed", "skipped", "skipped"]


def test_string_prompts_fail_in_the_data_phase(tmp_path):
    bad = str(DATA / "bad" / "prompt_string.jsonl")  # 3 rows: one step of 2 prompts fits (VI519)
    r = run(bundle(tmp_path, train_files=bad, val_files=bad, prompts_per_step=2, updates_per_step=1))
    assert r.failure is not None and r.failure.phase == "data"
    assert "VI522" in r.failure.message and "row 1" in r.failure.message
    assert [p.status for p in r.phases] == ["ok", "failed", "skipped", "skipped", "skipped", "skipped"]


def test_data_source_without_a_scorer_fails_with_verls_message(tmp_path):
    bad = str(DATA / "bad" / "unknown_data_source.jsonl")  # 3 rows: one step of 2 prompts fits (VI519)
    r = run(bundle(tmp_path, train_files=bad, val_files=bad, prompts_per_step=2, updates_per_step=1))
    assert r.failure is not None and r.failure.phase == "reward"
    assert r.failure.message == "NotImplementedError: Reward function is not implemented for data_source='my_homework'"
    assert "reward=function" in r.failure.hint


def test_genrm_judge_function_under_verls_reward_manager(tmp_path):
    """reward=genrm: the bundle's judge function, run by verl's reward manager with a router address, asks a stand-in
    judge over HTTP (the judge LLM needs vLLM/SGLang on a GPU: reported n/a) and its parsed verdicts train the step."""
    r = run(bundle(tmp_path, reward="genrm", reward_model="Qwen/Qwen2.5-0.5B-Instruct", judge_max_tokens=64))
    assert_pitfalls_absent(r, critic=False, reference=True)
    assert r.reward["manager"] == "NaiveRewardManager"
    assert "reward/genrm_fn.py:compute_score asking a stand-in judge" in r.reward["scorer"]
    checks = {c.name: c for c in r.checks}
    judge = checks["judge LLM serving the verdicts"]
    assert judge.ok is None and "needs verl's reward loop with a vLLM or SGLang server on a GPU" in judge.detail
    assert r.reward["probe"]["right_answer_scores"] and all(s == 1.0 for s in r.reward["probe"]["right_answer_scores"])


def test_megatron_lora_trains_the_adapters_of_model_lora(tmp_path):
    """A Megatron LoRA bundle sets model.lora.rank (not model.lora_rank): the miniature builds the same adapters from
    it, trains them only and computes the reference inside the actor, as verl's Megatron engine does."""
    b = bundle(tmp_path, gpus_per_node=2, train_backend="megatron", lora_rank=8)
    model = (b / "verl_config.yaml").read_text()
    assert "lora:\n      rank: 8" in model and "lora_rank" not in model
    r = run(b)
    assert_pitfalls_absent(r, critic=False, reference=True)
    assert r.geometry["smoke"]["lora"] and r.model["lora"]["rank"] == 8
    assert 0 < r.model["lora"]["trainable"] < r.model["lora"]["parameters"] / 2  # adapters only (checked by sha256 too)
