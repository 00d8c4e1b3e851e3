"""Time rules: the predicted step time per phase (wizard.planner.steptime) and the imbalances it can prove
(VI895-VI899; VI834's memory-aware form)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from wizard.check.rules.context import A, M, R, Ctx, Facts

# log-prob micro-batches whose fixed costs take at least this share of the pass, that memory allows to grow by at
# least this factor, are flagged (VI896)
SLOW_SHARE = 0.5
GROW = 4
# a smaller rollout TP must save at least this share of the rollout to be worth a finding (VI897)
TP_GAIN = 0.2
# packed sequences must save at least this share of the step to be worth a finding (VI898)
PAD_GAIN = 0.2


def rule_time(c: Ctx, f: Facts, shape: Any, response_mean: Optional[float] = None) -> None:
    from wizard.planner import steptime as st
    from wizard.planner.steptime_config import workload_from_config
    from wizard.planner.steptime_plan import as_json, run_steps

    missing = [why for unknown, why in (
        (shape is None, "the model's size is unknown (model.path names no known model and no config.json was read)"),
        (f.n_gpus is None, "the GPUs are unknown (trainer.n_gpus_per_node × trainer.nnodes)"),
        (f.seq is None, "the sequence lengths are unknown (data.max_prompt_length, data.max_response_length)"),
        (c.res.engine not in ("dp", "megatron"), f"the {c.res.engine} engine is not timed (FSDP and Megatron are)"),
    ) if unknown]
    if missing:
        c.time_not_predicted = f"not predicted: {missing[0]}"
        return
    hw = c.hw
    est, layout = c.memory, getattr(c, "memory_layout", None)
    kv = est.kv_seqs * f.seq if est is not None else None

    def get(key: str) -> Any:
        return c.res.flat.get(key)

    def work(**changes: Any) -> Any:
        base = workload_from_config(get, shape, n_gpus=f.n_gpus, gpu_type=hw.gpu_type,
                                       gpu_memory_gb=hw.gpu_memory_gb, response_mean=response_mean, kv_tokens=kv,
                                       response_mean_basis="given: --response-length-mean")
        # VI837: the torch installed here runs the vision tower's patch embedding through its slow loop
        base = replace(base, vision_fallback_s=c.vision_fallback_s)
        return replace(base, **changes) if changes else base

    w = work()
    unfit = st.rollout_unfit(w)
    if unfit:
        why = ""
        if getattr(shape, "source", "") == "name":
            why = (" (the model's shape is estimated from the sizes in its name: a generic MoE)"
                   if getattr(shape, "experts", 0) else
                   " (the model's shape is only the size in its name: a MoE's experts are unknown)")
        c.time_not_predicted = unfit + why
        return
    pred = st.predict(w)
    steps, basis = run_steps(get)
    c.time = as_json(pred, steps, f.n_gpus, basis)
    a = pred.assumptions
    said = []
    if response_mean is None:
        said.append(f"mean response {a['response_length_mean']} tokens ({a['response_length_mean_basis']})")
    if st.peak_of_gpu_type(hw.gpu_type) is None:
        said.append(f"GPU {a['gpu']}")
    c.add("VI895", "info", ("data.max_response_length", f"{R}.n", "data.train_batch_size"),
          f"predicted step {pred.step_s:.0f} s (" + ", ".join(f"{k} {v:.0f} s" for k, v in pred.grouped().items())
          + ")" + (f", the rollout on its own {w.rollout_gpus} GPUs beside training: a step is the longer of the two "
                   "plus the weight sync" if pred.overlap else "")
          + (f"; a fully async step is one weight-sync cycle of {w.train_prompts} prompts "
             "(require_batches × ppo_mini_batch_size × trigger_parameter_sync_step), as verl logs it"
             if get("async_training.require_batches") is not None else "")
          + f"; {steps} steps ≈ {c.time['run_gpu_hours']:.0f} GPU-hours"
          + (f"; assumed {'; '.join(said)}" if said else ""),
          "pass --response-length-mean TOKENS and --gpu-type NAME for your run" if said else "")
    _logprob_micro(c, f, shape, w, pred, layout)
    _update_budget(c, f, shape, w, pred, layout)
    _idle(c, f, shape, w, pred, est)
    _padding(c, w, pred)
    _split(c, f, shape, w)


def _logprob_micro(c: Ctx, f: Facts, shape: Any, w: Any, pred: Any, layout: Any) -> None:
    """VI896: a fixed log-prob micro-batch far below what the memory estimate allows."""
    from wizard.planner import steptime as st
    from wizard.planner.memory import estimate

    if w.dynamic_bsz or layout is None or "old log-prob" not in pred.phases:
        return
    share = st.micro_share(pred, "old log-prob")
    if share < SLOW_SHARE:
        return
    bigger = estimate(shape, replace(layout, logprob_tokens=layout.logprob_tokens * GROW))
    if bigger.plan_verdict != "fits":
        return
    key = f"{R}.log_prob_micro_batch_size_per_gpu"
    faster = st.predict(replace(w, logprob_micro=w.logprob_micro * GROW))
    tok = pred.assumptions["logprob_micro_batch_tokens"]
    if pred.phases["old log-prob"] - faster.phases["old log-prob"] < max(1.0, 0.05 * pred.step_s):
        return
    c.add("VI896", "info", (key, f"{R}.log_prob_use_dynamic_bsz"),
          f"{key}={w.logprob_micro}: log-prob micro-batches of about {tok} tokens spend {share:.0%} of each log-prob "
          f"pass on per-micro-batch costs, not on the model; memory allows {GROW}× more (log-prob peak "
          f"{bigger.phase_gib('log-prob'):.1f} GiB of {bigger.capacity_gib:.1f}): log-prob passes "
          f"{pred.phases['old log-prob']:.0f} s → {faster.phases['old log-prob']:.0f} s each",
          f"set {key}={w.logprob_micro * GROW}, or {R}.log_prob_use_dynamic_bsz=true with "
          f"{R}.log_prob_max_token_len_per_gpu")


def _update_budget(c: Ctx, f: Facts, shape: Any, w: Any, pred: Any, layout: Any) -> None:
    """VI834 (warning): a dynamic token budget for the update that the card's memory allows to grow GROW× and whose
    growth the step-time model predicts saves at least 5 % of the step (and a second): its micro-batches spend that on
    per-micro-batch costs (real case verl#7847: verl's example budget of 3,000 tokens on 183 GB B200s). The budget is
    the only cap verl packs by (workers/engine/utils.py:108-121)."""
    from wizard.planner import steptime as st
    from wizard.planner.memory import estimate

    if not w.dynamic_bsz or layout is None or "update actor" not in pred.phases or not w.train_tokens:
        return
    share = st.micro_share(pred, "update actor")
    bigger = estimate(shape, replace(layout, train_tokens=layout.train_tokens * GROW))
    if bigger.plan_verdict != "fits":
        return
    faster = st.predict(replace(w, train_tokens=w.train_tokens * GROW))
    if pred.phases["update actor"] - faster.phases["update actor"] < max(1.0, 0.05 * pred.step_s):
        return
    key = f"{A}.ppo_max_token_len_per_gpu"
    # the static note on the same budget (tokens.py: under 2 × a sequence) says less than this: this one replaces it
    c.findings[:] = [x for x in c.findings if not (x.problem.rule == "VI834" and x.problem.keys[:1] == (key,))]
    c.add("VI834", "warning", (key, f"{A}.use_dynamic_bsz"),
          f"{key}={w.train_tokens}: update micro-batches of at most {w.train_tokens} tokens spend {share:.0%} of the "
          f"update on per-micro-batch costs, not on the model; memory allows {GROW}× the budget (update peak "
          f"{bigger.phase_gib('update'):.1f} GiB of {bigger.capacity_gib:.1f}): update {pred.phases['update actor']:.0f} s "
          f"→ {faster.phases['update actor']:.0f} s a step",
          f"set {key}={w.train_tokens * GROW}")


def _idle(c: Ctx, f: Facts, shape: Any, w: Any, pred: Any, est: Any) -> None:
    """VI897: rollout replicas with nothing to generate, or a rollout TP larger than the model needs."""
    from wizard.planner import steptime as st

    key = f"{R}.tensor_model_parallel_size"
    rollout_gpus = w.rollout_gpus or w.n_gpus
    replicas = max(rollout_gpus // max(w.rollout_tp, 1), 1)
    seqs = w.prompts * w.n
    if seqs < replicas:
        c.add("VI897", "warning", (key, "data.train_batch_size", f"{R}.n"),
              f"{replicas} rollout replicas (TP {w.rollout_tp} on {rollout_gpus} GPUs) share {seqs} sequences per "
              "step: "
              f"{replicas - seqs} replicas ({(replicas - seqs) * w.rollout_tp} GPUs) generate nothing",
              "raise data.train_batch_size or rollout.n, or the rollout TP")
        return
    layout = getattr(c, "memory_layout", None)
    if w.rollout_tp < 2 or w.moe or est is None or layout is None:
        return
    from wizard.planner.memory import estimate

    half = w.rollout_tp // 2
    if estimate(shape, replace(layout, rollout_tp=half)).plan_verdict != "fits":  # the whole rollout phase fits
        return
    # the model at half the TP: its weights and at least one full sequence's KV cache in the engine's reservation
    weights = 2 * w.params / half
    room = w.gmu * est.capacity_gib * st.GIB - weights - st.ENGINE_OVERHEAD_GIB * st.GIB
    kv_tokens = room / shape.kv_bytes_per_token(half)
    full_seqs = room / shape.cache_bytes_per_seq(half, f.seq)
    if full_seqs < 8:  # the planner's floor: a KV cache for at least 8 full sequences (memory.MIN_KV_SEQS)
        return
    other = st.predict(replace(w, rollout_tp=half, kv_bytes_per_token=shape.kv_bytes_per_token(half),
                               state_bytes_per_seq=shape.state_bytes_per_seq(half),
                               kv_tokens=kv_tokens))
    if other.phases["rollout"] < pred.phases["rollout"] * (1 - TP_GAIN):
        c.add("VI897", "info", (key, f"{R}.gpu_memory_utilization"),
              f"rollout TP {w.rollout_tp} is more than {shape.name} needs: at TP {half} the engine still holds its "
              f"weights and {full_seqs:.0f} full sequences, and twice the replicas decode at once "
              f"(rollout {pred.phases['rollout']:.0f} s → {other.phases['rollout']:.0f} s predicted)",
              f"set {key}={half}")


def _padding(c: Ctx, w: Any, pred: Any) -> None:
    """VI898: use_remove_padding=false, where the training passes then compute mostly padding. verl 0.9.1 hands the
    model's flag to the training engine (workers/engine_workers.py:585, 630); without it FSDP runs the rollout's
    padded rows and Megatron pads every micro-batch to the mini-batch's longest (megatron/transformer_impl.py:864-870,
    data_format "bshd" at :1364), so every pass pays for max_prompt_length + max_response_length per sequence."""
    from wizard.planner import steptime as st

    if w.remove_padding:
        return
    packed = st.predict(replace(w, remove_padding=True))
    saved = pred.step_s - packed.step_s
    if saved < max(1.0, PAD_GAIN * pred.step_s):
        return
    a = pred.assumptions
    key = f"{M}.use_remove_padding"
    c.add("VI898", "info", (key, "data.max_prompt_length", "data.max_response_length"),
          f"{key}=false: the training passes compute every sequence at {w.max_prompt + w.max_response} tokens "
          f"(max_prompt_length + max_response_length) where it holds about "
          f"{a['prompt_length_mean'] + a['response_length_mean']}: step {pred.step_s:.0f} s → {packed.step_s:.0f} s "
          "with packed sequences",
          f"set {key}=true" + (" (a Gated DeltaNet model packs its sequences under Megatron only from megatron-core "
                               "0.18: Megatron-LM PR #2644, verl PR #7336)" if _hybrid_megatron(w) else ""))


def _hybrid_megatron(w: Any) -> bool:
    """A hybrid linear-attention model (fewer attending layers than layers) on the Megatron engine."""
    return w.backend == "megatron" and 0 < w.attn_layers < w.layers


def _split(c: Ctx, f: Facts, shape: Any, w: Any) -> None:
    """VI899: the rollout on GPUs of its own (one-step-off, fully async) and one side waiting IDLE_SHARE of every
    step for the other, where another split of the same GPUs that training can run (verl's batch asserts,
    wizard.verlspec.arithmetic.batch_checks; the memory fit where it was estimated, else no fewer training GPUs) is
    predicted GAIN faster (wizard.planner.split)."""
    from wizard.planner import split as sp
    from wizard.verlspec import arithmetic as rc

    if not w.overlap or f.n_gpus is None or not f.dp:
        return
    cur = sp.Split(c.int("trainer.nnodes") or 1, c.int("trainer.n_gpus_per_node") or 0,
                   c.int("rollout.nnodes") or 0, c.int("rollout.n_gpus_per_node") or 0)
    if cur.trainer_gpus != f.n_gpus or not cur.rollout_gpus:
        return
    group = f.n_gpus // f.dp  # the GPUs that share one sequence in training (Ulysses SP; Megatron TP × PP × CP)
    layout = getattr(c, "memory_layout", None)
    micro = None if f.dynamic else c.int(f"{A}.ppo_micro_batch_size_per_gpu")
    experts = w.expert_parallel * w.expert_tp * w.pipeline if f.megatron and w.expert_parallel > 1 else 1

    def runs(s: Any) -> bool:
        gpus = s.trainer_gpus
        if gpus % group or gpus % experts:
            return False
        dp = gpus // group
        # a fully async trainer takes no train_batch_size (f.tbs None): its batches are mini-batches
        updates = f.tbs // f.mini if f.tbs and f.mini and f.tbs % f.mini == 0 else 1
        if f.mini and f.n and rc.batch_checks(f.mini * updates, updates, f.n,
                                              rc.Ranks(dp, gpus, f.megatron, f.dynamic, micro)):
            return False
        if layout is None or shape is None:
            return gpus >= cur.trainer_gpus  # memory not estimated: as many training GPUs hold as much or more
        from wizard.planner.memory import estimate

        est = estimate(shape, replace(layout, n_gpus=gpus, dp=dp, gpus_per_node=s.trainer_per_node))
        return est.peak_gib <= est.capacity_gib

    known = c.hw.source in ("flags", "bundle") and c.hw.gpus_per_node
    b = sp.balance(w, cur, runs, c.hw.gpus_per_node if known else sp.NODE_GPUS)
    if b.idle_share < sp.IDLE_SHARE or b.best is None or b.best_step_s is None:
        return
    waiting = cur.rollout_gpus if b.idle_side == "rollout" else cur.trainer_gpus
    changed = {k: v for k, v in b.best.keys().items() if cur.keys()[k] != v}
    c.add("VI899", "info", tuple(cur.keys()),
          f"the {b.idle_side} side's {waiting} GPUs wait {b.idle_share:.0%} of every step (rollout {b.rollout_s:.0f} s "
          f"beside training {b.train_s:.0f} s); {b.best.label()} of the same {cur.trainer_gpus + cur.rollout_gpus} "
          f"are predicted {b.step_s:.0f} s → {b.best_step_s:.0f} s a step",
          "set " + " ".join(f"{k}={v}" for k, v in changed.items()))


__all__ = ["rule_time", "A"]
