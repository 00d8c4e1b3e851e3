"""VI454 / VI455: checkpoint-engine settings verl 0.9.1 refuses only once the GPUs are booked.

Real cases (round 102, /work/scratch/mistakes_round102.json): verl's own delta_sharded one-step-off example with a
vLLM rollout and PR #7181's engine_kwargs.delta_sharded.verify_every (vLLM refuses it at launch), with a vLLM
rollout of data_parallel_size 2 (PR #7227's consumer limits), with vLLM PD disaggregation (PR #6243), and with a
TensorRT-LLM rollout (no delta consumer; verl-omni PR #613 quotes the gate).

Oracles: verl's own constructors, run on CPU in a child process (fastapi / uvicorn / zmq / cupy / ray's collective
stubbed, nothing else): DeltaShardedCheckpointEngine asserts encoding 'indices', an engine refuses a keyword it does
not take and one verl passes itself, CheckpointEngineWorker refuses trtllm and builds for sglang. The vLLM server's
guards need vLLM (not installed here): each is found in verl's source at the line the table cites. The table is
regenerated from verl's source and compared with the committed one.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from wizard.check.lint import check

ROOT = Path(__file__).resolve().parent.parent
R = "actor_rollout_ref.rollout"
BACKEND = f"{R}.checkpoint_engine.backend"
EK = f"{R}.checkpoint_engine.engine_kwargs"
VEK = f"{R}.engine_kwargs.vllm"
OSP_LAUNCH = "python3 -m verl.experimental.one_step_off_policy.main_ppo"
# verl's delta_sharded one-step-off example, cut to the keys that matter (2 rollout GPUs beside 6 training GPUs)
OSP = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen3-0.6B", "data.train_batch_size=64",
       "actor_rollout_ref.actor.ppo_mini_batch_size=16", "actor_rollout_ref.actor.use_dynamic_bsz=True",
       "actor_rollout_ref.hybrid_engine=False", f"{R}.n=4", f"{R}.name=sglang", f"{R}.tensor_model_parallel_size=2",
       f"{BACKEND}=delta_sharded", f"+{EK}.delta_sharded.encoding=indices", "trainer.logger=[console]",
       "trainer.nnodes=1", "trainer.n_gpus_per_node=6", "rollout.nnodes=1", "rollout.n_gpus_per_node=2"]
ORACLE = """
import json, os, sys
from types import SimpleNamespace as NS
from unittest import mock
for m in ("fastapi", "uvicorn", "zmq", "zmq.asyncio", "cupy", "cupy.cuda", "ray.util.collective"):
    sys.modules.setdefault(m, mock.MagicMock())
os.environ.update(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                  MASTER_PORT="29517")
from verl.checkpoint_engine import CheckpointEngineRegistry
from verl.checkpoint_engine.base import CheckpointEngineWorker

def attempt(fn):
    try:
        fn()
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"

def worker(name):
    ce = NS(backend="delta_sharded", update_weights_bucket_megabytes=16, engine_kwargs={}, custom_backend_module=None)
    return CheckpointEngineWorker(NS(name=name, mode="async", checkpoint_engine=ce), None, server_adapter=object())

