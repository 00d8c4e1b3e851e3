"""The critic's tokenizer folder (VI952; paths under site-packages/verl, verl 0.9.1).

- VI952 (warning): a run that builds a critic whose tokenizer folder, critic.model.tokenizer_path or else
  critic.model.path, is a folder on this machine with no tokenizer files (wizard.planner.overlong.TOKENIZER_FILES:
  tokenizer.json, tokenizer_config.json, tokenizer.model, vocab.json) — typically a reward-model or merged value
  checkpoint saved without its tokenizer. verl's HFModelConfig sets tokenizer_path = path when it is unset and loads
  the tokenizer from it with hf_tokenizer (workers/config/model.py:153-161); critic.model.tokenizer_path defaults to
  null (trainer/config/model/hf_model.yaml:16). The trainer builds that config inside init_workers, after the resource
  pools exist (trainer/ppo/v1/trainer_base.py:264-266; legacy ray_trainer.py:803). What follows depends on the
  transformers where the job runs: before 5 AutoTokenizer raises on such a folder (the real case, verl PR#301:
  "the worker will fail if the critic model path doesn't contain a tokenizer"); transformers 5 returns a tokenizer
  with an empty vocabulary (len 1, every text encodes to []) without a word. That tokenizer is what the FSDP engine
  hands its checkpoint manager as processing_class (workers/engine/fsdp/transformer_impl.py:221), saved into every
  critic checkpoint's huggingface/ folder (utils/checkpoint/fsdp_checkpoint_manager.py:373-382), and where the
  Megatron engine reads pad_token_id (workers/engine/megatron/transformer_impl.py:1348, 1405, 1525).
  Only a path naming a local folder is read: a hub id's snapshot in the Hugging Face cache may hold config.json
  without the tokenizer files verl would still download.
  The critic never tokenises text itself (it reads the actor's ids), so the actor's tokenizer is the right one.
"""

from __future__ import annotations

from wizard.check.rules.context import M, Ctx, Facts, local_path
from wizard.check.shellargs import PLACEHOLDER


def rule_critic_tokenizer(c: Ctx, f: Facts) -> None:
    if not f.use_critic:
        return
    from wizard.planner import overlong

    set_path = c.v("critic.model.tokenizer_path")
    key = "critic.model.tokenizer_path" if isinstance(set_path, str) and set_path else "critic.model.path"
    value = c.v(key)
    if not isinstance(value, str) or not value or c.unknown(key) or PLACEHOLDER in value:
        return
    folder = local_path(c, value)  # a folder of the user's; a hub id's cache may hold config.json alone
    if folder is None or not folder.is_dir() or overlong.local_tokenizer(str(folder)) is not None:
        return
    actor = c.v(f"{M}.tokenizer_path") or c.v(f"{M}.path")
    unset = "" if key == "critic.model.tokenizer_path" else " and critic.model.tokenizer_path is unset"
    c.add("VI952", "warning", (key,),
          f"{key}={value} holds no tokenizer files ({', '.join(overlong.TOKENIZER_FILES)}){unset}: verl loads the "
          "critic's tokenizer from it (workers/config/model.py:153-161) when the trainer builds the critic, after the "
          "GPUs are booked; transformers < 5 raises there (PR#301), transformers 5 gives an empty tokenizer that "
          "verl saves into every critic checkpoint (fsdp/transformer_impl.py:221) and takes pad_token_id from "
          "(megatron/transformer_impl.py:1348)",
          f"set critic.model.tokenizer_path to the actor's tokenizer ({actor}): the critic reads the actor's "
          "token ids" if isinstance(actor, str) and actor else
          "set critic.model.tokenizer_path to the actor's tokenizer: the critic reads the actor's token ids")
