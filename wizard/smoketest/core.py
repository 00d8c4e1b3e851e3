"""`verl-init smoke BUNDLE`: one real rollout → reward → advantage → update cycle before GPUs are booked.

    report = wizard.smoketest.core("runs/grpo-qwen")        # engine="auto": verl on a GPU machine, else cpu
    report.ok, report.as_dict()

Two engines run the same six phases (probe, data, rollout, reward, advantage, update):

- `verl`: the real thing, `python3 -m verl.trainer.main_ppo` on the bundle's config with overrides
  for a single step (see wizard.smoketest.verl); verl's step-1 metrics are parsed from its output.
- `cpu`: a miniature on a local Ray instance with one process per role, a tiny model of the
  bundle model's architecture and verl's own algorithm code (see wizard.smoketest.cpu).

Both use the bundle's batch geometry scaled down: samples per prompt unchanged, the same number of
mini-batches per step and micro-batches per mini-batch, so that every divisibility verl relies on
is exercised. The report shows, with numbers measured in the run, that the five classic pitfalls
(docs/pitfalls.md) are absent; `ok` is true only if every property holds.

Heavy imports (hydra, verl, torch, ray, rich) happen inside functions.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

from wizard.intent.errors import UserError

ENGINES = ("auto", "verl", "cpu")
PHASES = ("probe", "data", "rollout", "reward", "advantage", "update")
DEFAULT_PROMPTS = 8  # prompts per smoke step unless --prompts (rounded up to the geometry's unit)
MAX_RESPONSE_TOKENS = 48  # responses are capped here in the cpu miniature
PITFALLS = {
    1: "roles that share one model",
    2: "rollout and update batches out of step",
    3: "device mapping and parallel groups",
    4: "data that does not match what verl reads",
    5: "local versus cluster environment",
}


# =============================================================================================
# report


@dataclass
class PhaseResult:
    name: str
    status: str = "pending"  # pending | running | ok | failed | skipped
    seconds: float = 0.0
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "seconds": round(self.seconds, 2), "detail": self.detail}


@dataclass
class Check:
    pitfall: Optional[int]  # 1-5 (docs/pitfalls.md) or None for properties of the run itself
    name: str
    ok: Optional[bool]  # None: not measurable with this engine (does not fail the run)
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)
    phase: Optional[str] = None  # the phase that measured it (a failed check fails its phase)
    hint: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"pitfall": self.pitfall, "name": self.name, "ok": self.ok, "phase": self.phase, "detail": self.detail,
                "hint": self.hint, "evidence": _jsonable(self.evidence)}


@dataclass
class Failure:
    phase: str
    message: str
    hint: str = ""
    error: str = ""  # exception type, when the failure is an exception

    def line(self) -> str:
        return f"{self.phase}: {self.message}" + (f" — {self.hint}" if self.hint else "")


@dataclass
class SmokeReport:
    bundle: str
    engine: str
    algorithm: str = ""
    adv_estimator: str = ""
    prompts: int = 0
    samples: int = 0  # prompts × samples per prompt: what one step trains on
    samples_generated: int = 0
    samples_used: Optional[int] = 0  # distinct samples the update consumed, each once per epoch (cpu engine)
    reward_mean: Optional[float] = None
    reward_std: Optional[float] = None
    kl: Optional[float] = None
    policy_loss: Optional[float] = None
    entropy: Optional[float] = None
    actor_updated: Optional[bool] = None
    reference_unchanged: Optional[bool] = None
    critic_used: Optional[bool] = None
    critic_updated: Optional[bool] = None
    phases: list[PhaseResult] = field(default_factory=lambda: [PhaseResult(p) for p in PHASES])
    checks: list[Check] = field(default_factory=list)
    failure: Optional[Failure] = None
    geometry: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    placement: dict[str, Any] = field(default_factory=dict)
    placement_note: str = ""
    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    reward: dict[str, Any] = field(default_factory=dict)
    update: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)  # verl engine: step-1 metrics as verl printed them
    command: list[str] = field(default_factory=list)  # verl engine: the command line that ran
    total_seconds: float = 0.0
    log_tail: str = ""

    @property
    def seconds(self) -> dict[str, float]:
        out = {p.name: round(p.seconds, 2) for p in self.phases}
        out["total"] = round(self.total_seconds, 2)
        return out

    @property
    def ok(self) -> bool:
        return (self.failure is None and all(p.status == "ok" for p in self.phases)
                and all(c.ok is not False for c in self.checks))

    def phase(self, name: str) -> PhaseResult:
        return next(p for p in self.phases if p.name == name)

    def pitfalls(self) -> dict[str, Optional[bool]]:
        """Per pitfall: True if every measured check of it held, False if one failed, None if none ran."""
        out: dict[str, Optional[bool]] = {}
        for number in PITFALLS:
            measured = [c.ok for c in self.checks if c.pitfall == number and c.ok is not None]
            out[str(number)] = None if not measured else all(measured)
        return out

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ok": self.ok, "engine": self.engine, "bundle": self.bundle, "algorithm": self.algorithm,
            "adv_estimator": self.adv_estimator, "prompts": self.prompts, "samples": self.samples,
            "samples_generated": self.samples_generated, "samples_used": self.samples_used,
            "reward_mean": self.reward_mean, "reward_std": self.reward_std, "kl": self.kl,
            "policy_loss": self.policy_loss, "entropy": self.entropy, "actor_updated": self.actor_updated,
            "reference_unchanged": self.reference_unchanged, "critic_used": self.critic_used,
            "critic_updated": self.critic_updated, "seconds": self.seconds,
            "phases": [p.as_dict() for p in self.phases], "pitfalls": self.pitfalls(),
            "checks": [c.as_dict() for c in self.checks],
            "failure": None if self.failure is None else dict(self.failure.__dict__),
            "geometry": self.geometry, "resources": self.resources, "placement": self.placement,
            "placement_note": self.placement_note, "model": self.model, "data": self.data, "reward": self.reward,
            "update": self.update, "metrics": self.metrics, "command": self.command,
        }
        if not self.ok and self.log_tail:
            doc["log_tail"] = self.log_tail
        return _jsonable(doc)

    def summary(self) -> str:
        verdict = "PASSED" if self.ok else "FAILED"
        head = f"smoke {verdict}: {self.engine} engine, {self.algorithm or self.adv_estimator}"
        if self.prompts:
            head += f", {self.prompts} prompts × {self.samples // max(1, self.prompts)} = {self.samples} samples"
        parts = [head]
        if self.reward_mean is not None:
            parts.append(f"reward {self.reward_mean:.3f}" + (f" ± {self.reward_std:.3f}" if self.reward_std is not None else ""))
        if self.kl is not None:
            parts.append(f"kl {self.kl:.3g}")
        if self.policy_loss is not None:
            parts.append(f"policy loss {self.policy_loss:.3g}")
        parts.append(f"{self.total_seconds:.1f} s")
        text = ", ".join(parts)
        if self.failure is not None:
            text += f"\n  failed in {self.failure.line()}"
        for c in self.checks:
            if c.ok is False:
                text += f"\n  pitfall {c.pitfall or '-'} {c.name}: {c.detail}"
        return text


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if hasattr(value, "item"):
        try:
            return _jsonable(value.item())
        except (ValueError, TypeError):
            pass
    return str(value)


# =============================================================================================
# geometry


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

    @property
    def n_gpus(self) -> int:
        return self.nnodes * self.gpus_per_node

    @property
    def updates(self) -> int:
        return self.prompts // self.mini if self.mini and self.prompts % self.mini == 0 else 0

    @property
    def per_rank(self) -> int:
        s = self.mini * self.n
        return s // self.dp if self.dp and s % self.dp == 0 else 0

    @property
    def seqs_per_budget(self) -> int:
        """Full-length sequences one dynamic token budget holds (≥ 1 when the budget is valid)."""
        return (self.max_tokens or 0) * self.sp // max(1, self.seq_len)

    @property
    def micro_batches(self) -> int:
        """Micro-batches per rank per mini-batch (dynamic batching: when every sequence is full length)."""
        if not self.per_rank:
            return 0
        if not self.dynamic:
            return self.per_rank // self.micro if self.micro and self.per_rank % self.micro == 0 else 0
        return max(1, math.ceil(self.per_rank / max(1, self.seqs_per_budget)))

    def problems(self) -> list[str]:
        """verl's divisibility rules (driver, TaskRunner and workers) that this geometry breaks."""
        out = []
        p, n, mini = self.prompts, self.n, self.mini
        if n < 1:
            out.append(f"rollout.n={n} generates nothing")
        if mini < 1 or mini > p:
            out.append(f"ppo_mini_batch_size={mini} must be between 1 and data.train_batch_size={p} (verl: "
                       f"train_batch_size must be >= actor.ppo_mini_batch_size)")
        elif p % mini:
            out.append(f"data.train_batch_size={p} is not a whole number of mini-batches of {mini} prompts "
                       f"(verl's mini-batch iterator asserts {p * n} % {mini * n} == 0)")
        if self.dp < 1 or (mini * n) % max(1, self.dp):
            out.append(f"a mini-batch of {mini}×{n}={mini * n} samples does not split over {self.dp} data-parallel "
                       "ranks (engine_workers.train_mini_batch asserts it)")
        if not self.dynamic:
            if not self.micro:
                out.append("ppo_micro_batch_size_per_gpu is not set and dynamic batching is off")
            elif self.per_rank and self.per_rank % self.micro:
                out.append(f"ppo_micro_batch_size_per_gpu={self.micro} does not divide the {self.per_rank} samples "
                           "each rank gets per mini-batch (workers/engine/utils.py asserts it)")
            minimal = self.dp * (self.micro or 1) if self.megatron else self.n_gpus
            if (p * n) % max(1, minimal):
                out.append(f"train_batch_size×n={p * n} is not divisible by the minimal batch {minimal} "
                           "(verl's validate_config)")
        elif self.seqs_per_budget < 1:
            out.append(f"ppo_max_token_len_per_gpu={self.max_tokens} × SP {self.sp} cannot hold one "
                       f"{self.seq_len}-token sequence (seqlen_balancing asserts it)")
        if self.critic_mini is not None:
            cm = self.critic_mini
            if (cm * n) % max(1, self.dp) or p % max(1, cm):
                out.append(f"critic.ppo_mini_batch_size={cm} does not split the batch into whole mini-batches "
                           f"over {self.dp} ranks")
            if not self.dynamic and self.critic_micro and ((cm * n) // max(1, self.dp)) % self.critic_micro:
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

    @property
    def samples(self) -> int:
        return self.prompts * self.n

    @property
    def samples_per_update(self) -> int:
        return self.mini * self.n

    @property
    def per_rank(self) -> int:
        return self.samples_per_update // self.dp

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
        tp = int(a.megatron.get("tensor_model_parallel_size", 1))
        mp = tp * int(a.megatron.get("pipeline_model_parallel_size", 1)) * int(a.megatron.get("context_parallel_size", 1))
        sp = 1
        dp = nnodes * gpn // mp if (nnodes * gpn) % mp == 0 else 0
    else:
        tp, mp = 1, 1
        sp = int(a.get("ulysses_sequence_parallel_size", 1) or 1)
        dp = nnodes * gpn // sp if (nnodes * gpn) % sp == 0 else 0
    critic_used = _need_critic(cfg)
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
    )


