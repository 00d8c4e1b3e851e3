"""What verl 0.9.1's fully async trainer (verl/experimental/fully_async_policy, paths under site-packages/verl)
derives from the run's length, and when it does so (real cases R50-01, verl#6684; R50-03, verl#6461).

- VI618 (warning): an LR schedule that needs the run's length. FullyAsyncTaskRunner creates the trainer first
  (fully_async_policy/fully_async_main.py:78) and its init_workers (:155) builds the actor's engine, optimizer and
  LR scheduler (workers/engine_workers.py:179 -> workers/engine/fsdp/transformer_impl.py:620); only afterwards does
  it ask the rollouter for total_train_steps and call set_total_train_steps (fully_async_main.py:90-92), which
  writes optim.total_training_steps into the trainer's own copy of the config (fully_async_trainer.py:356-367):
  the workers never see it and build the scheduler with actor.yaml's total_training_steps=-1 (trainer/config/actor/
  actor.yaml:157). On the FSDP engines a warmup given as lr_warmup_steps_ratio (lr_warmup_steps <= 0) becomes
  int(ratio × -1) = 0 steps (transformer_impl.py:514-516), and lr_scheduler_type=cosine runs
  get_cosine_schedule_with_warmup with num_training_steps=-1 (:523-530): the LR jumps between lr and
  lr × min_lr_ratio every step (utils/torch_functional.py:756-763). Megatron and VeOmni read the same -1
  whatever the schedule (utils/megatron/optimizer.py:241-249, workers/engine/veomni/transformer_impl.py:286-297):
  VI410 (rules/async_lr_engines.py) reports those engines, VI618 the FSDP ones. The critic's optimizer
  (critic.optim) is built the same way. An explicit optim.total_training_steps > 0 reaches the workers and fixes
  both; tests/test_check_fully_async.py builds verl's own FSDPEngine scheduler with -1 and with a real total.
- VI619 (warning): rollout.total_rollout_steps counts PROMPTS (the rollouter's global_steps grows by one per prompt
  fed, fully_async_rollouter.py:878-884), and fully_async_ppo_trainer.yaml sets it to 100
  (experimental/fully_async_policy/config/fully_async_ppo_trainer.yaml:64). The rollouter generates
  min(total_rollout_steps, len(dataloader) × trainer.total_epochs) prompts (fully_async_rollouter.py:405-407) and the
  trainer updates the actor once per ppo_mini_batch_size × require_batches of them (fully_async_trainer.py:157-159),
  syncing weights every trigger_parameter_sync_step updates (:684-688); total_train_steps is
  int(total_rollout_steps / (required_samples × trigger_parameter_sync_step)) (fully_async_rollouter.py:498-501).
  The finding: the yaml's 100 left in place, or a total below one weight-sync cycle (total_train_steps = 0): the run
  ends, as a success, after a handful of updates.
"""

from __future__ import annotations

from wizard.check.rules.context import A, Ctx, Facts

ENTRY = "fully_async"
MAIN = "experimental/fully_async_policy/fully_async_main.py"
TOTAL = "rollout.total_rollout_steps"
YAML_TOTAL = 100  # fully_async_ppo_trainer.yaml:64
REQ, TRIG = "async_training.require_batches", "async_training.trigger_parameter_sync_step"
OWN_RULE_ENGINES = ("megatron", "veomni")  # their optimizer is VI410's (rules/async_lr_engines.py ENGINES)


def _active(c: Ctx) -> bool:
    return c.src.entry == ENTRY and not c.src.recipe


def _updates(c: Ctx) -> int | None:
    """The actor updates the run makes: total_rollout_steps // (ppo_mini_batch_size × require_batches)."""
    total, mini, req = c.int(TOTAL), c.int(f"{A}.ppo_mini_batch_size"), c.int(REQ)
    if None in (total, mini, req) or mini <= 0 or req <= 0 or c.unknown(TOTAL):
        return None
    return total // (mini * req)


