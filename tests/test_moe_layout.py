"""The planner's Megatron layout for MoE models (issue 16 item 1): TP, PP, CP, EP, ETP and VPP, chosen or given.

Independent statement of what megatron-core asserts, written out here from its source (NVIDIA/Megatron-LM tag
core_v0.15.0, the same in core_v0.13.0 … core_v0.17.0; verl 0.9.1's [megatron] extra does not pin megatron-core):
- parallel_state.py:697   world_size % (TP·PP·CP) == 0                      (verl's validate_config too)
- parallel_state.py:703   VPP set → PP > 1
- parallel_state.py:743   ETP = TP when expert_tensor_parallel_size is None
- parallel_state.py:751   world_size % (ETP·EP·PP) == 0                      (CP is not in the expert grid)
- transformer_block.py:155 num_layers % PP == 0; :175 (num_layers / PP) % VPP == 0
- moe/moe_layer.py:64     num_moe_experts % EP == 0; transformer_config.py:808 EP > 1 needs experts
- transformer_config.py:743/758 num_attention_heads % TP == 0, num_query_groups % TP == 0
and verl's rollout: workers/config/rollout.py:294 EP > 1 → EP == TP × DP. verl-init adds its topology rule: a TP
group and an ETP·EP group (consecutive ranks) stay inside a node.
"""

from __future__ import annotations

import re
from itertools import product
from typing import Any

import pytest

from wizard.intent.answers import make_answers
from wizard.intent.errors import WizardError
from wizard.intent.profiles import load_profile
from wizard.planner.pipeline import plan
from wizard.planner.shapes import resolve_shape
from wizard.verlspec.arithmetic import MegatronGrid, megatron_grids

A = "actor_rollout_ref.actor.megatron."
REF = "actor_rollout_ref.ref.megatron."
KEYS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
        "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size")
MOE = dict(model="Qwen/Qwen3-30B-A3B", train_backend="megatron", nnodes=1, gpus_per_node=8, gpu_memory_gb=96,
           gpu_type="H20", max_prompt_length=1024, max_response_length=2048, prompts_per_step=128,
           samples_per_prompt=8, updates_per_step=4)


def uneven_ok(layers: int, pp: int, first: int, last: int) -> bool:
    """megatron-core with num_layers_in_first/last_pipeline_stage (transformer_block.py:106-133): both > 0, the
    layers left divide over the stages left (none left when PP = 2)."""
    left, rest = pp - 2, layers - first - last
    return first > 0 and last > 0 and (rest == 0 if left == 0 else rest >= left and rest % left == 0)


def megatron_accepts(world: int, gpn: int, tp: int, pp: int, cp: int, ep: int, etp: int | None, vpp: int | None,
                     layers: int, heads: int, kv_heads: int, experts: int, uneven: bool = False) -> bool:
    """megatron-core's asserts (module docstring), written out without wizard code. `uneven`: the layers may split
    with equal first and last stages when they do not divide over PP (no VPP)."""
    etp_ = tp if etp is None else etp
    if world % (tp * pp * cp) != 0:
        return False
    if vpp is not None and not pp > 1:
        return False
    if world % (etp_ * ep * pp) != 0:
        return False
    split = any(uneven_ok(layers, pp, f, f if pp > 2 else layers - f) for f in range(1, layers)) if pp > 1 else False
    if layers % pp != 0 and not (uneven and vpp is None and split):
        return False
    if vpp is not None and (layers // pp) % vpp != 0:
        return False
    if ep > 1 and (experts == 0 or experts % ep != 0):
        return False
    if heads % tp != 0 or kv_heads % tp != 0:
        return False
    # verl-init's topology: TP and the expert group ETP·EP inside one node
    return gpn % tp == 0 and gpn % (etp_ * ep) == 0


def _errors(data: dict[str, Any]) -> list:
    try:
        plan(make_answers(data), base_dir="/runs")
    except WizardError as exc:
        return exc.problems
    return []


def _plan(**changes: Any):
    return plan(make_answers({**MOE, **changes}), base_dir="/runs")


_SUGGESTION = re.compile(r"\b([a-z_]+)=(\d+(?: or \d+)*)")


def _offered(hint: str) -> list[tuple[str, int]]:
    return [(key, int(v)) for key, values in _SUGGESTION.findall(hint) for v in values.split(" or ")]


# -- the arithmetic ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model,world,gpn", [("Qwen/Qwen3-30B-A3B", 8, 8), ("Qwen/Qwen3-30B-A3B", 16, 8),
                                             ("Qwen/Qwen3-235B-A22B", 64, 8),
                                             ("mistralai/Mixtral-8x7B-Instruct-v0.1", 16, 8),
                                             ("Qwen/Qwen2.5-72B-Instruct", 64, 8)])
