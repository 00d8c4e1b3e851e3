"""VI988: rollout engine arguments verl never hands to the engine.

verl's rollout servers read one child of a rollout config's `engine_kwargs`, named after their engine:
`engine_kwargs.get("vllm")` (workers/rollout/vllm_rollout/vllm_async_server.py:287, 1130-1132),
`.get("sglang")` (sglang_rollout/async_sglang_server.py:276), `.get("trtllm")` (trtllm_rollout/trtllm_async_server.py:195),
and the distillation teachers' `engine_kwargs.get("vllm")` (workers/config/distillation.py:195-208). RolloutConfig keeps
`engine_kwargs` a free dict (workers/config/rollout.py:137), so a key set directly under it
(`+rollout.engine_kwargs.swap_space=32`, the pre-0.5 spelling of verl PR#1442) composes and is then dropped, and keys
under another engine's child are never read by this run's engine. The engine names come from verl's own tree: the
children of `actor_rollout_ref.rollout.engine_kwargs` in its defaults (trainer/config/rollout/rollout.yaml:139-148).
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

ROLLOUTS = ("actor_rollout_ref.rollout", "reward.reward_model.rollout")  # RolloutConfig sections with an engine name
TEACHERS = "distillation.teacher_models."  # …<teacher>.inference: a RolloutConfig too (vLLM only in 0.9.1's check)


def engine_names(c: Ctx) -> set[str]:
    head = "actor_rollout_ref.rollout.engine_kwargs."
    return {k[len(head):].split(".")[0] for k in c.res.defaults_flat if k.startswith(head)}


def _section(key: str) -> tuple[str, str] | None:
    """(the rollout section, the path under its engine_kwargs) of a user key, or None."""
    before, sep, after = key.partition(".engine_kwargs.")
    if not sep or not after:
        return None
    if before in ROLLOUTS or (before.startswith(TEACHERS) and before.endswith(".inference")):
        return before, after
    return None


def rule_engine_kwargs(c: Ctx, f: Facts) -> None:
    engines = engine_names(c)
    if not engines:
        return
    for key in sorted(c.res.user):
        found = _section(key)
        if found is None or c.unknown(key):
            continue
        section, path = found
        child = path.split(".")[0]
        name = c.v(f"{section}.name")
        engine = name if isinstance(name, str) and name in engines else None
        if child not in engines:
            target = f"{section}.engine_kwargs.{engine}.{path}" if engine else None
            c.add("VI988", "warning", (key,),
                  f"{key}={c.v(key)!r} sits directly under engine_kwargs: verl hands the engine only "
                  f"{section}.engine_kwargs.<engine> ({', '.join(sorted(engines))}; vllm_async_server.py:287, "
                  "async_sglang_server.py:276), so it is accepted and dropped",
                  f"set +{target} instead" if target else
                  f"move it under {section}.engine_kwargs.<the engine's name>",
                  fix=Fix(set={target: c.v(key)}, delete=[key], plus=[target]) if target else None)
        elif engine is not None and child != engine:
            c.add("VI988", "info", (key, f"{section}.name"),
                  f"{key} is for {child}, but {section}.name={engine}: its server reads "
                  f"engine_kwargs.{engine} only, so this setting is not used in this run",
                  f"move it to {section}.engine_kwargs.{engine} if {engine} takes it, or remove it")