def scale_geometry(g: Geometry, prompts: Optional[int] = None, *, dp: Optional[int] = None,
                   verl_rules: bool = False, response_cap: int = MAX_RESPONSE_TOKENS) -> SmokeGeometry:
    """Scale `g` down to a few prompts. Kept: samples per prompt, mini-batches per step and
    micro-batches per mini-batch per rank; `dp` data-parallel ranks (default: 2 if the bundle's dp
    is even, else 1). `verl_rules`: also keep every check verl applies at full scale (the verl engine)."""
    problems = g.problems()
    if problems or not g.updates or not g.micro_batches:
        raise UserError(f"the bundle's batch geometry is not valid for verl: {'; '.join(problems) or 'no whole mini-batch'}",
                        "re-render the bundle with verl-init (it derives every batch number so that they divide)",
                        rule="VI963", keys=("data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size"))
    u, n, k = g.updates, g.n, g.micro_batches
    dp_s = dp if dp is not None else (2 if g.dp % 2 == 0 else 1)

    def valid(m: int) -> bool:
        s = m * n
        if s % dp_s:
            return False
        per = s // dp_s
        if not g.dynamic and per % k:
            return False
        if verl_rules and not g.dynamic:
            micro_s = per // k
            minimal = g.dp * micro_s if g.megatron else g.n_gpus
            if (u * m * n) % minimal:
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
    c_seqs = (g.critic_max_tokens or 0) * g.sp // max(1, g.seq_len) if g.critic_max_tokens else g.seqs_per_budget
    return SmokeGeometry(prompts=u * m, n=n, mini=m, updates=u, epochs=g.epochs, dp=dp_s, dynamic=g.dynamic,
                         micro_batches=k, micro=None if g.dynamic else per // k, seqs_per_budget=g.seqs_per_budget,
                         critic_seqs_per_budget=max(1, c_seqs), response_length=min(g.max_response_length, response_cap),
                         unit=unit)


