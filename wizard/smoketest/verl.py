"""The `verl` smoke engine: real `python3 -m verl.trainer.main_ppo` for exactly one step.

The bundle's own config is launched as run.sh launches it (from the bundle folder, `--config-path
<bundle> --config-name verl_config`), with overrides that make it a smoke run: one training step,
no validation, no checkpoints, console logging, a handful of prompts in the bundle's geometry
scaled down so that every divisibility verl checks still holds. Its output is captured, the step-1
metrics verl prints (`step:1 - key:value - ...`) are parsed, and a failure is reported in the phase
it happened in, with verl's own message.

This engine needs a GPU machine with verl's rollout engine installed; here it is unit-tested with a
stand-in for main_ppo (`SmokeOptions.main_command`).
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any, Optional

from wizard.smoketest.context import SmokeContext, SmokeFailure
from wizard.smoketest.geometry import Geometry, SmokeGeometry, scale_geometry
from wizard.verlspec.arithmetic import data_parallel_size

MAIN = ["-m", "verl.trainer.main_ppo"]
STEP_LINE = re.compile(r"step:(\d+) - (.*)$")
_WRAPPED = re.compile(r"^(?:np\.)?(?:float|int)\d*\((.*)\)$")

# Markers in verl's output that show a phase has been reached (searched in order of the phases).
PROGRESS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("data", re.compile(r"dataset len:|RLHFDataset")),
    ("rollout", re.compile(r"(?i)vllm|sglang|trtllm|agent.?loop|generate_sequences|rollout (server|replica)")),
    ("reward", re.compile(r"(?i)reward.?loop|RewardLoop|compute_score|reward manager")),
    ("advantage", re.compile(r"compute_advantage|_compute_advantage|adv_estimator")),
    ("update", re.compile(r"update_actor|update_critic|train_mini_batch|_update_actor|_update_critic")),
)
# Where a traceback frame or message points at: the innermost match decides the failing phase.
WHERE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("probe", re.compile(r"hydra|omegaconf|ConfigAttributeError|ConfigCompositionException|Could not override|"
                         r"validate_config|utils/config\.py|auto_set_device|Total available GPUs|ray/_private|"
                         r"ray\.init|single_controller/ray/base\.py|resource_pool|transfer_queue|No module named|"
                         r"workers/config/|NCCL|cuda runtime|CUDA error")),
    ("data", re.compile(r"rl_dataset\.py|dataset_utils|datasets/|load_dataset|create_rl_dataset|create_rl_sampler|"
                        r"dataloader|Unsupported file format|KeyError: 'prompt'|parquet|filter_overlong|"
                        r"apply_chat_template|chat_template")),
    ("rollout", re.compile(r"rollout/|vllm|sglang|trtllm|agent_loop|generate_sequences|compute_log_prob|"
                           r"replica\.py|max_model_len")),
    ("reward", re.compile(r"reward_loop|reward_manager|reward_score|trainer/ppo/reward\.py|compute_score|"
                          r"Reward function is not implemented|custom_reward_function|load_extern_object")),
    ("advantage", re.compile(r"compute_advantage|core_algos\.py.*(advantage|adv)|apply_kl_penalty|"
                             r"Unknown advantage estimator|KeyError: 'values'")),
    ("update", re.compile(r"update_actor|update_critic|train_mini_batch|train_batch|losses\.py|optimizer|"
                          r"seqlen_balancing|prepare_micro_batches|engine/utils\.py|"
                          r"Unsupported loss mode|policy_loss|backward|OutOfMemory|out of memory")),
)
_ORDER = ("probe", "data", "rollout", "reward", "advantage", "update")
# verl's step-1 timing metrics → the smoke's phases
TIMING = {"rollout": ("timing_s/gen", "timing_s/old_log_prob"), "reward": ("timing_s/reward",),
          "advantage": ("timing_s/ref", "timing_s/values", "timing_s/adv"),
          "update": ("timing_s/update_actor", "timing_s/update_critic")}


def parse_value(text: str) -> Any:
    """A metric value as verl prints it (pprint of a number; numpy 2 prints `np.float64(0.5)`)."""
    t = text.strip()
    m = _WRAPPED.match(t)
    if m:
        t = m.group(1)
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


def parse_metrics(output: str, step: int = 1) -> dict[str, Any]:
    """The metrics of `step` from verl's console logger lines (`step:1 - key:value - key:value`),
    also when Ray prefixes them with `(TaskRunner pid=...)`."""
    metrics: dict[str, Any] = {}
    for line in output.splitlines():
        m = STEP_LINE.search(line)
        if not m or int(m.group(1)) != step:
            continue
        for part in m.group(2).split(" - "):
            key, sep, value = part.partition(":")
            if sep and key.strip():
                metrics[key.strip()] = parse_value(value)
    return metrics


def error_message(output: str) -> str:
    """verl's own last error line: `SomeError: message` (Ray's wrappers unwrapped)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    pat = re.compile(r"^(?:\(\w+ pid=\d+[^)]*\)\s*)?((?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt)(?:\([\w.]+\))?: .*)$")
    found = [pat.match(ln).group(1) for ln in lines if pat.match(ln)]  # type: ignore[union-attr]
    if not found:
        return lines[-1][:400] if lines else "main_ppo ended without output"
    msg = found[-1]
    inner = re.match(r"^ray\.exceptions\.\w+\((\w+)\): (.*)$", msg)
    if inner:
        msg = f"{inner.group(1)}: {inner.group(2)}"
    return msg[:400]


