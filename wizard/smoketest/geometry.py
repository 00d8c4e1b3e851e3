"""The bundle's batch geometry as verl reads it, and its scaled-down smoke version.

The divisibility rules are verl's batch arithmetic (wizard.verlspec.arithmetic); this module only
applies them to the composed config and searches the smallest batch that keeps them.
Only the standard library is imported at module level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from wizard.intent.errors import UserError
from wizard.verlspec.lora import engine_rank
from wizard.verlspec.arithmetic import (data_parallel_size, effective_sp, min_token_budget, minimal_batch, scaled_micro,
                                        smoke_dp, splits_evenly, step_batch, update_split)

DEFAULT_PROMPTS = 8  # prompts per smoke step unless --prompts (rounded up to the geometry's unit)
MAX_RESPONSE_TOKENS = 48  # responses are capped here in the cpu miniature


@dataclass(frozen=True)
class Geometry:
    """The bundle's batch and device geometry, as verl will read it from the composed config."""

    prompts: int  # data.train_batch_size
    n: int  # rollout.n
    mini: int  # actor.ppo_mini_batch_size (prompts)
    epochs: int
    nnodes: int
    gpus_per_node: int
    dp: int
    sp: int
    megatron: bool
    model_parallel: int  # megatron TP×PP×CP (1 for FSDP)
    megatron_tp: int
    dynamic: bool
    micro: Optional[int]  # ppo_micro_batch_size_per_gpu
    max_tokens: Optional[int]  # ppo_max_token_len_per_gpu
    logprob_micro: Optional[int]
    seq_len: int
    max_prompt_length: int
    max_response_length: int
    rollout_tp: int
    critic_mini: Optional[int] = None
    critic_micro: Optional[int] = None
    critic_max_tokens: Optional[int] = None
    logprob_max_tokens: Optional[int] = None  # rollout.log_prob_max_token_len_per_gpu (the actor's old log-probs)
    ref_logprob_micro: Optional[int] = None  # ref.log_prob_micro_batch_size_per_gpu
    ref_logprob_max_tokens: Optional[int] = None
    lora_rank: int = 0  # the engine's LoRA rank (model.lora_rank; Megatron: model.lora.rank): > 0 trains adapters, reference in the actor

    @property
    def n_gpus(self) -> int:
        return self.nnodes * self.gpus_per_node

    @property
    def updates(self) -> int:
        return self.prompts // self.mini if self.mini and self.prompts % self.mini == 0 else 0

    def split(self) -> Any:
        """verl's split of one actor mini-batch over the data-parallel ranks and micro-batches."""
        return update_split(self.mini, self.n, self.dp, None if self.dynamic else self.micro)

    @property
    def per_rank(self) -> int:
        return self.split().per_rank or 0

    @property
    def seqs_per_budget(self) -> int:
        """Full-length sequences one dynamic token budget holds (≥ 1 when the budget is valid)."""
        return self.seqs_in(self.max_tokens)

    def seqs_in(self, budget: Optional[int]) -> int:
        """Full-length sequences a per-GPU token budget holds (verl packs budget × SP tokens)."""
        return (budget or 0) * self.sp // max(1, self.seq_len)

    @property
    def logprob_per_rank(self) -> int:
        """Samples each data-parallel rank scores per step in a log-prob pass (the step batch as verl pads it)."""
        if self.dp < 1 or not self.mini:
            return 0
        return step_batch(self.prompts, self.n, self.dp, self.mini, self.critic_mini).per_rank

    @property
    def micro_batches(self) -> int:
        """Micro-batches per rank per mini-batch (dynamic batching: when every sequence is full length)."""
        split = self.split()
        if not split.per_rank:
            return 0
        if not self.dynamic:
            return split.per_rank // self.micro if split.micro_ok and self.micro else 0
        return max(1, math.ceil(split.per_rank / max(1, self.seqs_per_budget)))

    def problems(self) -> list[str]:
        """verl's divisibility rules (driver, TaskRunner and workers) that this geometry breaks."""
        out = []
        p, n, mini = self.prompts, self.n, self.mini
        split = self.split()
        if n < 1:
            out.append(f"rollout.n={n} generates nothing")
        if mini < 1 or mini > p:
            out.append(f"ppo_mini_batch_size={mini} must be between 1 and data.train_batch_size={p} (verl: "
                       f"train_batch_size must be >= actor.ppo_mini_batch_size)")
        elif p % mini:
            out.append(f"data.train_batch_size={p} is not a whole number of mini-batches of {mini} prompts "
                       f"(verl's mini-batch iterator asserts {p * n} % {mini * n} == 0)")
        if split.per_rank is None:
            out.append(f"a mini-batch of {mini}×{n}={mini * n} samples does not split over {self.dp} data-parallel "
                       "ranks (engine_workers.train_mini_batch asserts it)")
        if not self.dynamic:
            if not self.micro:
                out.append("ppo_micro_batch_size_per_gpu is not set and dynamic batching is off")
            elif split.micro_ok is False:
                out.append(f"ppo_micro_batch_size_per_gpu={self.micro} does not divide the {split.per_rank} samples "
                           "each rank gets per mini-batch (workers/engine/utils.py asserts it)")
            minimal = minimal_batch(self.n_gpus, megatron=self.megatron, megatron_dp=self.dp, micro=self.micro or 1)
            if (p * n) % max(1, minimal):
                out.append(f"train_batch_size×n={p * n} is not divisible by the minimal batch {minimal} "
                           "(verl's validate_config)")
        elif (self.max_tokens or 0) < min_token_budget(self.seq_len, self.sp):
            out.append(f"ppo_max_token_len_per_gpu={self.max_tokens} × SP {self.sp} cannot hold one "
                       f"{self.seq_len}-token sequence (seqlen_balancing asserts it)")
        if self.critic_mini is not None:
            cm = self.critic_mini
            critic = update_split(cm, n, self.dp, None if self.dynamic else (self.critic_micro or None))
            if critic.per_rank is None or p % max(1, cm):
                out.append(f"critic.ppo_mini_batch_size={cm} does not split the batch into whole mini-batches "
                           f"over {self.dp} ranks")
            if critic.micro_ok is False:
                out.append(f"critic.ppo_micro_batch_size_per_gpu={self.critic_micro} does not divide the critic's "
                           "samples per rank")
        return out

    def as_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d.update(n_gpus=self.n_gpus, updates=self.updates, samples=self.prompts * self.n,
                 samples_per_update=self.mini * self.n, per_rank=self.per_rank, micro_batches=self.micro_batches)
        return d


