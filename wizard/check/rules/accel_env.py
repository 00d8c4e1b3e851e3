"""What a launch script exports for the accelerator its workers run on: the ROCm visible-device variables (VI944)
and NCCL's peer-to-peer switches on GeForce cards (VI945). The values come from bash's run of the script
(wizard.check.bashtrace keeps these variables' values); nothing fires when verl joins a cluster the script did not
start (`ray job submit`, RAY_ADDRESS, ray_init.address with no `ray start` in the script): its workers took their
environment where `ray start` ran.

VI944 (error): a ROCm launch that exports ROCR_VISIBLE_DEVICES beside HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES,
or CUDA_VISIBLE_DEVICES beside HIP_VISIBLE_DEVICES. Every verl worker runs
`Worker._setup_env_cuda_visible_devices` when it is built inside its Ray actor (verl 0.9.1
single_controller/base/worker.py:231-278, after Ray has placed the actor on its GPUs):
- :240-253 moves HIP_VISIBLE_DEVICES into CUDA_VISIBLE_DEVICES and asserts the two are equal ("Please use the same
  HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES, inconsistant values found"). Ray 2.60 (installed beside verl 0.9.1)
  sets each GPU actor's own HIP_VISIBLE_DEVICES (ray/_private/accelerators/amd_gpu.py:115-124) unless
  RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES is true, while an exported CUDA_VISIBLE_DEVICES is inherited as it is:
  the actor's one device never equals the exported list, so the assertion fails even for equal exported values;
- :256-267 raises ValueError("Please don't set ROCR_VISIBLE_DEVICES when HIP/CUDA_VISIBLE_DEVICES is set.").
  Ray's own AMD manager also refuses ROCR_VISIBLE_DEVICES without HIP_VISIBLE_DEVICES (amd_gpu.py:41-50).
The ROCm variables name a ROCm launch by themselves; CUDA_VISIBLE_DEVICES alone counts only with an AMD --gpu-type.
verl#1471 (MI300, HIP/CUDA/ROCR visible devices exported by hand).

VI945 (warning): --gpu-type names a GeForce card (RTX 20/30/40/50 series, GTX 10 series: no NVLink switch and no
peer access over PCIe on the 40/50 series) and the run spans more than one GPU, while the launch exports neither
NCCL_P2P_DISABLE=1 nor NCCL_CUMEM_HOST_ENABLE=0 (nor NCCL_P2P_LEVEL=LOC/0). verl 0.9.1 sets no peer-to-peer variable
for its workers (trainer/constants_ppo.py:85-101 PPO_RAY_RUNTIME_ENV; plugin/platform/platform_cuda.py:152 sets only
NCCL_CUMEM_ENABLE for the rollout), and its FSDP engine broadcasts the weights over NCCL while it wraps the model
(workers/engine/fsdp/transformer_impl.py:444 sync_module_states=True; FSDP2: utils/fsdp_utils.py:499-513
set_model_state_dict with broadcast_from_rank0). On these cards NCCL stops there with "Cuda failure 217 'peer access
is not supported between these two devices'" (verl#2803 on RTX 5090, verl#1874 on RTX 4090); the reporters' fixes are
NCCL_P2P_DISABLE=1 or NCCL_CUMEM_HOST_ENABLE=0 (vLLM's troubleshooting page names the latter for PCIe machines).
A warning: a driver that reports no peer access lets NCCL fall back to shared memory by itself.
"""

from __future__ import annotations

import re

from wizard.check.rules.cluster import joins_cluster, script_commands
from wizard.check.rules.context import Ctx, Facts
from wizard.check.rules.scriptcluster import RAY_START
from wizard.verlspec.hardware import accelerator_of_gpu_type

HIP, ROCR, CUDA = "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"
NOSET_HIP = "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"
TRUE = ("1", "true", "yes", "on")  # ray._private.ray_constants.env_bool
# GeForce numbering: GTX 10x0, RTX 20x0 / 30x0 / 40x0 / 50x0 (workstation cards end in 000: RTX 6000 Ada, A6000)
GEFORCE = re.compile(r"geforce|(?<![a-z0-9])(?:rtx|gtx)[\s_-]*[1-5]0[5-9]0(?![0-9])")


