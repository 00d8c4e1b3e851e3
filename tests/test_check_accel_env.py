"""VI944-VI946: what a launch exports or asks for on the accelerator it runs on (wizard/check/rules/accel_env.py,
wizard/check/rules/deepep.py). Each fault is planted beside a valid control; the oracle is verl's own code where it
runs on a CPU: the device set-up every verl worker runs inside its Ray actor (with Ray's own AMD manager giving the
actor its device) for VI944, verl's Ray runtime env and FSDP engine for VI945, verl's Megatron engine's hand-over of
override_transformer_config for VI946.
"""

from __future__ import annotations

import inspect

import pytest

from wizard.check import bashtrace
from wizard.check.lint import check
from wizard.check.rules.accel_env import GEFORCE
from wizard.check.rules.deepep import deepep_keys

LAUNCH = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
          "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct actor_rollout_ref.rollout.name=vllm "
          "data.train_files=/shared/data/train.parquet data.val_files=/shared/data/test.parquet "
          "data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=32 "
          "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 "
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.n=4 "
          "trainer.logger=console trainer.n_gpus_per_node={gpn} trainer.nnodes=1\n")
needs_bash = pytest.mark.skipif(not bashtrace.available(), reason="needs bubblewrap (bash's run of the script)")
DEVICES = "0,1,2,3,4,5,6,7"
VISIBLE = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
           "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
           "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES")


def _hits(tmp_path, script: str, rule: str, **kw):
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\n" + script, encoding="utf-8")
    return [f.problem for f in check(str(path), **kw).findings if f.problem.rule == rule]


# --- VI944: the ROCm visible-device variables --------------------------------------------------------------------

@pytest.fixture(autouse=True)
def _environ_restored():
    """Ray's device managers and verl's Worker write os.environ themselves (CUDA_VISIBLE_DEVICES=3, ...), which
    monkeypatch cannot undo for a variable that was absent: without this a later test in the same process starts Ray
    with one visible GPU ("Attempting to start raylet with 4 GPU, but CUDA_VISIBLE_DEVICES contains ['3']")."""
    import os

    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def _worker_setup(monkeypatch, exported: dict[str, str], actor_device: str = "3") -> None:
    """What one verl worker does with `exported` on a ROCm node: Ray's AMD manager gives the actor its GPU
    (ray/_private/accelerators/amd_gpu.py set_current_process_visible_accelerator_ids), then verl's Worker sets up
    the device (single_controller/base/worker.py _setup_env_cuda_visible_devices). Raises where verl does."""
    from ray._private.accelerators.amd_gpu import AMDGPUAcceleratorManager
    from verl.single_controller.base.worker import Worker

    for k in VISIBLE:
        monkeypatch.delenv(k, raising=False)
    for k, v in exported.items():
        monkeypatch.setenv(k, v)
    if "ROCR_VISIBLE_DEVICES" in exported and "HIP_VISIBLE_DEVICES" not in exported:
        with pytest.raises(RuntimeError, match="instead of ROCR_VISIBLE_DEVICES"):  # Ray refuses it by itself
            AMDGPUAcceleratorManager.set_current_process_visible_accelerator_ids([actor_device])
        raise RuntimeError("Ray refused ROCR_VISIBLE_DEVICES")
    AMDGPUAcceleratorManager.set_current_process_visible_accelerator_ids([actor_device])
    Worker._setup_env_cuda_visible_devices(object())


@pytest.mark.verl
@pytest.mark.parametrize(("exported", "error"), [
    ({"ROCR_VISIBLE_DEVICES": DEVICES, "HIP_VISIBLE_DEVICES": DEVICES}, ValueError),  # verl#1471's exports
    ({"ROCR_VISIBLE_DEVICES": DEVICES, "CUDA_VISIBLE_DEVICES": DEVICES}, RuntimeError),
    ({"HIP_VISIBLE_DEVICES": DEVICES, "CUDA_VISIBLE_DEVICES": DEVICES}, AssertionError),  # equal, yet Ray's differs
    ({"HIP_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "2,3",
      "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1"}, AssertionError),
    ({"CUDA_VISIBLE_DEVICES": DEVICES}, AssertionError),  # CUDA's list on a ROCm node, Ray sets HIP per actor
])
def test_verls_worker_rejects_the_planted_exports(monkeypatch, exported, error):
    with pytest.raises(error):
        _worker_setup(monkeypatch, exported)


