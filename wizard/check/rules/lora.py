"""LoRA rules (VI880-VI882, VI849): the LoRA block each training engine reads, Megatron-Bridge for Megatron LoRA, and the
weight-sync backend that cannot carry adapters. verl's facts (which block each engine reads, what the trainer and
the rollout engines make of both) are in wizard.verlspec.lora.
"""

from __future__ import annotations

from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import A, M, R, Ctx, Facts, local_path
from wizard.verlspec import lora

# the FSDP engines' flat LoRA keys (workers/config/model.py:122-135) and the Megatron block's keys the FSDP engines
# also read (model.lora.merge: fsdp/transformer_impl.py:996; fully_sharded_loras: vLLM's, vllm_async_server.py:433)
FSDP_KEYS = ("lora_rank", "lora_alpha", "target_modules", "exclude_modules", "lora_adapter_path")
SHARED_BLOCK_KEYS = ("merge", "fully_sharded_loras")


def _model(c: Ctx, prefix: str) -> dict[str, Any]:
    """The LoRA keys of one model section as a mapping wizard.verlspec.lora reads."""
    block = {k[len(prefix) + 6:]: v for k, v in c.res.flat.items() if k.startswith(f"{prefix}.lora.")}
    out: dict[str, Any] = {k: c.v(f"{prefix}.{k}") for k in FSDP_KEYS}
    for k in ("rank", "merge"):
        c.v(f"{prefix}.lora.{k}")
    out["lora"] = block
    return out


def _user_keys(c: Ctx, prefix: str, megatron: bool) -> list[str]:
    """LoRA keys set in the config (not verl's defaults) that the engine of this strategy never reads."""
    if megatron:
        return sorted(f"{prefix}.{k}" for k in FSDP_KEYS if c.set_by_user(f"{prefix}.{k}"))
    return sorted(k for k in c.res.user if k.startswith(f"{prefix}.lora.")
                  and k[len(prefix) + 6:] not in SHARED_BLOCK_KEYS)


