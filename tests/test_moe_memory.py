"""Mixture-of-experts memory (issue 16 item 1): Megatron's routed experts sharded over EP × ETP × PP and their
optimizer states over the expert-data-parallel group, dense parts over TP × PP, Megatron's CPU optimizer, the
rollout engine's experts over its TP × DP, router logits, and the logits of an update without entropy.

Independent sources: verl's Qwen3-30B-A3B script for 8×H20 (tests/data/reference/moe-memory-cases.json, which keeps
its URL: "tested in NNODES=1~4 * 96G H20 GPU"; issue 16: it ran while the dense terms said 246 GB per GPU), and the
distributed optimizer's arithmetic written out per parallel group below.
"""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from wizard.check.lint import check
from wizard.planner import memory
from wizard.planner.memory import GIB, Layout, estimate, megatron_params_per_gpu, rollout_weight_bytes, train_bytes_per_token
from wizard.planner.shapes import from_catalogue

CASES = json.loads((ROOT / "tests" / "data" / "reference" / "moe-memory-cases.json").read_text(encoding="utf-8"))["cases"]
M01 = next(c for c in CASES if c["id"] == "M01")
QWEN_MOE = from_catalogue("Qwen/Qwen3-30B-A3B")


def _check(overrides: list[str], **hardware):
    hw = dict(nnodes=M01["nnodes"], gpus_per_node=M01["gpus_per_node"], gpu_memory_gb=float(M01["gpu_memory_gb"]),
              gpu_type=M01["gpu_type"])
    hw.update(hardware)
    return check(None, overrides, defaults="snapshot", env={"HOME": "/root"}, **hw)


def test_the_h20_run_with_ep8_is_judged_to_fit_or_be_tight():
    """Issue 16: Qwen3-30B-A3B with EP 8 on 8×H20 ran while the tool said 246 GB per GPU; now it is not refused."""
    report = _check(M01["overrides"])
    est = report.memory
    assert est is not None, [f.problem.line() for f in report.findings if f.problem.rule == "VI861"]
    assert est.verdict in ("fits", "tight"), est.verdict_line()
    assert est.peak_gib <= est.capacity_gib
    assert not [f for f in report.errors if f.problem.rule in ("VI860", "VI862")]
    # the actor's weights per GPU: dense parts whole (TP 1), each GPU 128 / 8 = 16 experts per layer
    experts = 48 * 128 * 3 * 2048 * 768
    assert QWEN_MOE.routed_expert_params == experts
    dense = QWEN_MOE.params - experts
    assert est.gib("update", "actor", "weights") == pytest.approx(2 * (dense + experts / 8) / GIB)
    # Megatron's CPU optimizer (optimizer_offload_fraction 1) keeps every Adam state on the host
    assert est.gib("update", "actor", "optimizer states") == 0
    assert est.host_gb_per_node * 1e9 >= 12 * QWEN_MOE.params


def test_without_megatrons_cpu_optimizer_the_same_run_does_not_fit():
    """The distributed optimizer alone holds 12 B × params / GPUs on each GPU during the update (42.7 GiB here):
    the script needs Megatron's CPU optimizer on a 96 GB card."""
    plain = [o for o in M01["overrides"] if "override_optimizer_config" not in o]
    est = _check(plain).memory
    assert est.gib("update", "actor", "optimizer states") == pytest.approx(12 * QWEN_MOE.params / 8 / GIB)
    assert est.verdict == "does not fit" and est.peak_phase == "update"
    half = _check(plain + ["+actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_cpu_offload=True",
                           "+actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_offload_fraction=0.5"]).memory
    assert half.gib("update", "actor", "optimizer states") == pytest.approx(6 * QWEN_MOE.params / 8 / GIB)


