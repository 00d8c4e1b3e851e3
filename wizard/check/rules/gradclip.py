"""Gradient clipping of the trained roles: which key verl 0.9.1 clips with (paths under site-packages/verl).

- VI791 (warning): actor_rollout_ref.actor.grad_clip or critic.grad_clip set to a value other than the role's
  optimizer clip. The keys are shipped in trainer/config/actor/dp_actor.yaml:29 and critic/dp_critic.yaml:39 and
  declared by the dataclasses (workers/config/actor.py:308 FSDPActorConfig, critic.py:210 FSDPCriticConfig,
  :297 VeOmniCriticConfig), but no code reads them: the engines clip with the role's optim.clip_grad (default 1.0,
  workers/config/optimizer.py:53) -- FSDP fsdp/transformer_impl.py:795-811, VeOmni veomni/transformer_impl.py:389-392,
  Automodel automodel/transformer_impl.py:271, Megatron utils/megatron/optimizer.py:130. The only deprecation shim,
  optimizer.py:54-61, maps optim.grad_clip (inside optim) onto clip_grad, not the role-level key (verl PR#7923).
  wizard/check/data/verl_readers.json (scripts/verl_readers.py) lists both keys as read nowhere. The TorchTitan
  engine clips with torchtitan's own TrainingConfig.max_norm (torchtitan/transformer_impl.py:182-184, 431-433),
  reading neither key: no finding there.
"""

from __future__ import annotations

from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import A, Ctx, Facts

VERL_CLIP_DEFAULT = 1.0  # workers/config/optimizer.py:53 OptimizerConfig.clip_grad
DECLARED = {A: "workers/config/actor.py:308", "critic": "workers/config/critic.py:210, 297"}


def effective_clip(c: Ctx, role: str) -> Any:
    """The max_norm the role's engine clips with: optim.grad_clip when set (optimizer.py:59-61 copies it onto
    clip_grad), else optim.clip_grad."""
    alias = c.v(f"{role}.optim.grad_clip")
    return alias if alias is not None else c.v(f"{role}.optim.clip_grad", VERL_CLIP_DEFAULT)


def _torchtitan(c: Ctx, role: str) -> bool:
    return "torchtitan" in (str(c.v("model_engine") or ""), str(c.v(f"{role}.strategy") or ""))


def rule_role_grad_clip(c: Ctx, f: Facts) -> None:
    """VI791: a role-level grad_clip, which verl never reads, differing from the clip the engine applies."""
    if c.src.recipe:
        return  # a recipe's own worker may read it
    for role in (A, "critic"):
        key = f"{role}.grad_clip"
        if not c.set_by_user(key) or c.unknown(key) or _torchtitan(c, role):
            continue
        if role == "critic" and not f.use_critic:
            continue  # no critic is built: nothing clips with either key
        value, clip = c.v(key), effective_clip(c, role)
        if value is None or c.unknown(f"{role}.optim.clip_grad", f"{role}.optim.grad_clip") or value == clip:
            continue
        alias = c.set_by_user(f"{role}.optim.grad_clip")
        target = f"{role}.optim.grad_clip" if alias else f"{role}.optim.clip_grad"
        movable = not c.set_by_user(f"{role}.optim.clip_grad") and not alias
        c.add("VI791", "warning", (key, target),
              f"{key}={value} is read by nothing in verl 0.9.1 (a dataclass field, {DECLARED[role]}): the engine clips gradients with {target}={clip} (fsdp/transformer_impl.py:795-811, "
              "utils/megatron/optimizer.py:130), so the run clips at max_norm="
              f"{clip}, not {value} (verl PR#7923)",
              f"set {role}.optim.clip_grad={value} instead of {key}" if movable else
              f"remove {key}: {target}={clip} is the clip that applies; set the norm you want there",
              fix=Fix(set={f"{role}.optim.clip_grad": value}, delete=[key]) if movable else None)
