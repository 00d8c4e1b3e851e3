"""What one smoke run shares between its phases and engines: options, the context, failures, progress display.

Only the standard library is imported at module level (ray, omegaconf, rich inside functions):
the cpu engine's Ray worker processes import this module.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from wizard.intent.errors import UserError
from wizard.smoketest.geometry import SmokeGeometry, need_critic, need_ref
from wizard.smoketest.report import Check, Failure, PhaseResult, SmokeReport
from wizard.verlspec.arithmetic import rollout_layout

ROLE_TIMEOUT_S = 600  # seconds a role process may take for one call


class SmokeFailure(Exception):
    """A property of the run that does not hold: reported in its phase, with a hint."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass
class SmokeOptions:
    engine: str = "auto"
    prompts: Optional[int] = None
    data_dir: Optional[str] = None  # a local copy of a hub dataset for data/prepare_data.py --local-dir
    model_dir: Optional[str] = None  # verl engine: a local model folder standing in for the bundle's model
    seed: int = 0
    timeout: float = 900.0  # verl engine: seconds before main_ppo is stopped
    ray_cpus: int = 2  # logical CPUs of the cpu engine's local Ray instance
    main_command: Optional[list[str]] = None  # tests only: stands in for `python3 -m verl.trainer.main_ppo`


_ARGUMENT_RULES = frozenset({"VI960", "VI961", "VI962", "VI964"})  # raised to the caller, not reported as findings


