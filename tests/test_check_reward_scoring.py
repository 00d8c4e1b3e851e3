"""Reward-computation mistakes of probe round 30, each shown with verl 0.9.1's own code on the CPU, then planted in a
config `check` must flag, beside controls it must pass:

- VI765, R30-01 (verl PR#5635): a synchronous custom reward function timing out with signals (signal.alarm,
  math_verify's defaults): verl's NaiveRewardManager.run_single calls it with loop.run_in_executor, in a worker
  thread, where signal.signal raises ValueError (the oracle); `check --deep` now calls it there too (VI875).
- VI766, R30-02 (verl#2150): a prompt asking for \\boxed{} with data_source openai/gsm8k, whose scorer reads only
  '#### N': the formats each built-in scorer accepts come from running verl's default_compute_score
  (scripts/verl_scorer_formats.py; regenerating the table is the oracle).
- VI922, R30-03 (verl#1031): one training set mixing openai/gsm8k (float) and math_dapo (dict): run_single's
  reward_extra_info for each, merged as agent_loop.py:1107-1111 merges them, raises KeyError 'score'.
"""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path

import pytest
from helpers_scripts import regenerated

from wizard.check.lint import check
from wizard.check.rules import scorer_formats

ROOT = Path(__file__).resolve().parent.parent
R = "actor_rollout_ref.rollout"
BASE = ["algorithm.adv_estimator=grpo", "data.train_batch_size=2", "data.max_prompt_length=512",
        "data.max_response_length=512", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", f"{R}.name=vllm", f"{R}.n=2",
        f"{R}.tensor_model_parallel_size=1", f"{R}.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1", "trainer.nnodes=1", "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct"]
HASH = "Let's think step by step and output the final answer after \"####\"."
BOX = "Please reason step by step, and put your final answer within \\boxed{}."
DAPO = "The last line of your response should be of the form Answer: $Answer (without quotes)."


def _ids(*extra: str) -> dict[str, list]:
    report = check(None, [*BASE, *extra], defaults="snapshot", env={"HOME": "/nonexistent-home"}, nnodes=1,
                   gpus_per_node=1, gpu_memory_gb=80)
    out: dict[str, list] = {}
    for f in report.findings:
        out.setdefault(f.problem.rule, []).append(f.problem)
    return out


def _rows(path: Path, rows: list[tuple[str, str]]) -> str:
    with open(path, "w", encoding="utf-8") as fh:
        for i, (source, instr) in enumerate(rows):
            fh.write(json.dumps({"data_source": source, "prompt": [{"role": "user", "content": f"Q{i}? {instr}"}],
                                 "reward_model": {"ground_truth": "72"}, "extra_info": {"index": i}}) + "\n")
    return str(path)


# --- oracles: verl's own code on the CPU ---------------------------------------------------------------------------

def _manager(fn, text: str):
    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    class Tok:
        def decode(self, ids, skip_special_tokens=True):
            return text

    mgr = NaiveRewardManager(OmegaConf.create({"reward": {}}), Tok(), fn)

    def run(source: str):
        data = DataProto.from_dict(
            tensors={"responses": torch.ones(1, 4, dtype=torch.long), "prompts": torch.ones(1, 2, dtype=torch.long),
                     "attention_mask": torch.ones(1, 6, dtype=torch.long)},
            non_tensors={"data_source": np.array([source], dtype=object),
                         "reward_model": np.array([{"ground_truth": "72"}], dtype=object),
                         "extra_info": np.array([{}], dtype=object)})
        return mgr.loop.run_until_complete(mgr.run_single(data))
    return mgr, run