@pytest.mark.parametrize("tp,pp,ep,etp", [(1, 1, 8, 1), (2, 1, 8, 1), (2, 1, 4, 2), (4, 1, 2, None), (1, 1, 1, None)])
def test_distributed_optimizer_states_come_to_12_bytes_per_parameter_over_the_world(tp, pp, ep, etp):
    """Dense states over world / (TP·PP), expert states over world / (EP·ETP·PP): 12 B × P / world either way."""
    L = Layout(gpu_gb=96, n_gpus=8, gpus_per_node=8, seq_len=4096, rollout_tp=4, gmu=0.6, dp=8 // (tp * pp),
               megatron=True, megatron_tp=tp, megatron_pp=pp, megatron_ep=ep, megatron_etp=etp)
    per_gpu, optim_params = megatron_params_per_gpu(QWEN_MOE, L)
    experts = QWEN_MOE.routed_expert_params
    assert per_gpu == pytest.approx((QWEN_MOE.params - experts) / tp + experts / (ep * (etp or tp)))
    assert optim_params == pytest.approx(QWEN_MOE.params / 8)
    est = estimate(QWEN_MOE, L)
    assert est.gib("update", "actor", "optimizer states") == pytest.approx(12 * QWEN_MOE.params / 8 / GIB)
    assert est.gib("update", "actor", "gradients") == pytest.approx(4 * per_gpu / GIB)


def test_pipeline_stages_hold_their_layers_and_one_vocabulary_table():
    """Qwen3-235B-A22B at TP 4, PP 8, EP 4 on 64 GPUs (verl's own layout): the busiest stage holds 1/8 of the layers
    and the embedding (or the output layer) over TP; experts over EP × ETP(=TP) × PP."""
    big = from_catalogue("Qwen/Qwen3-235B-A22B")
    L = Layout(gpu_gb=80, n_gpus=64, gpus_per_node=8, seq_len=12288, rollout_tp=8, gmu=0.6, dp=2, megatron=True,
               megatron_tp=4, megatron_pp=8, megatron_ep=4)
    per_gpu, optim_params = megatron_params_per_gpu(big, L)
    experts, table = big.routed_expert_params, big.vocab * big.hidden
    body = big.params - experts - 2 * table - big.hidden
    assert per_gpu == pytest.approx((body + big.hidden) / 32 + table / 4 + experts / 128, rel=1e-3)
    # dense states over 64 / 32 = 2 ranks, expert states over 64 / 128 → 1 (each expert shard has no replica)
    assert optim_params == pytest.approx(((body + big.hidden) / 32 + table / 4) / 2 + experts / 128, rel=1e-3)


def test_the_rollout_engine_splits_experts_over_tp_times_dp():
    """vLLM's fused MoE splits experts over TP × DP (verl rollout.yaml expert_parallel_size; EP = TP × DP)."""
    L = Layout(gpu_gb=80, n_gpus=8, gpus_per_node=8, seq_len=4096, rollout_tp=2, gmu=0.6, dp=8)
    experts = QWEN_MOE.routed_expert_params
    assert rollout_weight_bytes(QWEN_MOE, L) == pytest.approx(2 * QWEN_MOE.params / 2)
    dp4 = Layout(**{**L.__dict__, "rollout_dp": 4})
    assert rollout_weight_bytes(QWEN_MOE, dp4) == pytest.approx(2 * (QWEN_MOE.params - experts) / 2 + 2 * experts / 8)
    assert estimate(QWEN_MOE, dp4).kv_seqs > estimate(QWEN_MOE, L).kv_seqs  # the freed weights hold KV cache


def test_router_logits_and_active_experts_in_the_activations():
    L = Layout(gpu_gb=80, n_gpus=8, gpus_per_node=8, seq_len=4096, rollout_tp=1, gmu=0.5, dp=8, megatron=True,
               megatron_ep=8, megatron_etp=1)
    per_token = train_bytes_per_token(QWEN_MOE, L)
    router = 48 * 128 * memory.ROUTER_LOGIT_BYTES
    dense = from_catalogue("Qwen/Qwen3-8B")
    assert memory._router_bytes_per_token(QWEN_MOE, L) == router
    assert memory._router_bytes_per_token(dense, L) == 0
    # the working set is the active experts' (8 × 768), not all 128 experts'
    working = (10 * 2048 + 4 * 8 * 768) * 2
    assert per_token == pytest.approx(48 * 34 * 2048 + router + working + 151936 * memory.LOGIT_BYTES_TRAIN)


