"""VI929-VI930: LoRA at the full-finetune lr, and a LoRA alpha that zeroes the adapter (held-out case R39-03,
verl#4065: a LoRA rank-8 GRPO run launched with actor.optim.lr=1e-6).

Oracles: verl's own actor.yaml for the full-finetune rate (the constant must equal verl's default), and peft's
LoraLayer (the layer verl's FSDP engines build, fsdp/transformer_impl.py:358-368) on a tiny Linear for alpha <= 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.verlspec import lora

M, A = "actor_rollout_ref.model", "actor_rollout_ref.actor"
LR = f"{A}.optim.lr"


def _hits(rule: str, *overrides: str) -> list:
    report = check(None, ["actor_rollout_ref.rollout.name=vllm", *overrides])
    return [f.problem for f in report.findings if f.problem.rule == rule]


@pytest.mark.verl
def test_full_ft_rate_is_verls_actor_default():
    import verl
    from omegaconf import OmegaConf

    actor = OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config" / "actor" / "actor.yaml")
    assert float(actor.optim.lr) == lora.FULL_FT_ACTOR_LR


@pytest.mark.verl
def test_lora_at_full_ft_lr_warns_and_raised_lr_is_clean():
    # the planted fault: verl#4065's launch (lora_rank 8, lr 1e-6)
    [hit] = _hits("VI929", f"{M}.lora_rank=8", f"{M}.lora_alpha=32", f"{LR}=1e-6")
    assert hit.severity == "warning" and LR in hit.keys and "1e-06" in hit.message
    # left at verl's default lr (not named in the launch) is the same slip
    assert _hits("VI929", f"{M}.lora_rank=32")
    # controls: verl's LoRA examples (3e-6, 1e-5), and a full-finetune run at 1e-6
    assert not _hits("VI929", f"{M}.lora_rank=64", f"{M}.lora_alpha=32", f"{LR}=3e-6")
    assert not _hits("VI929", f"{M}.lora_rank=32", f"{M}.lora_alpha=64", f"{LR}=1e-5")
    assert not _hits("VI929", f"{LR}=1e-6")


@pytest.mark.verl
def test_megatron_reads_its_own_block():
    assert _hits("VI929", "model_engine=megatron", f"{M}.lora.rank=32", f"{LR}=1e-6")
    assert not _hits("VI929", "model_engine=megatron", f"{M}.lora.rank=32", f"{LR}=3e-6")
    # the FSDP key on Megatron trains all weights (VI880's case): no LoRA lr advice
    assert not _hits("VI929", "model_engine=megatron", f"{M}.lora_rank=32", f"{LR}=1e-6")
    [hit] = _hits("VI930", "model_engine=megatron", f"{M}.lora.rank=32", f"{M}.lora.alpha=0", f"{LR}=1e-5")
    assert f"{M}.lora.alpha" in hit.keys
    assert not _hits("VI930", "model_engine=megatron", f"{M}.lora.rank=32", f"{LR}=1e-5")


def _peft_grads(alpha: int):
    """peft's LoRA on a tiny Linear: (change of output vs base, |grad A| + |grad B|) after lora_B is made non-zero."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8))
    x = torch.randn(4, 8)
    base = net(x).detach()
    model = get_peft_model(net, LoraConfig(r=4, lora_alpha=alpha, target_modules=["0"]))
    layer = model.base_model.model[0]
    with torch.no_grad():
        layer.lora_B["default"].weight.normal_()
    out = model(x)
    out.sum().backward()
    grad = layer.lora_A["default"].weight.grad.abs().sum() + layer.lora_B["default"].weight.grad.abs().sum()
    return float((out.detach() - base).abs().max()), float(grad)


@pytest.mark.verl
def test_zero_alpha_trains_nothing_in_peft_and_check_errors():
    moved, grad = _peft_grads(0)
    assert moved == 0.0 and grad == 0.0  # the oracle: the adapter adds nothing and learns nothing
    moved, grad = _peft_grads(16)
    assert moved > 0 and grad > 0  # control
    [hit] = _hits("VI930", f"{M}.lora_rank=16", f"{M}.lora_alpha=0", f"{LR}=1e-5")
    assert hit.severity == "error" and f"{M}.lora_alpha" in hit.keys
    assert not _hits("VI930", f"{M}.lora_rank=16", f"{M}.lora_alpha=32", f"{LR}=1e-5")
    assert not _hits("VI930", f"{M}.lora_alpha=0")  # no LoRA: alpha is never read


@pytest.mark.verl
def test_sft_zero_alpha_errors(tmp_path):
    script = tmp_path / "sft.sh"
    args = ["model.path=Qwen/Qwen2.5-0.5B-Instruct", "optim.lr=1e-4", "model.lora_rank=32"]
    body = "#!/bin/bash\ntorchrun --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer \\\n  "
    script.write_text(body + " \\\n  ".join([*args, "model.lora_alpha=0"]) + "\n")
    hits = [p for p in check(str(script), env={"HOME": "/root"}).findings if p.problem.rule == "VI930"]
    assert [h.problem.keys[0] for h in hits] == ["model.lora_alpha"]
    script.write_text(body + " \\\n  ".join([*args, "model.lora_alpha=64"]) + "\n")
    assert not [p for p in check(str(script), env={"HOME": "/root"}).findings if p.problem.rule == "VI930"]


def test_the_planner_warns_as_check_does_and_its_own_lora_default_is_clean(tmp_path):
    """VI403 mirrors VI929 in the planner: a given learning_rate at verl's full fine-tuning rate with LoRA is warned
    about; the planner's own LoRA default (3e-5) draws nothing from either."""
    import wizard

    base = dict(model="Qwen/Qwen2.5-0.5B-Instruct", nnodes=1, gpus_per_node=4, gpu_memory_gb=80, lora_rank=8)
    given = wizard.plan(wizard.make_answers({**base, "learning_rate": 1e-6}), base_dir=str(tmp_path))
    assert [x.severity for x in given.findings if x.rule == "VI403"] == ["warning"]
    default = wizard.plan(wizard.make_answers(base), base_dir=str(tmp_path))
    assert not [x for x in default.findings if x.rule == "VI403"]
    bundle = wizard.write_bundle(wizard.render(default), tmp_path / "b")
    assert "VI929" not in check(str(bundle / "verl_config.yaml"), defaults="snapshot").ids()
    assert "VI929" in check(str(bundle / "verl_config.yaml"), ["actor_rollout_ref.actor.optim.lr=1e-6"],
                            defaults="snapshot").ids("warning")