def _alarm_score(data_source, solution_str, ground_truth, extra_info=None):
    old = signal.signal(signal.SIGALRM, lambda *a: None)  # ValueError off the main thread
    signal.alarm(5)
    try:
        return 1.0 if ground_truth in solution_str else 0.0
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _plain_score(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if ground_truth in solution_str else 0.0


@pytest.mark.slow
@pytest.mark.verl
def test_verl_runs_a_sync_reward_function_off_the_main_thread():
    assert _alarm_score("x", "#### 72", "72") == 1.0  # the main thread: fine
    _, run = _manager(_alarm_score, "#### 72")
    with pytest.raises(ValueError, match="main thread"):
        run("x")  # verl's run_single: run_in_executor -> a worker thread
    _, run = _manager(_plain_score, "#### 72")
    assert run("x")["reward_score"] == 1.0  # the control


@pytest.mark.verl
def test_regenerating_the_scorer_table_gives_the_committed_one():
    assert regenerated("verl_scorer_formats") == (ROOT / "wizard" / "check" / "data" / "verl_scorer_formats.json").read_text(encoding="utf-8")


@pytest.mark.verl
def test_verl_scores_boxed_zero_for_gsm8k_and_the_table_says_so():
    from verl.utils.reward_score import default_compute_score

    fmts = scorer_formats.scorer_table()["formats"]
    assert default_compute_score("openai/gsm8k", fmts["boxed"]["response"], "72") == 0.0
    assert default_compute_score("openai/gsm8k", fmts["hashes"]["response"], "72") == 1.0
    assert scorer_formats.scorer_table()["data_sources"]["openai/gsm8k"]["accepts"] == ["hashes"]
    assert "boxed" in scorer_formats.scorer_table()["data_sources"]["lighteval/MATH"]["accepts"]


@pytest.mark.verl
def test_verl_merges_extra_info_by_the_first_samples_keys():
    texts = {"openai/gsm8k": "48+24=72\n#### 72", "math_dapo": "48+24=72\nAnswer: 72"}
    outs = {}
    for source, text in texts.items():
        _, run = _manager(None, text)
        outs[source] = run(source)["reward_extra_info"]
    assert set(outs["openai/gsm8k"]) == set(scorer_formats.extra_info_keys("openai/gsm8k"))
    assert set(outs["math_dapo"]) == set(scorer_formats.extra_info_keys("math_dapo"))

    def merge(infos):  # experimental/agent_loop/agent_loop.py:1107-1111 (reward_loop.py:365-369 the same)
        keys = list(infos[0].keys())
        return {key: [info[key] for info in infos] for key in keys}

    with pytest.raises(KeyError, match="score"):
        merge([outs["math_dapo"], outs["openai/gsm8k"]])
    assert list(merge([outs["openai/gsm8k"], outs["math_dapo"]])) == ["acc"]  # pred, score dropped
    assert merge([outs["math_dapo"], outs["math_dapo"]])  # the control: one scorer


# --- check(): VI765 ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, fires", [
    ("import signal\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
     "    signal.alarm(3)\n    return 1.0\n", True),
    ("from math_verify import parse, verify\ndef compute_score(data_source, solution_str, ground_truth, "
     "extra_info=None):\n    return float(verify(parse(ground_truth), parse(solution_str)))\n", True),
    ("from math_verify import math_metric, LatexExtractionConfig\n_v = math_metric(gold_extraction_target="
     "(LatexExtractionConfig(),))\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
     "    return _v([ground_truth], [solution_str])[0]\n", True),
    ("from math_verify import parse, verify\ndef compute_score(data_source, solution_str, ground_truth, "
     "extra_info=None):\n    g = parse(ground_truth, parsing_timeout=None)\n"
     "    return float(verify(g, parse(solution_str, parsing_timeout=None), timeout_seconds=None))\n", False),
    ("import signal\nasync def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
     "    signal.alarm(3)\n    return 1.0\n", False),
    ("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n", False),
])
def test_vi765_signal_timeouts_in_the_reward_file(tmp_path, body, fires):
    path = tmp_path / "reward.py"
    path.write_text(body)
    hits = _ids(f"reward.custom_reward_function.path={path}").get("VI765", [])
    assert bool(hits) == fires, hits
    if fires:
        assert hits[0].severity == "warning" and "naive.py:74-84" in hits[0].message


def test_vi765_is_silent_on_verls_own_process_pool_scorer():
    import verl

    # utils/reward_score/math_verify.py calls parse/verify with their timeouts, in a spawn ProcessPoolExecutor
    path = Path(verl.__file__).parent / "utils" / "reward_score" / "math_verify.py"
    assert "VI765" not in _ids(f"reward.custom_reward_function.path={path}")


