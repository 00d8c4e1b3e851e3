"""VI978-VI980: what the adaptive KL controller, the rollout correction and ReMax need (wizard/check/rules/algorithm.py).

The oracles are verl 0.9.1's own code on the CPU. verl.trainer.ppo.ray_trainer and the V1 trainer do not import on
a CPU box without their optional dependencies (cachetools, transfer_queue), so the functions of theirs that decide
are taken from their source with `ast` and run unchanged (`_verl_function`: the `def` as verl wrote it, compiled
under verl's file name and line numbers) against verl's importable core (core_algos, DataProto, rollout_corr_helper,
the config dataclasses). Where the evidence is which trainer writes a batch field, the trainers' sources are read
with `ast` (the V1 trainer never names reward_baselines; the legacy fit does).

Real cases: verl#1984 (horizon read as training steps: 256 prompts × 8, horizon 200, the coefficient turns
negative), PR#3984 (token-level TIS with calculate_log_probs=False: silently no correction; control: verl's own
RolloutCorrectionConfig.decoupled_token_is() with log-probs on), verl#3089 (ReMax without reward_baselines, now on
V1, the default trainer).
"""

from __future__ import annotations

import ast
from typing import Any

import pytest

from helpers_verl import verl_root, verl_tree
from wizard.check.lint import check
from wizard.check.rules.algorithm import kl_update_swing

A, R = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        f"{A}.use_dynamic_bsz=True", "trainer.logger=[console]", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
KL_REWARD = ["algorithm.adv_estimator=reinforce_plus_plus", "algorithm.use_kl_in_reward=True", f"{A}.use_kl_loss=False",
             "algorithm.kl_ctrl.type=adaptive", "algorithm.kl_ctrl.kl_coef=0.01", "algorithm.kl_ctrl.target_kl=0.05"]
TIS = ["algorithm.adv_estimator=grpo", f"{A}.ppo_mini_batch_size=64", "data.train_batch_size=256", f"{R}.n=5"]


def _hits(rule: str, overrides: list[str], target: str | None = None) -> list[Any]:
    return [f for f in check(target, [*BASE, *overrides], defaults="snapshot").findings if f.problem.rule == rule]






def _find(tree: ast.AST, name: str, kind: type = ast.FunctionDef) -> Any:
    return next(n for n in ast.walk(tree) if isinstance(n, kind) and n.name == name)


def _verl_function(rel: str, name: str, namespace: dict[str, Any]) -> Any:
    """verl's own top-level function `name` from verl/<rel>, compiled from its source without its decorators."""
    node = _find(verl_tree(rel), name)
    node.decorator_list = []
    code = compile(ast.Module(body=[node], type_ignores=[]), str(verl_root() / rel), "exec")
    exec(code, namespace)
    return namespace[name]


def _names(node: ast.AST) -> set[str]:
    """Every string constant and subscript key a piece of source names."""
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


# -- VI978: the adaptive KL controller's horizon ---------------------------------------------------------------

def _kl_batch(rows: int, length: int = 4):
    import torch

    from verl import DataProto

    logp = torch.zeros(rows, length)  # the actor is still the reference: KL 0, the first step
    return DataProto.from_dict(tensors={"response_mask": torch.ones(rows, length), "old_log_probs": logp,
                                        "ref_log_prob": logp.clone(), "token_level_scores": torch.zeros(rows, length)})


def _apply_kl_penalty():
    import torch

    from verl import DataProto
    from verl.trainer.ppo import core_algos
    from verl.utils.torch_functional import masked_mean

    return _verl_function("trainer/ppo/ray_trainer.py", "apply_kl_penalty",
                          {"core_algos": core_algos, "DataProto": DataProto, "masked_mean": masked_mean, "torch": torch})


