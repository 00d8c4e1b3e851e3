"""VI974: FSDP LoRA with 'hf_model' in the actor's checkpoint.save_contents (real case verl#4761).

verl 0.9.1 (paths under verl/):
- The FSDP engines (fsdp, fsdp2, and veomni, which reads the same flat `model.lora_rank`) wrap the model with peft's
  get_peft_model when lora_rank > 0 (workers/engine/fsdp/transformer_impl.py:162, :339-368; veomni/
  transformer_impl.py:183) and hand that PEFT-wrapped FSDP module to FSDPCheckpointManager (fsdp/transformer_impl.py:
  217-224, veomni/transformer_impl.py:253).
- With 'hf_model' in save_contents, FSDPCheckpointManager.save_checkpoint takes the wrapped module's full state dict
  (utils/checkpoint/fsdp_checkpoint_manager.py:422-425, get_fsdp_full_state_dict) and save_pretrained()s it into a
  plain AutoModel built from the config (:427-462) without merging the adapters or renaming a key: <step>/actor/
  huggingface holds `base_model.model.…base_layer.weight` and `…lora_A.default.weight` / `lora_B` tensors. No adapter
  folder is written during training (only lora_train_meta.json, :417). from_pretrained on that folder finds none of
  the model's own weight names: every weight is newly initialised (tests/test_check_lora_export.py runs verl's
  checkpoint manager on a tiny peft Qwen2 over gloo and loads the result).
- verl's model merger (`python -m verl.model_merger merge --backend fsdp`) reads the 'model' shards instead, writes
  the base weights under their own names and the adapter in peft's format to <target>/lora_adapter
  (model_merger/base_model_merger.py:311-408, save_hf_model_and_tokenizer :410-423). It does not merge either:
  peft's merge_and_unload does.
- Checkpoints are written only with trainer.save_freq > 0 (trainer/ppo/v1/trainer_base.py:481-482).
"""

from __future__ import annotations

from wizard.check.rules.context import A, M, Ctx, Facts
from wizard.verlspec import lora

SAVE = f"{A}.checkpoint.save_contents"
# the engines that build peft LoRA from model.lora_rank and save through FSDPCheckpointManager
FSDP_ENGINES = ("fsdp", "fsdp2", "veomni")


def _contents(value: object) -> list[str] | None:
    """save_contents as a list of names: a list, or a string Hydra left unparsed ("['model','hf_model']")."""
    if isinstance(value, str):
        value = [p.strip().strip("'\"") for p in value.strip().strip("[]").split(",") if p.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return None


def rule_lora_export(c: Ctx, f: Facts) -> None:
    strategy = c.v(f"{A}.strategy") or "fsdp"
    if f.megatron or strategy not in FSDP_ENGINES or c.unknown(SAVE, f"{M}.lora_rank", "trainer.save_freq"):
        return
    rank = lora.fsdp_rank({"lora_rank": c.v(f"{M}.lora_rank")})
    contents = _contents(c.v(SAVE))
    if rank <= 0 or contents is None or "hf_model" not in contents or (c.int("trainer.save_freq") or 0) <= 0:
        return
    keep_model = "" if "model" in contents else (f" (keep 'model' in {SAVE}: the merger reads those shards, not "
                                                  "huggingface/)")
    c.add("VI974", "warning", (SAVE, f"{M}.lora_rank", f"{A}.strategy"),
          f"{M}.lora_rank={rank} with 'hf_model' in {SAVE}: verl's FSDP checkpoint manager save_pretrained()s the "
          "PEFT-wrapped model's full state dict as it is (utils/checkpoint/fsdp_checkpoint_manager.py:422-462): "
          "global_step_N/actor/huggingface holds base_model.model.…base_layer.weight and unmerged lora_A/lora_B "
          "tensors, not a merged model; from_pretrained on it finds none of the model's weight names and initialises "
          "them at random (verl#4761)",
          "drop 'hf_model' and export a checkpoint with `python -m verl.model_merger merge --backend fsdp --local_dir "
          "<ckpt>/global_step_N/actor --target_dir <out>`: it writes the base weights to <out> and the adapter in "
          "peft's format to <out>/lora_adapter (model_merger/base_model_merger.py:311-408); for one merged model, "
          "PeftModel.from_pretrained(base, '<out>/lora_adapter').merge_and_unload()" + keep_model)
