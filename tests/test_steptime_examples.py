"""The planner's layout is no slower than verl's own example settings for the same model and hardware
(tests/data/reference/verl-examples.json): each example's layout (rollout TP and memory share, micro-batches or
token budgets, offload, parallel sizes) is checked on the profile's workload (its batch, samples and lengths, so
that the two do the same work); where that layout fits the memory estimate, `check` predicts its step time and
the plan's must be at most that."""

from __future__ import annotations

import json

import pytest
from conftest import REFERENCE

import wizard
from wizard.check.lint import check
from wizard.intent.profiles import profile_names
from wizard.planner.steptime_plan import of_plan

EXAMPLES = json.loads((REFERENCE / "verl-examples.json").read_text(encoding="utf-8"))["configs"]
# what the profile decides (the work of a step); everything else comes from the example
WORKLOAD = ("data.train_batch_size", "data.max_prompt_length", "data.max_response_length", "actor_rollout_ref.rollout.n",
            "actor_rollout_ref.actor.ppo_mini_batch_size", "algorithm.adv_estimator", "actor_rollout_ref.actor.use_kl_loss",
            "algorithm.use_kl_in_reward", "trainer.nnodes", "trainer.n_gpus_per_node")


def _pairs() -> list[tuple[str, dict]]:
    out = []
    for name in profile_names():
        a = wizard.load_profile(name)
        if a.gpu_type == "cpu" or a.lora_rank:
            continue  # LoRA plans train other parameters than verl's full fine-tuning examples
        backend = "megatron" if a.train_backend == "megatron" else "fsdp"
        for c in EXAMPLES:
            o = dict(x.lstrip("+").split("=", 1) for x in c["overrides"] if "=" in x)
            if o.get("actor_rollout_ref.model.path") != a.model or "lora" in c["source"]:
                continue
            if int(c["nnodes"]) * int(c["n_gpus_per_node"]) != a.nnodes * a.gpus_per_node:
                continue
            if ("megatron" in c["source"]) != (backend == "megatron"):
                continue
            out.append((name, c))
    return out


PAIRS = _pairs()


def test_some_profiles_have_a_verl_example_to_compare_with():
    assert len({name for name, _ in PAIRS}) >= 2, PAIRS


def _compare(name: str, example: dict, base_dir: str) -> tuple[dict, dict | None]:
    """(the plan's time, the example layout's time on the plan's workload, or None when it does not fit)."""
    plan = wizard.plan(wizard.load_profile(name), base_dir=base_dir)
    keep = [o for o in example["overrides"] if o.lstrip("+").split("=", 1)[0] not in WORKLOAD]
    work = [f"{k}={str(plan.value(k)).lower() if isinstance(plan.value(k), bool) else plan.value(k)}"
            for k in WORKLOAD if k in plan.settings]
    report = check(None, keep + work, gpu_type=plan.answers.gpu_type, gpu_memory_gb=plan.answers.gpu_memory_gb,
                   defaults="snapshot", env={"HOME": "/root"})
    assert report.time is not None
    fits = report.memory is not None and report.memory.plan_verdict == "fits"
    return of_plan(plan), report.time if fits else None


@pytest.mark.parametrize("name,example", PAIRS, ids=[f"{n}-{c['source'].rsplit('/', 1)[-1]}" for n, c in PAIRS])
def test_plan_is_no_slower_than_verls_example(name, example, tmp_path):
    mine, theirs = _compare(name, example, str(tmp_path))
    if theirs is not None:  # else the example's layout does not fit this workload (longer sequences): no rival
        assert mine["step_s"] <= theirs["step_s"] + 0.05, (mine["phases_detail"], theirs["phases_detail"])


def test_at_least_two_examples_fit_and_are_compared(tmp_path):
    compared = [n for n, c in PAIRS if _compare(n, c, str(tmp_path))[1] is not None]
    assert len(compared) >= 2, compared