def rule_lora(c: Ctx, f: Facts) -> None:
    model = _model(c, M)
    megatron = f.megatron
    rank = lora.engine_rank(model, megatron=megatron)
    other = lora.fsdp_rank(model) if megatron else lora.megatron_rank(model)
    engine = "Megatron" if megatron else str(c.v(f"{A}.strategy") or "FSDP").upper()
    if not rank and (other or (megatron and model.get("lora_adapter_path") is not None)):
        # VI880: the rank sits in the block the other engine reads
        if megatron:
            key = f"{M}.lora_rank" if other else f"{M}.lora_adapter_path"
            alpha = c.v(f"{M}.lora_alpha")
            fix = Fix(set={f"{M}.lora.rank": other, f"{M}.lora.alpha": alpha},
                      delete=[f"{M}.lora_rank", f"{M}.lora_alpha"]) if other else None
            want = (f"set {M}.lora.rank={other} and {M}.lora.alpha={alpha} (Megatron-Bridge's keys) instead of "
                    "lora_rank / lora_alpha" if other else f"set {M}.lora.rank and {M}.lora.adapter_path instead")
            reads = "model.lora.rank (workers/config/megatron_peft.py:23)"
        else:
            key = f"{M}.lora.rank"
            alpha = c.v(f"{M}.lora.alpha")
            fix = Fix(set={f"{M}.lora_rank": other, f"{M}.lora_alpha": alpha}, delete=[f"{M}.lora.rank", f"{M}.lora.alpha"])
            want = f"set {M}.lora_rank={other} and {M}.lora_alpha={alpha} (peft's keys) instead of lora.rank / lora.alpha"
            reads = "model.lora_rank (workers/engine/fsdp/transformer_impl.py:162)"
        consequence = ("verl still keeps the reference inside the actor (ray_trainer.py:360), and the first reference "
                       "pass fails in disable_adapter" if f.use_ref else
                       "verl still starts vLLM with LoRA and keeps no reference worker (ray_trainer.py:360)")
        c.add("VI880", "error", (key, f"{A}.strategy"),
              f"{key} is set but the {engine} engine reads {reads}, which is 0: it trains all weights instead of "
              f"adapters; {consequence}", want, fix=fix)
    elif rank and not megatron and other and other != rank and not lora.merged(model):
        # vLLM sizes its adapter slots from model.lora.rank first (vllm_async_server.py:418-431), the FSDP engine
        # trains model.lora_rank: a larger trained rank does not fit the slots
        c.add("VI880", "error" if rank > other else "warning", (f"{M}.lora_rank", f"{M}.lora.rank"),
              f"{M}.lora_rank={rank} is the rank the FSDP engine trains, but vLLM reads {M}.lora.rank={other} first "
              f"for its adapter slots (vllm_async_server.py:418-431)"
              + (": the trained adapter is larger than the slots and vLLM refuses it at the first weight sync"
                 if rank > other else ": the slots are larger than needed"),
              f"remove {M}.lora.rank (the FSDP engine does not read it)", fix=Fix(delete=[f"{M}.lora.rank"]))
    elif rank:
        ignored = _user_keys(c, M, megatron)
        if ignored:
            c.add("VI880", "warning", tuple(ignored[:6]),
                  f"{', '.join(ignored[:6])}: {'FSDP' if megatron else 'Megatron'} LoRA keys the {engine} engine never "
                  f"reads (it reads {'model.lora.*' if megatron else 'model.lora_rank, lora_alpha, target_modules'})",
                  "remove them" + (f", or set the matching {M}.lora.* keys" if megatron else
                                   f", or set the matching {M}.lora_rank / lora_alpha / target_modules"))
    adapter = model.get("lora_adapter_path")
    if not megatron and not other and isinstance(adapter, str) and not c.unknown(f"{M}.lora_adapter_path"):
        _fsdp_adapter(c, f, adapter, rank)
    # VI881: Megatron LoRA needs Megatron-Bridge (actor, and a critic with its own LoRA)
    roles = [(M, A, megatron, rank)]
    if f.use_critic and c.v("critic.strategy") == "megatron":
        roles.append(("critic.model", "critic", True, lora.megatron_rank(_model(c, "critic.model"))))
    for model_key, engine_key, is_megatron, role_rank in roles:
        if not (is_megatron and role_rank):
            continue
        use, vanilla = c.v(f"{engine_key}.megatron.use_mbridge"), c.v(f"{engine_key}.megatron.vanilla_mbridge")
        if use is False or vanilla is True:
            bad = f"{engine_key}.megatron.use_mbridge" if use is False else f"{engine_key}.megatron.vanilla_mbridge"
            c.add("VI881", "error", (f"{model_key}.lora.rank", bad),
                  f"{model_key}.lora.rank={role_rank} with {bad}={use if use is False else vanilla}: Megatron LoRA is "
                  "Megatron-Bridge's PEFT and verl asserts it when the worker builds its engine, after Ray is up "
                  + ("('use_mbridge must be True', megatron/transformer_impl.py:191)" if use is False else
                     "('LoRA/PEFT only supported via Megatron-Bridge', workers/config/megatron_peft.py:26: the legacy "
                     "mbridge builds no provider)"),
                  f"set {engine_key}.megatron.use_mbridge=True and {engine_key}.megatron.vanilla_mbridge=False",
                  fix=Fix(set={f"{engine_key}.megatron.use_mbridge": True, f"{engine_key}.megatron.vanilla_mbridge": False}))
    # VI882: the delta_sharded weight sync has no adapter export
    backend = c.v(f"{R}.checkpoint_engine.backend")
    if megatron and rank and backend == "delta_sharded":
        c.add("VI882", "error", (f"{R}.checkpoint_engine.backend", f"{M}.lora.rank"),
              "checkpoint_engine.backend=delta_sharded with Megatron LoRA: verl asserts 'megatron delta_sharded does "
              "not support LoRA' at the first weight sync (megatron/transformer_impl.py:1077)",
              "use another checkpoint_engine.backend (naive for a colocated run), or train without LoRA")


def _adapter_rank(c: Ctx, adapter: str) -> tuple[int, Any] | None:
    """(r, lora_alpha) from a local adapter folder's adapter_config.json (peft's), or None."""
    from wizard._io import read_user_file, safe_json

    folder = local_path(c, adapter)
    config = folder / "adapter_config.json" if folder is not None else None
    if config is None or not config.is_file():
        return None
    try:
        data = safe_json(read_user_file(str(config), 1 << 20))
    except (OSError, ValueError):
        return None
    r = data.get("r") if isinstance(data, dict) else None
    return (r, data.get("lora_alpha")) if isinstance(r, int) and not isinstance(r, bool) and r > 0 else None


