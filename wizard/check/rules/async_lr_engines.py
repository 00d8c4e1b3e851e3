"""The fully async trainer's optimizer on an engine that reads optim.total_training_steps whatever the schedule
(real cases R91-01, verl#6987: Megatron; R91-02, verl#6683: VeOmni). Paths under site-packages/verl, verl 0.9.1.

- VI410: fully_async_main builds the trainer's workers, and with them the optimizer and its LR scheduler, before it
  knows the run's length: FullyAsyncTaskRunner creates the trainer and runs its init_workers
  (experimental/fully_async_policy/fully_async_main.py:78, :155) and only then asks the rollouter for
  total_train_steps and calls set_total_train_steps (:84-92), which writes optim.total_training_steps into the
  driver's own copy of the config (fully_async_trainer.py:356-367). The workers keep the yaml's
  total_training_steps=-1 (trainer/config/optim/megatron.yaml:10).
  * Megatron (strategy megatron; MindSpeed on NPU registers the same backend, workers/engine/mindspeed/
    transformer_impl.py:56): get_megatron_optimizer_param_scheduler takes lr_decay_steps = total_training_steps
    when optim.lr_decay_steps is null, its default (utils/megatron/optimizer.py:239-242; megatron.yaml:32), and
    hands it to Megatron-core's OptimizerParamScheduler (:251-257, called from workers/engine/megatron/
    transformer_impl.py:553-555), whose constructor asserts lr_decay_steps > 0: the run stops inside
    trainer.init_workers with `AssertionError: assert self.lr_decay_steps > 0`, the trainer's GPUs booked, whatever
    lr_decay_style says (constant included). Error. verl's own Megatron fully async scripts all set
    optim.lr_decay_steps (experimental/fully_async_policy/shell/*megatron*.sh).
  * VeOmni (strategy veomni): VeOmniEngine._build_lr_scheduler passes train_steps=optim.total_training_steps to
    veomni's build_lr_scheduler whatever lr_scheduler_type is (workers/engine/veomni/transformer_impl.py:286-297):
    the schedule is laid out over -1 steps; verl#6683 reports the LR stuck at 0. Warning (veomni's arithmetic is
    outside verl).
  The FSDP engines read the total only for cosine or a warmup ratio: VI618 (rules/async_budget.py) covers those and
  leaves these two engines to this rule. An explicit optim.total_training_steps > 0 reaches the workers and fixes
  both (for Megatron an explicit optim.lr_decay_steps > 0 does too). The critic's optimizer (critic.optim) is built
  the same way. tests/test_async_lr_engines.py calls verl's own get_megatron_optimizer_param_scheduler on the CPU.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.async_budget import MAIN, TOTAL, _active, _updates, optim_roles
from wizard.check.rules.context import Ctx, Facts

# strategy -> (severity, what the engine makes of total_training_steps=-1, the key that also fixes it or None)
ENGINES: dict[str, tuple[str, str, str | None]] = {
    "megatron": ("error", "Megatron takes lr_decay_steps = total_training_steps = -1 when optim.lr_decay_steps is "
                 "null (utils/megatron/optimizer.py:239-242) and Megatron-core's OptimizerParamScheduler asserts "
                 "lr_decay_steps > 0 (:251-257): the run stops inside the trainer's init_workers, its GPUs booked, "
                 "whatever lr_decay_style says", "lr_decay_steps"),
    "veomni": ("warning", "VeOmniEngine builds its LR scheduler with train_steps = total_training_steps = -1 "
               "whatever lr_scheduler_type says (workers/engine/veomni/transformer_impl.py:286-297); verl#6683 "
               "reports the LR stuck at 0", None),
}


def lr_engine_owns(c: Ctx, role: str) -> bool:
    """True where this rule, not VI618, speaks for the role's optimizer (its engine is in ENGINES)."""
    return c.v(f"{role}.strategy") in ENGINES


def rule_fully_async_lr_engine(c: Ctx, f: Facts) -> None:
    """VI410: a Megatron or VeOmni optimizer under fully_async_main without optim.total_training_steps."""
    if not _active(c):
        return
    for role, optim in optim_roles(f):
        strategy = c.v(f"{role}.strategy")
        if strategy not in ENGINES or c.unknown(f"{role}.strategy"):
            continue
        total_key = f"{optim}.total_training_steps"
        if c.unknown(total_key) or (c.int(total_key) or -1) > 0:
            continue
        severity, what, also = ENGINES[strategy]
        if also and (c.unknown(f"{optim}.{also}") or (c.int(f"{optim}.{also}") or -1) > 0):
            continue
        n = _updates(c)
        keys = (f"{role}.strategy", total_key, *((f"{optim}.{also}",) if also else ()))
        c.add("VI410", severity, keys,
              f"{role}.strategy={strategy} under fully_async_main with {total_key} unset (-1): the trainer's workers "
              f"build the optimizer in init_workers ({MAIN}:78, :155) before set_total_train_steps ({MAIN}:90-92) "
              f"fills the total in the driver's config only (fully_async_trainer.py:356-367); {what}",
              f"set {total_key}={n if n else 'N'} (the actor updates: {TOTAL} ÷ (ppo_mini_batch_size × "
              f"require_batches)) so the workers get it" + (f", or {optim}.{also} > 0 as verl's own Megatron fully "
                                                          "async scripts do" if also else ""),
              fix=Fix(set={total_key: n}) if n else None)
