"""VI618, VI619 and VI995 on the fully async entry point (real cases R50-01 verl#6684, R50-03 verl#6461, R50-04
verl-ascend-recipe's rollout_elastic quickstart).

The oracle is verl 0.9.1's own code, on the CPU: its FSDPEngine._build_lr_scheduler builds the schedule the fully
async workers get; the order FullyAsyncTaskRunner builds the trainer's workers in and calls set_total_train_steps,
the rollouter's total_train_steps expression and FullyAsyncTrainer's hybrid_engine assert are read from verl's
source with ast and evaluated; the defaults come from verl's own yaml files. (fully_async_trainer.py itself cannot
be imported without uvicorn, which the rollout server needs.)
"""

from __future__ import annotations

import ast
import importlib.util
import types
from pathlib import Path

import pytest
from helpers_verl import class_method

from wizard.check.lint import check
from wizard.check.rules.async_budget import YAML_TOTAL

FA = "python3 -m verl.experimental.fully_async_policy.fully_async_main"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4", "trainer.logger=[console]",
        "data.max_prompt_length=512", "data.max_response_length=512", "data.train_batch_size=0",
        "data.gen_batch_size=1", "actor_rollout_ref.hybrid_engine=False", "trainer.nnodes=1",
        "trainer.n_gpus_per_node=4", "rollout.nnodes=1", "rollout.n_gpus_per_node=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=32", "async_training.require_batches=1",
        "async_training.trigger_parameter_sync_step=4"]
BUDGET = ["rollout.total_rollout_steps=12800"]  # 100 weight-sync cycles of 32 × 1 × 4 prompts


def _verl(rel: str) -> Path:
    return Path(importlib.util.find_spec("verl").submodule_search_locations[0]) / rel


def _run(tmp_path: Path, overrides: list[str], launch: str = FA):
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\nset -x\n" + launch + " \\\n" + " \\\n".join(f"    '{o}'" for o in overrides) + "\n",
                    encoding="utf-8")
    return check(str(path), env={"HOME": str(tmp_path)})


def _ids(report) -> set[str]:
    return {f.problem.rule for f in report.findings}


def _tree(rel: str) -> ast.Module:
    return ast.parse(_verl(rel).read_text(encoding="utf-8"))


def _calls(fn: ast.AST, attr: str) -> list[int]:
    """Lines that reach `attr` (a call, or a Ray actor's `x.attr.remote(...)`)."""
    return [n.lineno for n in ast.walk(fn) if isinstance(n, ast.Attribute) and n.attr == attr]


# --- VI618 -----------------------------------------------------------------------------------------------------

def _lrs(**optim) -> list[float]:
    """The LR ratio of the first steps under verl's own FSDP engine scheduler."""
    torch = pytest.importorskip("torch")
    from verl.workers.config.optimizer import FSDPOptimizerConfig
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    cfg = FSDPOptimizerConfig(lr=1.0, **optim)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = FSDPEngine._build_lr_scheduler(types.SimpleNamespace(optimizer_config=cfg, rank=1), opt)
    out = []
    for _ in range(6):
        out.append(round(opt.param_groups[0]["lr"], 3))
        opt.step()
        sched.step()
    return out


@pytest.mark.verl
def test_verl_builds_the_fully_async_scheduler_before_it_knows_the_total():
    runner = _tree("experimental/fully_async_policy/fully_async_main.py")
    init = class_method(runner, "FullyAsyncTaskRunner", "_initialize_components")
    assert max(_calls(init, "_create_trainer")) < min(_calls(init, "set_total_train_steps"))
    assert _calls(class_method(runner, "FullyAsyncTaskRunner", "_create_trainer"), "init_workers")
    from omegaconf import OmegaConf
    actor = OmegaConf.load(_verl("trainer/config/actor/actor.yaml"))
    assert actor.optim.total_training_steps == -1
    # what the workers then build: cosine flips between lr and its floor, a warmup ratio gives no warmup
    assert _lrs(lr_scheduler_type="cosine", min_lr_ratio=0.1, total_training_steps=-1)[:4] == [1.0, 0.1, 1.0, 0.1]
    assert _lrs(lr_warmup_steps_ratio=0.5, total_training_steps=-1) == [1.0] * 6
    # with a real total (what VI618's fix sets) both behave
    assert _lrs(lr_warmup_steps_ratio=0.5, total_training_steps=10)[:3] == [0.0, 0.2, 0.4]
    assert _lrs(lr_scheduler_type="cosine", min_lr_ratio=0.1, total_training_steps=100)[1] == 1.0


@pytest.mark.verl
@pytest.mark.parametrize("optim, fires", [
    (["actor_rollout_ref.actor.optim.lr_scheduler_type=cosine"], True),
    (["actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.05"], True),
    # controls: verl's own fully async scripts (an absolute warmup, the constant schedule), or an explicit total
    (["actor_rollout_ref.actor.optim.lr_warmup_steps=10"], False),
    (["actor_rollout_ref.actor.optim.lr_scheduler_type=cosine", "actor_rollout_ref.actor.optim.lr_warmup_steps=10",
      "actor_rollout_ref.actor.optim.total_training_steps=400"], False),
])
def test_vi618(tmp_path, optim, fires):
    report = _run(tmp_path, [*BASE, *BUDGET, *optim])
    assert ("VI618" in _ids(report)) is fires, [f.problem.message for f in report.findings]
    if fires:
        hint = next(f.problem.hint for f in report.findings if f.problem.rule == "VI618")
        assert "actor_rollout_ref.actor.optim.total_training_steps=400" in hint  # 12800 // (32 × 1)