def test_candidates_are_exactly_what_megatron_accepts(model, world, gpn):
    """Over the planner's own value ranges (TP, CP powers of two with TP·CP in a node, ETP 1 for a MoE model and
    unset for a dense one, no VPP), the candidates are the layouts megatron-core accepts, no more and no fewer."""
    s = resolve_shape(model)
    grids = megatron_grids(world, gpn, layers=s.layers, heads=s.heads, kv_heads=s.kv_heads, experts=s.experts)
    got = {(g.tp, g.pp, g.cp, g.ep, g.etp) for g in grids}
    for g in grids:  # an uneven split only where the layers do not divide, and one megatron-core accepts
        assert (g.first is None) == (s.layers % g.pp == 0), g
        assert g.first is None or uneven_ok(s.layers, g.pp, g.first, g.last), g
    etp = 1 if s.experts else None
    pow2 = [t for t in (1, 2, 4, 8, 16) if t <= gpn]
    want = {(tp, pp, cp, ep, etp) for tp, cp, pp, ep in product(pow2, pow2, range(1, 33), range(1, (s.experts or 1) + 1))
            if tp * cp <= gpn and gpn % (tp * cp) == 0
            and megatron_accepts(world, gpn, tp, pp, cp, ep, etp, None, s.layers, s.heads, s.kv_heads, s.experts,
                                 uneven=True)}
    assert got == want, sorted(got ^ want)[:10]
    assert got


def test_candidates_order_least_model_parallelism_first():
    s = resolve_shape("Qwen/Qwen3-30B-A3B")
    grids = megatron_grids(8, 8, layers=s.layers, heads=s.heads, kv_heads=s.kv_heads, experts=s.experts)
    assert grids[0] == MegatronGrid(1, 1, 1, 1, 1)
    keys = [(g.cp, g.tp * g.pp * g.cp, g.pp, g.ep * (g.etp or g.tp)) for g in grids]
    assert keys == sorted(keys)
    # 4 KV heads: TP 8 is never a candidate (megatron-core's num_query_groups % TP), though 8 GPUs would allow it
    assert all(g.tp in (1, 2, 4) for g in grids)
    assert {g.ep for g in grids} == {1, 2, 4, 8}


def test_given_values_are_held_and_vpp_needs_pp():
    s = resolve_shape("Qwen/Qwen3-30B-A3B")
    counts = dict(layers=s.layers, heads=s.heads, kv_heads=s.kv_heads, experts=s.experts)
    assert all(g.vpp == 2 and g.pp > 1 and s.layers % (g.pp * 2) == 0 for g in megatron_grids(16, 8, vpp=2, **counts))
    assert megatron_grids(8, 8, ep=6, **counts) == []  # 128 % 6
    assert megatron_grids(8, 8, ep=8, etp=2, **counts) == []  # ETP·EP = 16 leaves a node of 8
    assert all(g.etp is None and g.ep == 1 for g in megatron_grids(8, 8, layers=28, heads=28, kv_heads=4, experts=0))


# -- the plans -----------------------------------------------------------------------------------------------