def _need_critic(cfg: Any) -> bool:
    """verl's need_critic (trainer/ppo/utils.py): critic.enable if set, else adv_estimator == gae."""
    enable = cfg.critic.get("enable", None)
    if enable is not None:
        return bool(enable)
    return str(cfg.algorithm.adv_estimator) == "gae"


def _need_ref(cfg: Any) -> bool:
    """verl's need_reference_policy: KL in the reward or KL as a loss."""
    return bool(cfg.algorithm.get("use_kl_in_reward", False)) or bool(cfg.actor_rollout_ref.actor.get("use_kl_loss", False))


# =============================================================================================
# options, context, phases


@dataclass
class SmokeOptions:
    engine: str = "auto"
    prompts: Optional[int] = None
    data_dir: Optional[str] = None  # a local copy of a hub dataset for data/prepare_data.py --local-dir
    model_dir: Optional[str] = None  # verl engine: a local model folder standing in for the bundle's model
    seed: int = 0
    timeout: float = 900.0  # verl engine: seconds before main_ppo is stopped
    ray_cpus: int = 2  # logical CPUs of the cpu engine's local Ray instance
    fault: Optional[str] = None  # tests only: "shared_reference" wires the reference to the actor's weights
    main_command: Optional[list[str]] = None  # tests only: stands in for `python3 -m verl.trainer.main_ppo`


_ARGUMENT_RULES = frozenset({"VI960", "VI961", "VI962", "VI964"})  # raised to the caller, not reported as findings


class _StopRun(Exception):
    """A phase failed: the run stops (the failure is already recorded)."""


