"""VI700: a generative (chat) checkpoint given as the reward model that verl scores as a classifier (held-out case
R30-05: a chat model set as reward.reward_model.model_path with no custom reward function).

verl's side is verl's own RewardLoopWorker, built for real on the CPU as in test_check_reward_unused.py: with no
custom function its compute_score posts to `/classify` (reward_loop.py:231-241) and re-raises a 4xx answer without
retrying (:165-172). The router here answers as vLLM's generate runner does for a route it does not serve (404).
vLLM's side (which checkpoints get the generate runner) is vLLM's _SUFFIX_TO_DEFAULTS, cited in
wizard/check/rules/reward_model.py; vLLM itself cannot be installed on these machines.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers_http import json_server
from wizard.check.lint import check

RM, FN = "reward.reward_model", "reward.custom_reward_function"


def _folder(tiny_model: Path, tmp_path: Path, name: str, archs: list[str], pooling: bool = False) -> Path:
    folder = tmp_path / name
    shutil.copytree(tiny_model, folder)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = archs
    (folder / "config.json").write_text(json.dumps(config))
    if pooling:  # a Sentence-Transformers layout: vLLM's get_pooling_config makes it a pooling model
        (folder / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "",
                                                          "type": "sentence_transformers.models.Transformer"},
                                                         {"idx": 1, "name": "1", "path": "1_Pooling",
                                                          "type": "sentence_transformers.models.Pooling"}]))
    return folder


def _vi700(model: Path, *extra: str) -> list:
    report = check(None, [f"actor_rollout_ref.model.path={model}", f"{RM}.enable=True", f"{RM}.model_path={model}",
                          f"{RM}.rollout.name=vllm", "actor_rollout_ref.rollout.name=vllm", *extra])
    return [f.problem for f in report.findings if f.problem.rule == "VI700"]


@pytest.mark.verl
@pytest.mark.slow  # verl's reward loop worker
def test_verl_posts_to_classify_and_stops_at_the_first_4xx(tiny_model):
    import aiohttp
    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    from verl import DataProto
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    with json_server(404, {"detail": "Not Found"}) as (address, hits):  # as vLLM's generate runner: no /classify
        config = OmegaConf.create({
            "actor_rollout_ref": {"model": {"path": str(tiny_model), "tokenizer_path": None}},
            "reward": {"custom_reward_function": {"path": None, "name": "compute_score", "reward_kwargs": {}},
                       "reward_manager": {"source": "register", "name": "naive"},
                       "sandbox_fusion": {"url": None},
                       "reward_model": {"enable": True, "model_path": str(tiny_model), "rollout": {"name": "vllm"}}}})
        worker = RewardLoopWorker(config, reward_router_address=address)
        tok = AutoTokenizer.from_pretrained(str(tiny_model))
        prompt, ids = tok("What is 2+2?", return_tensors="pt")["input_ids"], tok("4", return_tensors="pt")["input_ids"]
        raw_prompt = np.empty(1, dtype=object)
        raw_prompt[0] = [{"role": "user", "content": "What is 2+2?"}]
        data = DataProto.from_dict(
            tensors={"prompts": prompt, "responses": ids,
                     "attention_mask": torch.ones(1, prompt.shape[1] + ids.shape[1], dtype=torch.long)},
            non_tensors={"data_source": np.array(["math"], dtype=object),
                         "reward_model": np.array([{"ground_truth": "4"}], dtype=object),
                         "extra_info": np.array([{}], dtype=object), "raw_prompt": raw_prompt})
        with pytest.raises(aiohttp.ClientResponseError) as err:
            worker.loop.run_until_complete(worker.compute_score(data))
        assert err.value.status == 404
        assert hits == ["/classify"]  # one request, to /classify, and no retry


@pytest.mark.verl
def test_a_causal_lm_as_the_classifier_is_an_error_and_classifiers_are_not(tiny_model, tmp_path):
    causal = _folder(tiny_model, tmp_path, "chat", ["Qwen2ForCausalLM"])
    [hit] = _vi700(causal)
    assert hit.severity == "error" and "Qwen2ForCausalLM" in hit.message and "/classify" in hit.message
    assert f"{FN}.path" in hit.hint and "ForSequenceClassification" in hit.hint
    # the same for a vision-language chat model
    assert _vi700(_folder(tiny_model, tmp_path, "vlm", ["Qwen2VLForConditionalGeneration"]))
    # checkpoints vLLM serves with its pooling runner: a classifier, a reward model, a Sentence-Transformers layout
    for name, archs, pooling in (("cls", ["Qwen2ForSequenceClassification"], False),
                                 ("prm", ["Qwen2ForProcessRewardModel"], False),
                                 ("rm", ["InternLM2ForRewardModel"], False),
                                 ("st", ["Qwen2ForCausalLM"], True)):
        assert not _vi700(_folder(tiny_model, tmp_path, name, archs, pooling)), name


@pytest.mark.verl
def test_a_judge_an_own_runner_or_sglang_are_not_judged(tiny_model, tmp_path):
    causal = _folder(tiny_model, tmp_path, "chat", ["Qwen2ForCausalLM"])
    assert _vi700(causal)  # the premise
    judge = tmp_path / "judge.py"
    judge.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
                     "    return 0.0\n", encoding="utf-8")
    assert not _vi700(causal, f"{FN}.path={judge}", f"{FN}.name=compute_score")  # a generative judge
    assert not _vi700(causal, f"+{RM}.rollout.engine_kwargs.vllm.convert=classify")  # the user chose vLLM's runner
    assert not _vi700(causal, f"{RM}.rollout.name=sglang")
    assert not _vi700(causal, f"{RM}.enable=False")