@dataclass(frozen=True)
class SmokeGeometry:
    """The bundle's geometry scaled down: same n, same number of mini-batches, same micro-batches per mini-batch."""

    prompts: int
    n: int
    mini: int
    updates: int
    epochs: int
    dp: int
    dynamic: bool
    micro_batches: int  # per rank per mini-batch (fixed micro-batches); worst case under dynamic batching
    micro: Optional[int]  # samples per micro-batch (fixed)
    seqs_per_budget: int  # dynamic: full-length sequences per token budget, as in the bundle
    critic_seqs_per_budget: int
    response_length: int
    unit: int  # prompts come in multiples of this
    # the log-prob passes (old log-probs: rollout.log_prob_*; reference: ref.log_prob_*), per rank
    logprob_micro: Optional[int] = None  # fixed micro-batch size (None: token budgets)
    logprob_how: str = ""  # how logprob_micro relates to the bundle's
    logprob_seqs_per_budget: int = 1  # dynamic: full-length sequences per log-prob token budget
    ref_logprob_micro: Optional[int] = None
    ref_logprob_how: str = ""
    ref_seqs_per_budget: int = 1
    lora: bool = False  # adapters only; the reference is the actor with its adapters disabled
    bundle_dp: int = 1

    @property
    def samples(self) -> int:
        return self.prompts * self.n

    @property
    def samples_per_update(self) -> int:
        return self.mini * self.n

    @property
    def per_rank(self) -> int:
        return self.samples_per_update // self.dp

    @property
    def logprob_per_rank(self) -> int:
        """Samples each emulated rank scores in one log-prob pass (the whole step's batch over the ranks)."""
        return self.samples // self.dp

    def as_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d.update(samples=self.samples, samples_per_update=self.samples_per_update, per_rank=self.per_rank)
        return d