@pytest.mark.verl
@pytest.mark.parametrize("prompts, n, horizon", [(4, 4, 3), (4, 4, 3.2), (4, 4, 8), (4, 4, 16), (4, 4, 100)])
def test_verls_kl_penalty_updates_the_controller_by_the_batch_rows(prompts, n, horizon):
    """verl's apply_kl_penalty on a first-step batch (KL 0) with verl's AdaptiveKLController: the coefficient falls by
    exactly 0.2 × rows / horizon, so it reaches zero or below where that is ≥ 1 (error) and moves more than 20% where
    the horizon is below the batch's rows (warning); check() says the same for the same numbers."""
    from omegaconf import OmegaConf

    from verl.trainer.ppo import core_algos

    ctrl = core_algos.get_kl_controller(OmegaConf.create({"type": "adaptive", "kl_coef": 0.01, "target_kl": 0.05,
                                                          "horizon": horizon}))
    rows = prompts * n
    _apply_kl_penalty()(_kl_batch(rows), kl_ctrl=ctrl, kl_penalty="kl")
    swing = kl_update_swing(rows, horizon)
    assert ctrl.value == pytest.approx(0.01 * (1 - swing))  # n_steps = rows: ray_trainer.py:96,112
    hits = _hits("VI978", [*KL_REWARD, f"data.train_batch_size={prompts}", f"{A}.ppo_mini_batch_size={prompts}",
                           f"{R}.n={n}", f"algorithm.kl_ctrl.horizon={horizon}"])
    if ctrl.value <= 0:
        assert [h.problem.severity for h in hits] == ["error"]
        assert f"{ctrl.value:.3g}" in hits[0].problem.message
    elif abs(ctrl.value / 0.01 - 1) > 0.2:  # more than the controller's own clip of the KL error a step
        assert [h.problem.severity for h in hits] == ["warning"]
    else:
        assert not hits


@pytest.mark.verl
def test_the_case_of_verl_1984_flips_the_coefficients_sign():
    """256 prompts × 8 with horizon 200: verl's controller goes negative on the first step and flips again."""
    from omegaconf import OmegaConf

    from verl.trainer.ppo import core_algos

    ctrl = core_algos.get_kl_controller(OmegaConf.create({"type": "adaptive", "kl_coef": 0.01, "target_kl": 0.05,
                                                          "horizon": 200}))
    ctrl.update(current_kl=0.0, n_steps=256 * 8)
    assert ctrl.value < 0
    [hit] = _hits("VI978", [*KL_REWARD, "data.train_batch_size=256", f"{A}.ppo_mini_batch_size=64", f"{R}.n=8",
                            "algorithm.kl_ctrl.horizon=200"])
    assert hit.problem.severity == "error" and "2048 samples" in hit.problem.message and hit.fix is None


def test_v1_updates_once_per_parameter_sync_step():
    """V1's separate_async mode runs parameter_sync_step updates of train_batch_size / parameter_sync_step prompts
    (trainer_base.py:533-552): 256 × 8 / 4 = 512 rows an update; horizon 400 is a warning there, an error in sync."""
    common = [*KL_REWARD, "data.train_batch_size=256", f"{A}.ppo_mini_batch_size=64", f"{R}.n=8",
              "algorithm.kl_ctrl.horizon=400"]
    assert [h.problem.severity for h in _hits("VI978", common)] == ["error"]
    split = _hits("VI978", [*common, "trainer.v1.trainer_mode=separate_async"])
    assert [h.problem.severity for h in split] == ["warning"] and "512 samples" in split[0].problem.message


@pytest.mark.parametrize("extra", [
    ("algorithm.kl_ctrl.horizon=10000",),  # verl's default: 2048 rows move it ≤ 4% a step
    ("algorithm.kl_ctrl.horizon=200", "algorithm.kl_ctrl.type=fixed"),  # no controller updates
    ("algorithm.kl_ctrl.horizon=200", "algorithm.use_kl_in_reward=False", f"{A}.use_kl_loss=True"),  # none built
])
def test_kl_horizon_is_silent_where_the_controller_does_not_swing(extra):
    assert not _hits("VI978", [*KL_REWARD, "data.train_batch_size=256", f"{A}.ppo_mini_batch_size=64", f"{R}.n=8",
                               *extra])


# -- VI979: the rollout correction without rollout log-probs ---------------------------------------------------

def _corr_batch(with_rollout_logprobs: bool):
    import torch

    from verl import DataProto

    tensors = {"old_log_probs": torch.zeros(4, 3), "response_mask": torch.ones(4, 3)}
    if with_rollout_logprobs:
        tensors["rollout_log_probs"] = torch.full((4, 3), -0.5)
    return DataProto.from_dict(tensors=tensors)


def _v1_gate():
    """The V1 trainer's own decision whether the decoupled correction runs (trainer_base.py:1765-1770)."""
    fn = _find(verl_tree("trainer/ppo/v1/trainer_base.py"), "_compute_advantage")
    [gate] = [n for n in ast.walk(fn) if isinstance(n, ast.Assign)
              and any(isinstance(t, ast.Name) and t.id == "rollout_correction" for t in n.targets)]
    return compile(ast.Expression(gate.value), "trainer_base.py", "eval")


