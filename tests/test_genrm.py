"""reward=genrm: an LLM judge served by verl 0.9.1's reward loop (wizard.planner.genrm).

The plan (keys, layout, memory, placement, refusals), the cluster files counting the judge's own pool, and the reward
path run by verl's own code on CPU: verl's load_reward_manager builds the reward manager from the bundle's composed
config and the bundle's judge function; its run_single scores a response by asking a judge over HTTP. Only the judge
LLM itself is a stand-in (a local HTTP server answering OpenAI chat requests, where verl's reward router would be):
serving a real judge needs vLLM or SGLang on a GPU.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest
import yaml

import wizard
from helpers_answers import answers
from wizard.intent.errors import WizardError
from wizard.planner import genrm

JUDGE = "Qwen/Qwen2.5-7B-Instruct"
RM = "reward.reward_model"


def _rules(exc: pytest.ExceptionInfo) -> set[str]:
    return {p.rule for p in exc.value.problems}


def _bundle(tmp_path: Path, a, name: str = "b") -> Path:
    return wizard.write_bundle(wizard.render(wizard.plan(a, base_dir=str(tmp_path))), tmp_path / name)


def _judge_fn(bundle: Path):
    spec = importlib.util.spec_from_file_location("genrm_fn_under_test", bundle / "reward" / "genrm_fn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- plan -----------------------------------------------------------------------------------------------------

def test_colocated_judge_keys_and_layout():
    plan = wizard.plan(answers(reward="genrm", reward_model=JUDGE))
    v = plan.value
    assert v(f"{RM}.enable") is True and v(f"{RM}.model_path") == JUDGE
    assert f"{RM}.enable_resource_pool" not in plan.settings  # verl's default: the policy's global pool
    assert v("reward.custom_reward_function.path") == "reward/genrm_fn.py"
    assert v("reward.custom_reward_function.name") == "compute_score"
    prompt = 512 + 1024 + genrm.JUDGE_TEMPLATE_TOKENS
    assert v(f"{RM}.rollout.prompt_length") == prompt and v(f"{RM}.rollout.response_length") == 512
    assert v(f"{RM}.rollout.max_model_len") == prompt + 512
    # the judge's engine beside the policy's: a share sized from the 7B's weights and 8 judge sequences' KV cache
    tp, gmu = v(f"{RM}.rollout.tensor_model_parallel_size"), v(f"{RM}.rollout.gpu_memory_utilization")
    assert tp == 1 and 0.2 <= gmu <= genrm.COLOCATED_SHARE
    assert gmu + v("actor_rollout_ref.rollout.gpu_memory_utilization") < 0.9
    # its engine sleeps outside its own turn (verl's reward loop wakes it after rollout), as check counts it too
    assert v(f"{RM}.rollout.free_cache_engine") is True
    rollout = dict((t.label, t.gib) for t in plan.memory.phases["rollout"])
    assert "reward model: asleep (its engine wakes for its own turn)" in rollout
    assert plan.memory.reward_kv_seqs >= 8
    assert "LLM judge Qwen/Qwen2.5-7B-Instruct" in plan.roles["reward"] and "colocated" in plan.roles["reward"]


def test_judge_sequences_size_its_engine():
    """A longer verdict needs more KV cache: the judge's share grows with judge_max_tokens (the judge's own
    sequence, not the policy's, is what its engine holds)."""
    short = wizard.plan(answers(reward="genrm", reward_model=JUDGE, judge_max_tokens=256))
    long = wizard.plan(answers(reward="genrm", reward_model=JUDGE, judge_max_tokens=16384))
    key = f"{RM}.rollout.gpu_memory_utilization"
    assert long.value(key) > short.value(key)


def test_judge_in_its_own_pool(tmp_path):
    a = answers(reward="genrm", reward_model=JUDGE, judge_gpus=8, cluster="ray", nnodes=2,
                checkpoint_dir="/mnt/shared/ckpt")
    plan = wizard.plan(a, base_dir=str(tmp_path))
    v = plan.value
    assert v(f"{RM}.enable_resource_pool") is True
    assert (v(f"{RM}.nnodes"), v(f"{RM}.n_gpus_per_node")) == (1, 8)
    assert v(f"{RM}.rollout.gpu_memory_utilization") == genrm.POOL_GMU
    assert plan.memory.reward_kv_seqs is None  # nothing of the judge on the policy's GPUs
    assert "its own pool of 8 GPU(s) on 1 extra node(s), 8 replica(s) of TP=1" in plan.roles["reward"]
    files = wizard.render(plan)
    assert "NNODES=3" in files["ray/submit.sh"]  # the head waits for the judge's node too
    assert "the cluster has 3 node(s) in all" in files["PLAN.md"]


