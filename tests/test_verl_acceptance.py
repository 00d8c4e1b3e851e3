"""The proof: what verl-init renders, verl's own code accepts (or our rules refused it first)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import wizard
from sampler import sample
from wizard.intent.errors import WizardError
from wizard.verify.harness import verify_with_verl

pytestmark = [pytest.mark.verl]
N_SAMPLES = 200
QUICK_SAMPLES = 40  # the quick loop runs the first 40 seeds; the full suite (CI) all of them
PROFILES = ["single-gpu", "single-node-8gpu", "cluster-8gpu", "ppo-16gpu", "dapo-32gpu", "megatron-64gpu", "cpu-smoke",
             "amd-mi300x-kuberay", "ascend-910b", "vlm-grpo", "multiturn-gsm8k-tool", "lora-megatron",
             "qwen3-30b-a3b-moe-8gpu", "qwen3-235b-moe-64gpu", "code-sandbox", "genrm-grpo"]


def _bundle(answers, out: Path) -> Path:
    files = wizard.render(wizard.plan(answers, base_dir=str(out.parent)))
    return wizard.write_bundle(files, out)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_is_accepted_by_verl(profile, tmp_path, tiny_model):
    bundle = _bundle(wizard.load_profile(profile), tmp_path / profile)
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, report.summary()
    names = [c.name for c in report.checks]
    assert any(n.startswith("validate_config") for n in names)
    assert any(n.startswith("engine_workers.py:264") for n in names)


@pytest.mark.parametrize("seed", [s if s < QUICK_SAMPLES else pytest.param(s, marks=pytest.mark.slow)
                                  for s in range(N_SAMPLES)])
def test_sampled_answers_rejected_by_rules_or_accepted_by_verl(seed, tmp_path, tiny_model):
    from sampler import write_sample_files

    data = sample(seed)
    write_sample_files(tmp_path)  # ./data/*, ./reward.py: where verl-init looks for them (VI539, VI506)
    try:
        answers = wizard.make_answers(data)
        plan = wizard.plan(answers, base_dir=str(tmp_path))
    except WizardError:
        return
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "bundle")
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, f"verl-init accepted {data} but verl rejects it: {report.summary()}"


@pytest.mark.slow
def test_sampler_covers_both_outcomes(tmp_path):
    """The sample is not all one-sided: enough of the sampled answer sets plan (and so reach verl's own checks
    above) and enough are refused by the rules. Counted here by planning each sample (cheap, no verl), so the
    count holds whichever pytest-xdist worker ran the sampled tests."""
    from sampler import write_sample_files

    write_sample_files(tmp_path)
    outcomes = {"accepted": 0, "rejected": 0}
    for seed in range(N_SAMPLES):
        try:
            wizard.plan(wizard.make_answers(sample(seed)), base_dir=str(tmp_path))
        except WizardError:
            outcomes["rejected"] += 1
        else:
            outcomes["accepted"] += 1
    assert outcomes["accepted"] >= 50, outcomes
    assert outcomes["rejected"] >= 20, outcomes


# --- the harness can fail: configs our rules would refuse, written by hand, are rejected by verl ---

def _break(bundle: Path, edit) -> None:
    path = bundle / "verl_config.yaml"
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


BROKEN = {
    "micro does not divide": (dict(dynamic_batch=False),
                              lambda d: d["actor_rollout_ref"]["actor"].update(ppo_micro_batch_size_per_gpu=3),
                              "engine/utils.py:123"),
    "rollout TP 3 on 8 GPUs": ({}, lambda d: d["actor_rollout_ref"]["rollout"].update(tensor_model_parallel_size=3),
                               "rollout world size"),
    "gae without critic": (dict(algorithm="ppo", samples_per_prompt=1),
                           lambda d: d["critic"].update(enable=False), "GAE has a critic"),
    # a typo inside the YAML (not a command-line override) passes Hydra; verl's dataclass rejects it
    "typo key": ({}, lambda d: d["actor_rollout_ref"]["actor"].update(ppo_mini_batchsize=8), "validate_config"),
    "typo section": ({}, lambda d: d["trainer"].update(n_gpus=8), "every key exists"),
    # a dataclass field the YAML omits is accepted (critic.ppo_infer_max_token_len_per_gpu); a near miss of it is not
    "typo of a dataclass-only field": (dict(algorithm="ppo", samples_per_prompt=1),
                                       lambda d: d["critic"].update(ppo_infer_max_token_len_per_gpux=8192),
                                       "every key exists"),
    "bad loss aggregation": ({}, lambda d: d["actor_rollout_ref"]["actor"].update(loss_agg_mode="mean"),
                             "validate_config"),
    "token budget below one sequence": ({}, lambda d: d["actor_rollout_ref"]["actor"].update(ppo_max_token_len_per_gpu=100),
                                        "seqlen_balancing.py:384 actor"),
    "mini-batch does not split": ({}, lambda d: d["actor_rollout_ref"]["actor"].update(ppo_mini_batch_size=3),
                                  "engine_workers.py:264"),
    "unknown logger": ({}, lambda d: d["trainer"].update(logger=["console", "wandbb"]), "tracking backends"),
    # verl's DAPO reward manager, built with the config, asserts max_resp_len when the overlong buffer is on
    "DAPO buffer without max_resp_len": (dict(algorithm="dapo"),
                                         lambda d: d["reward"]["reward_kwargs"].pop("max_resp_len"),
                                         "reward manager registry"),
    "DAPO buffer longer than max_resp_len": (dict(algorithm="dapo"),
                                             lambda d: d["reward"]["reward_kwargs"].update(max_resp_len=64),
                                             "reward manager registry"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_harness_rejects_broken_configs(case, tmp_path, tiny_model):
    from helpers_answers import answers

    changes, edit, failing = BROKEN[case]
    bundle = _bundle(answers(**changes), tmp_path / "b")
    _break(bundle, edit)
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert not report.ok
    assert any(failing in c.name for c in report.failures), report.summary()


@pytest.mark.slow
def test_without_the_critics_model_and_no_hub_the_verdict_is_not_verified(tmp_path, cli_env):
    """verl's validate_config loads the critic's config: offline, with no --model-dir, verl-init says it could not
    verify (one line naming the fix), instead of retrying the hub for half a minute and calling it rejected."""
    import time

    from conftest import run_cli

    bundle = wizard.write_bundle(wizard.render(wizard.plan(wizard.load_profile("ppo-16gpu"), base_dir=str(tmp_path))),
                                 tmp_path / "b")
    start = time.monotonic()
    report = verify_with_verl(bundle)
    assert time.monotonic() - start < 20
    assert not report.ok and "pass --model-dir" in report.blocked and report.summary().startswith("not verified")
    r = run_cli(["verify", str(bundle)], env={**cli_env, "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 1 and "NOT VERIFIED" in r.stdout and "REJECTED" not in r.stdout


@pytest.mark.slow
def test_verify_separates_verls_code_from_replicas(tmp_path, tiny_model, cli_env):
    """verl's own functions (composition, validate_config, dataclasses, registries, the micro-batch splitter and
    token-budget packing) and verl-init's replicas of worker-time asserts are reported apart."""
    from conftest import run_cli
    from helpers_answers import answers

    from wizard.verify.harness import REPLICA, VERL

    bundle = _bundle(answers(dynamic_batch=False), tmp_path / "b")
    _break(bundle, lambda d: d["actor_rollout_ref"]["actor"].update(ppo_micro_batch_size_per_gpu=3))
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    by_name = {c.name: c for c in report.checks}
    split = by_name["engine/utils.py:123 update micro-batches divide the per-rank mini-batch"]
    # verl's prepare_micro_batches raised its own assert (its words, not a copy's)
    assert split.source == VERL and not split.ok
    assert "data size must be divisible by force_group_size * micro_batch_size_per_gpu" in split.detail
    assert by_name["engine/utils.py:123 log-prob micro-batches divide the per-rank batch"].source == VERL
    assert by_name["engine_workers.py:264 mini-batch splits over data-parallel ranks"].source == REPLICA
    assert by_name["validate_config (main_ppo, before Ray)"].source == VERL
    doc = report.as_dict()
    assert set(doc["sections"]) == {VERL, REPLICA}
    assert split.name in doc["sections"][VERL] and split.name not in doc["sections"][REPLICA]
    r = run_cli(["verify", str(bundle), "--model-dir", str(tiny_model)], env=cli_env)
    assert r.returncode == 1
    verl_at, replica_at = r.stdout.index("verl's own code, run here:"), r.stdout.index("verl-init's replicas")
    assert verl_at < r.stdout.index("[FAIL] engine/utils.py:123 update") < replica_at
    assert r.stdout.index("engine_workers.py:264") > replica_at