@pytest.mark.verl
@pytest.mark.parametrize("exported", [
    {}, {"HIP_VISIBLE_DEVICES": DEVICES},  # Ray narrows HIP to the actor's device; verl copies it to CUDA
    {"HIP_VISIBLE_DEVICES": DEVICES, "CUDA_VISIBLE_DEVICES": DEVICES,
     "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1"},
])
def test_verls_worker_accepts_the_controls(monkeypatch, exported):
    import os

    from verl.utils import ray_utils

    monkeypatch.setattr(ray_utils, "ray_noset_visible_devices", lambda *a, **k: False)  # no Ray runtime context here
    _worker_setup(monkeypatch, exported)
    assert os.environ["CUDA_VISIBLE_DEVICES"] in ("3", DEVICES)


@needs_bash
@pytest.mark.parametrize(("exports", "gpu_type", "names"), [
    (f"export ROCR_VISIBLE_DEVICES={DEVICES}\nexport HIP_VISIBLE_DEVICES={DEVICES}\n", None, "ROCR_VISIBLE_DEVICES"),
    (f"export HIP_VISIBLE_DEVICES={DEVICES}\nexport CUDA_VISIBLE_DEVICES={DEVICES}\n", None, "never match"),
    ("export HIP_VISIBLE_DEVICES=0,1\nexport CUDA_VISIBLE_DEVICES=2,3\n", None, "(0,1 vs 2,3)"),
    (f"export CUDA_VISIBLE_DEVICES={DEVICES}\n", "MI300X", "never match"),
])
def test_vi944_fires(tmp_path, exports, gpu_type, names):
    [hit] = _hits(tmp_path, exports + LAUNCH.format(gpn=8), "VI944", gpu_type=gpu_type)
    assert hit.severity == "error" and names in hit.message and "verl#1471" in hit.message
    assert "HIP_VISIBLE_DEVICES alone" in hit.hint


@needs_bash
@pytest.mark.parametrize(("exports", "gpu_type"), [
    (f"export HIP_VISIBLE_DEVICES={DEVICES}\n", "MI300X"),  # HIP alone: Ray narrows it, verl copies it
    (f"export CUDA_VISIBLE_DEVICES={DEVICES}\n", None),  # an NVIDIA launch
    (f"export CUDA_VISIBLE_DEVICES={DEVICES}\n", "H100"),
    (f"export HIP_VISIBLE_DEVICES={DEVICES}\nexport CUDA_VISIBLE_DEVICES={DEVICES}\n"
     "export RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=1\n", "MI300X"),  # Ray leaves the equal lists alone
    (f"export ROCR_VISIBLE_DEVICES={DEVICES}\nexport HIP_VISIBLE_DEVICES={DEVICES}\n"
     "ray job submit --address=http://h:8265 -- ", "MI300X"),  # a running cluster's workers took their own env
])
def test_vi944_silent(tmp_path, exports, gpu_type):
    assert not _hits(tmp_path, exports + LAUNCH.format(gpn=8), "VI944", gpu_type=gpu_type)


# --- VI945: GeForce cards and NCCL's peer-to-peer switch ---------------------------------------------------------

@pytest.mark.verl
def test_verl_sets_no_peer_to_peer_switch_and_broadcasts_at_wrap():
    """The oracle for what verl does on its own: its Ray runtime env carries no NCCL peer-to-peer switch, and its FSDP
    engine broadcasts the weights over NCCL while it wraps the model (FSDP1 sync_module_states, FSDP2
    set_model_state_dict from rank 0)."""
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env
    from verl.utils import fsdp_utils
    from verl.workers.engine.fsdp import transformer_impl

    env = get_ppo_ray_runtime_env()["env_vars"]
    assert not {"NCCL_P2P_DISABLE", "NCCL_CUMEM_HOST_ENABLE", "NCCL_P2P_LEVEL"} & set(env)
    assert "sync_module_states=True" in inspect.getsource(transformer_impl)
    assert "broadcast_from_rank0=True" in inspect.getsource(fsdp_utils.fsdp2_load_full_state_dict)


@pytest.mark.parametrize(("name", "geforce"), [
    ("NVIDIA GeForce RTX 4090", True), ("RTX 5090", True), ("NVIDIA GeForce RTX 3090 Ti", True), ("rtx-4090d", True),
    ("GTX 1080 Ti", True), ("RTX 2080", True),
    ("NVIDIA RTX A6000", False), ("RTX 6000 Ada", False), ("Quadro RTX 6000", False), ("NVIDIA RTX PRO 6000", False),
    ("NVIDIA A100-SXM4-80GB", False), ("L40S", False), ("H100", False),
])
def test_geforce_names(name, geforce):
    assert bool(GEFORCE.search(name.lower())) is geforce


@needs_bash
def test_vi945_fires_for_geforce_without_the_switch(tmp_path):
    [hit] = _hits(tmp_path, LAUNCH.format(gpn=4), "VI945", gpu_type="NVIDIA GeForce RTX 5090")
    assert hit.severity == "warning" and "× 4" in hit.message and "verl#2803" in hit.message
    assert "NCCL_P2P_DISABLE=1" in hit.hint


