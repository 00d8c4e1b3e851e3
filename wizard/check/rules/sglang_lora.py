"""LoRA adapters served by SGLang (verl 0.9.1, paths under site-packages/verl).

- VI900 (error): SGLang rollout (rollout.name=sglang) serving LoRA as an adapter and model.target_modules given as a
  string other than ``all-linear``. verl serves LoRA through SGLang as an adapter when the rank in either block is
  above 0 (``lora_rank_of``: max of the FSDP flat model.lora_rank and the Megatron model.lora.rank,
  workers/rollout/sglang_rollout/utils.py:71-74) and model.lora.merge is False (``lora_served_as_adapter``,
  utils.py:77-90). The SGLang server then starts with ``lora_target_modules=sglang_lora_target_modules(
  model_config.target_modules)`` (async_sglang_server.py:343-349), and that function turns ``all-linear`` into
  ``["all"]``, passes a list through, and raises ``ValueError("SGLang cannot serve a regex `target_modules` ...")``
  for every other string (utils.py:93-102). The config accepts the string (workers/config/model.py:126, 246-257: a
  str or a list of str) and PEFT reads it as a regex on the FSDP side, so the run books its GPUs, loads the actor and
  dies when the rollout server launches (verl PR#7413, which replaced the earlier silent mangling with this error).
  The Megatron engine reads model.lora.target_modules for training, but the SGLang server still reads the flat
  model.target_modules, so the rule reads that key for both engines. A merged adapter (model.lora.merge=True) sends
  full weights and starts SGLang without LoRA, so it is not affected.
"""

from __future__ import annotations

from typing import Any

from wizard.check.rules.context import M, R, Ctx, Facts

TM = f"{M}.target_modules"
MERGE = f"{M}.lora.merge"
# the one string sglang_lora_target_modules renders (utils.py:95-96); tests/test_check_sglang_lora.py runs verl's own
# function on a set of values and compares it with sglang_rejects()
SGLANG_TARGET_STRING = "all-linear"


def sglang_rejects(target_modules: Any) -> bool:
    """Whether verl's sglang_lora_target_modules raises for this model.target_modules (utils.py:93-102)."""
    return isinstance(target_modules, str) and target_modules != SGLANG_TARGET_STRING


def _rank(c: Ctx) -> int:
    """verl's lora_rank_of (utils.py:71-74): the larger of the flat and the Megatron-block rank."""
    ranks = []
    for key in (f"{M}.lora_rank", f"{M}.lora.rank"):
        value = c.v(key)
        try:
            ranks.append(int(value or 0))
        except (TypeError, ValueError):
            ranks.append(0)
    return max(ranks)


def rule_sglang_lora_targets(c: Ctx, f: Facts) -> None:
    if c.unknown(f"{R}.name", TM, MERGE, f"{M}.lora_rank", f"{M}.lora.rank") or c.v(f"{R}.name") != "sglang":
        return
    rank = _rank(c)
    if rank <= 0 or c.v(MERGE) is True:
        return
    targets = c.v(TM)
    if not sglang_rejects(targets):
        return
    c.add("VI900", "error", (TM, f"{R}.name"),
          f"{TM}={targets} with {R}.name=sglang and LoRA served as an adapter (rank {rank}, {MERGE}=False): "
          "the SGLang server starts with lora_target_modules=sglang_lora_target_modules(target_modules), which raises "
          "ValueError for any string but 'all-linear' (workers/rollout/sglang_rollout/utils.py:93-102, called at "
          "async_sglang_server.py:349): the run dies when the rollout server launches, after the GPUs are booked",
          f"list the module names ({TM}='[q_proj,k_proj,v_proj,o_proj]'), use {TM}=all-linear, or set "
          f"{MERGE}=True (SGLang then gets merged full weights and no LoRA)")
