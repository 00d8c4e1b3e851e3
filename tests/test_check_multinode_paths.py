"""VI948, VI953, VI954: what verl 0.9.1 does on every node of a multi-node run (wizard/check/rules/socket_ifname.py,
remote_paths.py, ckpt_prune_ranks.py; the table wizard/check/data/verl_multinode.json). Each fault is planted beside
a valid control; the oracle is verl's own code on the CPU: the backend string verl's workers hand
torch.distributed.init_process_group (VI948), verl's resolve_config_path from another working folder (VI953), verl's
own retention methods run for two ranks on one checkpoint folder (VI954). The table is regenerated from verl's source
and compared with the committed one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wizard.check.lint import check

ROOT = Path(__file__).resolve().parent.parent
BASE = ("python3 -m verl.trainer.main_ppo {config}algorithm.adv_estimator=grpo "
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct actor_rollout_ref.rollout.name=vllm "
        "data.train_files=/shared/data/train.parquet data.val_files=/shared/data/test.parquet "
        "data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=32 "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 "
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.n=4 "
        "trainer.logger=console trainer.n_gpus_per_node=8 trainer.nnodes={nodes} {extra}\n")


def _hits(tmp_path, script: str, rule: str, **kw):
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\n" + script, encoding="utf-8")
    return [f.problem for f in check(str(path), **kw).findings if f.problem.rule == rule]


def _launch(nodes: int = 2, extra: str = "", config: str = "") -> str:
    return BASE.format(nodes=nodes, extra=extra, config=config)


def test_table_matches_verl_source():
    from helpers_scripts import regenerated

    committed = (ROOT / "wizard" / "check" / "data" / "verl_multinode.json").read_text(encoding="utf-8")
    assert regenerated("verl_multinode") == committed
    table = json.loads(committed)
    assert table["prune"]["megatron"]["every_rank"] and not table["prune"]["fsdp"]["every_rank"]
    assert set(table["resolved_paths"]) == {"actor_rollout_ref.rollout.agent.agent_loop_config_path",
                                            "actor_rollout_ref.rollout.multi_turn.tool_config_path",
                                            "actor_rollout_ref.rollout.multi_turn.function_tool_path"}


# --- VI948: NCCL's interface pinned, Gloo's not --------------------------------------------------------------------

def test_verl_workers_open_a_gloo_group(monkeypatch):
    """The oracle: verl's worker-side process group carries a Gloo backend beside the device one, so Gloo's own
    interface variable matters on a multi-NIC node."""
    import torch.distributed as dist
    from verl.utils import distributed as vd

    seen = {}
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda **kw: seen.update(kw))
    monkeypatch.setattr(vd, "get_device_name", lambda: "cuda")
    monkeypatch.setattr(vd, "get_nccl_backend", lambda: "nccl")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    try:
        vd.initialize_global_process_group_ray(timeout_second=1)
    except Exception:  # noqa: BLE001 - what follows init (device set-up) needs a GPU; the backend is already recorded
        pass
    assert seen["backend"] == "cpu:gloo,cuda:nccl"


def test_vi948_nccl_ifname_without_gloo(tmp_path):
    script = "export NCCL_SOCKET_IFNAME=ib0\nray start --head --port=6379\n" + _launch()
    hits = _hits(tmp_path, script, "VI948")
    assert len(hits) == 1 and "NCCL_SOCKET_IFNAME=ib0" in hits[0].message and "GLOO_SOCKET_IFNAME" in hits[0].hint
    # Ascend: HCCL's interface, the same Gloo group beside it
    hccl = "export HCCL_SOCKET_IFNAME=enp189s0f0\nray start --head\n" + _launch(extra="trainer.device=npu")
    assert _hits(tmp_path, hccl, "VI948")


def test_vi948_slurm_nodes_and_runtime_env(tmp_path):
    """trainer.nnodes taken from Slurm's environment: #SBATCH --nodes counts; a srun-wrapped launch is read from the
    text; the ray_init runtime env's env_vars count as what the workers get."""
    slurm = ("#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\nexport NCCL_SOCKET_IFNAME=ib0\n"
             "srun --nodes=1 ray start --head --block &\n" + _launch().replace("trainer.nnodes=2", 'trainer.nnodes="${SLURM_NNODES}"'))
    assert _hits(tmp_path, slurm, "VI948")
    ray_env = _launch(extra="+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_SOCKET_IFNAME=ib0")
    assert _hits(tmp_path, ray_env, "VI948")


def test_vi948_controls(tmp_path):
    both = "export NCCL_SOCKET_IFNAME=ib0\nexport GLOO_SOCKET_IFNAME=ib0\nray start --head\n" + _launch()
    assert not _hits(tmp_path, both, "VI948")
    one_node = "export NCCL_SOCKET_IFNAME=ib0\n" + _launch(nodes=1)
    assert not _hits(tmp_path, one_node, "VI948")
    neither = "ray start --head\n" + _launch()
    assert not _hits(tmp_path, neither, "VI948")
    local_only = "NCCL_SOCKET_IFNAME=ib0\nray start --head\n" + _launch()  # never exported: stays in the shell
    assert not _hits(tmp_path, local_only, "VI948")


# --- VI953: relative agent-loop / tool config on several nodes -----------------------------------------------------

