"""What `smoke --engine verl-workers` needs around verl 0.9.1's engine workers where verl cannot run them as shipped;
each function returns the lines the report names ("shims"), so nothing here is silent.

- install_cpu_platform (device cpu only): verl 0.9.1 ships no CPU platform — a machine without an accelerator is
  treated as nvidia (verl/plugin/platform/platform_manager.py:117) — and registers its FSDP engines for cuda and npu
  only (verl/workers/engine/fsdp/transformer_impl.py:1143, 1594). A CPU platform is registered through verl's own
  plugin registry (PlatformRegistry.register, selected by VERL_PLATFORM=cpu), the FSDP engine is picked through
  verl's VERL_ENGINE_DEVICE override (verl/workers/engine/base.py:405), and two torch checks without a CPU
  counterpart are relaxed (FSDP's sync_module_states device check, pin_memory for the reference's CPU offload:
  transformer_impl.py:444, 462). verl asks for the process group "cpu:gloo,<device>:<backend>"
  (verl/utils/distributed.py:89), which torch refuses for the device cpu; verl skips it when a group exists, so the
  same world is opened first with gloo.
- absent_server_modules: verl/workers/engine_workers.py imports verl.checkpoint_engine, which imports the rollout
  servers' uvicorn and fastapi (verl/workers/rollout/utils.py:20-22; verl[verl-core]). No server is started here;
  where they are not installed, placeholders that fail if ever called stand in.
- critic_attention_patch: verl 0.9.1 loads a critic with attn_implementation="flash_attention_2" written into the
  call (verl/utils/model.py load_valuehead_model), whatever the config says; without flash_attn the critic gets sdpa,
  as the actor has through its override_config.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from typing import Any


def flash_attn_installed() -> bool:
    return importlib.util.find_spec("flash_attn") is not None


def absent_server_modules() -> list[str]:
    class _Absent:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("uvicorn/fastapi are not installed: verl's rollout servers cannot start here")

    def attr(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Absent

    done = []
    for name in ("uvicorn", "fastapi"):
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            mod = types.ModuleType(name)
            mod.__getattr__ = attr  # type: ignore[attr-defined]
            sys.modules[name] = mod
            done.append(name)
    if not done:
        return []
    return [f"{' and '.join(done)} not installed (verl[verl-core], used by the rollout servers only): placeholders "
            "let verl/workers/engine_workers.py import"]


def critic_attention_patch() -> list[str]:
    if flash_attn_installed():
        return []
    import transformers

    auto = transformers.AutoModelForTokenClassification
    original = auto.from_pretrained.__func__

    def from_pretrained(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("attn_implementation") == "flash_attention_2":
            kwargs["attn_implementation"] = "sdpa"
        return original(cls, *args, **kwargs)

    auto.from_pretrained = classmethod(from_pretrained)
    return ["critic loaded with attn_implementation=sdpa (verl/utils/model.py asks for flash_attention_2; "
            "flash_attn is not installed)"]


def _device_module() -> types.ModuleType:
    import torch

    class _CPUDevice(types.ModuleType):
        """torch.cpu, plus the torch.cuda memory calls verl makes (no device memory on a CPU: zeros)."""

        def __getattr__(self, name: str) -> Any:
            if hasattr(torch.cpu, name):
                return getattr(torch.cpu, name)
            if name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
                return lambda *a, **k: 0
            if name == "mem_get_info":
                return lambda *a, **k: (0, 0)
            if name == "get_device_name":
                return lambda *a, **k: "CPU"
            if name in ("empty_cache", "reset_peak_memory_stats", "reset_accumulated_memory_stats", "manual_seed",
                        "manual_seed_all", "set_device", "ipc_collect"):
                return lambda *a, **k: None
            raise AttributeError(f"cpu device module: {name}")

    return _CPUDevice("verl_init_cpu_device")


def install_cpu_platform() -> list[str]:
    import torch
    import torch.distributed.fsdp._init_utils as fsdp_init

    from verl.plugin.platform.platform_base import PlatformBase
    from verl.plugin.platform.platform_manager import PlatformRegistry

    dev = _device_module()

    class _DeviceId(str):
        """The id verl passes to .to()/FSDP ("cpu") that also formats as an index where verl writes
        f"{device_name}:{device_id}" (verl/utils/fsdp_utils.py load_fsdp_model_to_gpu)."""

        def __format__(self, spec: str) -> str:
            return "0"

    none = staticmethod(lambda *a, **k: None)

    @PlatformRegistry.register(platform="cpu")
    class PlatformCPU(PlatformBase):  # noqa: F841 - registered
        device_name, vendor_name, device_module = "cpu", "cpu", dev
        is_available = staticmethod(lambda *a, **k: True)
        current_device = staticmethod(lambda *a, **k: _DeviceId("cpu"))
        device_count = staticmethod(lambda *a, **k: 1)
        set_device = synchronize = set_allocator_settings = empty_cache = none
        profiler_start = profiler_stop = cudart = none
        get_device_capability = staticmethod(lambda *a, **k: (None, None))
        communication_backend_name = staticmethod(lambda *a, **k: "gloo")
        visible_devices_envvar = staticmethod(lambda *a, **k: "CUDA_VISIBLE_DEVICES")
        ray_resource_name = staticmethod(lambda *a, **k: "CPU")
        ray_noset_envvars = staticmethod(lambda *a, **k: [])
        is_ipc_supported = staticmethod(lambda *a, **k: False)

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        manual_seed_all = manual_seed

        def nvtx_range(self, msg: str) -> Any:
            import contextlib

            return contextlib.nullcontext()

    os.environ["VERL_PLATFORM"] = "cpu"
    os.environ["VERL_ENGINE_DEVICE"] = "cuda"
    fsdp_init._check_module_states_for_sync_module_states = lambda states: None
    torch.Tensor.pin_memory = lambda self, *a, **k: self  # type: ignore[method-assign]
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="cpu:gloo", rank=int(os.environ.get("RANK", "0")),
                                             world_size=int(os.environ.get("WORLD_SIZE", "1")))
    return ["CPU platform registered through verl's plugin registry (verl 0.9.1 has none; its FSDP engine is "
            "registered for cuda/npu only), gloo process group, FSDP's sync_module_states device check and "
            "pin_memory relaxed"]
