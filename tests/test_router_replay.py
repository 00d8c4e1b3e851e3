"""MoE router replay and vLLM expert parallelism set where verl does not read them (round 71):

- VI709: the actor's router_replay.mode against the rollout's enable_rollout_routing_replay and
  rollout_correction.bypass_mode (verl PR#4101's R3 switch without the rollout key, PR#4973's R2 + capture README,
  PR#7805's R2 + bypass_mode); VI728: the rollout captures routes nothing replays.
- VI729: +engine_kwargs.vllm.enable_expert_parallel=True beside rollout.expert_parallel_size=1 (verl's
  docs/perf/best_practices.rst:141): verl writes the key again after the spread.

The oracle is verl's own source, read by scripts/verl_router_replay.py and scripts/verl_vllm_server_args.py: the
tables regenerate unchanged, the lines they cite hold the code the findings describe, verl's own config classes accept
every planted fault (nothing stops it before the workers), and verl's own expression decides enable_expert_parallel.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers_scripts import regenerated

from wizard.check.lint import check

SPEC = importlib.util.find_spec("verl")
VERL = Path(SPEC.origin).parent if SPEC and SPEC.origin else None
DATA = Path(__file__).resolve().parent.parent / "wizard" / "check" / "data"
A, R = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
MODE = f"{A}.megatron.router_replay.mode"
CAPTURE = f"{R}.enable_rollout_routing_replay"
BYPASS = "algorithm.rollout_correction.bypass_mode"
BASE = ["model_engine=megatron", "algorithm.adv_estimator=grpo", "data.train_files=/d/train.parquet",
        "data.val_files=/d/val.parquet", "actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B", f"{R}.name=vllm",
        f"{R}.n=4", f"{A}.ppo_mini_batch_size=8", f"{A}.use_dynamic_bsz=True", "data.train_batch_size=16",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=8", f"{A}.megatron.tensor_model_parallel_size=4",
        f"{A}.megatron.expert_model_parallel_size=8", f"{A}.megatron.expert_tensor_parallel_size=1",
        f"{R}.tensor_model_parallel_size=4", f"{R}.calculate_log_probs=True"]


def _hits(rule: str, *extra: str, base: list[str] = BASE):
    report = check(None, [*base, *extra], defaults="snapshot", env={"HOME": "/nonexistent-home"})
    return [f.problem for f in report.findings if f.problem.rule == rule]


def _table(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


def _src(rel: str) -> list[str]:
    assert VERL is not None
    return (VERL / rel).read_text(encoding="utf-8").splitlines()


@pytest.mark.verl
@pytest.mark.parametrize("name", ["verl_router_replay", "verl_vllm_server_args"])
def test_the_tables_are_verls_source(name):
    if VERL is None:
        pytest.skip("verl is not installed")
    assert regenerated(name) == (DATA / f"{name}.json").read_text(encoding="utf-8")


@pytest.mark.verl
def test_verl_replays_without_routes_and_reads_the_mode_for_two_strategies_only():
    """The lines the findings cite: the engines raise when a replay finds no routes, R2 records only when no routes
    came, the worker reads the mode for megatron/veomni and runs 'disabled' otherwise, bypass skips the old-logprob
    pass, and the rollout servers ask for routes only with enable_rollout_routing_replay."""
    if VERL is None:
        pytest.skip("verl is not installed")
    t = _table("verl_router_replay")
    lines = t["lines"]
    meg = "workers/engine/megatron/transformer_impl.py"
    src = _src(meg)
    at = lines["replay_without_routes"][meg]
    assert "raise RuntimeError(" in src[at - 2] and "if layers_topk_idx is None:" in src[at - 3]
    assert "record_r2_routes" in "\n".join(src[lines["r2_records_only_without_routes"][meg] - 6:
                                                lines["r2_records_only_without_routes"][meg]])
    workers = _src(t["mode_by_strategy_file"])
    chain = ast.parse(textwrap.dedent("\n".join(workers[t["mode_by_strategy"]["megatron"]["line"] - 2:
                                                       t["mode_by_strategy"]["veomni"]["line"] + 2])))
    assert ast.unparse(chain.body[0].orelse[0].orelse[0]) == "rr_mode = 'disabled'"
    for rel, line in lines["bypass_skips_old_logprob"].items():
        branch = next(n for n in ast.walk(ast.parse("\n".join(_src(rel)))) if isinstance(n, ast.If) and n.lineno == line)
        body, rest = "\n".join(map(ast.unparse, branch.body)), "\n".join(map(ast.unparse, branch.orelse))
        assert "compute_log_prob" not in body and ("return batch" in body or "_compute_old_log_prob" in rest), rel
    for rel, line in lines["rollout_capture"].items():
        guard = next(n for n in ast.walk(ast.parse("\n".join(_src(rel)))) if isinstance(n, ast.If)
                     and n.lineno < line <= n.end_lineno and ast.unparse(n.test) == "self.config.enable_rollout_routing_replay")
        assert "enable_return_routed_experts" in ast.unparse(guard), rel
    assert "conflicting router replay configuration" in _src("trainer/ppo/ray_trainer.py")[lines["r2_conflict_error"]
                                                                                            ["trainer/ppo/ray_trainer.py"] - 1]


@pytest.mark.verl
def test_verls_config_classes_accept_every_planted_fault():
    """Nothing before the workers stops them: verl's EngineRouterReplayConfig takes R2/R3 on its own, and its
    RolloutConfig holds the capture switch and expert_parallel_size=1 without looking at the actor."""
    if VERL is None:
        pytest.skip("verl is not installed")
    from verl.workers.config.engine import EngineRouterReplayConfig
    from verl.workers.config.rollout import RolloutConfig

    for mode in _table("verl_router_replay")["valid_modes"]["modes"]:
        assert EngineRouterReplayConfig(mode=mode).mode == mode
    for capture in (True, False):
        cfg = RolloutConfig(name="vllm", enable_rollout_routing_replay=capture, expert_parallel_size=1,
                            tensor_model_parallel_size=4, engine_kwargs={"vllm": {"enable_expert_parallel": True}})
        assert cfg.enable_rollout_routing_replay is capture and cfg.expert_parallel_size == 1


@pytest.mark.parametrize("extra, keys", [
    ([f"{MODE}=R3", f"{CAPTURE}=False"], (MODE, CAPTURE)),         # PR#4101: R3 switched on alone
    ([f"{MODE}=R2", f"{CAPTURE}=True"], (MODE, CAPTURE)),          # PR#4973: R2 + the rollout capture
    ([f"{MODE}=R2", f"{BYPASS}=True"], (MODE, BYPASS)),            # PR#7805: R2 + bypass_mode
])
def test_router_replay_halves_that_do_not_match_are_errors(extra, keys):
    hits = _hits("VI709", *extra)
    assert [(h.severity, h.keys) for h in hits] == [("error", keys)]
    assert "transformer_impl.py" in hits[0].message or "ray_trainer.py" in hits[0].message


def test_veomni_reads_its_own_mode_key():
    base = [b for b in BASE if "megatron" not in b]
    hits = _hits("VI709", "model_engine=veomni", f"{A}.veomni.router_replay.mode=R3", base=base)
    assert [h.keys for h in hits] == [(f"{A}.veomni.router_replay.mode", CAPTURE)]


def test_a_capture_nothing_replays_is_a_warning():
    disabled = _hits("VI728", f"{CAPTURE}=True")
    assert [(h.severity, h.keys) for h in disabled] == [("warning", (CAPTURE, MODE))]
    fsdp = [b for b in BASE if "megatron" not in b]
    hits = _hits("VI728", f"{CAPTURE}=True", base=fsdp)
    assert [h.keys for h in hits] == [(CAPTURE, f"{A}.strategy")] and "megatron/veomni" in hits[0].message


@pytest.mark.parametrize("extra", [
    [f"{MODE}=R3", f"{CAPTURE}=True"],                  # verl's examples/router_replay (R3)
    [f"{MODE}=R3", f"{CAPTURE}=True", f"{BYPASS}=True"],  # R3 replays the rollout's routes: bypass is fine
    [f"{MODE}=R2"],                                     # R2 records in the old-logprob pass
    [f"{MODE}=disabled"],
    [],
])
def test_valid_router_replay_stays_clean(extra):
    assert not _hits("VI709", *extra) and not _hits("VI728", *extra)


def test_verls_own_expression_decides_enable_expert_parallel():
    """verl's code, as the table holds it: the expression verl writes after the spread, evaluated on the rollout
    config; the dict the user's engine_kwargs spread into is then updated with it."""
    entry = _table("verl_vllm_server_args")["set_after"]["enable_expert_parallel"]
    assert not entry["conditional"]
    for ep, want in ((1, False), (8, True)):
        args = {**{"enable_expert_parallel": not want}}
        args.update({"enable_expert_parallel": eval(entry["expr"], {"self": SimpleNamespace(  # noqa: S307 - verl's own
            config=SimpleNamespace(expert_parallel_size=ep))})})
        assert args["enable_expert_parallel"] is want


