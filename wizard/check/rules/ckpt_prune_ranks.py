"""Checkpoint retention that every Megatron rank enforces on shared storage (VI954).

VI954 (warning): trainer.max_actor_ckpt_to_keep (or max_critic_ckpt_to_keep, or the deprecated
trainer.remove_previous_ckpt_in_save, which means 1) on a multi-node run whose actor (or critic) saves through verl's
Megatron checkpoint manager, with checkpoints saved (save_freq > 0). verl 0.9.1 prunes old checkpoints with
shutil.rmtree (utils/checkpoint/checkpoint_manager.py:156-164 remove_previous_save_local_path, reached from
ensure_checkpoint_capacity before a synchronous save when keep >= 2 and from register_checkpoint after a save when
keep >= 1). The FSDP manager calls both on rank 0 only (fsdp_checkpoint_manager.py:296-297, :475-476); the Megatron
manager calls them on every rank (megatron_checkpoint_manager.py:1148 in _finalize_save, :1199-1200 in
save_checkpoint). Which manager guards its calls comes from wizard/check/data/verl_multinode.json, written by
scripts/verl_multinode.py from verl's source. A multi-node run keeps its checkpoints on storage every node mounts
(else VI770), so all ranks delete the same global_step_* folder at once; on HDFS FUSE / NFS one rank's
`os.fstat` of a folder another rank just removed raises FileNotFoundError through rmtree's ignore_errors=True and
the save aborts (verl PR#7989, open after 0.9.1). The test runs verl's own retention methods for two ranks on one
folder and sees each of them remove it.
"""

from __future__ import annotations

from wizard.check.rules.context import A, Ctx, Facts
from wizard.check.rules.nodes_table import multinode_table

MANAGERS = {"megatron": "megatron", "fsdp": "fsdp", "fsdp2": "fsdp"}  # role strategy -> checkpoint manager module
ROLES = (("actor", A, "trainer.max_actor_ckpt_to_keep"), ("critic", "critic", "trainer.max_critic_ckpt_to_keep"))
LEGACY = "trainer.remove_previous_ckpt_in_save"


def _keep(c: Ctx, key: str) -> tuple[int | None, str]:
    """The retention verl applies (trainer/ppo/ray_trainer.py:1000-1011, trainer/ppo/v1/trainer_base.py:958-968) and
    the key that sets it."""
    if c.v(LEGACY) is True:
        return 1, LEGACY
    value = c.v(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None, key
    return value, key


def rule_ckpt_prune_ranks(c: Ctx, f: Facts) -> None:
    """VI954."""
    save = c.num("trainer.save_freq")
    nodes = f.nnodes or 1
    if save is None or save <= 0 or nodes <= 1:
        return
    prune = multinode_table()["prune"]
    for role, prefix, key in ROLES:
        if role == "critic" and not f.use_critic:
            continue
        strategy = c.v(f"{prefix}.strategy")
        entry = prune.get(MANAGERS.get(str(strategy), ""))
        if not entry or not entry["every_rank"]:
            continue
        keep, named = _keep(c, key)
        if keep is None:
            continue
        lines = ", ".join(f":{d['line']}" for d in entry["calls"] if not d["rank0_only"])
        c.add("VI954", "warning", (named, f"{prefix}.strategy"),
              f"{named}={c.v(named)} with the {role} on {strategy} across {nodes} nodes: every {strategy} rank, not "
              f"rank 0, rmtree()s the old checkpoint ({entry['file']}{lines}; {multinode_table()['remove_previous']}), "
              "so on shared storage the ranks delete one folder at once and on HDFS FUSE / NFS the save can die with "
              "FileNotFoundError (verl PR#7989)",
              f"leave {key} unset (null: keep every checkpoint) and remove old global_step_* folders outside the run")
