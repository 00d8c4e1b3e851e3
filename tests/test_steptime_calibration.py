"""The step-time model against the 17 real verl runs of tests/data/reference/step-times.json (each with its
source URL there). Every report's error is stated (pytest -rA prints them; benchmarks/step_times.md has the table
and the hold-out halves).

Where the model stands (issue 28 asks ≥ 80 % within ±30 %): 15 of 17 steps, 13 of 14 rollouts (the reports'
vLLM defaults read from verl's code: eager decoding before PR #2956, the V0 engine before verl 0.4, and the tail
to the response cap; T21, with no rollout TP stated, runs verl's default TP 2 and falls short), 7 of 8 weight
syncs (T13 and T05 joined with the cost per checkpoint tensor; T01's 1 s sync is predicted at 1.4 s since the
offload traffic counts both directions), 8 of 12 old log-prob passes, 12 of 14 updates (T21 joined when the
multi-turn response was derived from its turn and tool-output limits; T13's update when the MoE token dispatch
replaced a fitted MoE factor). The floors below are today's results, so that a change that makes the model worse
fails here; raising them is the work left (docs/time.md says which runs miss and why).
"""

from __future__ import annotations

import math

import pytest
from steptime_cases import TOLERANCE, cases, compare, response_mean, within

from wizard.planner import steptime as st
from wizard.planner import steptime_plan as stp

CASES = cases()
IDS = [c["id"] for c in CASES]
# share of reports within ±30 % today, per measured quantity (see the module docstring). The rollout's 13 of 14:
# T21 states no rollout TP and runs verl's default 2 (its sibling script's 4; 1 put it within), its sandbox
# tool latency not modelled
# old log-prob 9/12 since the all-to-all across nodes got its own efficiency (A2A_NIC_ETA): the Qwen3-235B EP32
# report's update came within ±30 % and its log-prob left it; the sibling rows (unfitted but for that one
# efficiency) went from 39 to 41 of 45 log-prob passes and from 53 to 58 of 63 updates. Update 13/14 since MI300X
# runs at AMD's measured sustained rate (T26). Old log-prob 10/12 since the driver's reductions over the padded batch
# (the entropy metric, and with calculate_log_probs the rollout-vs-actor comparison; ENTROPY_AGG_SLOT_S and
# DEBUG_METRICS_SLOT_S, measured on verl's own functions) count in that pass: T19 -41 % -> -25 %. Step 16/17 since a
# model that reasons by default (wizard.planner.reasoning) defaults to half its cap: T29 -40 % -> -14 %
FLOORS = {"step": 16 / 17, "weight sync": 7 / 8, "old log-prob": 10 / 12, "update actor": 13 / 14, "rollout": 13 / 14,
          "values": 1 / 1, "update critic": 1 / 1}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_report_is_predicted_and_its_error_stated(case, record_property):
    pairs = compare(case, CASES)
    assert "step" in pairs, case["id"]
    _, basis = response_mean(case, CASES)
    for k, (p, m) in pairs.items():
        assert math.isfinite(p) and p > 0, (case["id"], k)
        record_property(f"{k} error", f"{p / m - 1:+.0%} (predicted {p:.0f} s, measured {m:.0f} s)")
    record_property("response length", basis)
    # a step more than 5× off means a unit or an input went wrong, not a calibration miss (phases may be further
    # off where a run did what the model does not know: T27's log-prob and update passes, 20 × the time their FLOPs
    # take, likely its vision tower's patch embedding on torch 2.9 (docs/time.md), make its step 5 × the prediction)
    p, m = pairs["step"]
    assert 1 / 6 < p / m < 5, {k: round(p / m, 2) for k, (p, m) in pairs.items()}


def test_shares_within_tolerance_do_not_regress():
    hits: dict[str, list[bool]] = {}
    for c in CASES:
        for k, (p, m) in compare(c, CASES).items():
            hits.setdefault(k, []).append(within(p, m, TOLERANCE))
    shares = {k: sum(v) / len(v) for k, v in hits.items()}
    assert all(shares[k] >= floor - 1e-9 for k, floor in FLOORS.items()), shares