def failing_phase(output: str, reached: str = "probe") -> str:
    """The phase a failure happened in: the innermost traceback frame (or the error line) that points
    at a phase; else the last phase the output showed progress in."""
    tb_start = output.rfind("Traceback (most recent call last)")
    text = output[tb_start:] if tb_start >= 0 else output[-4000:]
    frames = [ln for ln in text.splitlines() if ln.strip().startswith("File ") or re.search(r"\w+(Error|Exception)", ln)]
    best: Optional[str] = None
    for ln in frames:  # later frames are deeper: the last match wins
        for phase, pat in WHERE:
            if pat.search(ln):
                best = phase
    return best or reached


class _Raw(str):
    """An override value already in Hydra's syntax (a list), placed as it is."""


def _hydra_value(value: Any) -> str:
    text = str(value)
    if isinstance(value, _Raw) or re.fullmatch(r"[\w./:+\-@]+", text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def local_geometry(g: Geometry, cluster: bool = False) -> Geometry:
    """The geometry main_ppo runs with here: the bundle's own on a Ray cluster (`cluster`: RAY_ADDRESS
    set), else one node of trainer.n_gpus_per_node GPUs (a multi-node bundle is smoke-tested on one
    of its nodes: the ranks per node, TP and SP stay the same). Raises SmokeFailure when a
    model-parallel group needs more than one node."""
    if cluster or g.nnodes == 1:
        return g
    n = g.gpus_per_node
    group = g.model_parallel if g.megatron else g.sp
    dp = data_parallel_size(n, megatron=g.megatron, sp=g.sp, tp=g.model_parallel)  # model_parallel = TP·PP·CP
    if dp is None:
        raise SmokeFailure(f"a model-parallel group of {group} GPUs (TP×PP×CP) spans more than one node of {n} GPUs: "
                           "one node cannot run this bundle",
                           "run the smoke on the cluster itself (RAY_ADDRESS set, all nodes joined), or the cpu engine")
    rtp = g.rollout_tp
    if rtp > n:
        raise SmokeFailure(f"rollout TP={rtp} spans more than one node of {n} GPUs",
                           "run the smoke on the cluster itself (RAY_ADDRESS set, all nodes joined), or the cpu engine")
    return replace(g, nnodes=1, dp=dp)


def build_command(ctx: SmokeContext, g: Geometry, sg: SmokeGeometry) -> list[str]:
    """`python3 -m verl.trainer.main_ppo --config-path BUNDLE --config-name verl_config` + the smoke overrides."""
    cfg = ctx.cfg
    base = list(ctx.options.main_command) if ctx.options.main_command else [sys.executable, *MAIN]
    out = os.path.join(ctx.workdir, "verl")
    ov: dict[str, Any] = {
        "trainer.total_training_steps": 1,
        "trainer.total_epochs": 1,
        "trainer.val_before_train": False,
        "trainer.test_freq": -1,
        "trainer.save_freq": -1,
        "trainer.resume_mode": "disable",
        "trainer.critic_warmup": 0,
        "trainer.logger": _Raw("[console]"),
        "trainer.default_local_dir": os.path.join(out, "checkpoints"),
        "trainer.experiment_name": f"{cfg.trainer.experiment_name}-smoke",
        "trainer.nnodes": g.nnodes,
        "trainer.n_gpus_per_node": g.gpus_per_node,
        "data.train_batch_size": sg.prompts,
        "data.train_max_samples": sg.prompts,
        "data.val_max_samples": sg.prompts,
        "actor_rollout_ref.actor.ppo_mini_batch_size": sg.mini,
    }
    if not sg.dynamic:
        ov["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] = sg.micro
        # the log-prob passes keep the bundle's sizes where the smaller batch allows (geometry.scale_geometry)
        ov["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"] = sg.logprob_micro or sg.micro
        if ctx.need_ref:
            ov["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"] = sg.ref_logprob_micro or sg.micro
    if ctx.need_critic:
        ov["critic.ppo_mini_batch_size"] = sg.mini
        if not sg.dynamic:
            ov["critic.ppo_micro_batch_size_per_gpu"] = sg.micro
    if ctx.options.model_dir:
        model = os.path.abspath(ctx.options.model_dir)
        if ctx.need_critic and str(cfg.critic.model.path) == str(cfg.actor_rollout_ref.model.path):
            ov["critic.model.path"] = model
        ov["actor_rollout_ref.model.path"] = model
    args = [*base, "--config-path", ctx.bundle, "--config-name", "verl_config"]
    args += [f"{k}={_hydra_value(v)}" for k, v in ov.items()]
    args.append(f"hydra.run.dir={_hydra_value(os.path.join(out, 'hydra'))}")
    return args


class VerlRun:
    """Launch main_ppo for one step, follow its output, report its step-1 metrics or its failure.

    The probe phase covers verl's own start (Hydra, validate_config, Ray, worker groups) until its
    output shows the data being loaded; the later phases follow verl's output markers."""

    def __init__(self, ctx: SmokeContext) -> None:
        self.ctx = ctx
        self.proc: Optional[subprocess.Popen[str]] = None
        self.output: list[str] = []
        self.current = "probe"
        self.started = 0.0
        self.timed_out = False

    # -- the process --------------------------------------------------------------------------
    def _start(self) -> None:
        import queue
        import threading

        env = dict(os.environ, HYDRA_FULL_ERROR="1", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="true")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(self.ctx.report.command, cwd=self.ctx.bundle, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True)
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        stream = self.proc.stdout
        assert stream is not None

        def pump() -> None:  # a thread: readline blocks, the main loop keeps the clock
            for line in stream:
                self.lines.put(line)
            self.lines.put(None)

        threading.Thread(target=pump, name="main_ppo-output", daemon=True).start()

    def _next_line(self) -> Optional[str]:
        """The next output line; None when the output has ended (or main_ppo was stopped at the timeout)."""
        import queue

        while True:
            if time.perf_counter() - self.started > self.ctx.options.timeout:
                self.timed_out = True
                self._kill()
                return None
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                return None
            self.output.append(line)
            return line

    def _failure(self) -> Any:
        text = "".join(self.output)
        rc = self.proc.wait(timeout=30) if self.proc is not None else None
        if self.timed_out:
            return SmokeFailure(f"main_ppo did not finish one step within {self.ctx.options.timeout:g} s "
                                f"(last phase seen: {self.current})",
                                "a silent hang at start usually means Ray lacks the CPUs/GPUs its placement groups "
                                "ask for (verl-init doctor / check --mode cluster)")
        if rc != 0:
            return SmokeFailure(error_message(text), "")
        return SmokeFailure("main_ppo exited 0 without printing step-1 metrics",
                            "keep console in trainer.logger; check trainer.total_training_steps")

    # -- phases ---------------------------------------------------------------------------------
    def probe(self, ph: Any) -> None:
        ctx = self.ctx
        ctx.static_checks()
        ctx.env_checks()
        g = local_geometry(ctx.geometry, cluster=bool(ctx.user_env.get("RAY_ADDRESS")))
        sg = scale_geometry(g, ctx.options.prompts, dp=g.dp, verl_rules=True,
                                           response_cap=g.max_response_length)
        ctx.smoke_geometry = sg
        ctx.report.prompts, ctx.report.samples = sg.prompts, sg.samples
        ctx.report.geometry.update(smoke=sg.as_dict(), machine=g.as_dict())
        model = ctx.model_path
        if model.startswith(("/", "./", "../", "~")) and not os.path.exists(os.path.expanduser(model)):
                raise SmokeFailure(f"the model {model} does not exist on this machine",
                               "pass --model-dir with a local model folder, or fix actor_rollout_ref.model.path")
        ctx.report.command = build_command(ctx, g, sg)
        ph.detail = (f"main_ppo for one step on {g.nnodes}×{g.gpus_per_node} GPU(s): {sg.prompts} prompts × {sg.n}, "
                     f"{sg.updates} mini-batch(es) of {sg.samples_per_update}")
        self._start()
        while True:  # verl's own start: Hydra, validate_config, Ray, worker groups
            line = self._next_line()
            if line is None:
                where = "probe" if self.timed_out else failing_phase("".join(self.output), "probe")
                if where != "probe":
                    self.current = where
                    return  # run() reports it in its phase
                raise self._failure()
            nxt = _advance(self.current, line)
            if nxt != self.current:
                self.current = nxt
                return

    def run(self) -> None:
        ctx = self.ctx
        for skipped in _ORDER[1: _ORDER.index(self.current)]:
            with ctx.phase(skipped):
                pass
        phase_cm = ctx.phase(self.current)
        phase_cm.__enter__()
        try:
            while True:
                line = self._next_line()
                if line is None:
                    break
                nxt = _advance(self.current, line)
                if nxt != self.current:  # the previous phase is done; the next one is running
                    phase_cm.__exit__(None, None, None)
                    for skipped in _ORDER[_ORDER.index(self.current) + 1: _ORDER.index(nxt)]:
                        with ctx.phase(skipped):
                            pass
                    self.current = nxt
                    phase_cm = ctx.phase(self.current)
                    phase_cm.__enter__()
        except BaseException as exc:
            self._kill()
            phase_cm.__exit__(type(exc), exc, exc.__traceback__)
            raise
        text = "".join(self.output)
        ctx.log(text)
        metrics = parse_metrics(text, 1)
        ctx.report.metrics = metrics
        rc = self.proc.wait(timeout=30) if self.proc is not None else None
        if self.timed_out or rc != 0 or not metrics:
            failure = self._failure()
            where = failing_phase(text, self.current) if not self.timed_out else self.current
            if _ORDER.index(where) > _ORDER.index(self.current):  # verl's output ran ahead of its markers
                phase_cm.__exit__(None, None, None)
                for skipped in _ORDER[_ORDER.index(self.current) + 1: _ORDER.index(where)]:
                    with ctx.phase(skipped):
                        pass
                phase_cm = ctx.phase(where)
                phase_cm.__enter__()
            elif where != self.current:  # an earlier phase's code failed late: report it there
                phase_cm.__exit__(None, None, None)
                for later in _ORDER[_ORDER.index(where) + 1:]:
                    ctx.report.phase(later).status = "pending"  # interrupted: shown as skipped
                phase_cm = ctx.phase(where)
                phase_cm.__enter__()
            phase_cm.__exit__(type(failure), failure, None)  # records the failure in that phase; raises _StopRun
            return
        phase_cm.__exit__(None, None, None)
        for ph in _ORDER[_ORDER.index(self.current) + 1:]:
            with ctx.phase(ph):
                pass
        self._report(metrics)

    def _report(self, m: dict[str, Any]) -> None:
        ctx, report = self.ctx, self.ctx.report
        for phase, keys in TIMING.items():
            secs = [float(m[k]) for k in keys if isinstance(m.get(k), (int, float))]
            if secs:
                report.phase(phase).detail = f"verl timing {sum(secs):.1f} s ({', '.join(k for k in keys if k in m)})"

        def num(*keys: str) -> Optional[float]:
            for k in keys:
                if isinstance(m.get(k), (int, float)):
                    return float(m[k])
            return None

        report.reward_mean = num("critic/score/mean", "critic/rewards/mean")
        smax, smin = num("critic/score/max"), num("critic/score/min")
        report.policy_loss = num("actor/pg_loss")
        report.kl = num("actor/kl_loss", "actor/reward_kl_penalty")
        report.entropy = num("actor/entropy")
        grad = num("actor/grad_norm")
        report.actor_updated = grad is not None and math.isfinite(grad) and grad > 0
        report.critic_used = any(k.startswith("critic/vf") for k in m) or ctx.need_critic
        cgrad = num("critic/grad_norm")
        report.critic_updated = (cgrad is not None and math.isfinite(cgrad) and cgrad > 0) if ctx.need_critic else None
        report.samples_generated = report.samples
        report.samples_used = None  # verl does not print per-sample use; the cpu engine counts it
        finite = all(v is None or math.isfinite(v) for v in (report.policy_loss, report.kl, report.entropy, grad))
        ctx.check(None, "finite_losses", finite and report.policy_loss is not None,
                  f"actor/pg_loss {report.policy_loss}, KL {report.kl}, entropy {report.entropy}, grad_norm {grad}",
                  {"pg_loss": report.policy_loss, "kl": report.kl, "entropy": report.entropy, "grad_norm": grad},
                  phase="update")
        ctx.check(1, "actor_updated", bool(report.actor_updated),
                  f"actor/grad_norm {grad} with actor/lr {m.get('actor/lr')}: the optimizer stepped on a non-zero gradient",
                  {"grad_norm": grad, "lr": m.get("actor/lr")}, phase="update")
        if ctx.need_critic:
            ctx.check(1, "critic_updated", bool(report.critic_updated), f"critic/grad_norm {cgrad}", {"grad_norm": cgrad},
                      phase="update")
        varies = smax is not None and smin is not None and smax > smin
        ctx.check(4, "rewards_vary", varies if smax is not None else None,
                  f"critic/score mean {report.reward_mean}, min {smin}, max {smax}",
                  {"mean": report.reward_mean, "min": smin, "max": smax}, phase="reward",
                  hint="check data_source, reward_model.ground_truth and the reward function")

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired, PermissionError):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def close(self) -> None:
        self._kill()


def _advance(current: str, line: str) -> str:
    """The phase after `current` that `line` shows progress in (phases only move forward)."""
    at = _ORDER.index(current)
    for phase, pat in PROGRESS:
        i = _ORDER.index(phase)
        if i > at and pat.search(line):
            at = i
    return _ORDER[at]
