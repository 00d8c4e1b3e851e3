"""VI941 (bypass-mode settings the V1 trainer ignores, verl#4912), VI942 (a negative KL coefficient, rllm#111) and
VI943 (a rollout-correction value verl rejects only in the first training step, verl PR#3984).

The oracles are verl's own code, run on CPU: its registered policy losses (the bypass loss reads rollout_rs and
loss_type, the vanilla loss V1 keeps does not), the table of apply_bypass_mode's callers regenerated from verl's
source, its kl_penalty/agg_loss under autograd with the actor config verl builds from a negative coefficient, and its
rollout-correction parsers on the same values the rule judges.
"""

from __future__ import annotations

import inspect

import pytest
from conftest import ROOT
from helpers_scripts import regenerated

from wizard.check.lint import check
from wizard.check.rules import rollout_corr

DATA = ROOT / "wizard" / "check" / "data"
A = "actor_rollout_ref.actor"
RC = "algorithm.rollout_correction"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", "data.train_batch_size=64", "actor_rollout_ref.rollout.n=8",
        f"{A}.ppo_mini_batch_size=16", f"{A}.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
        "actor_rollout_ref.rollout.calculate_log_probs=True"]
BYPASS = [f"{RC}.bypass_mode=True", f"{RC}.rollout_is=token", f"{RC}.rollout_rs=seq_mean_k1",
          f"{RC}.rollout_rs_threshold=0.99_1.01"]


def _hits(rule: str, *extra: str):
    return [f.problem for f in check(None, [*BASE, *extra]).findings if f.problem.rule == rule]


# --- VI941 -------------------------------------------------------------------------------------------------------------

@pytest.mark.verl
def test_regenerating_the_rollout_corr_table_gives_the_committed_one():
    assert regenerated("verl_rollout_corr") == (DATA / "verl_rollout_corr.json").read_text(encoding="utf-8")


def test_the_table_says_only_the_legacy_trainers_run_the_bypass_loss():
    table = rollout_corr.rollout_corr_table()
    assert table["v1_runs_bypass_loss"] is False
    assert any(c.startswith("verl/trainer/ppo/ray_trainer.py:") for c in table["bypass_loss_callers"])
    assert any("trainer_base.py" in b and "_compute_old_log_prob" in b for b in table["v1_bypass_branches"])


@pytest.mark.verl
def test_verls_bypass_loss_reads_what_the_vanilla_loss_v1_keeps_ignores():
    """verl's own losses on a CPU batch: the bypass loss changes with rollout_rs / loss_type, vanilla (what V1 runs,
    workers/utils/losses.py reads loss_mode from actor.policy_loss) gives one loss whatever they are."""
    torch = pytest.importorskip("torch")
    from verl.trainer.config.algorithm import RolloutCorrectionConfig
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.workers.config.actor import ActorConfig, PolicyLossConfig
    from verl.workers.utils import losses

    assert 'config.policy_loss.get("loss_mode", "vanilla")' in inspect.getsource(losses.ppo_loss)
    gen = torch.Generator().manual_seed(0)
    old = torch.randn(4, 6, generator=gen) * 0.1 - 1
    batch = dict(old_log_prob=old, log_prob=old + torch.randn(4, 6, generator=gen) * 0.3,
                 advantages=torch.randn(4, 6, generator=gen), response_mask=torch.ones(4, 6), loss_agg_mode="token-mean")

    def loss(mode: str, **rc) -> float:
        corr = RolloutCorrectionConfig(bypass_mode=True, **rc)
        cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1,
                          policy_loss=PolicyLossConfig(loss_mode=mode, rollout_correction=corr))
        return float(get_policy_loss_fn(mode)(config=cfg, **batch)[0])

    plain = dict(rollout_is=None, rollout_rs=None, loss_type="ppo_clip")
    planted = dict(rollout_is="token", rollout_rs="token_k1", rollout_rs_threshold="0.9_1.1", loss_type="reinforce")
    assert loss("vanilla", **plain) == loss("vanilla", **planted)  # V1: the settings change nothing
    assert loss("bypass_mode", **plain) != loss("bypass_mode", **planted)  # the bypass loss reads them
    assert loss("bypass_mode", **plain) == pytest.approx(loss("vanilla", **plain))  # same loss without them


