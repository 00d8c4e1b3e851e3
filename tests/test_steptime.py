"""The step-time model (wizard.planner.steptime), its `time` object in plan/check --json, PLAN.md's "Time and
cost" section, the imbalance rules VI895-VI897 and the planner's time-ranked log-prob micro-batch."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import run_cli

import wizard
from wizard.check.lint import check
from wizard.intent.profiles import profile_names
from wizard.planner import steptime as st
from wizard.planner.steptime_plan import as_json
from wizard.planner.steptime_config import workload_from_config
from wizard.planner import steptime_plan as stp
from wizard.planner.shapes import resolve_shape
from wizard.verlspec.hardware import GPU_PEAK, memory_of_gpu_type, peak_of_gpu_type

BASE = ("data.train_files=/tmp/x.parquet data.val_files=/tmp/x.parquet "
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct algorithm.adv_estimator=grpo data.train_batch_size=256 "
        "actor_rollout_ref.rollout.n=8 data.max_response_length=1024 actor_rollout_ref.actor.ppo_mini_batch_size=64 "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 data.max_prompt_length=512 trainer.n_gpus_per_node=8 "
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.5").split()


def _work(**kw) -> st.Workload:
    s = resolve_shape("Qwen/Qwen2.5-7B-Instruct")
    base = dict(params=s.params, active_params=s.active_params, layers=s.layers, hidden=s.hidden,
                kv_bytes_per_token=s.kv_bytes_per_token(1), n_gpus=8, prompts=256, n=8, max_prompt=512,
                max_response=4096, response_mean=1000, gpu_type="H100", gpu_memory_gb=80, train_tokens=16384,
                logprob_tokens=32768)
    base.update(kw)
    return st.Workload(**base)


# -- hardware table -----------------------------------------------------------------------------------------------
def test_a_card_timed_at_the_rate_its_vendor_measured_under_dense_load():
    """AMD's datasheet peak (1307 TFLOPS for the MI300X) is at a 2,100 MHz boost clock; under dense bf16 GEMMs the
    clock falls to 1,207 MHz and AMD measured 708 TFLOPS. The FLOP terms divide by 708 there, by the datasheet peak
    where no such rate is published (every NVIDIA part here)."""
    mi = GPU_PEAK["MI300X"]
    assert (mi.bf16_tflops, mi.sustained_tflops, mi.compute_tflops) == (1307, 708, 708)
    assert GPU_PEAK["MI325X"].compute_tflops == 843
    assert all(p.compute_tflops == p.bf16_tflops for k, p in GPU_PEAK.items() if not k.startswith("MI3"))
    flops = 1e15
    assert st._pass_seconds(flops, mi, 1.0, float("inf")) == pytest.approx(flops / 708e12)
    # a whole MI300X update: with the datasheet peak it would be about 1.85 × faster in its FLOP terms
    w = _work(gpu_type="MI300X", gpu_memory_gb=192)
    sustained = st.predict(w).phases["update actor"]
    GPU_PEAK["MI300X"] = replace(mi, sustained_tflops=None)
    try:
        datasheet = st.predict(w).phases["update actor"]
    finally:
        GPU_PEAK["MI300X"] = mi
    assert sustained > 1.3 * datasheet
    assert st.predict(w).assumptions["bf16_tflops_sustained"] == 708


def test_gpu_peaks_have_sources_and_names_resolve():
    assert all(p.source and p.bf16_tflops > 0 and p.hbm_tb_s > 0 for p in GPU_PEAK.values())
    assert peak_of_gpu_type("NVIDIA H100 80GB HBM3")[0] == "H100"
    assert peak_of_gpu_type("NVIDIA H100 PCIe")[0] == "H100 PCIe"
    assert peak_of_gpu_type("NVIDIA H200")[0] == "H200"
    assert peak_of_gpu_type("some-accelerator") is None
    # names a report or nvidia-smi gives: Blackwell parts, the L20, AMD's MI355X, Ascend's 910B variants
    assert [peak_of_gpu_type(n)[0] for n in ("NVIDIA GB200", "NVIDIA B300 SXM6 AC", "NVIDIA L20", "AMD Instinct MI355X",
                                             "Ascend910B2", "910B3")] == ["GB200", "B300", "L20", "MI355X",
                                                                          "Ascend910B", "Ascend910B"]
    assert peak_of_gpu_type("NVIDIA GB200")[1].bf16_tflops > peak_of_gpu_type("NVIDIA B200")[1].bf16_tflops
    # spelled with a hyphen, an underscore or run together, as reports and scripts write them: the PCIe card, not
    # the SXM part's peaks (756 against 989 TFLOPS)
    assert [peak_of_gpu_type(n)[0] for n in ("H100-PCIe", "h100_pcie", "H100PCIe", "rtx4090", "RTX_A6000",
                                             "Ascend-910B")] == ["H100 PCIe", "H100 PCIe", "H100 PCIe", "RTX 4090",
                                                                 "A6000", "Ascend910B"]
    assert memory_of_gpu_type("H100-PCIe") == 80 and memory_of_gpu_type("rtx-4090") == 24
    # a node as reports write it: the count before or after the card is not its name (RTX's own x is kept)
    named = ("8xH100", "8 × A100-80G", "H100x8", "H20*8", "MI300Xx8", "2xRTX4090", "RTX 4090 x2", "16x H20")
    assert [peak_of_gpu_type(n)[0] for n in named] == ["H100", "A100", "H100", "H20", "MI300X", "RTX 4090", "RTX 4090",
                                                       "H20"]
    assert memory_of_gpu_type("H100x8") == 80 and memory_of_gpu_type("8xMI300X") == 192


def test_unknown_gpu_is_named_as_assumed():
    pred = st.predict(_work(gpu_type="mystery"))
    assert "assumed" in pred.assumptions["gpu"] and pred.assumptions["gpu"].startswith(st.DEFAULT_PEAK_GPU)
    assert "assumed" not in st.predict(_work()).assumptions["gpu"]


# -- first principles ---------------------------------------------------------------------------------------------
def test_longer_responses_take_longer_in_every_phase_that_reads_them():
    short, long_ = st.predict(_work(response_mean=500)), st.predict(_work(response_mean=2000))
    for phase in ("rollout", "old log-prob", "update actor"):
        assert long_.phases[phase] > short.phases[phase], phase


def test_more_gpus_shorten_the_step_but_the_tail_stays():
    small, big = st.predict(_work(n_gpus=8)), st.predict(_work(n_gpus=64))
    assert big.step_s < small.step_s
    # the drain ends with the step's longest response whatever the GPU count: a floor that more replicas do not
    # divide (8 × the replicas, the drain shrinks far less than 8 ×)
    assert big.detail["longest response"] == small.detail["longest response"]
    assert big.detail["decode tail"] > small.detail["decode tail"] / 3


def test_h20_is_slower_than_h100_but_far_less_than_its_flops_say():
    h100, h20 = st.predict(_work()), st.predict(_work(gpu_type="H20", gpu_memory_gb=96))
    ratio = h20.step_s / h100.step_s
    assert 1.0 < ratio < GPU_PEAK["H100"].bf16_tflops / GPU_PEAK["H20"].bf16_tflops


def test_small_fixed_micro_batches_are_slower_than_token_budgets():
    # the planted fault: 1 sequence per micro-batch instead of a 16K-token budget
    packed = st.predict(_work())
    tiny = st.predict(_work(dynamic_bsz=False, train_micro=1, logprob_micro=1))
    assert tiny.phases["update actor"] > 1.3 * packed.phases["update actor"]
    assert tiny.phases["old log-prob"] > 1.5 * packed.phases["old log-prob"]


def test_static_micro_batches_without_remove_padding_count_padded_slots():
    """Without remove-padding every sequence fills max_prompt + max_response (512 + 4096 = 4608) slots, in the
    pass's tokens and in each micro-batch alike: 2,048 sequences over 8 GPUs are 256 per GPU, 4 per micro-batch,
    so 64 micro-batches whatever the mean response (a 10-token mean, with the default 128-token prompt, used to
    cut the padded pass's 256 × 4608 tokens into micro-batches of 4 × 138: 2,137 of them)."""
    for mean in (10, 1000):
        pred = st.predict(_work(dynamic_bsz=False, train_micro=4, logprob_micro=4, remove_padding=False,
                                response_mean=mean))
        assert pred.assumptions["logprob_micro_batches_per_rank"] == 2048 // 8 // 4
        assert pred.assumptions["train_micro_batches_per_rank"] == 2048 // 8 // 4
        assert pred.assumptions["logprob_micro_batch_tokens"] == 4 * 4608


def test_reference_and_critic_add_their_passes():
    plain = st.predict(_work())
    both = st.predict(_work(has_ref=True, has_critic=True))
    assert {"ref log-prob", "values", "update critic"} <= set(both.phases) and both.step_s > plain.step_s
    assert "ref log-prob" not in plain.phases


def test_default_response_length_is_named_and_a_given_one_used():
    default = st.predict(_work(response_mean=None))
    assert "not given" in default.assumptions["response_length_mean_basis"]
    assert default.assumptions["response_length_mean"] == round(min(st.RESPONSE_SQRT * 4096 ** 0.5, 2048))
    assert st.predict(_work(response_mean=777)).assumptions["response_length_mean"] == 777


def test_run_gpu_hours_are_steps_times_step_times_gpus():
    pred = st.predict(_work())
    doc = as_json(pred, 100, 8, "test")
    assert doc["run_gpu_hours"] == pytest.approx(pred.step_s * 100 * 8 / 3600, abs=0.1)
    assert set(doc["phases"]) == {"rollout", "weight sync", "log-prob", "update"}
    assert doc["step_s"] == pytest.approx(sum(doc["phases"].values()), abs=0.5)


# -- check ----------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_check_json_has_the_time_contract_and_takes_the_response_length():
    r = run_cli(["check", "--json", "--gpu-type", "H100", "--", *BASE])
    doc = json.loads(r.stdout)
    t = doc["time"]
    assert isinstance(t["step_s"], float) and isinstance(t["run_gpu_hours"], float)
    assert set(t["phases"]) >= {"rollout", "weight sync", "log-prob", "update"}
    assert "not given" in t["assumptions"]["response_length_mean_basis"]
    vi895 = [f for f in doc["findings"] if f["id"] == "VI895"]
    assert vi895 and "--response-length-mean" in vi895[0]["hint"]
    given = json.loads(run_cli(["check", "--json", "--gpu-type", "H100", "--response-length-mean", "900", "--",
                                *BASE]).stdout)["time"]
    assert given["assumptions"]["response_length_mean"] == 900 and given["step_s"] > t["step_s"]


@pytest.mark.slow
def test_check_json_says_why_it_has_no_time():
    """A model check cannot size gives no `time`; --json says why, where a sized one has no such key."""
    unknown = [o for o in BASE if not o.startswith("actor_rollout_ref.model.path=")] + [
        "actor_rollout_ref.model.path=some-org/private-model"]
    doc = json.loads(run_cli(["check", "--json", "--gpu-type", "H100", "--", *unknown]).stdout)
    assert "time" not in doc and "model's size is unknown" in doc["time_not_predicted"]
    assert "time_not_predicted" not in json.loads(run_cli(["check", "--json", "--gpu-type", "H100", "--", *BASE]).stdout)


@pytest.mark.slow
def test_check_json_does_not_time_a_rollout_whose_engine_holds_no_sequence():
    """Qwen2.5-72B at rollout TP 1: 145 GB of bf16 weights in half of an 80 GB GPU leave no KV cache; the decode
    model would run one token at a time, so check says why there is no time instead of a meaningless one."""
    big = [o for o in BASE if not o.startswith("actor_rollout_ref.model.path=")] + [
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-72B-Instruct",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]
    doc = json.loads(run_cli(["check", "--json", "--gpu-type", "H100", "--", *big]).stdout)
    assert "time" not in doc
    assert "holds no whole sequence of 1536 tokens" in doc["time_not_predicted"]
    assert "rollout TP 1" in doc["time_not_predicted"]
    # the text report says it too, in one line; a timed config has the VI895 finding instead
    text = run_cli(["check", "--gpu-type", "H100", "--", *big]).stdout
    assert "  step time not predicted: the rollout engine's memory" in text
    assert "step time not predicted" not in run_cli(["check", "--gpu-type", "H100", "--", *BASE]).stdout
    w = _work(gpu_memory_gb=80, gmu=0.5)
    assert st.rollout_unfit(w) is None
    # the boundary: a KV cache one token short of a whole sequence is refused, one that holds it is timed
    seq = w.max_prompt + w.max_response
    assert st.rollout_unfit(replace(w, kv_tokens=seq - 1)) and st.rollout_unfit(replace(w, kv_tokens=seq)) is None


def test_check_refuses_a_bad_response_length_in_one_line():
    r = run_cli(["check", "--response-length-mean", "-5", "--", *BASE])
    assert r.returncode != 0 and "--response-length-mean" in r.stderr and "positive" in r.stderr


def _ids(extra, **kw):
    r = check(None, BASE + extra, gpu_type="H100", **kw)
    return {f.problem.rule: f.problem for f in r.findings}


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_vi896_small_logprob_micro_batch_that_memory_could_grow():
    found = _ids(["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1"])
    assert "VI896" in found and "log_prob_micro_batch_size_per_gpu=4" in found["VI896"].hint
    assert "VI896" not in _ids(["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32"])


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_vi834_update_budget_that_memory_could_grow():
    """The real case's class (verl#7847: verl's example budget of 3,000 tokens on 183 GB B200s): a dynamic update
    budget memory allows to grow 4×, whose growth the model predicts saves ≥ 5 % of the step: a warning naming the
    4× budget, replacing the static note. Controls: a budget 4× larger, and the same small budget on a card where 4×
    does not fit."""
    seven = ["actor_rollout_ref.model.path=Qwen/Qwen3-8B", "actor_rollout_ref.actor.use_dynamic_bsz=true",
             "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true", "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=8192",
             "data.max_prompt_length=1024", "data.max_response_length=1024"]
    small = _b200(seven + ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu=3000"])
    hit = small.get("VI834")
    assert hit is not None and hit.severity == "warning" and "ppo_max_token_len_per_gpu=12000" in hit.hint, small.get("VI834")
    assert "VI834" not in _b200(seven + ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu=12000"])
    tight = _ids(seven + ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu=3000"], gpu_memory_gb=24)
    assert "VI834" not in tight or tight["VI834"].severity == "info"


def _b200(extra):
    r = check(None, BASE + extra, gpu_type="B200", gpu_memory_gb=183)
    return {f.problem.rule: f.problem for f in r.findings}


@pytest.mark.slow
def test_vi898_padded_training_passes():
    """use_remove_padding=false: the passes compute max_prompt + max_response tokens per sequence (1536 here, about
    467 of them real with the default mean response): flagged, with the step packed sequences would take. Controls:
    the flag on; and sequences that fill their slots (a 1000-token mean response of 1024, 64-token prompts), where
    packing saves less than a fifth of the step. A 7B model: with the 0.5B one the passes are bound by their fixed
    per-micro-batch costs (8 sequences a micro-batch either way), and padding costs less than a fifth (not
    flagged: the third control)."""
    seven = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct"]
    off = ["actor_rollout_ref.model.use_remove_padding=false"]
    found = _ids(seven + off)
    assert "VI898" in found and "use_remove_padding=true" in found["VI898"].hint
    assert "1536 tokens" in found["VI898"].message and found["VI898"].severity == "info"
    assert "VI898" not in _ids(seven + ["actor_rollout_ref.model.use_remove_padding=true"])
    assert "VI898" not in _ids(seven + off + ["data.max_prompt_length=64"], response_length_mean=1000)
    assert "VI898" not in _ids(off)
    assert "megatron-core" not in found["VI898"].hint  # a dense model packs on either engine
    # a Gated DeltaNet model under Megatron: packing needs megatron-core 0.18 (Megatron-LM PR #2644), and the hint says so
    gdn = _ids(["model_engine=megatron", "actor_rollout_ref.model.path=Qwen/Qwen3.5-9B",
                "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2", *off])
    assert "VI898" in gdn and "megatron-core 0.18" in gdn["VI898"].hint, sorted(gdn)


@pytest.mark.slow
def test_vi897_replicas_without_sequences_and_a_tp_larger_than_needed():
    idle = _ids(["data.train_batch_size=8", "actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
                 "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", "trainer.nnodes=4",
                 "actor_rollout_ref.rollout.tensor_model_parallel_size=2"])
    assert idle["VI897"].severity == "warning" and "generate nothing" in idle["VI897"].message
    wide = _ids(["actor_rollout_ref.rollout.tensor_model_parallel_size=4"])
    assert "VI897" in wide and "tensor_model_parallel_size=2" in wide["VI897"].hint
    assert "VI897" not in _ids(["actor_rollout_ref.rollout.tensor_model_parallel_size=1"])


# -- plan, PLAN.md and the ranked layout ---------------------------------------------------------------------------
@pytest.mark.parametrize("profile", [p for p in profile_names() if p != "cpu-smoke"])
def test_every_gpu_profile_has_time_in_plan_md(profile, tmp_path):
    text = wizard.render(wizard.plan(wizard.load_profile(profile), base_dir=str(tmp_path)))["PLAN.md"]
    section = text.split("## Time and cost", 1)[1].split("\n## ", 1)[0]
    assert "Predicted step" in section and "GPU-hours" in section and "rollout" in section and "update actor" in section


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_a_cpu_plan_says_why_it_has_no_time(tmp_path):
    """The CPU smoke profile has no GPU peaks to time: PLAN.md, `plan` and `plan --json` say so instead of leaving
    the section out silently; a GPU profile carries no such line."""
    text = wizard.render(wizard.plan(wizard.load_profile("cpu-smoke"), base_dir=str(tmp_path)))["PLAN.md"]
    section = text.split("## Time and cost", 1)[1].split("\n## ", 1)[0]
    assert "Not predicted for a CPU run" in section and "Predicted step" not in section
    doc = json.loads(run_cli(["plan", "--profile", "cpu-smoke", "--json"]).stdout)
    assert doc["time"] is None and doc["time_not_predicted"].startswith("not predicted for a CPU run")
    assert "not predicted for a CPU run" in run_cli(["plan", "--profile", "cpu-smoke"]).stdout
    assert "time_not_predicted" not in json.loads(run_cli(["plan", "--profile", "single-gpu", "--json"]).stdout)


def test_plan_json_has_the_time_contract():
    r = run_cli(["plan", "--profile", "single-node-8gpu", "--json"])
    t = json.loads(r.stdout)["time"]
    assert set(t["phases"]) == {"rollout", "weight sync", "log-prob", "update"}
    assert t["run_gpu_hours"] > 0 and t["assumptions"]["gpu"].startswith("H100")


def test_planner_picks_the_largest_logprob_micro_batch_that_fits():
    # fixed micro-batches asked for: with the answer open, token budgets now win on this PP 8 layout (more
    # micro-batches fill the pipeline)
    plan = wizard.plan(wizard.load_profile("megatron-64gpu").model_copy(update={"dynamic_batch": False}))
    ranked = plan.facts["logprob_micro_ranking"]
    assert plan.value("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu") == ranked.chosen
    assert ranked.runner_up is not None and ranked.runner_up < ranked.chosen and ranked.seconds_lost > 0
    assert plan.memory.plan_verdict == "fits"
    doc = stp.of_plan(plan)
    assert doc["layout_choice"]["runner_up"] == ranked.runner_up and doc["layout_choice"]["chosen"] == ranked.chosen


def test_ranking_stops_where_memory_stops():
    """The planted fault: a card where no larger log-prob micro-batch fits keeps the planner's default."""
    from wizard.planner.layouts import logprob_micro
    from wizard.planner.memory import Layout, estimate

    shape = resolve_shape("Qwen/Qwen2.5-72B-Instruct")
    seq = 4096
    roomy = Layout(gpu_gb=141.0, n_gpus=64, gpus_per_node=8, seq_len=seq, rollout_tp=8, gmu=0.5, dp=8, megatron=True,
                   megatron_tp=8, train_tokens=2 * seq, logprob_tokens=4 * seq, static_micro=True, use_ref=True,
                   offload_params=True, offload_optimizer=True, gpu_type="H200")
    ranked = logprob_micro(shape, roomy, 1024, 4, seq, 2)
    assert ranked.chosen > 4
    assert estimate(shape, replace(roomy, logprob_tokens=ranked.chosen * seq)).plan_verdict == "fits"
    bigger = [d for d in range(ranked.chosen + 1, 1025) if 1024 % d == 0]
    assert all(estimate(shape, replace(roomy, logprob_tokens=d * seq)).plan_verdict != "fits" for d in bigger[:2])
    tight = replace(roomy, gmu=0.9)  # the engine's reservation leaves the log-prob pass no room to grow
    if estimate(shape, replace(tight, logprob_tokens=8 * seq)).plan_verdict != "fits":
        assert logprob_micro(shape, tight, 1024, 4, seq, 2).chosen == 4


# -- the response_length_mean answer ---------------------------------------------------------------------------------
def test_plan_uses_the_response_length_mean_answer_and_names_its_basis(tmp_path):
    a = wizard.load_profile("single-node-8gpu")
    default = stp.of_plan(wizard.plan(a, base_dir=str(tmp_path)))
    assert "default" in default["assumptions"]["response_length_mean_basis"]
    given = stp.of_plan(wizard.plan(a.model_copy(update={"response_length_mean": 900.0}), base_dir=str(tmp_path)))
    assert given["assumptions"]["response_length_mean"] == 900
    assert "response_length_mean answer" in given["assumptions"]["response_length_mean_basis"]
    assert given["step_s"] > default["step_s"]  # 900 tokens > the default's 339 for max_response_length 1024
    md = wizard.render(wizard.plan(a.model_copy(update={"response_length_mean": 900.0}), base_dir=str(tmp_path)))
    assert "mean response 900 tokens (given: the response_length_mean answer)" in md["PLAN.md"]


def test_a_response_length_mean_over_the_cap_is_refused_naming_both_keys():
    from wizard.intent.answers import answer_problems

    problems = answer_problems({"max_response_length": 1024, "response_length_mean": 2000})
    assert problems and set(problems[0].keys) >= {"response_length_mean", "max_response_length"}
    assert not answer_problems({"max_response_length": 1024, "response_length_mean": 700})
    assert answer_problems({"response_length_mean": -3})


# -- ranking the layouts that fit by predicted step time -------------------------------------------------------------
def test_rank_layouts_takes_the_fastest_unless_within_the_noise():
    from types import SimpleNamespace

    from wizard.planner.layouts import SWITCH_SHARE, rank_layouts

    def dec(tp, off=False):
        return SimpleNamespace(layout=SimpleNamespace(rollout_tp=tp, rollout_dp=1, megatron=False, offload_params=off))

    def step(seconds):
        return lambda d, dyn: st.StepTime({"rollout": seconds[(d.layout.rollout_tp, dyn)]}, {})

    times = {(2, True): 100.0, (1, True): 60.0, (4, True): 130.0}
    chosen, dyn, r = rank_layouts(dec(2), True, [(dec(1), True), (dec(4), True)], step(times))
    assert chosen.layout.rollout_tp == 1 and dyn and r.runner_up.startswith("rollout TP 2") and r.seconds_lost == 40
    assert [k for k, _ in r.table] == sorted((k for k, _ in r.table), key=lambda k: dict(r.table)[k])
    # the planted fault: an alternative only a hair faster than the memory planner's choice does not replace it
    close = {(2, True): 100.0, (1, True): 100.0 * (1 - SWITCH_SHARE / 2)}
    chosen, _, r = rank_layouts(dec(2), True, [(dec(1), True)], step(close))
    assert chosen.layout.rollout_tp == 2 and r.runner_up.startswith("rollout TP 1")


def test_plan_names_the_fastest_layout_and_its_runner_up(tmp_path):
    plan = wizard.plan(wizard.load_profile("single-node-8gpu"), base_dir=str(tmp_path))
    r = plan.facts["layout_ranking"]
    assert r.runner_up and r.seconds_lost > 0 and len(r.table) >= 3  # other TPs, offload on, fixed micro-batches
    assert r.chosen == r.table[0][0]
    assert plan.value("actor_rollout_ref.rollout.tensor_model_parallel_size") == int(r.chosen.split()[2].rstrip(","))
    md = wizard.render(plan)["PLAN.md"]
    assert f"runner-up {r.runner_up}, about {round(r.seconds_lost, 1):g} s slower per step" in md
    # a rollout TP the user set is kept: the ranking only orders what the answers leave open
    given = wizard.plan(wizard.load_profile("single-node-8gpu").model_copy(update={"rollout_tp": 4}), base_dir=str(tmp_path))
    assert given.value("actor_rollout_ref.rollout.tensor_model_parallel_size") == 4
    assert all(k.startswith("rollout TP 4") for k, _ in given.facts["layout_ranking"].table)


def test_a_rollout_tp_chosen_by_time_says_so(tmp_path):
    """Where the time ranking picks a larger rollout TP than the smallest split that fits, the setting's reason
    says it was the fastest and names the smaller one; where it keeps the memory planner's, the reason is the
    smallest split's."""
    for name in ("dapo-32gpu", "single-node-8gpu"):
        plan = wizard.plan(wizard.load_profile(name), base_dir=str(tmp_path))
        why = plan.settings["actor_rollout_ref.rollout.tensor_model_parallel_size"].reason
        smaller = plan.facts.get("rollout_tp_by_time")
        tp = plan.value("actor_rollout_ref.rollout.tensor_model_parallel_size")
        if smaller:
            assert smaller < tp and f"{tp}: the fastest by predicted step time" in why
            assert f"{smaller}, the smallest split that fits, is slower" in why
        else:
            assert why.startswith(f"{tp}: smallest split inside a node")


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_reads_the_engine_knobs_that_set_decode_time():
    """enforce_eager (no CUDA graphs: kernels launched from Python every layer) and a small max_num_seqs (fewer
    sequences decoding at once) make the same run's rollout slower; check reads both from the config."""
    def rollout(extra):
        return check(None, BASE + extra, gpu_type="H100").time["phases"]["rollout"]

    base = rollout([])
    assert rollout(["actor_rollout_ref.rollout.enforce_eager=True"]) > 1.2 * base
    assert rollout(["actor_rollout_ref.rollout.max_num_seqs=16"]) > 1.2 * base


# -- MoE token dispatch and Megatron's micro-batch budget ------------------------------------------------------------
def _moe(**kw) -> st.Workload:
    s = resolve_shape("Qwen/Qwen3-30B-A3B")
    base = dict(params=s.params, active_params=s.active_params, layers=s.layers, hidden=s.hidden,
                kv_bytes_per_token=s.kv_bytes_per_token(2), n_gpus=16, prompts=512, n=16, max_prompt=2048,
                max_response=8192, response_mean=1000, gpu_type="H100", gpu_memory_gb=80, backend="megatron",
                moe=True, moe_layers=s.moe_layers, top_k=s.active_experts, routed_params=s.routed_expert_params,
                expert_parallel=8, expert_tp=1,
                model_parallel=4, train_tokens=10240, logprob_tokens=30720, recompute=False)
    base.update(kw)
    return st.Workload(**base)


def _dispatch(w: st.Workload) -> tuple[float, float]:
    d = st.predict(w).detail
    return d["old log-prob moe dispatch s"], d["update actor moe dispatch s"]


def test_moe_dispatch_across_nodes_is_slower_than_inside_one():
    """EP8 inside an 8-GPU node sends its all-to-all over NVLink; the same EP8 on 4-GPU nodes sends half of it
    over the NICs (9 × slower per byte): both passes take longer, the dispatch several times so."""
    inside, across = _moe(gpus_per_node=8), _moe(gpus_per_node=4)
    fi, ui = _dispatch(inside)
    fa, ua = _dispatch(across)
    assert fa > 2 * fi and ua > 2 * ui
    assert st.predict(across).phases["update actor"] > st.predict(inside).phases["update actor"]
    # ETP widens the EP group's span: EP8 × ETP2 on 8-GPU nodes crosses nodes too
    assert _dispatch(_moe(expert_tp=2))[1] > 2 * ui


def test_the_all_to_all_across_nodes_runs_at_the_nics_own_efficiency():
    """EP16 over two 8-GPU nodes: of the routed bytes that leave a GPU, 7/16 go to peers on its node over NVLink and
    8/16 to the other node's over its NIC, at once; each link has its own efficiency, written out here. With the
    NVLink share's efficiency on the NIC too (as before 2026-12), the dispatch comes out twice as slow as this,
    which the Qwen3-30B-A3B EP16/EP32 runs of the calibration tables measured it is not."""
    w = _moe(expert_parallel=16)
    _, pk, _ = st.peak("H100")
    tokens = 1e6
    routed = tokens * w.moe_layers * w.top_k * w.hidden * 2 * 1  # bf16 bytes, one direction, one forward
    assert w.moe_layers == 48 and w.top_k == 8 and w.hidden == 2048
    nvlink = 2 * routed * 7 / 16 / (450e9 * st.A2A_ETA)
    nic = 2 * routed * 8 / 16 / (50e9 * st.A2A_NIC_ETA)
    permute = 4 * routed / (3.35e12 * 0.7)
    assert nic > nvlink  # the NIC sets the pace
    got = st.moe_dispatch_seconds(w, "H100", pk, tokens, 1)
    assert got == pytest.approx(nic + permute, rel=1e-9)
    one_efficiency = 2 * routed * 8 / 16 / (50e9 * st.A2A_ETA) + permute
    assert one_efficiency > 2 * got
    # inside one node the NIC efficiency plays no part
    inside = st.moe_dispatch_seconds(_moe(), "H100", pk, tokens, 1)
    assert inside == pytest.approx(2 * routed * 7 / 8 / (450e9 * st.A2A_ETA) + permute, rel=1e-9)


def test_moe_dispatch_vanishes_for_a_dense_model_and_shrinks_without_ep():
    dense = _work(backend="megatron", expert_parallel=8, top_k=8, moe_layers=0)
    assert _dispatch(dense) == (0.0, 0.0)
    assert st.moe_layers(resolve_shape("Qwen/Qwen2.5-7B-Instruct")) == 0
    assert st.moe_layers(resolve_shape("Qwen/Qwen3-30B-A3B")) == 48
    # EP 1: no all-to-all, only the permute copies in HBM
    f1, u1 = _dispatch(_moe(expert_parallel=1))
    f8, u8 = _dispatch(_moe())
    assert 0 < f1 < f8 / 3 and 0 < u1 < u8 / 3


def test_moe_dispatch_counts_its_passes_and_tokens():
    """Forward + backward move the tokens twice, a recomputed forward once more; twice the top-k twice the bytes."""
    f, u = _dispatch(_moe())
    assert u == pytest.approx(2 * f)
    assert _dispatch(_moe(recompute=True))[1] == pytest.approx(3 * f)
    assert _dispatch(_moe(top_k=16))[0] == pytest.approx(2 * f)


def test_megatron_token_budget_scales_by_cp_not_tp():
    """verl's Megatron engine multiplies the per-GPU token budget by CP only (transformer_impl.py:836); FSDP by
    the Ulysses SP size (utils.py:111): TP ranks share one micro-batch's tokens."""
    tp4 = st.predict(_work(backend="megatron", model_parallel=4, context_parallel=1, n_gpus=32)).assumptions
    cp2 = st.predict(_work(backend="megatron", model_parallel=8, context_parallel=2, n_gpus=32)).assumptions
    sp4 = st.predict(_work(backend="fsdp", model_parallel=4, n_gpus=32)).assumptions
    assert tp4["train_micro_batch_tokens"] == 16384
    assert cp2["train_micro_batch_tokens"] == 2 * 16384
    assert sp4["train_micro_batch_tokens"] == 4 * 16384


def test_check_reads_expert_parallel_and_its_span():
    shape = resolve_shape("Qwen/Qwen3-30B-A3B")
    keys = {"actor_rollout_ref.actor.strategy": "megatron",
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size": 4,
            "actor_rollout_ref.actor.megatron.context_parallel_size": 2,
            "actor_rollout_ref.actor.megatron.expert_model_parallel_size": 8}
    w = workload_from_config(keys.get, shape, n_gpus=16, gpu_type="H100", gpu_memory_gb=80)
    assert (w.expert_parallel, w.expert_tp, w.context_parallel, w.moe_layers, w.top_k) == (8, 4, 2, 48, 8)
    keys["actor_rollout_ref.actor.megatron.expert_tensor_parallel_size"] = 1
    assert workload_from_config(keys.get, shape, n_gpus=16, gpu_type="H100", gpu_memory_gb=80).expert_tp == 1


def test_fsdp_gathers_every_parameter_per_micro_batch():
    """FSDP gathers all parameters (a MoE's every expert) per micro-batch: invisible under a dense model's compute,
    the longer part of a MoE's pass when it crosses nodes; Megatron has no such term."""
    def gather(w: st.Workload) -> tuple[float, float]:
        d = st.predict(w).detail
        return d["old log-prob fsdp gather s"], d["update actor fsdp gather s"]

    moe = _moe(backend="fsdp", n_gpus=64, model_parallel=4, expert_parallel=1, recompute=True, train_tokens=20480)
    f, u = gather(moe)
    assert u > 0 and gather(replace(moe, backend="megatron")) == (0.0, 0.0)
    # update moves 2 + 2 + 4 bytes a parameter, log-prob 2, per micro-batch
    d = st.predict(moe).detail
    assert u / f == pytest.approx(4 * d["update actor micro-batches"] / d["old log-prob micro-batches"], rel=0.02)
    # with small micro-batches a MoE's gathers (all 30B parameters, 3B active) outlast its small active compute
    small = replace(moe, model_parallel=1, train_tokens=4096)
    dense_like = replace(small, params=small.active_params)
    assert st.predict(small).phases["update actor"] > 1.3 * st.predict(dense_like).phases["update actor"]
    # NCCL's rings: inside a node NVLink (450 GB/s on H100); across nodes one ring per NIC, the node's GPUs together
    # at gpus per node × 50 GB/s: 4-GPU nodes 200 GB/s (2.25 × slower), 8-GPU nodes 400 GB/s (1.125 ×), not one
    # GPU's NIC alone (50 GB/s: 9 ×)
    one = gather(_work(n_gpus=8))
    assert gather(_work(n_gpus=8, gpus_per_node=4))[1] == pytest.approx(450 / 200 * one[1])
    sixteen = gather(_work(n_gpus=16))[1]
    params = _work().params
    assert sixteen == pytest.approx(st.predict(_work(n_gpus=16)).assumptions["train_micro_batches_per_rank"]
                                    * params * 8 * 15 / 16 / (400e9 * st.COLLECTIVE_ETA), rel=0.05)  # count rounded


def test_hybrid_sharding_gathers_in_its_group_and_all_reduces_across_replicas():
    """fsdp_size 8 on 32 H100s (four nodes, verl's fully async 7B scripts): the all-gathers and reduce-scatters stay in
    one node's NVLink (8 GPUs, 7/8 of every parameter's bytes at 450 GB/s), and each micro-batch's fp32 gradient
    shard (4 bytes × params / 8) is all-reduced over the four replicas across the NICs (2 × 3/4 of it at 50 GB/s).
    Written out here; verl builds that mesh in workers/engine/fsdp/utils.py:47-52."""
    w = _work(n_gpus=32, fsdp_size=8)
    micros, eta = 10.0, st.COLLECTIVE_ETA
    gather = micros * w.params * 8 * 7 / 8 / (450e9 * eta)
    reduce = micros * 2 * 3 / 4 * 4 * w.params / 8 / (50e9 * eta)
    assert st.fsdp_gather_seconds(w, "H100", micros, 8, reduce_bytes=4) == pytest.approx(gather + reduce)
    assert st.fsdp_gather_seconds(w, "H100", micros, 2) == pytest.approx(micros * w.params * 2 * 7 / 8 / (450e9 * eta))
    # fsdp_size -1, 0 or the GPU count itself: one group over all 32, through the NICs, no replicas
    whole = micros * w.params * 8 * 31 / 32 / (400e9 * eta)
    for size in (-1, 0, 32):
        assert st.fsdp_gather_seconds(replace(w, fsdp_size=size), "H100", micros, 8, reduce_bytes=4) == pytest.approx(whole)


def test_cards_without_nvlink_gather_over_pcie():
    """Eight RTX 4090s (or L40S, L20) have no NVLink: FSDP's rings cross PCIe 4.0 x16, 32 GB/s a direction, 14 ×
    slower than an H100's NVLink, and the 7B's update waits for its gathers (8 bytes a parameter per micro-batch)."""
    def update(gpu: str) -> tuple[float, float]:
        p = st.predict(_work(gpu_type=gpu, gpu_memory_gb=48))
        return p.detail["update actor fsdp gather s"], p.phases["update actor"]

    micros = st.predict(_work(gpu_type="L40S", gpu_memory_gb=48)).assumptions["train_micro_batches_per_rank"]
    gathers, total = update("L40S")
    assert gathers == pytest.approx(micros * _work().params * 8 * 7 / 8 / (32e9 * st.COLLECTIVE_ETA), rel=0.05)
    assert update("RTX 4090")[0] == update("L20")[0] == gathers
    assert gathers == pytest.approx(450 / 32 * update("H100")[0])
    assert total >= gathers  # the pass takes the longer of compute and gathers
    # a dense 7B's gathers hide under its compute: the phase is the compute alone
    w = _work(n_gpus=8)
    assert st.predict(w).phases["update actor"] == pytest.approx(
        st.predict(replace(w, backend="megatron")).phases["update actor"], rel=1e-6)


def test_moe_dispatch_follows_the_gpus_nvlink():
    """H800's NVLink is cut to 400 GB/s (200 a direction) from the H100's 900: the same EP8 in a node takes longer."""
    h100, h800 = _dispatch(_moe(gpu_type="H100")), _dispatch(_moe(gpu_type="H800"))
    assert h800[1] > 1.8 * h100[1]
    assert set(st.INTRA_NODE_GB_S) <= set(GPU_PEAK)


# -- offload traffic: what one GPU holds, by engine ----------------------------------------------------------------
def test_offload_copies_what_each_gpu_holds():
    """Megatron replicates its bf16 parameters over data parallel (utils/megatron_utils.py:713-720): with TP 4 on 32
    GPUs each GPU copies a quarter of the model, in and out, not 1/32 of it; FSDP shards fp32 over every GPU."""
    s = resolve_shape("Qwen/Qwen2.5-7B-Instruct")
    meg = _work(backend="megatron", n_gpus=32, model_parallel=4, offload_params=True)
    # 2 directions × 2 bf16 bytes × params / TP 4, at PCIE_GB_S
    assert st.offload_seconds(meg) == pytest.approx(2 * 2 * s.params / 4 / 1e9 / st.PCIE_GB_S)
    fsdp = _work(n_gpus=32, offload_params=True)
    assert st.offload_seconds(fsdp) == pytest.approx(2 * 4 * s.params / 32 / 1e9 / st.PCIE_GB_S)
    # the optimizer is sharded over every GPU in both: Megatron fp32 main params + 2 moments, FSDP 2 moments
    assert st.offload_seconds(meg, optimizer=True) == pytest.approx(2 * 12 * s.params / 32 / 1e9 / st.PCIE_GB_S)
    assert st.offload_seconds(fsdp, optimizer=True) == pytest.approx(2 * 8 * s.params / 32 / 1e9 / st.PCIE_GB_S)
    # the phases carry it: offload on adds exactly that to the weight sync
    off = st.predict(meg).phases["weight sync"] - st.predict(replace(meg, offload_params=False)).phases["weight sync"]
    assert off == pytest.approx(st.offload_seconds(meg))


def test_offload_splits_experts_over_expert_parallel():
    """A MoE's experts are split over EP × ETP × PP, its dense part over TP × PP: Qwen3-30B-A3B's 128 routed experts
    of 48 layers, (params − active) × 128 / (128 − 8) since a token uses 8 of them."""
    s = resolve_shape("Qwen/Qwen3-30B-A3B")
    w = _moe(offload_params=True)
    experts = (s.params - s.active_params) * s.experts / (s.experts - s.active_experts)
    assert w.routed_params == pytest.approx(experts)
    assert 0.9 * s.params < experts < s.params
    assert st.params_per_gpu(w) == pytest.approx((s.params - experts) / 4 + experts / 8)
    assert st.params_per_gpu(replace(w, expert_parallel=16, n_gpus=32)) < st.params_per_gpu(w)
    assert st.params_per_gpu(replace(w, routed_params=0.0)) == pytest.approx(s.params / 4)


def test_weight_sync_counts_the_checkpoint_tensors():
    """A sync hands the engine the checkpoint tensor by tensor (export_hf_weights, bucketed IPC): Qwen3-30B-A3B's
    18,867 tensors (128 experts × 3 projections × 48 layers and the rest) cost SYNC_TENSOR_S each beside its bytes,
    a dense model of the same size a few hundred."""
    s = resolve_shape("Qwen/Qwen3-30B-A3B")
    assert s.checkpoint_tensors() == 48 * (4 + 2 + 2 + 1 + 3 * 128) + 3  # q k v o, q/k norms, 2 norms, router
    moe = _moe(weight_tensors=s.checkpoint_tensors())
    dense = replace(moe, weight_tensors=12 * 48 + 3)
    gap = st.predict(moe).phases["weight sync"] - st.predict(dense).phases["weight sync"]
    assert gap == pytest.approx((s.checkpoint_tensors() - 12 * 48 - 3) * st.SYNC_TENSOR_S)
    # the whole phase: fixed + tensors + bf16 bytes at the backend's rate (no offload)
    assert st.predict(moe).phases["weight sync"] == pytest.approx(
        st.SYNC_FIXED_S["megatron"] + s.checkpoint_tensors() * st.SYNC_TENSOR_S
        + 2 * s.params / 1e9 / st.SYNC_GB_S["megatron"])
    # a config's workload carries the shape's count
    keys = {"actor_rollout_ref.actor.strategy": "megatron", "data.train_batch_size": 64}
    w = workload_from_config(keys.get, s, n_gpus=16, gpu_type="H100", gpu_memory_gb=80)
    assert w.weight_tensors == s.checkpoint_tensors()
    assert st.sync_tensors(replace(w, weight_tensors=0)) == 12 * s.layers + 3


# -- decode: CUDA graphs or eager, vLLM V0 or V1, the tail to the cap ----------------------------------------------
def test_tp_all_reduces_cost_what_their_mode_launches():
    """Under CUDA graphs (verl 0.9.1's default) vLLM replays its TP all-reduces inside the graph:
    DECODE_TP_GRAPH_LAYER_S a layer; in eager mode each is launched from Python: DECODE_TP_LAYER_S. Each mode reads
    its own constant only."""
    graph, eager = _work(rollout_tp=4), _work(rollout_tp=4, enforce_eager=True)

    def rollout(w, **consts):
        saved = {k: getattr(st, k) for k in consts}
        try:
            for k, v in consts.items():
                setattr(st, k, v)
            return st.predict(w).phases["rollout"]
        finally:
            for k, v in saved.items():
                setattr(st, k, v)

    assert rollout(graph, DECODE_TP_LAYER_S=1.0) == pytest.approx(rollout(graph))
    assert rollout(graph, DECODE_TP_GRAPH_LAYER_S=1e-3) > rollout(graph)
    assert rollout(eager, DECODE_TP_GRAPH_LAYER_S=1.0) == pytest.approx(rollout(eager))
    assert rollout(eager, DECODE_TP_LAYER_S=1e-3) > rollout(eager)
    # the graph's all-reduces are cheaper than launched ones: TP 4 costs less over TP 1 with graphs
    assert rollout(graph) - rollout(_work()) < rollout(eager) - rollout(_work(enforce_eager=True))
    # vLLM's V0 engine launches eager kernels from a heavier runner (EAGER_V0_LAYER_S), V1 lighter (EAGER_LAYER_S)
    v0 = replace(eager, vllm_v0=True)
    assert rollout(v0) > rollout(eager)
    assert rollout(v0, EAGER_LAYER_S=1.0) == pytest.approx(rollout(v0))
    assert rollout(replace(graph, vllm_v0=True)) == pytest.approx(rollout(graph))  # no eager launches, no V0 cost


def test_the_tail_runs_to_the_response_cap():
    """Some of a step's thousands of samples are cut at max_response_length: the drain ends there however short
    the mean response, so a higher cap lengthens the rollout of the same mean."""
    short_mean = st.predict(_work(response_mean=200, max_response=8192))
    assert short_mean.detail["longest response"] == 8192
    assert st.predict(_work(response_mean=200, max_response=16384)).phases["rollout"] > short_mean.phases["rollout"]


def test_a_moe_known_by_its_name_computes_its_active_parameters():
    """A MoE the catalogue does not know ("Qwen3-Next-80B-A3B"): its training passes cost the FLOPs of its 3B active
    parameters, not of its 80B. The planted fault, the same total read as a dense model, costs over 5 × more per
    update (27 × the FLOPs, 80 / 3; the FSDP gathers of all 80B parameters and the fixed costs both pay)."""
    moe, dense = resolve_shape("Qwen/Qwen3-Next-80B-A3B-Instruct"), resolve_shape("Qwen/Other-80B")

    def update(s) -> float:
        w = _work(params=s.params, active_params=s.active_params, layers=s.layers, hidden=s.hidden, n_gpus=64,
                  moe=bool(s.experts), moe_layers=s.moe_layers, top_k=s.active_experts,
                  routed_params=s.routed_expert_params)
        return st.predict(w).phases["update actor"]

    assert moe.experts and not dense.experts and abs(moe.params / dense.params - 1) < 0.02
    assert update(dense) > 5 * update(moe)


def test_transformers_4_runs_a_moes_experts_one_by_one_in_fsdp():
    """FSDP trains transformers' model; before v5 a MoE layer loops over its 128 experts (each waits for the GPU), a
    cost per micro-batch that does not shrink with its tokens: 48 MoE layers × 128 experts × EXPERT_LOOP_S per pass,
    1 pass a log-prob micro-batch, 3 an update micro-batch with recompute. Megatron, a dense model and transformers 5's
    grouped experts pay none of it."""
    fsdp = dict(backend="fsdp", model_parallel=1, expert_parallel=1, experts=128, recompute=True)
    grouped, looped = st.predict(_moe(**fsdp)), st.predict(_moe(**fsdp, expert_loop=True))
    a = looped.assumptions
    per_pass = 48 * 128 * st.EXPERT_LOOP_S
    assert looped.phases["old log-prob"] - grouped.phases["old log-prob"] == \
        pytest.approx(a["logprob_micro_batches_per_rank"] * per_pass, rel=0.02)
    assert looped.phases["update actor"] - grouped.phases["update actor"] == \
        pytest.approx(a["train_micro_batches_per_rank"] * 3 * per_pass, rel=0.02)
    megatron = dict(experts=128, expert_loop=True)
    assert st.predict(_moe(**megatron)).phases == st.predict(_moe(experts=128)).phases
    dense = _work(backend="fsdp", expert_loop=True)
    assert st.predict(dense).phases == st.predict(_work(backend="fsdp")).phases
    # verl 0.9 plans and checks: transformers>=5.5.3 (verl's setup.py), grouped experts
    keys = resolve_shape("Qwen/Qwen3-30B-A3B")
    w = workload_from_config({}.get, keys, n_gpus=16, gpu_type="H100", gpu_memory_gb=80)
    assert w.experts == 128 and not w.expert_loop


def test_rollout_tp_all_reduces_move_their_bytes_over_the_gpus_link(monkeypatch):
    """Each layer's two all-reduces carry every running sequence's bf16 hidden state: over NVLink a few µs, over PCIe
    (32 GB/s) a cost that grows with the batch: for a 72B model (hidden 8192, 80 layers) at TP 8, 4 × 7/8 × 8192 × 2
    bytes × 80 layers ÷ 32 GB/s = 143 µs a sequence, twice the engine's host time per sequence. The same H100
    workload with its link cut to PCIe's rate: TP 8 decodes slower, TP 4 of a 7B model (host-bound) barely, a
    rollout without TP not at all."""
    def rollout(model: str, tp: int) -> float:
        s = resolve_shape(model)
        w = _work(params=s.params, active_params=s.active_params, layers=s.layers, hidden=s.hidden, rollout_tp=tp,
                  kv_bytes_per_token=s.kv_bytes_per_token(tp), gpu_memory_gb=141, gpu_type="H100")
        return st.predict(w).phases["rollout"]

    cases = [("Qwen/Qwen2.5-72B-Instruct", 8), ("Qwen/Qwen2.5-7B-Instruct", 4), ("Qwen/Qwen2.5-7B-Instruct", 1)]
    nvlink = [rollout(m, tp) for m, tp in cases]
    monkeypatch.setitem(st.INTRA_NODE_GB_S, "H100", 32.0)
    pcie = [rollout(m, tp) for m, tp in cases]
    assert pcie[0] > 1.3 * nvlink[0]
    assert nvlink[1] < pcie[1] < 1.1 * nvlink[1] and pcie[2] == nvlink[2]
