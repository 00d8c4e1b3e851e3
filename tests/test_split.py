"""The rollout on GPUs of its own (verl's one-step-off and fully async entry points): how `check` reads such a run
and VI899, the split of the same GPUs the step-time model predicts faster (wizard.planner.split).

Independent sources: verl's own scripts of both modes (tests/data/reference/verl-async-scripts, verl main at
1dda039b) and what verl's docs measured with them. docs/advance/fully_async.md calls its Qwen3-30B-A3B run's
96 rollout : 32 trainer GPUs "a highly skewed resource allocation [...] which is not an optimal configuration"; it
logged the trainer side at 50 s of reference and 207 s of update per step against 22 s of waiting for samples, so the
rollout's GPUs wait. docs/advance/one_step_off.md ran its 7B DAPO scripts on 4 rollout + 12 trainer GPUs with both
sides close (FSDP2: 458 s of generation beside 108 + 337 s of training)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from test_steptime import _work

from wizard.check.lint import check
from wizard.planner import split as sp
from wizard.planner import steptime as st

SCRIPTS = Path(__file__).resolve().parent / "data" / "reference" / "verl-async-scripts"
SKEWED = SCRIPTS / "fully_async_policy" / "shell" / "grpo_30b_a3b_base_math_megatron_96_32.sh"
# verl's 7B DAPO scripts, whose two sides the docs measured close (above) or ran at even splits
BALANCED = [SCRIPTS / "one_step_off_policy" / "shell" / f"dapo_7b_math_{e}_4_12.sh" for e in ("fsdp2", "megatron")] \
    + [SCRIPTS / "fully_async_policy" / "shell" / f"dapo_7b_math_fsdp2_{n}_{n}.sh" for n in (16, 32, 64)]


def _check(path: Path, tmp_path: Path):
    return check(str(path), env={"HOME": str(tmp_path)}, gpu_type="H20", gpu_memory_gb=96)


def _rules(report, severity: str | None = None) -> list[str]:
    return [f.problem.rule for f in report.findings if severity is None or f.problem.severity == severity]


def test_alternatives_keep_the_way_a_run_splits_its_gpus():
    """Per node (one-step-off's 4_12: 2 nodes of 6 trainer + 2 rollout GPUs, 8 together): the per-node counts move
    in steps of the rollout TP, their sum of 8 stays; by nodes (fully async's 16_16: 2 + 2 nodes of 8, 16 together
    being more than a node holds): the node counts move, their sum of 4 stays; a replica larger than a rollout
    node's GPUs, or a split that is neither, has none."""
    per_node = sp.Split(2, 6, 2, 2)
    assert sp.alternatives(per_node, rollout_tp=2) == [sp.Split(2, 4, 2, 4), sp.Split(2, 2, 2, 6)]
    assert [s.rollout_per_node for s in sp.alternatives(per_node, rollout_tp=1)] == [1, 3, 4, 5, 6, 7]
    by_nodes = sp.Split(2, 8, 2, 8)
    assert sp.alternatives(by_nodes, rollout_tp=4) == [sp.Split(3, 8, 1, 8), sp.Split(1, 8, 3, 8)]
    assert sp.alternatives(by_nodes, rollout_tp=16) == []
    # on nodes of 16 GPUs the same four numbers are one pool of 8 beside the other on each node: a per-node split
    assert sp.alternatives(by_nodes, rollout_tp=4, node_gpus=16) == [sp.Split(2, 12, 2, 4), sp.Split(2, 4, 2, 12)]
    assert sp.alternatives(sp.Split(1, 8, 2, 4), rollout_tp=1) == []
    for cur in (per_node, by_nodes):
        for s in sp.alternatives(cur, 2):
            assert s.trainer_gpus + s.rollout_gpus == cur.trainer_gpus + cur.rollout_gpus


def test_balance_states_the_wait_and_takes_the_fastest_split_training_can_run():
    """A rollout-bound run (7B, 2,048 responses of 1,000 tokens on average, 2 rollout + 6 trainer GPUs on a node): the trainer's GPUs wait
    1 − training ÷ rollout of every step; the suggestion is the fastest split the predicate accepts, at least GAIN
    faster, and none when the predicate refuses every other split."""
    w = _work(n_gpus=6, rollout_gpus=2, overlap=True, gpus_per_node=6, rollout_per_node=2)
    cur = sp.Split(1, 6, 1, 2)
    b = sp.balance(w, cur, lambda s: True)
    assert b.idle_side == "training"
    assert b.idle_share == pytest.approx(1 - b.train_s / b.rollout_s)
    assert b.step_s == pytest.approx(max(b.rollout_s, b.train_s) + st.predict(w).receive_s
                                     + st.predict(w).phases["weight sync"])
    assert b.best is not None and b.best.rollout_gpus > cur.rollout_gpus
    assert b.best_step_s == min(s for _, s in b.table) <= b.step_s * (1 - sp.GAIN)
    # each split is timed as the model times it: training on its trainer GPUs, the rollout on its own
    for s, step in b.table:
        assert step == pytest.approx(st.predict(replace(w, n_gpus=s.trainer_gpus, rollout_gpus=s.rollout_gpus,
                                                        gpus_per_node=s.trainer_per_node,
                                                        rollout_per_node=s.rollout_per_node)).step_s)
    refused = sp.balance(w, cur, lambda s: False)
    assert refused.best is None and refused.table == ()
    only_worse = sp.balance(w, cur, lambda s: s.rollout_gpus < cur.rollout_gpus)
    assert only_worse.best is None and only_worse.table


def test_a_rollout_replica_spans_nodes_by_the_rollouts_own_gpus_per_node():
    """With a rollout of its own, a TP group crosses nodes when it is larger than rollout.n_gpus_per_node, not
    the trainer's count: TP 4 on 4 rollout GPUs of a node beside 2 trainer GPUs stays inside the node (no
    CROSS_NODE_ALLREDUCE_S per layer); reading the trainer's 2 (the planted fault) would cross."""
    own = _work(n_gpus=2, rollout_gpus=4, overlap=True, rollout_tp=4, gpus_per_node=2, rollout_per_node=4)
    crossing = replace(own, rollout_per_node=0)
    assert st.predict(own).phases["rollout"] < st.predict(crossing).phases["rollout"]
    assert st.predict(own).phases["rollout"] == pytest.approx(
        st.predict(replace(own, gpus_per_node=4, rollout_per_node=0)).phases["rollout"])


@pytest.mark.verl
@pytest.mark.slow
def test_check_flags_verls_own_skewed_split_and_not_its_balanced_ones(tmp_path):
    """verl's 96 : 32 Qwen3-30B-A3B script, which its doc calls not optimal with the trainer side the slower:
    VI899 says the rollout's 96 GPUs wait and names a split with more training GPUs of the same 128, predicted
    faster; the 7B scripts the docs measured close, or ran evenly, get no VI899."""
    report = _check(SKEWED, tmp_path)
    [line] = [f.problem for f in report.findings if f.problem.rule == "VI899"]
    assert "rollout side's 96 GPUs wait" in line.line()
    set_keys = dict(kv.split("=") for kv in line.hint.removeprefix("set ").split())
    assert int(set_keys["trainer.nnodes"]) > 4 and int(set_keys["trainer.nnodes"]) + int(set_keys["rollout.nnodes"]) == 16
    for path in BALANCED:
        assert "VI899" not in _rules(_check(path, tmp_path)), path.name


@pytest.mark.verl
@pytest.mark.slow
def test_verls_own_disaggregated_scripts_raise_no_memory_or_batch_error(tmp_path):
    """The trainer GPUs of a one-step-off or fully async run hold no rollout engine (it has GPUs of its own), and
    the fully async entry point takes data.train_batch_size=0 (its rollouter asserts exactly that,
    fully_async_rollouter.py:351): verl's 7B scripts of both modes draw neither a memory error (VI860) nor a
    count error (VI808). A fully async train_batch_size other than 0 is verl's assert (VI892)."""
    for path in BALANCED:
        errors = _rules(_check(path, tmp_path), "error")
        assert "VI860" not in errors and "VI808" not in errors, (path.name, errors)
    text = BALANCED[2].read_text(encoding="utf-8").replace("train_prompt_bsz=0", "train_prompt_bsz=512")
    assert text != BALANCED[2].read_text(encoding="utf-8")
    planted = tmp_path / "fa512.sh"
    planted.write_text(text, encoding="utf-8")
    assert "VI892" in _rules(_check(planted, tmp_path), "error")


def test_training_gpus_of_their_own_hold_no_rollout_engine():
    """memory.Layout.rollout_elsewhere: the trainer GPUs' phases carry no engine reservation, the KV cache is still
    the engine's (on the rollout's GPUs, sized by the same gpu_memory_utilization); the planted fault, the engine
    counted on the trainer GPUs, puts the weight sync at least the reservation higher."""
    from wizard.planner.memory import Layout, estimate
    from wizard.planner.shapes import resolve_shape

    shape = resolve_shape("Qwen/Qwen2.5-7B-Instruct")
    base = Layout(gpu_gb=96, n_gpus=12, gpus_per_node=6, seq_len=4096, rollout_tp=1, gmu=0.8, dp=12,
                  train_tokens=16384, logprob_tokens=16384)
    own, shared = estimate(shape, replace(base, rollout_elsewhere=True)), estimate(shape, base)
    assert own.kv_seqs == pytest.approx(shared.kv_seqs)
    assert not any(t.role == "rollout" and "reservation" in t.part for p in own.phases.values() for t in p)
    assert shared.phase_gib("weight sync") - own.phase_gib("weight sync") >= 0.8 * shared.capacity_gib - 1e-6
    assert own.phase_gib("update") <= shared.phase_gib("update")


@pytest.mark.verl
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_legacy_reward_keys_take_effect_under_fully_async_only(tmp_path):
    """verl 0.9.1's fully_async_main maps the legacy reward keys onto reward.* (fully_async_main.py:237,
    migrate_legacy_reward_impl) and main_ppo does not: `reward_model.reward_manager=dapo` is a deprecation warning
    in a fully async script and an error (no effect) in a main_ppo one."""
    words = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "algorithm.adv_estimator=grpo",
             "reward_model.reward_manager=dapo", "trainer.nnodes=1", "trainer.n_gpus_per_node=4"]
    severities = {}
    for module in ("verl.experimental.fully_async_policy.fully_async_main", "verl.trainer.main_ppo"):
        path = tmp_path / f"{module.rsplit('.', 1)[-1]}.sh"
        path.write_text(f"#!/bin/bash\npython3 -m {module} \\\n    " + " \\\n    ".join(words) + "\n", encoding="utf-8")
        report = check(str(path), env={"HOME": str(tmp_path)}, gpu_type="H100", gpu_memory_gb=80)
        severities[module] = [f.problem.severity for f in report.findings if f.problem.rule == "VI805"]
    assert severities == {"verl.experimental.fully_async_policy.fully_async_main": ["warning"],
                          "verl.trainer.main_ppo": ["error"]}
