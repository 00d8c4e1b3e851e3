"""How verl 0.9.1 walks a batch in mini-batches across PPO epochs (paths under site-packages/verl).

- VI792 (info): ppo_epochs > 1 with several mini-batches a batch and shuffle off, for the actor or the critic. The
  trainers hand each role's `ppo_epochs` and `dataloader_kwargs={"shuffle": <role>.shuffle}` to its worker
  (trainer/ppo/v1/trainer_base.py:1804-1815 critic, :1827-1857 actor; legacy ray_trainer.py:1327-1393), whose
  train_mini_batch (workers/engine_workers.py:242-280) iterates utils/tensordict_utils.make_iterator
  (tensordict_utils.py:559-612): one torch DataLoader over the batch's row indices, re-iterated `epochs` times. With
  shuffle=False (actor.yaml:122, verl's default; critic.yaml:55 copies the actor's) that DataLoader yields the same
  mini-batches in the same order every epoch, so epoch k replays epoch 1's partition and order instead of the
  per-epoch reshuffle of standard PPO (the order bias verl#3213 reports). With one mini-batch a batch the order
  does not matter, and with one epoch nothing is replayed: no finding. An info: verl's default, and a run with it
  trains; the fix, shuffle=True, draws a new permutation each epoch from the data_loader_seed generator.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import A, Ctx, Facts


def mini_batches(batch: int | None, mini: int | None) -> int | None:
    """Mini-batches (optimizer steps) one epoch takes: train_batch_size / ppo_mini_batch_size, both in prompts (the
    trainer multiplies both by rollout.n, trainer_base.py:1806-1807, 1829-1830)."""
    if not batch or not mini or batch % mini:
        return None
    return batch // mini


def rule_epoch_shuffle(c: Ctx, f: Facts) -> None:
    """VI792: ppo_epochs > 1 over several mini-batches replayed in one fixed order."""
    if c.src.recipe:
        return  # a recipe's trainer may batch its own way
    roles = [(A, f.mini)] + ([("critic", f.critic_mini)] if f.use_critic else [])
    for role, mini in roles:
        epochs_key, shuffle_key = f"{role}.ppo_epochs", f"{role}.shuffle"
        if c.unknown(epochs_key, shuffle_key) or c.v(shuffle_key) is not False:
            continue
        epochs, count = c.int(epochs_key), mini_batches(f.tbs, mini)
        if not epochs or epochs < 2 or not count or count < 2:
            continue
        follows = role == "critic" and not c.set_by_user(shuffle_key)
        c.add("VI792", "info", (epochs_key, shuffle_key),
              f"{epochs_key}={epochs} with {shuffle_key}=False"
              + (" (it follows actor.shuffle, critic.yaml:55)" if follows else "")
              + f": verl iterates one unshuffled DataLoader over the batch {epochs} times "
              f"(utils/tensordict_utils.py:603-610), so every epoch takes the same {count} mini-batches of "
              f"{mini} prompts in the same order instead of a reshuffle each epoch (verl#3213)",
              f"set {shuffle_key}=True for a new mini-batch permutation each epoch (seeded by data_loader_seed)",
              fix=Fix(set={shuffle_key: True}))
