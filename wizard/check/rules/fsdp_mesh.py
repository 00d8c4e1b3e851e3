"""The FSDP engines' device mesh (VI909): `fsdp_config.fsdp_size` (actor) / `critic.fsdp.fsdp_size` against the
trainer's GPUs. verl builds the mesh as (world / fsdp_size, fsdp_size), "ddp" × "fsdp", when 0 < fsdp_size < world,
and shards with HYBRID_SHARD over it (workers/engine/fsdp/utils.py:35-52, 55-87; transformer_impl.py:235-241, 423-448):

- FSDP1 (strategy fsdp) with fsdp_size 1: torch's FSDP sees a shard group of one GPU, switches to NO_SHARD over that
  group ("FSDP is switching to use `NO_SHARD` instead of ShardingStrategy.HYBRID_SHARD since the world size is 1")
  and all-reduces each gradient over that group alone: the GPUs never average their gradients and each trains its
  own copy of the model (real case verl#7493). FSDP2 (fully_shard over the same mesh) replicates over "ddp" and does
  average them. The tests run torch's own FSDP1 and FSDP2 on the CPU as the oracle.
- fsdp_size that does not divide the GPUs: the mesh leaves a rank out and it fails when FSDP wraps the model.

The critic is checked whenever verl builds one: verl's need_critic (trainer/ppo/utils.py:96-107) takes critic.enable
when set and otherwise turns the critic on for adv_estimator gae, so a GAE launch that leaves critic.enable unset
still gets a critic engine on critic.fsdp (real case verl#7596: FSDP1 with fsdp_size=1, whose param_offload then
freed nothing; the test runs verl's own need_critic as the oracle).
"""

from __future__ import annotations

from wizard.check.rules.context import A, Ctx, Facts


def rule_fsdp_mesh(c: Ctx, f: Facts) -> None:
    world = f.n_gpus
    if not world or world < 2:
        return
    roles = [("actor", f"{A}.strategy", f"{A}.fsdp_config.fsdp_size")]
    if f.use_critic:  # verl's need_critic: critic.enable, else adv_estimator == gae
        roles.append(("critic", "critic.strategy", "critic.fsdp.fsdp_size"))
    for role, strategy_key, size_key in roles:
        strategy, size = c.v(strategy_key), c.int(size_key)
        if strategy not in ("fsdp", "fsdp2") or size is None or size <= 0 or size >= world:
            continue
        if world % size:
            c.add("VI909", "error", (size_key,),
                  f"{size_key}={size} does not divide the {world} GPUs: verl builds the mesh {world // size} × {size} "
                  "(workers/engine/fsdp/utils.py:50-52), which leaves a rank out, and that rank fails when FSDP wraps "
                  f"the {role}", f"set {size_key} to a divisor of {world}, or -1 (shard over all GPUs)")
        elif size == 1 and strategy == "fsdp":
            c.add("VI909", "error", (size_key, strategy_key),
                  f"{size_key}=1 with FSDP1 ({strategy_key}=fsdp) on {world} GPUs: torch's FSDP turns the hybrid "
                  "shard over a group of one GPU into NO_SHARD over that group and all-reduces the gradients there "
                  f"alone, so the {role}'s GPUs never average them: each trains its own copy "
                  "(workers/engine/fsdp/utils.py:50-52, 78-84)",
                  f"set {size_key}=-1 (shard over all GPUs), or {strategy_key}=fsdp2, whose hybrid shard averages over "
                  "the replicas")
