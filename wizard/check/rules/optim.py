"""What a trained role's optimizer and engine really receive of its optim / engine settings (verl 0.9.1, paths under
site-packages/verl). The keys each engine acts on come from wizard/check/data/verl_optim.json, which
scripts/verl_optim.py derives by running verl's own functions (nothing listed by hand).

- VI981 (warning): an optim key of a Megatron actor/critic that Megatron never receives. verl builds Megatron-Core's
  OptimizerConfig in init_megatron_optim_config (utils/megatron/optimizer.py:120-218; called from
  workers/engine/megatron/transformer_impl.py:539-548) and the LR scheduler in get_megatron_optimizer_param_scheduler
  (:232-268). `optim.betas` (optim/megatron.yaml) is passed to neither, only read on the Muon branch to derive
  muon_extra_scale_factor (:144): Adam runs with Megatron-Core's own betas (verl#2937; the maintainer's way is
  override_optimizer_config.adam_beta1/adam_beta2, which :209-212 copy into OptimizerConfig verbatim).
- VI982 (warning): an FSDP-section key (fsdp_config.dtype) that no engine the role's strategy runs reads.
  EngineConfig.dtype is read only by the Megatron engine (megatron/transformer_impl.py:292); the FSDP engine computes
  in mixed_precision.param_dtype, bf16 when unset (fsdp/transformer_impl.py:391-403, autocast :1555-1565), and keeps
  the weights in model_dtype (:258-264).
- VI983 (warning; error on a card below compute capability 8.0): critic.model.override_config.attn_implementation
  set to a non-flash attention. The actor honours it (workers/config/model.py:185-191), but the FSDP engine loads a
  value model with load_valuehead_model (fsdp/transformer_impl.py:289-305), which passes
  attn_implementation="flash_attention_2" to both of its from_pretrained calls (utils/model.py:645-651, 670-676):
  without flash-attn the critic fails to build, on a pre-Ampere card its first forward stops (verl#5210, PR#6495).
- VI984 (warning): a trained FSDP actor/critic loaded in 16 bits (fsdp_config.model_dtype=bf16/fp16). The engine
  loads the weights in that dtype and casts the module to it (fsdp/transformer_impl.py:258-264, 276-281, 333), then
  builds the optimizer on those parameters (:496-499 → workers/config/optimizer.py:298-351, a plain
  torch.optim.AdamW): no fp32 master weights, AdamW's moments in 16 bits. AdamW moves a weight by about lr a step;
  a 16-bit float keeps `MANTISSA_BITS + 1` significant bits, so a step below half a unit in the last place —
  guaranteed once lr/|w| ≤ 2^-(bits+1), 2^-9 for bf16 — rounds to nothing (verl#5308).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from wizard.check.rules.context import A, M, REF, Ctx, Facts
from wizard.check.rules.readers import readers_table
from wizard.verlspec.hardware import without_bf16

# significand bits stored by the 16-bit floats (IEEE half: 10; bfloat16: 7), the implicit bit not counted
MANTISSA_BITS = {"bf16": 7, "fp16": 10}
DTYPE_NAMES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16"}
FLASH = "flash_attention_2"  # utils/model.py:649, :674 (load_valuehead_model)
# Megatron-Core's OptimizerConfig fields for what verl's optim section spells otherwise (verl#2937's answer)
MEGATRON_SPELLING = {"betas": ("adam_beta1", "adam_beta2")}
# what the FSDP engine reads for the intent of a key only another engine reads
FSDP_EQUIVALENT = {"dtype": "mixed_precision.param_dtype (the compute dtype, fsdp/transformer_impl.py:391-403) or "
                            "model_dtype (the dtype the weights are kept in, :258-264)"}


@functools.lru_cache(maxsize=1)
def optim_table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_optim.json").read_text(encoding="utf-8")
    return json.loads(text)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _override(c: Ctx, opt: str, field: str) -> Any:
    """optim.override_optimizer_config.<field>: the resolved config holds it flattened, or as a dict."""
    whole = c.v(f"{opt}.override_optimizer_config")
    return whole.get(field) if isinstance(whole, dict) else c.v(f"{opt}.override_optimizer_config.{field}")


def _megatron_context(c: Ctx, opt: str, engine: str) -> dict[str, Any]:
    muon = optim_table()["megatron"]["muon_algorithms"]
    dtype = DTYPE_NAMES.get(str(c.v(f"{engine}.dtype") or "bfloat16").lower(), "fp32")
    return {"optimizer": "muon" if str(c.v(f"{opt}.optimizer") or "adam").lower() in muon else "adam",
            "precision": dtype, "use_precision_aware_optimizer": c.v(f"{opt}.use_precision_aware_optimizer") is True,
            "muon_match_adamw_update_rms": c.v(f"{opt}.muon_match_adamw_update_rms") is True
            and str(c.v(f"{opt}.optimizer") or "").lower() in muon}


def _where_it_counts(ctx: dict[str, Any], contexts: list[dict[str, Any]], idx: list[int]) -> str:
    if not idx:
        return "in no configuration"
    nearest = min((contexts[i] for i in idx), key=lambda o: sum(o[k] != ctx[k] for k in ctx))
    return "only with " + " and ".join(f"{k}={v}" if k != "precision" else f"megatron.dtype {v}"
                                       for k, v in nearest.items() if v != ctx[k])


def rule_megatron_optim(c: Ctx, f: Facts) -> None:
    table = optim_table()["megatron"]
    roles = [(A, f"{A}.strategy", f"{A}.megatron")]
    if f.use_critic:
        roles.append(("critic", "critic.strategy", "critic.megatron"))
    for role, strategy, engine in roles:
        if c.v(strategy) != "megatron":
            continue
        opt = f"{role}.optim"
        ctx = _megatron_context(c, opt, engine)
        at = table["contexts"].index(ctx) if ctx in table["contexts"] else None
        if at is None:
            continue
        for key, idx in sorted(table["effective"].items()):
            full = f"{opt}.{key}"
            value = c.v(full)
            if at in idx or not c.set_by_user(full) or c.unknown(full) or _same(value, table["defaults"].get(key)):
                continue
            spelled = MEGATRON_SPELLING.get(key)
            if spelled and all(_override(c, opt, s) is not None for s in spelled):
                continue  # the Megatron spelling is set too: it is what Megatron gets
            if spelled and isinstance(value, (list, tuple)) and len(value) == len(spelled):
                hint = ("set it the way Megatron receives it: " + ", ".join(
                    f"+{opt}.override_optimizer_config.{s}={v}" for s, v in zip(spelled, value))
                        + " (copied into OptimizerConfig verbatim, utils/megatron/optimizer.py:209-212), and drop "
                        f"{full}")
            else:
                hint = (f"remove {full}, or pass the Megatron-Core OptimizerConfig field through "
                        f"{opt}.override_optimizer_config (utils/megatron/optimizer.py:209-212)")
            c.add("VI981", "warning", (full,),
                  f"{full}={value} never reaches Megatron: verl's init_megatron_optim_config and LR scheduler "
                  f"(utils/megatron/optimizer.py:120-268) pass it {_where_it_counts(ctx, table['contexts'], idx)}, so "
                  "Megatron-Core trains with its own default" + (" betas (0.9, 0.999)" if key == "betas" else ""),
                  hint)


def _strategies_reading(files: list[str]) -> set[str] | None:
    """The strategies whose engines run any of the files (None: a file outside every engine scope runs always)."""
    scopes = readers_table()["scopes"]
    out: set[str] = set()
    for where in files:
        rel = where.split(":", 1)[0].removeprefix("verl/")
        hit = [s for s in scopes.values() if any(rel.startswith(p) for p in s["paths"])]
        if not hit:
            return None
        for s in hit:
            for cond in s["any"]:
                if cond["key"] == "@strategy":
                    out.update(cond["in"])
    return out


def rule_fsdp_unread(c: Ctx, f: Facts) -> None:
    reads = optim_table()["engine_reads"]
    roles = [(f"{A}.fsdp_config", f"{A}.strategy"), (f"{REF}.fsdp_config", f"{A}.strategy")]
    if f.use_critic:
        roles.append(("critic.fsdp", "critic.strategy"))
    for section, strategy_key in roles:
        strategy = c.v(strategy_key)
        if strategy not in ("fsdp", "fsdp2"):
            continue
        for field, files in sorted(reads.items()):
            key = f"{section}.{field}"
            if not files or not c.set_by_user(key):
                continue
            readers = _strategies_reading(files)
            if readers is None or strategy in readers:
                continue
            value = c.v(key)
            c.add("VI982", "warning", (key, strategy_key),
                  f"{key}={value} does nothing with {strategy_key}={strategy}: only the "
                  f"{'/'.join(sorted(readers))} engine reads engine_config.{field} ({', '.join(files[:3])})"
                  + ("; the FSDP engine computes in mixed_precision.param_dtype, bf16 when unset "
                     "(fsdp/transformer_impl.py:391-403, autocast :1555-1565)" if field == "dtype" else ""),
                  f"remove it; for the FSDP engine set {section}."
                  + FSDP_EQUIVALENT.get(field, "<the FSDP engine's own key> (engine/fsdp.yaml)")
                  + (f", e.g. +{section}.mixed_precision.param_dtype={'fp16' if DTYPE_NAMES.get(str(value).lower()) == 'fp16' else 'bf16'}"
                     if field == "dtype" else ""))


def _value_model_strategies() -> set[str]:
    scope = readers_table()["scopes"].get("engine:fsdp/transformer_impl")
    return set(scope["any"][0]["in"]) - {"veomni"} if scope else {"fsdp", "fsdp2"}


def rule_critic_attention(c: Ctx, f: Facts) -> None:
    key = "critic.model.override_config.attn_implementation"
    attn = c.v(key)
    if not f.use_critic or not c.set_by_user(key) or not isinstance(attn, str) or attn.startswith("flash_attention"):
        return
    if c.v("critic.strategy") not in _value_model_strategies():
        return
    old = without_bf16(c.hw.gpu_type)
    card = f" on {c.hw.gpu_type} (compute capability {old[1][0]}.{old[1][1]}: flash-attn needs 8.0)" if old else ""
    c.add("VI983", "error" if old else "warning", (key,),
          f"{key}={attn} is ignored: verl builds the critic with load_valuehead_model, which asks transformers for "
          f"attn_implementation=\"{FLASH}\" in both its from_pretrained calls (utils/model.py:645-651, 670-676; "
          f"called from workers/engine/fsdp/transformer_impl.py:289-305){card}, so the critic needs flash-attn "
          "installed" + (" and stops at its first forward" if old else " where it runs (else its build fails with "
                         "'FlashAttention2 has been toggled on, but it cannot be used')"),
          "install flash-attn where the critic runs" + (" (not possible on this card: use a compute capability 8.0+ "
                                                        "GPU, or an estimator without a critic, e.g. grpo)" if old
                                                        else "") + "; verl 0.9.1 has no key for the critic's attention")


def rule_half_master(c: Ctx, f: Facts) -> None:
    roles = [("actor", f"{A}.fsdp_config", f"{A}.strategy")]
    if f.use_critic:
        roles.append(("critic", "critic.fsdp", "critic.strategy"))
    lora = (c.int(f"{M}.lora_rank") or 0) > 0 or (c.int(f"{M}.lora.rank") or 0) > 0
    for role, section, strategy_key in roles:
        if c.v(strategy_key) not in ("fsdp", "fsdp2") or (role == "actor" and lora):
            continue  # LoRA trains adapters PEFT keeps in fp32, not the 16-bit base weights
        key = f"{section}.model_dtype"
        half = DTYPE_NAMES.get(str(c.v(key)).lower())
        opt = f"{A if role == 'actor' else role}.optim"
        if half is None or _override(c, opt, "bf16_stochastic_round") is True:
            continue
        lr = c.num(f"{opt}.lr")
        where = ""
        if lr is not None and lr > 0:
            rel = 2.0 ** -(MANTISSA_BITS[half] + 2)  # half an ulp, relative, at the top of a binade
            where = (f"; AdamW moves a weight by about lr={lr:g} a step, less than half a {half} step for every "
                     f"|w| > lr·2^{MANTISSA_BITS[half] + 2} = {lr / rel:.3g} ({half} keeps {MANTISSA_BITS[half] + 1} "
                     "significant bits), so those updates round to nothing")
        c.add("VI984", "warning", (key,),
              f"{key}={c.v(key)} on the trained {role}: verl loads and keeps its weights in {half} "
              "(workers/engine/fsdp/transformer_impl.py:258-264, 333) and builds the optimizer on them (:496-499, "
              "workers/config/optimizer.py:298-351): no fp32 master weights, AdamW's moments in " + half + where,
              f"drop {key} (the engine then trains an fp32 copy, :260-262, and computes in "
              f"{section}.mixed_precision.param_dtype, bf16 by default); keep 16-bit model_dtype for the ref only")
