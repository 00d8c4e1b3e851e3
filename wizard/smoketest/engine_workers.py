"""`verl-init smoke BUNDLE --engine verl-workers`: verl 0.9.1's own engine workers for the bundle's actor, reference
and critic on the GPUs at hand, one node, no rollout engine; measured peak memory per phase beside the plan's
`verl_metrics`.

    report = run_workers("runs/grpo-qwen", WorkersOptions(device="auto"))
    report.ok, report.as_dict()

The workers run in child processes (wizard.smoketest.workers_child, one per GPU with that GPU alone visible, as
verl's Ray worker group starts them), so torch and verl are imported only there and a hang or an out-of-memory error
ends in a report. Each child streams its results to a file after every phase; the parent merges the ranks (the
largest peak of any rank per phase), holds them against the plan (the bundle's verl-init.yaml replanned, the
`verl_metrics` of `plan --json`) and prints the report (wizard.smoketest.workers_report).

The measured batch: full-length sequences (max_prompt_length + max_response_length tokens each), per rank the
largest of two update micro-batches and one log-prob micro-batch of the bundle's own settings (a token budget holds
⌊budget / sequence length⌋ sequences), as one PPO mini-batch; the bundle's micro-batch sizes and token budgets are
kept as they are, so verl micro-batches exactly as it would in the run. Two steps by default: the first creates
Adam's states in its update, the second is the steady state the plan predicts.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from wizard.intent.errors import UserError
from wizard.smoketest.workers_child import PHASES

DEVICES = ("auto", "cuda", "cpu")


@dataclass
class WorkersOptions:
    device: str = "auto"
    model_dir: Optional[str] = None
    timeout: float = 900.0
    steps: int = 2
    nproc: Optional[int] = None  # processes: default every visible GPU up to the bundle's count; 1 on the CPU


@dataclass
class WorkersReport:
    bundle: str
    device: str = ""
    world_size: int = 0
    bundle_gpus: int = 0
    model: str = ""
    status: str = "pending"  # ok | failed | timeout
    batch: dict[str, Any] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)
    failure: Optional[dict[str, Any]] = None
    plan: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    shims: list[str] = field(default_factory=list)
    seconds: float = 0.0
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "log_tail"}
        d["engine"], d["ok"] = "verl-workers", self.ok
        return d


# -- the preconditions: one line each --------------------------------------------------------------------------------


def _compose(bundle: str) -> Any:
    from wizard.verify.harness import compose_bundle

    return compose_bundle(bundle)


def _gpus() -> list[str]:
    """The GPUs this process sees (CUDA_VISIBLE_DEVICES' entries, else indices)."""
    try:
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no usable torch: no GPU
        count = 0
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return (visible if len(visible) >= count else [str(i) for i in range(count)])[:count]


def check_strategy(cfg: Any) -> None:
    """FSDP only: Megatron's engine workers are not driven here yet."""
    roles = [("actor_rollout_ref.actor.strategy", cfg.actor_rollout_ref.actor.strategy)]
    if _uses_critic(cfg):
        roles.append(("critic.strategy", cfg.critic.strategy))
    for key, value in roles:
        if str(value) not in ("fsdp", "fsdp2"):
            raise UserError(f"strategy {value}: smoke --engine verl-workers drives verl's FSDP engine workers only "
                            "(Megatron is not supported yet)",
                            "use `verl-init smoke BUNDLE --engine verl` (main_ppo for one step) for this bundle, or "
                            "render it with an FSDP strategy", rule="VI967", keys=(key,))


def _uses_critic(cfg: Any) -> bool:
    enable = cfg.critic.get("enable", None)
    return bool(enable) if enable is not None else str(cfg.algorithm.adv_estimator) == "gae"


def choose_device(device: str, nproc: Optional[int] = None) -> tuple[str, list[str]]:
    """(cuda | cpu, one entry per process: the GPU it sees, or "cpu")."""
    if device not in DEVICES:
        raise UserError(f"--device {device!r} is not one of {', '.join(DEVICES)}", "use --device auto, cuda or cpu",
                        rule="VI968", keys=("--device",))
    if nproc is not None and nproc < 1:
        raise UserError(f"--nproc {nproc} is below 1", "e.g. --nproc 1", rule="VI968", keys=("--nproc",))
    if device == "cpu":
        return "cpu", ["cpu"] * (nproc or 1)
    gpus = _gpus()
    if not gpus:
        raise UserError("smoke --engine verl-workers found no GPU on this machine (torch.cuda.device_count() is 0)",
                        "run it on a GPU machine, or pass --device cpu to run the same phases on the CPU (no memory "
                        "measured)", rule="VI966", keys=("--device",))
    if nproc is not None and nproc > len(gpus):
        raise UserError(f"--nproc {nproc} but this machine shows {len(gpus)} GPU(s)", f"use --nproc {len(gpus)} or "
                        "fewer", rule="VI968", keys=("--nproc",))
    return "cuda", gpus[:nproc] if nproc else gpus


def _micro(cfg_dyn: Any, budget: Any, micro: Any, length: int, whole: list[int]) -> int:
    """Sequences in one micro-batch: the fixed size (noted in `whole`), or how many full-length sequences the token
    budget holds."""
    if bool(cfg_dyn):
        return max(1, int(budget or 0) // length)
    whole.append(max(1, int(micro or 1)))
    return whole[-1]


def measured_batch(cfg: Any, world: int, critic: bool) -> dict[str, Any]:
    """The batch each rank gets: the bundle's micro-batches kept, two update micro-batches per rank (so gradients
    accumulate as in the run), at least one whole log-prob micro-batch, and sequences × ranks divisible by n."""
    from wizard.verlspec.arithmetic import workers_smoke_sequences

    a, r, ref, c = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.ref, cfg.critic
    P, R = int(cfg.data.max_prompt_length), int(cfg.data.max_response_length)
    L, whole = P + R, []
    updates = {"update_actor": _micro(a.use_dynamic_bsz, a.ppo_max_token_len_per_gpu, a.ppo_micro_batch_size_per_gpu,
                                      L, whole)}
    infers = {"old_log_prob": _micro(r.log_prob_use_dynamic_bsz, r.log_prob_max_token_len_per_gpu,
                                     r.log_prob_micro_batch_size_per_gpu, L, whole),
              "ref_log_prob": _micro(ref.log_prob_use_dynamic_bsz, ref.log_prob_max_token_len_per_gpu,
                                     ref.log_prob_micro_batch_size_per_gpu, L, whole)}
    if critic:
        updates["update_critic"] = _micro(c.use_dynamic_bsz, c.ppo_max_token_len_per_gpu,
                                          c.ppo_micro_batch_size_per_gpu, L, whole)
        infers["values"] = _micro(c.use_dynamic_bsz, c.forward_max_token_len_per_gpu,
                                  c.forward_micro_batch_size_per_gpu, L, whole)
    n = max(1, int(r.n))
    k = workers_smoke_sequences(updates.values(), infers.values(), world, n, whole)
    return {"sequences_per_rank": k, "prompt_length": P, "response_length": R, "n": n, "ranks": world,
            "prompts": k * world // n, "micro_batch_sequences": {**infers, **updates},
            "token_budgets": bool(a.use_dynamic_bsz or r.log_prob_use_dynamic_bsz)}


def overrides_for(cfg: Any, batch: dict[str, Any], device: str, world: int, model_dir: Optional[str],
                  critic: bool, flash_attn: bool) -> list[str]:
    """The smoke's Hydra overrides over the bundle's verl_config.yaml (every other key stays the bundle's)."""
    ov = [f"++trainer.n_gpus_per_node={world}", "++trainer.nnodes=1", f"++data.train_batch_size={batch['prompts']}",
          f"++actor_rollout_ref.actor.ppo_mini_batch_size={batch['prompts']}",
          "++actor_rollout_ref.rollout.tensor_model_parallel_size=1"]  # no rollout runs: the engine's TP is moot
    if critic:
        ov.append(f"++critic.ppo_mini_batch_size={batch['prompts']}")
    if device == "cpu":
        ov.append("++trainer.device=cpu")
    if model_dir:
        ov.append(f"++actor_rollout_ref.model.path={model_dir}")
        if critic:
            ov += [f"++critic.model.path={model_dir}", f"++critic.model.tokenizer_path={model_dir}"]
    if not flash_attn:  # verl's default attention needs flash_attn; transformers' sdpa kernel otherwise
        ov.append("++actor_rollout_ref.model.override_config.attn_implementation=sdpa")
        if critic:
            ov.append("++critic.model.override_config.attn_implementation=sdpa")
    return ov


def _plan_metrics(bundle: str) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Per pass, the plan's verl_metrics (plan --json's memory.verl_metrics[phase].passes), and what the plan is."""
    from wizard.smoketest.context import read_answers

    answers, plan, note = read_answers(bundle)
    if plan is None or getattr(plan, "memory", None) is None:
        return {}, {"note": note or "no memory estimate in the plan"}
    mem = plan.memory
    passes: dict[str, dict[str, float]] = {}
    for phase in (getattr(mem, "verl_metrics", None) or {}).values():
        passes.update(phase.get("passes", {}))
    info = {"model": answers.model, "gpus": answers.nnodes * answers.gpus_per_node,
            "gpu_memory_gb": answers.gpu_memory_gb, "coefficients": getattr(mem, "coefficients", "")}
    if not passes:
        info["note"] = f"the plan gives no per-pass verl_metrics ({info['coefficients'] or 'analytic'})"
    return passes, info


# -- the run -----------------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(spec_path: Path, work: Path, devices: list[str], cuda: bool, timeout: float) -> tuple[list[int], bool]:
    """One child per rank, each in its own process group; all stopped at the deadline. (return codes, timed out)"""
    root = str(Path(__file__).resolve().parents[2])
    port = str(_free_port())
    procs = []
    for rank, dev in enumerate(devices):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(len(devices)), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false",
                   PYTHONPATH=os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])]))
        if cuda:
            env["CUDA_VISIBLE_DEVICES"] = dev
        with open(work / f"rank{rank}.log", "w", encoding="utf-8") as log:
            procs.append(subprocess.Popen([sys.executable, "-m", "wizard.smoketest.workers_child", str(spec_path)],
                                          stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while any(p.poll() is None for p in procs):
            if any(p.returncode not in (None, 0) for p in procs):  # a failed rank leaves the others waiting on it
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            _stop(p)
    return [p.returncode if p.returncode is not None else -9 for p in procs], timed_out


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
            p.wait(timeout=wait)
            return
        except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
            continue


def run_workers(bundle: str | os.PathLike[str], options: Optional[WorkersOptions] = None) -> WorkersReport:
    """Check the preconditions (UserError, one line), run the workers, and report. Never raises for a failed run."""
    opts = options or WorkersOptions()
    folder = Path(bundle)
    if not (folder / "verl_config.yaml").is_file():
        raise UserError(f"not a verl-init bundle: {folder} has no verl_config.yaml", "pass the folder verl-init wrote",
                        rule="VI960", keys=("bundle",))
    if opts.timeout <= 0 or opts.steps < 1:
        raise UserError(f"--timeout {opts.timeout:g} / --steps {opts.steps}: both must be positive",
                        "e.g. --timeout 900 --steps 2", rule="VI968", keys=("--timeout", "--steps"))
    if opts.model_dir is not None and not (Path(opts.model_dir) / "config.json").is_file():
        raise UserError(f"--model-dir {opts.model_dir} has no config.json", "pass a local model folder (config.json, "
                        "weights, tokenizer)", rule="VI968", keys=("--model-dir",))
    device, devices = choose_device(opts.device, opts.nproc)
    cfg = _compose(str(folder.resolve()))
    check_strategy(cfg)
    from wizard.smoketest.workers_cpu import flash_attn_installed

    critic = _uses_critic(cfg)
    bundle_gpus = int(cfg.trainer.n_gpus_per_node) * int(cfg.trainer.nnodes)
    devices = devices[:max(1, bundle_gpus)] if device == "cuda" and not opts.nproc else devices
    report = WorkersReport(bundle=str(bundle), device=device, world_size=len(devices), bundle_gpus=bundle_gpus,
                           model=opts.model_dir or str(cfg.actor_rollout_ref.model.path))
    report.batch = measured_batch(cfg, len(devices), critic)
    report.overrides = overrides_for(cfg, report.batch, device, len(devices),
                                     str(Path(opts.model_dir).resolve()) if opts.model_dir else None, critic,
                                     flash_attn_installed())
    predicted, report.plan = _plan_metrics(str(folder))
    work = Path(tempfile.mkdtemp(prefix="verl-init-workers-"))
    spec = {"bundle": str(folder.resolve()), "overrides": report.overrides, "device": device,
            "batch": report.batch, "steps": opts.steps, "out": str(work)}
    (work / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    started = time.perf_counter()
    try:
        codes, timed_out = _launch(work / "spec.json", work, devices, device == "cuda", opts.timeout)
        from wizard.smoketest.workers_report import merge

        merge(report, work, codes, timed_out, predicted, opts)
    finally:
        report.seconds = round(time.perf_counter() - started, 1)
        if not os.environ.get("VERL_INIT_SMOKE_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
    return report


def cli(ns: Any) -> int:
    """`smoke --engine verl-workers` (argparse namespace from wizard.smoketest.run.cli)."""
    from wizard.smoketest.workers_report import format_text

    for flag, value in (("--prompts", ns.prompts), ("--data-dir", ns.data_dir)):
        if value is not None:
            raise UserError(f"not used by --engine verl-workers (it measures one mini-batch of "
                            "full-length synthetic sequences, no dataset)", f"drop {flag}", rule="VI968", keys=(flag,))
    report = run_workers(ns.bundle, WorkersOptions(device=ns.device, model_dir=ns.model_dir, timeout=ns.timeout,
                                                   steps=ns.steps, nproc=ns.nproc))
    print(json.dumps(report.as_dict(), indent=2) if ns.json else format_text(report))
    if ns.debug and not report.ok and report.log_tail:
        print(report.log_tail, file=sys.stderr)
    return 0 if report.ok else 1


__all__ = ["DEVICES", "PHASES", "WorkersOptions", "WorkersReport", "cli", "run_workers"]