class SmokeContext:
    """Everything one smoke run shares between its phases and engines."""

    def __init__(self, bundle: str, options: SmokeOptions, report: SmokeReport, display: "Display") -> None:
        self.bundle = bundle
        self.options = options
        self.report = report
        self.display = display
        self.cfg: Any = None
        self.answers: Any = None
        self.plan: Any = None
        self.geometry: Any = None
        self.smoke_geometry: Optional[SmokeGeometry] = None
        self.workdir = ""
        self.ray_dir = ""
        self.ray_started = False
        self.env_restore: dict[str, Optional[str]] = {}
        # the launching environment as the user has it (the cpu engine changes a few variables for Ray)
        self.user_env = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "RAY_ADDRESS")}
        self.roles: Any = None
        self.current_phase: Optional[str] = None
        self._log = io.StringIO()

    # -- bookkeeping ---------------------------------------------------------------------------
    def log(self, text: str) -> None:
        if text:
            self._log.write(text if text.endswith("\n") else text + "\n")

    def log_text(self) -> str:
        return self._log.getvalue()

    def check(self, pitfall: Optional[int], name: str, ok: Optional[bool], detail: str,
              evidence: Optional[dict[str, Any]] = None, *, hint: str = "", phase: Optional[str] = None) -> Check:
        """Record one measured property; a False one fails the phase it is measured in."""
        c = Check(pitfall, name, ok, detail, evidence or {}, phase or self.current_phase, hint)
        self.report.checks = [x for x in self.report.checks if x.name != name] + [c]
        return c

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[PhaseResult]:
        ph = self.report.phase(name)
        ph.status = "running"
        self.current_phase = name
        self.display.update(self.report)
        started = time.perf_counter()
        try:
            yield ph
        except _StopRun:
            raise
        except UserError as exc:
            if any(p.rule in _ARGUMENT_RULES for p in exc.problems):
                ph.status = "failed"
                raise  # a bad argument, not a finding about the bundle: the caller gets the error
            ph.seconds += time.perf_counter() - started
            ph.status = "failed"
            self.report.failure = failure_from_exception(name, exc)
            ph.detail = self.report.failure.message
            self.display.update(self.report)
            raise _StopRun() from None
        except Exception as exc:  # noqa: BLE001 - every failure is reported in its phase
            ph.seconds += time.perf_counter() - started
            ph.status = "failed"
            self.report.failure = failure_from_exception(name, exc)
            ph.detail = self.report.failure.message
            self.log(_format_exc(exc))
            self.display.update(self.report)
            raise _StopRun() from None
        finally:
            self.current_phase = None
        ph.seconds += time.perf_counter() - started
        failed = [c for c in self.report.checks if c.phase == name and c.ok is False]
        if failed:
            ph.status = "failed"
            self.report.failure = Failure(name, "; ".join(f"{c.name}: {c.detail}" for c in failed),
                                          next((c.hint for c in failed if c.hint), ""), "check")
            self.display.update(self.report)
            raise _StopRun()
        ph.status = "ok"
        self.display.update(self.report)

    def get(self, refs: Any, timeout: Optional[float] = None) -> Any:
        import ray

        from wizard.smoketest.cpu import ROLE_TIMEOUT_S

        return ray.get(refs, timeout=timeout or ROLE_TIMEOUT_S)

    # -- what the bundle says -------------------------------------------------------------------
    @property
    def need_ref(self) -> bool:
        return _need_ref(self.cfg)

    @property
    def need_critic(self) -> bool:
        return _need_critic(self.cfg)

    @property
    def model_path(self) -> str:
        if self.options.model_dir:
            return self.options.model_dir
        return str(self.cfg.actor_rollout_ref.model.path)

    @property
    def answers_model(self) -> Optional[str]:
        return None if self.answers is None else self.answers.model

    @property
    def answers_params_b(self) -> Optional[float]:
        return None if self.answers is None else self.answers.model_params_b

    @property
    def answer_format(self) -> Optional[str]:
        if self.answers is None:
            return None
        try:
            from wizard.planner.dataprep import resolve

            return resolve(self.answers, self.bundle).answer_format
        except Exception:  # noqa: BLE001
            return None

    @property
    def filter_groups(self) -> bool:
        fg = self.cfg.algorithm.get("filter_groups", None)
        return bool(fg is not None and fg.get("enable", False))

    @property
    def max_gen_batches(self) -> int:
        if not self.filter_groups:
            return 1
        value = int(self.cfg.algorithm.filter_groups.get("max_num_gen_batches", 0) or 0)
        return value if value > 0 else 10

    def role_names(self) -> list[str]:
        names = ["actor+rollout"]
        if self.need_ref:
            names.append("reference")
        if self.need_critic:
            names.append("critic")
        return names + ["reward"]

    def model_shape(self) -> Any:
        """The real model's shape (heads for the sequence-parallel check), when it can be known offline."""
        try:
            from wizard.planner.models import model_size
            from wizard.planner.shapes import from_local, resolve_shape

            path = os.path.expanduser(self.model_path)
            if os.path.isfile(os.path.join(path, "config.json")):
                return from_local(path)
            name = self.answers_model or self.model_path
            size = model_size(name, self.answers_params_b)
            return resolve_shape(name, self.answers_params_b, name_size=size.params_b if size.source == "name" else None)
        except Exception:  # noqa: BLE001
            return None

    def bundle_path(self, value: str) -> str:
        """A path from the config as verl resolves it: relative to the bundle (run.sh starts verl there)."""
        return value if os.path.isabs(value) else os.path.normpath(os.path.join(self.bundle, value))

    def config_for_roles(self) -> dict[str, Any]:
        """The composed config as plain data for the role processes, bundle-relative paths made absolute."""
        from omegaconf import OmegaConf

        doc: dict[str, Any] = dict(OmegaConf.to_container(self.cfg, resolve=True))  # type: ignore[arg-type]
        fn = doc.get("reward", {}).get("custom_reward_function", {}) or {}
        if fn.get("path"):
            fn["path"] = self.bundle_path(str(fn["path"]))
        return doc

    # -- checks shared by the engines ---------------------------------------------------------
    def static_checks(self) -> None:
        """What the composed config says about pitfalls 1-3 (no run needed)."""
        g = self.geometry
        cfg = self.cfg
        adv = str(cfg.algorithm.adv_estimator)
        critic = self.need_critic
        both_kl = bool(cfg.algorithm.get("use_kl_in_reward", False)) and bool(cfg.actor_rollout_ref.actor.get("use_kl_loss", False))
        self.check(1, "critic_matches_algorithm", critic == (adv == "gae"),
                   f"adv_estimator={adv}: critic {'enabled' if critic else 'disabled'}"
                   + ("" if critic == (adv == "gae") else
                      (" — GAE without a critic fails at step 1 with KeyError: 'values'" if adv == "gae"
                       else " — a critic that the estimator never uses is trained for nothing")),
                   {"adv_estimator": adv, "critic.enable": cfg.critic.get("enable", None)},
                   hint="set critic.enable to (adv_estimator == gae); verl-init sets it from the algorithm")
        self.check(1, "kl_counted_once", not both_kl,
                   "KL is " + ("added to the reward AND as a loss (double counting)" if both_kl else
                               "in the reward" if cfg.algorithm.get("use_kl_in_reward", False) else
                               "a loss term" if cfg.actor_rollout_ref.actor.get("use_kl_loss", False) else "not used"),
                   {"use_kl_in_reward": cfg.algorithm.get("use_kl_in_reward", False),
                    "use_kl_loss": cfg.actor_rollout_ref.actor.get("use_kl_loss", False)},
                   hint="keep one: algorithm.use_kl_in_reward or actor_rollout_ref.actor.use_kl_loss")
        if critic:
            cpath = str(cfg.critic.model.get("path", ""))
            rpath = str(cfg.reward.get("reward_model", {}).get("model_path", "") or "")
            self.check(1, "critic_not_reward_model", not (rpath and cpath == rpath),
                       f"critic initialised from {cpath}" + (f", reward model {rpath}" if rpath else ""),
                       {"critic.model.path": cpath, "reward_model": rpath or None},
                       hint="initialise the critic from the policy (critic.model.path = the actor's model)")
        problems = g.problems()
        self.check(2, "bundle_geometry", not problems,
                   "; ".join(problems) if problems else
                   f"{g.prompts} prompts × {g.n} = {g.prompts * g.n} samples per step, {g.updates} mini-batch(es) of "
                   f"{g.mini * g.n} samples, {g.dp} data-parallel rank(s) × {g.per_rank} samples"
                   + (f" in {g.micro_batches} micro-batch(es) of {g.micro}" if not g.dynamic else
                      f", token budget {g.max_tokens} per GPU (≥ {g.seqs_per_budget} full {g.seq_len}-token sequence(s))"),
                   {"bundle": g.as_dict()},
                   hint="re-render the bundle with verl-init: it derives every batch number so that they divide")
        if self.filter_groups:
            gen = int(cfg.data.get("gen_batch_size", g.prompts) or g.prompts)
            self.check(2, "generation_covers_batch", gen >= g.prompts or gen == 1,
                       f"DAPO group filtering: generation batch {gen} prompts for a train batch of {g.prompts} "
                       "(verl's V1 trainer refills filtered groups)", {"gen_batch_size": gen})
        # device mapping
        lay: list[str] = []
        ok = True
        tp = g.rollout_tp
        if tp <= g.gpus_per_node:
            if g.gpus_per_node % tp:
                ok = False
                lay.append(f"rollout TP={tp} does not divide the {g.gpus_per_node} GPUs of a node")
            else:
                lay.append(f"rollout: {g.n_gpus // tp} replica(s) of TP={tp}, each inside one node")
        elif tp % g.gpus_per_node or g.n_gpus % tp:
            ok = False
            lay.append(f"rollout TP={tp} neither fits in a node of {g.gpus_per_node} GPUs nor fills whole nodes")
        else:
            lay.append(f"rollout TP={tp} spans {tp // g.gpus_per_node} whole nodes (tensor-parallel traffic crosses the network)")
        if g.megatron:
            if g.n_gpus % g.model_parallel or g.megatron_tp > g.gpus_per_node:
                ok = False
            lay.append(f"megatron TP×PP×CP={g.model_parallel} (TP={g.megatron_tp}) over {g.n_gpus} GPUs, DP={g.dp}")
        else:
            lay.append(f"FSDP over {g.n_gpus} GPU(s), Ulysses SP={g.sp}, DP={g.dp}")
            shape = self.model_shape()
            if g.sp > 1:
                if g.gpus_per_node % g.sp:
                    ok = False
                    lay.append(f"SP={g.sp} does not divide a node's {g.gpus_per_node} GPUs")
                if shape is not None and (shape.heads % g.sp or shape.kv_heads % g.sp):
                    ok = False
                    lay.append(f"SP={g.sp} does not divide the model's {shape.heads} attention / {shape.kv_heads} KV heads")
        ev: dict[str, Any] = {"nnodes": g.nnodes, "gpus_per_node": g.gpus_per_node, "rollout_tp": tp, "sp": g.sp,
                              "dp": g.dp}
        mem = getattr(self.plan, "memory", None) if self.plan is not None else None
        if mem is not None:
            ev["memory_peak_gb"] = round(mem.peak_gb, 2)
            ev["memory_gpu_gb"] = mem.gpu_gb
            lay.append(f"memory plan: peak {mem.peak_gb:.1f} of {mem.gpu_gb:g} GB per GPU ({'fits' if mem.fits else 'DOES NOT FIT'})")
            ok = ok and bool(mem.fits)
        self.check(3, "device_layout", ok, "; ".join(lay), ev,
                   hint="re-plan with verl-init (rollout TP and SP that divide a node, a layout that fits memory)")

    def env_checks(self) -> None:
        """The launching environment (pitfall 5): hand-set CUDA_VISIBLE_DEVICES, RAY_ADDRESS at a dashboard."""
        cvd, addr = self.user_env["CUDA_VISIBLE_DEVICES"], self.user_env["RAY_ADDRESS"]
        gpn = self.geometry.gpus_per_node
        notes, ok = [], True
        if cvd:
            count = len([d for d in cvd.split(",") if d.strip()])
            if count != gpn:
                ok = False
                notes.append(f"CUDA_VISIBLE_DEVICES={cvd} shows {count} GPU(s) but trainer.n_gpus_per_node={gpn}")
            else:
                notes.append(f"CUDA_VISIBLE_DEVICES shows {count} GPU(s) = n_gpus_per_node")
        else:
            notes.append("CUDA_VISIBLE_DEVICES not hand-set")
        if addr:
            dashboard = addr.startswith("http") or addr.rstrip("/").endswith(":8265")
            ok = ok and not dashboard
            notes.append(f"RAY_ADDRESS={addr}" + (" points at the dashboard, not the GCS (use ray://host:10001 or "
                                                  "host:6379)" if dashboard else ""))
        else:
            notes.append("RAY_ADDRESS not set (verl starts a local Ray)")
        self.check(5, "launch_environment", ok, "; ".join(notes),
                   {"CUDA_VISIBLE_DEVICES": cvd, "RAY_ADDRESS": addr},
                   hint="unset CUDA_VISIBLE_DEVICES (Ray assigns GPUs) or re-plan for the GPUs it shows; "
                        "RAY_ADDRESS must name the GCS (host:6379), not the dashboard")


