"""`verl-init smoke BUNDLE`: one real rollout → reward → advantage → update cycle before GPUs are booked.

    report = wizard.smoke("runs/grpo-qwen")        # engine="auto": verl on a GPU machine, else cpu
    report.ok, report.as_dict()

Two engines run the same six phases (probe, data, rollout, reward, advantage, update):

- `verl`: the real thing, `python3 -m verl.trainer.main_ppo` on the bundle's config with overrides
  for a single step (see wizard.smoketest.verl); verl's step-1 metrics are parsed from its output.
- `cpu`: a miniature on a local Ray instance with one process per role, a tiny model of the
  bundle model's architecture and verl's own algorithm code (see wizard.smoketest.cpu).

Both use the bundle's batch geometry scaled down (wizard.smoketest.geometry): samples per prompt
unchanged, the same number of mini-batches per step and micro-batches per mini-batch, so that every
divisibility verl relies on is exercised. The report (wizard.smoketest.report) covers the five classic
pitfalls (docs/pitfalls.md); each check says whether it is measured in the run (each one has a test that
plants a fault making it fail: tests/test_smoke_faults.py) or static (read from the config or the
environment). `ok` is true only if every property holds.

This is the only module that imports the engines. Heavy imports (hydra, verl, torch, ray, rich)
happen inside functions.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from wizard.intent.errors import UserError
from wizard.smoketest.context import SmokeContext, SmokeOptions, StopRun, make_display
from wizard.smoketest.context import read_answers as _read_answers
from wizard.smoketest.geometry import DEFAULT_PROMPTS, geometry_from_config, scale_geometry
from wizard.smoketest.report import Failure, PhaseResult, SmokeReport, format_report, print_rich

ENGINES = ("auto", "verl", "cpu")

def _compose(bundle: str) -> Any:
    from wizard.verify.harness import compose_bundle

    return compose_bundle(bundle)


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
    display = make_display(progress)
    ctx = SmokeContext(bundle_dir, opts, report, display)
    started = time.perf_counter()
    display.start(report)
    captured_out, captured_err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(captured_out), contextlib.redirect_stderr(captured_err), _quiet_logs():
            _run(ctx)
    except StopRun:
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
    if engine == "cpu":  # the verl engine scales for the GPUs of this machine (verl.VerlRun.probe)
        sg = ctx.smoke_geometry = scale_geometry(g, opts.prompts)
        report.prompts, report.samples = sg.prompts, sg.samples
        report.geometry["smoke"] = sg.as_dict()
    _agent_checks(ctx)
    _judge_checks(ctx)
    from wizard.smoketest.sandbox_stub import sandbox_checks

    sandbox_checks(ctx)  # reward=sandbox: verl's scorer against a local stand-in, and the configured URL
    import tempfile

    ctx.workdir = tempfile.mkdtemp(prefix="verl-init-smoke-")


def _agent_checks(ctx: SmokeContext) -> None:
    """Multi-turn tool calling (rollout.multi_turn.*): what the CPU can prove (verl's tool registry loads the bundle's
    tools) and, said plainly, what it cannot (no tool call is made: the miniature rolls out single-turn)."""
    mt = ctx.cfg.actor_rollout_ref.rollout.multi_turn
    if not mt.enable and not mt.tool_config_path:
        return
    if mt.tool_config_path:
        from wizard.verify.harness import load_tools

        try:
            tools = load_tools(Path(ctx.bundle), str(mt.tool_config_path))
            ctx.check(None, "tools load through verl's tool registry", bool(tools),
                      f"{len(tools)} tool(s) from {mt.tool_config_path}: " + ", ".join(t.name for t in tools),
                      {"tools": [t.name for t in tools]}, hint="the tool config lists no tools")
        except Exception as exc:  # noqa: BLE001 - import errors, bad YAML, a schema pydantic refuses
            ctx.check(None, "tools load through verl's tool registry", False,
                      f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
                      hint=f"fix {mt.tool_config_path} or the tool class it names (verl-init check: VI858)")
    engine = ctx.report.engine
    ctx.check(None, "multi-turn rollout with tool calls", None,
              "not made here: the CPU miniature rolls out single-turn (verl's tool agent loop needs an async vLLM or "
              "SGLang server on a GPU)" if engine == "cpu" else
              "made by verl's tool agent loop in main_ppo (the step's rollout)")


def _judge_checks(ctx: SmokeContext) -> None:
    """A generative reward model (reward=genrm): said plainly, the judge LLM is not served by the CPU miniature."""
    rm, fn = ctx.cfg.reward.reward_model, ctx.cfg.reward.custom_reward_function
    if not rm.enable or not fn.get("path"):
        return
    engine = ctx.report.engine
    ctx.check(None, "judge LLM serving the verdicts", None,
              f"not served here: {rm.model_path} needs verl's reward loop with a vLLM or SGLang server on a GPU; the "
              f"CPU miniature runs {fn.path} and verl's reward manager against a stand-in judge on 127.0.0.1 that "
              "grades with verl's rule scorer" if engine == "cpu" else
              "served by verl's reward loop in main_ppo (the step's reward)")


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

def cli(args: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="verl-init smoke",
        description="One real rollout → reward → advantage → update cycle of a bundle, proving the five pitfalls absent.")
    p.add_argument("bundle", help="a folder written by verl-init")
    p.add_argument("--engine", choices=(*ENGINES, "verl-workers"), default="auto",
                   help="verl: python3 -m verl.trainer.main_ppo for one step (GPU machine); cpu: the Ray miniature; "
                        "auto: verl where it can run, else cpu; verl-workers: verl's own engine workers (actor, "
                        "reference, critic; no rollout) on this node's GPUs, peak memory per phase beside the plan's")
    p.add_argument("--prompts", type=int, help=f"prompts in the step (default: {DEFAULT_PROMPTS}, rounded to keep the geometry)")
    p.add_argument("--data-dir", help="a local copy of the hub dataset for data/prepare_data.py --local-dir")
    p.add_argument("--model-dir", help="verl and verl-workers engines: a local model folder standing in for the bundle's model")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="verl and verl-workers engines: seconds before verl is stopped")
    p.add_argument("--device", default="auto", help="verl-workers: auto (the GPUs, else an error), cuda, or cpu (the "
                   "same phases on the CPU, memory not measured)")
    p.add_argument("--nproc", type=int, help="verl-workers: processes, one per GPU (default: every GPU of this "
                   "machine up to the bundle's count; 1 with --device cpu)")
    p.add_argument("--steps", type=int, default=2, help="verl-workers: training steps (default 2: the second is the "
                   "steady state, with Adam's states)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the tiny model and its sampling (default 0)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--debug", action="store_true", help="show tracebacks; keep the temporary folder")
    ns = p.parse_args(args)
    if ns.debug:
        os.environ["VERL_INIT_SMOKE_KEEP"] = "1"
    if ns.engine == "verl-workers":
        from wizard.smoketest.engine_workers import cli as workers_cli

        return workers_cli(ns)
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




__all__ = ["ENGINES", "SmokeOptions", "SmokeReport", "choose_engine", "cli", "run_and_print", "smoke"]
