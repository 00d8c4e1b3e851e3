"""`verl-init [--profile NAME | --answers FILE] [--set k=v ...]`: render a bundle; with neither, ask in a terminal.

The parser's description is the top-level `verl-init --help`, so this module imports nothing heavy at the top.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wizard._version import VERL_TARGET, __version__
from wizard.cli.common import err, print_summary, summary

if TYPE_CHECKING:
    from wizard.intent.errors import Problem
    from wizard.planner.state import Plan

DESCRIPTION = f"""\
Turn "these GPUs, this model, this algorithm" into a verl {VERL_TARGET} run that works the first time.

commands:
  verl-init                                                     ask, in a terminal: probe GPUs and Ray, plan, write
  verl-init --profile NAME [--set key=value ...] [--out DIR]   render a bundle from a profile (--json: the summary)
            [--override verl.key=value ...]                     + verl keys the answers do not model
  verl-init --answers FILE [--set key=value ...] [--out DIR]   replay / edit an answers file
  verl-init profiles [--json]                                   list shipped profiles
  verl-init keys [--markdown | --json]                          list answer keys
  verl-init rules [VIxxx ...] [--markdown | --json]             what each rule ID means
  verl-init verify BUNDLE [--model-dir DIR] [--json]            run verl's own checks on a bundle
  verl-init plan --profile NAME [--set ...] [--json]            memory per GPU, per role and phase; choices
  verl-init validate-dataset FILE... [--model-dir DIR] [--json] check data files against what verl reads
  verl-init check CONFIG|SCRIPT|BUNDLE [-- OVERRIDES] [--json]  lint a verl config or launch script (--fix, --verl)
  verl-init check --mode cluster BUNDLE [--address URL]         compare a bundle with a live Ray cluster
  verl-init doctor [--json]                                     versions, GPUs + topology, Ray, env pitfalls
  verl-init smoke BUNDLE [--engine auto|verl|cpu|verl-workers] [--prompts N] [--json]
                                                                one real rollout/update cycle; proves the pitfalls absent
"""


def parser() -> argparse.ArgumentParser:
    from wizard.cli.common import add_answer_options

    p = argparse.ArgumentParser(
        prog="verl-init", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"verl-init {__version__} (verl {VERL_TARGET})")
    add_answer_options(p)
    p.add_argument("--override", dest="overrides", action="append", default=[], metavar="VERL_KEY=VALUE",
                   help="set a verl key the answers do not model (Hydra syntax: key=value, +key=value adds a key); "
                        "repeatable; checked with `verl-init check`'s rules, recorded in verl-init.yaml")
    p.add_argument("--out", metavar="DIR", help="bundle folder (default: runs/<experiment_name>)")
    p.add_argument("--force", action="store_true", help="re-render into a non-empty output folder: rendered files are replaced, "
                   "every other file there (data, checkpoints, logs) is kept")
    p.add_argument("--dry-run", action="store_true", help="print what would be written; write nothing")
    p.add_argument("--verify", action="store_true", help="after writing, run verl's own checks (needs verl)")
    p.add_argument("--import-tool", action="store_true",
                   help="crosses verl-init's boundary: import your `tool` answer's module to check it, inside the "
                        "bubblewrap sandbox only (without it the module file is read, never run; not with --dry-run)")
    p.add_argument("--smoke", action="store_true",
                   help="after writing, run one rollout/update cycle (verl-init smoke; needs verl)")
    p.add_argument("--json", action="store_true",
                   help="print the summary (or, with --dry-run, the files it would write) as JSON; needs --profile, "
                        "--answers, --set or --override")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def main(args: list[str]) -> int:
    ns = parser().parse_args(args)
    if ns.json and (ns.verify or ns.smoke):
        err("--json prints the render's summary only: run `verl-init verify BUNDLE --json` or `verl-init smoke BUNDLE "
            "--json` after it")
        return 2
    if ns.json and not (ns.profile or ns.answers or ns.sets or ns.overrides):
        err("--json needs --profile NAME or --answers FILE (the questions in a terminal print no JSON)")
        return 2
    if not (ns.profile or ns.answers or ns.sets or ns.overrides):
        if sys.stdin.isatty() and sys.stdout.isatty():
            from wizard.cli.interactive.walk import run_wizard

            return run_wizard(out=ns.out, force=ns.force, dry_run=ns.dry_run, verify=ns.verify)
        err("no terminal to ask questions in: pass --profile NAME or --answers FILE (see `verl-init profiles`)")
        return 2

    from wizard.check.planned import lint_overrides
    from wizard.intent.errors import Interrupted, WizardError
    from wizard.intent.profiles import merge_answers
    from wizard.planner.pipeline import plan
    from wizard.planner.state import experiment_name
    from wizard.renderer.render import render
    from wizard.renderer.writer import check_out, write_bundle

    if ns.out is not None:
        check_out(ns.out)  # before planning: a newline in --out is a typo, not a folder name
    if ns.import_tool and ns.dry_run:
        err("--import-tool with --dry-run: a dry run imports nothing; drop one of them")
        return 2
    answers = merge_answers(ns.profile, ns.answers, ns.sets + [f"{k}=" for k in ns.unsets], ns.overrides)
    out = ns.out or os.path.join("runs", experiment_name(answers))
    from wizard.planner.agent import tool_imports

    with tool_imports(ns.import_tool):  # the user's tool module: read, or with --import-tool imported in the sandbox
        the_plan = plan(answers, bundle_dir=out)  # data paths are stored relative to the bundle
    lint = lint_overrides(the_plan)  # before anything is written: a bad override refuses the whole bundle
    if lint.errors:
        raise WizardError(lint.errors)
    files = render(the_plan)

    if ns.dry_run and ns.json:
        _print_json(dict(summary(the_plan, out, written=False, warnings=lint.warnings),
                         files={name: len(text.encode()) for name, text in files.items()}))
        return 0
    if ns.dry_run:
        _print_dry_run(the_plan, files, out, force=ns.force)
        _print_lint(lint.warnings)
        return 0

    write_bundle(files, out, force=ns.force)
    try:
        if ns.json:
            _print_json(summary(the_plan, out, written=True, warnings=lint.warnings))
            return 0
        print_summary(the_plan, out, written=True)
        _print_lint(lint.warnings)
        return _after_write(the_plan, out, ns)
    except Interrupted:
        raise
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted after writing the bundle: {out} is complete") from None


def _print_json(doc: dict[str, Any]) -> None:
    import json

    print(json.dumps(doc, indent=2, default=str))


def _print_lint(warnings: list[Problem]) -> None:
    for problem in warnings:
        print(f"  check:   {problem.severity}: {problem.line()}")


def _after_write(the_plan: Plan, out: str, ns: argparse.Namespace) -> int:
    if ns.verify:
        from wizard.cli.verify import verify_and_report

        code = verify_and_report(out, None, as_json=False)
        if code or not ns.smoke:
            return code
    if ns.smoke:
        from wizard.smoketest.run import SmokeOptions, run_and_print

        return run_and_print(out, SmokeOptions(), as_json=False, debug=ns.debug)
    return 0


def _print_dry_run(the_plan: Plan, files: dict[str, str], out: str, *, force: bool) -> None:
    print(f"verl-init: dry run; would write {out}/:")
    for name, text in files.items():
        print(f"  {name} ({len(text.encode())} bytes)")
    print()
    print(files["verl_config.yaml"], end="")
    print_summary(the_plan, out, written=False)
    target = Path(out)
    if target.exists() and not force and (not target.is_dir() or any(target.iterdir())):
        print(f"  note:    {out} exists and is not empty: writing it needs --force (VI903)")
