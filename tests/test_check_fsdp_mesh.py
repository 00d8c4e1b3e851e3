"""VI909: the FSDP engines' device mesh against the trainer's GPUs (real case verl#7493: FSDP1 with fsdp_size=1 on
4 GPUs, whose gradients were never averaged). The oracle is torch's own FSDP1 and FSDP2, run here on the CPU over
gloo on verl's mesh for the same world and fsdp_size (workers/engine/fsdp/utils.py:35-52: (world / fsdp_size,
fsdp_size), HYBRID_SHARD): each rank backpropagates different data, and the gradients after backward show whether
they were averaged; a rank the mesh leaves out fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from wizard.check.lint import check

A = "actor_rollout_ref.actor"

ORACLE = textwrap.dedent('''
    import json, os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp

    def run(rank, world, fsdp_size, fsdp2, port, q):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
        try:
            from torch.distributed.device_mesh import init_device_mesh
            torch.manual_seed(0)
            model = torch.nn.Linear(4, 4)
            if fsdp_size < 0 or fsdp_size >= world:  # verl's create_device_mesh
                mesh = init_device_mesh("cpu", (world,), mesh_dim_names=["fsdp"])
            else:
                mesh = init_device_mesh("cpu", (world // fsdp_size, fsdp_size), mesh_dim_names=["ddp", "fsdp"])
            if fsdp2:
                from torch.distributed.fsdp import fully_shard
                fully_shard(model, mesh=mesh)
                m = model
            else:
                from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
                strategy = ShardingStrategy.FULL_SHARD if mesh.ndim == 1 else ShardingStrategy.HYBRID_SHARD
                m = FSDP(model, device_mesh=mesh, sharding_strategy=strategy, device_id=torch.device("cpu"),
                         use_orig_params=True)
            m(torch.full((2, 4), float(rank + 1))).sum().backward()
            if fsdp2:
                g = model.weight.grad.full_tensor()
            else:
                with FSDP.summon_full_params(m, with_grads=True):
                    g = m.weight.grad.clone()
            q.put((rank, round(g.sum().item(), 4)))
        except Exception as exc:
            q.put((rank, type(exc).__name__))
        finally:
            dist.destroy_process_group()

    if __name__ == "__main__":
        world, fsdp_size, fsdp2, port = map(int, sys.argv[1:5])
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        ps = [ctx.Process(target=run, args=(r, world, fsdp_size, fsdp2, port, q)) for r in range(world)]
        for p in ps:
            p.start()
        out = sorted(q.get(timeout=120) for _ in ps)
        for p in ps:
            p.join(timeout=60)
        print("RESULT", json.dumps([g for _, g in out]))
''')


def _torch_trains_one_model(tmp_path, world: int, fsdp_size: int, fsdp2: bool) -> bool:
    """True when every rank ends with the same (averaged) gradient; False when they differ or a rank fails."""
    import socket

    script = tmp_path / "fsdp_oracle.py"
    script.write_text(ORACLE, encoding="utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = subprocess.run([sys.executable, str(script), str(world), str(fsdp_size), str(int(fsdp2)), str(port)],
                       capture_output=True, text=True, timeout=300)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")), None)
    if line is None:
        return False
    grads = json.loads(line.split(" ", 1)[1])
    return all(isinstance(g, float) for g in grads) and len(set(grads)) == 1


def _errors(world: int, fsdp_size: int, strategy: str) -> list:
    report = check(None, [f"trainer.n_gpus_per_node={world}", "trainer.nnodes=1", f"{A}.strategy={strategy}",
                          f"{A}.fsdp_config.fsdp_size={fsdp_size}", "actor_rollout_ref.rollout.name=vllm"])
    return [f.problem for f in report.findings if f.problem.rule == "VI909" and f.problem.severity == "error"]


@pytest.mark.slow
@pytest.mark.parametrize("world, fsdp_size, strategy", [
    (2, 1, "fsdp"),  # the real case's class: NO_SHARD over one GPU
    (4, 2, "fsdp"),  # a true hybrid shard: averaged
    (2, 1, "fsdp2"),  # FSDP2 replicates over the ddp dimension: averaged
    (4, 3, "fsdp"),  # a rank left out of the mesh
    (2, -1, "fsdp"),  # verl's default: one shard group of all GPUs
])
def test_check_errs_exactly_where_torchs_fsdp_does_not_train_one_model(tmp_path, world, fsdp_size, strategy):
    trains = _torch_trains_one_model(tmp_path, world, fsdp_size, strategy == "fsdp2")
    assert bool(_errors(world, fsdp_size, strategy)) == (not trains), (world, fsdp_size, strategy, trains)


def test_the_messages_name_the_cause():
    [one] = _errors(4, 1, "fsdp")
    assert "never average" in one.message and "fsdp2" in one.hint
    [odd] = _errors(4, 3, "fsdp")
    assert "does not divide the 4 GPUs" in odd.message
    assert not _errors(1, 1, "fsdp")  # one GPU: nothing to average


def test_the_critic_has_its_own_mesh():
    report = check(None, ["trainer.n_gpus_per_node=4", "trainer.nnodes=1", "actor_rollout_ref.rollout.name=vllm",
                          "algorithm.adv_estimator=gae", "critic.enable=true", "critic.fsdp.fsdp_size=1"])
    hits = [f.problem for f in report.findings if f.problem.rule == "VI909"]
    assert [h.keys[0] for h in hits] == ["critic.fsdp.fsdp_size"]


def _verl_needs_critic(adv: str, enable) -> bool:
    """verl's own need_critic (trainer/ppo/utils.py:96-107) on a config with only the keys it reads."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic

    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return need_critic(OmegaConf.create({"critic": {"enable": enable}, "algorithm": {"adv_estimator": adv}}))


@pytest.mark.parametrize("adv, enable", [
    ("gae", None),  # real case verl#7596's class: critic.enable left unset, verl turns the critic on for gae
    ("gae", True),
    ("grpo", None),  # control: no critic is built, its mesh keys are never read
    ("gae", False),  # control: critic switched off explicitly
])
def test_the_critic_mesh_is_checked_exactly_when_verl_builds_a_critic(adv, enable):
    args = ["trainer.n_gpus_per_node=8", "trainer.nnodes=1", "actor_rollout_ref.rollout.name=vllm",
            f"algorithm.adv_estimator={adv}", "critic.strategy=fsdp", "critic.fsdp.fsdp_size=1",
            "critic.fsdp.param_offload=true"]
    if enable is not None:
        args.append(f"critic.enable={str(enable).lower()}")
    hits = [f.problem for f in check(None, args).findings
            if f.problem.rule == "VI909" and f.problem.keys[0] == "critic.fsdp.fsdp_size"]
    assert bool(hits) == _verl_needs_critic(adv, enable), (adv, enable, hits)
    if hits:
        assert "critic.fsdp.fsdp_size=1" in hits[0].message and "fsdp2" in hits[0].hint