def _schedule_faults(c: Ctx, optim: str) -> list[tuple[str, str]]:
    """(key, what verl's FSDP engine makes of it with total_training_steps=-1) for one optimizer config."""
    out = []
    warm, ratio = c.v(f"{optim}.lr_warmup_steps"), c.num(f"{optim}.lr_warmup_steps_ratio")
    if ratio and ratio > 0 and (warm is None or (isinstance(warm, (int, float)) and warm <= 0)):
        out.append((f"{optim}.lr_warmup_steps_ratio", f"lr_warmup_steps_ratio={ratio} gives int({ratio} × -1) = 0 "
                    "warmup steps (workers/engine/fsdp/transformer_impl.py:514-516)"))
    if c.v(f"{optim}.lr_scheduler_type") == "cosine":
        out.append((f"{optim}.lr_scheduler_type", "lr_scheduler_type=cosine runs with num_training_steps=-1 "
                    "(transformer_impl.py:523-530): the LR jumps between lr and lr × min_lr_ratio every step "
                    "(utils/torch_functional.py:756-763)"))
    return out


def optim_roles(f: Facts) -> list[tuple[str, str]]:
    """(role, its optim node) of each model a fully async run trains: the actor, and the critic when one runs."""
    return [("actor_rollout_ref.actor", f"{A}.optim")] + ([("critic", "critic.optim")] if f.use_critic else [])


def rule_fully_async_lr_schedule(c: Ctx, f: Facts) -> None:
    """VI618: a schedule that needs optim.total_training_steps, which the fully async workers never receive."""
    if not _active(c):
        return
    for role, optim in optim_roles(f):
        total_key = f"{optim}.total_training_steps"
        if c.unknown(total_key) or (c.int(total_key) or -1) > 0:
            continue
        if c.v(f"{role}.strategy") in OWN_RULE_ENGINES:
            continue  # VI410 (rules/async_lr_engines.py): these engines read the total whatever the schedule
        faults = [(k, why) for k, why in _schedule_faults(c, optim) if not c.unknown(k)]
        if not faults:
            continue
        n = _updates(c)
        c.add("VI618", "warning", (*(k for k, _ in faults), total_key),
              f"{'; '.join(why for _, why in faults)}: under fully_async_main the trainer's workers build the LR "
              f"scheduler in init_workers ({MAIN}:78, :155) before set_total_train_steps ({MAIN}:90-92) fills "
              f"{total_key} in the trainer's own config only (fully_async_trainer.py:356-367), so the scheduler "
              f"sees actor.yaml's total_training_steps=-1",
              f"set {total_key}={n if n else 'N'} (the actor updates: {TOTAL} ÷ (ppo_mini_batch_size × "
              "require_batches)) so the workers get it, and give the warmup as an absolute lr_warmup_steps")


def rule_fully_async_rollout_budget(c: Ctx, f: Facts) -> None:
    """VI619: the yaml's 100-prompt budget, or a budget below one weight-sync cycle."""
    if not _active(c) or c.unknown(TOTAL, f"{A}.ppo_mini_batch_size", REQ, TRIG):
        return
    total, mini, req, trig = c.int(TOTAL), c.int(f"{A}.ppo_mini_batch_size"), c.int(REQ), c.int(TRIG)
    if total is None or None in (mini, req, trig) or min(mini, req, trig) <= 0:
        return
    cycle = mini * req * trig
    default = not c.set_by_user(TOTAL) and total == YAML_TOTAL
    if not default and total >= cycle:
        return
    said = f"{TOTAL}={total}" + (" (fully_async_ppo_trainer.yaml:64's default, not set here)" if default else "")
    c.add("VI619", "warning", (TOTAL, f"{A}.ppo_mini_batch_size", REQ, TRIG),
          f"{said} counts prompts, not steps: the rollouter stops after min({total}, rows × total_epochs) prompts "
          f"(fully_async_rollouter.py:405-407, :878-884), i.e. {total // (mini * req)} actor update(s) of "
          f"ppo_mini_batch_size × require_batches = {mini * req} prompts and total_train_steps = "
          f"int({total} / {cycle}) = {total // cycle} weight-sync cycle(s) of {cycle} prompts "
          "(fully_async_rollouter.py:498-501); the run then ends as if complete",
          f"set {TOTAL} to the prompts the run should generate (verl's scripts use ppo_mini_batch_size × "
          f"require_batches × trigger_parameter_sync_step × cycles, e.g. {cycle} × 100 = {cycle * 100})")