class StopRun(Exception):
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
              evidence: Optional[dict[str, Any]] = None, *, hint: str = "", phase: Optional[str] = None,
              kind: str = "measured") -> Check:
        """Record one property ("measured" in this run, or "static": read from the config or the environment);
        a False one fails the phase it is recorded in."""
        c = Check(pitfall, name, ok, detail, evidence or {}, phase or self.current_phase, hint, kind)
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
        except StopRun:
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
            raise StopRun() from None
        except Exception as exc:  # noqa: BLE001 - every failure is reported in its phase
            ph.seconds += time.perf_counter() - started
            ph.status = "failed"
            self.report.failure = failure_from_exception(name, exc)
            ph.detail = self.report.failure.message
            self.log(_format_exc(exc))
            self.display.update(self.report)
            raise StopRun() from None
        finally:
            self.current_phase = None
        ph.seconds += time.perf_counter() - started
        failed = [c for c in self.report.checks if c.phase == name and c.ok is False]
        if failed:
            ph.status = "failed"
            self.report.failure = Failure(name, "; ".join(f"{c.name}: {c.detail}" for c in failed),
                                          next((c.hint for c in failed if c.hint), ""), "check")
            self.display.update(self.report)
            raise StopRun()
        ph.status = "ok"
        self.display.update(self.report)

    def get(self, refs: Any, timeout: Optional[float] = None) -> Any:
        import ray

        return ray.get(refs, timeout=timeout or ROLE_TIMEOUT_S)

    # -- what the bundle says -------------------------------------------------------------------
    @property
    def need_ref(self) -> bool:
        return need_ref(self.cfg)

    @property
    def need_critic(self) -> bool:
        return need_critic(self.cfg)

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
        """Generation batches the smoke run draws before it calls DAPO's filtering hopeless. verl 0.9.1 itself has no
        such limit: its V1 trainer ignores max_num_gen_batches (trainer/ppo/v1/trainer_base.py:205-210)."""
        if not self.filter_groups:
            return 1
        value = int(self.cfg.algorithm.filter_groups.get("max_num_gen_batches", 0) or 0)
        return value if value > 0 else 10

    def role_names(self) -> list[str]:
        names = ["actor+rollout"]
        if self.need_ref:
            names.append("reference" if not getattr(self.geometry, "lora_rank", 0) else "reference (inside the actor: LoRA)")
        if self.need_critic:
            names.append("critic")
        return names + ["reward"]

    def model_shape(self) -> Any:
        """The real model's shape (heads for the sequence-parallel check), when it can be known offline."""
        try:
            from wizard.planner.shapes import from_local, resolve_shape

            path = os.path.expanduser(self.model_path)
            if os.path.isfile(os.path.join(path, "config.json")):
                return from_local(path)
            name = self.answers_model or self.model_path
            return resolve_shape(name, self.answers_params_b)
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
                   hint="set critic.enable to (adv_estimator == gae); verl-init sets it from the algorithm", kind="static")
        self.check(1, "kl_counted_once", not both_kl,
                   "KL is " + ("added to the reward AND as a loss (double counting)" if both_kl else
                               "in the reward" if cfg.algorithm.get("use_kl_in_reward", False) else
                               "a loss term" if cfg.actor_rollout_ref.actor.get("use_kl_loss", False) else "not used"),
                   {"use_kl_in_reward": cfg.algorithm.get("use_kl_in_reward", False),
                    "use_kl_loss": cfg.actor_rollout_ref.actor.get("use_kl_loss", False)},
                   hint="keep one: algorithm.use_kl_in_reward or actor_rollout_ref.actor.use_kl_loss", kind="static")
        if critic:
            cpath = str(cfg.critic.model.get("path", ""))
            rpath = str(cfg.reward.get("reward_model", {}).get("model_path", "") or "")
            self.check(1, "critic_not_reward_model", not (rpath and cpath == rpath),
                       f"critic initialised from {cpath}" + (f", reward model {rpath}" if rpath else ""),
                       {"critic.model.path": cpath, "reward_model": rpath or None},
                       hint="initialise the critic from the policy (critic.model.path = the actor's model)", kind="static")
        problems = g.problems()
        self.check(2, "bundle_geometry", not problems,
                   "; ".join(problems) if problems else
                   f"{g.prompts} prompts × {g.n} = {g.prompts * g.n} samples per step, {g.updates} mini-batch(es) of "
                   f"{g.mini * g.n} samples, {g.dp} data-parallel rank(s) × {g.per_rank} samples"
                   + (f" in {g.micro_batches} micro-batch(es) of {g.micro}" if not g.dynamic else
                      f", token budget {g.max_tokens} per GPU (≥ {g.seqs_per_budget} full {g.seq_len}-token sequence(s))"),
                   {"bundle": g.as_dict()},
                   hint="re-render the bundle with verl-init: it derives every batch number so that they divide", kind="static")
        if self.filter_groups:
            gen = int(cfg.data.get("gen_batch_size", g.prompts) or g.prompts)
            self.check(2, "generation_covers_batch", gen >= g.prompts or gen == 1,
                       f"DAPO group filtering: generation batch {gen} prompts for a train batch of {g.prompts} "
                       "(verl's V1 trainer refills filtered groups)", {"gen_batch_size": gen}, kind="static")
        # device mapping: verl's rollout layout rules, and replicas that never straddle two nodes
        tp = g.rollout_tp
        lay = rollout_layout(g.n_gpus, g.gpus_per_node, tp)
        if tp <= g.gpus_per_node and g.gpus_per_node % tp:
            lay.append(f"rollout TP={tp} does not divide the {g.gpus_per_node} GPUs of a node")
        ok = not lay
        if ok:
            lay.append(f"rollout: {g.n_gpus // tp} replica(s) of TP={tp}, each inside one node" if tp <= g.gpus_per_node
                       else f"rollout TP={tp} spans {tp // g.gpus_per_node} whole nodes (tensor-parallel traffic "
                            "crosses the network)")
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
            ev["memory_peak_gib"] = round(mem.peak_gib, 2)
            ev["memory_capacity_gib"] = round(mem.capacity_gib, 2)
            lay.append(f"memory plan: peak {mem.peak_gib:.1f} of {mem.capacity_gib:.1f} GiB per GPU "
                       f"({'fits' if mem.fits else 'DOES NOT FIT'})")
            ok = ok and bool(mem.fits)
        self.check(3, "device_layout", ok, "; ".join(lay), ev,
                   hint="re-plan with verl-init (rollout TP and SP that divide a node, a layout that fits memory)", kind="static")

    def env_checks(self) -> None:
        """The launching environment (pitfall 5): hand-set CUDA_VISIBLE_DEVICES, RAY_ADDRESS at a dashboard."""
        from wizard.env.http import redact

        cvd, addr = self.user_env["CUDA_VISIBLE_DEVICES"], self.user_env["RAY_ADDRESS"]
        if addr:
            addr = redact(addr)  # credentials in the address are never printed
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
            notes.append(f"RAY_ADDRESS={addr}" + (" points at the dashboard: RAY_ADDRESS is for ray.init inside the "
                                                  "cluster and names the GCS (HOST:6379); the dashboard URL "
                                                  "(http://HOST:8265) goes to ray/submit.sh --address" if dashboard else ""))
        else:
            notes.append("RAY_ADDRESS not set (verl starts a local Ray)")
        self.check(5, "launch_environment", ok, "; ".join(notes),
                   {"CUDA_VISIBLE_DEVICES": cvd, "RAY_ADDRESS": addr},
                   hint="unset CUDA_VISIBLE_DEVICES (Ray assigns GPUs) or re-plan for the GPUs it shows; "
                        "RAY_ADDRESS must name the GCS (HOST:6379); submit from outside with ray/submit.sh "
                        "--address http://HOST:8265 (ray job submit talks to the dashboard)", kind="static")


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


def make_display(progress: Any) -> Display:
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


def read_answers(bundle: str) -> tuple[Any, Any, str]:
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
        return answers, plan(answers, bundle_dir=bundle), ""
    except Exception as exc:  # noqa: BLE001
        return answers, None, f"the answers no longer plan ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
