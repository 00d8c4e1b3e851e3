"""What verl's driver does inside the old_log_prob timer besides the pass, over the whole padded batch on one CPU
thread: it reduces the entropy in the actor's loss_agg_mode (ENTROPY_AGG_SLOT_S) and, with
rollout.calculate_log_probs on (verl 0.9's default), compares the rollout's log-probs with the recomputed ones
(DEBUG_METRICS_SLOT_S); both measured on verl's own functions by benchmarks/driver_metrics.py.

Independent sources: verl 0.9.1's own trainer source and rollout config (installed package), its own
calculate_debug_metrics run here, and the arithmetic written out below."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from test_steptime import BASE, _work

from wizard.planner import steptime as st

ROOT = Path(__file__).resolve().parent.parent


def _verl_file(*parts: str) -> Path:
    spec = importlib.util.find_spec("verl")
    assert spec and spec.origin, "verl is not installed"
    return Path(spec.origin).parent.joinpath(*parts)


def _timed(tree: ast.AST, name: str) -> list[ast.With]:
    """The `with marked_timer(name, ...)` blocks of a module."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.With) and any(
        isinstance(item.context_expr, ast.Call) and getattr(item.context_expr.func, "id", "") == "marked_timer"
        and item.context_expr.args and getattr(item.context_expr.args[0], "value", None) == name
        for item in node.items)]


def _calls(node: ast.AST, name: str) -> list[ast.Call]:
    return [c for c in ast.walk(node) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == name]


def _guarded_calls(node: ast.AST, guard: str) -> list[ast.Call]:
    """calculate_debug_metrics calls under an `if` whose test names `guard`."""
    return [c for i in ast.walk(node) if isinstance(i, ast.If) and guard in ast.unparse(i.test)
            for c in ast.walk(i) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "calculate_debug_metrics"]


def test_verls_trainers_reduce_the_pass_on_the_driver_inside_the_old_log_prob_timer():
    """The terms exist because both of verl 0.9.1's trainers, inside the old_log_prob timer, aggregate the entropy
    with agg_loss in the actor's loss_agg_mode, and call calculate_debug_metrics when the rollout returned its
    log-probs, which it does by default. The default trainer (trainer.use_v1: true) calls
    `self._compute_old_log_prob` under `marked_timer("old_log_prob")`, and that method does both, the comparison
    under `if ...rollout.calculate_log_probs` (trainer/ppo/v1/trainer_base.py); the legacy one does both inside the
    timer itself, the comparison under `if "rollout_log_probs" in batch.batch` (trainer/ppo/ray_trainer.py)."""
    v1 = ast.parse(_verl_file("trainer", "ppo", "v1", "trainer_base.py").read_text(encoding="utf-8"))
    timed = _timed(v1, "old_log_prob")
    assert any("self._compute_old_log_prob(" in ast.unparse(w) for w in timed), "v1 no longer times the pass"
    method = [f for f in ast.walk(v1) if isinstance(f, ast.FunctionDef) and f.name == "_compute_old_log_prob"]
    assert method and _guarded_calls(method[0], "calculate_log_probs")
    assert "loss_agg_mode=actor_config.loss_agg_mode" in ast.unparse(method[0]) and _calls(method[0], "agg_loss")
    legacy = ast.parse(_verl_file("trainer", "ppo", "ray_trainer.py").read_text(encoding="utf-8"))
    assert any(_guarded_calls(w, "rollout_log_probs") for w in _timed(legacy, "old_log_prob"))
    assert any(_calls(w, "agg_loss") for w in _timed(legacy, "old_log_prob"))
    trainer = yaml.safe_load(_verl_file("trainer", "config", "ppo_trainer.yaml").read_text(encoding="utf-8"))
    assert trainer["trainer"]["use_v1"] is True
    rollout = yaml.safe_load(_verl_file("trainer", "config", "rollout", "rollout.yaml").read_text(encoding="utf-8"))
    assert rollout["calculate_log_probs"] is True
    actor = yaml.safe_load(_verl_file("trainer", "config", "actor", "actor.yaml").read_text(encoding="utf-8"))
    assert actor["loss_agg_mode"] in st.ENTROPY_AGG_SLOT_S  # the default mode has a measured rate
    from verl.trainer.ppo import core_algos

    # every mode agg_loss branches on (`loss_agg_mode == "..."` or `in [...]`) has a measured rate
    named = {c.value for node in ast.walk(ast.parse(inspect.getsource(core_algos.agg_loss)))
             if isinstance(node, ast.Compare) and getattr(node.left, "id", "") == "loss_agg_mode"
             for comp in node.comparators for c in ast.walk(comp) if isinstance(c, ast.Constant)}
    assert named and named <= set(st.ENTROPY_AGG_SLOT_S), named - set(st.ENTROPY_AGG_SLOT_S)