def test_moe_profile_layout_passes_megatron_and_verl_rollout_asserts():
    p = plan(load_profile("qwen3-30b-a3b-moe-8gpu"), base_dir="/runs")
    s = resolve_shape("Qwen/Qwen3-30B-A3B")
    tp, pp, vpp, cp, ep, etp = (p.value(A + k) for k in KEYS)
    assert megatron_accepts(8, 8, tp, pp, cp, ep, etp, vpp, s.layers, s.heads, s.kv_heads, s.experts)
    assert ep > 1 and etp == 1  # the experts are spread (the issue: "EP 8 on 8×H20 ran")
    assert [p.value(REF + k) for k in KEYS] == [tp, pp, vpp, cp, ep, etp]  # the reference shares the process groups
    rtp = p.value("actor_rollout_ref.rollout.tensor_model_parallel_size")
    rep = p.value("actor_rollout_ref.rollout.expert_parallel_size")
    assert rep == 1 or rep == rtp * 1  # verl's RolloutConfig: EP == TP × DP (DP = 1)
    assert p.memory.fits
    plan_md = "\n".join(p.settings[A + k].reason for k in KEYS)
    assert "inside one node" in plan_md and "128 experts" in plan_md


def test_given_layout_is_used():
    p = _plan(megatron_tp=2, megatron_ep=4, megatron_etp=1, megatron_pp=2, megatron_vpp=2)
    tp, pp, vpp, cp, ep, etp = (p.value(A + k) for k in KEYS)
    assert (tp, pp, vpp, ep, etp) == (2, 2, 2, 4, 1) and cp in (1, 2)  # CP: what the memory fit needs beside them
    assert p.settings[A + "expert_model_parallel_size"].source == "answer"


def test_verls_235b_pipeline_is_accepted_when_given():
    """verl's run_qwen3_235b_a22b_megatron.sh: PP 8 over 94 layers with 11 + 6 × 12 + 11 (its
    num_layers_in_first/last_pipeline_stage); given as megatron_pp=8 the plan writes the same split."""
    p = plan(make_answers({**MOE, "model": "Qwen/Qwen3-235B-A22B", "nnodes": 8, "cluster": "ray", "gpu_memory_gb": 141,
                           "gpu_type": "H200", "megatron_pp": 8}), base_dir="/runs")
    over = A + "override_transformer_config."
    assert p.value(A + "pipeline_model_parallel_size") == 8
    assert (p.value(over + "num_layers_in_first_pipeline_stage"), p.value(over + "num_layers_in_last_pipeline_stage")) == (11, 11)
    assert uneven_ok(94, 8, 11, 11) and (94 - 22) // 6 == 12


def test_dense_megatron_plan_keeps_ep_1_and_etp_unset():
    p = plan(load_profile("megatron-64gpu"), base_dir="/runs")
    assert p.value(A + "expert_model_parallel_size") == 1 and p.value(A + "expert_tensor_parallel_size") is None
    assert "actor_rollout_ref.rollout.expert_parallel_size" not in p.settings


# -- the rollout engine's data parallel (a MoE's experts over TP × DP) ---------------------------------------------

R = "actor_rollout_ref.rollout."


def test_rollout_dp_answer_is_held_with_ep_tp_times_dp():
    p = _plan(rollout_dp=2)
    tp = p.value(R + "tensor_model_parallel_size")
    assert p.value(R + "data_parallel_size") == 2 and p.value(R + "expert_parallel_size") == 2 * tp == 8
    assert p.facts["rollout_replicas"] == 8 // (2 * tp)
    # verl's layout asserts for DP > 1 (vllm_async_server.py:384-392, replica.py:108-116): TP divides a node and the
    # replica fills it
    assert 8 % tp == 0 and (tp * 2) % 8 == 0
    assert p.settings[R + "data_parallel_size"].source == "answer", p.settings[R + "data_parallel_size"]


