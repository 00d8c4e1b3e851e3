"""LoRA on a vision-language model's vision tower (check VI849; the planner's exclude_modules).

vLLM serves LoRA on the language model only and ignores a vision tower's adapters; verl's FSDP engine hands
target_modules / exclude_modules to peft as they are. The oracles: transformers' own model classes (the tower's
linear layers, built on the meta device) and peft's own get_peft_model on a tiny tower (which layers get adapters).
The real case: verl-project/verl#2182 (exclude_modules added for Qwen2.5-VL LoRA).
"""

from __future__ import annotations

import pytest

from wizard.check.lint import check
from wizard.verlspec import lora

M, R = "actor_rollout_ref.model", "actor_rollout_ref.rollout"


def _tiny(family: str, device: str):
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    cfg = AutoConfig.for_model(family)
    t, v = cfg.text_config, cfg.vision_config
    t.num_hidden_layers, t.hidden_size, t.intermediate_size, t.num_attention_heads, t.num_key_value_heads = 1, 64, 128, 4, 2
    t.head_dim = 16
    if hasattr(t, "rope_scaling") and isinstance(t.rope_scaling, dict) and "mrope_section" in t.rope_scaling:
        t.rope_scaling = {**t.rope_scaling, "mrope_section": [2, 3, 3]}
    if hasattr(t, "rope_parameters") and isinstance(t.rope_parameters, dict) and "mrope_section" in t.rope_parameters:
        t.rope_parameters = {**t.rope_parameters, "mrope_section": [2, 3, 3]}
    v.depth, v.hidden_size, v.intermediate_size, v.num_heads = 1, 32, 64, 2
    v.out_hidden_size = 64
    if hasattr(v, "deepstack_visual_indexes"):
        v.deepstack_visual_indexes = [0]
    t.vocab_size = 256
    with torch.device(device):
        return AutoModelForImageTextToText.from_config(cfg)


def _vision_linears(model) -> list[str]:
    import torch

    return [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and ".visual." in f".{n}."]


@pytest.mark.parametrize("family", sorted(lora.VISION_LINEARS))
def test_the_towers_linear_layers_are_transformers_own(family):
    real = _vision_linears(_tiny(family, "meta"))
    ours = lora.VISION_LINEARS[family]
    assert set(ours) <= set(real)
    # every linear layer of the tower ends in a name the sample has: a target list is judged right on the sample
    assert {n.rsplit(".", 1)[-1] for n in real} <= {n.rsplit(".", 1)[-1] for n in ours}


CASES = [("all-linear", None), ("all-linear", lora.VISION_EXCLUDE), (["q_proj", "v_proj"], None),
         (["gate_proj", "down_proj"], None), (["qkv"], None), (".*language_model.*proj", None),
         ("all-linear", ["qkv", "proj"])]


@pytest.mark.parametrize("target, exclude", CASES)
def test_which_tower_layers_get_adapters_as_peft_decides(target, exclude):
    """peft's own get_peft_model on a tiny Qwen2.5-VL: the tower layers it wraps are the ones peft_targets names."""
    from peft import LoraConfig, get_peft_model
    from peft.tuners.lora import LoraLayer

    model = _tiny("qwen2_5_vl", "cpu")
    try:
        peft_model = get_peft_model(model, LoraConfig(r=2, target_modules=target, exclude_modules=exclude))
    except ValueError:  # peft refuses a config that targets nothing at all
        wrapped = set()
    else:
        wrapped = {n.removeprefix("base_model.model.") for n, m in peft_model.named_modules() if isinstance(m, LoraLayer)}
    for name in lora.VISION_LINEARS["qwen2_5_vl"]:
        assert (name in wrapped) == lora.peft_targets(name, target, exclude), (name, target, exclude)


BASE = [f"{R}.name=vllm", f"{M}.path=Qwen/Qwen2.5-VL-7B-Instruct", f"{M}.lora_rank=64"]


def test_check_warns_when_the_tower_gets_adapters_and_offers_the_exclusion():
    report = check(None, BASE, env={})
    (hit,) = [f for f in report.findings if f.problem.rule == "VI849"]
    assert hit.problem.severity == "warning" and f"{M}.exclude_modules" in hit.problem.keys
    assert hit.fix.set == {f"{M}.exclude_modules": ".*visual.*"}


@pytest.mark.parametrize("extra", [[f"{M}.exclude_modules='.*visual.*'"], [f"{M}.lora.merge=True"],
                                   [f"{M}.target_modules=[q_proj,k_proj,v_proj,o_proj]"], [f"{R}.name=sglang"]])
def test_no_warning_when_vllm_gets_no_tower_adapter(extra):
    assert "VI849" not in check(None, [*BASE, *extra], env={}).ids()


def test_a_text_model_is_not_concerned():
    assert "VI849" not in check(None, [f"{R}.name=vllm", f"{M}.path=Qwen/Qwen2.5-7B-Instruct", f"{M}.lora_rank=64"],
                                env={}).ids()


def test_the_planner_excludes_the_tower(tmp_path):
    import wizard

    answers = wizard.merge_answers(profile="vlm-grpo", sets=["lora_rank=64"])
    plan = wizard.plan(answers)
    assert plan.value(f"{M}.exclude_modules") == ".*visual.*"
    text = wizard.plan(wizard.merge_answers(profile="single-node-8gpu", sets=["lora_rank=64"]))
    with pytest.raises(KeyError):  # a text model: verl's default (null) stays
        text.value(f"{M}.exclude_modules")


@pytest.mark.parametrize("name,family", [("Qwen/Qwen3-VL-4B-Instruct", "qwen3_vl"), ("Qwen/Qwen3-VL-32B-Thinking", "qwen3_vl"),
                                         ("/ckpt/Qwen2.5-VL-32B-Instruct", "qwen2_5_vl"), ("Qwen/Qwen3-4B", ""),
                                         ("Qwen/Qwen3.5-9B", "")])
def test_the_family_an_uncatalogued_id_names(name, family):
    assert lora.family_in_name(name) == family


def test_an_uncatalogued_size_of_a_vision_family_is_still_checked():
    """verl#6642 (round 85, R85-04): Qwen3-VL-4B, which verl-init's catalogue lacks, with target_modules=all-linear."""
    base = [f"{R}.name=vllm", f"{M}.path=Qwen/Qwen3-VL-4B-Instruct", f"{M}.lora_rank=64", f"{M}.target_modules=all-linear"]
    (hit,) = [f for f in check(None, base, env={}).findings if f.problem.rule == "VI849"]
    assert "Qwen/Qwen3-VL-4B-Instruct" in hit.problem.message
    assert "VI849" not in check(None, [*base, f"{M}.exclude_modules='.*visual.*'"], env={}).ids()
    assert "VI849" not in check(None, [*base[:1], f"{M}.path=Qwen/Qwen3-4B", *base[2:]], env={}).ids()
