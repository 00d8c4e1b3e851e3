"""What several `verl-init` commands share: the answer options, the one-line error, the bundle summary.

Stays light: nothing here imports more than the standard library until it runs.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from wizard.intent.errors import Problem
    from wizard.planner.state import Plan


def add_answer_options(p: Any) -> None:
    """Where the answers come from, as the render and `plan` both take them: a profile, an answers file, and
    single answers set or unset on top."""
    p.add_argument("--profile", help="shipped profile to start from (see `verl-init profiles`)")
    p.add_argument("--answers", metavar="FILE", help="answers YAML, e.g. a bundle's verl-init.yaml")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override one answer; repeatable; wins over --answers and --profile")
    p.add_argument("--unset", dest="unsets", action="append", default=[], metavar="KEY",
                   help="remove one answer (from --answers or --profile) so that its default applies; repeatable "
                        "(--set KEY= does the same)")


def err(line: str) -> None:
    """`verl-init: error: LINE` on stderr: how every command reports a problem (always one line: control
    characters in LINE, e.g. from a user's value or an exception message, are shown escaped)."""
    from wizard.intent.text import one_line

    print(f"verl-init: error: {one_line(line)}", file=sys.stderr)


def summary(the_plan: Plan, out: str, *, written: bool, warnings: Sequence[Problem] = ()) -> dict[str, Any]:
    """What print_summary says, as data (`verl-init ... --json`): the bundle, roles, rollout, memory, batch, the
    plan's findings and `verl-init check`'s warnings on the final config, and (once written) what to run next."""
    a, fx = the_plan.answers, the_plan.facts
    m = the_plan.memory
    out_doc: dict[str, Any] = {
        "written": written, "out": out, "algorithm": a.algorithm, "model": a.model, "nnodes": a.nnodes,
        "gpus_per_node": a.gpus_per_node, "cluster": a.cluster, "roles": dict(the_plan.roles),
        "rollout": {"engine": a.rollout_engine, "tp": fx["rollout_tp"], "replicas": fx["rollout_replicas"]},
        "memory": None if m is None else {"verdict": m.verdict, "line": m.verdict_line(), "peak_gib": round(m.peak_gib, 2),
                                          "capacity_gib": round(m.capacity_gib, 2), "offload": bool(fx.get("offload"))},
        "batch": {k: fx[k] for k in ("prompts_per_step", "samples_per_prompt", "samples_per_step", "updates_per_step",
                                     "samples_per_update")},
        "findings": [p.as_dict() for p in the_plan.findings],
        "check": [p.as_dict() for p in warnings],
    }
    if written:
        from wizard.planner.nextsteps import next_commands

        out_doc["next"] = next_commands(the_plan, out)
        out_doc["details"] = f"{out}/PLAN.md"
    return out_doc


def print_summary(the_plan: Plan, out: str, *, written: bool) -> None:
    """The few lines after rendering: roles, rollout, memory, batch, findings and (once written) what to run next."""
    a, fx = the_plan.answers, the_plan.facts
    verb = "wrote" if written else "would write"
    print(f"verl-init: {verb} {out}/ — {a.algorithm} on {a.model}, {a.nnodes}×{a.gpus_per_node} GPUs ({a.cluster})")
    print(f"  roles:   {', '.join(the_plan.roles)}")
    print(f"  rollout: {a.rollout_engine} TP={fx['rollout_tp']} × {fx['rollout_replicas']} replica(s)")
    if the_plan.memory is not None:
        m = the_plan.memory
        print(f"  memory:  {m.verdict_line()}{'; training state offloaded' if fx.get('offload') else ''}")
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
