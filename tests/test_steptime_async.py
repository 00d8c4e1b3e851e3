"""Step time of verl's runs whose rollout has GPUs of its own and overlaps training (the one-step-off and fully
async entry points, verl/experimental/*), and of bypass mode (no old log-prob pass), each read from verl 0.9.1's
code: `algorithm.rollout_correction.bypass_mode` makes the old log-probs the rollout's own (ray_trainer.py:1550);
the rollout runs on `rollout.nnodes` × `rollout.n_gpus_per_node` (one_step_off_policy/main_ppo.py:121-122,
fully_async_main.py:235-236); the fully async trainer takes `require_batches` × `ppo_mini_batch_size` prompts a
local step (docs/advance/fully_async.md) and logs one step per weight sync, every `trigger_parameter_sync_step`
local steps, its timings summed (experimental/fully_async_policy/detach_utils.py:255-256, 293-294)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_steptime import _work

from wizard.check.lint import check
from wizard.planner import steptime as st
from wizard.planner.steptime_config import workload_from_config
from wizard.planner.steptime_plan import run_hours
from wizard.planner.shapes import resolve_shape

SHAPE = resolve_shape("Qwen/Qwen2.5-7B-Instruct")
PPO = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "actor_rollout_ref.rollout.name=vllm",
       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "algorithm.adv_estimator=grpo",
       "actor_rollout_ref.rollout.n=8", "data.train_batch_size=256", "data.max_prompt_length=1024",
       "data.max_response_length=4096", "trainer.nnodes=1"]


def _from(keys: dict) -> st.Workload:
    return workload_from_config(keys.get, SHAPE, n_gpus=12, gpu_type="H100", gpu_memory_gb=80)


def test_bypass_mode_runs_no_old_log_prob_pass():
    keys = {"data.train_batch_size": 256, "actor_rollout_ref.rollout.n": 8, "data.max_response_length": 4096}
    plain, bypass = _from(keys), _from({**keys, "algorithm.rollout_correction.bypass_mode": True})
    assert plain.old_logprob and not bypass.old_logprob
    assert "old log-prob" in st.predict(plain).phases and "old log-prob" not in st.predict(bypass).phases
    assert st.predict(plain).step_s - st.predict(bypass).step_s == pytest.approx(
        st.predict(plain).phases["old log-prob"])


def test_a_rollout_of_its_own_overlaps_training():
    """One-step-off: the next batch generates on the rollout's own GPUs while this one trains, so a step is the
    longer of the two plus the weight sync; the rollout's replicas are its own GPUs ÷ TP; GPU-hours count both
    groups."""
    colocated = _work(n_gpus=12)
    own = _work(n_gpus=12, rollout_gpus=4, overlap=True)
    a, b = st.predict(colocated), st.predict(own)
    # the rollout's 4 GPUs hold the samples as 4 colocated GPUs would: 4 replicas, not 12
    assert b.phases["rollout"] == pytest.approx(st.predict(_work(n_gpus=4)).phases["rollout"])
    assert b.phases["rollout"] > a.phases["rollout"]
    train = sum(v for k, v in b.phases.items() if k not in ("rollout", "weight sync"))
    # the trainer receives the batch the rollout built, padded to max_prompt + max_response: input_ids,
    # attention_mask and position_ids (int64) per slot, responses (int64) and rollout log-probs (fp32) per response slot
    seqs, slots = 256 * 8, 256 * 8 * (512 + 4096)
    receive = (3 * 8 * slots + (8 + 4) * seqs * 4096) / 1e9 / st.DRIVER_GB_S
    assert b.receive_s == pytest.approx(receive) and a.receive_s == 0.0
    assert b.step_s == pytest.approx(max(b.phases["rollout"], train) + receive + b.phases["weight sync"])
    assert b.step_s < sum(b.phases.values())
    # verl's gen timer: the rollout when colocated; with a rollout of its own, the wait beyond the training, plus
    # the receipt
    assert a.gen_timer_s == a.phases["rollout"]
    assert b.gen_timer_s == pytest.approx(max(b.phases["rollout"] - train, 0.0) + receive)
    assert b.step_s == pytest.approx(train + b.gen_timer_s + b.phases["weight sync"])
    assert run_hours(b, 10, 12)[1] == pytest.approx(b.step_s * 10 / 3600 * 16)
    assert run_hours(a, 10, 12)[1] == pytest.approx(a.step_s * 10 / 3600 * 12)


def test_the_fully_async_trainer_takes_require_batches_mini_batches_and_streams():
    """Fully async: data.train_batch_size is not used (0) and gen_batch_size is 1 (streaming); a local step trains
    require_batches × ppo_mini_batch_size prompts, and the step verl logs is trigger_parameter_sync_step of them
    (one weight sync; 4 × 32 × 4 = 512 prompts, 16 optimizer steps; verl's default trigger is 4); with partial
    rollout the engine stays full, so the step's samples cost its throughput, no drain to the longest response."""
    keys = {"data.train_batch_size": 0, "data.gen_batch_size": 1, "actor_rollout_ref.actor.ppo_mini_batch_size": 32,
            "async_training.require_batches": 4, "async_training.partial_rollout": True, "rollout.nnodes": 1,
            "rollout.n_gpus_per_node": 4, "actor_rollout_ref.rollout.n": 16, "data.max_response_length": 8192,
            "async_training.trigger_parameter_sync_step": 4}
    w = _from(keys)
    assert (w.prompts, w.train_prompts, w.mini_batches, w.rollout_gpus, w.overlap, w.streaming) == \
        (512, 512, 16, 4, True, True)
    assert _from({**keys, "async_training.trigger_parameter_sync_step": 1}).train_prompts == 128
    streamed, drained = st.predict(w), st.predict(_from({**keys, "async_training.partial_rollout": False}))
    assert streamed.detail["decode tail"] == 0.0 and drained.detail["decode tail"] > 0.0
    assert streamed.phases["rollout"] < drained.phases["rollout"]


@pytest.mark.verl
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_times_a_one_step_off_script_with_its_own_rollout_gpus(tmp_path):
    """A one-step-off launch script (its own config tree; bypass_mode true there,
    one_step_off_ppo_trainer.yaml): 12 trainer GPUs and 4 rollout GPUs; `check` predicts no old log-prob pass, a step
    of the longer side plus the batch's receipt and the sync, and GPU-hours for all 16 GPUs."""
    path = Path(tmp_path) / "run.sh"
    words = [*PPO, "trainer.n_gpus_per_node=12", "rollout.nnodes=1", "rollout.n_gpus_per_node=4"]
    path.write_text("#!/bin/bash\npython3 -m verl.experimental.one_step_off_policy.main_ppo \\\n    "
                    + " \\\n    ".join(words) + "\n", encoding="utf-8")
    report = check(str(path), env={"HOME": str(tmp_path)}, gpu_type="H100", gpu_memory_gb=80)
    assert report.source.entry == "one_step_off" and report.time is not None
    phases = report.time["phases_detail"]
    assert "old log-prob" not in phases
    train = sum(v for k, v in phases.items() if k not in ("rollout", "weight sync"))
    # the trainer's wait for the batch: the rollout beyond the training, plus the batch's receipt (verl's gen timer)
    receive = report.time["batch_receive_s"]
    assert receive > 0 and report.time["gen_timer_s"] == pytest.approx(max(phases["rollout"] - train, 0) + receive,
                                                                       abs=0.2)
    assert report.time["step_s"] == pytest.approx(max(phases["rollout"], train) + receive + phases["weight sync"],
                                                  abs=0.2)
    steps = report.time["run_steps"]
    assert report.time["run_gpu_hours"] == pytest.approx(report.time["step_s"] * steps / 3600 * 16, rel=0.01)
    line = next(f.problem.line() for f in report.findings if f.problem.rule == "VI895")
    assert "on its own 4 GPUs" in line


def test_a_fully_async_run_counts_its_steps_in_weight_sync_cycles():
    """verl's fully async rollouter generates rollout.total_rollout_steps prompts (fully_async_rollouter.py:405-407)
    and the trainer logs a step per sync cycle: 512 × 400 prompts at 4 × 32 × 4 a cycle is 400 steps, the doc's
    400-step runs (docs/advance/fully_async.md), fewer where the data runs out first; without it, epochs × rows //
    the cycle's prompts."""
    from wizard.planner.steptime_plan import run_steps

    keys = {"data.train_batch_size": 0, "actor_rollout_ref.actor.ppo_mini_batch_size": 32,
            "async_training.require_batches": 4, "async_training.trigger_parameter_sync_step": 4,
            "rollout.total_rollout_steps": 512 * 400}
    assert run_steps(keys.get)[0] == 400
    # verl's rollouter stops at min(total_rollout_steps, epochs × rows): 10 × 17,398 prompts // 512 a step
    assert run_steps({**keys, "trainer.total_epochs": 10}.get, rows=17_398)[0] == 10 * 17_398 // 512
    steps, basis = run_steps({**keys, "rollout.total_rollout_steps": None, "trainer.total_epochs": 2}.get,
                             rows=17_398)
    assert steps == 2 * (17_398 // 512) and "fully async" in basis
