"""The optimizer verl 0.9.1's SFT trainers build when the launch leaves it alone (paths under site-packages/verl):

- VI789 (warning): optim.lr never set for a full-parameter SFT run. sft_trainer_engine.yaml takes its optimizer from
  the generic optim group (trainer/config/sft_trainer_engine.yaml:9-14: optim@optim: fsdp), whose lr is a
  placeholder: optim/fsdp.yaml:12 `lr: 1e-3` (also megatron.yaml:4, torchtitan.yaml:8, veomni.yaml:7) over
  OptimizerConfig's own `lr: float = 1e-3` documented as "learning rate. Must be specified."
  (workers/config/optimizer.py:38, 47). The PPO trees set their own (actor/actor.yaml:151 lr 1e-6,
  critic/critic.yaml:19 lr 1e-5); the SFT tree sets none, and with fsdp.yaml's lr_scheduler_type: constant and
  lr_warmup_steps_ratio: 0.0 (:15, :39) AdamW updates every weight at that rate from the first step
  (FSDPEngine builds the schedule from them, workers/engine/fsdp/transformer_impl.py:502-530). verl's earlier SFT
  trainer defaulted to lr 1e-5 with warmup and cosine decay, and its docs still say 1e-5 (real case R27-05: verl's
  multi-turn SFT example, which never sets optim.lr, run for full epochs on the user's data). The value and the
  schedule are read from the resolved tree (verl's Hydra tree, or the snapshot generated from it), never a constant
  here; the rule fires where that lr exceeds FULL_FT_LR_CEILING, so optim=automodel (lr 1e-5, optim/automodel.yaml:10)
  is silent. LoRA runs (model.lora_rank > 0, model.lora.rank > 0, a model.lora_adapter_path) train adapters, for which
  1e-4..1e-3 is usual: silent.
"""

from __future__ import annotations

from wizard.check.rules.context import Ctx, Facts

LR, SCHED, WARM_RATIO, WARM_STEPS = "optim.lr", "optim.lr_scheduler_type", "optim.lr_warmup_steps_ratio", \
    "optim.lr_warmup_steps"
LORA_KEYS = ("model.lora_rank", "model.lora.rank", "model.lora_adapter_path")
# 10x the lr of verl's earlier SFT default (1e-5) and of its critic (critic/critic.yaml:19): above it, a full-parameter
# AdamW fine-tune of a pretrained LLM is in the range where loss spikes and forgetting are expected
LEGACY_SFT_LR = 1e-5  # verl's earlier SFT trainer's default (fsdp_sft_trainer's sft_trainer.yaml, gone in 0.9)
FULL_FT_LR_CEILING = 10 * LEGACY_SFT_LR


def _lora(c: Ctx) -> bool | None:
    if c.unknown(*LORA_KEYS):
        return None
    rank, mapping_rank, adapter = (c.v(k) for k in LORA_KEYS)
    return bool((isinstance(rank, int) and rank > 0) or (isinstance(mapping_rank, int) and mapping_rank > 0) or adapter)


def rule_sft_default_lr(c: Ctx, f: Facts) -> None:
    if c.set_by_user(LR) or c.unknown(LR) or _lora(c) is not False:
        return
    lr = c.num(LR)
    if lr is None or lr <= FULL_FT_LR_CEILING:
        return
    sched, ratio, steps = c.v(SCHED), c.v(WARM_RATIO), c.v(WARM_STEPS)
    warm = (f"{WARM_STEPS}={steps}" if isinstance(steps, int) and steps > 0
            else f"no warmup ({WARM_RATIO}={ratio})" if not ratio else f"{WARM_RATIO}={ratio}")
    c.add("VI789", "warning", (LR,),
          f"{LR} is not set: verl's SFT tree takes the generic optimizer default lr={lr:g} (trainer/config/optim/"
          "fsdp.yaml:12; OptimizerConfig documents lr as 'Must be specified', workers/config/optimizer.py:38), "
          f"with {SCHED}={sched} and {warm}, so AdamW updates every weight of the model (no LoRA) at {lr:g} from the "
          f"first step: {lr / LEGACY_SFT_LR:g}x the {LEGACY_SFT_LR:g} of verl's earlier SFT default and its docs, "
          "enough to make the loss spike and the model forget what it knew",
          f"set {LR} for a full fine-tune ({LEGACY_SFT_LR:g} is verl's documented SFT value), with {WARM_RATIO}=0.03..0.1 and "
          f"{SCHED}=cosine; if {lr:g} is meant, set it explicitly")
