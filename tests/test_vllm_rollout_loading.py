"""VI414 / VI415: how verl 0.9.1 starts a rollout engine from rollout.load_format and from the rollout's parallel
sizes (round 92).
- VI414: a `dummy*` load_format other than `dummy` (dummy_dtensor / dummy_hf / dummy_megatron, the names verl's
  docs/examples/config.rst still lists; verl PR #7644, R92-01) goes to the engine verbatim.
- VI415: engine_kwargs.vllm.pipeline_parallel_size (verl PR #6732, R92-02) or data_parallel_size beside
  rollout.data_parallel_size=1: vLLM's topology outgrows the replica verl sized from the rollout config.
The oracle is verl's own source and config classes: the table regenerates unchanged (scripts/
verl_vllm_rollout_loading.py), the lines it cites hold what the findings say, RolloutConfig accepts every planted
fault (nothing stops it before the workers) but refuses rollout.pipeline_model_parallel_size > 1, and verl's own
world_size expression (replica.py), evaluated with the rollout config, gives fewer GPUs than vLLM's ranks.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from math import prod
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers_scripts import regenerated
from wizard.check.lint import check

SPEC = importlib.util.find_spec("verl")
VERL = Path(SPEC.origin).parent if SPEC and SPEC.origin else None
DATA = Path(__file__).resolve().parent.parent / "wizard" / "check" / "data"
R = "actor_rollout_ref.rollout"
EK = f"{R}.engine_kwargs.vllm"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", f"{R}.name=vllm",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{R}.n=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=4",
        f"{R}.tensor_model_parallel_size=2", f"{R}.gpu_memory_utilization=0.5"]


def _hits(rule: str, *extra: str):
    report = check(None, [*BASE, *extra], defaults="snapshot", env={"HOME": "/nonexistent-home"})
    return [f for f in report.findings if f.problem.rule == rule]


def _table() -> dict:
    return json.loads((DATA / "verl_vllm_rollout_loading.json").read_text(encoding="utf-8"))


def _src(name: str) -> list[str]:
    assert VERL is not None
    hits = list(VERL.rglob(name))
    assert len(hits) == 1, name
    return hits[0].read_text(encoding="utf-8").splitlines()


@pytest.mark.verl
def test_the_table_is_verls_source():
    if VERL is None:
        pytest.skip("verl is not installed")
    assert regenerated("verl_vllm_rollout_loading") == (DATA / "verl_vllm_rollout_loading.json").read_text("utf-8")


@pytest.mark.verl
def test_verl_passes_load_format_verbatim_and_knows_only_dummy():
    if VERL is None:
        pytest.skip("verl is not installed")
    from verl.workers.config.rollout import RolloutConfig

    lf = _table()["load_format"]
    for site in lf["verbatim"].values():
        assert _src(site["file"])[site["line"] - 1].strip() == '"load_format": self.config.load_format,'
    eq = lf["compared"]["equals"]
    assert f'load_format != "{eq["name"]}"' in _src(eq["file"])[eq["line"] - 1]
    assert lf["default"] == eq["name"] == "dummy"
    for name in ("dummy_dtensor", "dummy_hf", "dummy_megatron"):
        assert RolloutConfig(name="vllm", load_format=name).load_format == name  # accepted, passed on as is
        assert (lf["compared"]["contains"]["name"] in name) is ("dummy" in "dummy")  # same weight-sync start


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("name", ["dummy_dtensor", "dummy_hf", "dummy_megatron"])
def test_a_retired_dummy_name_is_an_error(engine, name):  # R92-01
    hits = _hits("VI414", f"{R}.name={engine}", f"{R}.load_format={name}")
    assert len(hits) == 1 and hits[0].problem.severity == "error"
    assert hits[0].fix is not None and hits[0].fix.set == {f"{R}.load_format": "dummy"}
    assert f"{name!r}" in hits[0].problem.message


@pytest.mark.parametrize("name", ["dummy", "auto", "safetensors"])
def test_load_formats_the_engines_know_stay_clean(name):  # control
    assert _hits("VI414", f"{R}.load_format={name}") == []


@pytest.mark.verl
def test_verl_refuses_rollout_pp_but_sizes_replicas_without_engine_kwargs():
    if VERL is None:
        pytest.skip("verl is not installed")
    from verl.workers.config.rollout import RolloutConfig

    topo = _table()["topology"]
    with pytest.raises(NotImplementedError):
        RolloutConfig(name="vllm", pipeline_model_parallel_size=2)
    assert "pipeline_model_parallel_size > 1" in _src("rollout.py")[topo["pp_refused_line"] - 1]
    cfg = RolloutConfig(name="vllm", tensor_model_parallel_size=2,
                        engine_kwargs={"vllm": {"pipeline_parallel_size": 2}})  # accepted before the workers
    ws = topo["world_size"]
    node = ast.parse("\n".join(_src("replica.py")[ws["line"] - 1:ws["end_line"]]).strip()).body[0]
    assert isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "self.world_size"
    world = eval(compile(ast.Expression(node.value), "replica.py", "eval"), {}, {"self": SimpleNamespace(config=cfg)})
    sizes = {arg: getattr(cfg, key) for key, arg in ws["factors"].items()}
    sizes.update(cfg.engine_kwargs["vllm"])  # spread last into vLLM's args (vllm_async_server.py:349)
    assert world == 2 and prod(sizes.values()) == 4  # the server gets 2 GPUs, vLLM asks for 4 ranks
    guard = topo["engine_kwargs_guard"]
    assert all(f'engine_kwargs.get("{k}")' in _src("vllm_async_server.py")[line - 1] for k, line in guard.items())


@pytest.mark.parametrize("extra", [[f"+{EK}.pipeline_parallel_size=2"],  # R92-02
                                   [f"+{EK}.data_parallel_size=2"]])
def test_a_vllm_parallel_size_around_verls_replica_is_an_error(extra):
    hits = _hits("VI415", *extra)
    assert len(hits) == 1 and hits[0].problem.severity == "error"
    assert "asks for 4 ranks" in hits[0].problem.message


@pytest.mark.parametrize("extra", [[f"+{EK}.pipeline_parallel_size=1"],
                                   [f"{R}.data_parallel_size=2", "trainer.n_gpus_per_node=4",
                                    f"+{EK}.data_parallel_size=2"],  # verl writes its own dp after the spread
                                   [f"+{EK}.max_num_seqs=256"]])
def test_sizes_that_match_verls_replica_stay_clean(extra):  # control
    assert _hits("VI415", *extra) == []


def test_tensor_parallel_size_stays_with_vi600_and_other_engines_are_not_read():
    assert _hits("VI415", f"+{EK}.tensor_parallel_size=4") == []
    assert _hits("VI415", f"{R}.name=sglang", f"+{EK}.pipeline_parallel_size=2") == []
