"""What several `verl-init` commands print the same way: the one-line error, the bundle summary.

Stays light: nothing here imports more than the standard library until it runs.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wizard.planner.state import Plan


def err(line: str) -> None:
    """`verl-init: error: LINE` on stderr: how every command reports a problem (always one line: control
    characters in LINE, e.g. from a user's value or an exception message, are shown escaped)."""
    from wizard.intent.text import one_line

    print(f"verl-init: error: {one_line(line)}", file=sys.stderr)


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
