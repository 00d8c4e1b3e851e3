"""verl 0.9.1's offline scoring entry point, `python -m verl.trainer.main_eval` (paths under site-packages/verl).

- VI708 (error, `--fix` where the old keys name the function): main_eval scores each row in a Ray task that calls
  `reward_fn = get_custom_reward_fn(config)` and then `reward_fn(data_source, response, ground_truth)`
  (trainer/main_eval.py:33-37). Since the reward-config refactor (PR #5255) get_custom_reward_fn reads
  `config.reward.get("custom_reward_function")` (trainer/ppo/reward.py:70) and returns None without a path (:71-73),
  but main_eval's own tree, trainer/config/evaluation.yaml, still holds the function at the top level
  (custom_reward_function.path / .name, :8-10) and has no `reward` node. So:
  - without a `reward` node (the keys evaluation.yaml lists, or none): every task raises ConfigAttributeError
    "Key 'reward' is not in struct" (the composed tree is in struct mode) and main_eval dies at the first ray.get;
  - with a `reward` node but no reward.custom_reward_function.path: reward_fn is None and every task raises
    TypeError "'NoneType' object is not callable".
  verl scores nothing either way; the function has to be given as +reward.custom_reward_function.path/.name.
  Only verl's own module: a recipe's main_eval (recipe.r1.main_eval) reads its tree with its own code.
  (Launch as in PR #777's R1 evaluation scripts, which passed custom_reward_function.path/.name.)
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

NEW = "reward.custom_reward_function"
OLD = "custom_reward_function"  # evaluation.yaml:8-10
DEFAULT_NAME = "compute_score"  # evaluation.yaml:10 (and the reward tree's default name)


def _set(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def rule_eval_reward_fn(c: Ctx, f: Facts) -> None:
    if getattr(c.src, "entry", "ppo") != "eval" or getattr(c.src, "recipe", None):
        return  # a recipe's own main_eval (recipe.r1.main_eval) loads its function with its own code
    if c.unknown(f"{NEW}.path", f"{OLD}.path", f"{OLD}.name"):
        return
    if _set(c.v(f"{NEW}.path")):
        return
    old_path, old_name = c.v(f"{OLD}.path"), c.v(f"{OLD}.name")
    has_reward = any(k.startswith("reward.") for k in c.res.flat)
    failure = ("reward_fn is None (no reward.custom_reward_function.path, trainer/ppo/reward.py:71-73) and every "
               "task raises TypeError 'NoneType' object is not callable" if has_reward else
               "the evaluation tree has no `reward` node, so every task raises ConfigAttributeError "
               "\"Key 'reward' is not in struct\"")
    given = f"{OLD}.path={old_path} is evaluation.yaml's own key, but " if _set(old_path) else ""
    fix = None
    if _set(old_path):
        name = old_name if _set(old_name) else DEFAULT_NAME
        fix = Fix(set={f"{NEW}.path": old_path, f"{NEW}.name": name}, plus=[f"{NEW}.path", f"{NEW}.name"],
                  delete=[f"{OLD}.path", f"{OLD}.name"] if c.set_by_user(f"{OLD}.name") else [f"{OLD}.path"])
    c.add("VI708", "error", (f"{OLD}.path", f"{NEW}.path"),
          f"{given}verl 0.9.1's main_eval scores each row with get_custom_reward_fn(config), which reads "
          f"config.reward.custom_reward_function (trainer/ppo/reward.py:70; main_eval.py:35-37): {failure}, "
          "so main_eval scores nothing",
          f"pass the function as +{NEW}.path=FILE +{NEW}.name=FUNCTION"
          + (f" (+{NEW}.path={old_path} +{NEW}.name={old_name if _set(old_name) else DEFAULT_NAME})"
             if _set(old_path) else ""),
          fix=fix)
