"""VI434: the launch gives Ray fewer CPUs than verl 0.9.1 holds in placement groups (wizard.check.rules.launch_cpus).

Real cases (held-out round 97): verl#7656, the gsm8k quickstart on a 1-GPU, 8-CPU machine: 3 CPUs for the GPU bundle
+ 8 TransferQueue storage units + 1 controller = 12 > 8, the V1 trainer hangs at start-up; verl PR#6663 (open), the
GPU bundles' max_colocate_count CPUs next to TransferQueue's on a node with too few CPUs.

The oracle is verl's own code on CPU: ResourcePoolManager.create_resource_pool and RayResourcePool.get_placement_groups
run with Ray's placement_group / ray.get stubbed, and the bundles they request are counted; the table is regenerated
from verl's source.
"""

from __future__ import annotations

import json
from unittest import mock

import pytest
from conftest import ROOT

from wizard.check.lint import check
from wizard.check.rules.launch_cpus import cpu_table

TABLE = ROOT / "wizard" / "check" / "data" / "launch_cpus.json"
LAUNCH = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.rollout.name=vllm "
          "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct trainer.n_gpus_per_node={gpus} trainer.nnodes=1 "
          "{extra}")


def _rules(overrides: list[str] | None = None, path: str | None = None) -> dict[str, list]:
    report = check(path, overrides or [], defaults="snapshot")
    found: dict[str, list] = {}
    for f in report.findings:
        found.setdefault(f.problem.rule, []).append(f.problem)
    return found


def _script(tmp_path, body: str) -> str:
    p = tmp_path / "run.sh"
    p.write_text("#!/bin/bash\nset -x\n" + body + "\n", encoding="utf-8")
    return str(p)


def _verl_bundles(spec: dict[str, list[int]]) -> list[dict]:
    """The bundles verl's ResourcePoolManager asks Ray for, with Ray's placement calls stubbed (no cluster)."""
    import verl.single_controller.ray.base as base

    asked: list[dict] = []

    def pg(bundles, **_):
        asked.extend(bundles)
        return mock.Mock()

    with mock.patch.object(base, "placement_group", side_effect=pg), mock.patch.object(base.ray, "get"), \
            mock.patch.object(base, "sort_placement_group_by_node_ip", lambda p: p), \
            mock.patch.object(base.ResourcePoolManager, "_check_resource_available", lambda self: None):
        manager = base.ResourcePoolManager(resource_pool_spec=spec, mapping={})
        manager.create_resource_pool()
        for pool in manager.resource_pool_dict.values():
            pool.get_placement_groups()
    return asked


# --- the table is verl's ------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_regenerating_gives_the_committed_table():
    from helpers_scripts import regenerated

    assert regenerated("verl_launch_cpus") == TABLE.read_text(encoding="utf-8")


def test_verls_resource_pool_holds_the_tables_cpus_per_gpu():
    bundles = _verl_bundles({"global_pool": [2, 2]})
    assert len(bundles) == 4
    assert {b["CPU"] for b in bundles} == {cpu_table()["cpus_per_gpu"]}


def test_verls_gpu_check_counts_no_cpus():
    """verl checks only GPUs before placing (base.py _check_resource_available): nothing fails fast on CPUs."""
    import inspect

    import verl.single_controller.ray.base as base

    src = inspect.getsource(base.ResourcePoolManager._check_resource_available)
    assert '"GPU"' in src and '"CPU"' not in src


def test_v1_trainer_forces_transfer_queue_on():
    import inspect

    from verl.trainer import main_ppo

    assert "config.transfer_queue.enable = True" in inspect.getsource(main_ppo.TaskRunnerV1.run)
    assert json.loads(TABLE.read_text(encoding="utf-8"))["verl"] == "0.9.1"


# --- planted faults and controls ----------------------------------------------------------------------------------

def test_issue_7656_quickstart_on_8_cpus_is_an_error():
    found = _rules(["trainer.n_gpus_per_node=1", "trainer.nnodes=1", "ray_kwargs.ray_init.num_cpus=8"])
    assert "VI434" in found
    msg = found["VI434"][0].message
    assert "8 CPUs" in msg and "holds 12" in msg and "num_data_storage_units=8" in msg


@pytest.mark.parametrize("extra", [
    "ray_kwargs.ray_init.num_cpus=12",  # exactly what verl holds
    "ray_kwargs.ray_init.num_cpus=8 transfer_queue.backend.SimpleStorage.num_data_storage_units=4",
    "ray_kwargs.ray_init.num_cpus=8 trainer.use_v1=false",  # legacy trainer, TransferQueue off: 3 CPUs
    "",  # Ray sizes itself: nothing to compare
])
def test_enough_cpus_or_unstated_stays_clean(extra):
    assert "VI434" not in _rules(["trainer.n_gpus_per_node=1", "trainer.nnodes=1", *extra.split()])


def test_ray_start_with_too_few_cpus_for_the_gpu_bundles(tmp_path):
    body = "ray start --head --num-gpus=8 --num-cpus=16\n" + LAUNCH.format(gpus=8, extra="")
    found = _rules(path=_script(tmp_path, body))
    assert "VI434" in found and "alone hold 24" in found["VI434"][0].message


def test_ray_start_with_room_is_clean(tmp_path):
    body = "ray start --head --num-gpus=8 --num-cpus=33\n" + LAUNCH.format(gpus=8, extra="")
    assert "VI434" not in _rules(path=_script(tmp_path, body))


def test_ray_start_that_sizes_itself_is_clean(tmp_path):
    body = "ray start --head --num-gpus=8\n" + LAUNCH.format(gpus=8, extra="")
    assert "VI434" not in _rules(path=_script(tmp_path, body))


def test_the_table_matches_verls_count_on_two_nodes():
    t = cpu_table()
    per_gpu = {b["CPU"] for b in _verl_bundles({"global_pool": [8, 8]})}
    need = per_gpu.pop() * 16 + t["num_data_storage_units_default"] + t["tq_controller_cpus"]
    assert need == 57


def test_fix_lowers_the_storage_units_and_leaves_a_cpu_free():
    report = check(None, ["trainer.n_gpus_per_node=1", "trainer.nnodes=1", "ray_kwargs.ray_init.num_cpus=8"],
                   defaults="snapshot")
    fixes = [f.fix for f in report.findings if f.problem.rule == "VI434"]
    assert fixes and fixes[0] is not None
    units = fixes[0].set["transfer_queue.backend.SimpleStorage.num_data_storage_units"]
    t = cpu_table()
    assert t["cpus_per_gpu"] + units + t["tq_controller_cpus"] + 1 == 8
    fixed = ["trainer.n_gpus_per_node=1", "trainer.nnodes=1", "ray_kwargs.ray_init.num_cpus=8",
             f"transfer_queue.backend.SimpleStorage.num_data_storage_units={units}"]
    assert "VI434" not in _rules(fixed)
