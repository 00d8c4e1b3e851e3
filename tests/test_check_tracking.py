"""VI987: a launch that resumes checkpoints on relaunch (trainer.resume_mode=auto named in it, or resume_path) with the
wandb logger and no WANDB_RUN_ID / WANDB_RESUME: each relaunch opens a new W&B run (real case verl#2783).

The oracle is verl's own tracking code, read with ast: wandb is not installed in this test environment (and is not
installed for the test), so verl's Tracking cannot open a W&B run here, even offline. The read shows that verl 0.9.1's
Tracking.__init__ (utils/tracking.py:76-86) calls `wandb.init` for the `wandb` and the `tracking` backends with
project, name, entity, config and settings only, no `id` and no `resume`, and that no code of verl sets
WANDB_RUN_ID or WANDB_RESUME: the run wandb continues is then only what the launch's environment names (wandb.init
reads both variables when its arguments leave them out); without them every init makes a new run. It also shows
that the trainers' resume restores the checkpoint's step (trainer_base.py:850-877), so the new run starts at N.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from wizard.check.lint import check

PPO = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
       "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "actor_rollout_ref.rollout.n=4",
       "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", "trainer.nnodes=1",
       "trainer.n_gpus_per_node=4", "trainer.project_name=verl_grpo", "trainer.experiment_name=qwen7b_flaky_nodes",
       "trainer.default_local_dir=/mnt/shared/ckpt/qwen7b_flaky_nodes"]
WANDB = "trainer.logger=[console,wandb]"
AUTO = "trainer.resume_mode=auto"
MAIN_PPO = "python3 -m verl.trainer.main_ppo"
SFT = "torchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer"
SFT_ARGS = ["data.train_files=/data/sft/train.parquet", "data.messages_key=messages", "data.micro_batch_size_per_gpu=2",
            "model.path=Qwen/Qwen2.5-0.5B-Instruct", "trainer.n_gpus_per_node=8"]


def _verl() -> Path:
    return Path(importlib.util.find_spec("verl").origin).parent


def _script(tmp_path: Path, launch: str, overrides: list[str], head: str = "") -> Path:
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\nset -x\n" + head + launch + " \\\n" + " \\\n".join(f"    '{o}'" for o in overrides)
                    + "\n", encoding="utf-8")
    return path


def _vi987(tmp_path: Path, overrides: list[str], head: str = "", launch: str = MAIN_PPO, env: dict | None = None):
    report = check(str(_script(tmp_path, launch, overrides, head)), env={"HOME": str(tmp_path), **(env or {})})
    return [f for f in report.findings if f.problem.rule == "VI987"]


@pytest.fixture(params=["bash", "static"])
def reader(request, monkeypatch):
    if request.param == "static":
        monkeypatch.setenv("VERL_INIT_NO_SANDBOX", "1")
    return request.param


@pytest.mark.verl
def test_verls_tracking_opens_wandb_without_id_or_resume():
    tree = ast.parse((_verl() / "utils/tracking.py").read_text(encoding="utf-8"))
    tracking = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tracking")
    init = next(n for n in tracking.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    branches = [n for n in ast.walk(init) if isinstance(n, ast.If) and
                any(isinstance(c, ast.Call) and ast.unparse(c.func) == "wandb.init" for c in ast.walk(n))]
    [branch] = [b for b in branches if not any(b is not o and b in ast.walk(o) for o in branches)]
    assert ast.unparse(branch.test) == "'tracking' in default_backend or 'wandb' in default_backend"
    [call] = [c for c in ast.walk(branch) if isinstance(c, ast.Call) and ast.unparse(c.func) == "wandb.init"]
    assert {k.arg for k in call.keywords} == {"project", "name", "entity", "config", "settings"}
    assert not call.args and not {"id", "resume", "resume_from", "fork_from"} & {k.arg for k in call.keywords}
    assert ast.unparse(next(k.value for k in call.keywords if k.arg == "name")) == "experiment_name"
    # and nothing in verl names the run to continue through the environment either
    code = [p for p in _verl().rglob("*.py") if "tests" not in p.relative_to(_verl()).parts]
    assert not [p for p in code if "WANDB_RUN_ID" in (t := p.read_text(encoding="utf-8")) or "WANDB_RESUME" in t]


@pytest.mark.verl
def test_verls_resume_restores_the_checkpoints_step():
    tree = ast.parse((_verl() / "trainer/ppo/v1/trainer_base.py").read_text(encoding="utf-8"))
    load = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_load_checkpoint")
    sets = [ast.unparse(n) for n in ast.walk(load) if isinstance(n, ast.Assign)
            and ast.unparse(n.targets[0]) == "self.global_steps"]
    assert "self.global_steps = int(global_step_folder.split('global_step_')[-1])" in sets


@pytest.mark.verl
def test_check_tells_of_the_real_case(tmp_path, reader):
    """R15-05, verl#2783: console+wandb, resume_mode=auto, relaunched after each crash."""
    [hit] = _vi987(tmp_path, [*PPO, WANDB, AUTO, "trainer.save_freq=10"])
    assert hit.problem.severity == "info" and hit.fix is None
    assert "name='qwen7b_flaky_nodes'" in hit.problem.message and "utils/tracking.py:85" in hit.problem.message
    assert "WANDB_RUN_ID" in hit.problem.hint and "WANDB_RESUME=allow" in hit.problem.hint


@pytest.mark.verl
@pytest.mark.parametrize("overrides", [
    ["trainer.logger=[console,tracking]", AUTO],  # the deprecated backend reaches wandb.init too
    [WANDB, "trainer.resume_mode=resume_path", "trainer.resume_from_path=/mnt/shared/ckpt/x/global_step_20"],
])
def test_check_tells_of_other_resuming_wandb_launches(overrides, tmp_path):
    assert _vi987(tmp_path, [*PPO, *overrides])


@pytest.mark.verl
def test_check_tells_of_an_sft_launch_too(tmp_path):
    assert _vi987(tmp_path, [*SFT_ARGS, WANDB, AUTO], launch=SFT)


@pytest.mark.verl
@pytest.mark.parametrize("head", ["export WANDB_RUN_ID=qwen7b-flaky-1\nexport WANDB_RESUME=allow\n",
                                  "WANDB_RESUME=must WANDB_RUN_ID=qwen7b-flaky-1 \\\n"])
def test_check_is_silent_when_the_script_names_the_run(head, tmp_path, reader):
    assert not _vi987(tmp_path, [*PPO, WANDB, AUTO], head=head)


@pytest.mark.verl
@pytest.mark.parametrize("case", ["--env", "runtime env", "default resume", "disable", "no wandb"])
def test_check_is_silent_where_no_second_run_opens_or_the_run_is_named(case, tmp_path):
    overrides, env = [*PPO, WANDB, AUTO], None
    if case == "--env":
        env = {"WANDB_RUN_ID": "qwen7b-flaky-1"}
    elif case == "runtime env":
        overrides.append("+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_RUN_ID=qwen7b-flaky-1")
    elif case == "default resume":  # verl's default auto, not named: no relaunch planned (and every launch has it)
        overrides.remove(AUTO)
    elif case == "disable":
        overrides[-1] = "trainer.resume_mode=disable"
    else:
        overrides[-2] = "trainer.logger=[console,tensorboard]"
    assert not _vi987(tmp_path, overrides, env=env)
