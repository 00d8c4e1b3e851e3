"""Planted faults that the cpu smoke must catch: a micro-batch loop that back-propagates only the first
micro-batch of each mini-batch, and gradients zeroed before the optimizer step (weight decay alone still
moves the weights). The smoke measures what each micro-batch's backward pass added to the gradients
(wizard.smoketest.cpu.GradientLedger) and derives "samples used" and "actor updated" from that.

The expected numbers are written out from the bundle's batch arithmetic, not taken from earlier output.
The faults are planted in the role class the driver hands to Ray: a subclass defined inside the test is
pickled by value, so the Ray worker process runs the faulty loop.
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


def run_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: type | None = None, **changes) -> SmokeReport:
    from wizard.smoketest import cpu

    if role is not None:
        monkeypatch.setattr(cpu, "ActorRolloutRole", role)
    plan = wizard.plan(make_answers({**BASE, **changes}), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "bundle")
    report = wizard.smoke(bundle, options=SmokeOptions(engine="cpu", data_dir=GSM8K))
    sg = report.geometry["smoke"]
    assert (sg["samples"], sg["updates"], sg["dp"], sg["per_rank"], sg["micro"], sg["micro_batches"], sg["epochs"]) == \
        (SAMPLES, UPDATES, GPUS, PER_RANK, MICRO, MICRO_PER_RANK, 1), sg
    return report


def checks_of(r: SmokeReport) -> dict:
    return {c.name: c for c in r.checks}


# ---------------------------------------------------------------------------------------------
# the measurement itself (no Ray): a tiny model, a micro-batch loop with and without faults


def ledger_run(fault: str = "") -> list[dict]:
    import torch

    from wizard.smoketest.cpu import GradientLedger

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
    from wizard.smoketest.cpu import _steps_without_gradient

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
