"""VI996-VI999: what verl 0.9.1's reward managers and V1 trainer do with reward_kwargs, data.reward_fn_key,
data.gen_batch_size and algorithm.filter_groups.metric (real cases verl#4268, PR#975, #876, #2318).

The oracles are verl's own code on the CPU: the hydra-composed ppo_trainer config, load_reward_manager and the
manager's run_single on a one-row batch (the tiny_model fixture's tokenizer); the V1 trainer's _init_dataloader and
_build_replay_buffer, whose text is taken from verl's trainer_base.py and run on a stand-in `self` (the module itself
imports Ray-side packages that are not installed here); and verl's ReplayBuffer with transfer_queue replaced by an
in-memory stand-in holding what the reward manager produced. check only reads verl's reward-manager sources and the
user's reward file (ast), never imports either.
"""

from __future__ import annotations

import ast
import asyncio
import os
import sys
import types
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.reward_managers import manager_reads, returned_keys

BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.rollout.n=4",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=1"]
OVERLONG = ["+reward.reward_kwargs.overlong_buffer_cfg.enable=True", "+reward.reward_kwargs.overlong_buffer_cfg.len=16",
            "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
            "+reward.reward_kwargs.overlong_buffer_cfg.log=False", "+reward.reward_kwargs.max_resp_len=64"]
FLOAT_FN = "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.0\n"
DICT_FN = ("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
           "    ok = 1.0 if solution_str.strip().endswith(str(ground_truth)) else 0.0\n"
           "    if not solution_str:\n        return {'score': 0.0, 'format': 0.0, 'correct': 0.0}\n"
           "    return {'score': ok, 'format': 1.0, 'correct': ok}\n")
SEEN_FN = ("SEEN = []\n\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
           "    SEEN.append(data_source)\n    return 1.0 if data_source == 'math' else 0.0\n")


def _ids(report, rule: str) -> list:
    return [f.problem for f in report.findings if f.problem.rule == rule]


def _compose(overrides: list[str]):
    import verl
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer/config"),
                               version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def _row(tok, text: str, data_source: str = "openai/gsm8k", resp_len: int = 64, **columns):
    import numpy as np
    import torch
    from verl import DataProto

    ids = tok(text, add_special_tokens=False)["input_ids"][:resp_len]
    resp = torch.full((1, resp_len), tok.pad_token_id or 0, dtype=torch.long)
    resp[0, :len(ids)] = torch.tensor(ids)
    attn = torch.cat([torch.ones((1, 8)), (torch.arange(resp_len) < len(ids)).float()[None]], 1).long()
    nt = {"data_source": np.array([data_source], dtype=object),
          "reward_model": np.array([{"ground_truth": "72", "style": "rule"}], dtype=object),
          "extra_info": np.array([{"index": 0}], dtype=object),
          **{k: np.array([v], dtype=object) for k, v in columns.items()}}
    return DataProto.from_dict(tensors={"prompts": torch.ones((1, 8), dtype=torch.long), "responses": resp,
                                        "attention_mask": attn}, non_tensors=nt)


def _run(config, tok, batch) -> tuple[str, dict]:
    from verl.trainer.ppo.reward import load_reward_manager

    async def go():
        manager = load_reward_manager(config, tok)
        return type(manager).__name__, await manager.run_single(batch)

    return asyncio.run(go())


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---- VI996: reward_kwargs only the dapo manager reads ----

