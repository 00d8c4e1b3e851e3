"""What DAPO's group filter (algorithm.filter_groups) compares in verl 0.9.1's V1 trainer, against what the reward path
produces (paths under site-packages/verl).

The V1 ReplayBuffer reads the metric per finished trajectory: "reward" sums the trajectory's rm_scores, any other name
is looked up in its reward_extra_info (trainer/ppo/v1/replay_buffer.py:278-308, FILTER_GROUPS_REWARD_METRIC :32); a
group whose values are all equal is dropped (:309-315). Every registered reward manager fills reward_extra_info the
same way: a scorer's dict keys as they are, or "acc" for a plain-number score (experimental/reward_loop/reward_manager/
naive.py:89-95, dapo.py:95-104, gdpo.py:85-88, limited.py:441-447, remote.py:123-126), and the DAPO manager adds
overlong_reward / overlong with overlong_buffer_cfg.log (dapo.py:115-117). What verl's built-in scorers return, per
data_source, is wizard/check/data/verl_scorer_formats.json (scripts/verl_scorer_formats.py runs verl's
default_compute_score, utils/reward_score/__init__.py:19-114, and records the reward_extra_info keys each gives).

- VI648 (error): algorithm.filter_groups.metric (not "reward") that verl's built-in scorer never returns for the
  training rows' data_source (or, when the rows cannot be read here, for any data_source): no custom reward function
  and no reward model score, so reward_extra_info holds only the keys the table lists. The buffer raises
  `Finished groups are missing DAPO metric` once the first groups finish (replay_buffer.py:304-308) -- after the
  cluster is up, the model loaded and a rollout generated; trainer_base.py:187-211 checks only that the metric is
  non-empty. The old DAPO recipe's seq_reward / seq_final_reward (computed by its own trainer from token-level
  scores) are such names (verl#1427); algorithm.py:51 still lists "seq_reward" as an example. A custom function's
  keys are VI999's.
- VI649 (warning): the group filter on "reward" (verl 0.9.1's default metric, ppo_trainer.yaml:92-93) while the DAPO
  manager's overlong penalty is on: the manager adds the penalty into the score it returns (dapo.py:108-119), which
  becomes rm_scores (experimental/reward_loop/reward_loop.py:361-362), so two wrong (or two right) answers of
  different lengths differ in "reward", the group survives the filter, and GRPO trains on the length difference
  alone, where DAPO meant to drop it (verl-recipe#125; the DAPO recipe filters on acc). The scorer's raw value
  stays in reward_extra_info ("acc" for a number, the dict's keys, whose "score" dapo.py:97 requires).
- VI650 (warning): algorithm.filter_groups.enable=True with trainer.use_v1=False on main_ppo. main_ppo then runs the
  legacy TaskRunner (trainer/main_ppo.py:183-191, main_ppo_v0.py -> trainer/ppo/ray_trainer.py), and nothing there
  reads algorithm.filter_groups (only trainer/ppo/v1/ does: trainer_base.py:164-211, replay_buffer.py): dynamic
  sampling is silently off and every group, all-right and all-wrong ones included, trains (the question in verl#2211:
  a DAPO script on main_ppo, "possibly without dynamic sampling").
"""

from __future__ import annotations

from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts, local_path

FG = "algorithm.filter_groups"
FN = "reward.custom_reward_function"
OB = "reward.reward_kwargs.overlong_buffer_cfg"
REWARD_METRIC = "reward"  # trainer/ppo/v1/replay_buffer.py:32
OVERLONG_LOG_KEYS = ("overlong_reward", "overlong")  # dapo.py:115-117, with overlong_buffer_cfg.log
ROWS = 1000  # training rows read per file for their data_source


def _dapo_v1(c: Ctx) -> bool:
    """DAPO filtering on main_ppo's V1 trainer with the built-in replay buffer and a registered reward manager."""
    from wizard.check.rules.reward_managers import _dapo, _v1_trainer

    return _v1_trainer(c) and _dapo(c) and not c.v("trainer.v1.sampler.custom_sampler.path") \
        and (c.v("reward.reward_manager.source") or "register") == "register" \
        and not c.unknown("reward.reward_manager.source", "reward.reward_manager.name", "trainer.v1.trainer_mode") \
        and (c.v("trainer.v1.trainer_mode") or "sync") == "sync"


def _overlong_on(c: Ctx) -> bool:
    return c.v("reward.reward_manager.name") == "dapo" and c.v(f"{OB}.enable") is True


def _train_sources(c: Ctx) -> set[str] | None:
    """The data_source values of the training rows read here; None when a file cannot be read (or names none)."""
    from wizard.check.rules.datacontent import file_rows

    value = c.v("data.train_files")
    paths = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    if not paths or c.unknown("data.train_files"):
        return None
    sources: set[str] = set()
    for path in paths:
        local = local_path(c, path) if isinstance(path, str) else None
        if local is None or not local.is_file() or local.suffix not in (".parquet", ".jsonl"):
            return None
        try:
            for n, row in enumerate(file_rows(local)):
                if n >= ROWS:
                    break
                if isinstance(row.get("data_source"), str):
                    sources.add(row["data_source"])
        except Exception:  # noqa: BLE001 - a file pyarrow cannot read: the data rules say so
            return None
    return sources or None


def _scorer_keys() -> dict[str, set[str]]:
    """data_source -> the reward_extra_info keys verl's built-in scorer gives it (only scorers that ran)."""
    from wizard.check.rules.scorer_formats import scorer_table

    rows: dict[str, Any] = scorer_table()["data_sources"]
    return {ds: set(row["returns"]["extra_info_keys"]) for ds, row in rows.items()
            if row.get("runs") and row.get("returns")}