def test_pool_of_whole_nodes():
    plan = wizard.plan(answers(reward="genrm", reward_model=JUDGE, judge_gpus=16, cluster="ray"))
    assert (plan.value(f"{RM}.nnodes"), plan.value(f"{RM}.n_gpus_per_node")) == (2, 8)


@pytest.mark.parametrize("cluster, where, expect", [
    ("kuberay", "k8s/rayjob.yaml", "replicas: 3"),
    ("slurm", "slurm/job.sbatch", "#SBATCH --nodes=3"),
])
def test_cluster_files_start_the_judge_nodes(tmp_path, cluster, where, expect):
    a = answers(reward="genrm", reward_model=JUDGE, judge_gpus=8, cluster=cluster, nnodes=2, shared_pvc="runs")
    files = wizard.render(wizard.plan(a, base_dir=str(tmp_path)))
    assert expect in files[where]
    if cluster == "kuberay":
        cm = yaml.safe_load(files["k8s/configmap.yaml"])
        assert cm["data"]["genrm_fn.py"] == files["reward/genrm_fn.py"]  # the pods get the bundle's judge function
        assert "subPath: genrm_fn.py" in files["k8s/rayjob.yaml"]


def test_check_estimates_the_colocated_judge_as_the_plan_does(tmp_path):
    from wizard.check.lint import check

    plan = wizard.plan(answers(reward="genrm", reward_model=JUDGE, judge_max_tokens=2048), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    report = check(str(bundle), defaults="snapshot")
    assert report.memory.peak_gb == pytest.approx(plan.memory.peak_gb, abs=1e-6)
    assert report.memory.reward_kv_seqs == pytest.approx(plan.memory.reward_kv_seqs)  # the judge's own sequences


def test_check_counts_the_judge_pool_of_a_bundle(tmp_path):
    from wizard.check.lint import check

    a = answers(reward="genrm", reward_model=JUDGE, judge_gpus=8, cluster="ray", nnodes=2,
                checkpoint_dir="/mnt/shared/ckpt")
    bundle = _bundle(tmp_path, a)
    report = check(str(bundle))
    assert not report.errors, [f.problem for f in report.errors]
    assert "VI814" not in report.ids()
    assert report.hardware.nnodes == 3  # 2 nodes for the policy + 1 for the judge's own pool


def test_reward_model_answer_is_the_judge():
    """reward_model names the judge for reward=genrm (VI503 is for reward=rule/function)."""
    with pytest.raises(WizardError) as exc:
        wizard.plan(answers(reward="rule", reward_model=JUDGE))
    assert "VI503" in _rules(exc)
    wizard.plan(answers(reward="genrm", reward_model=JUDGE))


@pytest.mark.parametrize("changes, rule", [
    (dict(reward="genrm"), "VI590"),
    (dict(judge_gpus=8), "VI591"),
    (dict(reward="genrm", reward_model=JUDGE, judge_gpus=8), "VI592"),  # cluster=local
    (dict(reward="genrm", reward_model=JUDGE, judge_gpus=12, cluster="ray"), "VI593"),
    (dict(reward="genrm", reward_model=JUDGE, judge_gpus=4, cluster="ray"), "VI593"),  # half a node
    (dict(reward="genrm", reward_model="Qwen/Qwen2.5-72B-Instruct", judge_gpus=1, gpus_per_node=1, cluster="ray",
          model="Qwen/Qwen2.5-0.5B-Instruct"), "VI594"),
    (dict(reward="genrm", reward_model="Qwen/Qwen2.5-72B-Instruct", gpus_per_node=1,
          model="Qwen/Qwen2.5-0.5B-Instruct"), "VI594"),  # colocated: the judge, not the policy, is what does not fit
    (dict(reward="genrm", reward_model=JUDGE, algorithm="dapo"), "VI595"),
])
def test_refusals(changes, rule):
    with pytest.raises(WizardError) as exc:
        wizard.plan(answers(**changes))
    assert rule in _rules(exc)


def test_refusal_messages_name_the_fix():
    with pytest.raises(WizardError) as exc:
        wizard.plan(answers(reward="genrm", reward_model=JUDGE, judge_gpus=12, cluster="ray"))
    (p,) = [p for p in exc.value.problems if p.rule == "VI593"]
    assert "judge_gpus=8 or 16" in p.hint
    for taken in (8, 16):  # each value offered passes when taken
        wizard.plan(answers(reward="genrm", reward_model=JUDGE, judge_gpus=taken, cluster="ray",
                            checkpoint_dir="/mnt/shared/ckpt"))
    with pytest.raises(WizardError) as exc:
        wizard.plan(answers(reward="genrm", reward_model=JUDGE, algorithm="dapo"))
    (p,) = [p for p in exc.value.problems if p.rule == "VI595"]
    assert "judge_gpus=8" in p.hint and "cluster=ray" in p.hint  # cluster=local: a pool of its own needs a node more


def test_colocated_judge_too_big_names_its_own_pool_or_a_smaller_judge():
    small = dict(model="Qwen/Qwen2.5-0.5B-Instruct", gpus_per_node=1)
    with pytest.raises(WizardError) as exc:
        wizard.plan(answers(reward="genrm", reward_model="Qwen/Qwen2.5-14B-Instruct", gpu_memory_gb=40, **small))
    (p,) = [p for p in exc.value.problems if p.rule == "VI594"]
    assert "judge_gpus=1" in p.hint
    # ... and the judge in that pool is planned
    wizard.plan(answers(reward="genrm", reward_model="Qwen/Qwen2.5-14B-Instruct", gpu_memory_gb=40, judge_gpus=1,
                        cluster="ray", checkpoint_dir="/mnt/shared/ckpt", **small))
    with pytest.raises(WizardError) as exc:
        wizard.plan(answers(reward="genrm", reward_model="Qwen/Qwen2.5-72B-Instruct", **small))
    (p,) = [p for p in exc.value.problems if p.rule == "VI594"]
    assert "choose a smaller judge" in p.hint


def test_dapo_with_a_judge_in_its_own_pool_is_planned():
    """verl's group filter needs the reward at sampling time: a judge with its own pool gives it
    (trainer_base.py:199 accepts enable_resource_pool)."""
    plan = wizard.plan(answers(reward="genrm", reward_model=JUDGE, algorithm="dapo", judge_gpus=8, cluster="ray",
                               checkpoint_dir="/mnt/shared/ckpt"))
    assert plan.value(f"{RM}.enable_resource_pool") is True


def test_judge_may_share_the_critics_checkpoint(tmp_path):
    """A judge is an LLM, not a classifier: PPO's critic (the policy's checkpoint) and a judge of the same checkpoint
    draw no VI405 from the planner and no VI845 from check (both still fire for reward=model)."""
    from wizard.check.lint import check

    same = dict(algorithm="ppo", model=JUDGE, reward_model=JUDGE, samples_per_prompt=1)
    plan = wizard.plan(answers(reward="genrm", **same))
    assert "VI405" not in {p.rule for p in plan.findings}
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    assert "VI845" not in check(str(bundle)).ids()
    assert "VI405" in {p.rule for p in wizard.plan(answers(reward="model", **same)).findings}


def test_unsized_judge_is_a_warning():
    plan = wizard.plan(answers(reward="genrm", reward_model="my-org/house-judge"))
    assert "VI596" in {p.rule for p in plan.findings}
    assert plan.value(f"{RM}.rollout.gpu_memory_utilization") == genrm.COLOCATED_SHARE


# --- the judge function ---------------------------------------------------------------------------------------

def test_verdict_parsing(tmp_path):
    fn = _judge_fn(_bundle(tmp_path, answers(reward="genrm", reward_model=JUDGE)))
    assert fn.parse_verdict("The answer 72 matches.\nScore: 10") == 1.0
    assert fn.parse_verdict("score = 7") == 0.7
    assert fn.parse_verdict("Score: 3 at first... on reflection, Score: **6**") == 0.6  # the last one counts
    assert fn.parse_verdict("Score: 14") == 1.0 and fn.parse_verdict("Score: -2") == 0.0  # clipped to 0-10
    assert fn.parse_verdict("I think it is right.") is None and fn.parse_verdict("") is None
    body = fn.chat_request("What is 2+2?", "4", "2+2 = 4. #### 4")
    assert body["max_tokens"] == 512 and body["temperature"] == 0.0 and "model" not in body
    text = body["messages"][0]["content"]
    assert "What is 2+2?" in text and "Reference answer:\n4" in text and "#### 4" in text


def test_judge_max_tokens_reaches_the_function(tmp_path):
    fn = _judge_fn(_bundle(tmp_path, answers(reward="genrm", reward_model=JUDGE, judge_max_tokens=128)))
    assert fn.MAX_TOKENS == 128


# --- the reward path, with verl's own reward manager -----------------------------------------------------------

class _Judge:
    """A stand-in for the judge behind verl's reward router: an OpenAI chat-completions endpoint on localhost."""

    def __init__(self, reply: str, status: int = 200):
        self.reply, self.status, self.requests = reply, status, []

    async def start(self) -> str:
        from aiohttp import web

        async def chat(request):
            self.requests.append(await request.json())
            if self.status != 200:
                return web.Response(status=self.status, text="overloaded")
            return web.json_response({"choices": [{"index": 0, "message": {"role": "assistant", "content": self.reply}}]})

        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        return f"127.0.0.1:{port}"

    async def stop(self) -> None:
        await self.runner.cleanup()


def _score_with_verl(bundle: Path, tiny_model: Path, judge: _Judge, response: str) -> dict:
    """verl's load_reward_manager on the bundle's composed config (the judge function loaded by verl from
    reward/genrm_fn.py), then the manager's run_single on one rolled-out sample, as RewardLoopWorker calls it."""
    import os

    import numpy as np
    import torch
    from transformers import AutoTokenizer

    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager
    from wizard.verify.harness import compose_bundle

    cfg = compose_bundle(bundle)
    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    prompt = tok("Natalia sold 48 clips in April and half as many in May. How many in all?",
                 return_tensors="pt")["input_ids"]
    resp = tok(response, return_tensors="pt")["input_ids"]
    data = DataProto.from_dict(
        tensors={"prompts": prompt, "responses": resp,
                 "attention_mask": torch.ones(1, prompt.shape[1] + resp.shape[1], dtype=torch.long)},
        non_tensors={"data_source": np.array(["openai/gsm8k"], dtype=object),
                     "reward_model": np.array([{"ground_truth": "72", "style": "rule"}], dtype=object),
                     "extra_info": np.array([{"question": "How many clips in all?"}], dtype=object)},
    )

    async def go() -> dict:
        address = await judge.start()
        here = os.getcwd()
        try:
            os.chdir(bundle)  # run.sh starts verl in the bundle: reward/genrm_fn.py is bundle-relative
            manager = load_reward_manager(cfg, tok, reward_router_address=address, reward_model_tokenizer=tok)
        finally:
            os.chdir(here)
        try:
            return await manager.run_single(data)
        finally:
            await judge.stop()

    return asyncio.run(go())


def test_verls_reward_manager_scores_through_the_judge(tmp_path, tiny_model):
    bundle = _bundle(tmp_path, answers(reward="genrm", reward_model=JUDGE))
    judge = _Judge("She sold 48 + 24 = 72 clips, as the reference says.\n\nScore: 9")
    out = _score_with_verl(bundle, tiny_model, judge, "48 + 24 = 72. #### 72")
    assert out["reward_score"] == pytest.approx(0.9)
    assert out["reward_extra_info"] == {"score": pytest.approx(0.9), "judge_ok": True}
    (request,) = judge.requests
    asked = request["messages"][0]["content"]
    assert "How many clips in all?" in asked and "Reference answer:\n72" in asked
    assert "72" in asked.split("Student's answer:")[1]  # the response, as verl decoded it with the policy's tokenizer
    assert request["max_tokens"] == 512


@pytest.mark.parametrize("reply, status", [("I cannot decide.", 200), ("", 503)])
def test_a_judge_without_a_verdict_scores_zero(tmp_path, tiny_model, reply, status):
    """No score in the verdict, or the judge failing: 0.0, with the same extra keys (verl stacks them per key)."""
    bundle = _bundle(tmp_path, answers(reward="genrm", reward_model=JUDGE))
    out = _score_with_verl(bundle, tiny_model, _Judge(reply, status), "#### 72")
    assert out["reward_score"] == 0.0
    assert out["reward_extra_info"] == {"score": 0.0, "judge_ok": False}


def test_genrm_profile_verl_keys(tmp_path):
    plan = wizard.plan(wizard.load_profile("genrm-grpo"), base_dir=str(tmp_path))
    doc = yaml.safe_load(wizard.render(plan)["verl_config.yaml"])
    rm = doc["reward"]["reward_model"]
    assert rm["enable"] is True and rm["model_path"] == JUDGE and rm["rollout"]["name"] == "vllm"
    assert json.dumps(doc["reward"]["custom_reward_function"]) == json.dumps(
        {"path": "reward/genrm_fn.py", "name": "compute_score"})


# --- verl-init check on existing configs (VI887-VI889) --------------------------------------------------------

def _check(bundle: Path, *overrides: str):
    from wizard.check.lint import check

    return check(str(bundle), list(overrides))


@pytest.fixture(scope="module")
def genrm_bundle(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("genrm-check")
    return _bundle(tmp, answers(reward="genrm", reward_model=JUDGE))


@pytest.mark.slow
def test_check_is_clean_on_a_genrm_bundle(genrm_bundle):
    assert not _check(genrm_bundle).ids("error") & {"VI887", "VI888", "VI889"}
    assert not _check(genrm_bundle).errors


def test_check_vi887_function_without_the_router_keywords(genrm_bundle, tmp_path):
    scorer = tmp_path / "rule_scorer.py"
    scorer.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")
    report = _check(genrm_bundle, f"reward.custom_reward_function.path={scorer}")
    assert "VI887" in report.ids("error")
    scorer.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n    return 1\n")
    assert "VI887" not in _check(genrm_bundle, f"reward.custom_reward_function.path={scorer}").ids()


def test_check_vi888_judge_function_without_a_reward_model(genrm_bundle, tmp_path):
    judge = tmp_path / "judge.py"  # as verl's own example (tests/experimental/reward_loop/reward_fn.py)
    judge.write_text("async def compute_score(data_source, solution_str, ground_truth, extra_info, reward_router_address,"
                     " reward_model_tokenizer):\n    return 0.0\n")
    assert "VI888" in _check(genrm_bundle, f"reward.custom_reward_function.path={judge}",
                             "reward.reward_model.enable=false").ids("error")
    assert "VI888" not in _check(genrm_bundle, f"reward.custom_reward_function.path={judge}").ids()


@pytest.mark.parametrize("overrides", [
    ("reward.reward_model.rollout.tensor_model_parallel_size=16",),
    ("reward.reward_model.enable_resource_pool=true", "reward.reward_model.nnodes=0"),
    ("reward.reward_model.enable_resource_pool=true", "reward.reward_model.nnodes=1",
     "reward.reward_model.n_gpus_per_node=2", "reward.reward_model.rollout.tensor_model_parallel_size=4"),
])
def test_check_vi889_reward_model_without_enough_gpus(genrm_bundle, overrides):
    assert "VI889" in _check(genrm_bundle, *overrides).ids("error")


# --- check --mode cluster: the judge's own pool (VI764, VI712, VI724) ------------------------------------------

def test_cluster_check_counts_the_reward_pool(tmp_path):
    from wizard.env.cluster import Node, Observed, bundle_problems, compare, load_expected

    a = answers(reward="genrm", reward_model=JUDGE, judge_gpus=8, cluster="slurm", nnodes=2)
    bundle = _bundle(tmp_path, a)
    exp, problems = load_expected(bundle)
    assert problems == []
    assert (exp.nnodes, exp.reward_nodes, exp.reward_gpus_per_node, exp.all_gpus, exp.cluster_nodes) == (2, 1, 8, 24, 3)
    assert exp.cpus_needed == 3 * 24 + 9
    assert bundle_problems(exp) == []  # slurm/job.sbatch's NNODES=3 counts the judge's node

    def obs(*gpus: int) -> Observed:
        return Observed("http://h:8265", "2.60.0",
                        [Node(f"n{i}", f"10.0.0.{i}", True, i == 0, g, 100) for i, g in enumerate(gpus)], 0.0)

    assert compare(exp, obs(8, 8, 8)) == []
    (p,) = [p for p in compare(exp, obs(8, 8)) if p.rule == "VI712"]
    assert "needs 24" in p.message and "the reward model's own pool of 1 × 8" in p.message
    found = {p.rule for p in compare(exp, obs(12, 12))}  # 24 GPUs, but no node has 8 left after the trainer's
    assert "VI764" in found and "VI712" not in found


def test_check_estimates_a_colocated_classifier_as_the_plan_does(tmp_path):
    """reward=model (a sequence classifier served by the rollout engine) sleeps outside its turn as the judge does:
    the plan sets reward_model.rollout.free_cache_engine and counts it so; check reads the same config."""
    from wizard.check.lint import check

    plan = wizard.plan(answers(reward="model", reward_model=JUDGE), base_dir=str(tmp_path))
    assert plan.value(f"{RM}.rollout.free_cache_engine") is True
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    report = check(str(bundle), defaults="snapshot")
    assert report.memory.peak_gb == pytest.approx(plan.memory.peak_gb, abs=1e-6)