@pytest.mark.slow
def test_235b_rollout_takes_the_least_data_parallel_that_fits():
    """Qwen3-235B-A22B on 8 × 8 H200: the bf16 weights do not fit a TP 8 engine beside the resident training
    state, so the plan spreads the experts over TP 8 × DP > 1 GPUs (verl's run_qwen3_235b_a22b_megatron.sh: TP 8 ×
    DP 8, EP 64) and fits; no smaller DP fits without offload, and DP 1 is only tight."""
    answers = load_profile("qwen3-235b-moe-64gpu")
    p = plan(answers, base_dir="/runs")
    tp, dp = p.value(R + "tensor_model_parallel_size"), p.value(R + "data_parallel_size")
    assert dp > 1 and p.value(R + "expert_parallel_size") == tp * dp and p.memory.verdict == "fits"
    assert f"TP {tp} × DP {dp}" in p.settings[R + "data_parallel_size"].reason
    single = plan(answers.model_copy(update={"rollout_dp": 1}), base_dir="/runs")
    assert single.memory.verdict != "fits" or single.facts["offload"]
    for smaller in range(2, dp):
        try:
            q = plan(answers.model_copy(update={"rollout_dp": smaller}), base_dir="/runs")
        except WizardError:
            continue
        assert q.facts["offload"] or q.memory.verdict != "fits", smaller


# -- refusals, each suggestion confirmed by a re-plan ---------------------------------------------------------------

REFUSED = [
    ("VI312", dict(megatron_tp=8)),  # 4 KV heads
    ("VI313", dict(megatron_ep=6)),  # 128 experts
    ("VI313", dict(model="Qwen/Qwen2.5-7B-Instruct", megatron_ep=2)),  # a dense model
    ("VI315", dict(megatron_ep=8, megatron_etp=2)),  # ETP·EP = 16 over a node of 8
    ("VI314", dict(nnodes=2, cluster="ray", megatron_ep=8, megatron_etp=1, megatron_pp=4)),  # 8·4 = 32 ∤ 16
    ("VI316", dict(megatron_pp=4, megatron_vpp=5)),  # 48 layers over 20 chunks
    ("VI316", dict(megatron_pp=64, nnodes=8, cluster="ray")),  # 48 layers over 64 stages: not even unevenly
    ("VI317", dict(megatron_vpp=2, megatron_pp=1)),
    ("VI310", dict(megatron_tp=4, megatron_cp=4)),  # 16 ∤ 8
    ("VI318", dict(rollout_tp=4, rollout_ep=2)),
    ("VI318", dict(model="Qwen/Qwen2.5-7B-Instruct", rollout_ep=2)),
    ("VI318", dict(rollout_tp=4, rollout_dp=2, rollout_ep=4)),  # EP = TP × DP = 8
    ("VI319", dict(rollout_dp=3)),  # TP × 3 never fills the node of 8
    ("VI319", dict(rollout_tp=8, rollout_dp=2)),  # a replica of 16 GPUs on 8
    ("VI319", dict(model="Qwen/Qwen2.5-7B-Instruct", rollout_dp=2)),  # a dense model
]


@pytest.mark.parametrize("rule,changes", REFUSED, ids=[f"{r}-{'-'.join(c)}" for r, c in REFUSED])
def test_refusal_and_its_suggestions(rule, changes):
    data = {**MOE, **changes}
    problems = _errors(data)
    mine = [p for p in problems if p.rule == rule]
    assert mine, [p.line() for p in problems]
    before = {p.rule for p in problems}
    for problem in mine:
        assert problem.hint, problem.line()
        for key, value in _offered(problem.hint):
            after = {p.rule for p in _errors({**data, key: value})}
            assert rule not in after and after <= before, (problem.line(), key, value, after)


def test_issue_examples_name_the_nearest_valid_values():
    (ep,) = [p for p in _errors({**MOE, "megatron_ep": 6}) if p.rule == "VI313"]
    assert "128 experts" in ep.message and "megatron_ep=4 or 8" in ep.hint, ep.line()
    # VPP alone: the planner picks a PP > 1 whose stages split into VPP chunks
    p = _plan(megatron_vpp=2)
    assert p.value(A + "pipeline_model_parallel_size") > 1 and p.value(A + "virtual_pipeline_model_parallel_size") == 2


def test_megatron_answers_need_the_megatron_backend_and_own_their_keys():
    problems = _errors({**MOE, "train_backend": "fsdp", "megatron_ep": 8})
    assert any(p.rule == "VI307" and "megatron_ep" in p.message for p in problems)
    for key in (A + "expert_model_parallel_size", REF + "context_parallel_size",
                "actor_rollout_ref.rollout.expert_parallel_size"):
        problems = _errors({**MOE, "overrides": [f"{key}=2"]})
        assert any(p.rule == "VI551" for p in problems), (key, [p.line() for p in problems])


