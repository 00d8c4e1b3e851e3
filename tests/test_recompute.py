"""The planner turns on Megatron full activation recompute when the update fits only with it
(wizard.planner.layout_search, wizard.planner.recompute), and verl's own code accepts what it renders.

The proof's numbers are written out here, not read from the planner: Qwen2.5-1.5B's shape from its Hugging Face
config.json (hidden_size 1536, num_hidden_layers 28, intermediate_size 8960, vocab_size 151936), the bytes per layer
and token Megatron keeps (34·hidden with verl's default selective recompute of the core attention, 2·hidden, the
layer's bf16 input, with recompute_granularity=full: Korthikanti et al. 2022, table 2), the logits an update without
entropy holds (bf16 + the cross entropy's fp32 softmax: 6 B per vocabulary entry), the working set of the layer
being computed ((10·hidden + 4·intermediate) bf16 values) and the allocator's reserve (+25 %).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import wizard
from wizard.check.lint import check
from wizard.intent.answers import make_answers
from wizard.verlspec.hardware import capacity_gib

MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
HIDDEN, LAYERS, INTER, VOCAB = 1536, 28, 8960, 151936
GIB = 2 ** 30
OTC = "actor_rollout_ref.actor.megatron.override_transformer_config"
KEYS = {f"{OTC}.recompute_granularity": "full", f"{OTC}.recompute_method": "uniform",
        f"{OTC}.recompute_num_layers": 1}
# one H100: 1 node × 1 GPU, Megatron, GRPO (a reference model), 1024-token prompts
ANSWERS = dict(cluster="local", nnodes=1, gpus_per_node=1, gpu_memory_gb=80, gpu_type="H100", algorithm="grpo",
               model=MODEL, train_backend="megatron", rollout_engine="vllm", dataset="gsm8k", prompts_per_step=8,
               samples_per_prompt=4, updates_per_step=1, max_prompt_length=1024)
LONG, SHORT = 27648, 2048  # max_response_length: the update fits only with recompute / fits without it


def _per_token(recompute: bool) -> int:
    """Bytes one training token holds on one GPU (TP 1, PP 1), written out."""
    stored = LAYERS * HIDDEN * (2 if recompute else 34)
    return stored + 6 * VOCAB + (10 * HIDDEN + 4 * INTER) * 2


def test_the_arithmetic_the_proof_rests_on():
    """One full-length sequence (1024 + 27648 = 28672 tokens) of the update on an 80 GB H100 (79.6 GiB reported):
    the training state is 18 B per parameter (bf16 weights, fp32 gradient buffer, fp32 master + Adam m, v) plus the
    reference's bf16 weights, 2 B: 20 B × 1.54e9 = 28.8 GiB. Without recompute a full-length sequence needs
    2,476,288 B × 1.25 per token = 82.7 GiB more, over the card by itself; even at the mean fill verl-init assumes
    (half the tokens) 70 GiB, whose +20 % band is over the card. With recompute 1,100,032 B × 1.25 per token =
    36.7 GiB: 65.5 GiB in all, under the card even for full-length sequences."""
    from wizard.planner.memory import Layout, train_bytes_per_token
    from wizard.planner.shapes import resolve_shape

    assert _per_token(False) == 2_476_288 and _per_token(True) == 1_100_032
    shape = resolve_shape(MODEL)
    assert (shape.hidden, shape.layers, shape.intermediate, shape.vocab) == (HIDDEN, LAYERS, INTER, VOCAB)
    for recompute in (False, True):  # the memory model counts the same bytes
        lay = Layout(gpu_gb=80, n_gpus=1, gpus_per_node=1, seq_len=28672, rollout_tp=1, gmu=0.0, dp=1, megatron=True,
                     recompute=recompute, update_entropy=False)
        assert train_bytes_per_token(shape, lay) == _per_token(recompute)
    cap = capacity_gib(80, "H100")
    state = 20 * shape.params / GIB
    seq = 1024 + LONG
    full_without = state + seq * _per_token(False) * 1.25 / GIB
    mean_without = state + seq / 2 * _per_token(False) * 1.25 / GIB
    full_with = state + seq * _per_token(True) * 1.25 / GIB
    mean_with = state + seq / 2 * _per_token(True) * 1.25 / GIB
    assert full_without > cap + 30 and mean_without * 1.2 > cap
    assert full_with < cap and mean_with * 1.2 < cap


def _plan(tmp_path: Path, response: int, **changes) -> tuple[wizard.Plan, Path]:
    answers = {**ANSWERS, "max_response_length": response, **changes}
    plan = wizard.plan(make_answers(answers), base_dir=str(tmp_path))
    return plan, wizard.write_bundle(wizard.render(plan), tmp_path / f"bundle-{response}")


def _values(plan: wizard.Plan) -> dict:
    return {k: it.value for k, it in plan.settings.items()}


def test_an_update_that_fits_only_with_recompute_plans_it(tmp_path):
    plan, bundle = _plan(tmp_path, LONG)
    values = _values(plan)
    assert KEYS.items() <= values.items()
    assert "critic.megatron.override_transformer_config.recompute_granularity" not in values  # GRPO: no critic
    assert "actor_rollout_ref.ref.megatron.override_transformer_config.recompute_granularity" not in values
    note = plan.facts["megatron_recompute"]
    assert note["verdict_without"] != "fits" and note["saved_gib"] > 15 and note["update_gib"] < note["capacity_gib"]
    assert plan.memory.verdict == "fits"
    assert not [f for f in plan.findings if f.severity in ("error", "warning")]
    text = (bundle / "PLAN.md").read_text(encoding="utf-8")
    assert "Activation recompute: on" in text and "recompute_granularity=full" in text
    assert "GiB of activations saved" in text and "one more forward pass" in text
    # the rendered YAML holds the three keys where verl reads them (engine/megatron.yaml override_transformer_config)
    doc = yaml.safe_load((bundle / "verl_config.yaml").read_text(encoding="utf-8"))
    otc = doc["actor_rollout_ref"]["actor"]["megatron"]["override_transformer_config"]
    assert (otc["recompute_granularity"], otc["recompute_method"], otc["recompute_num_layers"]) == ("full", "uniform", 1)
    # the step-time model reads the chosen value from the settings, as plan --json's `time` object does
    assert _workload(values).recompute is True
    # check agrees: no VI860 on the bundle; with the three keys taken out, VI860 finds the update phase's band over
    # the card (a full-length batch: 110 GiB) and hints the three keys
    assert "VI860" not in check(str(bundle)).ids()
    cfg = bundle / "verl_config.yaml"
    for k in ("recompute_granularity", "recompute_method", "recompute_num_layers"):
        otc[k] = None
    cfg.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    found = [f.problem.as_dict() for f in check(str(bundle)).findings if f.problem.as_dict()["id"] == "VI860"]
    assert found and "update phase" in found[0]["message"]
    assert all(f"{k.rpartition('.')[2]}={v}" in found[0]["hint"] for k, v in KEYS.items())


def _workload(values: dict):
    """The step-time model's Workload of the plan's settings over verl's Megatron defaults (as steptime_plan.of_plan)."""
    from wizard.planner.shapes import resolve_shape
    from wizard.planner.steptime_config import workload_from_config
    from wizard.planner.steptime_plan import _flat
    from wizard.verlspec.keys import load_snapshot

    defaults = _flat(load_snapshot()["engines"]["megatron"])
    return workload_from_config(lambda k: values[k] if k in values else defaults.get(k), resolve_shape(MODEL),
                                n_gpus=1, gpu_type="H100", gpu_memory_gb=80)


