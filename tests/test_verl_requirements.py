"""Requirements read from verl's code (scripts/verl_requirements.py → wizard/check/data/verl_requirements.json):
VI892 (a value an assert / raise rejects or verl divides by) and VI893 (keys verl needs together)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules import requirements

ROOT = Path(__file__).resolve().parent.parent
BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "algorithm.adv_estimator=grpo",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
DAPO = ["reward.reward_manager.name=dapo", "+reward.reward_kwargs.overlong_buffer_cfg.enable=true",
        "+reward.reward_kwargs.max_resp_len=512"]


def _found(report, rule: str) -> list[tuple[str, ...]]:
    return [f.problem.keys for f in report.findings if f.problem.rule == rule]


@pytest.mark.slow
def test_regenerating_gives_the_committed_table():
    from helpers_scripts import regenerated

    fresh = regenerated("verl_requirements")
    assert fresh == (ROOT / "wizard" / "check" / "data" / "verl_requirements.json").read_text(encoding="utf-8")


def test_the_table_was_read_from_verl():
    where = {r["where"]: r for r in requirements.requirements_table()}
    dapo = where["verl/experimental/reward_loop/reward_manager/dapo.py:46"]
    assert dapo["node"] == "reward.reward_kwargs.overlong_buffer_cfg" and dapo["test"] == ["len", ">", 0]
    assert dapo["guard"] == [["enable", "truthy", None]] and dapo["scope"] == "reward_manager:dapo"
    dist = where["verl/workers/engine/megatron/transformer_impl.py:500"]
    assert dist["kind"] == "required" and dist["test"][0] == "dist_checkpointing_path"


def test_a_value_verl_divides_by_or_asserts_on():
    bad = check(None, BASE + DAPO + ["+reward.reward_kwargs.overlong_buffer_cfg.len=0"])
    assert _found(bad, "VI892")[0][0] == "reward.reward_kwargs.overlong_buffer_cfg.len"
    assert not _found(check(None, BASE + DAPO + ["+reward.reward_kwargs.overlong_buffer_cfg.len=64"]), "VI892")
    # the guard: the penalty off, len is never used
    off = [o.replace("enable=true", "enable=false") for o in DAPO]
    assert not _found(check(None, BASE + off + ["+reward.reward_kwargs.overlong_buffer_cfg.len=0"]), "VI892")
    # the scope: another reward manager never builds the DAPO one
    naive = [o for o in DAPO if "reward_manager" not in o]
    assert not _found(check(None, BASE + naive + ["+reward.reward_kwargs.overlong_buffer_cfg.len=0"]), "VI892")


def test_keys_needed_together():
    meg = BASE + ["model_engine=megatron", "actor_rollout_ref.ref.megatron.use_dist_checkpointing=true"]
    keys = _found(check(None, meg), "VI893")
    assert keys and keys[0][0] == "actor_rollout_ref.ref.megatron.dist_checkpointing_path", keys
    assert not _found(check(None, meg + ["actor_rollout_ref.ref.megatron.dist_checkpointing_path=/ckpt/dist"]), "VI893")


def test_planted_requirement_is_evaluated(monkeypatch):
    """The rule evaluates what the table says: a planted assert on rollout.temperature is reported."""
    table = list(requirements.requirements_table()) + [
        {"where": "verl/x.py:1", "scope": "always", "kind": "assert", "node": "actor_rollout_ref.rollout",
         "anchor": None, "guard": [], "test": ["temperature", "<=", 1.0], "message": "planted"}]
    monkeypatch.setattr(requirements, "requirements_table", lambda: table)
    assert _found(check(None, BASE + ["actor_rollout_ref.rollout.temperature=1.5"]), "VI892")
    assert not _found(check(None, BASE + ["actor_rollout_ref.rollout.temperature=0.7"]), "VI892")


def test_keys_of_several_nodes_below_one_named_node():
    """A statement comparing keys under one named node (reward.reward_kwargs) is kept with paths relative to it:
    verl's DAPO reward manager asserts max_resp_len is set, and >= overlong_buffer_cfg.len, when the buffer is on
    (reward_manager/dapo.py:40, :43). max_resp_len is read with `.get("max_resp_len", None)`: missing from the tree,
    it is None, so leaving it out is the fault too."""
    where = {r["where"]: r for r in requirements.requirements_table()}
    given = where["verl/experimental/reward_loop/reward_manager/dapo.py:40"]
    assert (given["node"], given["test"], given["guard"]) == (
        "reward.reward_kwargs", ["max_resp_len", "not None", None], [["overlong_buffer_cfg.enable", "truthy", None]])
    assert "absent" in given and given["absent"] is None
    larger = where["verl/experimental/reward_loop/reward_manager/dapo.py:43"]
    assert larger["test"] == ["max_resp_len", ">=", ["@", "overlong_buffer_cfg.len"]]
    no_max = [o for o in DAPO if "max_resp_len" not in o]
    [keys] = _found(check(None, BASE + no_max + ["+reward.reward_kwargs.overlong_buffer_cfg.len=64"]), "VI892")
    assert keys[0] == "reward.reward_kwargs.max_resp_len"
    short = check(None, BASE + DAPO + ["+reward.reward_kwargs.overlong_buffer_cfg.len=1024"])  # 512 < 1024
    assert _found(short, "VI892")[0][0] == "reward.reward_kwargs.max_resp_len"
    assert not _found(check(None, BASE + DAPO + ["+reward.reward_kwargs.overlong_buffer_cfg.len=256"]), "VI892")
    naive = [o for o in no_max if "reward_manager" not in o]  # another reward manager never asserts it
    assert not _found(check(None, BASE + naive + ["+reward.reward_kwargs.overlong_buffer_cfg.len=64"]), "VI892")


def test_validation_sampling_needs_a_positive_rollout_temperature():
    """verl's validate_config asserts rollout.temperature > 0 when val_kwargs.do_sample (utils/config.py:200-203)."""
    sampled = BASE + ["actor_rollout_ref.rollout.val_kwargs.do_sample=true"]
    assert _found(check(None, sampled + ["actor_rollout_ref.rollout.temperature=0"]), "VI892")
    assert not _found(check(None, sampled + ["actor_rollout_ref.rollout.temperature=0.6"]), "VI892")
    assert not _found(check(None, BASE + ["actor_rollout_ref.rollout.temperature=0"]), "VI892")