def _rule_missing_metric(c: Ctx) -> None:
    metric = c.v(f"{FG}.metric")
    if not isinstance(metric, str) or not metric or metric == REWARD_METRIC \
            or c.unknown(f"{FG}.metric", f"{FN}.path") or c.v(f"{FN}.path") \
            or c.v("reward.reward_model.enable") is not False:
        return
    extra = set(OVERLONG_LOG_KEYS) if _overlong_on(c) and c.v(f"{OB}.log") is True else set()
    table = _scorer_keys()
    sources = _train_sources(c)
    if sources is not None and sources <= set(table):
        lacking = sorted(ds for ds in sources if metric not in table[ds] | extra)
        if not lacking:
            return
        keys = set.intersection(*(table[ds] for ds in sources)) | extra
        gives = ", ".join(map(repr, sorted(table[lacking[0]] | extra)))
        where = (f"the training rows' data_source {', '.join(map(repr, lacking[:3]))} is scored by verl's built-in "
                 f"scorer, whose reward_extra_info holds only {gives}")
    else:
        keys = set().union(*table.values()) | extra
        if metric in keys:
            return
        where = ("no built-in scorer of verl's (default_compute_score, utils/reward_score/__init__.py:19-114) returns "
                 f"it: their reward_extra_info keys are {', '.join(map(repr, sorted(keys)))}")
    legacy = " (the old DAPO recipe trainer computed it itself; V1 does not)" if metric.startswith("seq_") else ""
    pick = "acc" if "acc" in keys else sorted(keys)[0] if keys else REWARD_METRIC
    c.add("VI648", "error", (f"{FG}.metric", f"{FG}.enable", "data.train_files"),
          f"{FG}.metric={metric!r}{legacy}: {where} (experimental/reward_loop/reward_manager/naive.py:89-95: a dict's "
          "keys, or 'acc' for a number), so the V1 replay buffer raises `Finished groups are missing DAPO metric "
          f"{metric!r}` (trainer/ppo/v1/replay_buffer.py:304-308) after the first rollout (verl#1427)",
          f"set {FG}.metric={pick} (the scorer's correctness), or 'reward' for the summed reward score; a metric of "
          f"your own needs a {FN}.path that returns it in a dict", fix=Fix(set={f"{FG}.metric": pick}))


def _rule_shaped_metric(c: Ctx) -> None:
    metric = c.v(f"{FG}.metric")
    if metric != REWARD_METRIC or c.unknown(f"{FG}.metric", f"{OB}.enable", f"{OB}.len", f"{OB}.penalty_factor") \
            or not _overlong_on(c):
        return
    length, factor = c.num(f"{OB}.len"), c.num(f"{OB}.penalty_factor")
    if length is None or length <= 0 or factor == 0:
        return  # a zero-length buffer is VI892's; a zero factor shapes nothing
    from wizard._pysource import returned_keys

    pick = "acc"
    path = c.v(f"{FN}.path")
    if isinstance(path, str) and path:
        local = local_path(c, path)
        got = returned_keys(local, str(c.v(f"{FN}.name") or "compute_score")) \
            if local is not None and local.is_file() else None
        pick = "acc" if got is None or "acc" in got[0] else "score"
    c.add("VI649", "warning", (f"{FG}.metric", f"{OB}.enable", "reward.reward_manager.name"),
          f"{FG}.metric=reward with the DAPO manager's overlong penalty on ({OB}.len={length:g}): verl adds the "
          "penalty into the reward it filters on (experimental/reward_loop/reward_manager/dapo.py:108-119 -> "
          "rm_scores, trainer/ppo/v1/replay_buffer.py:292-295), so a group of all-wrong (or all-right) answers of "
          "different lengths is kept and trained on its length difference alone (verl-recipe#125)",
          f"set {FG}.metric={pick}: the scorer's unshaped value, which the manager keeps in reward_extra_info "
          "(dapo.py:95-104)", fix=Fix(set={f"{FG}.metric": pick}))


def _rule_legacy_trainer(c: Ctx) -> None:
    from wizard.check.rules.reward_managers import _dapo

    if c.src.entry != "ppo" or getattr(c.src, "recipe", None) or c.unknown("trainer.use_v1", f"{FG}.enable") \
            or c.v("trainer.use_v1") is not False or not _dapo(c):
        return
    c.add("VI650", "warning", (f"{FG}.enable", "trainer.use_v1"),
          f"{FG}.enable=True with trainer.use_v1=False: main_ppo runs the legacy trainer (trainer/main_ppo.py:183-191, "
          "main_ppo_v0.py and trainer/ppo/ray_trainer.py), which never reads algorithm.filter_groups (only "
          "trainer/ppo/v1/ does), so DAPO's dynamic sampling is silently off and groups whose samples all scored the "
          "same still train (verl#2211)",
          "set trainer.use_v1=True (the V1 trainer, 0.9.1's default), or drop the filter_groups settings",
          fix=Fix(set={"trainer.use_v1": True}))


def rule_dapo_filter(c: Ctx, f: Facts) -> None:
    """VI648, VI649, VI650: what DAPO's group filter compares, and whether the trainer runs it at all."""
    _rule_legacy_trainer(c)
    if not _dapo_v1(c):
        return
    _rule_missing_metric(c)
    _rule_shaped_metric(c)
