"""VI648, VI649: what DAPO's group filter (algorithm.filter_groups.metric) compares on verl 0.9.1's V1 trainer
(real cases verl#1427: metric=seq_final_reward with verl's built-in scorer; verl-recipe#125: the filter on the reward
the overlong penalty shapes).

The oracles are verl's own code on the CPU: the hydra-composed ppo_trainer config, load_reward_manager and the
manager's run_single with verl's default scorer (no custom function), and verl's ReplayBuffer._dapo_filtered_keys fed
what the manager produced (transfer_queue replaced by an in-memory stand-in: test_reward_managers.replay_buffer_module).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_reward_managers import BASE, OVERLONG, _compose, _ids, _row, _run, replay_buffer_module  # noqa: F401

from wizard.check.lint import check

DAPO = ["algorithm.filter_groups.enable=True"]


def _rows(tmp_path: Path, data_source: str) -> Path:
    path = tmp_path / f"{data_source.replace('/', '_')}.jsonl"
    row = {"data_source": data_source, "prompt": [{"role": "user", "content": "What is 8 x 9?"}],
           "reward_model": {"style": "rule", "ground_truth": "72"}, "extra_info": {"index": 0}}
    path.write_text("\n".join(json.dumps({**row, "extra_info": {"index": i}}) for i in range(4)) + "\n",
                    encoding="utf-8")
    return path


def _filtered(module, metric: str, outs: list[dict]) -> bool | None:
    """verl's ReplayBuffer on one finished group of these trajectories: True when it drops the group, False when it
    keeps it, None when it stops on a missing metric."""
    import sys

    import torch

    tq = sys.modules["transfer_queue"]
    buffer = module.ReplayBuffer(
        trainer_mode="sync", trainer_config={}, max_off_policy_threshold=None, max_off_policy_strategy="drop",
        sampler_kwargs={}, refill_fn=lambda *a: None, filter_groups_metric=metric, train_batch_size=1, gen_batch_size=1)
    for i, out in enumerate(outs):
        key = f"u0_{i}"
        buffer.partitions["train"][key] = {}
        tq.store[key] = {"extra_fields": {"reward_extra_info": dict(out["reward_extra_info"])},
                         "rm_scores": torch.tensor([0.0, float(out["reward_score"])])}
    buffer.finished_keys["train"] = {"u0"}
    try:
        uids, _ = buffer._dapo_filtered_keys("train")
    except RuntimeError as exc:
        assert "Finished groups are missing DAPO metric" in str(exc)
        return None
    return "u0" in uids


# ---- VI648: a metric verl's built-in scorer never returns ----

@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.parametrize(("data_source", "metric"), [
    ("openai/gsm8k", "seq_final_reward"),  # verl#1427: the old recipe trainer's own metric
    ("openai/gsm8k", "score"),  # a float scorer: only 'acc'
    ("openai/gsm8k", "acc"),  # control
    ("math_dapo", "score"),  # control: math_dapo's dict has score
])
def test_verl_stops_where_check_says_the_builtin_scorer_lacks_the_metric(tiny_model, tmp_path, replay_buffer_module,
                                                                          data_source, metric):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    config = _compose(["algorithm.adv_estimator=grpo", *DAPO, f"algorithm.filter_groups.metric={metric}"])
    outs = [_run(config, tok, _row(tok, text, data_source=data_source))[1]
            for text in ("#### 72", "The answer is \\boxed{72}")]
    stops = _filtered(replay_buffer_module, metric, outs) is None
    data = _rows(tmp_path, data_source)
    hits = _ids(check(None, [*BASE, *DAPO, f"algorithm.filter_groups.metric={metric}", f"data.train_files={data}"]),
                "VI648")
    assert bool(hits) == stops, (data_source, metric, outs)
    if hits:
        assert hits[0].severity == "error" and metric in hits[0].message and "metric=acc" in hits[0].hint


def test_check_without_readable_rows_flags_only_what_no_builtin_scorer_returns():
    assert _ids(check(None, [*BASE, *DAPO, "algorithm.filter_groups.metric=seq_reward"]), "VI648")
    assert not _ids(check(None, [*BASE, *DAPO, "algorithm.filter_groups.metric=score"]), "VI648")  # math_dapo gives it
    assert not _ids(check(None, [*BASE, *DAPO, "algorithm.filter_groups.metric=reward"]), "VI648")


def test_check_metric_controls(tmp_path):
    bad = "algorithm.filter_groups.metric=seq_final_reward"
    assert not _ids(check(None, [*BASE, bad]), "VI648")  # filtering off
    assert not _ids(check(None, [*BASE, *DAPO, bad, "trainer.use_v1=False"]), "VI648")  # the legacy trainer
    fn = tmp_path / "r.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.0\n",
                  encoding="utf-8")
    assert not _ids(check(None, [*BASE, *DAPO, bad, f"reward.custom_reward_function.path={fn}"]), "VI648")  # VI999's
    log = [*OVERLONG[:3], "+reward.reward_kwargs.overlong_buffer_cfg.log=True", OVERLONG[4]]
    assert not _ids(check(None, [*BASE, *DAPO, "algorithm.filter_groups.metric=overlong",
                                 "reward.reward_manager.name=dapo", *log]), "VI648")  # the DAPO manager's logged key


# ---- VI649: the filter on the reward the overlong penalty shapes ----

@pytest.mark.slow
@pytest.mark.verl
def test_verl_keeps_a_same_outcome_group_on_the_shaped_reward(tiny_model, replay_buffer_module):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    config = _compose(["algorithm.adv_estimator=grpo", "reward.reward_manager.name=dapo", *DAPO, *OVERLONG])
    # two wrong answers (gsm8k wants '#### 72'): a short one and one that runs into the 16-token buffer of 64
    outs = [_run(config, tok, _row(tok, text, resp_len=64))[1] for text in ("#### 5", "step " * 200 + "#### 5")]
    assert {o["reward_extra_info"]["acc"] for o in outs} == {0.0}
    assert outs[0]["reward_score"] != outs[1]["reward_score"]  # the penalty shapes the reward
    kept = _filtered(replay_buffer_module, "reward", outs) is False
    assert kept and _filtered(replay_buffer_module, "acc", outs) is True  # acc drops the no-signal group
    hits = _ids(check(None, [*BASE, *DAPO, "reward.reward_manager.name=dapo", *OVERLONG]), "VI649")  # metric: default
    assert len(hits) == 1 and hits[0].severity == "warning" and "metric=acc" in hits[0].hint
    assert not _ids(check(None, [*BASE, *DAPO, "algorithm.filter_groups.metric=acc", "reward.reward_manager.name=dapo",
                                 *OVERLONG]), "VI649")


@pytest.mark.parametrize("extra", [
    [*OVERLONG],  # the naive manager applies no penalty (VI996's)
    ["reward.reward_manager.name=dapo", *OVERLONG, "trainer.use_v1=False"],  # the legacy trainer filters nothing
    ["reward.reward_manager.name=dapo", *(o.replace("enable=True", "enable=False") for o in OVERLONG)],
    ["reward.reward_manager.name=dapo", *(o.replace("penalty_factor=1.0", "penalty_factor=0.0") for o in OVERLONG)],
])
def test_check_shaped_metric_controls(extra):
    assert not _ids(check(None, [*BASE, *DAPO, *extra]), "VI649")


def test_check_suggests_score_for_a_dict_function_without_acc(tmp_path):
    fn = tmp_path / "r.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                  "    return {'score': 1.0, 'correct': 1.0}\n", encoding="utf-8")
    [hit] = _ids(check(None, [*BASE, *DAPO, "reward.reward_manager.name=dapo", *OVERLONG,
                              f"reward.custom_reward_function.path={fn}"]), "VI649")
    assert "metric=score" in hit.hint


def test_planned_dapo_filters_on_acc_and_draws_neither():
    import wizard

    plan = wizard.plan(wizard.load_profile("dapo-32gpu"), base_dir="/r")
    assert plan.value("algorithm.filter_groups.metric") == "acc"
    assert plan.value("reward.reward_kwargs.overlong_buffer_cfg.enable") is True
    overrides = [f"algorithm.filter_groups.metric={plan.value('algorithm.filter_groups.metric')}",
                 "reward.reward_manager.name=dapo", *OVERLONG]
    report = check(None, [*BASE, *DAPO, *overrides])
    assert not _ids(report, "VI648") and not _ids(report, "VI649")


# ---- VI650: the group filter on the legacy trainer ----

def test_verl_reads_filter_groups_only_in_the_v1_trainer():
    """verl's own source: main_ppo picks the legacy TaskRunner on use_v1=False, and no module on that path names
    filter_groups; check warns exactly there."""
    from helpers_verl import verl_root

    root = verl_root()
    main = (root / "trainer/main_ppo.py").read_text(encoding="utf-8")
    assert "if config.trainer.use_v1:" in main and "from verl.trainer.main_ppo_v0 import TaskRunner" in main
    readers = {p.relative_to(root).as_posix() for p in root.rglob("*.py")
               if "filter_groups" in p.read_text(encoding="utf-8", errors="replace")}
    assert "trainer/ppo/v1/trainer_base.py" in readers
    assert not readers & {"trainer/main_ppo_v0.py", "trainer/ppo/ray_trainer.py"}
    [hit] = _ids(check(None, [*BASE, *DAPO, "trainer.use_v1=False"]), "VI650")
    assert hit.severity == "warning" and "trainer.use_v1=True" in hit.hint
    assert not _ids(check(None, [*BASE, *DAPO]), "VI650")  # V1: the filter runs
    assert not _ids(check(None, [*BASE, "trainer.use_v1=False"]), "VI650")  # no filter asked for


# ---- the planner's own choice for a custom reward function (VI508 where it cannot tell) ----

NUMBER = "    return 0.0\n"
DICT_ACC = "    return {'score': 1.0, 'acc': 1.0}\n"
DICT_NO_ACC = "    return {'score': 1.0, 'correct': 1.0}\n"
UNREADABLE = "    value = len(solution_str) % 2\n    return value\n"


@pytest.mark.slow
@pytest.mark.verl
def test_verls_dapo_manager_keeps_a_returned_number_as_acc(tiny_model, tmp_path):
    """The oracle for the planner's 'acc' on a function that returns a number: verl's DAPO manager puts the number
    into reward_extra_info['acc'] (experimental/reward_loop/reward_manager/dapo.py:102-104)."""
    from transformers import AutoTokenizer

    fn = tmp_path / "r.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n" + NUMBER,
                  encoding="utf-8")
    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    config = _compose(["algorithm.adv_estimator=grpo", "reward.reward_manager.name=dapo", *DAPO, *OVERLONG,
                       f"reward.custom_reward_function.path={fn}"])
    out = _run(config, tok, _row(tok, "#### 72"))[1]
    assert out["reward_extra_info"]["acc"] == 0.0


@pytest.mark.parametrize(("body", "metric"), [(NUMBER, "acc"), (DICT_ACC, "acc"), (DICT_NO_ACC, "score"),
                                              (UNREADABLE, "reward")])
def test_planned_dapo_with_a_reward_function(tmp_path, body, metric):
    import wizard

    (tmp_path / "reward.py").write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                                        + body, encoding="utf-8")
    answers = wizard.load_profile("dapo-32gpu").model_copy(update={"reward": "function",
                                                                   "reward_function": "./reward.py:compute_score"})
    plan = wizard.plan(answers, base_dir=str(tmp_path))
    assert plan.value("algorithm.filter_groups.metric") == metric
    warned = [f for f in plan.findings if f.rule == "VI508"]
    assert bool(warned) == (metric == "reward")
    overrides = [f"algorithm.filter_groups.metric={metric}", "reward.reward_manager.name=dapo", *OVERLONG,
                 f"reward.custom_reward_function.path={tmp_path / 'reward.py'}"]
    # check agrees: VI649 exactly where the planner warned (VI508 is its mirror), never VI648
    report = check(None, [*BASE, *DAPO, *overrides])
    assert bool(_ids(report, "VI649")) == bool(warned) and not _ids(report, "VI648")