def geometry_from_config(cfg: Any) -> Geometry:
    """Read the geometry from a composed verl config (interpolations resolved)."""
    a = cfg.actor_rollout_ref.actor
    r = cfg.actor_rollout_ref.rollout
    t = cfg.trainer
    nnodes, gpn = int(t.nnodes), int(t.n_gpus_per_node)
    megatron = str(a.get("strategy", "fsdp")) == "megatron"
    if megatron:
        m = a.megatron
        tp = int(m.get("tensor_model_parallel_size", 1))
        pp, cp = int(m.get("pipeline_model_parallel_size", 1)), int(m.get("context_parallel_size", 1))
        mp, sp = tp * pp * cp, 1
        dp = data_parallel_size(nnodes * gpn, megatron=True, tp=tp, pp=pp, cp=cp) or 0
    else:
        tp, mp = 1, 1
        engine_sp = a.get("fsdp_config", {}).get("ulysses_sequence_parallel_size", 1)
        sp = effective_sp(a.get("ulysses_sequence_parallel_size", 1), engine_sp)
        dp = data_parallel_size(nnodes * gpn, sp=sp) or 0
    critic_used = need_critic(cfg)
    c = cfg.critic

    def opt_int(v: Any) -> Optional[int]:
        return None if v is None else int(v)

    return Geometry(
        prompts=int(cfg.data.train_batch_size), n=int(r.n), mini=int(a.ppo_mini_batch_size),
        epochs=int(a.get("ppo_epochs", 1) or 1), nnodes=nnodes, gpus_per_node=gpn, dp=dp, sp=sp, megatron=megatron,
        model_parallel=mp, megatron_tp=tp, dynamic=bool(a.use_dynamic_bsz),
        micro=opt_int(a.get("ppo_micro_batch_size_per_gpu")), max_tokens=opt_int(a.get("ppo_max_token_len_per_gpu")),
        logprob_micro=opt_int(r.get("log_prob_micro_batch_size_per_gpu")),
        seq_len=int(cfg.data.max_prompt_length) + int(cfg.data.max_response_length),
        max_prompt_length=int(cfg.data.max_prompt_length), max_response_length=int(cfg.data.max_response_length),
        rollout_tp=int(r.get("tensor_model_parallel_size", 1) or 1),
        critic_mini=opt_int(c.get("ppo_mini_batch_size")) if critic_used else None,
        critic_micro=opt_int(c.get("ppo_micro_batch_size_per_gpu")) if critic_used else None,
        critic_max_tokens=opt_int(c.get("ppo_max_token_len_per_gpu")) if critic_used else None,
        logprob_max_tokens=opt_int(r.get("log_prob_max_token_len_per_gpu")),
        ref_logprob_micro=opt_int(cfg.actor_rollout_ref.ref.get("log_prob_micro_batch_size_per_gpu")),
        ref_logprob_max_tokens=opt_int(cfg.actor_rollout_ref.ref.get("log_prob_max_token_len_per_gpu")),
        # the rank the training engine applies: model.lora.rank for Megatron, model.lora_rank for FSDP (verlspec.lora)
        lora_rank=engine_rank(cfg.actor_rollout_ref.model, megatron=megatron),
    )