@pytest.mark.verl
def test_vi618_only_under_fully_async(tmp_path):
    ppo = [o for o in BASE if not o.startswith(("rollout.", "async_training.", "data.train_batch_size",
                                                "data.gen_batch_size", "actor_rollout_ref.hybrid_engine"))]
    report = _run(tmp_path, [*ppo, "data.train_batch_size=64", "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine"],
                  launch="python3 -m verl.trainer.main_ppo")
    assert "VI618" not in _ids(report)  # RayPPOTrainer sets the total before init_workers (ray_trainer.py:435-451)


# --- VI619 -----------------------------------------------------------------------------------------------------

def _total_train_steps(total: int, mini: int, req: int, trig: int) -> int:
    """verl's own expression (FullyAsyncRollouter.set_max_required_samples), evaluated as written."""
    fn = class_method(_tree("experimental/fully_async_policy/fully_async_rollouter.py"), "FullyAsyncRollouter",
                 "set_max_required_samples")
    expr = next(n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Attribute) and t.attr == "total_train_steps" for t in n.targets))
    cfg = types.SimpleNamespace(async_training=types.SimpleNamespace(trigger_parameter_sync_step=trig))
    me = types.SimpleNamespace(total_rollout_steps=total, required_samples=mini * req, config=cfg)
    return eval(compile(ast.Expression(expr), "verl", "eval"), {"int": int}, {"self": me})


@pytest.mark.verl
def test_verl_counts_the_budget_in_prompts():
    from omegaconf import OmegaConf
    yaml = OmegaConf.load(_verl("experimental/fully_async_policy/config/fully_async_ppo_trainer.yaml"))
    assert yaml.rollout.total_rollout_steps == YAML_TOTAL
    assert _total_train_steps(YAML_TOTAL, 32, 1, 4) == 0
    assert _total_train_steps(12800, 32, 1, 4) == 100


@pytest.mark.verl
@pytest.mark.parametrize("budget, fires", [
    ([], True),  # R50-03: the yaml's 100 prompts
    (["rollout.total_rollout_steps=64"], True),  # below one cycle of 128
    (BUDGET, False),
    (["rollout.total_rollout_steps=128"], False),  # exactly one cycle, set on purpose
])
def test_vi619(tmp_path, budget, fires):
    report = _run(tmp_path, [*BASE, *budget])
    assert ("VI619" in _ids(report)) is fires, [f.problem.message for f in report.findings]


# --- VI995 on fully async --------------------------------------------------------------------------------------

@pytest.mark.verl
def test_verl_fully_async_trainer_asserts_hybrid_engine_off():
    from omegaconf import OmegaConf
    init = class_method(_tree("experimental/fully_async_policy/fully_async_trainer.py"), "FullyAsyncTrainer", "__init__")
    check_ = next(n for n in init.body if isinstance(n, ast.Assert))
    default = OmegaConf.load(_verl("trainer/config/ppo_trainer.yaml")).actor_rollout_ref.hybrid_engine
    fa_yaml = OmegaConf.load(_verl("experimental/fully_async_policy/config/fully_async_ppo_trainer.yaml"))
    assert "hybrid_engine" not in fa_yaml.get("actor_rollout_ref", {})
    holds = lambda v: eval(compile(ast.Expression(check_.test), "verl", "eval"), {},  # noqa: E731
                           {"self": types.SimpleNamespace(hybrid_engine=v)})
    assert holds(default) is False and holds(False) is True
    main = next(n for n in _tree("experimental/fully_async_policy/fully_async_main.py").body
                if isinstance(n, ast.FunctionDef) and n.name == "main")
    copied = {ast.unparse(n.targets[0]) for n in ast.walk(main) if isinstance(n, ast.Assign)}
    assert {"config.actor_rollout_ref.rollout.nnodes", "config.actor_rollout_ref.rollout.n_gpus_per_node"} <= copied


@pytest.mark.verl
@pytest.mark.parametrize("overrides, fires", [
    ([o for o in BASE if o != "actor_rollout_ref.hybrid_engine=False"], True),  # R50-04: the default left on
    ([*BASE, "actor_rollout_ref.rollout.n_gpus_per_node=2"], True),  # copied over by main()
    (BASE, False),
    ([*BASE, "actor_rollout_ref.rollout.n_gpus_per_node=4"], False),  # both trees agree
])
def test_vi995_fully_async(tmp_path, overrides, fires):
    report = _run(tmp_path, [*overrides, *BUDGET])
    assert ("VI995" in _ids(report)) is fires, [f.problem.message for f in report.findings]
