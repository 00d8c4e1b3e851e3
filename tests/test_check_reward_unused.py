"""VI975: a reward model served beside a custom reward function that never consults it (real case verl#2934: a
rule-based compute_score left in place when a Skywork classifier RM was added; only the rule scored).

The oracle is verl's own RewardLoopWorker (experimental/reward_loop/reward_loop.py), built here for real on the CPU
(no Ray: the class is plain, ray.remote wraps it later): its _init_reward_fn loads the reward file through verl's
load_reward_manager and its compute_score chooses between the custom function and compute_score_disrm
(reward_loop.py:145-155). The reward router is a local HTTP server that counts what reaches it, and compute_score_disrm
is replaced by a spy: the reward model is consulted when either is reached. For each reward file check must warn
exactly when verl's worker never consults the reward model. check itself only parses the file (ast), never imports it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers_http import json_server
from wizard.check.lint import check

RM, FN = "reward.reward_model", "reward.custom_reward_function"
HEAD = "def compute_score(data_source, solution_str, ground_truth, extra_info=None"
RULE = "    return 1.0 if len(solution_str.strip()) > 20 else 0.0\n"
POST = '''
import json, urllib.request


def _ask(address, text):
    req = urllib.request.Request(f"http://{address}/classify", data=json.dumps({"input": text}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return float(json.loads(resp.read())["score"])


'''
FILES = {
    # the real case's two variants (verl#2934): the rule alone, with and without **kwargs
    "rule_kwargs": HEAD + ", **kwargs):\n" + RULE,
    "rule_plain": HEAD + "):\n" + RULE,
    # the parameters VI887's hint adds, taken and never used
    "unused_params": HEAD + ", reward_router_address=None, reward_model_tokenizer=None):\n" + RULE,
    # reads another key only
    "tokenizer_only": HEAD + ", **kwargs):\n    tok = kwargs.get('reward_model_tokenizer')\n" + RULE,
    # functions that consult the reward model (verl's generative-judge function takes the parameter and posts to it)
    "judge_param": POST + HEAD + ", reward_router_address=None, reward_model_tokenizer=None):\n"
                          "    return _ask(reward_router_address, solution_str) + (1.0 if solution_str else 0.0)\n",
    "judge_subscript": POST + HEAD + ", **kwargs):\n    return _ask(kwargs['reward_router_address'], solution_str)\n",
    "judge_get": POST + HEAD + ", **kw):\n    addr = kw.get('reward_router_address')\n    return _ask(addr, solution_str)\n",
    "forwards_kwargs": POST + "def _score(text, reward_router_address=None, **_):\n    return _ask(reward_router_address, text)\n\n\n"
                       + HEAD + ", **kwargs):\n    return _score(solution_str, **kwargs)\n",
}
RESPONSE = "a response long enough for the rule to pass"


@pytest.fixture(scope="module")
def router():
    with json_server(200, {"score": 0.5}) as (address, hits):
        yield address, hits


def _file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(FILES[name], encoding="utf-8")
    return path


def _verl_consults_rm(model: Path, reward: Path | None, router: tuple[str, list[str]]) -> tuple[bool, str]:
    """(whether verl's RewardLoopWorker.compute_score reached the reward model for one sample, what it returned or
    raised): the router got a request or compute_score_disrm was called."""
    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    from verl import DataProto
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    config = OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": str(model), "tokenizer_path": None}},
        "reward": {"custom_reward_function": {"path": str(reward) if reward else None, "name": "compute_score",
                                              "reward_kwargs": {}},
                   "reward_manager": {"source": "register", "name": "naive"},
                   "sandbox_fusion": {"url": None},
                   "reward_model": {"enable": True, "model_path": str(model), "rollout": {"name": "vllm"}}}})
    address, hits = router
    worker = RewardLoopWorker(config, reward_router_address=address)
    disrm: list[int] = []

    async def spy(data):
        disrm.append(len(data))
        return {"reward_score": 0.5}

    worker.compute_score_disrm = spy
    tok = AutoTokenizer.from_pretrained(str(model))
    prompt, ids = tok("What is 2+2?", return_tensors="pt")["input_ids"], tok(RESPONSE, return_tensors="pt")["input_ids"]
    data = DataProto.from_dict(
        tensors={"prompts": prompt, "responses": ids,
                 "attention_mask": torch.ones(1, prompt.shape[1] + ids.shape[1], dtype=torch.long)},
        non_tensors={"data_source": np.array(["math"], dtype=object),
                     "reward_model": np.array([{"ground_truth": "4"}], dtype=object),
                     "extra_info": np.array([{}], dtype=object)})
    before = len(hits)
    try:
        out = repr(worker.loop.run_until_complete(worker.compute_score(data))["reward_score"])
    except TypeError as exc:  # the function without the router keywords (VI887)
        out = f"TypeError: {exc}"
    return bool(disrm) or len(hits) > before, out


def _vi975(model: Path, reward: Path | None, *extra: str) -> list:
    report = check(None, [f"actor_rollout_ref.model.path={model}", f"{RM}.enable=True", f"{RM}.model_path={model}",
                          f"{RM}.rollout.name=vllm", "actor_rollout_ref.rollout.name=vllm",
                          *([f"{FN}.path={reward}", f"{FN}.name=compute_score"] if reward else []), *extra])
    return [f.problem for f in report.findings if f.problem.rule == "VI975"]


CONSULTS = {"rule_kwargs": False, "rule_plain": False, "unused_params": False, "tokenizer_only": False,
            "judge_param": True, "judge_subscript": True, "judge_get": True, "forwards_kwargs": True}


@pytest.mark.verl
@pytest.mark.slow  # verl's reward loop worker, once per reward file
@pytest.mark.parametrize("name", sorted(FILES))
def test_check_warns_exactly_when_verls_reward_loop_never_consults_the_rm(tmp_path, tiny_model, router, name):
    reward = _file(tmp_path, name)
    consulted, out = _verl_consults_rm(tiny_model, reward, router)
    assert consulted is CONSULTS[name], out  # the premise, from verl's own worker
    hits = _vi975(tiny_model, reward)
    assert len(hits) == (0 if consulted else 1), [h.message for h in hits]
    if hits:
        assert hits[0].severity == "warning" and "reward_loop.py:145-155" in hits[0].message
        assert f"remove {FN}.path" in hits[0].hint and "reward_router_address" in hits[0].hint


@pytest.mark.verl
@pytest.mark.slow  # verl's reward loop worker
def test_without_a_custom_function_verl_calls_the_rm_and_check_is_quiet(tiny_model, router):
    consulted, _ = _verl_consults_rm(tiny_model, None, router)
    assert consulted  # compute_score_disrm (reward_loop.py:150-153)
    assert not _vi975(tiny_model, None)


@pytest.mark.verl
def test_the_real_case_variants_are_named(tmp_path, tiny_model):
    # r13_04.sh / r13_04b.sh (verl#2934): VI887 names the signature crash, VI975 the RM no reward comes from
    for name, crash in (("rule_plain", True), ("rule_kwargs", False)):
        reward = _file(tmp_path, name)
        report = check(None, [f"actor_rollout_ref.model.path={tiny_model}", f"{FN}.path={reward}",
                              f"{FN}.name=compute_score", f"{RM}.enable=True",
                              f"{RM}.model_path=Skywork/Skywork-Reward-Llama-3.1-8B", f"{RM}.rollout.name=vllm",
                              "actor_rollout_ref.rollout.name=vllm", "trainer.n_gpus_per_node=8"])
        assert ("VI887" in report.ids("error")) is crash
        [hit] = [f.problem for f in report.findings if f.problem.rule == "VI975"]
        assert "Skywork/Skywork-Reward-Llama-3.1-8B" in hit.message and "verl#2934" in hit.message


@pytest.mark.verl
def test_no_rm_or_an_own_reward_manager_is_quiet(tmp_path, tiny_model):
    reward = _file(tmp_path, "rule_kwargs")
    assert _vi975(tiny_model, reward)  # the premise: this file is named with the RM on
    assert not _vi975(tiny_model, reward, f"{RM}.enable=False")
    # a reward manager of the user's own gets the router too (reward_loop.py:131-136) and may consult it itself
    manager = tmp_path / "manager.py"
    manager.write_text("class MyManager:\n    pass\n", encoding="utf-8")
    assert not _vi975(tiny_model, reward, "reward.reward_manager.source=importlib", "reward.reward_manager.name=MyManager",
                      f"reward.reward_manager.module.path={manager}")


def test_check_never_imports_the_reward_file(tmp_path, tiny_model):
    reward = tmp_path / "reward.py"
    marker = tmp_path / "imported"
    reward.write_text(f"open({str(marker)!r}, 'w').close()\n" + FILES["rule_kwargs"], encoding="utf-8")
    assert _vi975(tiny_model, reward)
    assert not marker.exists()