@pytest.mark.slow
@pytest.mark.verl
def test_verl_applies_the_overlong_penalty_only_where_check_says_the_manager_reads_it(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    fn = _write(tmp_path, "float_reward.py", FLOAT_FN)
    reads = manager_reads()
    assert reads["dapo"].kwargs == {"overlong_buffer_cfg", "max_resp_len"} and reads["naive"].kwargs == frozenset()
    for name in ("naive", "dapo"):
        config = _compose(["algorithm.adv_estimator=grpo", f"reward.reward_manager.name={name}",
                           f"reward.custom_reward_function.path={fn}", *OVERLONG])
        _, out = _run(config, tok, _row(tok, "step " * 200, resp_len=64))  # fills the window: inside the buffer
        penalised = out["reward_score"] < 0
        assert penalised == ("overlong_buffer_cfg" in reads[name].kwargs), (name, out)
        hits = _ids(check(None, [*BASE, f"reward.reward_manager.name={name}", *OVERLONG]), "VI996")
        assert bool(hits) == (not penalised)


def test_check_warns_on_reward_kwargs_the_manager_never_reads():
    [hit] = _ids(check(None, [*BASE, *OVERLONG]), "VI996")  # the default manager: naive
    assert hit.severity == "warning" and "reward.reward_kwargs.overlong_buffer_cfg" in hit.message
    assert "reward.reward_manager.name=dapo" in hit.hint
    assert _ids(check(None, [*BASE, "+reward.reward_kwargs.overlong_buffer_cfg.enable=True",
                             "reward.reward_manager.name=gdpo"]), "VI996")


@pytest.mark.parametrize("extra", [
    ["reward.reward_manager.name=dapo", *OVERLONG],  # the 0.9.1 way
    [],  # nothing set
    ["reward.reward_manager.source=importlib", "reward.reward_manager.name=MyManager", *OVERLONG],  # the user's class
    ["reward.custom_reward_function.reward_kwargs.alpha=0.5"],  # keywords for the function: another key
])
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_is_silent_where_the_kwargs_are_read_or_unknown(extra):
    assert not _ids(check(None, [*BASE, *extra]), "VI996")


# ---- VI997: data.reward_fn_key ----

@pytest.mark.verl
def test_verl_routes_on_the_data_source_column_whatever_reward_fn_key_says(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    fn = _write(tmp_path, "router.py", SEEN_FN)
    config = _compose(["algorithm.adv_estimator=grpo", "data.reward_fn_key=task",
                       f"reward.custom_reward_function.path={fn}"])
    assert config.data.reward_fn_key == "task"
    _, out = _run(config, tok, _row(tok, "#### 72", data_source="/mnt/data/mix/train.parquet", task="math"))
    assert out["reward_score"] == 0.0  # scored as the file path, not as 'math'
    for name, reads in manager_reads().items():  # check's derivation: each reads the column, none the key
        assert reads.data_source_at and not reads.fn_key, name
    hits = _ids(check(None, [*BASE, "data.reward_fn_key=task"]), "VI997")
    assert hits and "naive.py:42" in hits[0].message


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_reward_fn_key_controls():
    assert not _ids(check(None, [*BASE]), "VI997")
    assert not _ids(check(None, [*BASE, "data.reward_fn_key=data_source"]), "VI997")
    assert not _ids(check(None, [*BASE, "data.reward_fn_key=task", "reward.reward_manager.source=importlib",
                                 "reward.reward_manager.name=Mine"]), "VI997")


# ---- VI998: data.gen_batch_size under DAPO ----

def _trainer_methods(names: tuple[str, ...], namespace: dict) -> dict:
    """verl's own PPOTrainer methods, their text from trainer_base.py, defined in `namespace`."""
    import verl

    path = Path(verl.__file__).parent / "trainer/ppo/v1/trainer_base.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PPOTrainer"]
    funcs = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in names]
    for fn in funcs:
        fn.decorator_list = []
    exec(compile(ast.Module(body=funcs, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    return {n: namespace[n] for n in names}


@pytest.fixture()
def replay_buffer_module(monkeypatch):
    """verl's replay_buffer.py with transfer_queue (not installed here) replaced by an in-memory store."""
    tq = types.ModuleType("transfer_queue")
    tq.KVBatchMeta = type("KVBatchMeta", (), {})
    tq.store = {}
    tq.kv_batch_get = lambda keys, partition_id, select_fields: {
        select_fields[0]: [tq.store[k][select_fields[0]] for k in keys]}
    monkeypatch.setitem(sys.modules, "transfer_queue", tq)
    import importlib.util

    import verl

    # the file alone: the package verl.trainer.ppo.v1 imports the Ray-side trainer (packages not installed here)
    path = Path(verl.__file__).parent / "trainer/ppo/v1/replay_buffer.py"
    spec = importlib.util.spec_from_file_location("verl_v1_replay_buffer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.verl
def test_verl_overrides_gen_batch_size_under_dapo(replay_buffer_module):
    import logging

    from omegaconf import OmegaConf, open_dict

    seen: dict = {}

    class Loader:
        def __init__(self, dataset, batch_size, **_):
            seen.setdefault("batch_size", batch_size)

    ns = {"open_dict": open_dict, "OmegaConf": OmegaConf, "logger": logging.getLogger("t"), "StatefulDataLoader": Loader,
          "create_rl_dataset": lambda *a, **k: [0] * 8, "create_rl_sampler": lambda *a: None, "collate_fn": None,
          "ReplayBuffer": replay_buffer_module.ReplayBuffer, "ReplayBufferAsync": replay_buffer_module.ReplayBufferAsync,
          "load_extern_type": None}
    m = _trainer_methods(("_init_dataloader", "_build_replay_buffer", "_resolve_filter_groups_metric"), ns)
    for dapo, expect in ((True, 1), (False, 48)):
        config = _compose(["algorithm.adv_estimator=grpo", "data.train_batch_size=16", "+data.gen_batch_size=48",
                           f"algorithm.filter_groups.enable={dapo}", "algorithm.filter_groups.metric=acc",
                           "algorithm.filter_groups.max_inflight_gen_batches=3"])
        me = types.SimpleNamespace(config=config, trainer_mode="sync", tokenizer=None, processor=None, parameter_sync_step=1,
                                   _add_prompts_to_generate=lambda *a: None)
        for k, fn in m.items():
            setattr(me, k, types.MethodType(fn, me))
        seen.clear()
        me._init_dataloader()
        buffer = me._build_replay_buffer()
        assert seen["batch_size"] == expect and buffer.gen_batch_size == expect
        assert buffer.max_inflight_gen_batches == (3 if dapo else 1)
        hits = _ids(check(None, [*BASE, "+data.gen_batch_size=48", f"algorithm.filter_groups.enable={dapo}"]), "VI998")
        assert bool(hits) == (expect != 48)
        if hits:
            assert "max_inflight_gen_batches=3" in hits[0].hint


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_gen_batch_size_controls():
    assert not _ids(check(None, [*BASE, "algorithm.filter_groups.enable=True"]), "VI998")
    assert not _ids(check(None, [*BASE, "+data.gen_batch_size=1", "algorithm.filter_groups.enable=True"]), "VI998")
    assert _ids(check(None, [*BASE, "+data.gen_batch_size=48", "trainer.v1.trainer_mode=colocate_async"]), "VI998")


# ---- VI999: filter_groups.metric the reward function never returns ----

@pytest.mark.slow
@pytest.mark.verl
def test_verl_stops_on_a_metric_the_dict_reward_lacks(tiny_model, tmp_path, replay_buffer_module):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    tq = sys.modules["transfer_queue"]
    for text, metric in ((DICT_FN, "acc"), (FLOAT_FN, "acc"), (DICT_FN, "correct")):
        fn = _write(tmp_path, f"r{abs(hash((text, metric)))}.py", text)
        config = _compose(["algorithm.adv_estimator=grpo", "algorithm.filter_groups.enable=True",
                           f"algorithm.filter_groups.metric={metric}", f"reward.custom_reward_function.path={fn}"])
        _, out = _run(config, tok, _row(tok, "#### 72"))
        buffer = replay_buffer_module.ReplayBuffer(
            trainer_mode="sync", trainer_config={}, max_off_policy_threshold=None, max_off_policy_strategy="drop",
            sampler_kwargs={}, refill_fn=lambda *a: None, filter_groups_metric=metric, train_batch_size=1,
            gen_batch_size=1)
        for i in range(2):  # a finished group of two trajectories
            key = f"u0_{i}"
            buffer.partitions["train"][key] = {}
            tq.store[key] = {"extra_fields": {"reward_extra_info": dict(out["reward_extra_info"])}}
        buffer.finished_keys["train"] = {"u0"}
        try:
            buffer._dapo_filtered_keys("train")
            raised = False
        except RuntimeError as exc:
            raised = "Finished groups are missing DAPO metric" in str(exc)
        statically = returned_keys(fn, "compute_score")
        hits = _ids(check(None, [*BASE, "algorithm.filter_groups.enable=True", f"algorithm.filter_groups.metric={metric}",
                                 f"reward.custom_reward_function.path={fn}"]), "VI999")
        assert raised == (metric not in out["reward_extra_info"])
        assert bool(hits) == raised, (text, metric)
        if raised:
            assert statically is not None and statically[0] == set(out["reward_extra_info"])
            assert hits[0].severity == "error"


@pytest.mark.parametrize("body", [
    "    r = {'score': 1.0}\n    r['acc'] = 1.0\n    return r\n",  # built up: not a literal
    "    return {'score': 1.0, **extra_info}\n",  # unpacked: keys unknown
    "    if solution_str:\n        return 1.0\n    return {'score': 0.0}\n",  # a number on one path (acc added)
    "    return {'score': 1.0, 'acc': 1.0}\n",
])
def test_check_is_silent_unless_every_return_is_a_literal_without_the_metric(tmp_path, body):
    fn = _write(tmp_path, "r.py", "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n" + body)
    report = check(None, [*BASE, "algorithm.filter_groups.enable=True", "algorithm.filter_groups.metric=acc",
                          f"reward.custom_reward_function.path={fn}"])
    assert not _ids(report, "VI999")


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_metric_controls(tmp_path):
    fn = _write(tmp_path, "r.py", DICT_FN)
    common = [*BASE, f"reward.custom_reward_function.path={fn}"]
    assert _ids(check(None, [*common, "algorithm.filter_groups.enable=True", "algorithm.filter_groups.metric=acc"]), "VI999")
    assert not _ids(check(None, [*common, "algorithm.filter_groups.enable=True"]), "VI999")  # metric=reward
    assert not _ids(check(None, [*common, "algorithm.filter_groups.metric=acc"]), "VI999")  # filtering off