def test_verl_resolve_config_path_from_another_folder(tmp_path, monkeypatch):
    """The oracle: a worker whose working folder is not the launch folder cannot find a relative file of the user's
    project; an absolute path passes through."""
    from verl.utils.import_utils import resolve_config_path

    project = tmp_path / "project"
    (project / "configs").mkdir(parents=True)
    (project / "configs" / "agent.yaml").write_text("- name: mine\n", encoding="utf-8")
    elsewhere = tmp_path / "ray_start_folder"
    elsewhere.mkdir()
    monkeypatch.chdir(project)
    assert resolve_config_path("configs/agent.yaml") == str(project / "configs" / "agent.yaml")
    monkeypatch.chdir(elsewhere)  # the node where `ray start` ran somewhere else
    with pytest.raises(FileNotFoundError):
        resolve_config_path("configs/agent.yaml")
    assert resolve_config_path(str(project / "configs" / "agent.yaml")) == str(project / "configs" / "agent.yaml")


AGENT = "actor_rollout_ref.rollout.agent.agent_loop_config_path"
TOOLS = "actor_rollout_ref.rollout.multi_turn.tool_config_path"


def test_vi953_relative_agent_and_tool_config(tmp_path):
    hits = _hits(tmp_path, _launch(extra=f"{AGENT}=configs/agent.yaml {TOOLS}=configs/tools.yaml"), "VI953")
    assert {h.keys[0] for h in hits} == {AGENT, TOOLS}
    assert all("FileNotFoundError" in h.message for h in hits)
    submit = ("ray job submit --address=http://127.0.0.1:8265 -- " + _launch(extra=f"{TOOLS}=configs/tools.yaml"))
    assert _hits(tmp_path, submit, "VI953")  # a job with no working_dir: the other nodes have no copy of this folder


def test_vi953_controls(tmp_path):
    absolute = _launch(extra=f"{AGENT}=/shared/configs/agent.yaml")
    assert not _hits(tmp_path, absolute, "VI953")
    one_node = _launch(nodes=1, extra=f"{AGENT}=configs/agent.yaml")
    assert not _hits(tmp_path, one_node, "VI953")
    in_verl = _launch(extra=f"{AGENT}=trainer/config/ppo_trainer.yaml")  # resolves under verl's package root
    assert not _hits(tmp_path, in_verl, "VI953")
    working_dir = ("ray job submit --address=http://127.0.0.1:8265 --working-dir . -- "
                   + _launch(extra=f"{AGENT}=configs/agent.yaml"))
    assert not _hits(tmp_path, working_dir, "VI953")
    own_cluster = "ray start --head\n" + _launch(extra=f"{AGENT}=configs/agent.yaml")
    assert not _hits(tmp_path, own_cluster, "VI953")


# --- VI954: Megatron's retention on every rank ---------------------------------------------------------------------

def test_verl_retention_removes_on_each_rank_that_calls_it(tmp_path, monkeypatch):
    """The oracle: verl's own retention (BaseCheckpointManager.ensure_checkpoint_capacity / register_checkpoint), run
    as two Megatron ranks run it (both, no rank guard), deletes the one shared folder twice."""
    from verl.utils.checkpoint import checkpoint_manager as cm

    old = tmp_path / "global_step_10" / "actor"
    old.mkdir(parents=True)
    removed: list[str] = []
    real = cm.shutil.rmtree
    monkeypatch.setattr(cm.shutil, "rmtree", lambda p, **kw: (removed.append(str(p)), real(p, **kw)))
    ranks = []
    for _ in range(2):
        rank = object.__new__(cm.BaseCheckpointManager)
        rank.previous_saved_paths = [str(old)]
        ranks.append(rank)
    old_again = lambda: old.mkdir(parents=True, exist_ok=True)  # noqa: E731 - the second rank sees it before the first deletes
    for rank in ranks:
        old_again()
        rank.register_checkpoint(str(tmp_path / "global_step_20" / "actor"), 1)
    assert removed == [str(old), str(old)]
    for rank in ranks:
        rank.previous_saved_paths = [str(old), str(tmp_path / "global_step_20")]
        old_again()
        rank.ensure_checkpoint_capacity(2)
    assert removed.count(str(old)) == 4


MEGATRON = ("--config-name=ppo_megatron_trainer ")


def test_vi954_megatron_retention(tmp_path):
    hits = _hits(tmp_path, _launch(config=MEGATRON, extra="trainer.save_freq=10 trainer.max_actor_ckpt_to_keep=2"),
                 "VI954")
    assert len(hits) == 1 and "trainer.max_actor_ckpt_to_keep=2" in hits[0].message
    legacy = _launch(config=MEGATRON, extra="trainer.save_freq=10 +trainer.remove_previous_ckpt_in_save=True")
    assert _hits(tmp_path, legacy, "VI954")


def test_vi954_controls(tmp_path):
    fsdp = _launch(extra="trainer.save_freq=10 trainer.max_actor_ckpt_to_keep=2")  # rank 0 prunes alone
    assert not _hits(tmp_path, fsdp, "VI954")
    keep_all = _launch(config=MEGATRON, extra="trainer.save_freq=10")
    assert not _hits(tmp_path, keep_all, "VI954")
    one_node = _launch(nodes=1, config=MEGATRON, extra="trainer.save_freq=10 trainer.max_actor_ckpt_to_keep=2")
    assert not _hits(tmp_path, one_node, "VI954")
    no_saves = _launch(config=MEGATRON, extra="trainer.save_freq=-1 trainer.max_actor_ckpt_to_keep=2")
    assert not _hits(tmp_path, no_saves, "VI954")