def test_the_metrics_cost_every_padded_response_slot_in_the_old_log_prob_pass_only():
    """256 prompts × 8 responses × 4,096 padded response slots, at the entropy's rate for its loss_agg_mode plus,
    with rollout log-probs, the comparison's rate; added to the old log-prob pass and to nothing else; none where
    bypass mode skips the pass."""
    bare = st.predict(_work(driver_entropy=False))
    slots = 256 * 8 * 4096
    for mode, rate in st.ENTROPY_AGG_SLOT_S.items():
        for logprobs in (False, True):
            p = st.predict(_work(loss_agg_mode=mode, rollout_logprobs=logprobs))
            expected = slots * (rate + (st.DEBUG_METRICS_SLOT_S if logprobs else 0.0))
            assert abs(p.phases["old log-prob"] - bare.phases["old log-prob"] - expected) < 1e-9, (mode, logprobs)
            assert {k: v for k, v in p.phases.items() if k != "old log-prob"} == \
                {k: v for k, v in bare.phases.items() if k != "old log-prob"}
            assert p.detail["old log-prob driver metrics s"] == expected
            assert p.assumptions["driver_metrics_s_per_slot"] == rate + (st.DEBUG_METRICS_SLOT_S if logprobs else 0)
            assert ("calculate_log_probs" in p.assumptions["driver_metrics"]) == logprobs
    assert "driver_metrics_s_per_slot" not in bare.assumptions
    # a mode verl may add later is timed at token-mean's rate, the default's
    assert st.predict(_work(loss_agg_mode="new-mode")).phases == st.predict(_work()).phases
    # the padded slots count, not the generated tokens: a longer mean response leaves the term as it is
    longer = st.predict(_work(rollout_logprobs=True, response_mean=3000))
    assert longer.detail["old log-prob driver metrics s"] == st.predict(_work(rollout_logprobs=True)).detail[
        "old log-prob driver metrics s"]
    bypass = st.predict(_work(rollout_logprobs=True, old_logprob=False))
    assert "old log-prob" not in bypass.phases and bypass.detail["old log-prob driver metrics s"] == 0.0


@pytest.mark.slow
def test_check_reads_calculate_log_probs_and_the_loss_mode_from_the_composed_config():
    """verl 0.9.1's defaults (token-mean, calculate_log_probs True) cost both; the overrides change the rate:
    256 × 8 × 16,384 padded slots."""
    argv = [o for o in BASE if not o.startswith("data.max_response_length=")] + ["data.max_response_length=16384"]

    def time_of(*extra: str) -> dict:
        return json.loads(run_cli(["check", "--json", "--gpu-type", "H100", "--", *argv, *extra]).stdout)["time"]

    default = time_of()
    off = time_of("actor_rollout_ref.rollout.calculate_log_probs=False")
    seq = time_of("actor_rollout_ref.rollout.calculate_log_probs=False",
                  "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean")
    rate = st.ENTROPY_AGG_SLOT_S
    assert default["assumptions"]["driver_metrics_s_per_slot"] == rate["token-mean"] + st.DEBUG_METRICS_SLOT_S
    assert off["assumptions"]["driver_metrics_s_per_slot"] == rate["token-mean"]
    assert seq["assumptions"]["driver_metrics_s_per_slot"] == rate["seq-mean-token-mean"]
    slots = 256 * 8 * 16384
    lp = {k: t["phases_detail"]["old log-prob"] for k, t in (("default", default), ("off", off), ("seq", seq))}
    assert abs(lp["default"] - lp["off"] - slots * st.DEBUG_METRICS_SLOT_S) <= 0.1 + 1e-9  # rounded to 0.1 s
    assert abs(lp["off"] - lp["seq"] - slots * (rate["token-mean"] - rate["seq-mean-token-mean"])) <= 0.1 + 1e-9
    assert default["phases_detail"]["update actor"] == off["phases_detail"]["update actor"]


