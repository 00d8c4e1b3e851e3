"""rollout.layered_summon of verl 0.9.1 (paths under site-packages/verl).

- VI790 (error, `--fix`): FSDP LoRA (model.lora_rank > 0, model.lora.merge False: adapters served to the rollout
  engine) with rollout.layered_summon=True and rollout.load_format left at a `dummy*` format (verl's default, `dummy`,
  trainer/config/rollout/rollout.yaml:100). The worker then starts with `base_sync_done = "dummy" not in
  rollout.load_format` = False (workers/engine_workers.py:673), and its first naive weight sync asks for a base-weight
  sync (:789-800: `do_lora_base_sync = not self.base_sync_done`, `get_per_tensor_param(layered_summon=True,
  base_sync_done=False)`). The FSDP engine hands both to collect_lora_params (workers/engine/fsdp/transformer_impl.py:
  998-1006), which raises `ValueError("To use layered_summon, you must make sure base-model is preloaded in vllm, e.g.
  let rollout.load_format=safetensors")` (utils/fsdp_utils.py:725-730): the run dies at the first weight sync, after
  every model has loaded (verl#3516). Only the naive checkpoint engine takes this path (engine_workers.py:759-766:
  any other backend calls get_per_tensor_param() with its defaults).
- VI790 (info): layered_summon=True where nothing reads it: without non-merged LoRA on the FSDP engines (fsdp,
  fsdp2, fsdp_turbo: only FSDPEngine.get_per_tensor_param takes it, transformer_impl.py:977; the Megatron, VeOmni,
  TorchTitan and Automodel engines take **kwargs and drop it), or with a checkpoint engine other than naive. vLLM's
  ServerAdapter turns it into `self.sleep_level = 1` (workers/rollout/vllm_rollout/vllm_rollout.py:125-127), but
  nothing reads that attribute for vLLM: engine_workers.py:775-780 reads it for SGLang only, and the vLLM server
  sleeps at its own _resolve_sleep_level (vllm_async_server.py:1289-1305; release() at vllm_rollout.py:204-207
  passes no level). The setting does nothing; it does not save memory.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import A, M, R, Ctx, Facts
from wizard.verlspec import lora as verl_lora

LS = f"{R}.layered_summon"
LF = f"{R}.load_format"
BACKEND = f"{R}.checkpoint_engine.backend"
# the strategies whose engine is FSDPEngine or inherits its get_per_tensor_param (fsdp/transformer_impl.py:1143
# registers fsdp/fsdp2, fsdp/fsdp_turbo_impl.py:23-24 fsdp_turbo as a subclass)
FSDP_LINEAGE = ("fsdp", "fsdp2", "fsdp_turbo")
FIX_FORMAT = "safetensors"  # the format verl's own error names (fsdp_utils.py:728-729)


def adapter_sync(c: Ctx, f: Facts) -> bool | None:
    """Whether the weight sync sends LoRA adapters through collect_lora_params (the only reader of layered_summon);
    None when a deciding key is unresolved."""
    if c.unknown(f"{A}.strategy", f"{M}.lora_rank", BACKEND):
        return None
    model = {"lora_rank": c.v(f"{M}.lora_rank"), "lora": {"merge": c.v(f"{M}.lora.merge")}}
    return (c.v(f"{A}.strategy") in FSDP_LINEAGE and verl_lora.fsdp_rank(model) > 0 and not verl_lora.merged(model)
            and c.v(BACKEND) == "naive")


def rule_layered_summon(c: Ctx, f: Facts) -> None:
    if c.v(LS) is not True:
        return
    adapters = adapter_sync(c, f)
    if adapters is None:
        return
    if adapters:
        fmt = c.v(LF)
        if c.unknown(LF) or not isinstance(fmt, str) or "dummy" not in fmt:
            return
        c.add("VI790", "error", (LS, LF, f"{M}.lora_rank"),
              f"{LS}=True with {LF}={fmt} and FSDP LoRA ({M}.lora_rank={c.v(f'{M}.lora_rank')}, adapters not merged): "
              f"verl starts with base_sync_done=False ('dummy' in load_format, workers/engine_workers.py:673), and "
              "the first weight sync's base-weight pass calls collect_lora_params(layered_summon=True, "
              "base_sync_done=False), which raises ValueError 'To use layered_summon, you must make sure base-model "
              "is preloaded in vllm' (utils/fsdp_utils.py:725-730): the run dies after all models have loaded",
              f"set {LF}={FIX_FORMAT} (the rollout engine loads the base weights from {M}.path, then only adapters "
              f"are synced), or drop {LS}",
              fix=Fix(set={LF: FIX_FORMAT}))
        return
    why = ("the checkpoint engine is not naive: it syncs with get_per_tensor_param()'s defaults "
           "(workers/engine_workers.py:759-766)" if c.v(BACKEND) != "naive" else
           "the actor does not serve non-merged LoRA adapters from an FSDP engine, and only collect_lora_params reads "
           "it (utils/fsdp_utils.py:725, via fsdp/transformer_impl.py:998-1006)")
    c.add("VI790", "info", (LS,),
          f"{LS}=True has no effect here: {why}. It does not change vLLM's sleep either: vllm_rollout.py:125-127 "
          "sets an adapter attribute that only the SGLang path reads (engine_workers.py:775-780); vLLM sleeps at "
          "its own level (vllm_async_server.py:1289-1305)",
          f"remove {LS}; it helps only FSDP LoRA with adapters synced to the rollout engine")
