"""VI661-VI663: the optimizer a trained role really builds and the LR schedule it follows across restarts (real cases
verl#7953, verl PR#3656, verl PR#7120). The oracles are verl 0.9.1's own code, run on the CPU:
- VI661: the AST of verl's MegatronCheckpointManager (every lr_scheduler.load_state_dict sits under
  `if self.use_checkpoint_opt_param_scheduler`, the save does not) and verl's optim/megatron.yaml default;
- VI662: verl's build_optimizer on a one-element parameter, raising where the rule errs and building where it is silent;
- VI663: verl's adamw_rms_match_scale_factor (Megatron-Core stubbed as scripts/verl_optim.py does) and
  McoreOptimizerConfig's default muon_extra_scale_factor.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.optim_sched import DOCUMENTED_IMPLS, adamw_match_scale

A = "actor_rollout_ref.actor"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "data.train_batch_size=16", f"{A}.ppo_mini_batch_size=8", "actor_rollout_ref.rollout.n=4",
        f"{A}.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=2",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1", "actor_rollout_ref.rollout.name=vllm", f"{A}.optim.lr=1e-6"]
MEGATRON = "ppo_megatron_trainer"


def _hits(rule: str, *extra: str, config: str | None = None):
    report = check(None, [*BASE, *extra], config_name=config)
    return [f for f in report.findings if f.problem.rule == rule]


def _verl_file(rel: str) -> Path:
    import verl

    return Path(verl.__file__).parent / rel


# --- VI661: Megatron LR schedule restarted on resume (verl#7953) --------------------------------------------------

def _tracker(tmp_path: Path) -> str:
    (tmp_path / "global_step_20" / "actor").mkdir(parents=True)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("20\n")
    return str(tmp_path)


def test_megatron_resume_with_warmup_warns(tmp_path):
    hits = _hits("VI661", f"{A}.optim.lr_warmup_steps=10", "trainer.resume_mode=auto", "trainer.save_freq=20",
                 f"trainer.default_local_dir={_tracker(tmp_path)}", config=MEGATRON)
    assert [h.problem.severity for h in hits] == ["warning"]
    assert "10-step warmup replays" in hits[0].problem.message
    assert hits[0].fix is not None and hits[0].fix.set == {f"{A}.optim.use_checkpoint_opt_param_scheduler": True}


def test_megatron_resume_path_with_cosine_decay_warns(tmp_path):
    hits = _hits("VI661", f"{A}.optim.lr_decay_style=cosine", "trainer.resume_mode=resume_path",
                 f"trainer.resume_from_path={tmp_path}/global_step_40", config=MEGATRON)
    assert [h.problem.severity for h in hits] == ["warning"] and "cosine decay restarts" in hits[0].problem.message


def test_latent_resume_is_info_and_controls_stay_silent(tmp_path):
    latent = _hits("VI661", f"{A}.optim.lr_warmup_steps=10", "trainer.save_freq=20",
                   f"trainer.default_local_dir={tmp_path}/none", config=MEGATRON)
    assert [h.problem.severity for h in latent] == ["info"]
    resumed = [f"trainer.default_local_dir={_tracker(tmp_path)}", "trainer.save_freq=20"]
    assert not _hits("VI661", f"{A}.optim.lr_warmup_steps=10", f"{A}.optim.use_checkpoint_opt_param_scheduler=True",
                     *resumed, config=MEGATRON)
    assert not _hits("VI661", *resumed, config=MEGATRON)  # constant LR, no warmup: nothing to replay
    assert not _hits("VI661", f"{A}.optim.lr_warmup_steps=10", "trainer.resume_mode=disable", "trainer.save_freq=20",
                     config=MEGATRON)
    assert not _hits("VI661", f"{A}.optim.lr_warmup_steps=10", *resumed)  # FSDP restores its scheduler


@pytest.mark.verl
def test_verl_saves_the_megatron_scheduler_but_loads_it_only_behind_the_flag():
    from omegaconf import OmegaConf

    tree = ast.parse(_verl_file("utils/checkpoint/megatron_checkpoint_manager.py").read_text("utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def guarded(node: ast.AST) -> bool:
        while node in parents:
            node = parents[node]
            if isinstance(node, ast.If) and "use_checkpoint_opt_param_scheduler" in ast.unparse(node.test):
                return True
        return False

    loads = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith(
        "lr_scheduler.load_state_dict")]
    saves = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)
             and any(ast.unparse(t) == "state_dict['lr_scheduler']" for t in n.targets)]
    assert loads and all(guarded(n) for n in loads)
    assert saves and not any(guarded(n) for n in saves)
    default = OmegaConf.load(_verl_file("trainer/config/optim/megatron.yaml"))
    assert default.use_checkpoint_opt_param_scheduler is False


# --- VI662: FSDP optimizer verl cannot build (verl PR#3656) ------------------------------------------------------

def _verl_builds(**fields) -> Exception | None:
    import torch
    from verl.workers.config.optimizer import FSDPOptimizerConfig, build_optimizer

    try:
        build_optimizer([torch.nn.Parameter(torch.zeros(2))], FSDPOptimizerConfig(lr=1e-6, **fields))
    except (AttributeError, ImportError, TypeError) as e:
        return e
    return None


@pytest.mark.verl
@pytest.mark.parametrize("overrides, fields, error", [
    ([f"{A}.optim.optimizer=AdamW8bit"], {"optimizer": "AdamW8bit"}, AttributeError),
    ([f"+{A}.optim.override_optimizer_config.adam_beta1=0.9"], {"override_optimizer_config": {"adam_beta1": 0.9}},
     TypeError),
])
def test_optimizer_verl_cannot_build_is_an_error(overrides, fields, error):
    assert isinstance(_verl_builds(**fields), error)
    hits = _hits("VI662", *overrides)
    assert [h.problem.severity for h in hits] == ["error"]


@pytest.mark.verl
@pytest.mark.parametrize("overrides, fields", [
    ([f"{A}.optim.optimizer=SGD"], {"optimizer": "SGD"}),
    ([f"+{A}.optim.override_optimizer_config.foreach=False"], {"override_optimizer_config": {"foreach": False}}),
    ([], {}),
])
def test_optimizer_verl_builds_is_silent(overrides, fields):
    assert _verl_builds(**fields) is None
    assert not _hits("VI662", *overrides)


def test_own_optimizer_module_is_not_imported():
    assert not _hits("VI662", f"{A}.optim.optimizer_impl=my_pkg.optim", f"{A}.optim.optimizer=Lion")


@pytest.mark.verl
def test_documented_modules_are_verls():
    from verl.workers.config.optimizer import build_optimizer

    assert set(DOCUMENTED_IMPLS) == set(re.findall(r'optimizer_impl = "([\w.]+)"', build_optimizer.__doc__))


# --- VI663: Muon at an AdamW learning rate (verl PR#7120) --------------------------------------------------------

@pytest.fixture
def stubbed_megatron():
    import sys

    from helpers_scripts import load_script

    before = set(sys.modules)
    load_script("verl_optim")._stub_megatron()
    yield
    for name in set(sys.modules) - before:
        if name.split(".")[0] == "megatron" or name.startswith("verl.utils.megatron"):
            del sys.modules[name]


@pytest.mark.verl
def test_match_factor_is_verls(stubbed_megatron):
    from verl.utils.megatron.optimizer import adamw_rms_match_scale_factor
    from verl.workers.config.optimizer import McoreOptimizerConfig

    for beta1 in (0.0, 0.8, 0.9, 0.95):
        assert adamw_match_scale(beta1) == pytest.approx(adamw_rms_match_scale_factor(beta1))
    assert McoreOptimizerConfig(lr=1e-6).muon_extra_scale_factor == 1.0
    assert "not* AdamW-comparable" in McoreOptimizerConfig.__doc__


def test_muon_at_default_scale_warns_and_matched_stays_silent():
    hits = _hits("VI663", f"{A}.optim.optimizer=muon", config=MEGATRON)
    assert [h.problem.severity for h in hits] == ["warning"] and "4.4x" in hits[0].problem.message
    assert hits[0].fix is not None and hits[0].fix.set == {f"{A}.optim.muon_match_adamw_update_rms": True}
    assert not _hits("VI663", f"{A}.optim.optimizer=muon", f"{A}.optim.muon_match_adamw_update_rms=True", config=MEGATRON)
    assert not _hits("VI663", f"{A}.optim.optimizer=muon", f"{A}.optim.muon_extra_scale_factor=0.23", config=MEGATRON)
    assert not _hits("VI663", config=MEGATRON)  # adam


# --- the SFT trainer's model: same engines, same checkpoint manager ----------------------------------------------

def _sft(tmp_path: Path, *args: str):
    script = tmp_path / "sft.sh"
    script.write_text("#!/bin/bash\ntorchrun --nproc_per_node=8 -m verl.trainer.sft_trainer \\\n  " + " \\\n  ".join(
        ["data.train_files=/data/train.parquet", "model.path=Qwen/Qwen2.5-0.5B-Instruct", "optim.lr=1e-5", *args])
        + "\n")
    report = check(str(script), env={"HOME": "/root"})
    return {f.problem.rule: f.problem.severity for f in report.findings if f.problem.rule.startswith("VI66")}


def test_sft_model_gets_the_same_rules(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    assert _sft(tmp_path, "engine=fsdp", "optim.optimizer=AdamW8bit") == {"VI662": "error"}
    assert _sft(tmp_path, "engine=fsdp") == {}
    assert _sft(tmp_path, "engine=megatron", "optim=megatron", "optim.optimizer=muon") == {"VI663": "warning"}
    assert _sft(tmp_path, "engine=megatron", "optim=megatron", "optim.lr_warmup_steps=10",
                "trainer.resume_mode=resume_path", f"trainer.resume_from_path={ckpt}/global_step_20") == {
        "VI661": "warning"}
