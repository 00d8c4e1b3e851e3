"""VI779: two Megatron engines in one process with different parallel layouts (R24-05, verl#653).

Oracles: verl's own MegatronEngine._init_device_mesh (workers/engine/megatron/transformer_impl.py:239-280), run on
the CPU with megatron-core's parallel_state stubbed at its boundary (megatron-core is not installed here, so the
method's source is compiled out of verl's file unchanged), and verl's Hydra config (ppo_megatron_trainer.yaml) for
which sizes each role gets; verl's trainer for which roles share the global pool.
"""

from __future__ import annotations

import ast
import inspect
import os
from types import SimpleNamespace

import pytest

from wizard.check.lint import check

R24_05 = ["algorithm.adv_estimator=gae", "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
          "critic.model.path=Qwen/Qwen2.5-7B-Instruct", "data.train_batch_size=256",
          "actor_rollout_ref.actor.ppo_mini_batch_size=64", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
          "actor_rollout_ref.actor.strategy=megatron", "critic.strategy=megatron",
          "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
          "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
          "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "critic.ppo_micro_batch_size_per_gpu=4",
          "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]


def _verl_file(rel: str) -> str:
    import verl
    return os.path.join(os.path.dirname(verl.__file__), rel)


def _init_device_mesh():
    """verl's _init_device_mesh and _validate_dcp_world_size, compiled from its source over a stub parallel state."""
    src = open(_verl_file("workers/engine/megatron/transformer_impl.py")).read()
    tree = ast.parse(src)
    wanted = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "_validate_dcp_world_size":
            wanted.append(node)
        if isinstance(node, ast.ClassDef) and node.name == "MegatronEngine":
            wanted += [n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "_init_device_mesh"]
    assert len(wanted) == 2, "verl's _init_device_mesh moved"

    class ParallelState:  # megatron.core.parallel_state at its boundary: one state per process
        def __init__(self):
            self.sizes = None

        def is_initialized(self):
            return self.sizes is not None

        def initialize_model_parallel(self, tensor_model_parallel_size, pipeline_model_parallel_size,
                                      virtual_pipeline_model_parallel_size, use_sharp, context_parallel_size,
                                      expert_model_parallel_size, expert_tensor_parallel_size,
                                      nccl_communicator_config_path, dynamic_context_parallel=False):
            self.sizes = dict(tp=tensor_model_parallel_size, pp=pipeline_model_parallel_size,
                              vpp=virtual_pipeline_model_parallel_size, cp=context_parallel_size,
                              ep=expert_model_parallel_size, etp=expert_tensor_parallel_size,
                              dcp=dynamic_context_parallel)

        def get_data_parallel_world_size(self, with_context_parallel=False):
            return 8 // (self.sizes["tp"] * self.sizes["pp"])

        def get_dynamic_data_context_parallel_groups(self, group_size):
            if not self.sizes["dcp"]:
                raise KeyError(group_size)

    mpu = ParallelState()
    ns = {"mpu": mpu, "inspect": inspect, "get_megatron_dynamic_cp_scheduler_cls": lambda: None,
          "torch": SimpleNamespace(distributed=SimpleNamespace(get_world_size=lambda: 8))}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "transformer_impl.py", "exec"), ns)
    return ns["_init_device_mesh"], mpu


def _engine(tp, pp, dcp=False):
    return SimpleNamespace(engine_config=SimpleNamespace(
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, virtual_pipeline_model_parallel_size=None,
        context_parallel_size=1, expert_model_parallel_size=1, expert_tensor_parallel_size=None,
        dynamic_context_parallel=dcp))


@pytest.mark.verl
def test_verl_keeps_the_first_engines_groups():
    init, mpu = _init_device_mesh()
    init(_engine(1, 1))           # the critic: its TrainingWorker builds its engine at spawn
    init(_engine(4, 2))           # the actor, later, in ActorRolloutRefWorker.init_model
    assert mpu.sizes["tp"] == 1 and mpu.sizes["pp"] == 1   # the actor's TP=4 PP=2 never reaches megatron
    init, mpu = _init_device_mesh()
    init(_engine(4, 2))           # control: equal layouts, the same groups either way
    init(_engine(4, 2))
    assert (mpu.sizes["tp"], mpu.sizes["pp"]) == (4, 2)
    init, mpu = _init_device_mesh()
    init(_engine(2, 1))
    with pytest.raises(RuntimeError, match="Dynamic CP is enabled"):  # the one direction verl itself catches
        init(_engine(2, 1, dcp=True))


@pytest.mark.verl
def test_verls_config_gives_the_critic_its_own_defaults_and_one_pool():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    with initialize_config_dir(config_dir=_verl_file("trainer/config"), version_base=None):
        cfg = compose("ppo_megatron_trainer", overrides=[o for o in R24_05 if "strategy" not in o])
    cfg = OmegaConf.to_container(cfg, resolve=True)
    assert cfg["actor_rollout_ref"]["ref"]["megatron"]["tensor_model_parallel_size"] == 4  # interpolated from actor
    assert cfg["critic"]["megatron"]["tensor_model_parallel_size"] == 1                   # not interpolated
    assert cfg["critic"]["megatron"]["pipeline_model_parallel_size"] == 1
    # verl's trainer maps actor, separate ref and critic to "global_pool" and fuses each pool's classes into one
    # worker; only the reward model may get a pool of its own
    trainer = open(_verl_file("trainer/ppo/v1/trainer_base.py")).read()
    for line in ('self.mapping[role] = "global_pool"', 'self.mapping[Role.RefPolicy] = "global_pool"',
                 'self.mapping[Role.Critic] = "global_pool"', "create_colocated_worker_cls(class_dict=class_dict)"):
        assert line in trainer


def _hit(*extra):
    report = check(None, [*R24_05, *extra], config_name="ppo_megatron_trainer")
    return [f for f in report.findings if f.problem.rule == "VI779"]


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_fires_on_the_critic_layout_and_is_silent_on_controls():
    hits = _hit()
    assert len(hits) == 1 and hits[0].problem.severity == "error"
    assert "critic.megatron.tensor_model_parallel_size=1" in hits[0].problem.message
    assert "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2" in hits[0].problem.message
    # controls: equal layouts; a critic on FSDP; no critic at all (GRPO)
    assert not _hit("critic.megatron.tensor_model_parallel_size=4", "critic.megatron.pipeline_model_parallel_size=2")
    assert not _hit("algorithm.adv_estimator=grpo")


@pytest.mark.slow
def test_check_fires_on_a_hand_set_reference_layout():
    grpo = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.use_kl_loss=True"]
    hits = _hit(*grpo, "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=1")
    assert len(hits) == 1 and "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=1" in hits[0].problem.message
    assert not _hit(*grpo)  # the reference interpolates the actor's sizes by default
    assert not _hit("algorithm.adv_estimator=grpo", "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=1")
    dcp = _hit("critic.megatron.tensor_model_parallel_size=4", "critic.megatron.pipeline_model_parallel_size=2",
               "actor_rollout_ref.actor.megatron.dynamic_context_parallel=True")
    assert len(dcp) == 1 and "RuntimeError" in dcp[0].problem.message
