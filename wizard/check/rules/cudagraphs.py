"""The rollout engine's CUDA graphs in verl 0.9.1 (paths under site-packages/verl).

- VI921 (info): rollout.enforce_eager=True with vLLM or SGLang, typically beside free_cache_engine=True "to free
  memory for the actor update" (verl#1414; eager mode was needed for sleep only with vLLM <= 0.6 in old verl).
  verl passes the flag straight to the engine: vLLM's `enforce_eager` (workers/rollout/vllm_rollout/
  vllm_async_server.py:339; the cudagraph_mode FULL_AND_PIECEWISE set at :310 is then unused), SGLang's
  `disable_cuda_graph` (sglang_rollout/async_sglang_server.py:318), so every decode step launches its kernels from
  the host. Freeing the engine does not depend on it: release() / sleep() read only free_cache_engine
  (vllm_rollout/vllm_rollout.py:204-207, vllm_async_server.py:853-861; sglang_rollout.py:285-299), and nothing in
  verl reads enforce_eager anywhere else. What eager mode does save is the CUDA-graph pool, which stays on the GPU
  through the update (trainer/config/rollout/rollout.yaml:54-57); verl's own knob for that is
  rollout.cudagraph_capture_sizes, fewer captured batch sizes (vLLM only: vllm_async_server.py:321-322).
  Not on Ascend NPUs (trainer.device=npu), where the engines' graph modes differ.
"""

from __future__ import annotations

from wizard.check.rules.context import R, Ctx, Facts
from wizard.verlspec.hardware import accelerator_of_gpu_type

GRAPH_ENGINES = {  # rollout.name -> the engine argument verl sets from enforce_eager
    "vllm": "enforce_eager (vllm_async_server.py:339)",
    "sglang": "disable_cuda_graph (async_sglang_server.py:318)",
}


def rule_enforce_eager(c: Ctx, f: Facts) -> None:
    name = c.v(f"{R}.name")
    if c.v(f"{R}.enforce_eager") is not True or name not in GRAPH_ENGINES:
        return
    if c.v("trainer.device") == "npu" or (c.hw.gpu_type and accelerator_of_gpu_type(c.hw.gpu_type) == "ascend"):
        return
    free = c.v(f"{R}.free_cache_engine") is not False
    sleep = (f"; {R}.free_cache_engine=True frees weights and KV cache without it: verl's sleep reads only "
             "free_cache_engine (vllm_rollout.py:204-207, vllm_async_server.py:853-861)") if free else ""
    trim = (f"keep CUDA graphs and, if the graph memory kept through the update matters, list fewer batch sizes in "
            f"{R}.cudagraph_capture_sizes (e.g. [1, 2, 4, 8, 16, 32], rollout.yaml:54-57)" if name == "vllm" else
            "keep CUDA graphs unless the graph memory SGLang keeps through the update is what does not fit")
    c.add("VI921", "info", (f"{R}.enforce_eager", f"{R}.free_cache_engine"),
          f"{R}.enforce_eager=True turns {name}'s CUDA graphs off ({GRAPH_ENGINES[name]}): every decode step "
          f"launches its kernels from the host, which slows generation, most for small models and small batches"
          f"{sleep}. Eager mode saves only the CUDA-graph memory",
          f"remove {R}.enforce_eager (verl's default False, rollout.yaml:51-52); {trim}")
