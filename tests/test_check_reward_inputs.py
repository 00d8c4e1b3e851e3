"""VI675 / VI676: what verl sends a discriminative reward model against what the model takes (held-out round 56:
R56-02, verl#2283, a reward-model chat template that takes exactly one user and one assistant message; R56-04/05, a
reward model whose context is shorter than prompt + response).

The oracle is verl's own RewardLoopWorker._preprocess_reward_inputs (reward_loop.py:197-229), run on the CPU on a
DataProto as the reward loop gets it: it raises for the planted template and for a tokenizer without a template, and
renders the control; the text it builds for a long response is longer than the context verl's server gets
(workers/rollout/utils.py get_max_position_embeddings, read out of verl's source and run, since importing that module
needs uvicorn).
"""

from __future__ import annotations

import ast
import asyncio
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from wizard.check.lint import check

RM = "reward.reward_model"
STRICT = ("{%- if messages|length != 2 or messages[0].role != 'user' or messages[1].role != 'assistant' -%}"
          "{{ raise_exception('only one user message followed by one assistant message') }}{%- endif -%}"
          "<|im_start|>user\n{{ messages[0].content }}\n{{ messages[1].content }}<|im_end|>\n")
SYSTEM = [{"role": "system", "content": "You are helpful ."}, {"role": "user", "content": "What is 2 + 2 ?"}]
USER = [{"role": "user", "content": "What is 2 + 2 ?"}]


def _rm(tiny_model: Path, tmp_path: Path, name: str, template: str | None = "keep", max_pos: int | None = None) -> Path:
    folder = tmp_path / name
    shutil.copytree(tiny_model, folder)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["Qwen2ForSequenceClassification"]
    if max_pos:
        config["max_position_embeddings"] = max_pos
    (folder / "config.json").write_text(json.dumps(config))
    if template != "keep":
        (folder / "chat_template.jinja").unlink(missing_ok=True)
        tc = json.loads((folder / "tokenizer_config.json").read_text())
        tc.pop("chat_template", None)
        (folder / "tokenizer_config.json").write_text(json.dumps(tc))
        if template is not None:
            (folder / "chat_template.jinja").write_text(template)
    return folder


def _data(tmp_path: Path, prompt: list[dict], rows: int = 64) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / f"data{len(prompt)}.parquet"
    pq.write_table(pa.Table.from_pylist([{"data_source": "hh", "prompt": prompt,
                                          "reward_model": {"style": "model", "ground_truth": ""}}] * rows), path)
    return path


def _run(policy: Path, rm: Path, data: Path, *extra: str, rule: str) -> list:
    report = check(None, [f"actor_rollout_ref.model.path={policy}", "actor_rollout_ref.rollout.name=vllm",
                          f"data.train_files={data}", f"data.val_files={data}", "data.train_batch_size=8",
                          f"{RM}.enable=True", f"{RM}.model_path={rm}", f"{RM}.rollout.name=vllm",
                          f"{RM}.rollout.tensor_model_parallel_size=1", *extra])
    return [f.problem for f in report.findings if f.problem.rule == rule]