def _exported(c: Ctx) -> dict[str, str]:
    """The traced variables the launch gets, or {} where its workers do not inherit them (a cluster it joins)."""
    ex = c.src.extraction
    if ex is None or not ex.temp_env:
        return {}
    if joins_cluster(c) and not RAY_START.search(script_commands(c)):
        return {}
    return dict(ex.temp_env)


def rule_rocm_visible_devices(c: Ctx, f: Facts) -> None:
    """VI944."""
    env = {k: v for k, v in _exported(c).items() if v != ""}
    amd = accelerator_of_gpu_type(c.hw.gpu_type or "") == "amd"
    if not (HIP in env or ROCR in env or (amd and CUDA in env)):
        return
    where = "verl's workers stop while each sets up its device, after Ray has placed them on the GPUs"
    if ROCR in env and (HIP in env or CUDA in env):
        other = HIP if HIP in env else CUDA
        c.add("VI944", "error", (ROCR, other),
              f"{ROCR}={env[ROCR]} is exported together with {other}={env[other]}: {where} with \"Please don't set "
              "ROCR_VISIBLE_DEVICES when HIP/CUDA_VISIBLE_DEVICES is set.\" (single_controller/base/worker.py:256-267, "
              "verl#1471)",
              f"drop `export {ROCR}` (ROCm images often set it in the shell's profile: `unset {ROCR}`) and name the "
              f"GPUs with {HIP} alone")
        return
    if not (CUDA in env and (HIP in env or amd)):
        return
    noset = env.get(NOSET_HIP, "").lower() in TRUE
    if HIP in env and env[HIP] != env[CUDA]:
        why = f"the two differ ({env[HIP]} vs {env[CUDA]})"
    elif not noset:
        why = (f"Ray gives each GPU actor its own {HIP} (ray/_private/accelerators/amd_gpu.py:115-124) while the "
               f"exported {CUDA}={env[CUDA]} is inherited as it is, so the two never match")
    else:
        return  # Ray leaves the exported HIP list alone and it equals CUDA's
    c.add("VI944", "error", (CUDA, HIP),
          f"{CUDA}={env[CUDA]} is exported to a ROCm launch" + (f" beside {HIP}={env[HIP]}" if HIP in env else "")
          + f": {where} with \"Please use the same HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES, inconsistant values "
          f"found\" (single_controller/base/worker.py:240-253): {why} (verl#1471)",
          f"drop `export {CUDA}` on ROCm and name the GPUs with {HIP} alone; leave {NOSET_HIP} unset so Ray assigns "
          "each worker its device")


def _p2p_off(env: dict[str, str]) -> bool:
    return (env.get("NCCL_P2P_DISABLE", "").strip() == "1" or env.get("NCCL_CUMEM_HOST_ENABLE", "").strip() == "0"
            or env.get("NCCL_P2P_LEVEL", "").strip().upper() in ("LOC", "0"))


def rule_geforce_p2p(c: Ctx, f: Facts) -> None:
    """VI945."""
    card = c.hw.gpu_type or ""
    if not GEFORCE.search(card.lower()) or c.src.extraction is None:
        return
    gpus = sum(c.hw.per_node) if c.hw.per_node else (c.hw.nnodes or f.nnodes or 1) * (c.hw.gpus_per_node or f.gpn or 1)
    if gpus <= 1 or (joins_cluster(c) and not RAY_START.search(script_commands(c))):
        return
    if _p2p_off(_exported(c)) or _p2p_off({k: v for k, v in c.env.items() if k.startswith("NCCL_")}):
        return
    c.add("VI945", "warning", ("NCCL_P2P_DISABLE",),
          f"{card} × {gpus}: GeForce cards have no peer access between GPUs, and the launch exports neither "
          "NCCL_P2P_DISABLE=1 nor NCCL_CUMEM_HOST_ENABLE=0; verl sets neither (trainer/constants_ppo.py:85-101) and "
          "its FSDP engine broadcasts the weights over NCCL when it wraps the model (fsdp/transformer_impl.py:444, "
          "utils/fsdp_utils.py:499-513), where NCCL can stop with \"Cuda failure 217 'peer access is not supported "
          "between these two devices'\" (verl#2803, verl#1874)",
          "add `export NCCL_P2P_DISABLE=1` (or `export NCCL_CUMEM_HOST_ENABLE=0`) before the launch")
