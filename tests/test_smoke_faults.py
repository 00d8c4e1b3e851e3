"""Planted faults that the cpu smoke must catch: every check the smoke report calls "measured" has a test here
(or, for the reward checks, in test_smoke_cpu.py) that plants a fault making it fail — FAULTS lists them, and
test_every_measured_check_has_a_fault_test holds the list against what an unplanted run reports. Checks the
report calls "static" are read from the config or the environment and need no run.

Faults: only the first micro-batch back-propagated, gradients zeroed before the optimizer step (weight decay
alone still moves the weights), a sample that never reaches the update, micro-batches merged, a NaN loss,
a reference sharing the actor's weights, the reward manager on the GPU pool, a data row dropped (in the loader,
and between the loader and the rollout), and for LoRA: base weights left trainable, the reference computed with
the adapters on, a separate reference process; for a critic: skipped micro-batches and zeroed gradients.

The expected numbers are written out from the bundle's batch arithmetic, not taken from earlier output.
The faults are planted in the role or driver class the smoke hands to Ray: a subclass defined inside the test
is pickled by value, so the Ray worker process runs the faulty code.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import wizard
from conftest import ROOT
from wizard.intent.answers import make_answers
from wizard.smoketest.report import SmokeReport, format_report
from wizard.smoketest.run import SmokeOptions

GSM8K = str(ROOT / "tests" / "data" / "gsm8k")

# The bundle: 2 GPUs (2 data-parallel ranks), fixed micro-batches of 2 samples.
PROMPTS, N, UPDATES, GPUS, MICRO = 8, 4, 2, 2, 2
BASE = dict(nnodes=1, gpus_per_node=GPUS, gpu_memory_gb=16, gpu_type="cpu", model="./tiny-model", model_params_b=0.001,
            dataset="gsm8k", max_prompt_length=128, max_response_length=64, prompts_per_step=PROMPTS,
            samples_per_prompt=N, updates_per_step=UPDATES, total_steps=1, save_freq=-1, test_freq=-1,
            dynamic_batch=False, micro_batch_per_gpu=MICRO)
# Its arithmetic (the smoke keeps the bundle's 8 prompts: already the default smoke size):
SAMPLES = PROMPTS * N  # 8 prompts × 4 = 32 samples per step
MINI_SAMPLES = SAMPLES // UPDATES  # 2 mini-batches (optimizer steps) of 16 samples
PER_RANK = MINI_SAMPLES // GPUS  # 8 samples per rank per mini-batch
MICRO_PER_RANK = PER_RANK // MICRO  # 4 micro-batches of 2 per rank per mini-batch
MICRO_BATCHES = UPDATES * GPUS * MICRO_PER_RANK  # 16 backward passes per epoch


def run_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: type | None = None, *, driver: type | None = None,
             critic: type | None = None, **changes) -> SmokeReport:
    from wizard.smoketest import cpu

    if role is not None:
        monkeypatch.setattr(cpu, "ActorRolloutRole", role)
    if driver is not None:
        monkeypatch.setattr(cpu, "CpuRun", driver)
    if critic is not None:
        monkeypatch.setattr(cpu, "CriticRole", critic)
    answers = {k: v for k, v in {**BASE, **changes}.items() if v is not None}  # None: the key left out
    plan = wizard.plan(make_answers(answers), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "bundle")
    report = wizard.smoke(bundle, options=SmokeOptions(engine="cpu", data_dir=GSM8K))
    sg = report.geometry["smoke"]
    if not {"samples_per_prompt", "dynamic_batch"} & set(changes):
        assert (sg["samples"], sg["updates"], sg["dp"], sg["per_rank"], sg["micro"], sg["micro_batches"],
                sg["epochs"]) == (SAMPLES, UPDATES, GPUS, PER_RANK, MICRO, MICRO_PER_RANK, 1), sg
    return report


def failed(r: SmokeReport) -> set[str]:
    return {c.name for c in r.checks if c.ok is False}


# Each measured check → the test(s) whose planted fault makes it fail.
FAULTS = {
    "every_sample_used_once": ["test_only_the_first_micro_batch_back_propagated_fails", "test_an_unused_sample_fails"],
    "actor_updated": ["test_zeroed_gradients_fail_although_weight_decay_moves_the_weights",
                      "test_only_the_first_micro_batch_back_propagated_fails"],
    "mini_and_micro_batches": ["test_merged_micro_batches_fail", "test_a_micro_batch_over_the_token_budget_fails"],
    "finite_losses": ["test_a_nan_loss_fails"],
    "reference_unchanged": ["test_a_reference_sharing_the_actors_weights_fails",
                            "test_lora_base_weights_left_trainable_fail"],
    "reference_is_own_instance": ["test_a_reference_sharing_the_actors_weights_fails"],
    "kl_moves": ["test_a_reference_sharing_the_actors_weights_fails", "test_lora_reference_with_adapters_on_fails"],
    "role_placement": ["test_the_reward_manager_on_the_gpu_pool_fails", "test_a_reference_sharing_the_actors_weights_fails"],
    "dataset_schema": ["test_a_row_dropped_in_the_loader_fails"],
    "rows_reach_batch": ["test_a_row_dropped_before_the_rollout_fails"],
    "rewards_vary": ["test_smoke_cpu.py::test_reward_function_that_always_returns_zero"],
    "scorer_discriminates": ["test_smoke_cpu.py::test_reward_function_that_always_returns_zero"],
    "lora_adapters_only": ["test_lora_base_weights_left_trainable_fail"],
    "reference_inside_actor": ["test_lora_with_a_separate_reference_process_fails"],
    "critic_updated": ["test_critic_faults_fail"],
    "critic_sample_use": ["test_critic_faults_fail"],
}


def test_the_fault_catalogue_names_real_tests():
    import test_smoke_cpu

    here = globals()
    for check, tests in FAULTS.items():
        for name in tests:
            module, _, func = name.rpartition("::")
            assert callable((vars(test_smoke_cpu) if module else here).get(func)), (check, name)


def checks_of(r: SmokeReport) -> dict:
    return {c.name: c for c in r.checks}


# ---------------------------------------------------------------------------------------------
# the measurement itself (no Ray): a tiny model, a micro-batch loop with and without faults


def ledger_run(fault: str = "") -> list[dict]:
    import torch

    from wizard.smoketest.cpu_roles import GradientLedger

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    params = list(model.parameters())
    ledger = GradientLedger(params)
    x = torch.randn(4, 3)
    for micro in range(2):  # two micro-batches of 2 samples
        out = model(x[2 * micro: 2 * micro + 2])
        loss = out.sum() * (0.0 if fault == "zero_loss" else 1.0)
        entry = ledger.watch(out, [2 * micro, 2 * micro + 1], step=0, rank=0, micro=micro)
        if fault == "skip_second" and micro == 1:
            pass  # the planted fault: this micro-batch is never back-propagated
        elif fault == "not_accumulated":
            torch.autograd.grad(loss, params)  # a backward pass whose gradient never lands in .grad
        else:
            loss.backward()
        ledger.settle(entry)
    return ledger.entries


def test_ledger_sees_every_backward_pass():
    entries = ledger_run()
    assert [e["reached"] for e in entries] == [True, True]
    assert all(e["backprop"] and e["carried"] > 0 and e["added"] > 0 for e in entries)


def test_ledger_catches_a_skipped_micro_batch():
    first, second = ledger_run("skip_second")
    assert first["reached"] and not second["reached"]
    assert second["backprop"] is False and second["added"] == 0.0


def test_ledger_catches_a_gradient_that_never_reaches_the_weights():
    entries = ledger_run("not_accumulated")
    assert all(e["backprop"] and e["carried"] > 0 and e["added"] == 0.0 and not e["reached"] for e in entries)


def test_ledger_counts_a_micro_batch_whose_loss_has_no_gradient():
    """A micro-batch whose samples all have advantage 0 legitimately adds nothing: its backward still ran."""
    entries = ledger_run("zero_loss")
    assert all(e["backprop"] and e["carried"] == 0.0 and e["reached"] for e in entries)


def test_steps_without_gradient():
    from wizard.smoketest.cpu_update import _steps_without_gradient

    assert _steps_without_gradient([{"step": 0, "grad_norm": 0.5, "loss_grad_norm": 1.0},
                                    {"step": 1, "grad_norm": 0.0, "loss_grad_norm": 0.0}]) == []  # nothing to carry
    assert _steps_without_gradient([{"step": 0, "grad_norm": 0.5, "loss_grad_norm": 1.0},
                                    {"step": 1, "grad_norm": 0.0, "loss_grad_norm": 1.0}]) == [1]
    assert _steps_without_gradient([{"step": 0, "grad_norm": 0.0, "loss_grad_norm": 0.0}]) == [0]
    assert _steps_without_gradient([{"step": 0, "grad_norm": math.nan, "loss_grad_norm": 1.0}]) == [0]


# ---------------------------------------------------------------------------------------------
# end to end on Ray: the unplanted run passes, each planted fault fails the update phase


@pytest.mark.verl
@pytest.mark.slow
def test_unplanted_run_measures_every_micro_batch(tmp_path, monkeypatch):
    r = run_with(tmp_path, monkeypatch)
    assert r.ok, format_report(r) + "\n" + r.log_tail[-3000:]
    assert r.samples_used == SAMPLES
    checks = checks_of(r)
    ev = checks["every_sample_used_once"].evidence
    assert ev["used"] == SAMPLES and ev["micro_batches_lost"] == [] and ev["uses_per_sample"] == {1: SAMPLES}
    steps = r.update["actor_steps"]
    assert len(steps) == UPDATES
    assert all(len(s["micro_grad_added"]) == GPUS * MICRO_PER_RANK for s in steps)
    assert all(s["grad_norm"] > 0 and s["loss_grad_norm"] > 0 for s in steps)
    assert checks["actor_updated"].ok and r.actor_updated is True
    measured = {c.name for c in r.checks if c.kind == "measured"}
    assert measured - set(FAULTS) == set(), "a measured check without a fault-planting test"
    assert {c.name for c in r.checks if c.kind == "static"} >= {"bundle_geometry", "device_layout", "launch_environment"}
    assert "ray_resources" not in checks  # Ray was started with the plan's GPUs: it could not fail
    # the log-prob passes use the bundle's log-prob micro-batch size (profile: 4 per GPU) on each of the 2 ranks
    assert r.geometry["smoke"]["logprob_micro"] == r.geometry["bundle"]["logprob_micro"]
    assert r.update["logprob_micro_batches_per_rank"] == [SAMPLES // GPUS // r.geometry["smoke"]["logprob_micro"]] * GPUS


@pytest.mark.verl
@pytest.mark.slow
def test_only_the_first_micro_batch_back_propagated_fails(tmp_path, monkeypatch):
    from wizard.smoketest.cpu import ActorRolloutRole

    class FirstMicroBatchOnly(ActorRolloutRole):
        def _backward(self, loss, micro):
            if micro == 0:  # the planted fault: later micro-batches of each mini-batch are never back-propagated
                loss.backward()

    r = run_with(tmp_path, monkeypatch, FirstMicroBatchOnly)
    # per optimizer step and rank only micro-batch 1 of 4 reaches the weights: 2 steps × 2 ranks × 2 samples
    reached = UPDATES * GPUS * MICRO
    lost = UPDATES * GPUS * (MICRO_PER_RANK - 1)
    assert (reached, lost) == (8, 12)
    assert not r.ok and r.failure is not None and r.failure.phase == "update", format_report(r)
    assert r.phase("update").status == "failed" and r.pitfalls()["2"] is False
    assert r.samples_used == reached
    check = checks_of(r)["every_sample_used_once"]
    assert check.ok is False
    assert f"only {reached} of {SAMPLES} samples back-propagated into the actor's gradients" in check.detail
    assert f"({SAMPLES - reached} never reached them)" in check.detail
    assert f"{lost} of {MICRO_BATCHES} micro-batch(es) lost" in check.detail
    assert "no backward pass reached them" in check.detail and "back-propagated before the optimizer step" in check.hint
    assert "every_sample_used_once" in r.failure.message and f"{reached} of {SAMPLES}" in r.failure.message
    assert check.evidence["in_micro_batches"] == SAMPLES  # the loop visited every sample: only the gradients tell
    assert "32 of 32 samples used" not in format_report(r)


@pytest.mark.verl
@pytest.mark.slow
def test_zeroed_gradients_fail_although_weight_decay_moves_the_weights(tmp_path, monkeypatch):
    from wizard.smoketest.cpu import ActorRolloutRole

    class ZeroGradients(ActorRolloutRole):
        def _all_reduce(self, params, dp):
            for p in params:  # the planted fault: the gradients are lost before the optimizer step
                if p.grad is not None:
                    p.grad.zero_()

    # at lr 1e-3 AdamW's decoupled weight decay (lr × weight_decay 0.01 = 1e-5 of each weight per step) shows in
    # float32 weights; at the bundle default 1e-6 it is below float32 resolution and the weights would not move
    r = run_with(tmp_path, monkeypatch, ZeroGradients, learning_rate=1e-3)
    assert not r.ok and r.failure is not None and r.failure.phase == "update", format_report(r)
    before, after = r.update["digests"]["before"], r.update["digests"]["after"]
    assert before["actor"] != after["actor"], "AdamW's weight decay moves the weights even on a zero gradient"
    check = checks_of(r)["actor_updated"]
    assert check.ok is False and r.actor_updated is False and r.pitfalls()["1"] is False
    assert check.evidence["grad_norms"] == [0.0] * UPDATES
    assert all(g > 0 for g in check.evidence["loss_grad_norms"])
    assert "no gradient reached the optimizer at step(s) 1, 2" in check.detail
    assert "actor_updated" in r.failure.message and "lost between the backward passes" in r.failure.hint
    # every backward pass itself reached the weights' .grad (the zeroing came after): sample use still holds
    assert checks_of(r)["every_sample_used_once"].ok and r.samples_used == SAMPLES


@pytest.mark.verl
@pytest.mark.slow
def test_an_unused_sample_fails(tmp_path, monkeypatch):
    from wizard.smoketest.cpu import ActorRolloutRole

    class LosesASample(ActorRolloutRole):
        def _dispatch(self, td, dp):
            shards = list(td.chunk(dp))
            first = shards[0].clone()
            first[1] = first[0]  # the planted fault: rank 0 trains sample 0 twice and never sees sample 1
            return [first] + shards[1:]

    r = run_with(tmp_path, monkeypatch, LosesASample)
    assert not r.ok and r.failure.phase == "update", format_report(r)
    check = checks_of(r)["every_sample_used_once"]
    assert check.ok is False and r.samples_used == SAMPLES - 1
    assert f"only {SAMPLES - 1} of {SAMPLES} samples" in check.detail and "1 a wrong number of times" in check.detail


@pytest.mark.verl
@pytest.mark.slow
def test_merged_micro_batches_fail(tmp_path, monkeypatch):
    from wizard.smoketest.cpu import ActorRolloutRole

    class OneMicroBatch(ActorRolloutRole):
        def _split(self, mb, spec):
            return [mb]  # the planted fault: the rank's whole mini-batch in one micro-batch (the bundle says 4 of 2)

    r = run_with(tmp_path, monkeypatch, OneMicroBatch)
    assert failed(r) == {"mini_and_micro_batches"}, format_report(r)
    steps = r.update["actor_steps"]
    assert all(s["micro_batches_per_rank"] == [1] * GPUS for s in steps)


@pytest.mark.verl
@pytest.mark.slow
def test_a_micro_batch_over_the_token_budget_fails(tmp_path, monkeypatch):
    """Dynamic batching: the miniature packs each rank's mini-batch into the bundle's token budget (in full-length
    sequences) with verl's splitter; a split that ignores the budget is caught on the micro-batches' token counts."""
    from wizard.smoketest.cpu import ActorRolloutRole

    class IgnoresTheBudget(ActorRolloutRole):
        def _split(self, mb, spec):
            return [mb]  # the planted fault: the whole mini-batch in one micro-batch, whatever its tokens

    # a budget of one full-length sequence (prompt 128 + response 64 = 192 tokens) per GPU
    r = run_with(tmp_path, monkeypatch, IgnoresTheBudget, dynamic_batch=True, micro_batch_per_gpu=None,
                 max_tokens_per_gpu=192)
    sg = r.geometry["smoke"]
    assert sg["dynamic"] and sg["seqs_per_budget"] == 1, sg
    assert failed(r) == {"mini_and_micro_batches"}, format_report(r)
    ev = checks_of(r)["mini_and_micro_batches"].evidence
    assert ev["micro_tokens_max"] > ev["token_budget"] and "OVER the budget" in checks_of(r)["mini_and_micro_batches"].detail


@pytest.mark.verl
@pytest.mark.slow
def test_a_nan_loss_fails(tmp_path, monkeypatch):
    from wizard.smoketest.cpu import ActorRolloutRole

    class NanLoss(ActorRolloutRole):
        def _backward(self, loss, micro):
            (loss * float("nan")).backward()  # the planted fault: a loss that is not a number

    r = run_with(tmp_path, monkeypatch, NanLoss)
    assert "finite_losses" in failed(r) and "actor_updated" in failed(r), format_report(r)
    assert all(math.isnan(g) for g in checks_of(r)["finite_losses"].evidence["grad_norms"])


@pytest.mark.verl
@pytest.mark.slow
def test_a_reference_sharing_the_actors_weights_fails(tmp_path, monkeypatch):
    from wizard.smoketest.cpu import CpuRun

    class SharedReference(CpuRun):
        def _reference_role(self, actor, config, seed):
            return actor  # the planted fault: the reference is the actor's own process and weights

    r = run_with(tmp_path, monkeypatch, driver=SharedReference)
    assert {"reference_unchanged", "reference_is_own_instance", "kl_moves", "role_placement"} <= failed(r), \
        format_report(r)
    checks = checks_of(r)
    assert checks["kl_moves"].evidence["mean_abs_logprob_diff"] == 0.0 and r.reference_unchanged is False
    assert "actor and reference share one process" in checks["role_placement"].detail
    assert r.pitfalls()["1"] is False and r.pitfalls()["3"] is False


@pytest.mark.verl
@pytest.mark.slow
def test_the_reward_manager_on_the_gpu_pool_fails(tmp_path, monkeypatch):
    from wizard.smoketest.cpu import CpuRun

    class RewardOnGpu(CpuRun):
        def _role_options(self, name):
            return super()._role_options("actor_rollout" if name == "reward" else name) | {"name": name}

    r = run_with(tmp_path, monkeypatch, driver=RewardOnGpu)
    assert failed(r) == {"role_placement"}, format_report(r)
    assert "the reward manager holds a GPU share" in checks_of(r)["role_placement"].detail


@pytest.mark.verl
@pytest.mark.slow
def test_a_row_dropped_before_the_rollout_fails(tmp_path, monkeypatch):
    from wizard.smoketest.cpu import CpuRun

    class DropsARow(CpuRun):
        def _draw(self, cursor):
            prompts, rows = super()._draw(cursor)
            return [prompts[0]] + prompts[:1] + prompts[2:], [rows[0]] + rows[:1] + rows[2:]  # row 2 lost, row 1 twice

    r = run_with(tmp_path, monkeypatch, driver=DropsARow)
    assert r.failure is not None and r.failure.phase == "reward", format_report(r)
    check = checks_of(r)["rows_reach_batch"]
    assert check.ok is False and check.evidence["rows_in_batch"] == PROMPTS - 1
    assert f"row 2 (of verl's loader) is not in samples {N + 1}-{2 * N}" in check.detail


@pytest.mark.verl
@pytest.mark.slow
def test_a_row_dropped_in_the_loader_fails(tmp_path, monkeypatch):
    from wizard.smoketest import cpu_data

    real = cpu_data._load_with_verl

    def drops_the_last_row(ctx, rows_path, tok):
        items, kept = real(ctx, rows_path, tok)
        return items[:-1], kept - 1  # the planted fault: one row of the file never reaches the loader's output

    monkeypatch.setattr(cpu_data, "_load_with_verl", drops_the_last_row)
    r = run_with(tmp_path, monkeypatch)  # the bundle filters overlong prompts: none of these rows is overlong
    assert r.failure is not None and r.failure.phase == "data", format_report(r)
    check = checks_of(r)["dataset_schema"]
    assert check.ok is False and "1 row(s) lost between the file and verl's loader (not overlong)" in check.detail
    assert check.evidence["rows_read"] == check.evidence["kept_by_verl"] + 1 and check.evidence["overlong"] == 0


# ---------------------------------------------------------------------------------------------
# LoRA: adapters only, the reference inside the actor (verl's ref_in_actor)

LORA = dict(lora_rank=8)


@pytest.mark.verl
@pytest.mark.slow
def test_lora_trains_adapters_only_with_the_reference_inside_the_actor(tmp_path, monkeypatch):
    r = run_with(tmp_path, monkeypatch, **LORA)
    assert r.ok, format_report(r) + "\n" + r.log_tail[-3000:]
    checks = checks_of(r)
    assert checks["lora_adapters_only"].ok and checks["reference_inside_actor"].ok
    assert {c.name for c in r.checks if c.kind == "measured"} <= set(FAULTS)
    assert "reference_is_own_instance" not in checks
    ev = checks["lora_adapters_only"].evidence
    assert ev["before"]["base"] == ev["after"]["base"] and ev["before"]["adapters"] != ev["after"]["adapters"]
    assert 0 < ev["trainable"] < ev["parameters"]
    assert r.placement["reference"]["pid"] == r.placement["actor"]["pid"]
    assert "reference" not in r.model.get("roles", {}) and r.geometry["smoke"]["lora"] is True
    assert checks["kl_moves"].evidence["reference_drift"] == 0.0 and checks["kl_moves"].evidence["mean_abs_logprob_diff"] > 0


@pytest.mark.verl
@pytest.mark.slow
def test_lora_base_weights_left_trainable_fail(tmp_path, monkeypatch):
    from wizard.smoketest.cpu import ActorRolloutRole

    class BaseTrainable(ActorRolloutRole):
        def _apply_lora(self, model):
            model = super()._apply_lora(model)
            for p in model.parameters():  # the planted fault: the base is not frozen
                p.requires_grad_(True)
            return model

    r = run_with(tmp_path, monkeypatch, BaseTrainable, **LORA)
    assert {"lora_adapters_only", "reference_unchanged"} <= failed(r), format_report(r)
    assert "MOVED: the update trained the base model" in checks_of(r)["lora_adapters_only"].detail


@pytest.mark.verl
@pytest.mark.slow
def test_lora_reference_with_adapters_on_fails(tmp_path, monkeypatch):
    import contextlib

    from wizard.smoketest.cpu import ActorRolloutRole

    class AdaptersOn(ActorRolloutRole):
        def _reference_context(self):
            return contextlib.nullcontext()  # the planted fault: the reference pass keeps the adapters

    r = run_with(tmp_path, monkeypatch, AdaptersOn, **LORA)
    assert failed(r) == {"kl_moves"}, format_report(r)
    ev = checks_of(r)["kl_moves"].evidence
    assert ev["mean_abs_logprob_diff"] == 0.0 and ev["reference_drift"] > 0


@pytest.mark.verl
@pytest.mark.slow
def test_lora_with_a_separate_reference_process_fails(tmp_path, monkeypatch):
    import ray

    from wizard.smoketest.cpu import CpuRun, ReferenceRole

    class SeparateReference(CpuRun):
        def _reference_role(self, actor, config, seed):  # the planted fault: a reference worker verl does not start
            return ray.remote(ReferenceRole).options(**self._role_options("reference")).remote(config, seed)

    r = run_with(tmp_path, monkeypatch, driver=SeparateReference, **LORA)
    assert "reference_inside_actor" in failed(r), format_report(r)
    assert "a separate reference process" in checks_of(r)["reference_inside_actor"].detail


# ---------------------------------------------------------------------------------------------
# the critic (ppo): its micro-batches and its optimizer step are measured like the actor's


@pytest.mark.verl
@pytest.mark.slow
def test_critic_faults_fail(tmp_path, monkeypatch):
    from wizard.smoketest.cpu import CriticRole

    class BrokenCritic(CriticRole):
        def _backward(self, loss, micro):
            if micro == 0:  # planted: later micro-batches never back-propagated ...
                loss.backward()

        def _all_reduce(self, params, dp):
            for p in params:  # ... and the gradients zeroed before the step
                if p.grad is not None:
                    p.grad.zero_()

    # ppo: 8 prompts × 1 sample, 2 mini-batches of 4 over 2 ranks, micro-batches of 1: 2 per rank per mini-batch
    r = run_with(tmp_path, monkeypatch, critic=BrokenCritic, algorithm="ppo", samples_per_prompt=1, micro_batch_per_gpu=1)
    assert r.geometry["smoke"]["micro_batches"] == 2
    assert {"critic_sample_use", "critic_updated"} <= failed(r), format_report(r)
    assert "actor_updated" not in failed(r) and "every_sample_used_once" not in failed(r)
    assert {c.name for c in r.checks if c.kind == "measured"} <= set(FAULTS)
