"""VI912: a Megatron role with megatron.use_mbridge=False. verl 0.9.1's Megatron engine builds every model through
Megatron-Bridge and asserts it in its constructor (workers/engine/megatron/transformer_impl.py:191 `assert
self.engine_config.use_mbridge, "use_mbridge must be True"`), when Ray has started the workers; the pre-bridge way
(use_dist_checkpointing with a converted checkpoint and use_mbridge=False) has no engine left to run it
(verl/workers has no legacy Megatron worker). LoRA's own case is VI881 (rules/lora.py)."""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import A, REF, Ctx, Facts


def rule_mbridge(c: Ctx, f: Facts) -> None:
    named = {k for x in c.findings if x.problem.rule == "VI881" for k in x.problem.keys}
    roles = [(A, f.megatron, "actor"),
             # the reference's use_mbridge follows the actor's (oc.select in verl's megatron tree): named only when set
             (REF, f.use_ref and c.v(f"{REF}.strategy") == "megatron" and c.set_by_user(f"{REF}.megatron.use_mbridge"),
              "reference"),
             ("critic", f.use_critic and c.v("critic.strategy") == "megatron", "critic")]
    for prefix, used, role in roles:
        key = f"{prefix}.megatron.use_mbridge"
        if not used or c.unknown(key) or c.v(key) is not False or key in named:
            continue
        c.add("VI912", "error", (key,),
              f"{key}=False: verl 0.9.1's Megatron engine builds the {role} only through Megatron-Bridge and asserts "
              "'use_mbridge must be True' when the worker starts, after Ray is up "
              "(workers/engine/megatron/transformer_impl.py:191)",
              f"set {key}=True (use_dist_checkpointing works with it)", fix=Fix(set={key: True}))