def test_deep_scores_in_a_worker_thread_as_verl_does():
    from wizard.check.deep_child import Phases, _thread_score

    p = Phases()
    _thread_score(_alarm_score, dict(data_source="x", solution_str="72", ground_truth="72", extra_info={}), 1.0,
                  ["k"], p)
    assert [f["rule"] for f in p.findings] == ["VI875"] and "worker thread" in p.findings[0]["message"]

    def swallowing(**kw):  # math_verify's way: the ValueError caught, 0 returned
        try:
            return _alarm_score(**kw)
        except ValueError:
            return 0.0
    p = Phases()
    _thread_score(swallowing, dict(data_source="x", solution_str="72", ground_truth="72", extra_info={}), 1.0,
                  ["k"], p)
    assert p.findings and "0.0 in a worker thread" in p.findings[0]["message"]
    p = Phases()
    _thread_score(_plain_score, dict(data_source="x", solution_str="72", ground_truth="72", extra_info={}), 1.0,
                  ["k"], p)
    assert not p.findings  # the control
    import random

    p = Phases()
    _thread_score(lambda **kw: random.random(), dict(data_source="x", solution_str="72", ground_truth="72",
                                                    extra_info={}), 0.5, ["k"], p)
    assert not p.findings  # a random score differs anywhere: not a thread problem


# --- check(): VI766 and VI922 ----------------------------------------------------------------------------------------

def test_vi766_boxed_prompt_for_gsm8k(tmp_path):
    bad = _rows(tmp_path / "boxed.jsonl", [("openai/gsm8k", BOX)] * 3)
    hits = _ids(f"data.train_files={bad}").get("VI766", [])
    assert len(hits) == 1 and hits[0].severity == "warning" and "'####'" in hits[0].message
    for ok in (_rows(tmp_path / "hash.jsonl", [("openai/gsm8k", HASH)]),  # the format it reads
               _rows(tmp_path / "math.jsonl", [("lighteval/MATH", BOX)]),  # MATH reads \boxed
               _rows(tmp_path / "dapo.jsonl", [("math_dapo", DAPO)]),  # names no marker it rejects
               _rows(tmp_path / "both.jsonl", [("openai/gsm8k", BOX + " " + HASH)])):  # names one it accepts
        assert "VI766" not in _ids(f"data.train_files={ok}"), ok
    # a custom reward function or a reward model scores: the built-in scorer is not used
    fn = tmp_path / "fn.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")
    assert "VI766" not in _ids(f"data.train_files={bad}", f"reward.custom_reward_function.path={fn}")
    assert "VI766" not in _ids(f"data.train_files={bad}", "reward.reward_model.enable=True",
                               "reward.reward_model.model_path=Qwen/Qwen2.5-0.5B-Instruct")


def test_vi922_mixed_float_and_dict_scorers(tmp_path):
    mixed = _rows(tmp_path / "mixed.jsonl", [("openai/gsm8k", HASH), ("math_dapo", DAPO)] * 2)
    hits = _ids(f"data.train_files={mixed}").get("VI922", [])
    assert len(hits) == 1 and hits[0].severity == "warning" and "'math_dapo'" in hits[0].message
    # across the files of one set too
    a, b = _rows(tmp_path / "a.jsonl", [("openai/gsm8k", HASH)]), _rows(tmp_path / "b.jsonl", [("math_dapo", DAPO)])
    assert "VI922" in _ids(f"data.train_files=[{a},{b}]")
    # controls: one scorer per set (train and val are merged separately), two float scorers, a custom function
    assert "VI922" not in _ids(f"data.train_files={a}", f"data.val_files={b}")
    same = _rows(tmp_path / "same.jsonl", [("openai/gsm8k", HASH), ("lighteval/MATH", BOX)])
    assert "VI922" not in _ids(f"data.train_files={same}")
    fn = tmp_path / "fn.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")
    assert "VI922" not in _ids(f"data.train_files={mixed}", f"reward.custom_reward_function.path={fn}")
