"""Rule stages of verl's batch arithmetic (wizard.verlspec.arithmetic): prompts and updates per step (VI201-VI203,
VI206, VI207), then token budgets or micro-batches within what the memory fit allows (VI204, VI205, VI603).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from wizard.planner.layouts import logprob_micro as rank_logprob_micro
from wizard.planner.layouts import token_budget as rank_token_budget
from wizard.planner.memory import Decision, estimate
from wizard.planner.reasoning import thinks_by_default
from wizard.planner.steptime import mean_sequence
from wizard.planner.state import Build, Confirm, confirmed, either, refuse, round_up
from wizard.verlspec import arithmetic as rc
from wizard.verlspec.arithmetic import divisors, largest_divisor_at_most


def layout_ranks(b: Build) -> rc.Ranks:
    """The layout verl's batch checks read (wizard.verlspec.arithmetic.batch_checks)."""
    micro = b.a.micro_batch_per_gpu if not b.dynamic else None
    return rc.Ranks(dp=b.dp, n_gpus=b.n_gpus, megatron=b.megatron, dynamic=b.dynamic, micro=micro)


def batch_ok(b: Build, p: int, u: int) -> bool:
    """Whether prompts_per_step p and updates_per_step u pass every batch check with this plan's layout."""
    return not rc.batch_checks(p, u, b.n, layout_ranks(b))


def _batch_hint(b: Build, keys: Sequence[str], requirement: str, extra: Sequence[tuple[str, Any]] = ()) -> Callable[[Confirm], str]:
    """A hint offering, for each of `keys`, the nearest values that pass every batch check jointly with the other
    answers held (wizard.verlspec.arithmetic.batch_candidates), each confirmed by a re-plan; `extra`: other single
    changes (key, value) offered when they pass too."""
    P, U, n, ranks = b.prompts, b.updates, b.n, layout_ranks(b)
    min_n = 2 if b.algo.group else 1  # a group of one is legal but degenerate (VI401)

    def render(ok: Confirm) -> str:
        parts = []
        for key in keys:
            values = confirmed(ok, key, rc.batch_candidates(P, U, n, ranks, key, min_n=min_n))
            if values:
                parts.append(f"{key}={either(values)}")
        parts += [f"{key}={str(v).lower()}" for key, v in extra if ok(**{key: v})]
        if parts:
            return "nearest valid: " + " or ".join(parts)
        return f"no nearby {' or '.join(keys)} passes every rule with your other answers: {requirement}"
    return render