def test_enable_expert_parallel_in_engine_kwargs_is_replaced():
    key = f"{R}.engine_kwargs.vllm.enable_expert_parallel"
    hits = _hits("VI729", f"+{key}=True")  # best_practices.rst:141's spelling, expert_parallel_size left at 1
    assert [(h.severity, h.keys) for h in hits] == [("warning", (key, f"{R}.expert_parallel_size"))]
    assert f"{R}.expert_parallel_size=4" in hits[0].hint
    off = _hits("VI729", f"+{key}=False", f"{R}.expert_parallel_size=4")
    assert [h.severity for h in off] == ["warning"]


@pytest.mark.parametrize("extra", [
    [f"{R}.expert_parallel_size=4"],                                                   # verl's own switch
    [],
    [f"+{R}.engine_kwargs.vllm.max_num_partial_prefills=2"],                            # a key verl never writes
    [f"{R}.name=sglang", f"+{R}.engine_kwargs.vllm.enable_expert_parallel=True"],      # not this engine's
])
def test_vllm_expert_parallel_controls_stay_clean(extra):
    assert not [h for h in _hits("VI729", *extra) if h.severity != "info"]


def test_a_repeat_of_verls_value_is_only_info():
    hits = _hits("VI729", f"{R}.expert_parallel_size=4", f"+{R}.engine_kwargs.vllm.enable_expert_parallel=True")
    assert [h.severity for h in hits] == ["info"]
