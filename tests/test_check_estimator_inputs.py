"""VI623-VI625: what an advantage estimator needs beyond rewards, against what the trainer hands it
(wizard/check/rules/estimator_inputs.py).

The oracle is verl 0.9.1's own compute_advantage (trainer/ppo/ray_trainer.py, compiled from its source by
scripts/verl_estimators.py, as ray_trainer does not import on a CPU box) run on the CPU: on the fields V1's
_compute_advantage fetches (read from trainer/ppo/v1/trainer_base.py) the optimal-token-baseline estimators and GDPO
raise, GRPO/RLOO/GPG do not; on the legacy trainer's batch OTB raises only without sum_pi_squared and GDPO only
without algorithm.gdpo_reward_keys (AlgoConfig's default None).

VI955's oracle is verl's compute_gdpo_outcome_advantage itself, on a tiny CPU batch with two reward keys: one
weight raises IndexError, three weights run and give what the first two alone give (the third is dropped), two
weights run (verl PR#7965).

Real cases: verl PR#6153 (every OTB run crashed in compute_advantage; on 0.9.1's default V1 trainer it still does,
verl's own examples/otb_trainer script included), PR#4678 (OTB needs calculate_sum_pi_squared=True and
use_fused_kernels=False), PR#6159 (GDPO's reward components do not survive the TransferQueue trainer), verl#4862
(GDPO needs algorithm.gdpo_reward_keys). Controls: OTB on the legacy trainer with the flag, GDPO there with its keys,
GRPO on V1 (and verl's own gpg example in tests/test_check_examples.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers_verl import verl_root, verl_tree
from wizard.check.lint import check
from wizard.check.rules import estimator_inputs

ROOT = Path(__file__).resolve().parent.parent
A = "actor_rollout_ref.actor"
BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        f"{A}.use_dynamic_bsz=True", "trainer.logger=[console]", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
        "actor_rollout_ref.rollout.n=8"]
OTB = ["algorithm.adv_estimator=optimal_token_baseline"]
GDPO = ["algorithm.adv_estimator=gdpo", "reward.reward_manager.name=gdpo"]
KEYS = "+algorithm.gdpo_reward_keys=[accuracy_reward,format_reward]"
LEGACY = ["trainer.use_v1=False"]
RULES = ("VI623", "VI624", "VI625", "VI955")


def _hits(overrides: list[str]) -> dict[str, list]:
    found = check(None, [*BASE, *overrides], defaults="snapshot").findings
    return {r: [f for f in found if f.problem.rule == r] for r in (*RULES, "VI802")}


def _scripts():
    from helpers_scripts import load_script

    return load_script("verl_estimator_inputs")


@pytest.mark.verl
def test_regenerating_gives_the_committed_table():
    from helpers_scripts import regenerated

    assert regenerated("verl_estimator_inputs") == \
        (ROOT / "wizard" / "check" / "data" / "verl_estimator_inputs.json").read_text(encoding="utf-8")


@pytest.mark.verl
def test_verls_compute_advantage_on_v1s_fields_and_on_the_legacy_batch():
    """The oracle: verl's own dispatcher and estimators, on the batch each trainer builds."""
    import warnings

    warnings.simplefilter("ignore")
    gen = _scripts()
    compute, _ = gen.verls_compute_advantage()
    fields, at = gen.v1_fields()
    assert "sum_pi_squared" not in fields and "prompts" not in fields and at.startswith("verl/trainer/ppo/v1/")
    v1 = {f for f in fields if f in gen.OPTIONAL}
    full = set(gen.OPTIONAL) - {"reward_baselines"}
    otb = gen._run(compute, "optimal_token_baseline", v1, False, True)
    assert otb.startswith("raises: AssertionError") and "sum_pi_squared" in otb
    assert gen._run(compute, "gdpo", v1, False, True).startswith("raises: KeyError")
    for fine in ("grpo", "rloo", "gpg", "reinforce_plus_plus_baseline"):  # the control: V1 runs them
        assert gen._run(compute, fine, v1, False, True) == "ok"
    # the legacy trainer: OTB runs with sum_pi_squared, stops without it; GDPO runs with its keys, stops without
    assert gen._run(compute, "optimal_token_baseline", full, False, True) == "ok"
    assert gen._run(compute, "optimal_token_baseline", full - {"sum_pi_squared"}, False, True).startswith("raises")
    assert gen._run(compute, "gdpo", full, True, True) == "ok"
    assert gen._run(compute, "gdpo", full, True, False).startswith("raises: AssertionError: GDPO requires")
    from verl.trainer.config.algorithm import AlgoConfig

    assert AlgoConfig().gdpo_reward_keys is None  # the default VI625 stands on


