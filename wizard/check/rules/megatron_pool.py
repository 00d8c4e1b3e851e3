"""Megatron engines that share one process must share one parallel layout (VI779, error).

verl 0.9.1 (paths under site-packages/verl):

- Which roles share a process: the PPO trainer maps the actor(-rollout-ref), a separate reference worker and the
  critic all to "global_pool" (trainer/ppo/v1/trainer_base.py:795-814, the same in ray_trainer.py) and fuses every
  class of one pool into one Ray actor per GPU with create_colocated_worker_cls (trainer_base.py:306-309;
  ray_trainer.py:870-873). Only the reward model can get a pool of its own (reward.reward_model.enable_resource_pool,
  trainer_base.py:822-835), and in 0.9.1 it is served by the reward loop's rollout servers
  (experimental/reward_loop/), not by a Megatron training engine, so no reward-model layout is compared here.
- What goes wrong: every Megatron engine calls MegatronEngine._init_device_mesh from its __init__
  (workers/engine/megatron/transformer_impl.py:193), and that returns at once when megatron-core's parallel state is
  already set up (`if mpu.is_initialized(): ... return`, :244-256, under verl's own
  `# TODO: set different parallelism for actor, critic, ref`, :240). The first engine built fixes TP/PP/VPP/CP/EP/ETP
  for the process: the critic's TrainingWorker builds its engine at spawn (workers/engine_workers.py:136-146), before
  ActorRolloutRefWorker.init_model builds the reference engine and then the actor's (engine_workers.py:539-610). A
  later engine keeps the first one's process groups while building its TransformerConfig and model for its own sizes
  (verl#653: a Megatron reward model beside a PP>1 actor broke the actor's pipeline schedule).
- dynamic_context_parallel: only one direction is caught by verl: a later engine with it on, over groups made without
  it, raises RuntimeError (:245-255); the other direction is silent.

The reference model interpolates every size from the actor (trainer/config/ref/megatron_ref.yaml:29-38), so it
differs only when set by hand; the critic does not (trainer/config/critic/megatron_critic.yaml: its own defaults,
TP=PP=1), the R24-05 case.
"""

from __future__ import annotations

from wizard.check.rules.context import REF, A, Ctx, Facts

SIZES = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
         "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size",
         "dynamic_context_parallel")
# megatron-core's defaults for an unset size (ETP null means "same as TP": parallel_state.py, verl engine yaml)
_DEFAULTS = {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "context_parallel_size": 1,
             "expert_model_parallel_size": 1, "dynamic_context_parallel": False}


def _layout(c: Ctx, prefix: str) -> dict[str, object] | None:
    keys = [f"{prefix}.{s}" for s in SIZES]
    if c.unknown(*keys):
        return None
    out: dict[str, object] = {}
    for s in SIZES:
        v = c.v(f"{prefix}.{s}")
        if v is None:
            v = _DEFAULTS.get(s)
        if s == "virtual_pipeline_model_parallel_size" and v == 1:
            v = None  # one virtual stage is no interleaving
        out[s] = v
    if out["expert_tensor_parallel_size"] is None:  # "null to be same as TP" (trainer/config/engine/megatron.yaml)
        out["expert_tensor_parallel_size"] = out["tensor_model_parallel_size"]
        out["_etp_derived"] = True
    return out


def megatron_engines(c: Ctx, f: Facts) -> list[tuple[str, str]]:
    """(role, config prefix) of each Megatron engine verl builds in the global pool's processes, in build order."""
    out = []
    if f.use_critic and c.v("critic.strategy") == "megatron":
        out.append(("critic", "critic.megatron"))
    lora = (c.int("actor_rollout_ref.model.lora.rank") or c.int("actor_rollout_ref.model.lora_rank") or 0) > 0 \
        or c.v("actor_rollout_ref.model.lora_adapter_path") is not None
    if f.use_ref and not lora and c.v(f"{REF}.strategy") == "megatron":
        out.append(("reference", f"{REF}.megatron"))  # with LoRA the reference is the actor's base: no engine
    if f.megatron:
        out.append(("actor", f"{A}.megatron"))
    return out


def rule_megatron_pool(c: Ctx, f: Facts) -> None:
    if c.src.entry != "ppo":  # the pool mapping read above is main_ppo's (trainer_base.py); others not checked
        return
    engines = [(role, prefix, _layout(c, prefix)) for role, prefix in megatron_engines(c, f)]
    engines = [e for e in engines if e[2] is not None]
    if len(engines) < 2:
        return
    first_role, first_prefix, first = engines[0]
    for role, prefix, lay in engines[1:]:
        diff = [s for s in SIZES if lay[s] != first[s]  # type: ignore[index]
                and not (s == "expert_tensor_parallel_size" and lay.get("_etp_derived") and first.get("_etp_derived"))]
        if not diff:
            continue
        pairs = ", ".join(f"{first_prefix}.{s}={first[s]} vs {prefix}.{s}={lay[s]}" for s in diff)  # type: ignore[index]
        dcp = (" (with dynamic_context_parallel on only in the later engine verl raises RuntimeError instead, "
               ":245-255)" if "dynamic_context_parallel" in diff and lay["dynamic_context_parallel"] else "")  # type: ignore[index]
        c.add("VI779", "error", tuple(f"{p}.{s}" for s in diff for p in (first_prefix, prefix)),
              f"the {first_role} and {role} Megatron engines share one process (one resource pool, "
              f"create_colocated_worker_cls, trainer/ppo/v1/trainer_base.py:306-309) but differ: {pairs}. verl builds "
              f"the {first_role}'s first and its _init_device_mesh returns early once megatron's parallel state exists "
              "(workers/engine/megatron/transformer_impl.py:240-256, `TODO: set different parallelism for actor, "
              f"critic, ref`), so the {role} runs on the {first_role}'s process groups with a model built for its own "
              f"sizes: wrong shards, pipeline-schedule hangs or crashes (verl#653){dcp}",
              f"set the {role}'s sizes equal to the {first_role}'s ({', '.join(f'{prefix}.{s}' for s in diff)}), "
              "or keep one of the two on FSDP")
