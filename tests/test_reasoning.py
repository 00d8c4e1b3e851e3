"""A model that reasons by default (wizard.planner.reasoning) gets half of max_response_length as the step time's
default mean response, not the √-law fitted on base and instruct models. The model's own chat template decides
when its files are here; else its hub id's family does (each with its model card as the source)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest
from test_steptime import _work

from wizard.planner import steptime as st
from wizard.planner.reasoning import MAX_TEMPLATE_BYTES, thinks_by_default

# Qwen3's template, cut to the part that decides: thinking unless the caller passes enable_thinking=False
QWEN3 = ("{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and "
         "enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}")
QWEN25 = "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
# a template that thinks only when asked
OPT_IN = ("{%- if enable_thinking is defined and enable_thinking is true %}{{- '<think>\\n' }}{%- endif %}")


@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B-Thinking-2507",
                                   "Qwen/Qwen3.5-9B", "Qwen/QwQ-32B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
                                   "deepseek-ai/DeepSeek-R1", "openai/gpt-oss-20b", "/no/such/models/Qwen3-8B/",
                                   "~/verl/models/DeepSeek-R1-Distill-Qwen-7B"])
def test_a_reasoning_family_thinks_by_default(model):
    assert thinks_by_default(model)


@pytest.mark.parametrize("model", ["Qwen/Qwen3-30B-A3B-Base", "Qwen/Qwen3-8B-Base", "Qwen/Qwen3.5-9B-Base",
                                   "Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-Coder-30B-A3B-Instruct",
                                   "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-Math-7B", "deepseek-ai/DeepSeek-V3",
                                   "meta-llama/Llama-3.1-8B-Instruct", "/no/such/models/Qwen3-8B-Base",
                                   "/no/such/Qwen3-8B/checkpoint", "", None])
def test_its_base_and_instruct_siblings_do_not(model):
    assert thinks_by_default(model) is None


def _folder(tmp_path, name: str, template, jinja: bool = False):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text("{}", encoding="utf-8")
    if jinja:
        (d / "chat_template.jinja").write_text(template, encoding="utf-8")
    elif template is not None:
        (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}), encoding="utf-8")
    return str(d)


def test_a_local_models_own_template_decides(tmp_path):
    """The files win over the name: a folder named like a thinking model with a plain template does not think, one
    named plainly with Qwen3's template does; a template that thinks only when asked does not; chat_template.jinja
    is read as well; a folder without a template falls back to nothing (its path is not a hub id)."""
    assert thinks_by_default(_folder(tmp_path, "plain", QWEN3))
    assert thinks_by_default(_folder(tmp_path, "Qwen3-8B", QWEN25)) is None
    assert thinks_by_default(_folder(tmp_path, "opt-in", OPT_IN)) is None
    assert thinks_by_default(_folder(tmp_path, "jinja", QWEN3, jinja=True))
    named = _folder(tmp_path, "listed", None)
    (tmp_path / "listed" / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": [{"name": "default", "template": QWEN3}]}), encoding="utf-8")
    assert thinks_by_default(named)
    assert thinks_by_default(_folder(tmp_path, "none", None)) is None


def test_a_template_too_large_or_broken_is_not_read(tmp_path):
    big = _folder(tmp_path, "big", None)
    (tmp_path / "big" / "tokenizer_config.json").write_bytes(b'{"chat_template": "<think>' + b" " * MAX_TEMPLATE_BYTES
                                                             + b'"}')
    assert thinks_by_default(big) is None
    broken = _folder(tmp_path, "broken", None)
    (tmp_path / "broken" / "tokenizer_config.json").write_text('{"chat_template": "<think>', encoding="utf-8")
    assert thinks_by_default(broken) is None


def test_the_default_mean_response_of_a_reasoning_model_is_half_the_cap():
    """Without a stated mean: half of max_response_length (4096 → 2048) and the basis says why; a stated mean wins;
    a model that does not reason keeps RESPONSE_SQRT × √max_response_length."""
    plain = _work(response_mean=None)
    thinking = replace(plain, thinking="its chat template opens a <think> block by default")
    p, t = st.predict(plain), st.predict(thinking)
    assert p.assumptions["response_length_mean"] == pytest.approx(round(st.RESPONSE_SQRT * 4096 ** 0.5), abs=1)
    assert t.assumptions["response_length_mean"] == 2048
    assert "reasons by default" in t.assumptions["response_length_mean_basis"]
    assert t.step_s > p.step_s
    stated = replace(thinking, response_mean=700, response_mean_basis="given")
    assert st.predict(stated).assumptions["response_length_mean"] == 700
    assert st.mean_sequence(1000, 4096, thinking=True) == pytest.approx(st.DEFAULT_PROMPT_SHARE * 1000 + 2048)


def test_the_calibration_reports_of_reasoning_models_use_it():
    """T29 (Qwen3.5-9B, which thinks by default) and T31 (DeepSeek-R1-Distill-Qwen-1.5B) state no mean response.
    With half the cap, T29's step lands within ±30 %; with the √-law default (the fault planted: the model taken
    as not reasoning) it is 40 % short. T31 is tail-bound on its host and lands either way."""
    from steptime_cases import cases, within, workload

    all_cases = cases()
    for cid, planted_within in (("T29", False), ("T31", True)):
        c = next(x for x in all_cases if x["id"] == cid)
        w = workload(c, all_cases)
        assert w.thinking and w.response_mean is None
        measured = c["measured"]["timing_s/step"]
        assert within(st.predict(w).step_s, measured)
        assert within(st.predict(replace(w, thinking="")).step_s, measured) is planted_within
    base = copy.deepcopy(next(x for x in all_cases if x["id"] == "T29"))
    base["model"] = "Qwen/Qwen3.5-9B-Base"
    assert not workload(base, all_cases).thinking


@pytest.mark.verl
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_assumes_the_reasoning_default_for_a_script_of_a_thinking_model(tmp_path):
    """`check` on a launch script: the model's hub id decides the default it states; --response-length-mean wins."""
    from pathlib import Path

    from wizard.check.lint import check

    def timed(model: str, **kw) -> dict:
        path = Path(tmp_path) / f"{model.replace('/', '_')}.sh"
        words = [f"actor_rollout_ref.model.path={model}", "actor_rollout_ref.rollout.name=vllm",
                 "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
                 "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "algorithm.adv_estimator=grpo",
                 "actor_rollout_ref.rollout.n=8", "data.train_batch_size=256", "data.max_prompt_length=1024",
                 "data.max_response_length=4096", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
        path.write_text("#!/bin/bash\npython3 -m verl.trainer.main_ppo \\\n    " + " \\\n    ".join(words) + "\n",
                        encoding="utf-8")
        report = check(str(path), env={"HOME": str(tmp_path)}, gpu_type="H100", gpu_memory_gb=80, **kw)
        assert report.time is not None
        return report.time["assumptions"]

    thinking, plain = timed("Qwen/Qwen3-8B"), timed("Qwen/Qwen2.5-7B-Instruct")
    assert thinking["response_length_mean"] == 2048 and "reasons by default" in thinking[
        "response_length_mean_basis"]
    assert plain["response_length_mean"] < 2048 and "reasons" not in plain["response_length_mean_basis"]
    assert timed("Qwen/Qwen3-8B", response_length_mean=700)["response_length_mean"] == 700