def test_an_update_without_entropy_holds_fewer_logits():
    """verl 0.9.1 computes the entropy in the update only with entropy_coeff != 0 (ray_trainer.py:1336): Megatron's
    cross entropy then keeps the bf16 logits and one fp32 softmax (6 B), FSDP drops the entropy's softmax (10 B)."""
    for megatron, no_entropy in ((True, memory.MEGATRON_LOGIT_BYTES_NO_ENTROPY),
                                 (False, memory.LOGIT_BYTES_TRAIN - memory.ENTROPY_SOFTMAX_BYTES)):
        L = Layout(gpu_gb=80, n_gpus=8, gpus_per_node=8, seq_len=4096, rollout_tp=1, gmu=0.5, dp=8, megatron=megatron)
        off = Layout(**{**L.__dict__, "update_entropy": False})
        delta = train_bytes_per_token(QWEN_MOE, L) - train_bytes_per_token(QWEN_MOE, off)
        assert delta == pytest.approx(151936 * (memory.LOGIT_BYTES_TRAIN - no_entropy))
    base = [o for o in M01["overrides"] if "entropy_coeff" not in o]
    with_entropy = _check(base + ["actor_rollout_ref.actor.entropy_coeff=0.001"]).memory
    without = _check(base + ["actor_rollout_ref.actor.entropy_coeff=0"]).memory
    assert with_entropy.gib("update", "actor", "activations + logits") > without.gib("update", "actor", "activations + logits")


def test_precision_aware_optimizer_dtypes_shrink_gradients_and_moments():
    bf16 = M01["overrides"] + ["actor_rollout_ref.actor.optim.use_precision_aware_optimizer=True",
                               "actor_rollout_ref.actor.optim.main_grads_dtype=bf16",
                               "actor_rollout_ref.actor.optim.exp_avg_dtype=bf16",
                               "actor_rollout_ref.actor.optim.exp_avg_sq_dtype=bf16"]
    plain = [o for o in bf16 if "override_optimizer_config" not in o]
    est, ref = _check(plain).memory, _check([o for o in M01["overrides"] if "override_optimizer_config" not in o]).memory
    assert est.gib("update", "actor", "gradients") == pytest.approx(ref.gib("update", "actor", "gradients") / 2)
    assert est.gib("update", "actor", "optimizer states") == pytest.approx(ref.gib("update", "actor", "optimizer states") * 8 / 12)


def test_mla_models_size_their_kv_cache_by_the_latent():
    v3 = from_catalogue("deepseek-ai/DeepSeek-V3")
    L = Layout(gpu_gb=80, n_gpus=96, gpus_per_node=8, seq_len=10240, rollout_tp=32, gmu=0.6, dp=96, megatron=True,
               megatron_tp=8, megatron_pp=12, megatron_ep=8, megatron_etp=1, offload_params=True, offload_optimizer=True)
    est = estimate(v3, L)
    engine = 0.6 * est.capacity_gib * GIB
    room = engine - rollout_weight_bytes(v3, L) - memory.ENGINE_OVERHEAD_GIB * GIB
    assert est.kv_seqs == pytest.approx(room / (61 * 576 * 2 * 10240))


def test_a_moe_of_unknown_shape_is_not_estimated_from_its_name():
    """A MoE name without a catalogue entry or local config.json ("...-A3B") would be sized as a dense model: info."""
    report = check(None, ["model_engine=megatron", "actor_rollout_ref.model.path=Acme/Foo-30B-A3B",
                          "actor_rollout_ref.actor.megatron.expert_model_parallel_size=8"],
                   defaults="snapshot", env={}, nnodes=1, gpus_per_node=8, gpu_memory_gb=80.0)
    (info,) = [f.problem for f in report.findings if f.problem.rule == "VI861" and "MoE" in f.problem.message]
    assert info.severity == "info" and "exact shape" in info.message
    assert not [f for f in report.findings if f.problem.rule == "VI860"]


# -- verl's dense scripts that `check` refused at 80 GB (tests/data/reference/verl-main-scripts), decided by arithmetic --
SCRIPTS_INDEX = {e["id"]: e for e in json.loads((ROOT / "tests" / "data" / "reference" / "verl-main-scripts" / "index.json")
                                               .read_text(encoding="utf-8"))["scripts"]}


def _check_script(rid: str, gpu_gb: float, extra: tuple = ()):
    entry = SCRIPTS_INDEX[rid]
    args = dict(a.lstrip("+").split("=", 1) for a in entry["traced"]["args"] if "=" in a)
    return check(str(ROOT / "tests" / "data" / "reference" / "verl-main-scripts" / entry["file"]), list(extra),
                 env={"HOME": "$HOME"},
                 defaults="snapshot", nnodes=int(args.get("trainer.nnodes", 1)),
                 gpus_per_node=int(args.get("trainer.n_gpus_per_node", 8)), gpu_memory_gb=gpu_gb)


