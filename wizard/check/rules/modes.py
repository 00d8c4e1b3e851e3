"""Trainer-mode rules: what verl 0.9.1's V1 trainer modes and the one-step-off entry point require of the rollout
pool and the weight-sync backend (paths under site-packages/verl).

- VI993 (error): trainer.v1.trainer_mode=separate_async preconditions. PPOTrainerSeparateAsync.__init__ asserts,
  before anything else and after Ray and TransferQueue are up (trainer/ppo/v1/trainer_separate_async.py:55-76):
  train_batch_size == parameter_sync_step × ppo_mini_batch_size (:59; parameter_sync_step defaults to 4,
  trainer/config/ppo_trainer.yaml), actor_rollout_ref.rollout.nnodes > 0 (:64; rollout/rollout.yaml's default is 0),
  rollout.n_gpus_per_node > 0 (:65), rollout.checkpoint_engine.backend != "naive" (:68; the default), and, with a
  reward model (need_reward_model: reward.reward_model.enable, trainer/ppo/utils.py:89-93), its own resource pool
  (:71-72). SEPARATE_ASYNC_ASSERTS lists them by line; tests/test_check_modes.py evaluates each assert's own
  expression from verl's source and runs the constructor itself.
- VI994 (warning): a non-naive checkpoint_engine.backend under trainer_mode sync or colocate_async. Their only weight
  sync is the hybrid CheckpointEngineManager, whose backend verl overwrites with "naive" (trainer_base.py:380-383);
  only separate_async builds a second manager with the configured backend for its standalone replicas
  (trainer_separate_async.py:164-170). The legacy trainer (trainer.use_v1=False) keeps it (ray_trainer.py:967-978).
- VI995 (error): the one-step-off entry point (experimental/one_step_off_policy/main_ppo.py). OneStepOffRayTrainer
  asserts `not actor_rollout_ref.hybrid_engine` with no message (one_step_off_policy/ray_trainer.py:87-88); the
  default is true (trainer/config/ppo_trainer.yaml) and one_step_off_ppo_trainer.yaml does not change it. Its main()
  sizes the rollout pool from the top-level rollout.nnodes / rollout.n_gpus_per_node, copying them over
  actor_rollout_ref.rollout.nnodes / n_gpus_per_node unconditionally (main_ppo.py:121-122), so a value given under
  actor_rollout_ref.rollout is lost. The fully async entry point (experimental/fully_async_policy/
  fully_async_main.py) does both the same way (real case R50-04, verl-ascend-recipe's rollout_elastic quickstart):
  FullyAsyncTrainer asserts `not self.hybrid_engine` bare (fully_async_trainer.py:75-76; FullyAsyncRollouter again at
  fully_async_rollouter.py:350), fully_async_ppo_trainer.yaml keeps ppo_trainer.yaml:60's true, and main() copies
  rollout.nnodes / n_gpus_per_node over actor_rollout_ref.rollout's (fully_async_main.py:235-236).

`separate_pool` is the standalone rollout pool of a separate_async run (trainer_separate_async.py:154-156 builds an
LLMServerManager without a worker group; rollout/llm_server.py:455-460 sizes it rollout.n_gpus_per_node ×
rollout.nnodes; :395-401 counts those GPUs beside the trainer's): VI814 (rules/layout.py) adds it to the demand.
"""

from __future__ import annotations

from wizard.check.rules.context import A, R, Ctx, Facts

SEP = "trainer.v1.separate_async"
BACKEND = f"{R}.checkpoint_engine.backend"
RM = "reward.reward_model"
SRC = "trainer/ppo/v1/trainer_separate_async.py"
# the asserts of PPOTrainerSeparateAsync.__init__ by line, and the keys each reads (tests/test_check_modes.py holds
# this list against the asserts in verl's source)
SEPARATE_ASYNC_ASSERTS = {
    59: ("data.train_batch_size", f"{SEP}.parameter_sync_step", f"{A}.ppo_mini_batch_size"),
    64: (f"{R}.nnodes",),
    65: (f"{R}.n_gpus_per_node",),
    68: (BACKEND,),
    72: (f"{RM}.enable", f"{RM}.enable_resource_pool"),
}


def v1_mode(c: Ctx) -> str | None:
    """The V1 trainer mode main_ppo runs (trainer/main_ppo.py:141, 183), None for the legacy trainer, another entry
    point or a recipe's own main."""
    if c.src.entry != "ppo" or c.src.recipe or c.v("trainer.use_v1") is False:
        return None
    mode = c.v("trainer.v1.trainer_mode")
    return mode if isinstance(mode, str) else None


def separate_pool(c: Ctx) -> int | None:
    """GPUs of the standalone rollout pool a separate_async run starts (0 when unset), None for other modes."""
    if v1_mode(c) != "separate_async":
        return None
    return max(c.int(f"{R}.nnodes") or 0, 0) * max(c.int(f"{R}.n_gpus_per_node") or 0, 0)