def _verl_rm_input(policy: Path, rm: Path, prompt: list[dict], response: str) -> str:
    """verl's own reward-model input for one sample (RewardLoopWorker._preprocess_reward_inputs)."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer

    from verl import DataProto
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    tok, rm_tok = AutoTokenizer.from_pretrained(str(policy)), AutoTokenizer.from_pretrained(str(rm))
    ids = tok(response, return_tensors="pt")["input_ids"]
    prompt_ids = tok("What is 2 + 2 ?", return_tensors="pt")["input_ids"]
    raw = np.empty(1, dtype=object)
    raw[0] = prompt
    data = DataProto.from_dict(
        tensors={"prompts": prompt_ids, "responses": ids,
                 "attention_mask": torch.ones(1, prompt_ids.shape[1] + ids.shape[1], dtype=torch.long)},
        non_tensors={"raw_prompt": raw})
    me = SimpleNamespace(input_tokenizer=tok, reward_model_tokenizer=rm_tok)
    return asyncio.run(RewardLoopWorker._preprocess_reward_inputs(me, data))


def _verl_context(rm: Path) -> int:
    """The context verl's reward-model server gets when max_model_len is unset: verl's get_max_position_embeddings
    (workers/rollout/utils.py), taken out of verl's source and run on the checkpoint's config."""
    import verl
    from transformers import AutoConfig

    source = (Path(verl.__file__).parent / "workers/rollout/utils.py").read_text()
    (fn,) = [n for n in ast.parse(source).body
             if isinstance(n, ast.FunctionDef) and n.name == "get_max_position_embeddings"]
    scope: dict = {}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "utils.py", "exec"), scope)  # noqa: S102 - verl's own code
    return scope["get_max_position_embeddings"](AutoConfig.from_pretrained(str(rm)))


@pytest.mark.verl
def test_vi676_template_refusing_the_conversation(tiny_model, tmp_path):
    from jinja2.exceptions import TemplateError

    rm = _rm(tiny_model, tmp_path, "strict", STRICT)
    with pytest.raises(TemplateError):  # verl: the row's system + user messages + the response
        _verl_rm_input(tiny_model, rm, SYSTEM, "the answer is 4")
    assert "What is 2 + 2 ?" in _verl_rm_input(tiny_model, rm, USER, "the answer is 4")  # the control renders
    (hit,) = _run(tiny_model, rm, _data(tmp_path, SYSTEM), rule="VI676")
    assert hit.severity == "error" and "system" in hit.message and "reward_loop.py" in hit.message
    assert not _run(tiny_model, rm, _data(tmp_path, USER), rule="VI676")
    # a generative judge builds its own input: not judged
    fn = tmp_path / "judge.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
                  "    return kwargs['reward_router_address'] and 0.0\n")
    assert not _run(tiny_model, rm, _data(tmp_path, SYSTEM), f"reward.custom_reward_function.path={fn}", rule="VI676")


@pytest.mark.verl
def test_vi676_reward_model_without_a_chat_template(tiny_model, tmp_path):
    rm = _rm(tiny_model, tmp_path, "bare", None)
    with pytest.raises(ValueError, match="chat template"):
        _verl_rm_input(tiny_model, rm, USER, "the answer is 4")
    (hit,) = _run(tiny_model, rm, _data(tmp_path, USER), rule="VI676")
    assert hit.severity == "error" and "no chat template" in hit.message
    assert not _run(tiny_model, _rm(tiny_model, tmp_path, "templated"), _data(tmp_path, USER), rule="VI676")


@pytest.mark.verl
def test_vi675_context_shorter_than_prompt_and_response(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    rm = _rm(tiny_model, tmp_path, "short", max_pos=256)
    context = _verl_context(rm)
    assert context == 256
    text = _verl_rm_input(tiny_model, rm, USER, " ".join(["4"] * 300))  # a 300-token response
    assert len(AutoTokenizer.from_pretrained(str(rm))(text)["input_ids"]) > context  # vLLM answers 400
    data = _data(tmp_path, USER)
    (hit,) = _run(tiny_model, rm, data, "data.max_prompt_length=128", "data.max_response_length=512", rule="VI675")
    assert hit.severity == "error" and "max_position_embeddings=256" in hit.message
    (hit,) = _run(tiny_model, rm, data, "data.max_prompt_length=128", "data.max_response_length=200", rule="VI675")
    assert hit.severity == "warning"
    assert not _run(tiny_model, rm, data, "data.max_prompt_length=56", "data.max_response_length=200", rule="VI675")
    # rollout.max_model_len is what verl's vLLM server gets (vllm_async_server.py:1104-1111, :332)
    big = _rm(tiny_model, tmp_path, "big", max_pos=8192)
    (hit,) = _run(tiny_model, big, data, "data.max_prompt_length=1024", "data.max_response_length=2048",
                  f"{RM}.rollout.max_model_len=2048", rule="VI675")
    assert hit.severity == "error" and f"{RM}.rollout.max_model_len" in hit.hint
    assert not _run(tiny_model, big, data, "data.max_prompt_length=1024", "data.max_response_length=2048",
                    rule="VI675")  # the control: the checkpoint's 8192
    # SGLang is not handed max_model_len: its context is the checkpoint's
    assert not _run(tiny_model, big, data, "data.max_prompt_length=1024", "data.max_response_length=2048",
                    f"{RM}.rollout.max_model_len=2048", f"{RM}.rollout.name=sglang", rule="VI675")
