"""Each algorithm's keys against independent sources, not against verl-init's earlier output:

- verl's own example scripts (tests/data/reference/verl-examples.json, verl v0.9.0 examples/**.sh): where
  an example of the algorithm sets a key that defines the algorithm (KL placement and estimator, policy
  loss, clip range, loss aggregation), the planner sets the same value — or verl's default when the
  example leaves the key to verl (the snapshot of verl 0.9.1's defaults decides);
- the DAPO paper (arXiv:2503.14476, §3): ε_low = 0.2, ε_high = 0.28, token-level loss, dynamic sampling;
- vLLM's start-up check for colocated engines: each engine asks for `gpu_memory_utilization × GPU memory`
  and refuses to start when that much is not free, so the policy's and the reward model's reservations
  plus what training keeps on the GPU during rollout must stay under the GPU's memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REFERENCE
from helpers_answers import answers
from wizard.planner.pipeline import plan

EXAMPLES = json.loads((REFERENCE / "verl-examples.json").read_text(encoding="utf-8"))["configs"]

A = "actor_rollout_ref.actor"
DEFINING = ("algorithm.adv_estimator", "algorithm.use_kl_in_reward", "algorithm.kl_penalty", f"{A}.use_kl_loss",
            f"{A}.kl_loss_type", f"{A}.policy_loss.loss_mode", f"{A}.clip_ratio_low", f"{A}.clip_ratio_high",
            f"{A}.loss_agg_mode")

# verl-init's algorithm → the example script of verl's own that runs it (path inside verl's repository).
EXAMPLE_OF = {
    "grpo": "examples/grpo_trainer/run_qwen3_8b_megatron.sh",
    "gspo": "examples/ascend_extras/gspo_trainer/run_qwen3_32b_fsdp.sh",
    "reinforce_plus_plus": "examples/reinforce_plus_plus_trainer/run_qwen3_8b_fsdp.sh",
    "rloo": "examples/rloo_trainer/run_qwen3_8b_fsdp.sh",
    "remax": "examples/remax_trainer/run_qwen3_8b_fsdp.sh",
    "ppo": "examples/ppo_trainer/run_qwen3_8b_megatron.sh",
}


def _example(path: str) -> dict[str, str]:
    (entry,) = [e for e in EXAMPLES if e["source"].endswith(":" + path)]
    return dict(o.lstrip("+").split("=", 1) for o in entry["overrides"] if "=" in o)


def _default(key: str) -> object:
    """verl 0.9.1's own default, read from the installed verl's generated config tree (not imported)."""
    import importlib.util

    import yaml

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations, "verl is a test dependency"
    tree = Path(list(spec.submodule_search_locations)[0]) / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    node = yaml.safe_load(tree.read_text(encoding="utf-8"))
    for part in key.split("."):
        node = node[part]
    return node


def _same(planned: object, example: str) -> bool:
    if isinstance(planned, bool):
        return str(planned) == example
    if isinstance(planned, float):
        return planned == pytest.approx(float(example))
    return str(planned) == example


@pytest.mark.parametrize("algorithm", sorted(EXAMPLE_OF))
def test_algorithm_keys_match_verls_own_example(algorithm):
    ex = _example(EXAMPLE_OF[algorithm])
    p = plan(answers(algorithm=algorithm, samples_per_prompt=8), base_dir="/r")
    checked = 0
    for key in DEFINING:
        if key not in ex or (algorithm == "ppo" and key != "algorithm.adv_estimator"):
            continue  # (verl's PPO examples leave the KL placement to verl's default; verl-init adds a reward KL)
        planned = p.settings[key].value if key in p.settings else _default(key)
        assert _same(planned, ex[key]), (key, planned, ex[key])
        checked += 1
    assert checked >= 1
    # KL in the reward uses verl's default estimator unless the example names another one
    if p.settings.get("algorithm.use_kl_in_reward") and p.value("algorithm.use_kl_in_reward"):
        assert p.value("algorithm.kl_penalty") == ex.get("algorithm.kl_penalty", _default("algorithm.kl_penalty"))


def test_examples_cover_what_the_test_claims():
    """The example table above names real entries, and each runs the algorithm it stands for."""
    estimator = {"grpo": "grpo", "gspo": "grpo", "reinforce_plus_plus": "reinforce_plus_plus", "rloo": "rloo",
                 "remax": "remax", "ppo": "gae"}
    for algorithm, path in EXAMPLE_OF.items():
        assert _example(path)["algorithm.adv_estimator"] == estimator[algorithm]
    assert _example(EXAMPLE_OF["gspo"])[f"{A}.policy_loss.loss_mode"] == "gspo"


def test_dapo_follows_the_paper():
    p = plan(answers(algorithm="dapo"), base_dir="/r")
    assert p.value(f"{A}.clip_ratio_low") == 0.2  # ε_low (DAPO §3.1, "Clip-Higher")
    assert p.value(f"{A}.clip_ratio_high") == 0.28  # ε_high
    assert p.value(f"{A}.loss_agg_mode") == "token-mean"  # §3.3 token-level policy gradient loss
    assert p.value("algorithm.filter_groups.enable") is True  # §3.2 dynamic sampling
    assert p.value(f"{A}.use_kl_loss") is False and p.value("algorithm.use_kl_in_reward") is False  # §2.3 no KL


@pytest.mark.parametrize("cap,buffer", [(20480, 4096), (2048, 512), (8192, 2048), (1024, 256)])
def test_dapo_shapes_overlong_responses_where_verls_dapo_manager_reads_it(cap, buffer):
    """§3.4 overlong reward shaping, L_cache = 4,096 of L_max = 20,480 in the paper; verl-recipe's DAPO scripts
    use 4,096 of 20,480 and 512 of 2,048: a quarter of the cap, at most 4,096. verl 0.9.1's DAPO manager reads it
    from reward.reward_kwargs and asserts max_resp_len is set and at least the buffer (reward_manager/dapo.py:39-44)."""
    p = plan(answers(algorithm="dapo", max_response_length=cap), base_dir="/r")
    kw = "reward.reward_kwargs"
    assert p.value(f"{kw}.overlong_buffer_cfg.enable") is True
    assert p.value(f"{kw}.overlong_buffer_cfg.len") == buffer
    assert p.value(f"{kw}.overlong_buffer_cfg.penalty_factor") == 1.0
    assert p.value(f"{kw}.max_resp_len") == cap >= buffer
    grpo = plan(answers(algorithm="grpo", max_response_length=cap), base_dir="/r")
    assert not [k for k in grpo.settings if k.startswith(kw)]


@pytest.mark.parametrize("gpu_gb,model", [(80, "Qwen/Qwen2.5-7B-Instruct"), (24, "Qwen/Qwen2.5-0.5B-Instruct"),
                                         (141, "Qwen/Qwen2.5-32B-Instruct")])
def test_reward_model_engine_and_policy_engine_fit_one_gpu(gpu_gb, model):
    p = plan(answers(model=model, gpu_memory_gb=gpu_gb, reward="model", reward_model="org/reward-model-1.5B"),
             base_dir="/r")
    policy = p.value("actor_rollout_ref.rollout.gpu_memory_utilization")
    reward = p.value("reward.reward_model.rollout.gpu_memory_utilization")
    m = p.memory
    cap = m.capacity_gib  # GiB as the card reports it
    for phase in ("rollout", "weight sync"):  # the phases with both engines awake
        others = sum(t.gib for t in m.phases[phase] if "engine reservation" not in t.part)
        # vLLM: each engine needs util × GPU free at start-up; both engines live on the same GPUs
        assert policy * cap + reward * cap + others <= cap, (phase, policy, reward, others)
    # and the reward model's share holds a 1.5B classifier's bf16 weights (2 bytes per parameter) and KV cache,
    # sized from the model (not a fixed share)
    assert reward * cap >= 1.5e9 * 2 / 2**30 and m.reward_kv_seqs >= 8
    assert p.value("reward.reward_model.rollout.tensor_model_parallel_size") == 1
