"""Performance switches verl 0.9.1's training engines set aside without an error (paths under site-packages/verl; the
table is wizard/check/data/verl_engine_flags.json, written from verl's source by scripts/verl_engine_flags.py).

- VI689 (warning): a role-level key the FSDP engine never reads, because nothing carries it into the engine config
  it reads from: actor_rollout_ref.actor.use_torch_compile / actor_rollout_ref.ref.use_torch_compile. The FSDP actor
  and ref configs declare the field (workers/config/actor.py:174), but their engine is fsdp_config
  (FSDPActorConfig.__post_init__, actor.py:319-325, which copies only strategy and the Ulysses size), the generated
  trainer YAML gives fsdp_config.use_torch_compile a literal `true` (trainer/config/_generated_ppo_trainer.yaml:44,
  :252) rather than the role value, and the engine compiles entropy_from_logits from
  self.engine_config.use_torch_compile (workers/engine/fsdp/transformer_impl.py:183-186). Since the legacy workers
  are gone nothing else reads the role key, so `actor.use_torch_compile=False` leaves torch.compile on
  (verl-recipe PR#150 moved its DAPO scripts to fsdp_config.use_torch_compile for this reason).
- VI690 (warning): model.use_fused_kernels=True on the Megatron engine where the engine turns it off again:
  MegatronEngine._maybe_enable_fused_kernels (workers/engine/megatron/transformer_impl.py:522-537) sets
  engine_config.use_fused_kernels=False, with only a warning_once in the worker log, when use_remove_padding is off,
  the model is a value model (the critic), or model.mtp.enable is on (:526-531). The engine takes both flags from the
  model config (workers/engine_workers.py:114-115). The training forward then materialises the full [tokens, vocab]
  logits the fused kernel exists to avoid, so a long-context run sized for fused kernels runs out of memory
  (verl PR#7826: MTP rollout on Qwen3.5 at 128k).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import A, M, REF, Ctx, Facts

ROLE_PREFIX = {"actor": A, "ref": REF}
FSDP = ("fsdp", "fsdp2")


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_engine_flags.json").read_text(encoding="utf-8")
    return json.loads(text)


def rule_unfed_role_keys(c: Ctx, f: Facts) -> None:
    for row in table()["unfed_role_keys"]:
        name = row["name"]
        for role, where in row["roles"].items():
            prefix = ROLE_PREFIX[role]
            key, engine_key = f"{prefix}.{name}", f"{prefix}.fsdp_config.{name}"
            if role == "ref" and not f.use_ref:
                continue  # no reference model: VI844 says its keys are unused
            if not c.set_by_user(key) or c.unknown(key, engine_key, f"{prefix}.strategy"):
                continue
            if c.v(f"{prefix}.strategy") not in FSDP or c.v(key) == c.v(engine_key):
                continue
            value, runs = c.v(key), c.v(engine_key)
            c.add("VI689", "warning", (key, engine_key),
                  f"{key}={value} is never read: verl's FSDP engine takes {name} from {engine_key} "
                  f"(={runs}, {where['at']}; read at {row['read']}), and nothing copies the role-level value there, "
                  f"so the engine runs with {name}={runs} (verl-recipe PR#150)",
                  f"set {engine_key}={value} instead (and remove {key})",
                  fix=Fix(set={engine_key: value}, delete=[key]))


def _switch_off_reason(c: Ctx, model: str, is_critic: bool) -> tuple[str, tuple[str, ...]] | None:
    """Why the Megatron engine turns fused kernels off for this model config, per the table's conditions."""
    for cond in table()["megatron_fused_off"]["conditions"]:
        if cond == "not use_remove_padding" and c.v(f"{model}.use_remove_padding") is False:
            return f"{model}.use_remove_padding=False", (f"{model}.use_remove_padding",)
        if cond == "is_value_model" and is_critic:
            return "the critic is a value model", ()
        if cond == "mtp.enable" and c.v(f"{model}.mtp.enable") is True:
            return f"{model}.mtp.enable=True", (f"{model}.mtp.enable",)
    return None


def rule_megatron_fused_off(c: Ctx, f: Facts) -> None:
    spec = table()["megatron_fused_off"]
    for model, strategy, is_critic in ((M, f"{A}.strategy", False), ("critic.model", "critic.strategy", True)):
        fused = f"{model}.use_fused_kernels"
        if is_critic and not f.use_critic:
            continue
        if c.unknown(fused, strategy) or c.v(strategy) != "megatron" or c.v(fused) is not True:
            continue
        found = _switch_off_reason(c, model, is_critic)
        if found is None:
            continue
        why, keys = found
        hint = (f"drop {fused}=True (it is off anyway) and size the run for full logits, e.g. smaller token budgets "
                f"or more context parallelism" if is_critic or why.endswith("mtp.enable=True") else
                f"set {model}.use_remove_padding=True to keep the fused kernels")
        c.add("VI690", "warning", (fused, *keys),
              f"{fused}=True is switched off by the Megatron engine because {why} ({spec['at']}; only a warning in the "
              f"worker log): the training forward materialises the full [tokens, vocab] logits instead, so memory "
              f"sized for fused kernels is exceeded on long sequences (verl PR#7826)", hint)
