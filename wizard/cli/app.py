"""`verl-init` command line. Imports stay light until a command needs more (see benchmarks/)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from wizard._version import VERL_TARGET, __version__
from wizard.intent.errors import WizardError

COMMANDS = ("profiles", "keys", "rules", "verify", "validate-dataset", "check", "plan", "doctor", "smoke")

_DESCRIPTION = f"""\
Turn "these GPUs, this model, this algorithm" into a verl {VERL_TARGET} run that works the first time.

commands:
  verl-init                                                     ask, in a terminal: probe GPUs and Ray, plan, write
  verl-init --profile NAME [--set key=value ...] [--out DIR]   render a bundle from a profile
  verl-init --answers FILE [--set key=value ...] [--out DIR]   replay / edit an answers file
  verl-init profiles                                            list shipped profiles
  verl-init keys                                                list answer keys
  verl-init rules [VIxxx ...] [--markdown]                     what each rule ID means
  verl-init verify BUNDLE [--model-dir DIR]                     run verl's own checks on a bundle
  verl-init plan --profile NAME [--set ...] [--json]            memory per GPU, per role and phase; choices
  verl-init validate-dataset FILE... [--tokenizer PATH]         check data files against what verl reads
  verl-init check CONFIG|SCRIPT|BUNDLE [-- OVERRIDES] [--json]  lint a verl config or launch script (--fix, --verl)
  verl-init check --mode cluster BUNDLE [--address URL]         compare a bundle with a live Ray cluster
  verl-init doctor [--json]                                     versions, GPUs + topology, Ray, env pitfalls
  verl-init smoke BUNDLE [--engine auto|verl|cpu] [--prompts N] [--json]
                                                                one real rollout/update cycle; proves the pitfalls absent
