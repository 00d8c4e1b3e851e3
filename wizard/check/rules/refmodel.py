"""Where the reference model really runs (VI668, VI669). verl 0.9.1, paths under site-packages/verl; the facts come
from wizard/check/data/verl_ref_placement.json, written from verl's source by scripts/verl_ref_placement.py.

- VI668 (warning): actor_rollout_ref.ref.fsdp_config.param_offload=False (or offload_policy=False) set for a reference
  model on the FSDP / FSDP2 engine. The ref engine block is forward_only (trainer/config/ref/dp_ref.yaml:20), and the
  FSDP engine CPU-offloads the parameters of every forward_only engine whatever those keys say: strategy fsdp builds
  FSDP(cpu_offload=CPUOffload(offload_params=True)) (workers/engine/fsdp/transformer_impl.py:432-435), fsdp2 a
  CPUOffloadPolicy(pin_memory=True) (:459-463). The reference the user keeps "on GPU" is streamed from host memory
  at every micro-batch of its forward, silently (verl PR#7182 measured a 40-70x slower ref forward; still open).
- VI669 (warning): a LoRA run (model.lora.rank > 0, else model.lora_rank > 0, or a model.lora_adapter_path) that uses
  the reference (use_kl_loss / use_kl_in_reward) and sets actor_rollout_ref.ref.* keys. With LoRA verl builds no ref
  worker (ref_in_actor: trainer/ppo/v1/trainer_base.py:234-237, :799-807; ray_trainer.py:356-360; main_ppo_v0.py:
  44-49; fully_async_trainer.py:100): the reference log-probs are the actor's with the adapter disabled
  (ray_trainer.py:1266-1277, no_lora_adapter), sized by rollout.log_prob_* (workers/engine_workers.py:616-625) on the
  actor's own engine (actor.fsdp_config / actor.megatron), and ref.* is read only when "ref" is in the worker's role
  (engine_workers.py:543). Tuning ref.* against an OOM changes nothing (verl#3366). verl's validate_config still
  requires one of ref.log_prob_micro_batch_size(_per_gpu) without dynamic batch size (utils/config.py:146, :168-175),
  so a ref key is named only when its value differs from the key that does run: the rollout's namesake for the
  ref.log_prob_* keys the ref worker pops (engine_workers.py:547-552), the actor's (actor.fsdp_config.*, ...) else.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from wizard.check.rules.context import REF, A, M, R, Ctx, Facts

SOURCE = "wizard/check/data/verl_ref_placement.json"


@functools.lru_cache(maxsize=1)
def ref_placement() -> dict[str, Any]:
    """scripts/verl_ref_placement.py's table (forced_offload, forward_only_ref, ref_in_actor, ref_required)."""
    text = resources.files("wizard.check").joinpath("data/verl_ref_placement.json").read_text(encoding="utf-8")
    return json.loads(text)


def _positive(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value > 0


def ref_in_actor(c: Ctx) -> bool:
    """verl's own test (trainer_base.py:234-237): model.lora.rank > 0, else model.lora_rank > 0, or an adapter path."""
    keys = ref_placement()["ref_in_actor"]["keys"]
    rank = c.v(f"{M}.lora.rank") if "lora.rank" in keys else None
    if not _positive(rank):
        rank = c.v(f"{M}.lora_rank") if "lora_rank" in keys else None
    return _positive(rank) or ("lora_adapter_path" in keys and c.v(f"{M}.lora_adapter_path") is not None)


def rule_ref_model(c: Ctx, f: Facts) -> None:
    if not f.use_ref or c.unknown(f"{A}.use_kl_loss", "algorithm.use_kl_in_reward"):
        return
    if ref_in_actor(c):
        _lora_ref_keys(c)
    else:
        _forced_offload(c)


def _forced_offload(c: Ctx) -> None:
    """VI668: an explicit ref.fsdp_config.param_offload / offload_policy = False on an engine that offloads anyway."""
    table = ref_placement()
    strategy = c.v(f"{REF}.strategy")
    site = table["forced_offload"].get(strategy) if isinstance(strategy, str) else None
    if site is None or "dp_ref.fsdp_config" not in table["forward_only_ref"]:
        return
    if c.v(f"{REF}.fsdp_config.forward_only") is not True:
        return
    keys = [k for k in (f"{REF}.fsdp_config.param_offload", f"{REF}.fsdp_config.offload_policy")
            if c.set_by_user(k) and c.v(k) is False]
    if not keys:
        return
    shown = ", ".join(f"{k}=False" for k in keys)
    c.add("VI668", "warning", keys,
          f"{shown} has no effect: the reference engine is forward_only ({table['forward_only_ref']['dp_ref.fsdp_config']}) "
          f"and verl's {strategy} engine CPU-offloads every forward_only engine's parameters whatever it says ({site}), "
          "so the reference is streamed from host memory at each micro-batch of its forward (verl PR#7182)",
          "remove it: verl 0.9.1 has no switch that keeps the FSDP reference on GPU; budget for the slower ref forward "
          "(or fold the KL into a LoRA run, whose reference is the actor itself)")


def _lora_ref_keys(c: Ctx) -> None:
    """VI669: actor_rollout_ref.ref.* set in a run whose reference is the actor with its LoRA adapter disabled."""
    table = ref_placement()
    required = set(table["ref_required"]["keys"])
    mirrored = set(table["ref_log_prob_keys"]["keys"])  # popped by the ref worker; rollout.<same> sizes the actor's
    dynamic = bool(c.v(f"{A}.use_dynamic_bsz"))
    stray = []
    for key in sorted(k for k in c.res.user if k.startswith(f"{REF}.")):
        name, ours = key[len(REF) + 1:], c.v(key)
        runs = f"{R}.{name}" if name in mirrored else f"{A}.{name}"  # the actor's engine computes the reference
        if ours == c.v(runs):
            continue  # the same value as the key that does run
        if name in required and not dynamic and ours is None:
            continue
        stray.append(key)
    if not stray:
        return
    sites = table["ref_in_actor"]["sites"]
    shown = ", ".join(f"{k}={c.v(k)}" for k in stray[:4]) + (f" (+{len(stray) - 4} more)" if len(stray) > 4 else "")
    c.add("VI669", "warning", stray[:6],
          f"{shown} has no effect: with LoRA verl builds no reference worker (ref_in_actor, {sites[0] if sites else ''}); "
          "the reference log-probs are the actor's with the adapter disabled, sized by "
          f"{R}.log_prob_micro_batch_size_per_gpu / log_prob_use_dynamic_bsz / log_prob_max_token_len_per_gpu and "
          f"placed by {A}.fsdp_config (or {A}.megatron)",
          "set the rollout.log_prob_* / actor engine keys instead, and remove the ref.* ones"
          + ("" if dynamic else f" (keep {REF}.log_prob_micro_batch_size_per_gpu equal to the rollout's: "
                                "verl's validate_config requires it)"))
