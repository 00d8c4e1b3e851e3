"""LoRA adapter sync from an FSDP2 actor under CPUOffloadPolicy (verl 0.9.1, paths under site-packages/verl).

- VI931 (warning): actor.strategy=fsdp2 with actor.fsdp_config.offload_policy=True and LoRA synced to the rollout
  as an adapter (model.lora_rank > 0, model.lora.merge False). With offload_policy the FSDP2 engine builds the actor
  with ``CPUOffloadPolicy(pin_memory=True)`` and sets ``_uses_fsdp2_cpu_offload_policy`` (workers/engine/fsdp/
  transformer_impl.py:450-463), so the parameter shards live on the CPU. ``get_per_tensor_param`` then skips
  ``load_fsdp_model_to_gpu`` (transformer_impl.py:979-989) and, for non-merged LoRA, hands the module to
  ``collect_lora_params`` (:994-999), which all-gathers every adapter tensor with ``param.full_tensor()`` straight
  from those CPU shards (utils/fsdp_utils.py:703 in layered_summon_lora_params, :745 and :756 in
  collect_lora_params). verl's own non-LoRA path stages each shard first, ``param.to(device).full_tensor()``, with the
  comment "used when fsdp2 set cpu_offload_policy" (transformer_impl.py:1028-1033); the LoRA path does not, and the
  first update_weights was reported to crash with "Device mismatch (CPU vs CUDA:0)" (verl#5390, FSDP2 LoRA with
  offload_policy=True and layered_summon=True). A warning, not an error: the crash is the issue's report, read
  against 0.9.1's code, not reproduced here. fsdp_turbo and FSDP1 do not read offload_policy (VI917 covers FSDP1).
"""

from __future__ import annotations

from wizard.check.rules.context import A, M, Ctx, Facts
from wizard.verlspec import lora as verl_lora

POLICY = f"{A}.fsdp_config.offload_policy"
PARAM_OFFLOAD = f"{A}.fsdp_config.param_offload"
# the only strategy whose engine branch reads offload_policy (fsdp/transformer_impl.py:450-463)
POLICY_STRATEGY = "fsdp2"


def rule_lora_offload_policy(c: Ctx, f: Facts) -> None:
    if c.unknown(f"{A}.strategy", POLICY, f"{M}.lora_rank", f"{M}.lora.merge"):
        return
    if c.v(f"{A}.strategy") != POLICY_STRATEGY or c.v(POLICY) is not True:
        return
    model = {"lora_rank": c.v(f"{M}.lora_rank"), "lora": {"merge": c.v(f"{M}.lora.merge")}}
    rank = verl_lora.fsdp_rank(model)
    if rank <= 0 or verl_lora.merged(model):
        return
    c.add("VI931", "warning", (POLICY, f"{M}.lora_rank"),
          f"{POLICY}=True on the fsdp2 actor with LoRA adapters synced to the rollout ({M}.lora_rank={rank}, "
          f"{M}.lora.merge=False): the shards stay on the CPU (CPUOffloadPolicy, fsdp/transformer_impl.py:450-463, "
          "no load to GPU at :979-989) and the LoRA collector all-gathers them with param.full_tensor() unstaged "
          "(utils/fsdp_utils.py:703, 745, 756), unlike the non-LoRA path's param.to(device).full_tensor() "
          "(:1028-1033); reported to crash the first weight sync with 'Device mismatch (CPU vs CUDA:0)' (verl#5390)",
          f"use {PARAM_OFFLOAD}=True (and optimizer_offload) instead of {POLICY}: verl moves those shards to the GPU "
          "before the sync")
