"""A colocated rollout engine that never sleeps, in verl 0.9.1 (paths under site-packages/verl).

- VI947 (warning): rollout.free_cache_engine=False (or reward.reward_model.rollout.free_cache_engine=False for a
  judge served beside the policy) while the engine shares its GPUs with the trainer (the hybrid engine of
  main_ppo; not the one-step-off / fully-async trainers whose rollout has GPUs of its own,
  rollout.nnodes × rollout.n_gpus_per_node). verl's release/sleep of the engine is gated on that flag alone:
  vLLM's server returns from sleep() before freeing anything (workers/rollout/vllm_rollout/
  vllm_async_server.py:854, also :878, :887), its adapter skips release/resume (vllm_rollout/vllm_rollout.py:
  201-207), the worker skips the resume (workers/engine_workers.py:777-780, 818), and SGLang / TRT-LLM do the same
  (sglang_rollout/async_sglang_server.py:505, trtllm_rollout/trtllm_async_server.py:445, 467). So the engine's
  weights and the KV cache it reserved (gpu_memory_utilization × the card) stay on every GPU while the actor
  computes log-probs and updates: the trainer gets only the rest of the card. verl's default is True
  (workers/config/rollout.py:190) and verl accepts False without a word (RolloutConfig takes it), so the run
  starts and runs out of memory, or gets a much smaller token budget, at the first update. Real case: verl's own
  Ascend VL example shipped free_cache_engine=False and went out of memory (verl PR#2459 flips it to True).
"""

from __future__ import annotations

from wizard.check.rules.context import R, Ctx, Facts

ENGINES = {  # rollout.name -> where verl skips the engine's sleep on free_cache_engine=False
    "vllm": "vllm_async_server.py:854",
    "sglang": "async_sglang_server.py:505",
    "trtllm": "trtllm_async_server.py:445",
}
RM = "reward.reward_model"


def _colocated(c: Ctx) -> bool:
    """The policy's engine shares the trainer's GPUs (main_ppo's hybrid engine)."""
    if c.v("actor_rollout_ref.hybrid_engine") is False:
        return False
    own = (c.int("rollout.nnodes") or 0) * (c.int("rollout.n_gpus_per_node") or 0)
    return own == 0


def _reserved(c: Ctx, gmu: object) -> str:
    gb = getattr(c.hw, "gpu_memory_gb", None)
    if isinstance(gmu, (int, float)) and 0 < gmu <= 1 and gb:
        return f" ({gmu} × {gb:g} GB ≈ {gmu * gb:.0f} GB a GPU)"
    return ""


def rule_free_cache_engine(c: Ctx, f: Facts) -> None:
    roles = []
    if _colocated(c):
        roles.append((R, "rollout"))
    if bool(c.v(f"{RM}.enable")) and not bool(c.v(f"{RM}.enable_resource_pool")):
        roles.append((f"{RM}.rollout", "reward model's"))
    for base, who in roles:
        key = f"{base}.free_cache_engine"
        name = c.v(f"{base}.name") or ("vllm" if base == R else None)
        if c.v(key) is not False or name not in ENGINES:
            continue
        gmu = c.v(f"{base}.gpu_memory_utilization")
        c.add("VI947", "warning", (key, f"{base}.gpu_memory_utilization"),
              f"{key}=False: the {who} {name} engine shares the trainer's GPUs and verl never puts it to sleep "
              f"({ENGINES[name]}), so its weights and the KV cache it reserved with gpu_memory_utilization={gmu}"
              f"{_reserved(c, gmu)} stay on every GPU through log-prob and the actor update",
              f"remove {key} (verl's default True, workers/config/rollout.py:190) so the engine frees its memory "
              "after generating")