@pytest.mark.verl
def test_no_v1_module_asks_for_sum_pi_squared_and_fused_kernels_refuse_it():
    v1 = verl_root() / "trainer" / "ppo" / "v1"
    assert not [p.name for p in v1.glob("*.py") if "sum_pi_squared" in p.read_text(encoding="utf-8")]
    for rel in ("workers/engine/fsdp/transformer_impl.py", "workers/engine/megatron/transformer_impl.py"):
        raises = [n for n in ast.walk(verl_tree(rel)) if isinstance(n, ast.If)
                  and {"calculate_sum_pi_squared", "use_fused_kernels"} <= {x.id for x in ast.walk(n.test)
                                                                            if isinstance(x, ast.Name)}
                  and any(isinstance(b, ast.Raise) for b in n.body)]
        assert raises, rel


@pytest.mark.slow
def test_planted_faults_and_controls():
    v1_otb = _hits([*OTB, f"{A}.calculate_sum_pi_squared=True"])
    [e] = v1_otb["VI623"]
    assert e.problem.severity == "error" and "sum_pi_squared" in e.problem.message and "use_v1=False" in e.problem.hint
    [e] = _hits([*GDPO, KEYS])["VI623"]
    assert "prompts" in e.problem.message
    [e] = _hits([*OTB, *LEGACY])["VI624"]
    assert "calculate_sum_pi_squared=False" in e.problem.message
    [e] = _hits([*OTB, *LEGACY, f"{A}.calculate_sum_pi_squared=True",
                 "actor_rollout_ref.model.use_fused_kernels=True"])["VI624"]
    assert "NotImplementedError" in e.problem.message
    [e] = _hits([*GDPO, *LEGACY])["VI625"]
    assert "gdpo_reward_keys" in e.problem.message
    # controls: nothing from VI623-VI625, and GDPO's key is not called unread (VI802)
    for clean in ([*OTB, *LEGACY, f"{A}.calculate_sum_pi_squared=True"], [*GDPO, *LEGACY, KEYS],
                  ["algorithm.adv_estimator=grpo"], ["algorithm.adv_estimator=rloo", *LEGACY]):
        got = _hits(clean)
        assert not any(got[r] for r in (*RULES, "VI802")), (clean, got)


def test_the_rule_reads_the_table(monkeypatch):
    """A planted verdict is what check reports: rloo said to raise on V1's batch becomes VI623."""
    table = estimator_inputs.estimator_inputs()
    planted = {**table, "estimators": {**table["estimators"],
                                       "rloo": {"v1": "raises: KeyError: 'x'", "needs": ["reward_baselines"]}}}
    monkeypatch.setattr(estimator_inputs, "estimator_inputs", lambda: planted)
    [e] = _hits(["algorithm.adv_estimator=rloo"])["VI623"]
    assert "reward_baselines" in e.problem.message


def _verls_gdpo(weights):
    """verl 0.9.1's compute_gdpo_outcome_advantage on 4 responses of 2 prompts with two reward components."""
    import numpy as np
    import torch

    from verl.trainer.config.algorithm import AlgoConfig
    from verl.trainer.ppo.core_algos import compute_gdpo_outcome_advantage

    cfg = AlgoConfig(adv_estimator="gdpo", gdpo_reward_keys=["acc", "fmt"], gdpo_reward_weights=weights)
    mask = torch.ones(4, 3)
    batch = {"prompts": torch.ones(4, 2), "attention_mask": torch.ones(4, 5, dtype=torch.long)}
    extra = {"acc": np.array([1.0, 0.0, 1.0, 1.0]), "fmt": np.array([0.0, 1.0, 1.0, 0.0])}
    return compute_gdpo_outcome_advantage(token_level_rewards=torch.zeros(4, 3), response_mask=mask,
                                          index=np.array(["a", "a", "b", "b"], dtype=object), config=cfg,
                                          non_tensor_batch=extra, batch=batch)[0]


@pytest.mark.verl
def test_verls_gdpo_pairs_weights_with_keys_by_position_unchecked():
    import torch

    with pytest.raises(IndexError, match="out of bounds"):
        _verls_gdpo([1.0])
    assert torch.allclose(_verls_gdpo([1.0, 0.5, 7.0]), _verls_gdpo([1.0, 0.5]))  # the third weight is dropped
    assert not torch.allclose(_verls_gdpo([1.0, 0.5]), _verls_gdpo([1.0, 1.0]))  # the weights matter


@pytest.mark.slow
def test_gdpo_weights_one_per_key():
    short = _hits([*GDPO, *LEGACY, KEYS, "+algorithm.gdpo_reward_weights=[1.0]"])["VI955"]
    [e] = short
    assert e.problem.severity == "error" and "IndexError" in e.problem.message
    [w] = _hits([*GDPO, *LEGACY, KEYS, "+algorithm.gdpo_reward_weights=[1.0,0.5,0.2]"])["VI955"]
    assert w.problem.severity == "warning" and "ignored" in w.problem.message
    # controls: one weight per key, or none at all
    assert not _hits([*GDPO, *LEGACY, KEYS, "+algorithm.gdpo_reward_weights=[1.0,0.5]"])["VI955"]
    assert not _hits([*GDPO, *LEGACY, KEYS])["VI955"]
