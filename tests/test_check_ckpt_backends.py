"""VI705: actor_rollout_ref.rollout.checkpoint_engine.backend names no engine verl 0.9.1 registers.

Real case (round 70): verl#6425 asks why the HCCL engine registers as "nccl"; verl's own config comment lists
"naive, nccl, nixl, hccl" (workers/config/rollout.py:132), so backend=hccl (or kimi, delta: the engines' file names)
passes config load and stops every actor worker at init.

The oracle is verl's own CheckpointEngineRegistry, imported in a child process (its package imports the rollout
server module, which needs fastapi / uvicorn: stubbed there, nothing else): get() refuses the planted names and
resolves "naive"; the table the rule reads is regenerated from verl's source and compared with the committed one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wizard.check.lint import check

ROOT = Path(__file__).resolve().parent.parent
KEY = "actor_rollout_ref.rollout.checkpoint_engine.backend"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1",
        "trainer.n_gpus_per_node=1"]
ORACLE = """
import json, sys
from unittest import mock
for m in ("fastapi", "uvicorn"):
    sys.modules.setdefault(m, mock.MagicMock())
from verl.checkpoint_engine import CheckpointEngineRegistry
out = {}
for name in json.loads(sys.argv[1]):
    try:
        CheckpointEngineRegistry.get(name)
        out[name] = None
    except ValueError as exc:
        out[name] = str(exc)
print(json.dumps(out))
"""


def _hits(*extra: str) -> list[str]:
    return [f.problem.line() for f in check(None, [*BASE, *extra]).findings if f.problem.rule == "VI705"]


def _verl_get(names: list[str]) -> dict[str, str | None]:
    pytest.importorskip("verl")
    r = subprocess.run([sys.executable, "-c", ORACLE, json.dumps(names)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_planted_names_refused_by_verl_and_caught():
    got = _verl_get(["hccl", "kimi", "ncl", "naive"])
    for name in ("hccl", "kimi", "ncl"):
        assert got[name] and f"Checkpoint engine {name} not registered" in got[name], got
        hits = _hits(f"{KEY}={name}")
        assert len(hits) == 1 and f"{KEY}='{name}'" in hits[0], hits
    assert got["naive"] is None
    assert "registers as 'nccl'" in _hits(f"{KEY}=hccl")[0]
    assert "(here kimi_ckpt_engine)" in _hits(f"{KEY}=kimi")[0]


@pytest.mark.parametrize("name", ["naive", "nccl", "nixl", "kimi_ckpt_engine", "mooncake", "delta_sharded"])
def test_registered_names_stay_clean(name):
    assert not _hits(f"{KEY}={name}")


def test_custom_backend_module_is_trusted():
    assert not _hits(f"{KEY}=my_engine", "actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=my.plugin")


def test_table_matches_verl_source():
    pytest.importorskip("verl")
    from helpers_scripts import load_script, regenerated

    committed = (ROOT / "wizard" / "check" / "data" / "verl_ckpt_backends.json").read_text(encoding="utf-8")
    assert regenerated("verl_ckpt_backends") == committed
    table = json.loads(committed)
    assert "hccl" not in table["registered"] and table["module_names"]["hccl"] == "nccl"
    assert load_script("verl_ckpt_backends").SUFFIX == "_checkpoint_engine"