def _fsdp_adapter(c: Ctx, f: Facts, adapter: str, rank: int) -> None:
    """VI880, FSDP engines, model.lora_adapter_path (workers/config/model.py:135):
    - with lora_rank 0 the engine builds no LoRA (fsdp/transformer_impl.py:162 `_is_lora = lora_rank > 0`, :598), and
      _build_lora_module (:340-352) is the only reader of the adapter path: the adapter is never loaded and all weights
      train; the trainer still counts the run as LoRA (`ref_in_actor`, trainer/ppo/v1/trainer_base.py:237), so the
      reference pass calls disable_adapter on a model without adapters (engine_workers.py:425, transformer_impl.py:1095);
    - with lora_rank set, the engine trains the adapter at its own rank (peft's PeftModel.from_pretrained, :350), while
      vLLM sizes its adapter slots from lora_rank (vllm_async_server.py:418-431): a larger adapter does not fit."""
    key = f"{M}.lora_adapter_path"
    found = _adapter_rank(c, adapter)
    if not rank:
        fix = Fix(set={f"{M}.lora_rank": found[0], **({f"{M}.lora_alpha": found[1]} if found[1] else {})}) if found else None
        c.add("VI880", "error", (key, f"{M}.lora_rank"),
              f"{key} is set but {M}.lora_rank is 0: the FSDP engine builds LoRA only for lora_rank > 0 "
              "(workers/engine/fsdp/transformer_impl.py:162, :598), so the adapter is never loaded and all weights "
              "train; verl still treats the run as LoRA (trainer/ppo/v1/trainer_base.py:237)"
              + (" and the first reference pass calls disable_adapter on a model without adapters "
                 "(engine_workers.py:425)" if f.use_ref else ""),
              f"set {M}.lora_rank={found[0]} (the adapter's r in its adapter_config.json)" if found else
              f"set {M}.lora_rank to the adapter's r (its adapter_config.json)", fix=fix)
    elif found and c.v(f"{R}.name") == "vllm" and rank <= lora.VLLM_LORA_RANKS[-1] and found[0] > lora.vllm_slots(rank):
        c.add("VI880", "error", (key, f"{M}.lora_rank"),
              f"the adapter at {adapter} has r={found[0]} (adapter_config.json), above {M}.lora_rank={rank}: the "
              "FSDP engine trains the adapter at its own rank (fsdp/transformer_impl.py:350), but vLLM's adapter "
              f"slots hold rank {lora.vllm_slots(rank)} (lora_rank rounded up to vLLM's ranks, vllm_async_server.py:418-431, "
              "vllm_rollout/utils.py:83-102), and vLLM refuses the larger adapter at the first weight sync", f"set {M}.lora_rank={found[0]}", fix=Fix(set={f"{M}.lora_rank": found[0]}))


def rule_vision_lora(c: Ctx, f: Facts, shape: Any) -> None:
    """VI849: FSDP LoRA on a vision-language model whose target_modules reach the vision tower: vLLM serves the
    language model's adapters only and ignores the tower's (wizard.verlspec.lora.VISION_LINEARS has the facts), so
    the rollout samples with a tower the actor has moved away from. With lora.merge the merged weights are synced
    whole, the tower's included. A model the catalogue lacks (Qwen3-VL-4B) is scaled from its name as a text model; the
    vision family then comes from the id (wizard.verlspec.lora.family_in_name; verl#6642)."""
    if f.megatron or c.v(f"{R}.name") != "vllm":
        return
    path = c.v(f"{M}.path")
    # a size verl-init does not catalogue (Qwen3-VL-4B) is scaled from the name as a text model: the id names the tower
    family = getattr(shape, "vision", "") or (lora.family_in_name(path) if isinstance(path, str) else "")
    if not family:
        return
    model = _model(c, M)
    if not lora.fsdp_rank(model) or lora.merged(model):
        return
    target, exclude = c.v(f"{M}.target_modules"), c.v(f"{M}.exclude_modules")
    hit = lora.vision_adapters(family, target, exclude)
    if not hit:
        return
    c.add("VI849", "warning", (f"{M}.exclude_modules", f"{M}.target_modules"),
          f"LoRA adapters on {shape.name if shape is not None and shape.vision else path}'s vision tower ({', '.join(n.rsplit('.', 2)[-2] + '.' + n.rsplit('.', 1)[-1] for n in hit[:3])}"
          f"{', ...' if len(hit) > 3 else ''}; target_modules={target}, exclude_modules={exclude}): vLLM serves LoRA "
          "on the language model only and ignores them, so the rollout samples with the tower the actor had before training",
          f"set {M}.exclude_modules='{lora.VISION_EXCLUDE}' (verl's examples/tuning/lora/run_qwen2_5_vl_7b_fsdp.sh)",
          fix=Fix(set={f"{M}.exclude_modules": lora.VISION_EXCLUDE}) if exclude in (None, "") else None)