def _v1_fields(calculate_log_probs: bool) -> list[str]:
    """The fields V1's _compute_old_log_prob fetches from the rollout (trainer_base.py:1660-1663), run as verl wrote them."""
    from types import SimpleNamespace

    fn = _find(verl_tree("trainer/ppo/v1/trainer_base.py"), "_compute_old_log_prob")
    start = next(i for i, n in enumerate(fn.body) if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "fields" for t in n.targets))
    code = compile(ast.Module(body=fn.body[start:start + 2], type_ignores=[]), "trainer_base.py", "exec")
    ns: dict[str, Any] = {"self": SimpleNamespace(config=SimpleNamespace(actor_rollout_ref=SimpleNamespace(
        rollout=SimpleNamespace(calculate_log_probs=calculate_log_probs))))}
    exec(code, ns)
    return ns["fields"]


@pytest.mark.verl
def test_verl_skips_the_correction_without_rollout_log_probs():
    from verl.trainer.config.algorithm import RolloutCorrectionConfig
    from verl.trainer.ppo.rollout_corr_helper import apply_bypass_mode, compute_rollout_correction_and_add_to_batch

    cfg = RolloutCorrectionConfig.decoupled_token_is(threshold=2.0)
    assert "rollout_log_probs" in _v1_fields(True) and "rollout_log_probs" not in _v1_fields(False)
    gate = _v1_gate()
    for have in (True, False):
        data = _corr_batch(have)
        applies = eval(gate, {"rollout_corr_config": cfg, "data": data, "bypass_recomputing_logprobs": False})
        assert applies is have
        if applies:  # the control: verl's correction adds the IS weights
            out, metrics = compute_rollout_correction_and_add_to_batch(data, cfg)
            assert "rollout_is_weights" in out.batch.keys() and any(k.startswith("rollout_corr/") for k in metrics)
    # the legacy and separation trainers gate on the same condition: their own `if` test, evaluated
    for rel in ("trainer/ppo/ray_trainer.py", "experimental/separation/ray_trainer.py"):
        [test] = [n.test for n in ast.walk(verl_tree(rel)) if isinstance(n, ast.If)
                  and {"rollout_log_probs"} <= _names(n.test) and "rollout_corr_config" in ast.unparse(n.test)]
        legacy_gate = compile(ast.Expression(test), rel, "eval")
        for have in (True, False):
            ns = {"rollout_corr_config": cfg, "batch": _corr_batch(have), "bypass_recomputing_logprobs": False}
            assert bool(eval(legacy_gate, ns)) is have
    # bypass mode: verl's own helper refuses the batch
    with pytest.raises(ValueError, match="calculate_log_probs"):
        apply_bypass_mode(_corr_batch(False), RolloutCorrectionConfig(bypass_mode=True), {})


def test_check_errors_on_tis_without_rollout_log_probs():
    [hit] = _hits("VI979", [*TIS, f"{R}.calculate_log_probs=False", "algorithm.rollout_correction.rollout_is=token",
                            "algorithm.rollout_correction.rollout_is_threshold=2.0"])
    assert hit.problem.severity == "error" and hit.fix.set == {f"{R}.calculate_log_probs": True}
    assert "without a message" in hit.problem.message
    [rs] = _hits("VI979", [*TIS, f"{R}.calculate_log_probs=False", "algorithm.rollout_correction.rollout_rs=seq_mean_k1"])
    assert "algorithm.rollout_correction.rollout_rs" in rs.problem.keys
    [bypass] = _hits("VI979", [*TIS, f"{R}.calculate_log_probs=False", "algorithm.rollout_correction.bypass_mode=True"])
    assert "raises" in bypass.problem.message


@pytest.mark.verl
def test_verls_decoupled_token_is_preset_with_log_probs_is_silent():
    """Control (R16-07): the preset verl documents, rollout log-probs on (verl's default)."""
    from verl.trainer.config.algorithm import RolloutCorrectionConfig

    cfg = RolloutCorrectionConfig.decoupled_token_is(threshold=2.0)
    preset = [f"algorithm.rollout_correction.{k}={getattr(cfg, k)}" for k in ("rollout_is", "rollout_is_threshold")]
    assert not _hits("VI979", [*TIS, f"{R}.calculate_log_probs=True", *preset])
    assert not _hits("VI979", [*TIS, *preset])  # calculate_log_probs: True is verl's default (rollout.yaml:237)
    assert _hits("VI979", [*TIS, f"{R}.calculate_log_probs=False", *preset])  # the planted fault


