"""`verl-init plan --profile NAME [--set ...] [--json]`: memory per GPU for each role and phase, every choice with
its reason."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wizard.planner.state import Plan


def main(args: list[str]) -> int:
    from wizard.cli.common import add_answer_options

    p = argparse.ArgumentParser(prog="verl-init plan",
                                description="Memory per GPU for each role and phase, every choice with its reason.")
    add_answer_options(p)
    p.add_argument("--override", dest="overrides", action="append", default=[], metavar="VERL_KEY=VALUE",
                   help="a verl key the answers do not model (as verl-init's --override)")
    p.add_argument("--json", action="store_true", help="print the plan (memory, choices, findings) as JSON")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    ns = p.parse_args(args)
    from wizard.check.planned import lint_overrides
    from wizard.intent.errors import WizardError
    from wizard.intent.profiles import merge_answers
    from wizard.planner.pipeline import plan

    the_plan = plan(merge_answers(ns.profile, ns.answers, ns.sets + [f"{k}=" for k in ns.unsets], ns.overrides))
    lint = lint_overrides(the_plan)
    if lint.errors:
        raise WizardError(lint.errors)
    the_plan.findings.extend(lint.warnings)
    choices = {k: {"value": c.value, "reason": c.reason, "source": c.source} for k, c in the_plan.settings.items()}
    if ns.json:
        _print_json(the_plan, choices)
    else:
        _print_text(the_plan, choices)
    return 0


def _print_json(the_plan: Plan, choices: dict[str, dict[str, Any]]) -> None:
    import json

    mem = the_plan.memory
    doc = dict(mem.as_dict()) if mem else {"fits": None}
    from wizard.planner.steptime_plan import not_predicted, of_plan

    doc["time"] = of_plan(the_plan)
    if doc["time"] is None:
        doc["time_not_predicted"] = not_predicted(the_plan)
    doc["choices"] = choices
    doc["findings"] = [f.as_dict() for f in the_plan.findings]
    print(json.dumps(doc, indent=2, default=str))


def _print_text(the_plan: Plan, choices: dict[str, dict[str, Any]]) -> None:
    a, mem = the_plan.answers, the_plan.memory
    print(f"{a.algorithm} on {a.model}: {a.nnodes}×{a.gpus_per_node} × {a.gpu_memory_gb:g} GB")
    if mem:
        for phase in mem.phases:
            low, high = mem.band(phase)
            print(f"  {phase} phase, GiB per GPU:")
            for k, v in mem.table(phase).items():
                print(f"    {k:<52} {v:7.1f}")
            print(f"    {'total (band ' + f'{low:.1f} – {high:.1f})':<52} {mem.phase_gib(phase):7.1f}")
        print(f"  {mem.verdict_line()}; KV cache holds {mem.kv_seqs:.0f} full sequences per rollout GPU")
    from wizard.planner.steptime_plan import lines, not_predicted, of_plan

    time = of_plan(the_plan)
    why = None if time else not_predicted(the_plan)
    if time or why:
        print("  time and cost:")
        for line in lines(time) if time else [why]:
            print(f"    {line}")
    print("  choices:")
    for k, c in choices.items():
        print(f"    {k} = {c['value']}  ({c['reason']})")
    for problem in the_plan.findings:
        print(f"  {problem.severity}: {problem.line()}")
