"""Batch rules: deprecated global micro-batch keys (VI806), the train/mini/micro-batch arithmetic of
validate_config and the Ray workers (VI820-VI825), and dynamic batching (VI826-VI827).
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import REF, A, R, Ctx, Facts, divisors, join_or, nearest
from wizard.verlspec import arithmetic as rc


def rule_deprecated_micro(c: Ctx, f: Facts) -> None:
    roles = ((f"{A}.ppo_micro_batch_size", f"{A}.ppo_micro_batch_size_per_gpu", f"{A}.use_dynamic_bsz", f.sp),
             (f"{R}.log_prob_micro_batch_size", f"{R}.log_prob_micro_batch_size_per_gpu", f"{R}.log_prob_use_dynamic_bsz", f.sp),
             (f"{REF}.log_prob_micro_batch_size", f"{REF}.log_prob_micro_batch_size_per_gpu", f"{REF}.log_prob_use_dynamic_bsz", f.ref_sp),
             # verl's critic validate() multiplies by the deprecated critic key, not the engine's
             ("critic.ppo_micro_batch_size", "critic.ppo_micro_batch_size_per_gpu", "critic.use_dynamic_bsz",
              c.int("critic.ulysses_sequence_parallel_size") or 1))
    for old, new, dyn_key, sp in roles:
        value = c.v(old)
        if value is None or not c.set_by_user(old) or c.unknown(old):
            continue
        if c.set_by_user(new) and c.v(new) is not None:
            c.add("VI806", "error", (old, new), f"both {old} and {new} are set: verl refuses both (the former is deprecated)",
                  f"remove {old}", fix=Fix(delete=[old]))
            continue
        if bool(c.v(dyn_key)):
            c.add("VI806", "warning", (old,), f"{old} is deprecated and ignored under dynamic batching",
                  f"remove {old}", fix=Fix(delete=[old]))
            continue
        fix = None
        hint = f"set {new} (per GPU) instead"
        ranks = rc.data_parallel_size(f.n_gpus or 0, sp=sp) if isinstance(value, int) else None
        if ranks and isinstance(value, int) and value >= ranks and rc.splits_evenly(value, 1, ranks):
            fix = Fix(set={new: value // ranks}, delete=[old])
            hint = f"use {new}={value // ranks} ({value} over {ranks} data-parallel ranks, verl's old conversion)"
        c.add("VI806", "error", (old,), f"{old}={value} is the deprecated global size: verl 0.9.1 workers assert on "
              f"{new} (engine_workers.py:636) and crash at start-up", hint, fix=fix)


def rule_batches(c: Ctx, f: Facts) -> None:
    if None in (f.tbs, f.n, f.mini) or c.unknown("data.train_batch_size", f"{R}.n", f"{A}.ppo_mini_batch_size"):
        return
    assert f.tbs is not None and f.n is not None and f.mini is not None
    tbs, n, mini = f.tbs, f.n, f.mini
    if n < 1 or mini < 1 or tbs < 1:
        return
    mkey, tkey, nkey = f"{A}.ppo_mini_batch_size", "data.train_batch_size", f"{R}.n"
    # VI820
    roles = [("actor", mkey, mini)]
    if f.use_critic and f.critic_mini:
        roles.append(("critic", "critic.ppo_mini_batch_size", f.critic_mini))
    for role, key, m in roles:
        if tbs < m:
            dyn = f.dynamic if role == "actor" else bool(c.v("critic.use_dynamic_bsz"))
            c.add("VI820", "error", (key, tkey),
                  f"{role} ppo_mini_batch_size={m} is larger than train_batch_size={tbs}"
                  + (": verl skips this check under dynamic batching and fills the update with padding sequences"
                     if dyn else " (validate_config rejects it)"),
                  f"use {key} ≤ {tbs}, e.g. {join_or(nearest([d for d in divisors(tbs)], min(m, tbs)))}")
    if f.n_gpus is None or f.dp is None:
        return
    dp = f.dp
    # VI821 (validate_config, only without dynamic batching)
    if not f.dynamic:
        if f.megatron:
            micro = c.int(f"{A}.ppo_micro_batch_size_per_gpu")
            minimal = rc.minimal_batch(f.n_gpus, megatron=True, megatron_dp=dp, micro=micro or 0) if micro else 0
        else:
            minimal = rc.minimal_batch(f.n_gpus)
        if minimal and not rc.splits_evenly(tbs, n, minimal):
            ok = [t for t in range(1, 2 * tbs + minimal) if rc.splits_evenly(t, n, minimal) and t % mini == 0]
            c.add("VI821", "error", (tkey, nkey, "trainer.n_gpus_per_node", "trainer.nnodes"),
                  f"train_batch_size × n = {tbs}×{n} = {tbs * n} samples do not divide by verl's minimal batch {minimal}"
                  " (validate_config)", f"nearest valid train_batch_size: {join_or(nearest(ok, tbs))}" if ok else
                  "change train_batch_size or rollout.n")
    # VI822 (workers)
    splits = [("actor", mkey, mini, dp, None if f.dynamic else c.int(f"{A}.ppo_micro_batch_size_per_gpu"),
               f"{A}.ppo_micro_batch_size_per_gpu")]
    if f.use_critic and f.critic_mini and f.critic_dp:
        splits.append(("critic", "critic.ppo_mini_batch_size", f.critic_mini, f.critic_dp,
                       None if bool(c.v("critic.use_dynamic_bsz")) else c.int("critic.ppo_micro_batch_size_per_gpu"),
                       "critic.ppo_micro_batch_size_per_gpu"))
    ok_split = True
    for role, key, m, rdp, micro, micro_key in splits:
        s = rc.update_split(m, n, rdp, micro)
        if s.per_rank is None:
            ok_split = False
            step = rc.mini_multiple(rdp, n)
            ok_m = [step * k for k in range(1, max(2, 2 * m // step + 2))]
            ok_n = [x for x in range(1, 2 * n + rdp + 1) if rc.splits_evenly(m, x, rdp)]
            c.add("VI822", "error", (key, nkey, "trainer.n_gpus_per_node", "trainer.nnodes"),
                  f"each {role} update holds {m}×{n} = {m * n} samples, which {rdp} data-parallel ranks cannot share evenly "
                  "(asserted only inside the Ray workers, engine_workers.py:264)",
                  f"nearest valid {key}: {join_or(nearest(ok_m, m))}, or {nkey}: {join_or(nearest(ok_n, n))}")
        elif s.micro_ok is False:
            c.add("VI823", "error", (micro_key, key),
                  f"{micro_key}={micro} does not divide the {s.per_rank} samples each GPU gets per {role} update "
                  "(asserted only inside the Ray workers, engine/utils.py:125)",
                  f"nearest valid: {join_or(nearest(divisors(s.per_rank), micro or 1))}")
    if not ok_split:
        return
    counts = []  # (role, key, micro-batches per update) of the splits whose micro-batch divides
    for role, _key, m, rdp, micro, micro_key in splits:
        if micro and rc.update_split(m, n, rdp, micro).micro_ok:
            counts.append((role, micro_key, rc.update_split(m, n, rdp, micro).per_rank // micro))
    _interleaved_micro_batches(c, f, counts)
    critic_samples = f.critic_mini * n if f.use_critic and f.critic_mini else None
    step = rc.step_batch(tbs, n, dp, mini, f.critic_mini if critic_samples else None)
    multiple, padded = step.multiple, step.samples
    # VI824
    if not bool(c.v(f"{R}.log_prob_use_dynamic_bsz")):
        per = step.per_rank
        for key, used in ((f"{R}.log_prob_micro_batch_size_per_gpu", True),
                          (f"{REF}.log_prob_micro_batch_size_per_gpu", f.use_ref and not bool(c.v(f"{REF}.log_prob_use_dynamic_bsz")))):
            lp = c.int(key)
            if used and lp and per % lp:
                c.add("VI824", "error", (key, tkey, nkey),
                      f"{key}={lp} does not divide the {per} samples each GPU scores per step "
                      "(asserted only inside the Ray workers, engine/utils.py:125)",
                      f"nearest valid: {join_or(nearest(divisors(per), lp))}")
            elif used and lp:
                _interleaved_micro_batches(c, f, [("reference" if key.startswith(REF) else "actor", key, per // lp)])
    # VI825
    if padded != tbs * n and tbs >= mini:
        c.add("VI825", "warning", (tkey, mkey, nkey),
              f"train_batch_size × n = {tbs * n} is not a multiple of lcm(data-parallel {dp}, mini-batch samples {mini * n}"
              + (f", critic {critic_samples}" if critic_samples else "") + f") = {multiple}: verl adds {padded - tbs * n} "
              "padding sequences to every step", f"use train_batch_size as a multiple of ppo_mini_batch_size, e.g. "
              f"{join_or(nearest([t for t in range(mini, 2 * tbs + mini) if rc.splits_evenly(t, n, multiple)], tbs))}")


def rule_dynamic_flags(c: Ctx, f: Facts) -> None:
    a, r = c.v(f"{A}.use_dynamic_bsz"), c.v(f"{R}.log_prob_use_dynamic_bsz")
    if bool(a) != bool(r):
        c.add("VI826", "error", (f"{A}.use_dynamic_bsz", f"{R}.log_prob_use_dynamic_bsz"),
              f"actor.use_dynamic_bsz={a} but rollout.log_prob_use_dynamic_bsz={r}: a bare assert in the workers "
              "(engine_workers.py:616)", f"set both to {a} (the rollout key follows the actor's unless set)")
    for dyn_key, keys in ((f"{A}.use_dynamic_bsz", (f"{A}.ppo_micro_batch_size_per_gpu",)),
                          (f"{R}.log_prob_use_dynamic_bsz", (f"{R}.log_prob_micro_batch_size_per_gpu",)),
                          (f"{REF}.log_prob_use_dynamic_bsz", (f"{REF}.log_prob_micro_batch_size_per_gpu",)),
                          ("critic.use_dynamic_bsz", ("critic.ppo_micro_batch_size_per_gpu",))):
        if bool(c.v(dyn_key)):
            ignored = [k for k in keys if c.set_by_user(k) and c.v(k) is not None]
            if ignored:
                c.add("VI827", "info", ignored + [dyn_key], f"{', '.join(ignored)} is ignored: dynamic batching packs "
                      "micro-batches by the token budget", "remove it, or tune *_max_token_len_per_gpu instead")


def rule_ignored_budgets(c: Ctx, f: Facts) -> None:
    """VI832: a token budget set with dynamic batching off. verl reads *_max_token_len_per_gpu only when it packs
    micro-batches by tokens (workers/engine/utils.py:108-121); otherwise it cuts each mini-batch into
    *_micro_batch_size_per_gpu sequences (:122-128), however short they are (real case verl#2753: a budget of 2 × 9K
    tokens beside micro-batches of 2, the update ~90 % of the step). A warning on the FSDP engines, where dynamic
    batching is the usual fix; an info elsewhere (verl's Megatron and VeOmni examples keep it off on purpose)."""
    fsdp = c.v(f"{A}.strategy") in ("fsdp", "fsdp2")
    ignored: list[tuple[str, str, int | None]] = []
    for dyn_key, budget_key, micro_key in (
            (f"{A}.use_dynamic_bsz", f"{A}.ppo_max_token_len_per_gpu", f"{A}.ppo_micro_batch_size_per_gpu"),
            (f"{R}.log_prob_use_dynamic_bsz", f"{R}.log_prob_max_token_len_per_gpu",
             f"{R}.log_prob_micro_batch_size_per_gpu"),
            (f"{REF}.log_prob_use_dynamic_bsz", f"{REF}.log_prob_max_token_len_per_gpu",
             f"{REF}.log_prob_micro_batch_size_per_gpu")):
        budget = c.v(budget_key)
        if c.unknown(dyn_key, budget_key) or bool(c.v(dyn_key)) or budget is None or not c.set_by_user(budget_key):
            continue
        ignored.append((budget_key, dyn_key, c.int(micro_key)))
    if not ignored:
        return
    micros = sorted({m for _, _, m in ignored if m})
    c.add("VI832", "warning" if fsdp else "info", tuple(k for b, d, _ in ignored for k in (b, d)),
          f"{', '.join(b for b, _, _ in ignored)} {'is' if len(ignored) == 1 else 'are'} ignored: "
          f"{', '.join(d for _, d, _ in ignored)} {'is' if len(ignored) == 1 else 'are'} off, so verl cuts each "
          f"mini-batch into micro-batches of {' / '.join(map(str, micros)) or 'the fixed size'} sequence(s) whatever "
          "their length and reads a budget only when it packs by tokens (workers/engine/utils.py:108-128)",
          f"set {', '.join(d for _, d, _ in ignored)}=true to pack micro-batches up to the budget (short sequences "
          "then share a pass), or remove the budget")


def _interleaved_micro_batches(c: Ctx, f: Facts, passes: list[tuple[str, str, int]]) -> None:
    """VI835: Megatron's interleaved schedule (virtual_pipeline_model_parallel_size > 1) with fixed micro-batches:
    verl asserts the micro-batch count of every pass divides by microbatch_group_size_per_vp_stage
    (workers/engine/megatron/transformer_impl.py:873-918), which megatron-core sets to the pipeline size unless given
    (megatron/core/model_parallel_config.py ModelParallelConfig.__post_init__); with dynamic batching verl pads the
    count up to it, with fixed micro-batches the count is samples / micro (engine/utils.py:123-128)."""
    if not f.megatron:
        return
    for role, micro_key, count in passes:
        section = {"actor": A, "reference": REF, "critic": "critic"}[role]
        vpp, pp = c.int(f"{section}.megatron.virtual_pipeline_model_parallel_size"), \
            c.int(f"{section}.megatron.pipeline_model_parallel_size") or 1
        if not vpp or vpp <= 1 or pp <= 1 or count <= 0:
            continue
        group = c.int(f"{section}.megatron.override_transformer_config.microbatch_group_size_per_vp_stage") or pp
        if count % group:
            c.add("VI835", "error", (micro_key, f"{section}.megatron.virtual_pipeline_model_parallel_size"),
                  f"the {role}'s {count} micro-batch(es) per pass do not divide by microbatch_group_size_per_vp_stage "
                  f"{group} (the pipeline size {pp} unless set), which the interleaved schedule (virtual pipeline "
                  f"{vpp}) needs: verl asserts it in the workers (megatron/transformer_impl.py:914)",
                  f"make the micro-batches per GPU a multiple of {group} (a smaller {micro_key}), or use dynamic "
                  "batching (verl pads the count then)")