def test_vi941_bypass_with_rejection_on_v1():
    [p] = _hits("VI941", *BYPASS)
    assert p.severity == "warning" and f"{RC}.rollout_rs" in p.keys and f"{RC}.rollout_is" in p.keys
    assert "rollout_rs=seq_mean_k1" in p.message and "verl#4912" in p.message
    [p] = _hits("VI941", f"{RC}.bypass_mode=True", f"{RC}.loss_type=reinforce")
    assert "loss_type=reinforce" in p.message


def test_vi941_controls_stay_clean():
    assert not _hits("VI941", *BYPASS, "trainer.use_v1=False")  # the legacy trainer runs apply_bypass_mode
    assert not _hits("VI941", *BYPASS[1:])  # decoupled mode: V1 applies the correction
    assert not _hits("VI941", f"{RC}.bypass_mode=True")  # plain bypass PPO-clip: what V1 runs is what was asked
    assert not _hits("VI941", f"{RC}.bypass_mode=True", f"{RC}.loss_type=ppo_clip")


# --- VI942 -------------------------------------------------------------------------------------------------------------

@pytest.mark.verl
def test_verl_applies_a_negative_kl_loss_coefficient_and_the_step_moves_away_from_the_reference():
    """verl builds the actor config with a negative coefficient, and one gradient step on verl's KL loss term with it
    (kl_penalty + agg_loss, as workers/utils/losses.py:132-140 adds it) raises the KL; the positive one lowers it."""
    torch = pytest.importorskip("torch")
    from verl.trainer.ppo.core_algos import agg_loss, kl_penalty
    from verl.workers.config.actor import ActorConfig
    from verl.workers.utils import losses

    assert "policy_loss += kl_loss * config.kl_loss_coef" in inspect.getsource(losses.ppo_loss)
    assert ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, use_kl_loss=True,
                       kl_loss_coef=-0.001).kl_loss_coef == -0.001
    gen = torch.Generator().manual_seed(0)
    ref = torch.log_softmax(torch.randn(8, 16, generator=gen), -1)
    tokens = torch.randint(0, 16, (8, 1), generator=gen)
    mask = torch.ones(8, 1)

    def kl_after_step(coef: float) -> float:
        logits = (ref + 0.3 * torch.randn(8, 16, generator=torch.Generator().manual_seed(1))).requires_grad_()
        def kl(lg):
            logp = torch.log_softmax(lg, -1).gather(-1, tokens)
            return agg_loss(loss_mat=kl_penalty(logp, ref.gather(-1, tokens), "low_var_kl"), loss_mask=mask,
                            loss_agg_mode="token-mean", dp_size=1, batch_num_tokens=8, global_batch_size=8)
        (kl(logits) * coef).backward()
        with torch.no_grad():
            return float(kl(logits - 1.0 * logits.grad)), float(kl(logits))

    after, before = kl_after_step(-1.0)
    assert after > before
    after, before = kl_after_step(1.0)
    assert after < before


def test_vi942_negative_kl_coefficients():
    [p] = _hits("VI942", f"{A}.use_kl_loss=True", f"{A}.kl_loss_coef=-0.001")
    assert p.severity == "warning" and p.keys[0] == f"{A}.kl_loss_coef" and "rllm#111" in p.message
    [p] = _hits("VI942", "algorithm.use_kl_in_reward=True", "algorithm.kl_ctrl.kl_coef=-0.01")
    assert p.keys[0] == "algorithm.kl_ctrl.kl_coef"


def test_vi942_controls_stay_clean():
    assert not _hits("VI942", f"{A}.use_kl_loss=True", f"{A}.kl_loss_coef=0.001")
    assert not _hits("VI942", f"{A}.use_kl_loss=False", f"{A}.kl_loss_coef=-0.001")  # term off: VI843's
    assert not _hits("VI942", "algorithm.use_kl_in_reward=False", "algorithm.kl_ctrl.kl_coef=-0.01")


