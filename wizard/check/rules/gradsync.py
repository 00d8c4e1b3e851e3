"""VI956: deferred FSDP gradient sync keeps the whole model's gradients unsharded on every GPU (paths under
site-packages/verl, verl 0.9.1; real case verl PR#7458, whose thread has a run that "failed ... because of the same
issue" and a measurement that the retained gradient is 4 B per parameter at 1, 2, 4 and 8 ranks alike).

`fsdp_config.use_no_sync_for_gradient_accumulation=True` (the actor's, or `critic.fsdp.`'s) makes the FSDP engine skip
the reduce-scatter on every micro-batch but the last of a mini-batch: FSDP1 runs it under `no_sync()`, FSDP2 under
`set_requires_gradient_sync(False)` (workers/engine/fsdp/transformer_impl.py:692-721, applied per micro-batch at
:749-754). Until the last micro-batch each rank keeps one unsharded gradient per parameter in the reduce dtype, fp32
in verl (:394-398, MixedPrecision reduce_dtype "fp32" unless mixed_precision says otherwise), so the update needs
4 B x trained parameters per GPU more than the sharded state verl-init's estimate counts: it does not shrink with
more GPUs. verl 0.9.1's YAML leaves it off (trainer/config/engine/fsdp.yaml:61, `false`); the dataclass default is
True (workers/config/engine.py:297) and the v0.9.0 release deferred unconditionally (verl PR#7719 backport), so users
turn it back on for throughput. One micro-batch per mini-batch defers nothing (the flag acts on non-final ones).

The estimate (wizard.planner.memory.deferred_grad_gib) adds the term to the update phase; this rule names the key:
an error when the term alone takes the update over the card, a warning when the update was already over or is
tight, an info when the GPU memory is unknown, nothing when it fits. The critic (critic.fsdp.*) is checked the same
way against the update phase, its gradients counted beside it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import A, Ctx, Facts, model_shape
from wizard.check.rules.memory import CRITIC_ENGINE_TOKENS, NO_SYNC

FSDP_STRATEGIES = ("fsdp", "fsdp2", "fsdp_turbo")  # FSDPEngine and its subclasses (fsdp_turbo_impl.py:24)
ENGINE = "workers/engine/fsdp/transformer_impl.py"


def _micro_batches(c: Ctx, f: Facts, critic: bool) -> int | None:
    """Update micro-batches per mini-batch on one rank (None: unknown): a token budget packs the rank's mean-filled
    sequences (workers/engine/utils.py:109-114), a fixed micro-batch splits its share of the mini-batch."""
    from wizard.planner.memory import MEAN_FILL

    mini = f.critic_mini if critic else f.mini
    if not (mini and f.n and f.dp and f.seq):
        return None
    share = -(-mini * f.n // f.dp)
    if critic:  # verl 0.9.1's trainer runs the critic with dynamic batching on one budget (trainer_base.py:267-268)
        budget = (c.int("critic.ppo_infer_max_token_len_per_gpu") or CRITIC_ENGINE_TOKENS) * f.token_sp[2]
    elif f.dynamic:
        budget = (c.int(f"{A}.ppo_max_token_len_per_gpu") or f.seq) * f.sp
    else:
        return -(-share // max(1, c.int(f"{A}.ppo_micro_batch_size_per_gpu") or 1))
    return -(-int(share * f.seq * MEAN_FILL) // max(1, budget))


def rule_deferred_grad_sync(c: Ctx, f: Facts, shape: Any) -> None:
    roles = []
    if not f.megatron and str(c.v(f"{A}.strategy") or "fsdp") in FSDP_STRATEGIES:
        roles.append(("actor", f"{A}.fsdp_config.{NO_SYNC}", f"{A}.strategy", shape, False))
    if f.use_critic and str(c.v("critic.strategy") or "fsdp") in FSDP_STRATEGIES:
        same = c.v("critic.model.path") == c.v("actor_rollout_ref.model.path")
        critic_shape = shape if same else model_shape(c, "critic.model.path")[0]
        roles.append(("critic", f"critic.fsdp.{NO_SYNC}", "critic.strategy", critic_shape, True))
    for role, key, strategy, role_shape, critic in roles:
        if c.unknown(key) or c.v(key) is not True:
            continue
        micro = _micro_batches(c, f, critic)
        if micro == 1:
            continue  # one micro-batch per mini-batch: the last one syncs, nothing is deferred
        _report(c, f, role, key, strategy, role_shape, micro, critic)


def _report(c: Ctx, f: Facts, role: str, key: str, strategy: str, shape: Any, micro: int | None, critic: bool) -> None:
    from wizard.planner.memory import DEFERRED_GRAD_BYTES, GIB, estimate

    if shape is None:
        return
    trained = shape.lora_params(f.lora) if (f.lora and not critic) else shape.params
    extra = DEFERRED_GRAD_BYTES * trained / GIB
    many = f"~{micro} micro-batches" if micro else "several micro-batches"
    what = (f"{key}=True: the FSDP {role} skips the reduce-scatter on all but the last of {many} per mini-batch "
            f"({ENGINE}:692-721), so every GPU keeps the whole {shape.params_b:.1f}B model's gradients unsharded in fp32 "
            f"until then: +{extra:.1f} GiB per GPU in the update phase, however many GPUs share the model")
    est, layout = getattr(c, "memory", None), getattr(c, "memory_layout", None)
    if est is None or layout is None:
        sev, msg = "info", what + "; pass --gpu-memory-gb to check that the update still fits"
    else:
        cap = est.capacity_gib
        if critic:  # the critic's gradients beside the update phase the estimate holds
            with_gib, without_gib, tight = est.phase_gib("update") + extra, est.phase_gib("update"), False
        else:  # the estimate already counts the actor's (wizard.planner.memory.deferred_grad_gib)
            without = estimate(shape, replace(layout, deferred_grad_sync=False))
            with_gib, without_gib = est.phase_gib("update"), without.phase_gib("update")
            tight = "update" in est.tight_phases
        if with_gib > cap >= without_gib:
            sev, msg = "error", (f"{what}: the update needs about {with_gib:.1f} GiB per GPU with it, "
                                 f"{without_gib:.1f} GiB without, on a {cap:.1f} GiB card")
        elif with_gib > cap or tight or with_gib * 1.2 > cap:
            sev, msg = "warning", (f"{what}: about {with_gib:.1f} GiB per GPU in the update ({without_gib:.1f} GiB "
                                   f"without it) on a {cap:.1f} GiB card")
        else:
            return  # fits with room: a speed-for-memory trade the card affords
    c.add("VI956", sev, (key, strategy), msg, f"set {key}=False (verl 0.9.1's YAML default: reduce-scatter every "
          "micro-batch)", fix=Fix(set={key: False}))