def test_verify_runs_verls_token_budget_packing(tmp_path, tiny_model):
    from helpers_answers import answers

    from wizard.verify.harness import VERL

    bundle = _bundle(answers(), tmp_path / "b")
    _break(bundle, lambda d: d["actor_rollout_ref"]["actor"].update(ppo_max_token_len_per_gpu=100))
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    (fail,) = [c for c in report.failures if c.name.startswith("seqlen_balancing.py:384 actor")]
    assert fail.source == VERL and "max_token_len must be greater than the sequence length" in fail.detail
    assert "max_token_len=100" in fail.detail  # verl's own message, with verl's numbers


def test_verify_runs_verls_replica_constructor(tmp_path):
    """replica.py:113 is verl's RolloutReplica constructor: a replica of 12 GPUs on nodes of 8 fails in verl's words."""
    from omegaconf import open_dict

    from helpers_answers import answers
    from wizard.verify.harness import _verl_replica, compose_bundle

    cfg = compose_bundle(_bundle(answers(), tmp_path / "b"))
    r = cfg.actor_rollout_ref.rollout
    assert "on 1 node(s) of 8" in _verl_replica(r, 8)
    with open_dict(r):
        r.tensor_model_parallel_size = 12
    with pytest.raises(AssertionError, match="world_size 12 must be divisible by gpus_per_node 8"):
        _verl_replica(r, 8)
