"""verl 0.9.1's entry points and the config tree each composes (its `@hydra.main`), so `check` reads a launch of
any of them with its own tree (issue 26 item 5). Each row cites the decorator in verl's source.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    name: str  # the scope name wizard/check/data/verl_readers.json uses ("ppo", "fully_async", ...)
    module: str
    config_dir: str  # relative to the verl package
    config_name: str
    cite: str


ENTRIES = (
    Entry("ppo", "verl.trainer.main_ppo", "trainer/config", "ppo_trainer", "verl/trainer/main_ppo.py:166"),
    Entry("generation", "verl.trainer.main_generation_server", "trainer/config", "ppo_trainer",
          "verl/trainer/main_generation_server.py:122"),
    Entry("sft", "verl.trainer.sft_trainer", "trainer/config", "sft_trainer_engine", "verl/trainer/sft_trainer.py:461"),
    Entry("sft", "verl.trainer.sft_trainer_ray", "trainer/config", "sft_trainer_engine",
          "verl/trainer/sft_trainer_ray.py:388"),
    Entry("fully_async", "verl.experimental.fully_async_policy.fully_async_main", "experimental/fully_async_policy/config",
          "fully_async_ppo_trainer", "verl/experimental/fully_async_policy/fully_async_main.py:222"),
    Entry("one_step_off", "verl.experimental.one_step_off_policy.main_ppo", "experimental/one_step_off_policy/config",
          "one_step_off_ppo_trainer", "verl/experimental/one_step_off_policy/main_ppo.py:109"),
)

# every config a --config-name may name among verl's own: (entry, folder under verl/)
CONFIGS: dict[str, tuple[str, str]] = {
    "ppo_trainer": ("ppo", "trainer/config"),
    "ppo_megatron_trainer": ("ppo", "trainer/config"),
    "sft_trainer_engine": ("sft", "trainer/config"),
    "fully_async_ppo_trainer": ("fully_async", "experimental/fully_async_policy/config"),
    "fully_async_ppo_megatron_trainer": ("fully_async", "experimental/fully_async_policy/config"),
    "one_step_off_ppo_trainer": ("one_step_off", "experimental/one_step_off_policy/config"),
    "one_step_off_ppo_megatron_trainer": ("one_step_off", "experimental/one_step_off_policy/config"),
}
PPO_TREES = ("ppo_trainer", "ppo_megatron_trainer")


def entry_of_module(module: str) -> Entry | None:
    return next((e for e in ENTRIES if e.module == module), None)


def guess_tree(name: str) -> str:
    """The verl tree a config that cannot be found most likely extends, from its name: a recipe's
    `*megatron*` config composes ppo_megatron_trainer, any other ppo_trainer."""
    return "ppo_megatron_trainer" if "megatron" in name.lower() else "ppo_trainer"
