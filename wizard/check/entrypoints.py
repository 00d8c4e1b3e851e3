"""verl 0.9.1's entry points and the config tree each composes (its `@hydra.main`), so `check` reads a launch of
any of them with its own tree (issue 26 item 5). Each row cites the decorator in verl's source.

A recipe's own entry point (`python3 -m recipe.dapo.main_dapo`: verl-recipe checked out as verl's `recipe/`
folder, verl-recipe README "Usage") is one more: its tree is the one its own `@hydra.main` names, read from its
source where it is here (wizard.check.recipes), else verl's ppo_trainer, which every verl recipe YAML extends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from wizard.check.recipes import module_of


@dataclass(frozen=True)
class Entry:
    name: str  # the scope name wizard/check/data/verl_readers.json uses ("ppo", "fully_async", ...)
    module: str
    config_dir: str  # relative to the verl package
    config_name: str
    cite: str
    # keys the entry point's own code reads that its config tree does not hold (given with `+key=`), with the line
    reads_outside: tuple[tuple[str, str], ...] = ()
    recipe: bool = False  # a recipe's own module: its tree is its @hydra.main's (wizard.check.recipes)


ENTRIES = (
    Entry("ppo", "verl.trainer.main_ppo", "trainer/config", "ppo_trainer", "verl/trainer/main_ppo.py:166"),
    Entry("generation", "verl.trainer.main_generation_server", "trainer/config", "ppo_trainer",
          "verl/trainer/main_generation_server.py:122",
          reads_outside=(("data.output_path", "verl/trainer/main_generation_server.py:186"),)),
    Entry("sft", "verl.trainer.sft_trainer", "trainer/config", "sft_trainer_engine", "verl/trainer/sft_trainer.py:461"),
    Entry("sft", "verl.trainer.sft_trainer_ray", "trainer/config", "sft_trainer_engine",
          "verl/trainer/sft_trainer_ray.py:388"),
    # main_eval's get_custom_reward_fn reads config.reward.custom_reward_function (verl/trainer/ppo/reward.py:70-82),
    # a node its evaluation tree lacks: given with `+` (VI708)
    Entry("eval", "verl.trainer.main_eval", "trainer/config", "evaluation", "verl/trainer/main_eval.py:41",
          reads_outside=(("reward.custom_reward_function.path", "verl/trainer/ppo/reward.py:71"),
                         ("reward.custom_reward_function.name", "verl/trainer/ppo/reward.py:75"))),
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
    "evaluation": ("eval", "trainer/config"),
    "fully_async_ppo_trainer": ("fully_async", "experimental/fully_async_policy/config"),
    "fully_async_ppo_megatron_trainer": ("fully_async", "experimental/fully_async_policy/config"),
    "one_step_off_ppo_trainer": ("one_step_off", "experimental/one_step_off_policy/config"),
    "one_step_off_ppo_megatron_trainer": ("one_step_off", "experimental/one_step_off_policy/config"),
}
PPO_TREES = ("ppo_trainer", "ppo_megatron_trainer")


# a recipe's entry module, dotted from the `recipe` package, whose last name has `main` as one of its words, as every
# training entry point of verl and verl-recipe does (main_ppo, recipe.dapo.main_dapo, recipe.async_flow.grpo_main,
# recipe.reward_queue.main); a recipe's helper (recipe.r1.data_process, recipe/dynamo/metrics_sidecar.py) is not one
RECIPE_MODULE = re.compile(r"recipe(?:\.[A-Za-z_][A-Za-z0-9_]*)*\.(?:[A-Za-z0-9]+_)*main(?:_[A-Za-z0-9_]*)?")


def recipe_entry(module: str) -> Entry:
    """A recipe's entry point: main_ppo's scope (recipes run verl's PPO trainer or a subclass of it) and, until its
    source is read, main_ppo's tree."""
    return Entry("ppo", module, "", "ppo_trainer", module.replace(".", "/") + ".py @hydra.main", recipe=True)


def entry_of_module(module: str) -> Entry | None:
    found = next((e for e in ENTRIES if e.module == module), None)
    if found is None and RECIPE_MODULE.fullmatch(module):
        return recipe_entry(module)
    return found


def _file_of(entry: Entry) -> str:
    return entry.module.replace(".", "/") + ".py"


def entry_of_word(word: str) -> Entry | None:
    """The entry point a launch word names: its module (`verl.trainer.sft_trainer`, as after `-m`), a path to its
    file (`.../verl/trainer/sft_trainer.py`), or a bare file name that only one entry point has (`main_ppo.py` is
    main_ppo's: the one-step-off file of that name is named by its folder)."""
    if word.startswith("-m") and len(word) > 2:
        word = word[2:]
    found = entry_of_module(word)
    if found is not None:
        return found
    if not word.endswith(".py"):
        return None
    for entry in ENTRIES:  # the file with its folder: .../one_step_off_policy/main_ppo.py is not main_ppo's
        last2 = "/".join(_file_of(entry).split("/")[-2:])
        if word == last2 or word.endswith("/" + last2):
            return entry
    named = [e for e in ENTRIES if _file_of(e).rsplit("/", 1)[-1] == word]  # a bare file name, run from its folder
    if named:
        return named[0]
    module = module_of(word.split("/"))  # a recipe's file: .../recipe/dapo/main_dapo.py
    return recipe_entry(module) if module and RECIPE_MODULE.fullmatch(module) else None


def launch_index(words: list[str]) -> tuple[int, Entry] | None:
    """(index of the first argument after the entry point's module or file, the entry) for a command's words."""
    for k, w in enumerate(words):
        if k > 0 and words[k - 1] == "-m":
            entry = entry_of_module(w)
        elif w.startswith("-m") or w.endswith(".py"):
            entry = entry_of_word(w)
        else:
            entry = None
        if entry is not None:
            return k + 1, entry
    return None


def entry_words() -> tuple[str, ...]:
    """The last name of every entry point's module, and `recipe` (a recipe's module or file): a command without one
    of them launches none."""
    return tuple(dict.fromkeys([*(e.module.rsplit(".", 1)[-1] for e in ENTRIES), "recipe"]))


def own_configs(entry: Entry) -> tuple[str, ...]:
    """The configs a `--config-name` may name from the entry point's own config folder."""
    return tuple(name for name, (_, folder) in CONFIGS.items() if folder == entry.config_dir)


def guess_tree(name: str, entry: Entry | None = None) -> str:
    """The verl tree a config that cannot be found most likely extends, from its name and the entry point: a
    recipe's `*megatron*` config composes the entry point's megatron tree (ppo_megatron_trainer for main_ppo), any
    other its default tree."""
    entry = entry or ENTRIES[0]
    megatron = entry.config_name.replace("_trainer", "_megatron_trainer")
    if "megatron" in name.lower() and megatron in CONFIGS:
        return megatron
    return entry.config_name


def verl_config_dir() -> Path:
    """verl's trainer config folder (verl/trainer/config), found without importing verl (nor torch)."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    if spec is None or spec.origin is None:
        raise ImportError("verl")
    return Path(spec.origin).parent / "trainer" / "config"



_VERL_MODULE = re.compile(r"(?<![\w.])-m\s+(verl(?:\.\w+)+)")


def missing_verl_module(text: str) -> tuple[str, str | None] | None:
    """(module, the closest entry point) for the first `python -m verl.…` in a script that the installed verl does not
    have (verl 0.9.1 removed verl.trainer.main_generation, for one: its successor main_generation_server is the
    closest entry by name), or None (every such module is there, none is named, or verl is not installed here)."""
    import difflib
    import importlib.util

    if importlib.util.find_spec("verl") is None:
        return None
    root = verl_config_dir().parents[1]  # site-packages/verl
    for module in dict.fromkeys(_VERL_MODULE.findall(text)):
        rel = Path(*module.split(".")[1:])
        if (root / rel).with_suffix(".py").is_file() or (root / rel / "__init__.py").is_file():
            continue
        close = difflib.get_close_matches(module, [e.module for e in ENTRIES], n=1, cutoff=0.6)
        return module, close[0] if close else None
    return None