def step_batches(b: Build) -> None:
    """prompts_per_step, updates_per_step and samples_per_prompt against verl's batch arithmetic: exactly verl's
    asserts (wizard.verlspec.arithmetic.batch_checks), with suggestions that pass them all jointly."""
    a, f, n, dp, n_gpus = b.a, b.f, b.n, b.dp, b.n_gpus
    b.prompts, b.updates = P, U = a.prompts_per_step, a.updates_per_step
    if b.dynamic and a.micro_batch_per_gpu is not None:
        f.error("VI206", ("micro_batch_per_gpu", "dynamic_batch"),
                f"micro_batch_per_gpu={a.micro_batch_per_gpu} applies only without dynamic batching "
                f"(dynamic_batch={'true' if a.dynamic_batch else 'unset: on with ' + a.train_backend})",
                "set dynamic_batch=false, or remove micro_batch_per_gpu (set max_tokens_per_gpu instead)")
    if not b.dynamic and a.max_tokens_per_gpu is not None:
        f.error("VI207", ("max_tokens_per_gpu", "dynamic_batch"),
                f"max_tokens_per_gpu={a.max_tokens_per_gpu} applies only with dynamic batching "
                f"(dynamic_batch={'false' if a.dynamic_batch is False else 'unset: off with ' + a.train_backend})",
                "set dynamic_batch=true, or remove max_tokens_per_gpu (set micro_batch_per_gpu instead)")

    checks = rc.batch_checks(P, U, n, layout_ranks(b))
    b.mini = mini = rc.mini_batch(P, U) or 0
    if "equal_updates" in checks:
        refuse(b, "VI201", ("updates_per_step", "prompts_per_step"),
               f"updates_per_step={U} does not divide prompts_per_step={P} into equal mini-batches "
               "(verl's ppo_mini_batch_size is prompts_per_step / updates_per_step)",
               _batch_hint(b, ("updates_per_step", "prompts_per_step"),
                           "prompts_per_step must be a multiple of updates_per_step"))
    b.facts.update(prompts_per_step=P, samples_per_prompt=n, updates_per_step=U, mini_batch_prompts=mini,
                   samples_per_step=P * n, samples_per_update=mini * n, dynamic_batch=b.dynamic, seq_len=b.seq)
    if mini and dp:
        if "mini_split" in checks:
            refuse(b, "VI202", ("prompts_per_step", "samples_per_prompt", "updates_per_step"),
                   f"each update holds prompts_per_step={P} / updates_per_step={U} = {mini} prompts × "
                   f"samples_per_prompt={n} = {mini * n} samples, which {dp} data-parallel ranks cannot share evenly "
                   "(verl's workers assert it: engine_workers.py:264)",
                   _batch_hint(b, ("prompts_per_step", "samples_per_prompt"),
                               f"each update's samples must be a multiple of the {dp} data-parallel ranks"))
        elif "minimal_batch" in checks:
            # verl skips this check under dynamic batching (utils/config.py:103): offer that too when it passes
            extra = [("dynamic_batch", True)] if a.micro_batch_per_gpu is None and a.dynamic_batch is False else []
            refuse(b, "VI203", ("prompts_per_step", "samples_per_prompt", "dynamic_batch", "nnodes", "gpus_per_node"),
                   f"prompts_per_step={P} × samples_per_prompt={n} = {P * n} samples per step do not divide over the "
                   f"{n_gpus} GPUs: without dynamic batching verl's validate_config refuses it (utils/config.py:115-127)",
                   _batch_hint(b, ("prompts_per_step", "samples_per_prompt"),
                               f"prompts_per_step × samples_per_prompt must be a multiple of the {n_gpus} GPUs", extra))
        else:
            b.per_rank = rc.update_split(mini, n, dp, None).per_rank or 0
    b.facts["samples_per_rank_per_update"] = b.per_rank


