"""`check --gpus-per-node 4,2`: nodes of unequal size (VI814). verl asks Ray for trainer.nnodes placement groups of
n_gpus_per_node GPUs, each packed on one node (STRICT_PACK, single_controller/ray/base.py:131-160), and its own check
compares only the total GPUs (base.py:227-242): on nodes of 4 and 2 GPUs, nnodes=2 × 3 GPUs passes verl's check and
then waits forever (real case verl#2596).

The oracle is verl's own RayResourcePool on a real two-node Ray cluster (ray.cluster_utils.Cluster, the nodes
declaring 4 and 2 GPUs): the layouts Ray places are the ones check lets through, and the layout check's hint names
is one Ray places. Only `ray.get` in verl's module is bounded in time (a pending group would wait forever).
"""

from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.verl, pytest.mark.slow]

NODES = (4, 2)
# (trainer.nnodes, trainer.n_gpus_per_node)
LAYOUTS = [(2, 3), (3, 2), (1, 4), (2, 4), (6, 1), (2, 2)]
SCRIPT = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct",
          "actor_rollout_ref.rollout.name=vllm", "data.train_batch_size=24", "actor_rollout_ref.actor.ppo_mini_batch_size=12",
          "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
          "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]


@pytest.fixture(scope="module")
def ray_places():
    """layout → whether verl's RayResourcePool gets its placement groups on a Ray cluster of NODES GPUs."""
    import ray
    from ray.cluster_utils import Cluster
    from ray.util import placement_group_table
    from ray.util.placement_group import PlacementGroup, remove_placement_group

    import verl.single_controller.ray.base as base

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 8, "num_gpus": NODES[0]})
    for gpus in NODES[1:]:
        cluster.add_node(num_cpus=8, num_gpus=gpus)
    ray.init(address=cluster.address, log_to_driver=False)

    class BoundedRay:  # verl's module sees Ray, with ray.get bounded in time
        def __getattr__(self, name):
            return getattr(ray, name)

        @staticmethod
        def get(refs, **kw):
            return ray.get(refs, timeout=20)

    real = base.ray
    base.ray = BoundedRay()
    placed = {}
    try:
        for nnodes, gpn in LAYOUTS:
            pool = base.RayResourcePool(process_on_nodes=[gpn] * nnodes, use_gpu=True, max_colocate_count=1)
            try:
                placed[(nnodes, gpn)] = len(pool.get_placement_groups()) == nnodes
            except ray.exceptions.GetTimeoutError:
                placed[(nnodes, gpn)] = False
            for pid, info in placement_group_table().items():
                if info["state"] != "REMOVED":
                    remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(pid))))
            time.sleep(1)
    finally:
        base.ray = real
        ray.shutdown()
        cluster.shutdown()
    return placed


def _placement_error(nnodes: int, gpn: int):
    from wizard.check.lint import check

    report = check(None, [*SCRIPT, f"trainer.nnodes={nnodes}", f"trainer.n_gpus_per_node={gpn}"],
                   gpus_per_node=NODES)
    return [f.problem for f in report.findings if f.problem.rule == "VI814" and f.problem.severity == "error"]


def test_check_refuses_exactly_the_layouts_ray_cannot_place(ray_places):
    assert ray_places[(2, 3)] is False and ray_places[(3, 2)] is True  # the real case, and the fix
    for (nnodes, gpn), placed in ray_places.items():
        errors = _placement_error(nnodes, gpn)
        assert bool(errors) is (not placed), ((nnodes, gpn), placed, [e.message for e in errors])


def test_the_hint_names_a_layout_ray_places(ray_places):
    [error] = _placement_error(2, 3)
    assert "nodes of 4+2 GPUs" in error.message and "hold 1 such group(s)" in error.message
    assert "trainer.nnodes=3 trainer.n_gpus_per_node=2" in error.hint and ray_places[(3, 2)]


def test_one_count_or_equal_counts_are_the_plain_flag(cli_env):
    from conftest import run_cli

    from wizard.check.hardware import node_gpus

    assert node_gpus("8") == 8 and node_gpus("4,2") == (4, 2)
    r = run_cli(["check", "--gpus-per-node", "4,x", "--", *SCRIPT], env=cli_env)
    assert r.returncode == 2 and "one count per node (4,2)" in r.stderr
    r = run_cli(["check", "--gpus-per-node", "4,4", "--nnodes", "3", "--", *SCRIPT], env=cli_env)
    assert r.returncode == 2 and "--gpus-per-node names 2 nodes" in r.stderr
    r = run_cli(["check", "--gpus-per-node", "4,4", "--", *SCRIPT, "trainer.nnodes=2", "trainer.n_gpus_per_node=4"],
                env=cli_env)
    assert "2×4 GPUs (from the flags)" in r.stdout and "VI814" not in r.stdout


def test_a_separate_rollout_adds_its_gpus_to_what_the_run_needs(tmp_path):
    """Fully async / one-step-off: the rollout's replicas take rollout.nnodes × rollout.n_gpus_per_node GPUs beside
    the trainer's pool (each replica's own pool, workers/rollout/replica.py:189-207; real case verl#2886: 1 + 1 GPUs
    on a one-GPU machine)."""
    from wizard.check.lint import check

    script = tmp_path / "async.sh"
    script.write_text("python3 -m verl.experimental.fully_async_policy.fully_async_main \\\n    " + " \\\n    ".join(
        [*SCRIPT, "trainer.nnodes=1", "trainer.n_gpus_per_node=1", "rollout.nnodes=1", "rollout.n_gpus_per_node=1",
         "actor_rollout_ref.actor.ppo_mini_batch_size=4"]) + "\n", encoding="utf-8")
    short = check(str(script), gpus_per_node=1, nnodes=1)
    [hit] = [f.problem for f in short.findings if f.problem.rule == "VI814" and f.problem.severity == "error"]
    assert "needs 2 GPUs" in hit.message and "1 for the rollout's own replicas" in hit.message
    enough = check(str(script), gpus_per_node=2, nnodes=1)
    assert not [f for f in enough.findings if f.problem.rule == "VI814" and f.problem.severity == "error"]
