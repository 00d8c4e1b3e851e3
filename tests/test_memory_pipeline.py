"""Megatron's pipeline schedule in the memory model: activations of up to PP micro-batches in flight (R24-01).

The oracle is a small event simulation of Megatron-Core's schedules written out here (megatron/core/pipeline_parallel/
schedules.py, NVIDIA/Megatron-LM d98e8a6): every rank runs its warmup forwards, then one forward and one backward in
turn, then its cooldown backwards; a forward needs the previous stage's forward of that micro-batch (and model chunk),
a backward the next stage's backward. The simulation runs the ranks together and counts, on each rank, the
forwards whose backward has not run yet; planner/inflight.py's closed form must equal the busiest rank's peak.
Then: the R24-01 layout (Qwen3-235B-A22B TP4 PP8 EP4 on 80 GB, no recompute, verl#3360) does not fit in the update,
and full recompute does; check names the recompute keys.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from wizard.planner.inflight import pipeline_in_flight


def _rank_ops(pp: int, v: int, m: int, rank: int) -> list[tuple[str, int, int]]:
    """(F|B, micro-batch, model chunk) in the order rank `rank` runs them. Interleaved (v > 1): chunk-microbatch k
    goes to chunk (k // pp) % v, micro-batch (k // (pp·v))·pp + k % pp (groups of PP per virtual stage); backwards
    visit the chunks in reverse."""
    total = m * v
    if v == 1:
        warm = min(pp - rank - 1, total)
    else:
        warm = min((pp - rank - 1) * 2 + (v - 1) * pp, total)

    def fwd(k):
        return ("F", (k // (pp * v)) * pp + k % pp, (k // pp) % v)

    def bwd(k):
        return ("B", (k // (pp * v)) * pp + k % pp, v - 1 - (k // pp) % v)

    ops = [fwd(k) for k in range(warm)]
    for i in range(total - warm):
        ops += [fwd(warm + i), bwd(i)]
    ops += [bwd(k) for k in range(total - warm, total)]
    return ops


def _simulate(pp: int, v: int, m: int) -> list[float]:
    """Run all ranks until done; the peak in-flight forwards per rank, in units of the rank's whole stage."""
    ops = [_rank_ops(pp, v, m, r) for r in range(pp)]
    pos, done = [0] * pp, set()
    live, peak = [0] * pp, [0] * pp
    # virtual stage of (rank, chunk) = chunk·pp + rank; the model's last virtual stage turns forward into backward
    last = v * pp - 1
    while any(pos[r] < len(ops[r]) for r in range(pp)):
        moved = False
        for r in range(pp):
            if pos[r] == len(ops[r]):
                continue
            kind, mb, ch = ops[r][pos[r]]
            stage = ch * pp + r
            if kind == "F":
                ready = stage == 0 or ("F", mb, stage - 1) in done
            else:
                ready = ("F", mb, stage) in done and (stage == last or ("B", mb, stage + 1) in done)
            if not ready:
                continue
            done.add((kind, mb, stage))
            live[r] += 1 if kind == "F" else -1
            peak[r] = max(peak[r], live[r])
            pos[r] += 1
            moved = True
        assert moved, "the schedule deadlocked"
    assert all(x == 0 for x in live)
    return [p / v for p in peak]


@pytest.mark.parametrize("pp,v,m", [(2, 1, 1), (2, 1, 8), (4, 1, 2), (4, 1, 4), (4, 1, 16), (8, 1, 16), (8, 1, 3),
                                    (2, 2, 2), (4, 2, 4), (4, 2, 8), (4, 3, 8), (8, 2, 16)])
def test_in_flight_matches_a_simulated_schedule(pp, v, m):
    peaks = _simulate(pp, v, m)
    assert max(peaks) == peaks[0]  # the first stage holds the most
    if v == 1:
        assert peaks[-1] == 1  # the last stage: one micro-batch (with the logits)
    assert pipeline_in_flight(pp, v if v > 1 else None, m) == pytest.approx(peaks[0])


def test_unknown_micro_batches_fill_the_pipeline():
    assert pipeline_in_flight(8, None, 0) == 8 == pipeline_in_flight(8, None, 100)
    assert pipeline_in_flight(1, None, 5) == 1


# /work/scratch/r24/r24_01_qwen3_235b_no_recompute.sh (verl#3360), its overrides of ppo_megatron_trainer.yaml
R24_01 = [
    "data.train_files=/data/dapo-math-17k.parquet",
    "data.val_files=/data/aime-2024.parquet",
    "algorithm.adv_estimator=grpo",
    "data.train_batch_size=64",
    "data.max_prompt_length=2048",
    "data.max_response_length=8192",
    "data.truncation=left",
    "actor_rollout_ref.model.path=Qwen/Qwen3-235B-A22B",
    "actor_rollout_ref.rollout.n=8",
    "actor_rollout_ref.actor.ppo_mini_batch_size=16",
    "actor_rollout_ref.actor.use_dynamic_bsz=True",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=10240",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=10240",
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=10240",
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=8",
    "actor_rollout_ref.actor.megatron.expert_model_parallel_size=4",
    "actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=1",
    "actor_rollout_ref.actor.megatron.param_offload=True",
    "actor_rollout_ref.actor.megatron.optimizer_offload=True",
    "+actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_offload_fraction=1.0",
    "+actor_rollout_ref.actor.optim.override_optimizer_config.overlap_cpu_optimizer_d2h_h2d=True",
    "+actor_rollout_ref.actor.optim.override_optimizer_config.use_precision_aware_optimizer=True",
    "+actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_cpu_offload=True",
    "+actor_rollout_ref.actor.megatron.override_transformer_config.account_for_embedding_in_pipeline_split=True",
    "+actor_rollout_ref.actor.megatron.override_transformer_config.account_for_loss_in_pipeline_split=True",
    "actor_rollout_ref.actor.use_kl_loss=False",
    "algorithm.use_kl_in_reward=False",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=16",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.7",
    "trainer.n_gpus_per_node=8",
    "trainer.nnodes=4",
    "trainer.logger=[console]",
]
RECOMPUTE = [f"+actor_rollout_ref.actor.megatron.override_transformer_config.{k}={v}"
             for k, v in (("recompute_granularity", "full"), ("recompute_method", "uniform"), ("recompute_num_layers", 1))]


def _check(*extra):
    from wizard.check.lint import check
    return check(None, [*R24_01, *extra], config_name="ppo_megatron_trainer", gpu_type="H100")


def test_pp8_without_recompute_keeps_eight_micro_batches():
    from wizard.planner.memory import train_bytes_per_token
    report = _check()
    shape, L = _shape("Qwen/Qwen3-235B-A22B"), report.memory.layout
    assert (L.megatron_pp, L.pp_micro_batches) == (8, 64)  # 16×8 sequences on DP 1 (TP4·PP8 = 32), half-filled, 10240-token budget
    one = train_bytes_per_token(shape, replace(L, pp_micro_batches=1))
    eight = train_bytes_per_token(shape, L)
    assert eight > 3 * one  # eight micro-batches of stored activations on the first stage, not one
    flat = replace(L, megatron_pp=1)
    assert train_bytes_per_token(shape, flat) == train_bytes_per_token(shape, replace(flat, pp_micro_batches=1))


def _shape(name):
    from wizard.planner.shapes import resolve_shape
    return resolve_shape(name)


def test_r24_01_fits_only_with_full_recompute():
    from wizard.planner.memory import estimate
    shape, L = _shape("Qwen/Qwen3-235B-A22B"), _check().memory.layout
    bad, good = estimate(shape, L), estimate(shape, replace(L, recompute=True))
    assert bad.phase_gib("update") > bad.capacity_gib
    assert good.phase_gib("update") <= good.capacity_gib


@pytest.mark.slow
def test_check_names_the_recompute_keys():
    hits = [f for f in _check().findings if f.problem.rule == "VI860"]
    assert hits and hits[0].problem.severity == "error" and "update phase" in hits[0].problem.message
    assert "override_transformer_config.recompute_granularity=full" in hits[0].problem.hint
    fixed = _check(*RECOMPUTE)
    assert not [f for f in fixed.findings if f.problem.rule == "VI860" and "update" in f.problem.message]
    # control: the same run at PP 1 would hold one micro-batch (no pipeline): the in-flight count does not apply
    assert _check("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=1").memory.layout.megatron_pp == 1
