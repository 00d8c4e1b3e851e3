"""VI628: a custom reward function that returns token-level (per-token / per-step) rewards, which verl 0.9.1's reward
loop takes as one number per response (real cases verl#3683: "a custom reward function that gives token-level
rewards"; verl#1039: a rule-based PRM, one score per reasoning step, as the dict's "score").

The oracle is verl's own code on the CPU: load_reward_manager + the manager's run_single on a one-row batch with the
planted function, then the manager's assemble_rm_scores (what the reward loop does with the scores,
reward_manager/base.py:62-82) -- which raises for the list and places the float control. check reads the file (ast),
never imports it.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from test_reward_managers import BASE, _compose, _row, _run

from wizard.check.lint import check

FN = "reward.custom_reward_function"

DENSE = {  # verl#3683: one value per token, as a list, a comprehension, a name bound to a list
    "list_var": ("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                 "    rewards = []\n    for tok in solution_str.split():\n"
                 "        rewards.append(1.0 if tok == ground_truth else 0.0)\n    return rewards\n"),
    "comprehension": ("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n"
                      "    return [float(ground_truth in s) for s in solution_str.split('\\n')]\n"),
    # verl#1039: a rule-based process reward, one score per step, as the dict's "score" through a helper
    "prm_dict": ("def step_scores(text, gt):\n    return [1.0 if gt in s else -0.1 for s in text.split('\\n\\n')]\n\n\n"
                 "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                 "    if not solution_str:\n        return {'score': 0.0}\n"
                 "    scores = step_scores(solution_str, ground_truth)\n"
                 "    return {'score': scores, 'acc': float(ground_truth in solution_str)}\n"),
}
SCALAR = {  # the controls: one number per response, the step scores kept for logging
    "float": "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.5\n",
    "mean_of_steps": ("def step_scores(text, gt):\n    return [1.0 if gt in s else 0.0 for s in text.split('\\n')]\n\n\n"
                      "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                      "    scores = step_scores(solution_str, ground_truth)\n"
                      "    mean = sum(scores) / max(len(scores), 1)\n"
                      "    return {'score': mean, 'min_step': min(scores, default=0.0)}\n"),
    "param_passthrough": ("def compute_score(data_source, solution_str, ground_truth, extra_info=None, score=1.0):\n"
                          "    return score if ground_truth in solution_str else 0.0\n"),
}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


def _hits(path: Path, *extra: str) -> list:
    report = check(None, [*BASE, f"{FN}.path={path}", f"{FN}.name=compute_score", *extra])
    return [f.problem for f in report.findings if f.problem.rule == "VI628"]


@pytest.mark.parametrize("name", sorted(DENSE))
def test_a_token_level_return_is_an_error(tmp_path, name):
    [hit] = _hits(_write(tmp_path, name, DENSE[name]))
    assert hit.severity == "error" and hit.keys == (f"{FN}.path", f"{FN}.name")
    assert f"{name}.py:compute_score" in hit.message and "one number per response" in hit.message
    assert ("'score' is a list" in hit.message) == (name == "prm_dict")
    assert "float" in hit.hint


@pytest.mark.parametrize("name", sorted(SCALAR))
def test_one_number_per_response_stays_clean(tmp_path, name):
    assert not _hits(_write(tmp_path, name, SCALAR[name]))


def test_a_reward_manager_of_ones_own_is_not_judged(tmp_path):
    path = _write(tmp_path, "comprehension", DENSE["comprehension"])
    assert not _hits(path, "reward.reward_manager.source=importlib", "reward.reward_manager.name=MyManager",
                     f"reward.reward_manager.module.path={path}")


@pytest.mark.slow
@pytest.mark.verl
def test_verl_fails_on_the_list_and_places_the_number(tiny_model, tmp_path):
    """The oracle: verl's naive manager passes the function's list through as the sample's reward_score, and
    assemble_rm_scores (what the reward loop then runs) raises on it; the controls' numbers land on the last token."""
    import torch
    from transformers import AutoTokenizer

    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    cls = get_reward_manager_cls("naive")
    rows = [_row(tok, "step one 72\n\nstep two 72\n\nso 72", resp_len=24), _row(tok, "72", resp_len=24)]
    batch = DataProto.concat(rows)
    for name, text in {**DENSE, **SCALAR}.items():
        fn = _write(tmp_path, name, text)
        config = _compose(["algorithm.adv_estimator=grpo", f"{FN}.path={fn}", f"{FN}.name=compute_score"])
        outs = [_run(config, tok, row) for row in rows]
        assert {o[0] for o in outs} == {cls.__name__}
        scores = [o[1]["reward_score"] for o in outs]
        if name in DENSE:
            assert all(isinstance(s, list) for s in scores), (name, scores)
            with pytest.raises((ValueError, RuntimeError, TypeError)):
                cls.assemble_rm_scores(batch, scores)
        else:
            placed = cls.assemble_rm_scores(batch, [float(s) for s in scores])
            assert placed.shape == batch.batch["responses"].shape and torch.count_nonzero(placed) <= 2, name
        assert bool(_hits(fn)) == (name in DENSE), name


@pytest.mark.verl
def test_every_registered_manager_takes_one_score_per_response():
    """What the rule stands on, read from verl: each manager verl registers takes the dict's "score" or the result
    itself as the sample's reward_score (naive.py:88-99 and the same lines in dapo, gdpo, limited, remote)."""
    import verl.experimental.reward_loop.reward_manager  # noqa: F401  (registers the managers)
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

    assert {"naive", "dapo", "gdpo", "remote"} <= set(REWARD_MANAGER)  # and limited.py's, under its own name
    for name, cls in REWARD_MANAGER.items():
        source = inspect.getsource(cls)
        assert 'score = result["score"]' in source and "score = result\n" in source and '"reward_score"' in source, name
