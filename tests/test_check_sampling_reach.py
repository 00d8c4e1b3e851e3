"""VI608 (a rollout sampling key the agent loop pins: repetition_penalty, real case verl#7270) and VI609 (reproducible
rollouts asked of an engine whose server reads no seed: SGLang, real case verl#3126).

The oracles are verl 0.9.1's own code:

- VI608: verl's AgentLoopWorker.generate_sequences (experimental/agent_loop/agent_loop.py), run on the CPU in a child
  process with a RolloutConfig that sets repetition_penalty=1.05 and the per-sample agent loop captured: the sampling
  parameters it hands every agent loop carry repetition_penalty=1.0. The child inserts placeholders for cachetools,
  transfer_queue, uvicorn and fastapi when they are not installed (imported by the module, unused by this method).
- VI609: verl's rollout server modules, read with ast (SGLang's server needs SGLang and a GPU to run): the vLLM folder
  reads rollout.seed and full_determinism, the SGLang and TensorRT-LLM folders read neither.

Both tables are regenerated from the installed verl's source and compared with the committed one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_check_val_sampling import PPO, R
from wizard.check.lint import check

ROOT = Path(__file__).resolve().parent.parent


def _hits(rule: str, *extra: str) -> list[str]:
    args = [a for a in PPO if a.split("=", 1)[0] not in {e.lstrip("+").split("=", 1)[0] for e in extra}]
    return [f.problem.line() for f in check(None, [*args, *extra]).findings if f.problem.rule == rule]


def _generator():
    from helpers_scripts import load_script

    return load_script("verl_sampling_reach")


def test_table_matches_verls_source():
    gen = _generator()
    committed = json.loads((ROOT / "wizard" / "check" / "data" / "verl_sampling_reach.json").read_text("utf-8"))
    assert gen.build() == committed, "run python scripts/verl_sampling_reach.py"


# ---- VI608 ----------------------------------------------------------------------------------------------------

ORACLE = r'''
import asyncio, importlib, json, sys
from unittest import mock
for name in ("cachetools", "transfer_queue", "uvicorn", "fastapi"):  # imported by the module, unused here
    try:
        importlib.import_module(name)
    except ImportError:
        stub = mock.MagicMock(); stub.__path__ = []; stub.__spec__ = None; sys.modules[name] = stub
import numpy as np
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.workers.config.rollout import RolloutConfig

cls = getattr(AgentLoopWorker, "__ray_actor_class__", AgentLoopWorker)
worker = object.__new__(cls)  # generate_sequences reads rollout_config; the rest is captured below
worker.rollout_config = RolloutConfig(name="vllm", repetition_penalty=float(sys.argv[1]), temperature=0.7)
seen = []

async def run(sampling_params, trajectory, trace=False, **kwargs):
    seen.append(sampling_params)

worker._run_agent_loop = run
worker._postprocess = lambda outputs, **kwargs: None
batch = DataProto.from_dict(non_tensors={"raw_prompt": np.array([[{"role": "user", "content": "hi"}]], dtype=object)},
                            meta_info={"global_steps": 1})
asyncio.run(cls.generate_sequences(worker, batch))
print(json.dumps(seen))
'''


@pytest.mark.slow
def test_verls_agent_loop_sends_repetition_penalty_1_whatever_the_config():
    out = subprocess.run([sys.executable, "-c", ORACLE, "1.05"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    sent = json.loads(out.stdout.strip().splitlines()[-1])
    assert [s["repetition_penalty"] for s in sent] == [1.0]
    assert sent[0]["temperature"] == 0.7  # a key verl does pass through reaches the request


def test_pinned_table_names_repetition_penalty_in_both_agent_loops():
    pinned = _generator().build()["pinned"]
    assert pinned["repetition_penalty"]["value"] == 1.0
    assert {s.rsplit(":", 1)[0] for s in pinned["repetition_penalty"]["sites"]} == {
        "experimental/agent_loop/agent_loop.py", "trainer/ppo/v1/agent_loop_tq.py"}
    assert "temperature" not in pinned and "top_p" not in pinned  # read from the config, not pinned


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_vi608_flags_a_repetition_penalty_the_loop_overrides(engine):
    hits = _hits("VI608", f"{R}.name={engine}", f"+{R}.repetition_penalty=1.05")
    assert len(hits) == 1 and "repetition_penalty=1.05" in hits[0] and "verl#7270" in hits[0], hits


@pytest.mark.parametrize("extra", [[], [f"+{R}.repetition_penalty=1.0"]])
def test_vi608_quiet_at_verls_own_value(extra):
    assert _hits("VI608", *extra) == []


# ---- VI609 ----------------------------------------------------------------------------------------------------

def test_only_vllms_server_reads_the_determinism_keys():
    reads = _generator().build()["server_reads"]
    assert reads["vllm"]["seed"] and reads["vllm"]["full_determinism"]
    for engine in ("sglang", "trtllm"):
        assert reads[engine] == {"seed": [], "full_determinism": []}, engine


def test_vi609_flags_full_determinism_on_sglang():
    hits = _hits("VI609", f"{R}.name=sglang", f"{R}.full_determinism=True", f"{R}.seed=1234")
    assert len(hits) == 1 and "full_determinism=True" in hits[0] and "sglang" in hits[0], hits


def test_vi609_flags_an_own_seed_on_sglang():
    hits = _hits("VI609", f"{R}.name=sglang", f"{R}.seed=7")
    assert len(hits) == 1 and "seed=7" in hits[0], hits


def test_vi609_flags_the_reward_models_sglang_rollout_too():
    rm = "reward.reward_model"
    base = [f"{rm}.enable=True", f"{rm}.model_path=Qwen/Qwen2.5-0.5B-Instruct", f"{rm}.rollout.full_determinism=True"]
    hits = _hits("VI609", *base, f"{rm}.rollout.name=sglang")
    assert len(hits) == 1 and f"{rm}.rollout.full_determinism=True" in hits[0], hits
    assert _hits("VI609", *base, f"{rm}.rollout.name=vllm") == []


@pytest.mark.parametrize("extra", [
    [f"{R}.full_determinism=True", f"{R}.seed=1234"],  # vLLM reads both
    [f"{R}.seed=7"],
    [f"{R}.name=sglang"],  # SGLang without asking for a seed
])
def test_vi609_quiet_where_the_engine_reads_it_or_nothing_is_asked(extra):
    assert _hits("VI609", *extra) == []
