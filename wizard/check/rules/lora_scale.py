"""VI929-VI930: a LoRA update that barely moves, or cannot move, the policy (held-out case R39-03, verl#4065).

verl 0.9.1 (paths under verl/):
- The FSDP engines wrap the actor with peft's get_peft_model(LoraConfig(r=model.lora_rank,
  lora_alpha=model.lora_alpha, ...)) when lora_rank > 0 (workers/engine/fsdp/transformer_impl.py:358-368); Megatron
  builds Megatron-Bridge's LoRA from the model.lora block (workers/config/megatron_peft.py:22-35; rank and alpha,
  trainer/config/model/hf_model.yaml:112). Both start the adapter at zero (peft's lora_B, Bridge's linear_out) and
  scale its output by alpha / rank.
- VI929: the actor's lr is read from actor.optim.lr for LoRA and full runs alike; its default 1e-6
  (trainer/config/actor/actor.yaml:151) is the full-finetune rate. verl's LoRA guide says to raise it by an order of
  magnitude (docs/advance/ppo_lora.rst:164, v0.9.0) and every LoRA example of verl 0.9 sets 3e-6 or more
  (examples/tuning/lora/*.sh). At or below 1e-6 the zero-started adapter moves about as far per step as a full run's
  weights would at a tenth of its rate: the run is slow to learn or flat, and nothing reports it.
- VI930: alpha <= 0 makes peft's scaling alpha / r zero (or negative): with 0 the adapter's output and both its
  gradients are zero, so the actor never changes from the base model while the run trains and saves adapters
  (tests/test_check_lora_scale.py runs peft on a tiny layer). verl's SFT trainer builds the same engine and only warns
  about it in the checkpoint metadata (trainer/sft_trainer.py:107-121), so VI930 covers the SFT model section too.
"""

from __future__ import annotations

from wizard.check.rules.context import A, M, Ctx, Facts
from wizard.verlspec import lora

LR = f"{A}.optim.lr"


def _model(c: Ctx, prefix: str) -> dict:
    block = {k[len(prefix) + 6:]: v for k, v in c.res.flat.items() if k.startswith(f"{prefix}.lora.")}
    return {"lora_rank": c.v(f"{prefix}.lora_rank"), "lora_alpha": c.v(f"{prefix}.lora_alpha"), "lora": block}


def _alpha(c: Ctx, f: Facts, prefix: str) -> int:
    """VI930 for the model section at prefix; returns the rank the engine trains (0: no LoRA)."""
    model = _model(c, prefix)
    rank = lora.engine_rank(model, megatron=f.megatron)
    if rank <= 0:
        return 0
    rank_key = f"{prefix}.lora.rank" if f.megatron else f"{prefix}.lora_rank"
    alpha_key = f"{prefix}.lora.alpha" if f.megatron else f"{prefix}.lora_alpha"
    alpha = lora.megatron_alpha(model) if f.megatron else lora.fsdp_alpha(model)
    if isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and alpha <= 0:
        c.add("VI930", "error", (alpha_key, rank_key),
              f"{alpha_key}={alpha} with {rank_key}={rank}: the LoRA scaling alpha/rank is {alpha / rank:g}, so the "
              "adapter adds nothing to the model's output and gets no gradient (peft LoraLayer; verl passes alpha as "
              "given, workers/engine/fsdp/transformer_impl.py:362): the run trains nothing",
              f"set {alpha_key} to a positive value, e.g. {alpha_key}={2 * rank} (2 x rank) or {rank} (= rank)")
    return rank


def rule_sft_lora_alpha(c: Ctx, f: Facts) -> None:
    """VI930 for the SFT trainer's model section (sft_trainer.py:107-121 only warns in the checkpoint metadata)."""
    _alpha(c, f, "model")


def rule_lora_scale(c: Ctx, f: Facts) -> None:
    rank = _alpha(c, f, M)
    if rank <= 0:
        return
    rank_key = f"{M}.lora.rank" if f.megatron else f"{M}.lora_rank"
    lr = c.num(LR)
    if lr is None or c.unknown(LR) or lr <= 0:
        return
    if lr <= lora.FULL_FT_ACTOR_LR:
        c.add("VI929", "warning", (LR, rank_key),
              f"{LR}={lr:g} with LoRA ({rank_key}={rank}): that is verl's full-finetune actor rate "
              f"(actor.yaml default {lora.FULL_FT_ACTOR_LR:g}); the zero-initialised adapter barely moves, so the "
              "reward stays flat or climbs slowly with nothing reported (verl's LoRA guide: raise the lr by an "
              "order of magnitude, docs/advance/ppo_lora.rst:164)",
              f"raise {LR} about 10x for LoRA, e.g. {LR}={lr * 10:g} (verl's LoRA examples use 3e-6 to 1e-5)")