def scale_geometry(g: Geometry, prompts: Optional[int] = None, *, dp: Optional[int] = None,
                   verl_rules: bool = False, response_cap: int = MAX_RESPONSE_TOKENS) -> SmokeGeometry:
    """Scale `g` down to a few prompts. Kept: samples per prompt, mini-batches per step and
    micro-batches per mini-batch per rank; `dp` data-parallel ranks (default: the bundle's own, or its
    largest divisor ≤ 8 — arithmetic.smoke_dp); the log-prob micro-batch sizes (the bundle's where they divide
    the smaller batch, else its micro-batch count, arithmetic.scaled_micro) and every token budget as the
    number of full-length sequences it holds in the bundle. `verl_rules`: also keep every check verl applies at full scale (the verl engine)."""
    problems = g.problems()
    if problems or not g.updates or not g.micro_batches:
        raise UserError(f"the bundle's batch geometry is not valid for verl: {'; '.join(problems) or 'no whole mini-batch'}",
                        "re-render the bundle with verl-init (it derives every batch number so that they divide)",
                        rule="VI963", keys=("data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size"))
    u, n, k = g.updates, g.n, g.micro_batches
    dp_s = dp if dp is not None else smoke_dp(g.dp)

    def valid(m: int) -> bool:
        split = update_split(m, n, dp_s, None)
        if split.per_rank is None or (not g.dynamic and split.per_rank % k):
            return False
        if verl_rules and not g.dynamic:
            minimal = minimal_batch(g.n_gpus, megatron=g.megatron, megatron_dp=g.dp, micro=split.per_rank // k)
            if not splits_evenly(u * m, n, minimal):
                return False
        return True

    limit = max(g.mini, (prompts or 0) // max(1, u) + 1) * 2
    minis = [m for m in range(1, limit + 1) if valid(m)]
    if not minis:
        raise UserError("no smaller batch keeps the bundle's geometry", "run with --prompts equal to data.train_batch_size",
                        rule="VI963")
    unit = u * minis[0]
    if prompts is None:
        target = min(g.prompts, DEFAULT_PROMPTS)
        m = next((m for m in minis if u * m >= target), minis[0])
    else:
        if prompts % u or prompts // u not in minis:
            valid_p = [u * m for m in minis]
            near = sorted(sorted(valid_p, key=lambda v: (abs(v - prompts), v))[:2])
            raise UserError(
                f"--prompts {prompts} does not keep the bundle's geometry ({u} mini-batch(es) per step, each of whole "
                f"prompts whose {n} samples split over {dp_s} rank(s) × {k} micro-batch(es))",
                f"nearest valid: {' or '.join(map(str, near))} (multiples of {unit})", rule="VI961", keys=("--prompts",))
        m = prompts // u
    per = m * n // dp_s
    c_seqs = g.seqs_in(g.critic_max_tokens) if g.critic_max_tokens else g.seqs_per_budget
    lp_rank = u * m * n // dp_s  # every sample of the step, over the ranks
    lp_micro, lp_how, ref_micro, ref_how = None, "token budget", None, "token budget"
    if not g.dynamic:
        lp_micro, lp_how = scaled_micro(lp_rank, g.logprob_micro or 0, g.logprob_per_rank)
        if g.lora_rank:  # the reference is the actor with adapters off: the actor's log-prob settings (trainer_base.py:1703)
            ref_micro, ref_how = lp_micro, "the actor's (reference inside the actor)"
        else:
            ref_micro, ref_how = scaled_micro(lp_rank, g.ref_logprob_micro or g.logprob_micro or 0, g.logprob_per_rank)
    lp_seqs = g.seqs_in(g.logprob_max_tokens) if g.logprob_max_tokens else g.seqs_per_budget
    ref_seqs = lp_seqs if g.lora_rank or not g.ref_logprob_max_tokens else g.seqs_in(g.ref_logprob_max_tokens)
    return SmokeGeometry(prompts=u * m, n=n, mini=m, updates=u, epochs=g.epochs, dp=dp_s, dynamic=g.dynamic,
                         micro_batches=k, micro=None if g.dynamic else per // k, seqs_per_budget=g.seqs_per_budget,
                         critic_seqs_per_budget=max(1, c_seqs), response_length=min(g.max_response_length, response_cap),
                         unit=unit, logprob_micro=lp_micro, logprob_how=lp_how, logprob_seqs_per_budget=max(1, lp_seqs),
                         ref_logprob_micro=ref_micro, ref_logprob_how=ref_how, ref_seqs_per_budget=max(1, ref_seqs),
                         lora=g.lora_rank > 0, bundle_dp=g.dp)


def need_critic(cfg: Any) -> bool:
    """verl's need_critic (trainer/ppo/utils.py): critic.enable if set, else adv_estimator == gae."""
    enable = cfg.critic.get("enable", None)
    if enable is not None:
        return bool(enable)
    return str(cfg.algorithm.adv_estimator) == "gae"


def need_ref(cfg: Any) -> bool:
    """verl's need_reference_policy: KL in the reward or KL as a loss."""
    return bool(cfg.algorithm.get("use_kl_in_reward", False)) or bool(cfg.actor_rollout_ref.actor.get("use_kl_loss", False))