def rule_separate_async(c: Ctx, f: Facts) -> None:
    if v1_mode(c) != "separate_async":
        return
    at = f"{SRC}:{{}} (PPOTrainerSeparateAsync.__init__, after Ray and TransferQueue start)"
    keys = SEPARATE_ASYNC_ASSERTS[59]
    tbs, psync, mini = (c.int(k) for k in keys)
    if not c.unknown(*keys) and None not in (tbs, psync, mini) and tbs != psync * mini:
        options = []
        if mini > 0 and tbs % mini == 0:
            options.append(f"{keys[1]}={tbs // mini}")
        if psync > 0 and tbs % psync == 0:
            options.append(f"{keys[2]}={tbs // psync}")
        c.add("VI993", "error", keys,
              f"trainer_mode=separate_async needs data.train_batch_size == parameter_sync_step × ppo_mini_batch_size "
              f"(one mini-batch per weight sync), but {tbs} ≠ {psync} × {mini}: verl's assert fails at "
              + at.format(59) + (f"; {keys[1]} is verl's default {psync}" if not c.set_by_user(keys[1]) else ""),
              (f"set {' or '.join(options)}" if options else
               f"choose data.train_batch_size = {keys[1]} × {keys[2]}") + " (trainer_separate_async.py:59)")
    for line in (64, 65):
        key = SEPARATE_ASYNC_ASSERTS[line][0]
        value = c.int(key)
        if not c.unknown(key) and value is not None and value <= 0:
            c.add("VI993", "error", (key,),
                  f"{key}={value}: trainer_mode=separate_async runs the rollout on a standalone pool of "
                  f"{R}.nnodes × {R}.n_gpus_per_node GPUs beside the trainer's, and verl asserts it is "
                  f"non-empty at " + at.format(line) + (" (rollout.yaml's default nnodes is 0)" if line == 64 else ""),
                  f"set {R}.nnodes and {R}.n_gpus_per_node to the rollout's own GPUs (they come on top of "
                  "trainer.nnodes × trainer.n_gpus_per_node), or use trainer.v1.trainer_mode=colocate_async")
    backend = c.v(BACKEND)
    if not c.unknown(BACKEND) and backend == "naive":
        c.add("VI993", "error", (BACKEND,),
              f"{BACKEND}=naive under trainer_mode=separate_async: the naive engine only hands weights to replicas "
              "in the trainer's own processes, and verl asserts another backend for the standalone rollout at "
              + at.format(68),
              f"set {BACKEND}=nccl (it imports cupy; or nixl, mooncake, hccl on Ascend, kimi_ckpt_engine, "
              "delta_sharded)")
    rm_keys = SEPARATE_ASYNC_ASSERTS[72]
    if not c.unknown(*rm_keys) and c.v(rm_keys[0]) and not c.v(rm_keys[1]):
        c.add("VI993", "error", rm_keys,
              f"{RM}.enable=True with {RM}.enable_resource_pool=False under trainer_mode=separate_async: the "
              "standalone rollout never pauses to free GPU memory for a colocated reward model, and verl asserts "
              "its own pool at " + at.format(72),
              f"set {RM}.enable_resource_pool=True with {RM}.nnodes / n_gpus_per_node for its GPUs")


def rule_forced_naive(c: Ctx, f: Facts) -> None:
    mode = v1_mode(c)
    backend = c.v(BACKEND)
    if mode not in ("sync", "colocate_async") or c.unknown(BACKEND) or not isinstance(backend, str) \
            or backend == "naive":
        return
    c.add("VI994", "warning", (BACKEND, "trainer.v1.trainer_mode"),
          f"{BACKEND}={backend} has no effect under trainer.v1.trainer_mode={mode}: the trainer's only weight sync is "
          "the hybrid checkpoint manager, whose backend verl sets to 'naive' (trainer/ppo/v1/trainer_base.py:380-383); "
          "a manager with the configured backend exists only for separate_async's standalone rollout "
          "(trainer_separate_async.py:164-170)",
          f"drop {BACKEND} (naive is what runs), or use trainer.v1.trainer_mode=separate_async with "
          f"{R}.nnodes / n_gpus_per_node for a standalone rollout pool")


# the separation-family entry points (experimental/separation): where each asserts hybrid_engine off and where its
# main() copies the top-level rollout.nnodes / n_gpus_per_node over actor_rollout_ref.rollout's
SEPARATE_ENTRIES = {
    "one_step_off": ("OneStepOffRayTrainer", "experimental/one_step_off_policy/ray_trainer.py:87-88",
                     "one_step_off_ppo_trainer.yaml", "experimental/one_step_off_policy/main_ppo.py:121-122"),
    "fully_async": ("FullyAsyncTrainer (and FullyAsyncRollouter)",
                    "experimental/fully_async_policy/fully_async_trainer.py:75-76, fully_async_rollouter.py:350",
                    "fully_async_ppo_trainer.yaml", "experimental/fully_async_policy/fully_async_main.py:235-236"),
}


def rule_one_step_off(c: Ctx, f: Facts) -> None:
    if c.src.entry not in SEPARATE_ENTRIES or c.src.recipe:
        return
    trainer, asserted, yaml, copied = SEPARATE_ENTRIES[c.src.entry]
    name = "one-step-off" if c.src.entry == "one_step_off" else "fully async"
    key = "actor_rollout_ref.hybrid_engine"
    if not c.unknown(key) and c.v(key) is not False:
        c.add("VI995", "error", (key,),
              f"{key}={c.v(key)} with the {name} entry point: {trainer} runs the rollout on GPUs of "
              f"its own and fails on a bare `assert not self.hybrid_engine` (no message; {asserted}); "
              f"ppo_trainer.yaml's default is true and {yaml} keeps it",
              f"set {key}=False (every {name} script verl ships does)")
    for name_ in ("nnodes", "n_gpus_per_node"):
        mine, top = f"{R}.{name_}", f"rollout.{name_}"
        if not c.set_by_user(mine) or c.unknown(mine, top) or c.v(mine) == c.v(top):
            continue
        c.add("VI995", "error", (mine, top),
              f"{mine}={c.v(mine)} is overwritten: the {name} main() copies the top-level {top}="
              f"{c.v(top)}{'' if c.set_by_user(top) else ' (its yaml default)'} over it before the trainer starts "
              f"({copied}), so the rollout pool is sized from "
              "rollout.nnodes × rollout.n_gpus_per_node",
              f"set {top}={c.v(mine)} (the {name} tree reads rollout.nnodes / rollout.n_gpus_per_node) "
              f"and drop {mine}")
