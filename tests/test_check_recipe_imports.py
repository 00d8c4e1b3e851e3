"""VI627: a recipe whose own code imports verl modules or names the installed verl does not have (real case
verl-recipe#86: the recipes are pinned to the verl they were written for; PRIME, SPIN and SPPO, pinned to a pre-0.8
verl, import verl.workers.fsdp_workers and verl.trainer.ppo.reward.compute_reward, which verl 0.9.1 removed).

The oracle is Python importing the installed verl: each planted statement raises ImportError (ModuleNotFoundError)
when run, and each control statement imports. check itself only looks the modules up and parses them (ast).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from wizard.check.lint import check

pytestmark = pytest.mark.verl  # the recipe's YAML is composed over the installed verl's tree; verl's files are the table

PPO = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "algorithm.adv_estimator=grpo",
       "actor_rollout_ref.rollout.n=4", "trainer.nnodes=1", "trainer.n_gpus_per_node=4", "data.train_batch_size=64",
       "actor_rollout_ref.actor.ppo_mini_batch_size=16"]
LAUNCH = "python3 -m recipe.selfplay.main_selfplay"
YAML = "hydra:\n  searchpath:\n    - pkg://verl.trainer.config\ndefaults:\n  - ppo_trainer\n  - _self_\n"

# what the launch runs at import time: a name verl 0.9.1's trainer/ppo/reward.py no longer defines (sppo_ray_trainer.py:43)
GONE_AT_LAUNCH = "from verl.trainer.ppo.reward import compute_reward, compute_reward_async"
# what runs once the TaskRunner builds its workers: a module verl 0.9.1 removed (prime/main_prime.py:77)
GONE_IN_FUNCTION = "from verl.workers.fsdp_workers import ActorRolloutRefWorker"
# what verl 0.9.1 still has (the same recipes' other imports)
THERE = ["from verl.trainer.ppo.reward import load_reward_manager", "from verl.utils.config import validate_config",
         "from verl.trainer.ppo.utils import need_reference_policy", "import verl.utils.fs",
         "from verl.single_controller.base.decorator import register"]

MAIN = '''import hydra

{top}
from .selfplay_trainer import SelfPlayTrainer

raise SystemExit("a recipe's module is read, never imported")


@hydra.main(config_path="config", config_name="selfplay_trainer", version_base=None)
def main(config):
    {inner}
    try:
        from verl.workers.megatron_workers import ActorRolloutRefWorker as Megatron  # guarded: never said
    except ImportError:
        Megatron = None
'''
TRAINER = "{top}\n\n\nclass SelfPlayTrainer:\n    pass\n"


def _recipe(root: Path, main_top: list[str], trainer_top: list[str], inner: str) -> Path:
    folder = root / "recipe" / "selfplay"
    (folder / "config").mkdir(parents=True)
    (root / "recipe" / "__init__.py").write_text("", encoding="utf-8")
    (folder / "__init__.py").write_text("", encoding="utf-8")
    (folder / "main_selfplay.py").write_text(MAIN.format(top="\n".join(main_top), inner=inner), encoding="utf-8")
    (folder / "selfplay_trainer.py").write_text(TRAINER.format(top="\n".join(trainer_top)), encoding="utf-8")
    (folder / "config" / "selfplay_trainer.yaml").write_text(YAML, encoding="utf-8")
    script = folder / "run.sh"
    script.write_text("#!/bin/bash\nset -x\n" + LAUNCH + " \\\n" + " \\\n".join(f"    {o}" for o in PPO) + "\n",
                      encoding="utf-8")
    return script


def _hits(script: Path, home: Path) -> list:
    report = check(str(script), env={"HOME": str(home)}, workdir=str(script.parents[2]))
    assert report.source.recipe == "recipe.selfplay.main_selfplay", report.source
    return [f.problem for f in report.findings if f.problem.rule == "VI627"]


def _imports(statement: str) -> bool:
    """The oracle: whether the installed verl runs the statement (a fresh interpreter, nothing of check's loaded)."""
    run = subprocess.run([sys.executable, "-c", statement], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 or "ImportError" in run.stderr or "ModuleNotFoundError" in run.stderr, run.stderr
    return run.returncode == 0


def test_a_removed_import_is_named_error_at_launch_warning_in_a_function(tmp_path):
    script = _recipe(tmp_path, THERE[:2], [THERE[2], GONE_AT_LAUNCH], GONE_IN_FUNCTION)
    hits = {p.severity: p for p in _hits(script, tmp_path)}
    assert set(hits) == {"error", "warning"}, hits
    error, warning = hits["error"], hits["warning"]
    assert error.keys == ("recipe.selfplay.main_selfplay",)
    assert "compute_reward from verl.trainer.ppo.reward (selfplay_trainer.py:2)" in error.message
    assert "compute_reward_async" in error.message and "verl-recipe#86" in error.message
    assert "module verl.workers.fsdp_workers (main_selfplay.py:" in warning.message
    assert "megatron_workers" not in error.message + warning.message  # under try/except ImportError
    assert "REQUIRED_VERL.txt" in error.hint


def test_a_module_the_launch_does_not_import_at_start_is_a_warning(tmp_path):
    script = _recipe(tmp_path, THERE[:1], THERE[1:], "pass")
    (script.parent / "helper.py").write_text(GONE_AT_LAUNCH + "\n", encoding="utf-8")  # imported by nothing at launch
    [hit] = _hits(script, tmp_path)
    assert hit.severity == "warning" and "(helper.py:1)" in hit.message


def test_what_verl_has_stays_clean(tmp_path):
    script = _recipe(tmp_path, THERE[:2], THERE[2:], "from verl.utils.fs import copy_to_local")
    (script.parent / "broken.py").write_text("def f(:\n", encoding="utf-8")  # a file that does not parse: passed over
    assert not _hits(script, tmp_path)


@pytest.mark.slow
def test_python_agrees_on_every_statement():
    """The oracle: what check calls missing fails to import in verl itself; what it leaves alone imports."""
    assert not _imports(GONE_AT_LAUNCH)
    assert not _imports(GONE_IN_FUNCTION)
    for statement in THERE:
        assert _imports(statement), statement