def _format_exc(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


# Known messages → what to do (the message itself is verl's, kept verbatim).
_HINTS: tuple[tuple[str, str], ...] = (
    ("Reward function is not implemented for data_source",
     "verl scores by data_source: use one it knows (openai/gsm8k, DigitalLearningGmbH/MATH-lighteval, math_dapo, ...) "
     "or set reward=function (the bundle then ships reward/reward_fn.py)"),
    ("Unknown reward manager", "reward.reward_manager.name must be one of naive, dapo, gdpo, rate_limited, remote"),
    ("Unknown advantage estimator", "algorithm.adv_estimator must be one verl registers (grpo, gae, rloo, ...)"),
    ("Unsupported loss mode", "actor_rollout_ref.actor.policy_loss.loss_mode must be one verl registers"),
    ("must be divisible", "re-render the bundle with verl-init: it derives batch sizes that divide"),
    ("max_token_len must be greater", "raise ppo_max_token_len_per_gpu to at least prompt + response length"),
    ("No such file", "check the path (paths in verl_config.yaml are relative to the bundle folder)"),
)


def failure_from_exception(phase: str, exc: BaseException) -> Failure:
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    hint = getattr(exc, "hint", "") or ""
    message = getattr(exc, "message", None) or str(exc).strip() or type(exc).__name__
    kind = type(exc).__name__
    if type(exc).__name__ != "SmokeFailure":
        first = message.splitlines()[-1] if message.splitlines() else message
        message = f"{kind}: {first[:400]}"
    if not hint:
        hint = next((h for needle, h in _HINTS if needle in message), "")
    if isinstance(exc, UserError):
        message = f"{exc.problems[0].message} [{exc.problems[0].rule}]"
        hint = exc.problems[0].hint
    return Failure(phase, message, hint, kind)


# =============================================================================================
# display


class Display:
    """Progress: rich live table on a terminal, plain lines otherwise, or nothing."""

    def start(self, report: SmokeReport) -> None: ...

    def update(self, report: SmokeReport) -> None: ...

    def close(self, report: SmokeReport) -> None: ...


class PlainDisplay(Display):
    """One line when a phase starts (the first time) and one each time it completes."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.shown: dict[str, str] = {}

    def update(self, report: SmokeReport) -> None:
        for p in report.phases:
            if self.shown.get(p.name) == p.status or p.status not in ("running", "ok", "failed"):
                continue
            first = p.name not in self.shown
            self.shown[p.name] = p.status
            if p.status == "running":
                if first:
                    print(f"smoke: {p.name} ...", file=self.stream, flush=True)
            else:
                print(f"smoke: {p.name} {p.status} ({p.seconds:.1f} s) {p.detail}", file=self.stream, flush=True)


class RichDisplay(Display):
    def __init__(self, stream: Any) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=stream)
        self.live = Live(console=self.console, refresh_per_second=8, transient=False)
        self.started = time.perf_counter()
        self.phase_started: dict[str, float] = {}

    def _table(self, report: SmokeReport) -> Any:
        from rich.spinner import Spinner
        from rich.table import Table

        t = Table(title=f"verl-init smoke · {report.engine} engine · {report.bundle}", title_justify="left",
                  show_edge=False, pad_edge=False)
        t.add_column("phase")
        t.add_column("", width=2)
        t.add_column("s", justify="right")
        t.add_column("detail", overflow="fold")
        marks = {"ok": "[green]✓[/]", "failed": "[red]✗[/]", "skipped": "[dim]-[/]", "pending": "[dim]·[/]"}
        for p in report.phases:
            if p.status == "running":
                self.phase_started.setdefault(p.name, time.perf_counter())
                secs = p.seconds + time.perf_counter() - self.phase_started[p.name]
                t.add_row(p.name, Spinner("dots"), f"{secs:.1f}", p.detail)
            else:
                self.phase_started.pop(p.name, None)
                t.add_row(p.name, marks.get(p.status, p.status), f"{p.seconds:.1f}" if p.seconds else "", p.detail)
        return t

    def start(self, report: SmokeReport) -> None:
        self.live.start()
        self.live.update(self._table(report))

    def update(self, report: SmokeReport) -> None:
        self.live.update(self._table(report))

    def close(self, report: SmokeReport) -> None:
        self.live.update(self._table(report))
        self.live.stop()


def _make_display(progress: Any) -> Display:
    if isinstance(progress, Display):
        return progress
    if progress is None or progress is False:
        return Display()
    stream = sys.stderr
    if progress == "auto" or progress is True:
        if getattr(stream, "isatty", lambda: False)():
            try:
                return RichDisplay(stream)
            except Exception:  # noqa: BLE001 - rich missing: plain lines
                return PlainDisplay(stream)
        return PlainDisplay(stream) if progress is True else Display()
    return PlainDisplay(stream)


# =============================================================================================
# the entry point


def _compose(bundle: str) -> Any:
    from wizard.verify.harness import compose_bundle

    return compose_bundle(bundle)


def _read_answers(bundle: str) -> tuple[Any, Any, str]:
    """(answers, plan, note): the bundle's verl-init.yaml replanned, for the model and memory facts."""
    path = os.path.join(bundle, "verl-init.yaml")
    if not os.path.isfile(path):
        return None, None, "no verl-init.yaml: the config alone describes the run"
    try:
        from wizard.planner.pipeline import plan
        from wizard.intent.profiles import load_answers

        answers = load_answers(path)
    except Exception as exc:  # noqa: BLE001
        return None, None, f"verl-init.yaml not readable by this version ({type(exc).__name__})"
    try:
        return answers, plan(answers, base_dir=os.path.dirname(bundle)), ""
    except Exception as exc:  # noqa: BLE001
        return answers, None, f"the answers no longer plan ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"


def choose_engine(engine: str, cfg: Any = None) -> tuple[str, str]:
    """(engine, why): `auto` is verl where a GPU and the bundle's rollout engine are present, else cpu."""
    if engine not in ENGINES:
        raise UserError(f"unknown engine ({engine!r})", f"use one of {', '.join(ENGINES)}", rule="VI962", keys=("--engine",))
    if engine != "auto":
        return engine, "asked for"
    import importlib.util

    rollout = str(cfg.actor_rollout_ref.rollout.name) if cfg is not None else "vllm"
    try:
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        gpus = 0
    if gpus and importlib.util.find_spec(rollout) is not None and importlib.util.find_spec("transfer_queue") is not None:
        return "verl", f"{gpus} GPU(s) and {rollout} found"
    missing = "no GPU" if not gpus else f"{rollout} not installed" if importlib.util.find_spec(rollout) is None \
        else "transfer_queue (verl[verl-core]) not installed"
    return "cpu", f"{missing}: verl cannot train here, the CPU miniature runs instead"


def smoke(bundle: str | os.PathLike[str], engine: str = "auto", prompts: Optional[int] = None, *,
          data_dir: Optional[str] = None, model_dir: Optional[str] = None, seed: int = 0,
          timeout: float = 900.0, progress: Any = None, options: Optional[SmokeOptions] = None) -> SmokeReport:
    """Run one rollout → reward → advantage → update cycle of `bundle`; never raises for a failing
    run (the report says which phase failed and why). Raises UserError for unusable arguments.

    progress: None (silent), "auto" (rich on a terminal), True (plain lines on stderr) or a Display."""
    opts = options or SmokeOptions(engine=engine, prompts=prompts, data_dir=data_dir, model_dir=model_dir, seed=seed,
                                   timeout=timeout)
    folder = Path(bundle)
    if not (folder / "verl_config.yaml").is_file():
        raise UserError(f"not a verl-init bundle: {folder} has no verl_config.yaml", "pass the folder verl-init wrote",
                        rule="VI960", keys=("bundle",))
    if opts.prompts is not None and opts.prompts < 1:
        raise UserError(f"--prompts must be ≥ 1 (got {opts.prompts})", "e.g. --prompts 8", rule="VI961", keys=("--prompts",))
    if opts.data_dir is not None and not os.path.isdir(opts.data_dir):
        raise UserError(f"--data-dir {opts.data_dir} is not a folder", "pass a local copy of the dataset",
                        rule="VI964", keys=("--data-dir",))
    if opts.engine not in ENGINES:
        choose_engine(opts.engine)
    bundle_dir = str(folder.resolve())
    report = SmokeReport(bundle=str(bundle), engine=opts.engine)
    display = _make_display(progress)
    ctx = SmokeContext(bundle_dir, opts, report, display)
    started = time.perf_counter()
    display.start(report)
    captured_out, captured_err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(captured_out), contextlib.redirect_stderr(captured_err), _quiet_logs():
            _run(ctx)
    except _StopRun:
        pass
    finally:
        if report.failure is None:
            late = [c for c in report.checks if c.ok is False]
            if late:
                where = late[0].phase or "update"
                report.failure = Failure(where, "; ".join(f"{c.name}: {c.detail}" for c in late), late[0].hint, "check")
                report.phase(where).status = "failed"
        for p in report.phases:
            if p.status in ("pending", "running"):
                p.status = "skipped" if report.failure is not None else p.status
        report.total_seconds = time.perf_counter() - started
        ctx.log(captured_out.getvalue() + captured_err.getvalue())
        report.log_tail = ctx.log_text()[-6000:]
        display.close(report)
        if ctx.workdir and not os.environ.get("VERL_INIT_SMOKE_KEEP"):
            import shutil

            shutil.rmtree(ctx.workdir, ignore_errors=True)
    return report


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """verl, ray and transformers log warnings on import (no accelerator, ...): keep them out of the report."""
    import logging
    import warnings

    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            logging.disable(previous)


def _prepare(ctx: SmokeContext, ph: PhaseResult) -> None:
    """The engine-independent part of the probe: compose, read the answers, choose the engine, scale the geometry."""
    opts, report = ctx.options, ctx.report
    ph.detail = "composing the bundle with verl's Hydra tree"
    ctx.cfg = _compose(ctx.bundle)
    ctx.answers, ctx.plan, note = _read_answers(ctx.bundle)
    if note:
        ctx.log(f"smoke: {note}")
    cfg = ctx.cfg
    report.adv_estimator = str(cfg.algorithm.adv_estimator)
    report.algorithm = ctx.answers.algorithm if ctx.answers is not None else report.adv_estimator
    engine, why = choose_engine(opts.engine, cfg)
    report.engine = engine
    report.resources["engine_choice"] = why
    ctx.geometry = geometry_from_config(cfg)
    g = ctx.geometry
    report.critic_used = ctx.need_critic
    report.geometry = {"bundle": g.as_dict(),
                       "kept": "samples per prompt, mini-batches per step, micro-batches per mini-batch per rank"}
    if engine == "cpu":  # the verl engine scales for the GPUs of this machine (smoke_verl.VerlRun.probe)
        sg = ctx.smoke_geometry = scale_geometry(g, opts.prompts)
        report.prompts, report.samples = sg.prompts, sg.samples
        report.geometry["smoke"] = sg.as_dict()
    import tempfile

    ctx.workdir = tempfile.mkdtemp(prefix="verl-init-smoke-")


def _run(ctx: SmokeContext) -> None:
    engine: Any = None
    try:
        with ctx.phase("probe") as ph:
            _prepare(ctx, ph)
            if ctx.report.engine == "verl":
                from wizard.smoketest.verl import VerlRun

                engine = VerlRun(ctx)
            else:
                from wizard.smoketest.cpu import CpuRun

                engine = CpuRun(ctx)
            engine.probe(ph)
        engine.run()
    finally:
        if engine is not None:
            engine.close()
        elif ctx.ray_started:
            from wizard.smoketest.cpu import cleanup

            cleanup(ctx)


# =============================================================================================
# output


def format_report(report: SmokeReport) -> str:
    """The final table as plain text."""
    lines = [f"verl-init smoke · {report.engine} engine · {report.bundle}"]
    width = max(len(p.name) for p in report.phases)
    for p in report.phases:
        mark = {"ok": "ok  ", "failed": "FAIL", "skipped": "skip", "pending": "    ", "running": "... "}[p.status]
        lines.append(f"  [{mark}] {p.name.ljust(width)} {p.seconds:6.1f} s  {p.detail}")
    lines.append("")
    lines.append("  pitfall checks (docs/pitfalls.md), measured in this run:")
    for c in sorted(report.checks, key=lambda c: (c.pitfall or 0, c.name)):
        mark = "ok  " if c.ok else ("n/a " if c.ok is None else "FAIL")
        lines.append(f"  [{mark}] {c.pitfall or '-'} {c.name}: {c.detail}")
    lines.append("")
    lines.append(report.summary())
    return "\n".join(lines)


def print_rich(report: SmokeReport, stream: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream)
    t = Table(title="pitfall checks (docs/pitfalls.md), measured in this run", title_justify="left", show_edge=False)
    t.add_column("#")
    t.add_column("check")
    t.add_column("", width=2)
    t.add_column("evidence", overflow="fold")
    for c in sorted(report.checks, key=lambda c: (c.pitfall or 0, c.name)):
        mark = "[green]✓[/]" if c.ok else ("[dim]n/a[/]" if c.ok is None else "[red]✗[/]")
        t.add_row(str(c.pitfall or "-"), c.name, mark, c.detail)
    console.print(t)
    console.print(("[green]" if report.ok else "[red]") + report.summary().replace("[", "\\[") + "[/]")


def cli(args: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="verl-init smoke",
        description="One real rollout → reward → advantage → update cycle of a bundle, proving the five pitfalls absent.")
    p.add_argument("bundle", help="a folder written by verl-init")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="verl: python3 -m verl.trainer.main_ppo for one step (GPU machine); cpu: the Ray miniature; "
                        "auto: verl where it can run, else cpu")
    p.add_argument("--prompts", type=int, help=f"prompts in the step (default: {DEFAULT_PROMPTS}, rounded to keep the geometry)")
    p.add_argument("--data-dir", help="a local copy of the hub dataset for data/prepare_data.py --local-dir")
    p.add_argument("--model-dir", help="verl engine: a local model folder standing in for the bundle's model")
    p.add_argument("--timeout", type=float, default=900.0, help="verl engine: seconds before main_ppo is stopped")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--debug", action="store_true", help="show tracebacks; keep the temporary folder")
    ns = p.parse_args(args)
    if ns.debug:
        os.environ["VERL_INIT_SMOKE_KEEP"] = "1"
    return run_and_print(ns.bundle, SmokeOptions(engine=ns.engine, prompts=ns.prompts, data_dir=ns.data_dir,
                                                 model_dir=ns.model_dir, timeout=ns.timeout, seed=ns.seed),
                         as_json=ns.json, debug=ns.debug)


def run_and_print(bundle: str, options: SmokeOptions, *, as_json: bool, debug: bool = False) -> int:
    progress = "auto" if sys.stderr.isatty() else (None if as_json else True)
    report = smoke(bundle, options=options, progress=progress)
    if as_json:
        print(json.dumps(report.as_dict(), indent=2))
    elif sys.stdout.isatty():
        try:
            print_rich(report, sys.stdout)
        except Exception:  # noqa: BLE001
            print(format_report(report))
    else:
        print(format_report(report))
    if debug and not report.ok and report.log_tail:
        print(report.log_tail, file=sys.stderr)
    return 0 if report.ok else 1


# `wizard.smoketest.core` is both this module and the function: `import wizard.smoketest.core` binds the module as the
# package attribute, so the module itself is callable and runs smoke().
class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> SmokeReport:
        return smoke(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
__all__ = ["SmokeReport", "SmokeOptions", "smoke", "cli", "Geometry", "SmokeGeometry", "geometry_from_config",
           "scale_geometry", "format_report"]