def test_a_colocated_reward_model_that_sleeps_takes_its_own_turn():
    """RW074 (verl's e2e test, 2 GPUs): policy and reward engines at 0.6 of the card each. The model was wrong: verl
    0.9.1's reward loop wakes the reward engine only to score (reward_model.rollout.free_cache_engine=True), so the
    engines take turns; 1.2 × the card held at once could never start."""
    report = _check_script("RW074", 80.0)
    assert not [f for f in report.errors if f.problem.rule == "VI860"], [f.problem.line() for f in report.errors]
    est = report.memory
    assert est.gib("rollout", "reward model", "engine reservation") == 0
    assert est.gib("rollout", "reward model", "asleep (its engine wakes for its own turn)") == pytest.approx(memory.ENGINE_ASLEEP_GIB)
    # both engines awake together (free_cache_engine=False on the reward model) is over the card
    awake = check(str(ROOT / "tests" / "data" / "reference" / "verl-main-scripts" / SCRIPTS_INDEX["RW074"]["file"]),
                  ["reward.reward_model.rollout.free_cache_engine=False"], env={"HOME": "$HOME"}, defaults="snapshot",
                  nnodes=1, gpus_per_node=2, gpu_memory_gb=80.0)
    assert awake.memory.verdict == "does not fit"


@pytest.mark.parametrize("rid,card", [("RW050", 141.0), ("RW069", 141.0)])
def test_dense_scripts_refused_at_80_gb_are_over_by_arithmetic(rid, card):
    """Real errors at 80 GB (neither script names its GPUs).
    - RW050 (Qwen3-8B PPO, Megatron TP 2 / PP 2, nothing offloaded, rollout 0.6): during the rollout the actor keeps
      bf16 weights 3.8 GiB + fp32 gradients 7.6 + optimizer 12 B × 8.2B / 8 = 11.5 (22.9 GiB), the critic its weights
      and optimizer (15.3 GiB), beside the engine's 0.6 × 79.6 = 47.8 GiB: 86 GiB before the CUDA context (the measured
      G10, a 7B at TP 2 with the same resident state, ran out of memory this way). At 141 GB its critic's update is
      over: verl sizes the critic's micro-batches by critic.ppo_infer_max_token_len_per_gpu (32768, the script's
      critic.ppo_max_token_len_per_gpu is not read: VI828), and without recompute the first of PP 2 stages keeps
      2 micro-batches × 18 layers × 34 × 4096 / TP 2 B = 2.5 MB per token, × 32768 tokens = 76.5 GiB of activations
      beside the actor's resident 22.9 GiB and the critic's own 15.3 + 3.8 GiB of gradients. The critic's own full
      recompute (2 × 4096 B a layer instead of 34 × 4096) fits it.
    - RW069 (Qwen2.5-72B FSDP on 32 GPUs, 24576-token micro-batches): fp32 weights, gradients and Adam 16 B × 72.7B / 32
      = 33.9 GiB, two gathered layers 4.6, the checkpointed inputs of 80 layers × 2 × 8192 B × 24576 tokens = 30 GiB
      and the bf16 logits 24576 × 152064 × 2 B = 7.0 GiB: 75.5 GiB before the layer's working set and the CUDA context;
      it fits a 141 GB card."""
    over = _check_script(rid, 80.0)
    (err,) = [f.problem for f in over.errors if f.problem.rule == "VI860"]
    assert "does not fit" in err.message
    big = _check_script(rid, card)
    if rid == "RW050":
        (err,) = [f.problem for f in big.errors if f.problem.rule == "VI860"]
        assert "update phase" in err.message and "critic: its update" in err.message
        assert "+critic.megatron.override_transformer_config.recompute_granularity=full" in err.hint
        assert "+actor_rollout_ref.actor.megatron" not in err.hint  # the actor's update fits as it is
        big = _check_script(rid, card, [w for w in err.hint.split() if w.startswith("+critic.")])
    assert not [f for f in big.errors if f.problem.rule in ("VI860", "VI862")], [f.problem.line() for f in big.errors]