def test_a_key_read_through_verls_accessor_function(tmp_path):
    """verl reads some keys through one-line functions (`need_reward_model(config)` returns
    config.reward.reward_model.enable, trainer/ppo/utils.py:89-93). The generator resolves such calls
    (scripts/verl_requirements.py accessors()), so the fully async rollouter's assert that a generative reward model
    runs standalone (fully_async_rollouter.py:362, guarded by need_reward_model) is in the table and is evaluated."""
    where = {r["where"]: r for r in requirements.requirements_table()}
    rollouter = [r for w, r in where.items() if w.startswith("verl/experimental/fully_async_policy/fully_async_rollouter")
                 and r["test"][0] == "enable_resource_pool"]
    assert rollouter and rollouter[0]["guard"] == [["enable", "truthy", None]], rollouter
    assert rollouter[0]["node"] == "reward.reward_model" and rollouter[0]["scope"] == "entry:fully_async"
    launch = "python3 -m verl.experimental.fully_async_policy.fully_async_main"
    ppo = [*BASE, "rollout.nnodes=1", "rollout.n_gpus_per_node=4", "reward.reward_model.enable=True",
           "reward.reward_model.model_path=Qwen/Qwen2.5-0.5B-Instruct"]

    def run(extra: list[str], name: str):
        path = tmp_path / name
        path.write_text("#!/bin/bash\n" + launch + " \\\n" + " \\\n".join(f"    {o}" for o in ppo + extra) + "\n",
                        encoding="utf-8")
        return _found(check(str(path)), "VI892")

    assert ("reward.reward_model.enable_resource_pool",) in [k[:1] for k in run([], "colocated.sh")]
    assert not [k for k in run(["reward.reward_model.enable_resource_pool=True", "reward.reward_model.nnodes=1",
                                "reward.reward_model.n_gpus_per_node=2"], "pool.sh")
                if k[0].startswith("reward.reward_model")]