def test_no_correction_asked_is_silent():
    assert not _hits("VI979", [*TIS, f"{R}.calculate_log_probs=False"])  # ascend ppo example: nothing to skip


# -- VI980: ReMax on a trainer that never generates the greedy baseline ----------------------------------------

def _compute_advantage():
    from typing import Optional

    import numpy as np
    import torch

    from verl import DataProto
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.core_algos import AdvantageEstimator

    return _verl_function("trainer/ppo/ray_trainer.py", "compute_advantage",
                          {"DataProto": DataProto, "AdvantageEstimator": AdvantageEstimator, "core_algos": core_algos,
                           "Optional": Optional, "AlgoConfig": AlgoConfig, "np": np, "torch": torch})


@pytest.mark.verl
def test_verls_compute_advantage_needs_the_greedy_baseline_for_remax():
    """verl's compute_advantage (which V1 delegates to for every estimator but GRPO, v1/utils.py:167-176) on the
    batch V1 builds (no reward_baselines) raises; with the legacy trainer's baseline it computes."""
    import numpy as np
    import torch
    from omegaconf import OmegaConf

    from verl import DataProto

    def batch(baseline: bool) -> DataProto:
        t = {"token_level_rewards": torch.ones(4, 3), "response_mask": torch.ones(4, 3)}
        if baseline:
            t["reward_baselines"] = torch.full((4,), 2.0)
        return DataProto.from_dict(tensors=t, non_tensors={"uid": np.array(["a", "a", "b", "b"], dtype=object)})

    cfg = OmegaConf.create({"gamma": 1.0, "lam": 1.0, "norm_adv_by_std_in_grpo": True})
    compute_advantage = _compute_advantage()
    with pytest.raises(TypeError, match="reward_baselines"):
        compute_advantage(batch(False), adv_estimator="remax", config=cfg)
    out = compute_advantage(batch(True), adv_estimator="remax", config=cfg)
    assert torch.allclose(out.batch["advantages"][:, 0], torch.tensor(1.0))  # return 3 - baseline 2


@pytest.mark.verl
def test_only_the_legacy_and_separation_trainers_write_reward_baselines():
    """Structural evidence from verl's source (the trainers do not import here): which code puts reward_baselines
    in the batch, and which trainer main_ppo runs by default."""
    root = verl_root()
    v1 = [p for p in (root / "trainer/ppo/v1").glob("*.py") if "reward_baselines" in p.read_text(encoding="utf-8")]
    assert not v1  # V1 never writes or fetches it
    fetched = _find(verl_tree("trainer/ppo/v1/trainer_base.py"), "_compute_advantage")
    assert "rm_scores" in _names(fetched) and "reward_baselines" not in _names(fetched)
    legacy = _find(_find(verl_tree("trainer/ppo/ray_trainer.py"), "RayPPOTrainer", ast.ClassDef), "fit")
    assert "reward_baselines" in _names(legacy)
    assert "reward_baselines" in _names(_find(verl_tree("experimental/separation/ray_trainer.py"), "_fit_generate"))
    for rel in ("experimental/one_step_off_policy/ray_trainer.py", "experimental/fully_async_policy/fully_async_trainer.py"):
        own = _find(verl_tree(rel), "_fit_generate", ast.AsyncFunctionDef)  # overrides the separation trainer's
        assert "reward_baselines" not in _names(own) and "__do_sample__" not in _names(own)
    main = verl_tree("trainer/main_ppo.py")
    assert any(ast.unparse(n.test) == "config.trainer.use_v1" for n in ast.walk(main) if isinstance(n, ast.If))
    import yaml

    assert yaml.safe_load((root / "trainer/config/ppo_trainer.yaml").read_text(encoding="utf-8"))["trainer"]["use_v1"] is True


REMAX = ["algorithm.adv_estimator=remax", "algorithm.use_kl_in_reward=True", "algorithm.kl_ctrl.kl_coef=0.001",
         f"{A}.use_kl_loss=False", "data.train_batch_size=256", f"{A}.ppo_mini_batch_size=64", f"{R}.n=4"]


def test_check_errors_on_remax_under_v1_and_names_the_legacy_trainer():
    [hit] = _hits("VI980", REMAX)
    assert hit.problem.severity == "error" and "trainer.use_v1=False" in hit.problem.hint and hit.fix is None
    assert [h.problem.severity for h in _hits("VI980", [*REMAX, "trainer.use_v1=True"])] == ["error"]