def test_no_constant_is_per_report():
    """The model reads nothing of a report but its configuration, hardware and lengths: a report that took twice as
    long at half the rate (its timings × 2, its throughput and MFU ÷ 2: the same tokens, which is all the length
    inference reads of them) gets the same predictions, for every report."""
    import copy

    for case in CASES:
        c = copy.deepcopy(case)
        before = compare(c, CASES)
        rates = ("perf/throughput", "perf/mfu/actor")
        c["measured"] = {k: (v * 2 if k.startswith("timing_s/") else v / 2 if k in rates else v)
                         if isinstance(v, (int, float)) else v for k, v in c["measured"].items()}
        after = compare(c, CASES)
        assert {k: p for k, (p, _) in before.items()} == pytest.approx({k: p for k, (p, _) in after.items()},
                                                                       rel=1e-9, nan_ok=True), c["id"]
    assert not any(case["id"] in open(st.__file__, encoding="utf-8").read() for case in CASES)


def test_the_reported_comparisons_hold():
    """What the reports show, as the model must reproduce it: a rollout TP of 4 instead of 1 on a 7B model on the
    same 8 H100 makes generation slower (T01 vs its sibling row T02: 485 s vs 154 s); 4× the GPUs shorten the step
    (T01, 8 GPUs, TP 4 → T03, 32 GPUs, TP 1: 746 s → 171 s); fixed micro-batches of 2 are slower than token budgets
    (T15: update 300 s vs 102 s)."""
    from dataclasses import replace

    from steptime_cases import workload

    t01 = next(c for c in CASES if c["id"] == "T01")
    w = workload(t01, CASES)
    tp1 = st.predict(replace(w, rollout_tp=1, kv_bytes_per_token=w.kv_bytes_per_token * 4, kv_tokens=None))
    assert tp1.phases["rollout"] < st.predict(w).phases["rollout"]
    t15 = next(c for c in CASES if c["id"] == "T15")
    w15 = workload(t15, CASES)
    dyn = st.predict(replace(w15, dynamic_bsz=True, train_tokens=10240, logprob_tokens=10240))
    assert dyn.phases["update actor"] < 0.7 * st.predict(w15).phases["update actor"]


def test_the_default_mean_response_is_the_reports_median():
    """RESPONSE_SQRT (the default mean response is RESPONSE_SQRT × √max_response_length) is the median of what the
    reports that measured or implied their mean response show, not a value fitted to step times."""
    import statistics

    ratios = []
    for c in CASES:
        resp, basis = response_mean(c, CASES)
        if resp and not basis.startswith(("sibling", "default")):
            ratios.append(resp / math.sqrt(c["config"]["max_response_length"]))
    assert len(ratios) >= 5
    assert abs(st.RESPONSE_SQRT / statistics.median(ratios) - 1) < 0.05, (st.RESPONSE_SQRT, sorted(ratios))