"""


def _render_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="verl-init", description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"verl-init {__version__} (verl {VERL_TARGET})")
    p.add_argument("--profile", help="shipped profile to start from (see `verl-init profiles`)")
    p.add_argument("--answers", metavar="FILE", help="answers YAML, e.g. a bundle's verl-init.yaml")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override one answer; repeatable; wins over --answers and --profile")
    p.add_argument("--out", metavar="DIR", help="bundle folder (default: runs/<experiment_name>)")
    p.add_argument("--force", action="store_true", help="replace a non-empty output folder")
    p.add_argument("--dry-run", action="store_true", help="print what would be written; write nothing")
    p.add_argument("--verify", action="store_true", help="after writing, run verl's own checks (needs verl)")
    p.add_argument("--smoke", action="store_true",
                   help="after writing, run one rollout/update cycle (verl-init smoke; needs verl)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _err(line: str) -> None:
    print(f"verl-init: error: {line}", file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        if args and args[0] in COMMANDS:
            return _COMMANDS[args[0]](args[1:])
        return _cmd_render(args)
    except WizardError as exc:
        if debug:
            raise
        for problem in exc.problems:
            _err(problem.line())
        return 2
    except BrokenPipeError:  # `verl-init keys | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("verl-init: interrupted; nothing was written", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence; --debug shows the traceback
        if debug:
            raise
        _err(f"{type(exc).__name__}: {exc} (run with --debug for the traceback; this is a bug in verl-init)")
        return 1


def _cmd_render(args: list[str]) -> int:
    ns = _render_parser().parse_args(args)
    if not (ns.profile or ns.answers or ns.sets):
        if sys.stdin.isatty() and sys.stdout.isatty():
            from wizard.cli.interactive.walk import run_wizard

            return run_wizard(out=ns.out, force=ns.force, dry_run=ns.dry_run, verify=ns.verify)
        _err("no terminal to ask questions in: pass --profile NAME or --answers FILE (see `verl-init profiles`)")
        return 2

    from wizard.renderer.writer import write_bundle
    from wizard.planner.pipeline import experiment_name, plan
    from wizard.intent.profiles import merge_answers
    from wizard.renderer.render import render

    answers = merge_answers(ns.profile, ns.answers, ns.sets)
    the_plan = plan(answers)
    files = render(the_plan)
    out = ns.out or os.path.join("runs", experiment_name(answers))

    if ns.dry_run:
        print(f"verl-init: dry run; would write {out}/:")
        for name, text in files.items():
            print(f"  {name} ({len(text.encode())} bytes)")
        print()
        print(files["verl_config.yaml"], end="")
        _print_summary(the_plan, out, written=False)
        target = Path(out)
        if target.exists() and not ns.force and (not target.is_dir() or any(target.iterdir())):
            print(f"  note:    {out} exists and is not empty: writing it needs --force (VI903)")
        return 0

    write_bundle(files, out, force=ns.force)
    _print_summary(the_plan, out, written=True)
    if ns.verify:
        code = _verify_and_report(out, None, as_json=False)
        if code or not ns.smoke:
            return code
    if ns.smoke:
        from wizard.smoketest.core import SmokeOptions, run_and_print

        return run_and_print(out, SmokeOptions(), as_json=False, debug=ns.debug)
    return 0


def _print_summary(the_plan, out: str, *, written: bool) -> None:  # type: ignore[no-untyped-def]
    a, fx = the_plan.answers, the_plan.facts
    verb = "wrote" if written else "would write"
    print(f"verl-init: {verb} {out}/ — {a.algorithm} on {a.model}, {a.nnodes}×{a.gpus_per_node} GPUs ({a.cluster})")
    print(f"  roles:   {', '.join(the_plan.roles)}")
    print(f"  rollout: {a.rollout_engine} TP={fx['rollout_tp']} × {fx['rollout_replicas']} replica(s)")
    if the_plan.memory is not None:
        m = the_plan.memory
        print(f"  memory:  peak {m.peak_gb:.1f} of {m.gpu_gb:g} GB per GPU ({'fits' if m.fits else 'DOES NOT FIT'})"
              f"{', training state offloaded' if fx.get('offload') else ''}")
    print(f"  batch:   {fx['prompts_per_step']} prompts × {fx['samples_per_prompt']} samples = "
          f"{fx['samples_per_step']} per step; {fx['updates_per_step']} updates of {fx['samples_per_update']}")
    for problem in the_plan.findings:
        print(f"  {problem.severity}: {problem.line()}")
    if written:
        from wizard.planner.nextsteps import next_commands

        first, *rest = next_commands(the_plan, out)
        print(f"  next:    {first}")
        for line in rest:
            print(f"           {line.strip()}")
        print(f"  details: {out}/PLAN.md")


def _cmd_profiles(args: list[str]) -> int:
    argparse.ArgumentParser(prog="verl-init profiles", description="List shipped profiles.").parse_args(args)
    from wizard.intent.profiles import list_profiles

    rows = list_profiles()
    width = max(len(n) for n, _ in rows)
    for name, desc in rows:
        print(f"{name.ljust(width)}  {desc}")
    return 0


def _cmd_keys(args: list[str]) -> int:
    p = argparse.ArgumentParser(prog="verl-init keys", description="List answer keys.")
    p.add_argument("--markdown", action="store_true", help="a Markdown table (as in README.md)")
    ns = p.parse_args(args)
    from wizard.intent.answers import Answers, _allowed

    if ns.markdown:
        print("| key | what | allowed | default |\n| --- | --- | --- | --- |")
    for name, info in Answers.model_fields.items():
        default = info.get_default(call_default_factory=True)
        if ns.markdown:
            shown = "chosen by verl-init" if default is None else f"`{default!r}`"
            print(f"| `{name}` | {info.description} | {_allowed(name)} | {shown} |")
        else:
            shown = "chosen by verl-init" if default is None else repr(default)
            print(f"{name}: {info.description} ({_allowed(name)}; default {shown})")
    return 0


def _cmd_rules(args: list[str]) -> int:
    p = argparse.ArgumentParser(prog="verl-init rules", description="List the rule IDs verl-init reports.")
    p.add_argument("ids", nargs="*", metavar="VIxxx", help="only these rules")
    p.add_argument("--markdown", action="store_true", help="a Markdown table (as in README.md)")
    ns = p.parse_args(args)
    from wizard.check.rule_index import all_rules, markdown

    if ns.markdown:
        print(markdown())
        return 0
    rules = all_rules()
    wanted = [i.upper() for i in ns.ids] or list(rules)
    unknown = [i for i in wanted if i not in rules]
    if unknown:
        _err(f"rules: {unknown[0]!r} is not a verl-init rule ID — run `verl-init rules` for the list")
        return 2
    for rule in wanted:
        area, title = rules[rule]
        print(f"{rule}  [{area}]  {title}")
    return 0


def _cmd_verify(args: list[str]) -> int:
    p = argparse.ArgumentParser(prog="verl-init verify",
                                description="Compose a bundle with verl's Hydra tree and run verl's own checks.")
    p.add_argument("bundle")
    p.add_argument("--model-dir", help="local model folder standing in for hub models that must be loaded")
    p.add_argument("--json", action="store_true")
    p.add_argument("--debug", action="store_true")
    ns = p.parse_args(args)
    return _verify_and_report(ns.bundle, ns.model_dir, as_json=ns.json)


def _verify_and_report(bundle: str, model_dir: Optional[str], *, as_json: bool) -> int:
    from wizard.verify.harness import verify_with_verl

    report = verify_with_verl(bundle, model_dir=model_dir)
    if as_json:
        import json

        print(json.dumps(report.as_dict(), indent=2))
    else:
        for check in report.checks:
            mark = "ok  " if check.ok else ("skip" if check.skipped else "FAIL")
            print(f"  [{mark}] {check.name}: {check.detail}")
        if report.blocked:
            print(f"verl {report.verl_version}: NOT VERIFIED {bundle} — {report.blocked}")
        else:
            print(f"verl {report.verl_version}: {'accepted' if report.ok else 'REJECTED'} {bundle}")
    return 0 if report.ok else 1


def _cmd_validate_dataset(args: list[str]) -> int:
    from wizard.env.datasets import main as validate_dataset_main

    return validate_dataset_main(args)


def _cmd_check(args: list[str]) -> int:
    head = args[:args.index("--")] if "--" in args else args
    cluster = any(a == "--mode=cluster" or (a == "--mode" and head[i + 1:i + 2] == ["cluster"])
                  for i, a in enumerate(head))
    if cluster:
        from wizard.env.cluster import cli

        return cli(args)
    from wizard.check.lint import cli as lint_cli

    return lint_cli(args)


def _cmd_plan(args: list[str]) -> int:
    p = argparse.ArgumentParser(prog="verl-init plan",
                                description="Memory per GPU for each role and phase, every choice with its reason.")
    p.add_argument("--profile")
    p.add_argument("--answers", metavar="FILE")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--json", action="store_true")
    p.add_argument("--debug", action="store_true")
    ns = p.parse_args(args)
    from wizard.planner.pipeline import plan
    from wizard.intent.profiles import merge_answers

    the_plan = plan(merge_answers(ns.profile, ns.answers, ns.sets))
    mem = the_plan.memory
    choices = {k: {"value": c.value, "reason": c.reason, "source": c.source} for k, c in the_plan.settings.items()}
    if ns.json:
        import json

        doc = dict(mem.as_dict()) if mem else {"fits": None}
        doc["choices"] = choices
        doc["findings"] = [f.as_dict() for f in the_plan.findings]
        print(json.dumps(doc, indent=2, default=str))
        return 0
    a = the_plan.answers
    print(f"{a.algorithm} on {a.model}: {a.nnodes}×{a.gpus_per_node} × {a.gpu_memory_gb:g} GB")
    if mem:
        for phase, rows in (("rollout", mem.rollout), ("training", mem.training)):
            print(f"  {phase} phase, GB per GPU:")
            for k, v in rows.items():
                print(f"    {k:<38} {v:7.1f}")
            print(f"    {'total':<38} {sum(rows.values()):7.1f}")
        print(f"  peak {mem.peak_gb:.1f} GB of {mem.gpu_gb:g} GB (budget {mem.budget_gb:.1f} GB after a "
              f"{int(mem.margin * 100)}% margin): {'fits' if mem.fits else 'DOES NOT FIT'}; "
              f"KV cache holds {mem.kv_seqs:.0f} full sequences per rollout GPU")
    print("  choices:")
    for k, c in choices.items():
        print(f"    {k} = {c['value']}  ({c['reason']})")
    for problem in the_plan.findings:
        print(f"  {problem.severity}: {problem.line()}")
    return 0


def _cmd_doctor(args: list[str]) -> int:
    from wizard.env.doctor import cli

    return cli(args)


def _cmd_smoke(args: list[str]) -> int:
    from wizard.smoketest.core import cli

    return cli(args)


_COMMANDS = {"plan": _cmd_plan, "profiles": _cmd_profiles, "keys": _cmd_keys, "rules": _cmd_rules, "verify": _cmd_verify,
             "validate-dataset": _cmd_validate_dataset, "check": _cmd_check, "doctor": _cmd_doctor,
             "smoke": _cmd_smoke}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
