"""How verl 0.9.1's SFT trainer (verl.trainer.sft_trainer / sft_trainer_ray, config trainer/config/sft_trainer_engine.yaml)
pads, truncates and micro-batches its data (paths under site-packages/verl):

- VI785 (error): data.pad_mode other than no_padding. The trainer hands data.pad_mode to the engine with every batch
  (trainer/sft_trainer.py:350, sft_trainer_ray.py:285) and every engine's forward refuses any other mode:
  FSDPEngineWithLMHead.prepare_model_inputs asserts `pad_mode == DatasetPadMode.NO_PADDING`
  (workers/engine/fsdp/transformer_impl.py:1166; VeOmniEngineWithLMHead calls it, veomni/transformer_impl.py:838-839),
  the same assert in automodel/transformer_impl.py:485 and torchtitan/transformer_impl.py:722, and the Megatron
  engine raises NotImplementedError (megatron/transformer_impl.py:1329-1332). MultiTurnSFTDataset accepts 'right'
  (utils/dataset/multiturn_sft_dataset.py:95-97) and the config composes, so the run dies at the first micro-batch,
  after the model has loaded (real case R27-03: pad_mode=right to avoid varlen packing without flash-attn;
  use_remove_padding=false does not need it: the no_padding path pads its nested tensors itself,
  fsdp/transformer_impl.py:1190-1198).
- VI786 (info): data.micro_batch_size_per_gpu set while data.use_dynamic_bsz is on (the SFT default,
  sft_trainer_engine.yaml:18-20). prepare_micro_batches (workers/engine/utils.py:106-121) packs micro-batches up to
  max_token_len_per_gpu × the Ulysses size and reads micro_batch_size_per_gpu only in its else branch (:122-128),
  so the micro batch the user chose is ignored (real case R27-07: MB=1 for an OOM smoke test packed ~8 samples a
  pass). A note, not a warning: 9 of verl's 15 v0.9.0 examples/sft scripts set it so, and the run works; the PPO
  analogue VI827 (rules/batches.py) is an info too.
- VI787 (warning): data.truncation=left with data.pad_mode=no_padding (the default) and verl's own dataset.
  MultiTurnSFTDataset honours 'left' only in its right-pad branch (multiturn_sft_dataset.py:379-384); the
  no_padding branch keeps `input_ids[: self.max_length]` whatever the truncation (:404-411), so an over-length
  sample loses its end, the final assistant turn(s), not its beginning (real case R27-01, verl PR#6372, closed
  unmerged). Since VI785's engines accept no_padding only, 'left' cannot take effect on verl 0.9.1.
- VI682 (warning): data.max_length above the dynamic-batch budget, data.max_token_len_per_gpu × the FSDP engine's
  Ulysses size, with data.use_dynamic_bsz on (the SFT default, sft_trainer_engine.yaml:19-20, 32). The dataset
  keeps samples up to max_length tokens (multiturn_sft_dataset.py:404-411), prepare_micro_batches packs with
  max_token_len = max_token_len_per_gpu × sp_size (workers/engine/utils.py:108-112; the FSDP engine passes its
  Ulysses size, fsdp/transformer_impl.py:726) and rearrange_micro_batches asserts the longest sample of the batch
  fits it (utils/seqlen_balancing.py:377-386): the first batch holding a sample longer than the budget kills the run
  mid-training (real case R46-05, verl#3088: the assert on a long sample). The test calls verl's
  rearrange_micro_batches on a nested batch one token over the budget and at it.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

PAD, TRUNC, MAXLEN = "data.pad_mode", "data.truncation", "data.max_length"
DYN, MICRO, BUDGET = "data.use_dynamic_bsz", "data.micro_batch_size_per_gpu", "data.max_token_len_per_gpu"
SP, STRATEGY, CUSTOM = "engine.ulysses_sequence_parallel_size", "engine.strategy", "data.custom_cls.path"
# the line of each engine's refusal of any pad mode but no_padding (workers/engine/<dir>/transformer_impl.py)
ENGINE_REFUSAL = {"fsdp": "fsdp/transformer_impl.py:1166 (assert)", "fsdp2": "fsdp/transformer_impl.py:1166 (assert)",
                  "veomni": "fsdp/transformer_impl.py:1166 via veomni/transformer_impl.py:839 (assert)",
                  "automodel": "automodel/transformer_impl.py:485 (assert)",
                  "torchtitan": "torchtitan/transformer_impl.py:722 (assert)",
                  "megatron": "megatron/transformer_impl.py:1329-1332 (NotImplementedError)"}


def rule_sft_pad_mode(c: Ctx, f: Facts) -> None:
    if c.unknown(PAD):
        return
    pad = c.v(PAD)
    if pad is None or pad == "no_padding":
        return
    strategy = c.v(STRATEGY)
    where = ENGINE_REFUSAL.get(str(strategy), "fsdp/transformer_impl.py:1166, megatron/transformer_impl.py:1329-1332")
    c.add("VI785", "error", (PAD,),
          f"{PAD}={pad}: verl's SFT trainer passes it to the engine with every batch (trainer/sft_trainer.py:350) and "
          f"the {strategy or 'configured'} engine accepts only no_padding (workers/engine/{where}): the run dies at "
          "the first micro-batch, after the model has loaded"
          + (" (MultiTurnSFTDataset accepts 'right', utils/dataset/multiturn_sft_dataset.py:95-97)" if pad == "right"
             else ""),
          f"set {PAD}=no_padding; model.use_remove_padding=false works with it (the engine pads the nested batch "
          "itself, fsdp/transformer_impl.py:1190-1198)", fix=Fix(set={PAD: "no_padding"}))


def rule_sft_micro_ignored(c: Ctx, f: Facts) -> None:
    if c.unknown(DYN, MICRO) or not c.v(DYN) or not c.set_by_user(MICRO) or c.v(MICRO) is None:
        return
    budget, sp = c.int(BUDGET), c.int(SP) or 1
    tokens = f"{budget * sp} tokens ({BUDGET}={budget}" + (f" × Ulysses {sp})" if sp > 1 else ")") \
        if budget else f"{BUDGET} × the Ulysses size"
    c.add("VI786", "info", (MICRO, DYN),
          f"{MICRO}={c.v(MICRO)} is ignored: {DYN} is on ({'set' if c.set_by_user(DYN) else 'the SFT default'}, "
          "trainer/config/sft_trainer_engine.yaml:20), so verl packs each micro-batch up to "
          f"{tokens} and reads the micro batch size only with dynamic batching off (workers/engine/utils.py:106-128): "
          "a pass holds as many samples as fit the budget, not the number you set",
          f"set {DYN}=false to get micro-batches of {c.v(MICRO)} sample(s), or drop {MICRO} and size the pass with "
          f"{BUDGET}")


def rule_sft_budget_below_max_length(c: Ctx, f: Facts) -> None:
    if c.unknown(DYN, MAXLEN, BUDGET, SP, STRATEGY, CUSTOM) or not c.v(DYN) or c.v(CUSTOM) \
            or c.v(STRATEGY) not in ("fsdp", "fsdp2"):
        return  # a custom dataset class sizes its own samples; other engines pass their own sp_size
    max_len, budget, sp = c.int(MAXLEN), c.int(BUDGET), c.int(SP) or 1
    if not max_len or not budget or sp < 1 or max_len <= budget * sp:
        return
    cap = f"{budget * sp} tokens ({BUDGET}={budget}" + (f" × Ulysses {sp})" if sp > 1 else ")")
    c.add("VI682", "warning", (BUDGET, MAXLEN),
          f"{MAXLEN}={max_len} is above the dynamic-batch budget of {cap}: verl keeps samples up to {max_len} "
          "tokens (utils/dataset/multiturn_sft_dataset.py:404-411) but asserts every sample of a batch fits the "
          "budget when it packs micro-batches (utils/seqlen_balancing.py:384-386, workers/engine/utils.py:108-112), "
          f"so the first batch with a sample of {budget * sp + 1}..{max_len} tokens stops the run mid-training",
          f"set {BUDGET}={-(-max_len // sp)} (or more), or lower {MAXLEN} to {budget * sp}",
          fix=Fix(set={BUDGET: -(-max_len // sp)}))


def rule_sft_left_truncation(c: Ctx, f: Facts) -> None:
    if c.unknown(TRUNC, PAD, CUSTOM) or c.v(TRUNC) != "left" or c.v(PAD) != "no_padding" or c.v(CUSTOM):
        return  # a custom dataset class (data.custom_cls.path) truncates its own way
    c.add("VI787", "warning", (TRUNC, PAD),
          f"{TRUNC}=left with {PAD}=no_padding: verl's MultiTurnSFTDataset honours 'left' only when it right-pads "
          "(utils/dataset/multiturn_sft_dataset.py:379-384); its no_padding branch keeps the first "
          f"{MAXLEN}={c.v(MAXLEN)} tokens whatever the truncation (:404-411), so an over-length sample loses its end, "
          "the final assistant turn(s), and one whose prompt fills max_length trains on nothing (verl PR#6372). "
          "pad_mode=right, where 'left' works, is refused by every engine (VI785)",
          f"filter or pre-truncate the over-length rows (keep their ends yourself), raise {MAXLEN}, or set "
          f"{TRUNC}=error to stop on them; 'right' says what verl does")