# -- check: the same asserts on an existing config (VI813 reviewed, VI818, VI819) ------------------------------------


def _check(*overrides: str, nodes: int = 1):
    from wizard.check.lint import check

    base = ["model_engine=megatron", "actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B", f"trainer.nnodes={nodes}",
            "trainer.n_gpus_per_node=8"]
    return check(None, base + list(overrides), defaults="snapshot", env={}, gpu_memory_gb=96.0)


def test_check_refuses_tp_the_kv_heads_cannot_share():
    report = _check("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=8")
    (hit,) = [f.problem for f in report.errors if f.problem.rule == "VI818"]
    assert "4 KV heads" in hit.message and "4" in hit.hint
    assert not [f for f in _check("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4").findings
                if f.problem.rule == "VI818"]


def test_check_reads_rollout_data_parallel_as_verl_builds_it():
    """vLLM's DP engines (vllm_async_server.py:384-392): a replica of TP × DP < a node fails at start-up (VI810); one of
    TP 8 × DP 2 on two nodes keeps each TP group in a node, so no cross-node TP warning (VI811), and EP = TP × DP."""
    R_ = "actor_rollout_ref.rollout."
    small = _check(R_ + "tensor_model_parallel_size=2", R_ + "data_parallel_size=2", R_ + "expert_parallel_size=4")
    assert any(f.problem.rule == "VI810" and "fill" in f.problem.message for f in small.errors), \
        [f.problem.line() for f in small.findings]
    wide = _check(R_ + "tensor_model_parallel_size=8", R_ + "data_parallel_size=2", R_ + "expert_parallel_size=16",
                  nodes=2)
    assert not {"VI810", "VI811", "VI815"} & {f.problem.rule for f in wide.findings}, \
        [f.problem.line() for f in wide.findings]
    tp_wide = _check(R_ + "tensor_model_parallel_size=16", nodes=2)
    assert "VI811" in {f.problem.rule for f in tp_wide.findings}


def test_check_warns_when_an_expert_group_leaves_a_node():
    """16 GPUs, EP 8 × ETP 2: megatron-core accepts it (16 % 16), but each expert group spans two nodes."""
    report = _check("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
                    "actor_rollout_ref.actor.megatron.expert_model_parallel_size=8",
                    "actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=2", nodes=2)
    assert [f for f in report.findings if f.problem.rule == "VI819" and f.problem.severity == "warning"]
    assert not [f for f in report.errors if f.problem.rule == "VI813"]


def test_vi813_reads_etp_unset_as_tp_like_megatron_core():
    """megatron-core's parallel_state.py (core_v0.15.0:743): ETP None → TP. verl's main 235B script (TP 4, EP 4, PP 8,
    ETP unset on 64 GPUs) builds an expert grid of 4·4·8 = 128 ranks: megatron-core raises; the planner never renders
    ETP unset for a MoE model."""
    report = _check("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
                    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=8",
                    "actor_rollout_ref.actor.megatron.expert_model_parallel_size=4", nodes=8)
    assert any("4×4×8 = 128" in f.problem.message for f in report.errors if f.problem.rule == "VI813")
    assert megatron_accepts(64, 8, 4, 8, 1, 4, None, None, 96, 64, 4, 128) is False
    assert megatron_accepts(64, 8, 4, 8, 1, 4, 1, None, 96, 64, 4, 128) is True


