"""The VeOmni training engine's device mesh and its Ulysses sequence parallel (model_engine=veomni, or a role's
strategy veomni). verl 0.9.1 (paths under site-packages/verl/):

- VI646 (error): the VeOmni mesh does not tile the GPUs. VeOmniEngine.__init__ runs on each worker, after Ray has
  booked the GPUs, and computes dp = world // veomni.ulysses_parallel_size, then, for 0 < fsdp_size < dp, raises
  ValueError unless dp % fsdp_size == 0 (workers/engine/veomni/transformer_impl.py:151-165); nothing checks it at
  config time (VeOmniEngineConfig.__post_init__, workers/config/engine.py:460-481, checks only strategy, the offload
  cache and attention names). A Ulysses size that does not divide the world leaves ranks outside the mesh
  (`dp = world // ulysses` floors). VeOmni then builds the expert-parallel mesh inside the FSDP shard group
  (extra_parallel_sizes=(expert_parallel_size,), transformer_impl.py:167-174) and asserts dp_shard % ep == 0
  (VeOmni parallel_state, ByteDance-Seed/VeOmni PR#867: "32 cards with ep_size=32, dp_replicate=2, dp_shard=16 will
  fail this assert"). The rule runs for the actor, the reference (when verl builds one) and the critic (when verl
  builds one: critic.enable, else adv_estimator gae), each on the trainer's GPUs. The test runs the mesh lines of
  verl's own VeOmniEngine.__init__ (read from verl's source) as the oracle.
- VI654 (warning): veomni.ulysses_parallel_size > 1 with the role's model.use_remove_padding=False. The new workers
  copy model.use_remove_padding into the engine (workers/engine_workers.py:114, :585, :630); the VeOmni engine
  SP-slices position_ids only on the remove-padding path (veomni/transformer_impl.py:120-123), and verl's own
  VeOmniActorConfig says "the non-remove-padding path also disables Ulysses SP slicing" (workers/config/actor.py:
  364-376) while it rejects only router replay there. The FSDP actor refuses the same combination
  (FSDPActorConfig.validate, workers/config/actor.py:331-341): the test calls both of verl's config classes as the
  oracle, showing FSDP raising and VeOmni accepting.
"""

from __future__ import annotations

from wizard.check.rules.context import A, M, REF, Ctx, Facts


def _veomni(c: Ctx, prefix: str) -> bool:
    return c.v(f"{prefix}.strategy") == "veomni" or c.v(f"{prefix}.veomni.strategy") == "veomni"


def _roles(c: Ctx, f: Facts) -> list[tuple[str, str, str]]:
    """(role, config prefix, model prefix) of each VeOmni engine verl builds for this run."""
    roles = [("actor", A, M)]
    if f.use_ref:
        roles.append(("ref", REF, M))
    if f.use_critic:  # verl's need_critic: critic.enable, else adv_estimator == gae
        roles.append(("critic", "critic", "critic.model"))
    return [r for r in roles if _veomni(c, r[1])]


def veomni_mesh(world: int, ulysses: int, fsdp_size: int, ep: int) -> tuple[str, int] | None:
    """What VeOmniEngine.__init__ (veomni/transformer_impl.py:151-174) and VeOmni's EP mesh reject: (reason, dp),
    or None when the mesh builds."""
    if ulysses < 1 or world % ulysses:
        return "ulysses", 0
    dp = world // ulysses
    if 0 < fsdp_size < dp and dp % fsdp_size:
        return "fsdp", dp
    shard = dp if fsdp_size < 0 or fsdp_size >= dp else fsdp_size
    if ep > 1 and shard % ep:
        return "ep", shard
    return None


def rule_veomni_mesh(c: Ctx, f: Facts) -> None:
    world = f.n_gpus
    if not world:
        return
    for role, prefix, _ in _roles(c, f):
        keys = (f"{prefix}.veomni.ulysses_parallel_size", f"{prefix}.veomni.fsdp_size",
                f"{prefix}.veomni.expert_parallel_size")
        if c.unknown(*keys):
            continue
        usp, fsdp, ep = (c.int(k) for k in keys)
        if usp is None or fsdp is None or ep is None:
            continue
        bad = veomni_mesh(world, usp, fsdp, ep)
        if bad is None:
            continue
        reason, size = bad
        fits = [d for d in range(1, world + 1) if world % d == 0]
        if reason == "ulysses":
            msg = (f"{keys[0]}={usp} does not divide the {world} GPUs: VeOmniEngine takes dp = world // ulysses "
                   "(veomni/transformer_impl.py:153) and the mesh leaves ranks out; it fails on the workers after the "
                   "GPUs are booked")
            hint = f"set {keys[0]} to a divisor of {world} ({', '.join(map(str, fits[:6]))})"
        elif reason == "fsdp":
            ok = [d for d in range(1, size + 1) if size % d == 0]
            msg = (f"{keys[1]}={fsdp} does not divide the {role}'s data-parallel size {size} (= {world} GPUs / "
                   f"{keys[0]}={usp}): VeOmniEngine raises ValueError on every worker after the GPUs are booked "
                   "(veomni/transformer_impl.py:159-163)")
            hint = f"set {keys[1]} to -1 or a divisor of {size} ({', '.join(map(str, ok[:8]))})"
        else:
            ok = [d for d in range(1, size + 1) if size % d == 0]
            msg = (f"{keys[2]}={ep} does not divide the {role}'s VeOmni FSDP shard group of {size} GPUs ({keys[1]}="
                   f"{fsdp}, {world} GPUs / ulysses {usp}): VeOmni builds the expert mesh inside that group and "
                   "asserts dp_shard % ep_size == 0 on the workers (veomni/transformer_impl.py:167-174 passes it on; "
                   "VeOmni PR#867)")
            hint = f"set {keys[2]} to a divisor of {size} ({', '.join(map(str, ok[:8]))}), or raise {keys[1]} (-1: all)"
        c.add("VI646", "error", keys, msg, hint)


def rule_veomni_sp_padding(c: Ctx, f: Facts) -> None:
    for role, prefix, model in _roles(c, f):
        usp_key, pad_key = f"{prefix}.veomni.ulysses_parallel_size", f"{model}.use_remove_padding"
        if c.unknown(usp_key, pad_key):
            continue
        usp = c.int(usp_key)
        if usp is None or usp <= 1 or c.v(pad_key) is not False:
            continue
        c.add("VI654", "warning", (usp_key, pad_key),
              f"{usp_key}={usp} with {pad_key}=False: the {role}'s VeOmni engine SP-slices its inputs only on the "
              "remove-padding path (veomni/transformer_impl.py:120-123; verl's VeOmniActorConfig: \"the "
              "non-remove-padding path also disables Ulysses SP slicing\", workers/config/actor.py:367-376), and verl "
              "accepts it without a word where the FSDP actor refuses the same pair (workers/config/actor.py:331-341)",
              f"set {pad_key}=True (or {usp_key}=1)")