out = {
    "deltas": attempt(lambda: CheckpointEngineRegistry.new("delta_sharded", bucket_size=1 << 20, encoding="deltas")),
    "indices": attempt(lambda: CheckpointEngineRegistry.new("delta_sharded", bucket_size=1 << 20, encoding="indices",
                                                            verify_every=4)),
    "phase": attempt(lambda: CheckpointEngineRegistry.new("nccl", bucket_size=1 << 20, phase=2)),
    "twice": attempt(lambda: CheckpointEngineRegistry.new("nccl", bucket_size=1 << 20, **{"bucket_size": 8})),
    "rebuild": attempt(lambda: CheckpointEngineRegistry.new("nccl", bucket_size=1 << 20, rebuild_group=True)),
    "trtllm": attempt(lambda: worker("trtllm")),
    "sglang": attempt(lambda: worker("sglang")),
}
print("RESULTS " + json.dumps(out))
"""


def _script(tmp_path: Path, overrides: list[str]) -> str:
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\nset -x\n" + OSP_LAUNCH + " \\\n" + " \\\n".join(f"    '{o}'" for o in overrides)
                    + "\n", encoding="utf-8")
    return str(path)


def _with(*extra: str) -> list[str]:
    given = {o.lstrip("+").split("=", 1)[0]: o for o in extra}
    return [given.pop(o.lstrip("+").split("=", 1)[0], o) for o in OSP] + list(given.values())


def _hits(tmp_path: Path, rule: str, *extra: str) -> list[str]:
    report = check(_script(tmp_path, _with(*extra)), env={"HOME": str(tmp_path)})
    return [f.problem.line() for f in report.findings if f.problem.rule == rule]


def verl_source_lines(where: str) -> str:
    """The text of `file:a-b` (or `file:a`) in the installed verl."""
    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    rel, lines = where.rsplit(":", 1)
    first, _, last = lines.partition("-")
    text = (Path(list(spec.submodule_search_locations)[0]) / rel).read_text(encoding="utf-8").splitlines()
    return "\n".join(text[int(first) - 1:int(last or first)])


@pytest.fixture(scope="module")
def verl_says():
    pytest.importorskip("verl")
    run = subprocess.run([sys.executable, "-c", ORACLE], capture_output=True, text=True, timeout=300)
    line = next((x for x in run.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line is not None, run.stderr[-3000:]
    return json.loads(line[len("RESULTS "):])


def test_table_is_regenerated_from_verl():
    pytest.importorskip("verl")
    spec = importlib.util.spec_from_file_location("verl_sync_delta", ROOT / "scripts" / "verl_sync_delta.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    committed = json.loads((ROOT / "wizard" / "check" / "data" / "verl_sync_delta.json").read_text(encoding="utf-8"))
    assert mod.build() == committed


def test_each_cited_guard_is_in_verls_source():
    pytest.importorskip("verl")
    data = json.loads((ROOT / "wizard" / "check" / "data" / "verl_sync_delta.json").read_text(encoding="utf-8"))
    guards = data["delta"]["vllm_guards"]
    for tag in ("verify_every", "data_parallel_size", "disaggregation", "engine_data_parallel_size",
                "engine_pipeline_parallel_size", "engine_tensor_parallel_size", "moe_backend", "enable_eplb",
                "weight_transfer_backend"):
        text = verl_source_lines(guards[tag]["at"])
        assert "raise" in text and guards[tag]["raises"] in text, (tag, text)
    assert "NotImplementedError" in verl_source_lines(data["delta"]["consumer_gate"])
    assert "does not support PD disaggregation" in verl_source_lines(data["delta"]["sglang_pd_assert"])
    assert "assert encoding" in verl_source_lines(data["delta"]["encoding_assert"])


def test_verl_refuses_what_the_rules_flag(verl_says, tmp_path):
    assert verl_says["deltas"] and verl_says["deltas"].startswith("AssertionError") and "indices" in verl_says["deltas"]
    assert verl_says["indices"] is None
    assert verl_says["phase"] and "unexpected keyword argument 'phase'" in verl_says["phase"]
    assert verl_says["twice"] and "multiple values" in verl_says["twice"]
    assert verl_says["rebuild"] is None
    assert verl_says["trtllm"] and verl_says["trtllm"].startswith("NotImplementedError")
    assert verl_says["sglang"] is None
    assert _hits(tmp_path, "VI455", f"+{EK}.delta_sharded.encoding=deltas")
    assert _hits(tmp_path, "VI455", f"{BACKEND}=nccl", f"+{EK}.nccl.phase=2")
    assert _hits(tmp_path, "VI455", f"{BACKEND}=nccl", f"+{EK}.nccl.bucket_size=8")
    assert _hits(tmp_path, "VI454", f"{R}.name=trtllm")
    # the same things verl accepts stay clean
    assert not _hits(tmp_path, "VI455", f"+{EK}.delta_sharded.verify_every=4")
    assert not _hits(tmp_path, "VI455", f"{BACKEND}=nccl", f"+{EK}.nccl.rebuild_group=True")
    assert not _hits(tmp_path, "VI454")


@pytest.mark.parametrize("extra", [
    (f"+{EK}.delta_sharded.verify_every=10",),  # R102-01, PR #7181's knob
    (f"{R}.tensor_model_parallel_size=1", f"{R}.data_parallel_size=2"),  # R102-02, PR #7227
    (f"{R}.tensor_model_parallel_size=1", f"{R}.disaggregation.enabled=True"),  # R102-03, PR #6243
    (f"+{VEK}.pipeline_parallel_size=2",),
    (f"+{VEK}.tensor_parallel_size=1",),
    (f"+{VEK}.weight_transfer_config.backend=nccl",),
])
def test_vllm_delta_refusals_flagged(tmp_path, extra):
    hits = _hits(tmp_path, "VI454", f"{R}.name=vllm", *extra)
    assert len(hits) == 1 and "vLLM server refuses" in hits[0], hits


def test_vllm_moe_backend_only_for_moe_models(tmp_path):
    moe = "actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B"
    assert _hits(tmp_path, "VI454", f"{R}.name=vllm", moe, f"+{VEK}.moe_backend=flashinfer_cutlass")
    assert _hits(tmp_path, "VI454", f"{R}.name=vllm", moe, f"+{VEK}.enable_eplb=True")
    assert not _hits(tmp_path, "VI454", f"{R}.name=vllm", moe, f"+{VEK}.moe_backend=triton")
    assert not _hits(tmp_path, "VI454", f"{R}.name=vllm", f"+{VEK}.moe_backend=flashinfer_cutlass")  # dense


def test_controls_stay_clean(tmp_path):
    # verl's example (SGLang, indices) and its vLLM twin; SGLang has the verify sweep; the trtllm gate needs the
    # standalone rollout of a disaggregated run
    for extra in ((), (f"{R}.name=vllm",), (f"+{EK}.delta_sharded.verify_every=10",)):
        report = check(_script(tmp_path, _with(*extra)), env={"HOME": str(tmp_path)})
        assert not [f for f in report.findings if f.problem.rule in ("VI454", "VI455")], extra
    colocated = check(None, ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen3-0.6B",
                             f"{R}.name=trtllm", f"{BACKEND}=delta_sharded", "trainer.use_v1=False",
                             "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
                             "trainer.nnodes=1", "trainer.n_gpus_per_node=1"])
    assert not [f for f in colocated.findings if f.problem.rule == "VI454"]