def micro_batches(b: Build) -> None:
    """Token budgets (dynamic batching) or micro-batch sizes, within what the memory fit allows."""
    a, f, seq, decision = b.a, b.f, b.seq, b.decision
    # the GPUs that share one micro-batch's tokens: verl multiplies the token budget by them (arithmetic.token_split)
    sp = rc.token_split("megatron" if b.megatron else "fsdp", ulysses=b.sp, context_parallel=b.grid.cp)
    fit_tokens = decision.layout.train_tokens if decision else round_up(3 * seq, 1024)
    fit_lp_tokens = decision.layout.logprob_tokens if decision else 2 * fit_tokens
    if b.dynamic:
        # verl packs max_tokens_per_gpu × SP tokens per micro-batch and splits them over the SP group
        # (verl/workers/engine/utils.py): each GPU holds max_tokens_per_gpu tokens; the layout counts the group's.
        floor_tokens = rc.min_token_budget(seq, sp)
        fit_tokens //= sp
        fit_lp_tokens //= sp
        tokens = a.max_tokens_per_gpu or max(floor_tokens, (fit_tokens // 1024) * 1024, min(fit_tokens, round_up(floor_tokens, 256)))
        if tokens < floor_tokens:
            recommended = round_up(3 * seq, 1024) // sp

            def tokens_hint(ok: Confirm, floor: int = floor_tokens, rec: int = recommended) -> str:
                values = confirmed(ok, "max_tokens_per_gpu", [rec, round_up(floor, 1024), floor], k=1)
                return (f"set max_tokens_per_gpu={values[0]} (one sequence needs ≥ {floor})" if values else
                        f"max_tokens_per_gpu must be ≥ {floor} (one sequence), but no such budget fits the GPUs' "
                        "memory: shorten max_prompt_length/max_response_length")

            refuse(b, "VI205", ("max_tokens_per_gpu", "max_prompt_length", "max_response_length"),
                   f"max_tokens_per_gpu={tokens} cannot hold one sequence of max_prompt_length + max_response_length = "
                   f"{seq} tokens" + (f" split over {'megatron_cp' if b.megatron else 'sequence_parallel'}={sp}" if sp > 1 else "")
                   + " (verl asserts it at the first step: seqlen_balancing.py:384)", tokens_hint)
        if a.max_tokens_per_gpu is None and decision is not None and b.shape is not None and not f.errors:
            mean_seq = mean_sequence(a.max_prompt_length, a.max_response_length, a.response_length_mean,
                                     bool(thinks_by_default(a.model)))
            ranked = rank_token_budget(b.shape, decision.layout, tokens, sp, (fit_lp_tokens // 1024) * 1024,
                                       b.prompts * b.n * mean_seq / max(b.dp, 1), minis=b.updates,
                                       pipeline=b.mpp if b.megatron else 1)
            tokens = ranked.chosen
            b.facts["token_budget_ranking"] = ranked
        b.tokens = tokens
        b.logprob_tokens = max(tokens, (fit_lp_tokens // 1024) * 1024)
        b.critic_tokens = tokens
    elif b.per_rank:
        cap = max(1, fit_tokens // seq)
        if a.micro_batch_per_gpu is not None:
            b.micro = a.micro_batch_per_gpu
            if rc.update_split(b.mini, b.n, b.dp, b.micro).micro_ok is False:
                per_rank, micro = b.per_rank, b.micro

                def micro_hint(ok: Confirm) -> str:
                    ordered = sorted(divisors(per_rank), key=lambda d: (abs(d - micro), d))
                    values = confirmed(ok, "micro_batch_per_gpu", ordered)
                    return (f"nearest valid: micro_batch_per_gpu={either(values)}" if values else
                            f"micro_batch_per_gpu must divide {per_rank}; remove it and verl-init chooses one")

                refuse(b, "VI204", ("micro_batch_per_gpu",),
                       f"micro_batch_per_gpu={micro} does not divide the {per_rank} samples each GPU gets per update "
                       "(verl's workers assert it: engine/utils.py:123)", micro_hint)
        else:
            b.micro = largest_divisor_at_most(b.per_rank, cap)
        # verl 0.9.1's trainer runs the critic with dynamic batching whatever its micro-batch says, on one budget
        # (trainer_base.py:267-268; EngineConfig.use_dynamic_bsz defaults to true): the micro-batch's full tokens
        b.critic_tokens = max(b.micro * seq // sp, rc.min_token_budget(seq, sp))
        step = rc.step_batch(b.prompts, b.n, b.dp, b.mini, b.mini if b.algo.critic else None)
        b.logprob_micro = largest_divisor_at_most(step.per_rank, max(b.micro, fit_lp_tokens // seq))
        if decision is not None and b.shape is not None and not f.errors:  # the fastest that fits (planner.layouts)
            ranked = rank_logprob_micro(b.shape, replace(decision.layout, train_tokens=b.micro * seq), step.per_rank,
                                        b.logprob_micro, seq, 2 if decision.layout.use_ref else 1)
            b.logprob_micro = ranked.chosen
            b.facts["logprob_micro_ranking"] = ranked
    if decision is not None and not f.errors:
        assert b.shape is not None
        final = replace(decision.layout,
                        train_tokens=b.tokens * sp if b.dynamic else b.micro * seq,
                        logprob_tokens=b.logprob_tokens * sp if b.dynamic else b.logprob_micro * seq,
                        critic_tokens=b.critic_tokens * sp if b.algo.critic else 0)
        memory = estimate(b.shape, final)
        if memory.plan_verdict == "does not fit":
            knob = "max_tokens_per_gpu" if b.dynamic else "micro_batch_per_gpu"
            f.error("VI603", (knob,),
                    f"{knob}={a.max_tokens_per_gpu if b.dynamic else b.micro} needs {memory.peak_gib:.1f} GiB per GPU "
                    f"(the {a.gpu_memory_gb:g} GB card holds {memory.capacity_gib:.1f} GiB)",
                    f"lower it to ≤ {decision.layout.train_tokens // sp if b.dynamic else max(1, decision.layout.train_tokens // seq)}, "
                    "or remove it and let verl-init choose")
        b.decision = Decision(final, memory, decision.reasons)
    b.facts.update(micro_batch_per_gpu=b.micro, logprob_micro_batch_per_gpu=b.logprob_micro, max_tokens_per_gpu=b.tokens,
                   logprob_max_tokens_per_gpu=b.logprob_tokens)