# --- VI943 -------------------------------------------------------------------------------------------------------------

RS_CASES = [
    ("geometric", 1.001), ("token", 2.0), ("seq_mean_k1", None), ("seq_mean_k1", "0.99_1.01"), ("seq_mean_k1", 1.01),
    ("seq_mean_k1", "1.2_0.8"), ("seq_max_k2", "0.1_2"), ("seq_max_k2", 2.5), ("token_k1,seq_max_k2", "0.6_1.6,2.5"),
    ("token_k1,seq_max_k2", "0.6_1.6,2.5,3"), ("token_k3", -1.0), ("seq_sum_k1", "a_b"), ("token_k1, token_k1", 2.0),
]
IS_CASES = [2.0, "2.0", "0.5_5.0", "5_0.5", 0, -1.0, "x", True, "0.5_x"]


@pytest.mark.verl
@pytest.mark.parametrize("options,spec", RS_CASES)
def test_rs_errors_agree_with_verls_rejection_mask(options, spec):
    torch = pytest.importorskip("torch")
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_rejection_mask

    gen = torch.Generator().manual_seed(0)
    old = torch.randn(3, 5, generator=gen) * 0.1 - 1
    try:
        compute_rollout_correction_and_rejection_mask(old_log_prob=old, rollout_log_prob=old + 0.01,
                                                      response_mask=torch.ones(3, 5), rollout_is=None,
                                                      rollout_rs=options, rollout_rs_threshold=spec)
        verl_rejects = False
    except (ValueError, TypeError, ZeroDivisionError):
        verl_rejects = True
    assert bool(rollout_corr.rs_errors(options, spec)) == verl_rejects, (options, spec)


@pytest.mark.verl
@pytest.mark.parametrize("spec", IS_CASES)
def test_is_threshold_errors_agree_with_verls_parser(spec):
    from verl.trainer.ppo.rollout_corr_helper import _parse_rollout_is_threshold

    try:
        _parse_rollout_is_threshold(spec)
        verl_rejects = False
    except (ValueError, TypeError):
        verl_rejects = True
    assert (rollout_corr.is_threshold_error(spec) is not None) == verl_rejects, spec


def test_vi943_pre_09_option_name_and_missing_threshold():
    [p] = _hits("VI943", f"{RC}.rollout_rs=geometric", f"{RC}.rollout_rs_threshold=1.001")
    assert p.severity == "error" and "geometric" in p.message and "seq_mean_k1" in p.hint
    [p] = _hits("VI943", f"{RC}.rollout_rs=seq_mean_k3")
    assert "rollout_rs_threshold is not set" in p.message
    [p] = _hits("VI943", f"{RC}.rollout_is=token", f"{RC}.rollout_is_threshold='5.0_0.5'")
    assert p.keys == (f"{RC}.rollout_is_threshold",)


def test_vi943_controls_stay_clean():
    assert not _hits("VI943", f"{RC}.rollout_rs=seq_mean_k1", f"{RC}.rollout_rs_threshold='0.99_1.01'")
    assert not _hits("VI943", f"{RC}.rollout_rs=token_k1,seq_max_k2", f"{RC}.rollout_rs_threshold='0.6_1.6,2.5'")
    assert not _hits("VI943", f"{RC}.rollout_is=token", f"{RC}.rollout_is_threshold=2.0")
    # where verl never parses them, VI941 / VI979 speak instead
    assert not _hits("VI943", f"{RC}.rollout_rs=geometric", f"{RC}.rollout_rs_threshold=1.001", f"{RC}.bypass_mode=True")
    assert not _hits("VI943", f"{RC}.rollout_rs=geometric", "actor_rollout_ref.rollout.calculate_log_probs=False")


def test_the_table_ships_as_package_data():
    assert "seq_mean_k1" in rollout_corr.rollout_corr_table()["rs_options"]
