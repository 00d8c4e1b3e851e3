"""Resume and export (issue 15, item 4): `resume` / `resume_from_path` / `checkpoint_dir` / `keep_checkpoints`
answers mapped to verl 0.9.1's trainer keys, where checkpoints live per cluster type (PLAN.md, VI556), the
ppo-resume profile accepted by verl's own checks, and export_hf.sh running verl's real model merger."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import wizard
from wizard.intent.errors import WizardError

BASE = dict(nnodes=1, gpus_per_node=8, gpu_memory_gb=80, model="Qwen/Qwen2.5-0.5B-Instruct", prompts_per_step=64,
            samples_per_prompt=4, updates_per_step=2)


def _plan(tmp_path, **answers):
    return wizard.plan(wizard.make_answers(dict(BASE, **answers)), base_dir=str(tmp_path))


def _trainer(p) -> dict:
    return p.nested()["trainer"]


# --- answers → verl keys ------------------------------------------------------------------------------------------

def test_resume_answers_map_to_verls_trainer_keys(tmp_path):
    t = _trainer(_plan(tmp_path))
    assert t["resume_mode"] == "auto" and "resume_from_path" not in t and "default_local_dir" not in t
    t = _trainer(_plan(tmp_path, resume_from_path="checkpoints/p/e/global_step_40"))
    assert t["resume_mode"] == "resume_path" and t["resume_from_path"] == "checkpoints/p/e/global_step_40"
    assert _trainer(_plan(tmp_path, resume="disable"))["resume_mode"] == "disable"
    t = _trainer(_plan(tmp_path, algorithm="ppo", samples_per_prompt=1, keep_checkpoints=2, checkpoint_dir="~/ck"))
    assert t["max_actor_ckpt_to_keep"] == 2 and t["max_critic_ckpt_to_keep"] == 2
    assert t["default_local_dir"] == "${oc.env:HOME}/ck"
    assert "max_critic_ckpt_to_keep" not in _trainer(_plan(tmp_path, keep_checkpoints=2))  # no critic, no key


@pytest.mark.parametrize("answers, words", [
    (dict(resume="path"), "resume=path needs resume_from_path"),
    (dict(resume="auto", resume_from_path="ck/global_step_3"), "resume_from_path is set but resume=auto"),
    (dict(resume_from_path="ck/global_step_3/"), "no trailing /"),
    (dict(resume_from_path="ck/global_step_3/actor"), "ending in global_step_N"),
    (dict(resume_from_path="ck/step_3"), "ending in global_step_N"),
])
def test_bad_resume_answers_refused(answers, words, tmp_path):
    with pytest.raises(WizardError, match="VI555") as info:
        _plan(tmp_path, **answers)
    assert any(words in p.line() for p in info.value.problems), [p.line() for p in info.value.problems]


def test_step_folder_is_what_verl_parses():
    """verl reads the step as int(path.split('global_step_')[-1]) (trainer/ppo/v1/trainer_base.py:876): every path
    the planner accepts parses, every path it refuses would raise there."""
    from wizard.planner.stages.checkpoints import STEP_FOLDER as _STEP_FOLDER

    for path in ("ck/global_step_40", "/abs/global_step_7", "global_step_0"):
        assert _STEP_FOLDER.search(path) and int(path.split("global_step_")[-1]) >= 0
    for path in ("ck/global_step_40/", "ck/global_step_40/actor", "ck/step_4", "global_step_x"):
        assert not _STEP_FOLDER.search(path)
        with pytest.raises((ValueError, IndexError)):
            int(path.split("global_step_")[-1]) if "global_step_" in path else int("no step")


def test_keep_checkpoints_without_saving_is_named(tmp_path):
    p = _plan(tmp_path, keep_checkpoints=3, save_freq=-1)
    assert [f.rule for f in p.findings] == ["VI557"]


@pytest.mark.parametrize("answers, warned", [
    (dict(cluster="ray", nnodes=2), True),
    (dict(cluster="ray", nnodes=2, checkpoint_dir="/mnt/shared/ck"), False),
    (dict(cluster="ray", nnodes=2, save_freq=-1), False),
    (dict(cluster="kuberay", nnodes=2, checkpoint_pvc="ckpts"), False),  # without a PVC: VI757 refuses the plan
    (dict(cluster="kuberay", nnodes=2, shared_pvc="team-data"), False),
    (dict(cluster="slurm", nnodes=2), False),
    (dict(), False),
])
def test_where_checkpoints_live_per_cluster(answers, warned, tmp_path):
    p = _plan(tmp_path, **answers)
    assert any(f.rule == "VI556" for f in p.findings) == warned
    plan_md = wizard.render(p)["PLAN.md"]
    section = plan_md.split("## Checkpoints and export", 1)[1]
    assert "Where:" in section or "No checkpoints are saved" in section
    if answers.get("checkpoint_pvc"):
        assert "PVC `ckpts` (checkpoint_pvc): it outlives the pods" in section
    if warned:
        assert "(VI556)" in section


# --- the ppo-resume profile, accepted by verl -----------------------------------------------------------------

@pytest.mark.verl
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_ppo_resume_profile_is_accepted_by_verl(tmp_path, tiny_model):
    from wizard.verify.harness import compose_bundle, verify_with_verl

    bundle = wizard.write_bundle(wizard.render(wizard.plan(wizard.load_profile("ppo-resume"),
                                                           base_dir=str(tmp_path))), tmp_path / "b")
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, report.summary()
    cfg = compose_bundle(bundle)
    assert cfg.trainer.resume_mode == "resume_path"
    assert cfg.trainer.resume_from_path == "checkpoints/verl-init/ppo-resume/global_step_40"
    assert int(cfg.trainer.resume_from_path.split("global_step_")[-1]) == 40  # what verl's trainer reads
    assert cfg.trainer.max_actor_ckpt_to_keep == 3 and cfg.trainer.max_critic_ckpt_to_keep == 3
    assert cfg.trainer.save_freq == 10 and cfg.critic.enable is True
    assert (bundle / "export_hf.sh").is_file()
    plan_md = (bundle / "PLAN.md").read_text()
    assert "`trainer.resume_mode=resume_path`" in plan_md and "Only the newest 3 are kept." in plan_md


@pytest.mark.verl
def test_auto_resume_finds_the_checkpoint_where_plan_md_says(tmp_path):
    """resume=auto: verl's own find_latest_ckpt_path, on the default_local_dir the composed config resolves to
    (an interpolation of project and experiment), finds a checkpoint laid out where PLAN.md says it lands."""
    from omegaconf import OmegaConf

    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path
    from wizard.verify.harness import compose_bundle

    the_plan = wizard.plan(wizard.load_profile("single-node-8gpu"), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(the_plan), tmp_path / "b")
    where = the_plan.facts["checkpoint_dir"]
    assert f"`{where}/global_step_N/`" in (bundle / "PLAN.md").read_text()
    cfg = compose_bundle(bundle)
    local_dir = OmegaConf.select(cfg, "trainer.default_local_dir")
    assert local_dir == where  # verl's default, as the planner spells it
    (bundle / where / "global_step_20").mkdir(parents=True)
    (bundle / where / "latest_checkpointed_iteration.txt").write_text("20")
    assert find_latest_ckpt_path(str(bundle / local_dir)) == str(bundle / where / "global_step_20")


@pytest.mark.slow
def test_run_sh_refuses_a_missing_resume_checkpoint(tmp_path):
    bundle = wizard.write_bundle(wizard.render(wizard.plan(wizard.load_profile("ppo-resume"),
                                                           base_dir=str(tmp_path))), tmp_path / "b")
    for name in ("train.parquet", "val.parquet"):
        (bundle / "data").mkdir(exist_ok=True)
        (bundle / "data" / name).write_bytes(b"")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    env.pop("CUDA_VISIBLE_DEVICES", None)
    r = subprocess.run(["bash", str(bundle / "run.sh")], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1
    assert "missing checkpoint: checkpoints/verl-init/ppo-resume/global_step_40/actor" in r.stderr, r.stderr


# --- export_hf.sh ------------------------------------------------------------------------------------------------

def test_export_script_only_when_checkpoints_are_saved(tmp_path):
    assert "export_hf.sh" in wizard.render(_plan(tmp_path))
    assert "export_hf.sh" not in wizard.render(_plan(tmp_path, save_freq=-1))


def test_megatron_export_uses_the_megatron_merger(tmp_path):
    p = _plan(tmp_path, train_backend="megatron")  # Qwen2.5-0.5B ties its output layer to the embedding
    script = wizard.render(p)["export_hf.sh"]
    assert "--backend megatron --tie-word-embedding --local_dir" in script and "model/huggingface" in script
    script = wizard.render(_plan(tmp_path, train_backend="megatron", model="Qwen/Qwen2.5-7B-Instruct"))["export_hf.sh"]
    assert "--backend megatron --local_dir" in script


def _fsdp_checkpoint(root: Path, model_dir: Path, step: int) -> dict:
    """A world-size-1 FSDP actor checkpoint as verl's FSDP checkpoint manager lays it out
    (utils/checkpoint/fsdp_checkpoint_manager.py): model_world_size_1_rank_0.pt, fsdp_config.json, huggingface/
    with config and tokenizer; latest_checkpointed_iteration.txt beside the step folders (trainer_base.py)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    actor = root / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    for p in model_dir.iterdir():
        if p.is_file() and not p.name.endswith((".safetensors", ".bin")):
            shutil.copy(p, actor / "huggingface" / p.name)
    torch.manual_seed(0)
    state = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir)).state_dict()
    torch.save(state, actor / "model_world_size_1_rank_0.pt")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))
    (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    return state


@pytest.mark.slow
@pytest.mark.verl
def test_export_hf_sh_merges_a_checkpoint_with_verls_merger(tmp_path, tiny_model):
    import torch
    from transformers import AutoModelForCausalLM

    ckpt = tmp_path / "ckpt"
    bundle = wizard.write_bundle(wizard.render(wizard.plan(wizard.make_answers(dict(
        wizard.load_profile("cpu-smoke").model_dump(exclude_unset=True), model=str(tiny_model), save_freq=2,
        checkpoint_dir=str(ckpt))), base_dir=str(tmp_path))), tmp_path / "b")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    run = lambda *args: subprocess.run(["bash", str(bundle / "export_hf.sh"), *args], capture_output=True,  # noqa: E731
                                       text=True, env=env, cwd=tmp_path, timeout=300)
    r = run()
    assert r.returncode == 1 and "no checkpoint yet" in r.stderr and "latest_checkpointed_iteration.txt" in r.stderr
    state = _fsdp_checkpoint(ckpt, Path(tiny_model), 4)
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    target = bundle / "hf" / "global_step_4"  # relative to the bundle, whatever the caller's folder
    model = AutoModelForCausalLM.from_pretrained(target)
    merged = model.state_dict()
    for key, value in state.items():
        assert torch.equal(merged[key].to(torch.bfloat16), value.to(torch.bfloat16)), key
    assert (target / "tokenizer_config.json").is_file()
    r = run("4")
    assert r.returncode == 1 and "exists and is not empty" in r.stderr
    r = run("7")
    assert r.returncode == 1 and "global_step_7/actor does not exist" in r.stderr
    r = run("x")
    assert r.returncode == 1 and "STEP must be a step number" in r.stderr
