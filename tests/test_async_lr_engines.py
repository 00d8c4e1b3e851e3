"""VI410: the fully async trainer's optimizer on Megatron or VeOmni without optim.total_training_steps (real cases
R91-01 verl#6987, R91-02 verl#6683).

The oracle is verl 0.9.1's own code on the CPU: its get_megatron_optimizer_param_scheduler is called with verl's
own megatron.yaml optimizer defaults (Megatron-core, not installed here, is replaced by a recorder that keeps
OptimizerParamScheduler's `assert lr_decay_steps > 0`); VeOmniEngine._build_lr_scheduler and the order
FullyAsyncTaskRunner builds the trainer's workers in are read from verl's source with ast.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from pathlib import Path

import pytest
from helpers_verl import class_method
from test_check_fully_async import BASE as FA_BASE
from test_check_fully_async import BUDGET as FA_BUDGET
from test_check_fully_async import FA

from wizard.check.lint import check
from wizard.check.rules.async_lr_engines import ENGINES

MEGATRON_YAML = " --config-path=config --config-name=fully_async_ppo_megatron_trainer"
# test_check_fully_async's fully async launch, with its rollout budget
BASE = [*FA_BASE, *FA_BUDGET, "hydra.searchpath=[pkg://verl.trainer.config]"]


def _verl(rel: str) -> Path:
    return Path(importlib.util.find_spec("verl").submodule_search_locations[0]) / rel


def _run(tmp_path: Path, overrides: list[str], launch: str = FA + MEGATRON_YAML):
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\nset -x\n" + launch + " \\\n" + " \\\n".join(f"    '{o}'" for o in overrides) + "\n",
                    encoding="utf-8")
    return check(str(path), env={"HOME": str(tmp_path)})


def _found(report, rule: str = "VI410"):
    return [f for f in report.findings if f.problem.rule == rule]


class _Scheduler:
    """Megatron-core's OptimizerParamScheduler, reduced to what its constructor checks first."""

    def __init__(self, optimizer, **kw):
        self.kw = kw
        assert kw["lr_decay_steps"] > 0  # megatron/core/optimizer_param_scheduler.py: assert self.lr_decay_steps > 0


def _megatron_scheduler(monkeypatch, **optim):
    """verl's own get_megatron_optimizer_param_scheduler on verl's own optim/megatron.yaml, with `optim` set."""
    from omegaconf import OmegaConf

    stubs = {"megatron": types.ModuleType("megatron"), "megatron.core": types.ModuleType("megatron.core"),
             "megatron.core.optimizer": types.ModuleType("megatron.core.optimizer"),
             "megatron.core.optimizer_param_scheduler": types.ModuleType("megatron.core.optimizer_param_scheduler")}
    stubs["megatron.core.optimizer"].OptimizerConfig = object
    stubs["megatron.core.optimizer"].get_megatron_optimizer = lambda **_: None
    stubs["megatron.core.optimizer_param_scheduler"].OptimizerParamScheduler = _Scheduler
    for name, mod in stubs.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delitem(sys.modules, "verl.utils.megatron.optimizer", raising=False)
    module = importlib.import_module("verl.utils.megatron.optimizer")
    cfg = OmegaConf.load(_verl("trainer/config/optim/megatron.yaml"))
    cfg.lr = 1e-6
    for k, v in optim.items():
        cfg[k] = v
    return module.get_megatron_optimizer_param_scheduler(None, cfg)


@pytest.mark.verl
def test_verl_megatron_scheduler_asserts_on_the_workers_minus_one(monkeypatch):
    # the workers' copy: the yaml's total_training_steps=-1 and lr_decay_steps=null, any decay style
    for style in ("constant", "cosine"):
        with pytest.raises(AssertionError):
            _megatron_scheduler(monkeypatch, lr_decay_style=style)
    # the fixes VI410 names: an explicit total, or an explicit lr_decay_steps (verl's own scripts)
    assert _megatron_scheduler(monkeypatch, total_training_steps=400).kw["lr_decay_steps"] == 400
    assert _megatron_scheduler(monkeypatch, lr_decay_steps=51200).kw["lr_decay_steps"] == 51200


@pytest.mark.verl
def test_verl_builds_the_trainer_optimizer_before_the_total_and_veomni_reads_it():
    runner = ast.parse(_verl("experimental/fully_async_policy/fully_async_main.py").read_text(encoding="utf-8"))
    init = class_method(runner, "FullyAsyncTaskRunner", "_initialize_components")
    lines = {a: [n.lineno for n in ast.walk(init) if isinstance(n, ast.Attribute) and n.attr == a]
             for a in ("_create_trainer", "set_total_train_steps")}
    assert max(lines["_create_trainer"]) < min(lines["set_total_train_steps"])
    veomni = ast.parse(_verl("workers/engine/veomni/transformer_impl.py").read_text(encoding="utf-8"))
    build = class_method(veomni, "VeOmniEngine", "_build_lr_scheduler")
    kws = {k.arg: ast.unparse(k.value) for n in ast.walk(build) if isinstance(n, ast.Call) for k in n.keywords}
    assert kws["train_steps"] == "optim_config.total_training_steps"
    assert set(ENGINES) == {"megatron", "veomni"}


@pytest.mark.verl
def test_vi410_megatron_default_schedule_is_an_error(tmp_path):
    report = _run(tmp_path, BASE)  # constant schedule, no lr_decay_steps, no total: verl#6987
    found = _found(report)
    assert [f.problem.severity for f in found] == ["error"], [f.problem.message for f in report.findings]
    assert "actor_rollout_ref.actor.optim.total_training_steps=400" in found[0].problem.hint  # 12800 // 32
    assert not _found(report, "VI618")  # one finding for one cause


@pytest.mark.verl
@pytest.mark.parametrize("extra", [
    ["actor_rollout_ref.actor.optim.lr_decay_steps=51200"],  # what verl's Megatron fully async scripts set
    ["actor_rollout_ref.actor.optim.total_training_steps=400"],
])
def test_vi410_megatron_controls(tmp_path, extra):
    report = _run(tmp_path, [*BASE, *extra])
    assert not _found(report), [f.problem.message for f in _found(report)]


@pytest.mark.verl
def test_vi410_veomni_is_a_warning_and_fsdp_is_vi618s(tmp_path):
    fsdp = [o for o in BASE if not o.startswith("hydra.")]
    report = _run(tmp_path, [*fsdp, "actor_rollout_ref.actor.strategy=veomni"], launch=FA)
    assert [f.problem.severity for f in _found(report)] == ["warning"]
    report = _run(tmp_path, [*fsdp, "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine"], launch=FA)
    assert not _found(report) and _found(report, "VI618")


@pytest.mark.verl
def test_vi410_only_under_fully_async(tmp_path):
    ppo = [o for o in BASE if not o.startswith(("rollout.", "async_training.", "data.train_batch_size",
                                                "data.gen_batch_size", "actor_rollout_ref.hybrid_engine", "hydra."))]
    report = _run(tmp_path, [*ppo, "data.train_batch_size=64"],
                  launch="python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer")
    assert not _found(report)  # RayPPOTrainer sets the total before init_workers (ray_trainer.py:435-451)
