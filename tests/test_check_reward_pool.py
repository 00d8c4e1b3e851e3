"""VI889: the reward model's vLLM replicas (TP×DP×PP GPUs each) against its GPU pool (its own, with
enable_resource_pool, or the trainer's). verl 0.9.1 makes pool // replica replicas, asserts there is one
(experimental/reward_loop/reward_model.py:60-64) and splits the pool into replica-sized parts, asserting that the
replica divides it (single_controller/ray/base.py:288-290): both only after the cluster and the policy's workers are
up. The class is verl PR#7170's (the same floor division for the policy's rollout replicas). The oracle is verl's own
RewardModelManager._initialize_llm_servers and split_resource_pool, run on the CPU with a stand-in Ray pool and
replica class (nothing is started).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from wizard.check.lint import check

RM = "reward.reward_model"
BASE = ["actor_rollout_ref.rollout.name=vllm", "trainer.nnodes=1", f"{RM}.enable=true",
        f"{RM}.model_path=Qwen/Qwen2.5-7B-Instruct", f"{RM}.rollout.name=vllm",
        f"{RM}.rollout.gpu_memory_utilization=0.2"]


class _Pool:
    """A stand-in RayResourcePool: split_resource_pool reads these attributes only."""

    store, use_gpu, name_prefix, max_colocate_count = [0], True, "reward_pool", 1

    def __init__(self, world_size: int):
        self.world_size = world_size

    def get_placement_groups(self, device_name=None):
        return []


class _Replica:
    def __init__(self, **kwargs):
        self._server_handle = self._server_address = None

    def init_colocated(self, pool):
        return None

    init_standalone = init_colocated


def _verl_starts(monkeypatch, pool: int, tp: int, dp: int) -> bool:
    """Whether verl's own reward-model start-up gets past its replica layout on `pool` GPUs."""
    from verl.experimental.reward_loop import reward_model as vrm

    monkeypatch.setattr(vrm, "get_rollout_replica_class", lambda name: _Replica)
    monkeypatch.setattr(vrm, "HFModelConfig", lambda path: SimpleNamespace(get_processor=lambda: None))
    rollout = SimpleNamespace(tensor_model_parallel_size=tp, data_parallel_size=dp, pipeline_model_parallel_size=1,
                              name="vllm")
    fake = SimpleNamespace(config=SimpleNamespace(rollout=rollout, n_gpus_per_node=pool, nnodes=1, model_path="m"),
                           resource_pool=_Pool(pool), _run_all=lambda tasks: None)
    try:
        vrm.RewardModelManager._initialize_llm_servers(fake)
    except AssertionError:
        return False
    return True


def _vi889(args: list[str]) -> list:
    return [f.problem for f in check(None, BASE + args).findings if f.problem.rule == "VI889"]


@pytest.mark.parametrize("pool, tp, dp, own", [
    (6, 4, 1, True),  # own pool of 6, replica of 4: one replica, then the split asserts
    (8, 3, 1, False),  # colocated on the trainer's 8 GPUs, replica of 3
    (8, 2, 3, False),  # data parallel counts: replica of 6 on 8 GPUs
    (2, 4, 1, True),  # fewer GPUs than one replica
    (4, 2, 1, True),  # control: two replicas of 2
    (8, 4, 2, False),  # control: one replica of 8 on the trainer's 8
    (8, 1, 1, False),  # control: eight replicas of 1
])
def test_check_errs_exactly_where_verl_cannot_lay_out_the_reward_model(monkeypatch, pool, tp, dp, own):
    args = [f"{RM}.rollout.tensor_model_parallel_size={tp}", f"{RM}.rollout.data_parallel_size={dp}"]
    if own:
        args += [f"{RM}.enable_resource_pool=true", f"{RM}.n_gpus_per_node={pool}", f"{RM}.nnodes=1",
                 "trainer.n_gpus_per_node=8"]
    else:
        args += ["trainer.n_gpus_per_node=" + str(pool)]
    hits = [p for p in _vi889(args) if p.severity == "error"]
    assert bool(hits) == (not _verl_starts(monkeypatch, pool, tp, dp)), (pool, tp, dp, own, hits)


def test_the_message_names_the_split():
    [hit] = _vi889([f"{RM}.rollout.tensor_model_parallel_size=4", f"{RM}.enable_resource_pool=true",
                    f"{RM}.n_gpus_per_node=6", f"{RM}.nnodes=1", "trainer.n_gpus_per_node=8"])
    assert "does not divide the 6 GPUs" in hit.message and "split_size must be a divisor" in hit.message
    assert hit.keys[0] == f"{RM}.rollout.tensor_model_parallel_size" and "divisor of 6" in hit.hint