def test_rollout_floor_is_set_by_the_longest_response():
    """4 × the GPUs barely shorten a rollout whose replicas already run all their sequences at once (T19's
    128 GPUs vs T17's 32: 178 s vs 151–357 s): the step waits for the longest response, decoded at small batch."""
    from dataclasses import replace

    from steptime_cases import workload

    t19 = next(c for c in CASES if c["id"] == "T19")
    w = workload(t19, CASES)
    base = st.predict(w).phases["rollout"]
    more = st.predict(replace(w, n_gpus=w.n_gpus * 4)).phases["rollout"]
    assert more > 0.6 * base  # 4 × the replicas, far less than 4 × faster
    shorter_cap = st.predict(replace(w, max_response=w.max_response // 4)).phases["rollout"]
    assert shorter_cap < 0.7 * base  # the cap sets the tail


def test_a_multi_turn_response_holds_its_turns_and_tool_outputs():
    """A multi-turn "response" (verl's tool agent loop) holds up to max_assistant_turns assistant turns and the tool
    outputs between them, each cut at max_tool_response_length characters (verl 0.9.1
    experimental/agent_loop/tool_agent_loop.py:290-295, 499-505): more turns mean a longer response to train on; the
    tool outputs lengthen the training passes but are prefilled, not decoded, in the rollout."""
    from dataclasses import replace

    from steptime_cases import workload

    t21 = next(c for c in CASES if c["id"] == "T21")
    w = replace(workload(t21, CASES), response_mean=None)
    one = replace(w, assistant_turns=1)
    assert st.predict(w).assumptions["response_length_mean"] > 3 * st.predict(one).assumptions["response_length_mean"]
    assert st.predict(w).phases["update actor"] > 2 * st.predict(one).phases["update actor"]
    assert st.tool_tokens(one) == 0 and st.tool_tokens(replace(w, multi_turn=False)) == 0
    long_tools = replace(w, tool_response_chars=w.tool_response_chars * 2)
    assert st.tool_tokens(long_tools) == 2 * st.tool_tokens(w) > 0
    # the response grows by the extra tool tokens (below its cap, half max_response_length); the decoded part does not
    p, q = st.predict(w), st.predict(long_tools)
    grew = q.assumptions["response_length_mean"] - p.assumptions["response_length_mean"]
    assert abs(grew - st.tool_tokens(w)) <= 1
    # decoding them would grow the decode with the response; as context they only lengthen the KV reads
    dec_p, dec_q = (x.detail["decode bulk"] + x.detail["decode tail"] for x in (p, q))
    assert dec_q / dec_p < 1 + 0.5 * grew / p.assumptions["response_length_mean"]


def test_what_plan_md_says_of_the_calibration_is_what_it_measures():
    """PLAN.md's calibration line (steptime_plan.CALIBRATION): the in-sample count recomputed here, the hold-out count
    read from the generated benchmarks/step_times.md (its two hold-out sections)."""
    import re
    from pathlib import Path

    steps = [within(*compare(c, CASES)["step"], TOLERANCE) for c in CASES]
    assert stp.CALIBRATION["reports"] == len(CASES) and stp.CALIBRATION["steps_within"] == sum(steps)
    bench = (Path(__file__).resolve().parent.parent / "benchmarks" / "step_times.md").read_text(encoding="utf-8")
    held = 0
    for section in re.split(r"^## ", bench, flags=re.M):
        if section.startswith("Hold-out"):
            held += int(re.search(r"^- step: (\d+)/\d+ within", section, flags=re.M).group(1))
    assert stp.CALIBRATION["steps_within_held_out"] == held


def test_each_report_decodes_with_its_verl_versions_engine_defaults():
    """enforce_eager was verl's default until PR #2956 (2025-08-08): the July 2025 runs decoded without CUDA graphs
    unless their script said otherwise; vLLM's V0 engine before verl 0.4.0 (2025-06-06, vllm<=0.8.2 pinned)."""
    from steptime_cases import rollout_engine

    by = {c["id"]: rollout_engine(c) for c in CASES}
    assert by["T03"]["enforce_eager"] and not by["T03"]["vllm_v0"]  # 2025-07-03, no override
    assert by["T15"]["enforce_eager"]  # 2025-09-08, its script sets True
    assert not by["T17"]["enforce_eager"] and not by["T27"]["enforce_eager"]  # verl 0.6 and 0.9 defaults
    assert by["T26"]["vllm_v0"] and by["T31"]["vllm_v0"] and not by["T01"]["vllm_v0"]
    assert by["T27"]["max_num_seqs"] == 256 and by["T01"]["max_num_seqs"] == 1024


def test_a_reports_unknown_settings_are_verls_defaults():
    """A report that leaves a setting unknown (null) is run as verl 0.9.1's default for it (ppo_trainer.yaml via
    verl-init's snapshot: 1 response a prompt, 512 + 512 tokens, 1,024 prompts, mini-batches of 256, a rollout at
    half the GPU and TP 2), its GPUs from nodes × GPUs a node."""
    from copy import deepcopy

    from steptime_cases import workload

    every = cases()
    bare = deepcopy(next(c for c in every if c["id"] == "T11"))
    bare["config"] = {k: None for k in bare["config"]}
    bare["hardware"] = {"gpu": "H100", "nnodes": 2, "n_gpus_per_node": 8}
    bare["rollout_tp"] = None
    w = workload(bare, every)
    assert (w.n, w.max_prompt, w.max_response, w.prompts, w.gmu, w.mini_batches, w.n_gpus, w.rollout_tp) == \
        (1, 512, 512, 1024, 0.5, 1024 // 256, 16, 2)
    assert st.predict(w).step_s > 0


def test_a_report_of_a_moe_the_catalogue_lacks_runs_its_active_parameters():
    """A MoE report whose model verl-init does not know gives its active parameters (model_active_params_b): the
    workload computes those, not its total (the planted fault, the same record without them, about 9 × the FLOPs)."""
    from copy import deepcopy

    from steptime_cases import workload

    every = cases()
    t11 = next(c for c in every if c["id"] == "T11")
    unknown = deepcopy(t11)
    unknown["model"], unknown["model_active_params_b"] = "org/SomeMoE-30B", 3.3
    w = workload(unknown, every)
    assert abs(w.active_params / 3.3e9 - 1) < 0.05 and w.moe_layers and w.top_k
    dense = workload({**unknown, "model_active_params_b": None}, every)
    assert dense.active_params > 8 * w.active_params
    # the generic MoE lands near the catalogue's own shape of the same model: the same run within 20 %
    assert abs(st.predict(w).step_s / st.predict(workload(t11, every)).step_s - 1) < 0.2


def test_a_reports_transformers_era_decides_the_fsdp_expert_loop():
    """verl's images ran transformers 4 until verl PR #5724 (2026-04-03): an FSDP MoE report dated before it loops
    over its experts (steptime.EXPERT_LOOP_S), one dated after runs grouped experts, an undated one by its verl
    version; Megatron never loops."""
    from steptime_cases import TRANSFORMERS5_FROM, workload

    every = cases()
    t11 = next(c for c in every if c["id"] == "T11")  # Megatron, 2025
    assert not workload(t11, every).expert_loop
    fsdp = {**t11, "backend": "fsdp", "config": {**t11["config"], "megatron_tp": None, "megatron_ep": None}}
    assert workload({**fsdp, "date": "2025-07-04"}, every).expert_loop
    assert not workload({**fsdp, "date": TRANSFORMERS5_FROM}, every).expert_loop
    # undated: by its verl version (0.9 requires transformers>=5.5.3)
    assert workload({**fsdp, "date": None, "verl_version": "0.5.0"}, every).expert_loop
    assert not workload({**fsdp, "date": None, "verl_version": "0.9.1"}, every).expert_loop
    dense = next(c for c in every if c["id"] == "T01")  # FSDP, 2025, dense
    assert not workload(dense, every).expert_loop


def test_a_report_the_model_cannot_read_counts_as_missed_not_as_a_crash():
    """A report kept aside may name a model neither the catalogue nor its name sizes, or leave a block out: the
    harness predicts NaN for what it measured (never within ±30 %, nothing to fit) and goes on with the rest."""
    import copy

    from steptime_cases import log_error

    odd = copy.deepcopy(CASES[0])
    odd["model"], odd["model_params_b"] = "some-org/unsized-model", None
    pairs = compare(odd, CASES + [odd])
    assert pairs and all(math.isnan(p) for p, _ in pairs.values())
    assert not any(within(p, m) for p, m in pairs.values()) and log_error(pairs) == 0.0
    bare = {"id": "TX", "measured": {"timing_s/step": 100.0}}
    assert math.isnan(compare(bare, CASES)["step"][0])


def test_a_measured_reference_or_critic_pass_is_predicted_even_when_the_config_says_nothing():
    """verl times `ref` only when a reference pass runs (and `values` / `update_critic` only with a critic): a report
    that measured one had it, whatever its config block left null; the phase is predicted and compared, not
    dropped."""
    import copy

    base = next(c for c in CASES if c["id"] == "T01")
    odd = copy.deepcopy(base)
    odd["config"]["has_ref"], odd["config"]["has_critic"] = None, None
    odd["measured"]["timing_s/ref"], odd["measured"]["timing_s/values"] = 50.0, 40.0
    pairs = compare(odd, CASES)
    assert {"ref log-prob", "values"} <= set(pairs)
    assert all(not math.isnan(p) for p, _ in pairs.values())
    assert "ref log-prob" not in compare(base, CASES)


@pytest.mark.parametrize("cid", ["T01", "T07", "T26", "T13"])
def test_a_report_without_a_derived_block_implies_the_same_mean_sequence(cid):
    """A report kept aside may come without step-times.json's derived block: the harness computes the mean sequence
    from the raw metrics as that block does (total tokens, else throughput × step × GPUs), so the prediction is the
    same; a report with only an MFU (T13) gets the mean at which verl's own FLOP counter gives that MFU either way
    (tests/test_steptime_flops.py)."""
    import copy

    from steptime_cases import _seq_from_report

    case = next(c for c in CASES if c["id"] == cid)
    bare = copy.deepcopy(case)
    bare["derived"] = {}
    if _seq_from_report(case) is None:
        assert _seq_from_report(bare) is None
    else:
        assert _seq_from_report(bare) == pytest.approx(_seq_from_report(case), rel=1e-3)
    assert compare(bare, CASES)["step"] == pytest.approx(compare(case, CASES)["step"], rel=1e-3)


def test_a_one_step_off_report_runs_its_rollout_on_its_own_gpus():
    """A report whose rollout has GPUs of its own (one-step-off or fully async, not colocated) says how many: the
    harness gives the rollout those, the training the rest, and overlaps the two (a step is the longer plus the
    sync). A colocated report is untouched."""
    import copy

    from steptime_cases import rollout_gpus, workload

    base = next(c for c in CASES if c["id"] == "T23")
    assert rollout_gpus(base) == 0
    odd = copy.deepcopy(base)
    odd["rollout_mode"], odd["notes"] = "one-step-overlap async", "Generation: 4 GPUs, Training: 12 GPUs"
    w = workload(odd, CASES)
    assert (w.n_gpus, w.rollout_gpus, w.overlap) == (12, 4, True)
    pred = st.predict(w)
    train = sum(v for k, v in pred.phases.items() if k not in ("rollout", "weight sync"))
    assert pred.step_s == pytest.approx(max(pred.phases["rollout"], train) + pred.receive_s + pred.phases["weight sync"])
    odd["notes"], odd["rollout_gpus"] = "", 8
    assert workload(odd, CASES).rollout_gpus == 8
    odd["rollout_mode"], odd["rollout_gpus"] = "sync (colocated)", None
    odd["notes"] = "Generation: 4 GPUs"
    assert workload(odd, CASES).rollout_gpus == 0


def test_a_fully_async_report_trains_its_sync_cycle_and_streams():
    """A fully async report (its mode says so, or its settings or launch script set async_training): a logged step
    is trigger_parameter_sync_step local steps of require_batches mini-batches (verl's defaults 4 and 1 where the
    report states neither), streamed when partial_rollout is on, without an old log-prob pass unless one was
    measured (bypass_mode: True in verl's async configs); the "N:M" split of verl's docs is rollout:trainer. A
    one-step-off report is not fully async; a colocated one has no rollout GPUs of its own."""
    import copy

    from steptime_cases import fully_async, rollout_gpus, workload

    base = next(c for c in CASES if c["id"] == "T17")  # 32 H20, mini-batch 32
    fa = copy.deepcopy(base)
    fa["rollout_mode"] = "fully_async_policy 16:16 (staleness 0.5)"
    fa["measured"]["timing_s/old_log_prob"] = None
    assert rollout_gpus(fa) == 16
    fa["config"].update(require_batches=4, trigger_parameter_sync_step=4, partial_rollout=True)
    w = workload(fa, CASES)
    assert (w.n_gpus, w.rollout_gpus, w.prompts, w.train_prompts, w.mini_batches) == (16, 16, 512, 512, 16)
    assert (w.streaming, w.old_logprob, w.overlap) == (True, False, True)
    for k in ("require_batches", "trigger_parameter_sync_step", "partial_rollout"):
        del fa["config"][k]
    # T17's launch script (dapo_7b_math_fsdp2_16_16.sh, read as check reads it) sets require_batches 4 and trigger 4
    assert fully_async(fa) == {"require_batches": 4, "trigger_parameter_sync_step": 4, "partial_rollout": True,
                               "stated": True}
    fa["config_source"] = "doc table"
    assert fully_async(fa) == {"require_batches": 1, "trigger_parameter_sync_step": 4, "partial_rollout": True,
                               "stated": False}
    # nothing of the cycle stated: the report's prompts per step (T17's train_batch_size 512), else verl's defaults
    assert workload(fa, CASES).train_prompts == 512
    fa["config"]["train_batch_size"] = None
    assert workload(fa, CASES).train_prompts == 4 * 32
    fa["config"]["partial_rollout"] = False
    assert not workload(fa, CASES).streaming
    fa["measured"]["timing_s/old_log_prob"] = 50.0
    assert workload(fa, CASES).old_logprob
    one = next(c for c in CASES if c["id"] == "T23")
    odd = copy.deepcopy(one)
    odd["rollout_mode"] = "one-step-overlap async: 4 rollout GPUs"
    assert fully_async(odd) is None and fully_async(one) is None and fully_async(base) is None
    assert workload(odd, CASES).train_prompts == 512


def test_an_overlapped_reports_gen_timer_is_the_trainers_wait():
    """verl's timing_s/gen with a rollout of its own is the trainer's wait for the batch (StepTime.gen_timer_s); the
    rollout's own generate_sequences is compared with the rollout phase. A colocated report compares its rollout."""
    import copy

    from steptime_cases import compare, predicted

    one = next(c for c in CASES if c["id"] == "T23")
    odd = copy.deepcopy(one)
    odd["rollout_mode"], odd["rollout_gpus"] = "one-step-overlap async", 4
    pred = predicted(odd, CASES)
    got = compare(odd, CASES)
    assert got["rollout"][0] == pytest.approx(pred.gen_timer_s)
    assert got["generation"] == (pytest.approx(pred.phases["rollout"]), one["measured"]["timing_s/generate_sequences"])
    assert pred.gen_timer_s < pred.phases["rollout"]
    assert compare(one, CASES)["rollout"][0] == pytest.approx(predicted(one, CASES).phases["rollout"])
    assert "generation" not in compare(one, CASES)