@needs_bash
@pytest.mark.parametrize(("script", "gpu_type"), [
    ("export NCCL_P2P_DISABLE=1\n" + LAUNCH.format(gpn=4), "RTX 4090"),
    ("export NCCL_CUMEM_HOST_ENABLE=0\n" + LAUNCH.format(gpn=4), "RTX 4090"),
    ("NCCL_P2P_LEVEL=LOC " + LAUNCH.format(gpn=4), "RTX 4090"),
    (LAUNCH.format(gpn=1), "RTX 4090"),  # one GPU: no collective between cards
    (LAUNCH.format(gpn=8), "H100"),  # NVLink/NVSwitch cards
    (LAUNCH.format(gpn=8), "NVIDIA RTX A6000"),  # workstation cards have peer access
    ("ray job submit --address=http://h:8265 -- " + LAUNCH.format(gpn=4), "RTX 4090"),  # the cluster's env
])
def test_vi945_silent(tmp_path, script, gpu_type):
    assert not _hits(tmp_path, script, "VI945", gpu_type=gpu_type)


@needs_bash
def test_vi945_still_fires_for_a_switch_that_keeps_p2p_on(tmp_path):
    assert _hits(tmp_path, "export NCCL_P2P_DISABLE=0\n" + LAUNCH.format(gpn=4), "VI945", gpu_type="RTX 4090")


# --- VI946: DeepEP on a card below Hopper -------------------------------------------------------------------------

MEG = "actor_rollout_ref.actor.megatron.override_transformer_config"
MEGATRON = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B",
            "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.actor.strategy=megatron",
            "actor_rollout_ref.ref.strategy=megatron", "data.train_batch_size=64",
            "actor_rollout_ref.actor.ppo_mini_batch_size=32", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1", "actor_rollout_ref.rollout.n=4",
            "actor_rollout_ref.actor.megatron.expert_model_parallel_size=8", "trainer.n_gpus_per_node=8",
            "trainer.nnodes=1"]


def _deepep_hits(*extra: str, gpu_type: str | None = "NVIDIA A800-SXM4-80GB"):
    return [f.problem for f in check(None, [*MEGATRON, *extra], gpu_type=gpu_type).findings
            if f.problem.rule == "VI946"]


@pytest.mark.verl
def test_verls_megatron_engine_hands_the_override_to_megatron():
    """The oracle for the keys VI946 reads: verl's Megatron engine copies every override_transformer_config entry
    onto Megatron's provider over its own alltoall default, unchecked."""
    import importlib.util
    from pathlib import Path

    # read, not imported: the engine imports Megatron-LM, which a CPU box need not have
    src = Path(importlib.util.find_spec("verl").submodule_search_locations[0], "workers", "engine", "megatron",
               "transformer_impl.py").read_text(encoding="utf-8")
    assert '"moe_token_dispatcher_type": "alltoall"' in src
    assert ("for key, value in override_transformer_config.items():\n"
            "                provider_overrides[key] = value") in src


def test_vi946_fires_below_hopper():
    [hit] = _deepep_hits(f"+{MEG}.moe_enable_deepep=True", f"+{MEG}.moe_token_dispatcher_type=flex")
    assert hit.severity == "warning" and "compute capability 8.0" in hit.message and "verl#4479" in hit.message
    assert set(hit.keys) == {f"{MEG}.moe_enable_deepep", f"{MEG}.moe_token_dispatcher_type"}
    assert "alltoall" in hit.hint
    assert _deepep_hits(f"+{MEG}.moe_token_dispatcher_type=flex", gpu_type="L40S")


@pytest.mark.parametrize(("extra", "gpu_type"), [
    ((f"+{MEG}.moe_enable_deepep=True", f"+{MEG}.moe_token_dispatcher_type=flex"), "H100"),  # Hopper
    ((f"+{MEG}.moe_enable_deepep=True",), "B200"),
    ((f"+{MEG}.moe_token_dispatcher_type=alltoall",), "A100"),  # verl's default dispatcher
    ((f"+{MEG}.moe_enable_deepep=True",), None),  # no card given
    ((f"+{MEG}.moe_enable_deepep=True",), "MI300X"),  # not an NVIDIA card verl-init knows a capability of
])
def test_vi946_silent(extra, gpu_type):
    assert not _deepep_hits(*extra, gpu_type=gpu_type)


def test_deepep_keys_cover_the_automodel_dispatcher():
    flat = {"engine.backend_config.dispatcher": "deepep", "x.override_transformer_config.moe_enable_deepep": False,
            "y.override_transformer_config.moe_token_dispatcher_type": "alltoall"}
    assert deepep_keys(flat) == ["engine.backend_config.dispatcher"]