def test_probed_topology_keeps_expert_groups_on_nvlink():
    """Two NVLink islands of 4 GPUs joined across NUMA. Qwen3-30B-A3B on 8 × H200 (141 GB): without a topology the
    least model parallelism that fits is TP 1 / PP 1 / EP 8, an expert group of all 8 GPUs whose token all-to-all
    crosses the NUMA split; with the probed topology the planner takes a layout whose expert groups and TP groups
    (consecutive ranks) stay inside one island of 4."""
    topology = [[0 if i == j else (1 if i // 4 == j // 4 else 4) for j in range(8)] for i in range(8)]
    answers = load_profile("qwen3-30b-a3b-moe-8gpu").model_copy(update={"gpu_memory_gb": 141, "gpu_type": "H200"})
    flat = plan(answers, base_dir="/runs")
    placed = plan(answers, base_dir="/runs", topology=topology)

    def groups(p) -> tuple[int, int]:
        f = p.facts
        return f["megatron_tp"], f["megatron_ep"] * (f["megatron_etp"] or f["megatron_tp"])

    def crosses(size: int) -> bool:  # a group of `size` consecutive ranks spans both islands
        return any(len({r // 4 for r in range(start, start + size)}) > 1 for start in range(0, 8, size))

    flat_tp, flat_expert = groups(flat)
    assert crosses(flat_expert) or crosses(flat_tp), (flat_tp, flat_expert)
    placed_tp, placed_expert = groups(placed)
    assert not crosses(placed_expert) and not crosses(placed_tp), (placed_tp, placed_expert)
    assert (placed.facts["megatron_tp"], placed.facts["megatron_pp"], placed.facts["megatron_ep"]) != \
           (flat.facts["megatron_tp"], flat.facts["megatron_pp"], flat.facts["megatron_ep"])


# -- the property over random answers: a rendered MoE layout is one megatron-core accepts, and check agrees ----------

MOE_MODELS = ["Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B", "mistralai/Mixtral-8x7B-Instruct-v0.1"]


def _sample(seed: int) -> dict[str, Any]:
    import random

    rng = random.Random(seed)
    nnodes = rng.choice([1, 1, 2, 4, 8])
    data: dict[str, Any] = dict(MOE, model=rng.choice(MOE_MODELS), nnodes=nnodes, cluster="ray" if nnodes > 1 else "local",
                                gpu_memory_gb=rng.choice([80, 96, 141]), gpu_type="H100")
    data["gpu_type"] = {80: "H100", 96: "H20", 141: "H200"}[data["gpu_memory_gb"]]
    for key, values in (("megatron_tp", [1, 2, 4, 8]), ("megatron_pp", [1, 2, 3, 4, 8]), ("megatron_ep", [1, 2, 4, 6, 8]),
                        ("megatron_etp", [1, 2]), ("megatron_cp", [1, 2]), ("megatron_vpp", [2, 3])):
        if rng.random() < 0.3:
            data[key] = rng.choice(values)
    return data


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(4))
def test_planned_moe_layouts_pass_megatron_and_check(chunk, tmp_path):
    from wizard.check.lint import check
    from wizard.renderer.render import render
    from wizard.renderer.writer import write_bundle

    planned = 0
    for seed in range(chunk, 40, 4):
        data = _sample(seed)
        try:
            p = plan(make_answers(data), base_dir="/runs")
        except WizardError as exc:
            assert {q.rule for q in exc.problems} and all(q.hint for q in exc.problems if q.rule in
                                                            {"VI312", "VI313", "VI314", "VI315", "VI316", "VI317"})
            continue
        planned += 1
        s = resolve_shape(data["model"])
        f = p.facts
        world = data["nnodes"] * 8
        uneven = f["megatron_first"] is not None
        assert megatron_accepts(world, 8, f["megatron_tp"], f["megatron_pp"], f["megatron_cp"], f["megatron_ep"],
                                f["megatron_etp"], f["megatron_vpp"], s.layers, s.heads, s.kv_heads, s.experts,
                                uneven=uneven), (seed, data, f)
        for key in ("megatron_tp", "megatron_pp", "megatron_ep", "megatron_etp", "megatron_cp", "megatron_vpp"):
            if key in data:
                assert f[key] == data[key], (seed, key)
        bundle = write_bundle(render(p), tmp_path / f"b{seed}")
        report = check(str(bundle / "verl_config.yaml"), defaults="snapshot")
        assert not report.errors, (seed, [x.problem.line() for x in report.errors])
    assert planned >= 1
