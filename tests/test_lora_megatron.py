"""LoRA on the Megatron backend (issue 16 item 2), as verl 0.9.1 runs it: Megatron-Bridge's PEFT built from
`actor_rollout_ref.model.lora.*` (workers/config/megatron_peft.py), never from the FSDP keys `model.lora_rank` /
`lora_alpha` (wizard/verlspec/lora.py has verl's lines). The plan writes the Megatron block, the memory model counts
a frozen bf16 base with adapters and their optimizer states only, `check` flags the LoRA keys an engine ignores, and
verl's own checks accept the bundle (tests/test_verl_acceptance.py, profile lora-megatron).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import wizard
from conftest import REFERENCE
from helpers_answers import answers
from wizard.check.lint import check
from wizard.intent.errors import WizardError
from wizard.planner import memory
from wizard.planner.shapes import resolve_shape
from wizard.verlspec import lora

PRE = "actor_rollout_ref"
SCRIPTS = REFERENCE / "verl-main-scripts"
INDEX = json.loads((SCRIPTS / "index.json").read_text(encoding="utf-8"))["scripts"]
LORA_SCRIPTS = [e for e in INDEX if "lora" in e["path"].lower() or any("lora" in a for a in e["traced"]["args"])]


def _settings(plan) -> dict:
    return {k: c.value for k, c in plan.settings.items()}


# --- the plan -------------------------------------------------------------------------------------------------


def test_megatron_lora_plan_writes_megatron_bridges_keys(tmp_path):
    plan = wizard.plan(wizard.load_profile("lora-megatron"), base_dir=str(tmp_path))
    s = _settings(plan)
    assert s[f"{PRE}.model.lora.rank"] == 64 and s[f"{PRE}.model.lora.alpha"] == 128
    assert s[f"{PRE}.model.lora.target_modules"] == ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]
    assert s[f"{PRE}.model.lora.merge"] is False
    assert s[f"{PRE}.actor.megatron.use_mbridge"] is True and s[f"{PRE}.actor.megatron.vanilla_mbridge"] is False
    assert s[f"{PRE}.rollout.load_format"] == "safetensors"
    # the FSDP engines' keys, which the Megatron engine never reads, are not written
    assert not {f"{PRE}.model.lora_rank", f"{PRE}.model.lora_alpha", f"{PRE}.model.target_modules"} & set(s)
    assert "megatron_peft.py" in plan.settings[f"{PRE}.model.lora.rank"].reason
    assert "megatron_peft.py:26" in plan.settings[f"{PRE}.actor.megatron.use_mbridge"].reason
    assert "Megatron-Bridge" in plan.roles["actor"] and "inside the actor" in plan.roles["ref"]
    # verl reads the block as the plan means it
    model = plan.nested()["actor_rollout_ref"]["model"]
    assert lora.engine_rank(model, megatron=True) == 64 and lora.fsdp_rank(model) == 0
    assert lora.ref_in_actor(model) and lora.vllm_rank(model) == 64


def test_fsdp_lora_plan_keeps_the_flat_keys(tmp_path):
    s = _settings(wizard.plan(answers(lora_rank=32), base_dir=str(tmp_path)))
    assert s[f"{PRE}.model.lora_rank"] == 32 and s[f"{PRE}.model.target_modules"] == "all-linear"
    assert not [k for k in s if k.startswith(f"{PRE}.model.lora.") or "mbridge" in k]


def test_lora_is_what_makes_a_72b_fit_one_megatron_node(tmp_path):
    """Full training of Qwen2.5-72B does not fit 8 × 80 GB with Megatron, and the refusal now offers LoRA (it did
    not while verl-init refused Megatron LoRA); with LoRA the plan fits without offload."""
    base = dict(model="Qwen/Qwen2.5-72B-Instruct", train_backend="megatron", gpu_type="H100")
    with pytest.raises(WizardError, match="VI602") as err:
        wizard.plan(answers(**base), base_dir=str(tmp_path))
    assert "LoRA rank 32 on these 8 GPU(s)" in str(err.value)
    plan = wizard.plan(answers(**base, lora_rank=32), base_dir=str(tmp_path))
    assert plan.memory.verdict != "does not fit" and plan.facts["lora"]["rank"] == 32


def test_vision_language_model_with_megatron_lora_is_refused(tmp_path):
    with pytest.raises(WizardError, match="VI406") as err:
        wizard.plan(answers(model="Qwen/Qwen2.5-VL-7B-Instruct", dataset="geo3k", max_prompt_length=2048,
                            train_backend="megatron", lora_rank=32), base_dir=str(tmp_path))
    assert "vlm_lora" in str(err.value) and "train_backend=fsdp" in str(err.value)


def test_vllm_rank_rules_apply_to_megatron_lora(tmp_path):
    with pytest.raises(WizardError, match="VI407"):
        wizard.plan(answers(train_backend="megatron", lora_rank=1024), base_dir=str(tmp_path))
    plan = wizard.plan(answers(train_backend="megatron", lora_rank=48), base_dir=str(tmp_path))
    assert any(p.rule == "VI408" for p in plan.findings)


# --- memory ---------------------------------------------------------------------------------------------------


def test_megatron_lora_parameter_count_by_hand():
    """Qwen2.5-7B (hidden 3584, 28 × 128 query and 4 × 128 KV dims, MLP 18944, 28 layers), rank 32, on Megatron's
    fused modules: QKV 3584 → 3584 + 2·512, proj 3584 → 3584, fc1 3584 → 2·18944, fc2 18944 → 3584."""
    s = resolve_shape("Qwen/Qwen2.5-7B-Instruct")
    per_layer = (3584 + 3584 + 1024) + (3584 + 3584) + (3584 + 2 * 18944) + (18944 + 3584)
    assert memory.megatron_lora_params(s, 32) == 32 * per_layer * 28 == 71_106_560
    moe = resolve_shape("Qwen/Qwen3-30B-A3B")  # adapters on all 128 experts' fc1/fc2 (768 wide), the router excluded
    attention = (2048 + 4096 + 2 * 512) + (4096 + 2048)
    assert memory.megatron_lora_params(moe, 8) == 8 * 48 * (attention + 128 * (2 * 2048 + 3 * 768))


def _layout(shape, **kw):
    base = dict(gpu_gb=80, n_gpus=8, gpus_per_node=8, seq_len=2048, rollout_tp=2, gmu=0.5, dp=4, megatron=True,
                megatron_tp=2, train_tokens=4096, logprob_tokens=8192, use_ref=True, ref_resident=True, gpu_type="H100")
    base.update(kw)
    return memory.Layout(**base)


def test_megatron_lora_memory_terms():
    """Frozen bf16 base sharded over TP × PP plus bf16 adapters; fp32 gradient buffers and the distributed optimizer's
    12 B per parameter for the adapters only; the reference is the actor with adapters off (no second copy)."""
    s = resolve_shape("Qwen/Qwen2.5-7B-Instruct")
    GIB = memory.GIB
    full = memory.estimate(s, _layout(s))
    lo = memory.estimate(s, _layout(s, lora_rank=32))
    adapters = memory.megatron_lora_params(s, 32) / 2  # TP=2, PP=1
    base = 2 * s.params / 2
    assert lo.gib("update", "actor", "weights") == pytest.approx((base + 2 * adapters) / GIB)
    assert lo.gib("update", "actor", "gradients") == pytest.approx(4 * adapters / GIB)
    assert lo.gib("update", "actor", "optimizer states") == pytest.approx(12 * memory.megatron_lora_params(s, 32) / 8 / GIB)
    assert full.gib("update", "actor", "gradients") == pytest.approx(4 * s.params / 2 / GIB)
    assert full.gib("rollout", "reference", "weights (not offloaded)") > 0
    assert lo.gib("rollout", "reference", "weights (not offloaded)") == 0
    assert lo.peak_gib < full.peak_gib - 10


def test_megatron_lora_weight_sync_loads_only_adapters_when_offloaded():
    """With adapters synced to an engine that loaded the real base (lora.merge false, load_format not dummy) verl
    exports the adapters only and leaves offloaded frozen weights in host memory (transformer_impl.py:1035-1044)."""
    s = resolve_shape("Qwen/Qwen2.5-7B-Instruct")
    lay = _layout(s, lora_rank=32, offload_params=True, offload_optimizer=True)
    adapter_sync = memory.estimate(s, replace(lay, lora_adapter_sync=True))
    full_sync = memory.estimate(s, lay)  # merge, or load_format=dummy: the whole model is exported
    sync = "weights loaded for the sync"
    assert adapter_sync.gib("weight sync", "actor", sync) == pytest.approx(
        2 * memory.megatron_lora_params(s, 32) / 2 / memory.GIB, rel=1e-3)
    assert full_sync.gib("weight sync", "actor", sync) > 7


@pytest.mark.slow
def test_check_counts_megatron_lora_memory_like_the_plan(tmp_path):
    """`check` reads model.lora.rank for a Megatron bundle (it read lora.rank only without merge, and FSDP's
    model.lora_rank first): the lora-megatron bundle's estimate is the plan's."""
    plan = wizard.plan(wizard.load_profile("lora-megatron"), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    report = check(str(bundle), env={})
    assert not report.errors and not [f for f in report.findings if f.problem.severity == "warning"], \
        [f.problem.line() for f in report.findings]
    merged = check(str(bundle), [f"{PRE}.model.lora.merge=True"], env={})
    assert merged.memory is not None and report.memory is not None
    assert report.memory.peak_gib == pytest.approx(plan.memory.peak_gib, rel=0.02)
    # merged adapters still train as LoRA: the update phase does not grow to full fine-tuning
    assert merged.memory.phase_gib("update") == pytest.approx(report.memory.phase_gib("update"), rel=0.01)


# --- check ----------------------------------------------------------------------------------------------------

MEGATRON = ["model_engine=megatron", f"{PRE}.model.path=Qwen/Qwen2.5-7B-Instruct", "trainer.nnodes=1",
            "trainer.n_gpus_per_node=8", "algorithm.adv_estimator=grpo", f"{PRE}.actor.use_kl_loss=True",
            f"{PRE}.actor.megatron.tensor_model_parallel_size=2", "data.train_batch_size=64",
            f"{PRE}.actor.ppo_mini_batch_size=16", f"{PRE}.rollout.n=4"]


def _rules(report, rule):
    return [f for f in report.findings if f.problem.rule == rule]


def test_vi880_fsdp_lora_keys_on_megatron_are_an_error_with_a_fix():
    report = check(None, MEGATRON + [f"{PRE}.model.lora_rank=32", f"{PRE}.model.lora_alpha=64"], defaults="snapshot",
                   env={}, gpu_memory_gb=80.0)
    (hit,) = [f for f in _rules(report, "VI880") if f.problem.severity == "error"]
    assert f"{PRE}.model.lora_rank" in hit.problem.keys and "trains all weights" in hit.problem.message
    assert "ray_trainer.py:360" in hit.problem.message and f"{PRE}.model.lora.rank=32" in hit.problem.hint
    assert hit.fix is not None and hit.fix.set == {f"{PRE}.model.lora.rank": 32, f"{PRE}.model.lora.alpha": 64}
    fixed = check(None, MEGATRON + [f"{PRE}.model.lora.rank=32", f"{PRE}.model.lora.alpha=64"], defaults="snapshot",
                  env={}, gpu_memory_gb=80.0)
    assert not [f for f in fixed.findings if f.problem.rule.startswith("VI88")], [f.problem.line() for f in fixed.findings]


def test_vi880_megatron_lora_block_on_fsdp_is_an_error():
    report = check(None, [f"{PRE}.model.path=Qwen/Qwen2.5-1.5B-Instruct", f"{PRE}.model.lora.rank=16",
                          f"{PRE}.actor.use_kl_loss=True"], defaults="snapshot", env={}, gpu_memory_gb=80.0)
    (hit,) = [f for f in _rules(report, "VI880") if f.problem.severity == "error"]
    assert "fsdp/transformer_impl.py:162" in hit.problem.message and "lora_rank=16" in hit.problem.hint


def test_vi880_warns_of_keys_the_engine_ignores():
    report = check(None, MEGATRON + [f"{PRE}.model.lora.rank=32", f"{PRE}.model.target_modules=[q_proj,v_proj]"],
                   defaults="snapshot", env={}, gpu_memory_gb=80.0)
    (hit,) = _rules(report, "VI880")
    assert hit.problem.severity == "warning" and f"{PRE}.model.target_modules" in hit.problem.keys


@pytest.mark.parametrize("key,value,words", [
    (f"{PRE}.actor.megatron.vanilla_mbridge", True, "megatron_peft.py:26"),
    (f"{PRE}.actor.megatron.use_mbridge", False, "transformer_impl.py:191"),
])
def test_vi881_megatron_lora_needs_megatron_bridge(key, value, words):
    report = check(None, MEGATRON + [f"{PRE}.model.lora.rank=32", f"{key}={value}"], defaults="snapshot", env={},
                   gpu_memory_gb=80.0)
    (hit,) = _rules(report, "VI881")
    assert hit.problem.severity == "error" and key in hit.problem.keys and words in hit.problem.message
    assert hit.fix is not None and hit.fix.set[f"{PRE}.actor.megatron.vanilla_mbridge"] is False


def test_vi882_delta_sharded_sync_has_no_lora():
    report = check(None, MEGATRON + [f"{PRE}.model.lora.rank=32", f"{PRE}.rollout.checkpoint_engine.backend=delta_sharded"],
                   defaults="snapshot", env={}, gpu_memory_gb=80.0)
    (hit,) = _rules(report, "VI882")
    assert "transformer_impl.py:1077" in hit.problem.message
    assert not _rules(check(None, MEGATRON + [f"{PRE}.rollout.checkpoint_engine.backend=delta_sharded"],
                            defaults="snapshot", env={}, gpu_memory_gb=80.0), "VI882")


def _hardware(entry: dict) -> dict:
    args = dict(a.lstrip("+").split("=", 1) for a in entry["traced"]["args"] if "=" in a)
    return {"nnodes": int(args.get("trainer.nnodes", 1)), "gpus_per_node": int(args.get("trainer.n_gpus_per_node", 8)),
            "gpu_memory_gb": 80.0}


def test_the_lora_scripts_are_the_expected_ones():
    names = {Path(e["path"]).name for e in LORA_SCRIPTS}
    assert {"run_qwen3_30b_a3b_megatron.sh", "run_ppo_trainer_megatron.sh", "run_qwen3_8b_fsdp.sh"} <= names


@pytest.mark.parametrize("entry", LORA_SCRIPTS, ids=lambda e: e["id"])
def test_no_lora_finding_on_verls_lora_scripts(entry):
    """verl's own LoRA scripts (FSDP and Megatron) set each engine's own keys: no VI880-VI882 on any of them."""
    report = check(str(SCRIPTS / entry["file"]), env={"HOME": "$HOME"}, defaults="snapshot", **_hardware(entry))
    assert not [f for f in report.findings if f.problem.rule in ("VI880", "VI881", "VI882")], \
        [f.problem.line() for f in report.findings if f.problem.rule.startswith("VI88")]


def test_verls_megatron_lora_script_has_only_the_error_verl_gives():
    """verl 0.9.1 rejects examples/tuning/lora/run_qwen3_30b_a3b_megatron.sh for megatron.grad_offload alone (the
    index's verdict); `check` says exactly that (VI801) and nothing about its LoRA keys."""
    (entry,) = [e for e in LORA_SCRIPTS if Path(e["path"]).name == "run_qwen3_30b_a3b_megatron.sh"]
    assert "grad_offload" in entry["verl_0_9_1_verdict"]["message"]
    report = check(str(SCRIPTS / entry["file"]), env={"HOME": "$HOME"}, defaults="snapshot", **_hardware(entry))
    assert {f.problem.rule for f in report.errors} == {"VI801"}, [f.problem.line() for f in report.errors]


def test_verls_megatron_e2e_with_lora_on_has_no_lora_error():
    """tests/special_e2e/run_ppo_trainer_megatron.sh with LORA_RANK=32 (actor and critic LoRA on Megatron)."""
    (entry,) = [e for e in LORA_SCRIPTS if Path(e["path"]).name == "run_ppo_trainer_megatron.sh"]
    report = check(str(SCRIPTS / entry["file"]), env={"HOME": "$HOME", "LORA_RANK": "32"}, defaults="snapshot",
                   **_hardware(entry))
    assert any(k == f"{PRE}.model.lora.rank" and v == 32 for k, v in report.config.items()), report.config
    assert not [f for f in report.findings if f.problem.rule.startswith("VI88")], \
        [f.problem.line() for f in report.findings if f.problem.rule.startswith("VI88")]


# --- verify: verl's own checks, and the replicas of the worker-time asserts ----------------------------------


@pytest.mark.verl
@pytest.mark.parametrize("edit,failing", [
    (lambda m: m["actor"]["megatron"].update(vanilla_mbridge=True), "megatron_peft.py:26"),
    (lambda m: (m["model"].update(lora_rank=m["model"]["lora"].pop("rank")), m["model"]["lora"].pop("alpha")),
     "ray_trainer.py:360"),
])
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_verify_rejects_megatron_lora_that_verl_fails_at_worker_time(tmp_path, tiny_model, edit, failing):
    import yaml

    from wizard.verify.harness import verify_with_verl

    plan = wizard.plan(wizard.load_profile("lora-megatron"), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    assert verify_with_verl(bundle, model_dir=str(tiny_model)).ok
    path = bundle / "verl_config.yaml"
    doc = yaml.safe_load(path.read_text())
    edit(doc["actor_rollout_ref"])
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert not report.ok and any(failing in c.name for c in report.failures), report.summary()


# --- the cpu smoke reads the Megatron block ------------------------------------------------------------------


def test_cpu_smoke_builds_the_megatron_adapters():
    pytest.importorskip("peft")
    from omegaconf import OmegaConf

    from wizard.smoketest.cpu_roles import _lora_config

    model = OmegaConf.create({"lora_rank": 0, "lora": {"rank": 16, "alpha": 32, "target_modules": ["linear_qkv"]}})
    cfg = _lora_config(model, megatron=True)
    assert cfg.r == 16 and cfg.lora_alpha == 32 and set(cfg.target_modules) == {"q_proj", "k_proj", "v_proj"}
    every = _lora_config(OmegaConf.create({"lora": {"rank": 8, "alpha": 16,
                                                    "target_modules": list(lora.MEGATRON_TARGET_MODULES)}}), megatron=True)
    assert every.target_modules == "all-linear"


def test_vi880_fsdp_rank_larger_than_the_vllm_slots_from_the_megatron_block():
    report = check(None, [f"{PRE}.model.path=Qwen/Qwen2.5-1.5B-Instruct", f"{PRE}.model.lora_rank=64",
                          f"{PRE}.model.lora.rank=8"], defaults="snapshot", env={}, gpu_memory_gb=80.0)
    (hit,) = _rules(report, "VI880")
    assert hit.problem.severity == "error" and "vLLM refuses it" in hit.problem.message
    assert hit.fix is not None and hit.fix.delete == [f"{PRE}.model.lora.rank"]