def test_an_update_that_fits_without_recompute_does_not_get_it(tmp_path):
    plan, bundle = _plan(tmp_path, SHORT)
    values = _values(plan)
    assert not [k for k in values if "recompute" in k]
    assert "megatron_recompute" not in plan.facts
    assert "Activation recompute" not in (bundle / "PLAN.md").read_text(encoding="utf-8")
    assert _workload(values).recompute is False
    assert "VI860" not in check(str(bundle)).ids()


def test_recompute_competes_by_predicted_step_time():
    """Qwen3-30B-A3B on 8 × H20: recompute at Megatron TP 2 fits, so does TP 4 without it; the planner times both
    (layouts.rank_layouts) and keeps the faster, TP 4 without recompute; the recompute layout is in the table."""
    plan = wizard.plan(wizard.load_profile("qwen3-30b-a3b-moe-8gpu"))
    table = dict(plan.facts["layout_ranking"].table)
    with_rc = {k: v for k, v in table.items() if "full recompute" in k}
    without = {k: v for k, v in table.items() if "full recompute" not in k}
    assert with_rc and without
    assert "full recompute" not in plan.facts["layout_ranking"].chosen
    assert table[plan.facts["layout_ranking"].chosen] <= min(with_rc.values())
    assert not [k for k in _values(plan) if "recompute" in k]


def test_the_search_tries_recompute_before_offload():
    """layout_search.choose: for a Megatron base, the same grid and offload with recompute right after the layout
    without it; never for FSDP (its engine checkpoints every layer already)."""
    from wizard.planner.layout_search import recompute_options
    from wizard.planner.memory import Layout

    base = Layout(gpu_gb=80, n_gpus=1, gpus_per_node=1, seq_len=4096, rollout_tp=1, gmu=0.0, dp=1, megatron=True)
    assert recompute_options(base) == [False, True]
    assert recompute_options(base, allow=False) == [False]
    assert recompute_options(Layout(gpu_gb=80, n_gpus=1, gpus_per_node=1, seq_len=4096, rollout_tp=1, gmu=0.0,
                                    dp=1)) == [False]


@pytest.mark.verl
@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_verl_accepts_the_recompute_bundle(tmp_path, tiny_model, algorithm):
    """verl's own composition, validation and dataclasses take the rendered keys; the reference inherits the actor's
    mapping (ref/megatron_ref.yaml:23 oc.select); PPO's Megatron critic gets its own."""
    from omegaconf import OmegaConf

    from verl.utils.config import omega_conf_to_dataclass
    from wizard.verify.harness import compose_bundle, verify_with_verl

    plan, bundle = _plan(tmp_path, LONG, algorithm=algorithm)
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, [c.line() for c in report.checks if not c.ok]
    cfg = compose_bundle(bundle)
    roles = [cfg.actor_rollout_ref.actor.megatron] + ([cfg.critic.megatron] if algorithm == "ppo" else [])
    for section in roles:
        engine = omega_conf_to_dataclass(section)
        assert engine.override_transformer_config["recompute_granularity"] == "full"
        assert engine.override_transformer_config["recompute_method"] == "uniform"
        assert engine.override_transformer_config["recompute_num_layers"] == 1
    assert OmegaConf.select(cfg, "actor_rollout_ref.ref.megatron.override_transformer_config.recompute_granularity") == "full"
    if algorithm == "grpo":
        assert OmegaConf.select(cfg, "critic.megatron.override_transformer_config.recompute_granularity") is None
    assert "actor and critic" in (bundle / "PLAN.md").read_text(encoding="utf-8") or algorithm == "grpo"