@pytest.mark.parametrize("extra", [("trainer.use_v1=False",), ("algorithm.adv_estimator=rloo",)])
def test_remax_rule_is_silent_where_a_baseline_is_made_or_not_needed(extra):
    assert not _hits("VI980", [*REMAX, *extra])


def test_remax_under_one_step_off_is_an_error(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\npython3 -m verl.experimental.one_step_off_policy.main_ppo "
                      + " ".join(f"'{o}'" for o in [*BASE, *REMAX]) + "\n", encoding="utf-8")
    hits = [f for f in check(str(script), workdir=str(tmp_path)).findings if f.problem.rule == "VI980"]
    assert [h.problem.severity for h in hits] == ["error"] and "one_step_off_policy" in hits[0].problem.message


def test_a_planned_remax_bundle_runs_the_legacy_trainer(tmp_path):
    """verl-init's own ReMax plan sets trainer.use_v1=False, so its bundle passes VI980."""
    import wizard
    from helpers_answers import answers
    from wizard.planner.pipeline import plan

    p = plan(answers(algorithm="remax", samples_per_prompt=4), base_dir=str(tmp_path))
    assert p.value("trainer.use_v1") is False
    bundle = wizard.write_bundle(wizard.render(p), tmp_path / "b")
    assert "VI980" not in check(str(bundle / "verl_config.yaml"), defaults="snapshot").ids()


@pytest.mark.verl
def test_verls_checkpoints_hold_no_kl_controller():
    """VI774 (verl#2653): the controller starts at kl_coef, and no trainer's save or load names it."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo import core_algos

    ctrl = core_algos.get_kl_controller(OmegaConf.create({"type": "adaptive", "kl_coef": 0.01, "target_kl": 0.1,
                                                         "horizon": 10000}))
    ctrl.update(current_kl=0.5, n_steps=1000)
    assert ctrl.value != 0.01  # it moves while the run lasts
    assert core_algos.get_kl_controller(OmegaConf.create({"type": "adaptive", "kl_coef": 0.01, "target_kl": 0.1,
                                                         "horizon": 10000})).value == 0.01  # and starts over
    for rel in ("trainer/ppo/v1/trainer_base.py", "trainer/ppo/ray_trainer.py"):
        for name in ("_save_checkpoint", "_load_checkpoint"):
            assert "kl_ctrl" not in ast.unparse(_find(verl_tree(rel), name)), (rel, name)


def test_adaptive_kl_on_a_resuming_run_is_an_info():
    saving = [*KL_REWARD, "algorithm.kl_ctrl.type=adaptive", "trainer.save_freq=10"]
    [hit] = _hits("VI774", [*BASE, *saving])
    assert hit.problem.severity == "info" and "kl_coef" in hit.problem.message
    assert not _hits("VI774", [*BASE, *saving, "trainer.resume_mode=disable"])
    assert not _hits("VI774", [*BASE, *KL_REWARD, "algorithm.kl_ctrl.type=fixed", "trainer.save_freq=10"])


@pytest.mark.verl
def test_verls_summed_losses_grow_with_the_response_length():
    """VI775 (verl#957): verl's agg_loss on the same per-token loss at two response lengths."""
    import torch
    from verl.trainer.ppo.core_algos import agg_loss

    def loss(mode: str, length: int) -> float:
        mat, mask = torch.ones(4, length), torch.ones(4, length)
        return float(agg_loss(mat, mask, loss_agg_mode=mode, loss_scale_factor=4096))

    for mode in ("token-sum", "seq-mean-token-sum"):  # summed, divided by no length: L× the per-token loss
        assert loss(mode, 4000) / loss(mode, 4) == pytest.approx(1000) and loss(mode, 4000) >= 4000
    for mode in ("token-mean", "seq-mean-token-mean"):  # a mean: the per-token loss at any length
        assert loss(mode, 4000) == pytest.approx(loss(mode, 4)) == pytest.approx(1.0)
    # Dr.GRPO's: summed too (every token weighs the same), but divided by a constant: never above token-mean's
    assert loss("seq-mean-token-sum-norm", 4000) == pytest.approx(4000 / 4096)


def test_a_summed_loss_is_an_info_and_dr_grpos_is_not():
    [hit] = _hits("VI775", [*TIS, f"{A}.loss_agg_mode=seq-mean-token-sum"])
    assert hit.problem.severity == "info" and "seq-mean-token-sum-norm" in hit.problem.hint
    assert not _hits("VI775", [*TIS, f"{A}.loss_agg_mode=seq-mean-token-sum-norm"])
    assert not _hits("VI775", TIS)