def test_the_benchmark_runs_verls_own_functions_on_the_padded_layout():
    """benchmarks/driver_metrics.py times verl's calculate_debug_metrics and agg_loss on the batch layout the
    trainer hands them; here a tiny one, for the calls, the mask and every mode (the seconds belong to the
    benchmark, not to a test)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import driver_metrics
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    seconds, valid = driver_metrics.measure(64, 512, 100.0, repeats=1)
    assert seconds > 0 and 0.05 < valid < 0.5  # exponential lengths of mean 100 in 512 slots: about a fifth valid
    agg = driver_metrics.measure_agg(64, 512, 100.0, repeats=1)
    assert set(agg) == set(st.ENTROPY_AGG_SLOT_S) and all(v > 0 for v in agg.values())


def test_calibration_reports_take_the_driver_metrics_from_their_launch_script_or_their_verl():
    """T17/T19/T21's copied verl launch scripts set calculate_log_probs (fully async recipe), the 0.4/0.5 tables
    predate its default, T27 (2026-07-30) runs after verl PR #6616 made it the default. The entropy metric is in the
    timer from verl 0.4 on: not in T26's 0.2 log. A report's loss_agg_mode is its launch's, else token-mean."""
    from steptime_cases import cases, rollout_logprobs, workload

    every = cases()
    by_id = {c["id"]: c for c in every}
    assert all(rollout_logprobs(by_id[i]) for i in ("T17", "T19", "T21", "T27"))
    assert not any(rollout_logprobs(by_id[i]) for i in ("T01", "T08", "T13", "T23"))
    planted = dict(by_id["T19"], config_source="doc bullet list", date="2025-10-17")
    assert not rollout_logprobs(planted)  # without the script, verl 0.6's default (False)
    stated = dict(by_id["T01"],
                  overrides=[*by_id["T01"]["overrides"], "actor_rollout_ref.rollout.calculate_log_probs=True"])
    assert rollout_logprobs(stated)
    assert workload(by_id["T01"], every).driver_entropy and not workload(by_id["T26"], every).driver_entropy
    assert workload(by_id["T01"], every).loss_agg_mode == "token-mean"  # DAPO's script says so
    seq = dict(by_id["T01"], overrides=[o.replace("loss_agg_mode=token-mean", "loss_agg_mode=seq-mean-token-mean")
                                        for o in by_id["T01"]["overrides"]])
    assert workload(seq, every).loss_agg_mode == "seq-mean-token-mean"


@pytest.mark.slow  # starts a Ray instance
def test_verls_task_runner_runs_torch_on_one_thread_under_real_ray():
    """The benchmark times one torch thread because verl's TaskRunnerV1 (a bare `@ray.remote` class, as in verl
    0.9.1 trainer/main_ppo.py) gets OMP_NUM_THREADS=1 from Ray. A real local Ray, in its own process, with an actor
    declared the same way; the environment is cleared of OMP_NUM_THREADS so the value is Ray's."""
    import os
    import subprocess

    code = ("import ray\nray.init(num_cpus=2, include_dashboard=False, logging_level='ERROR')\n"
            "@ray.remote\nclass Runner:\n    def threads(self):\n        import os, torch\n"
            "        return os.environ.get('OMP_NUM_THREADS'), torch.get_num_threads()\n"
            "print(ray.get(Runner.remote().threads.remote()))\nray.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=env,
                         check=True)
    assert out.stdout.strip().splitlines()[-1] == "('1', 1)"
    source = _verl_file("trainer", "main_ppo.py").read_text(encoding="utf-8")
    assert "@ray.remote\nclass TaskRunnerV1" in source
