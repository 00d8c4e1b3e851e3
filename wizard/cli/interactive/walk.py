"""`verl-init` in a terminal: probe, ask, explain, summarise, write.

1. Probe this machine's GPUs (NVML) and the Ray cluster, under a spinner, bounded in time.
2. Ask the questions of `wizard.cli.interactive.questions` whose `when` holds (the advanced ones only after "adjust
   advanced settings?" was answered yes), with defaults from the probes and the planner (questionary). Each answer
   is checked at once against the plan so far (`questions.validate`): a refused one is explained (the planner's
   message and fix) and the question asked again with a default that passes.
3. Plan and render. A rejected plan (rare: answers are checked as they are given) is explained inline (rule ID,
   message, hint) and the questions its keys name are asked again, their refused answers cleared.
4. Summary (rich): GPUs and roles, memory per GPU, batch arithmetic, findings; confirm; write the bundle
   (with its answers file, verl-init.yaml) through `wizard.renderer.writer.write_bundle`; print the next command.

Ctrl-C (or Ctrl-D) anywhere raises KeyboardInterrupt out of `run_wizard`; nothing is written before the
one atomic `write_bundle`, so an interrupted session leaves nothing on disk. The CLI turns it into
exit status 130.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wizard.intent.errors import Problem, WizardError
from wizard.planner.nextsteps import next_commands
from wizard.cli.interactive.questions import (
    DECISIONS,
    OTHER,
    QUESTIONS,
    RELATED,
    THIS_MACHINE,
    Context,
    Question,
    applicable,
    applies,
    as_text,
    choices_for,
    default_for,
    earlier_to_change,
    give,
    nothing_passes,
    offered,
    parse,
    prune,
    validate,
)

if TYPE_CHECKING:
    from rich.console import Console

    from wizard.planner.pipeline import Plan
    from wizard.env.probe import Probes

QUIT = "__quit__"


class ChangeAnswer(Exception):
    """Raised out of a refused question when the user chooses to change an earlier answer instead."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


class Prompter:
    """Asks through questionary. `unsafe_ask` lets Ctrl-C out as KeyboardInterrupt (Ctrl-D is treated alike)."""

    def __init__(self, console: Console, **prompt_kwargs: Any) -> None:
        self.console = console
        self.kwargs = prompt_kwargs  # e.g. input=/output= for tests (or use prompt_toolkit's create_app_session)

    def _run(self, question: Any) -> Any:
        try:
            return question.unsafe_ask()
        except EOFError:
            raise KeyboardInterrupt from None

    def select(self, message: str, choices: list[tuple[Any, str, str]], default: Any = None) -> Any:
        """`choices`: (value, title, description)."""
        import questionary

        items = [questionary.Choice(title=title, value=value, description=desc or None) for value, title, desc in choices]
        values = [value for value, _, _ in choices]
        return self._run(questionary.select(
            message, choices=items, default=default if default in values else None,
            use_search_filter=True, use_jk_keys=False, instruction="(type to filter, ↑/↓, Enter)", **self.kwargs))

    def text(self, message: str, default: str, validate: Any, instruction: str | None = None) -> str:
        import questionary

        return str(self._run(questionary.text(message, default=default, validate=validate, instruction=instruction,
                                              validate_while_typing=False, **self.kwargs)))

    def checkbox(self, message: str, choices: list[Any], checked: list[Any]) -> list[Any]:
        import questionary

        items = [questionary.Choice(title=str(v), value=v, checked=v in checked) for v in choices]
        return list(self._run(questionary.checkbox(
            message, choices=items, validate=lambda sel: True if sel else "choose at least one (console prints here)",
            instruction="(space toggles, Enter accepts)", **self.kwargs)))

    def confirm(self, message: str, default: bool = True) -> bool:
        import questionary

        return bool(self._run(questionary.confirm(message, default=default, **self.kwargs)))

    # -- one question of the questionnaire -----------------------------------------------------------

    def ask(self, q: Question, ctx: Context) -> Any:
        """The answer to `q` (None: leave the field unset, verl-init chooses), checked at once against the plan so
        far: a refused answer is explained (the planner's message and fix) and the question asked again, its
        default back to one that passes — never the refused value."""
        from rich.markup import escape

        from wizard.intent.text import one_line

        if q.note is not None:
            note = q.note(ctx)
            if note:
                self.console.print(f"  [dim]{escape(note)}[/dim]")
        refused = 0
        while True:
            value, shown, error = self.prompt(q, ctx, default_for(q, ctx))
            planned = error is None
            if error is None:
                error = validate(q, value, ctx)
            if error is None:
                return value
            line = one_line(f"{q.field} = {shown}: {error}")  # what was typed is shown, never obeyed
            self.console.print(f"  [red]✗ refused[/red] {escape(line)}")
            refused += 1
            if planned and (refused >= 2 or nothing_passes(q, ctx)):
                # the fix may lie in an earlier answer: let the user go back to it
                others = earlier_to_change(q, value, ctx)
                rows = [(q.field, f"ask {q.field} again", q.description)]
                rows += [(o.field, f"change {o.field}", o.description) for o in others]
                choice = self.select("Which answer do you want to change?", rows, q.field)
                if choice != q.field:
                    raise ChangeAnswer(str(choice))

    def prompt(self, q: Question, ctx: Context, default: Any) -> tuple[Any, str, str | None]:
        """One prompt for `q`: (value, as typed, error of the typed text or None)."""
        if q.kind == "confirm":
            value = self.confirm(q.message(), bool(default))
            return value, "yes" if value else "no", None
        if q.kind == "checkbox":
            values = [v for v, _ in choices_for(q, ctx)]
            chosen = self.checkbox(q.message(), values, list(default or []))
            return chosen, ", ".join(map(str, chosen)), None
        if q.kind == "select" or q.choices is not None:
            choices = [(v, "other" if v == OTHER else str(v), desc) for v, desc in offered(q, ctx)]
            if q.typed:
                choices.append((OTHER, "another value", "type it; it is checked at once"))
            value = self.select(q.message(), choices, default)
            if value != OTHER or not q.typed:
                return value, "other" if value == OTHER else as_text(value), None
            default = "" if default is None else default
        instruction = f"(empty: {q.auto(ctx)})" if q.optional and q.auto is not None else None
        if q.typed:
            instruction = "(type the number)"
        typed = self.text(q.message(), as_text(default), lambda text: True, instruction)
        value, error = parse(q, typed, ctx)
        return value, typed.strip(), error


# --- the flow ----------------------------------------------------------------------------------------


class Session:
    """One questionnaire: the answers so far (in the context, with which questions were answered)."""

    def __init__(self, prompter: Prompter, console: Console, ctx: Context) -> None:
        self.prompter = prompter
        self.console = console
        self.ctx = ctx

    @property
    def asked(self) -> set[str]:
        return self.ctx.asked

    def next_question(self) -> Question | None:
        prune(self.ctx)
        return next((q for q in QUESTIONS if q.field not in self.ctx.asked and applies(q, self.ctx)), None)

    def walk(self, reask: set[str] | None = None, rejected: bool = False) -> None:
        """Ask every applicable question not answered yet (and those in `reask` again). After a rejection
        (`rejected`), the answers asked again are cleared first, so no refused value comes back as the default."""
        from rich.markup import escape

        ctx = self.ctx
        for name in reask or ():
            ctx.asked.discard(name)
            if rejected:
                if name in DECISIONS:
                    ctx.decisions.pop(name, None)
                else:
                    ctx.answers.pop(name, None)
        while (q := self.next_question()) is not None:
            try:
                value = self.prompter.ask(q, ctx)
            except ChangeAnswer as change:  # asked next, before the refused question comes back
                ctx.asked.discard(change.field)
                continue
            give(q, value, ctx)
            if q.field == "gpus" and value == THIS_MACHINE:
                filled = ", ".join(f"{k} = {as_text(ctx.answers[k])}" for k in q.owns if k in ctx.answers)
                self.console.print(f"  [dim]{escape(filled)} (probed)[/dim]")

    def reask_for(self, problems: list[Problem]) -> set[str]:
        """Applicable questions that answer the problems' keys (and the rules' hints, RELATED)."""
        here = applicable(self.ctx)
        out: set[str] = set()
        for p in problems:
            named = set(p.keys) | set(RELATED.get(p.rule, ()))
            out |= {q.field for q in here if set(q.fields) & named}
        return out

    def choose_change(self, message: str) -> str | None:
        """Which answer to change (None: quit)."""
        rows = []
        for q in applicable(self.ctx):
            if q.field in DECISIONS:
                shown = as_text(self.ctx.decisions.get(q.field))
            else:
                value = self.ctx.answers.get(q.field)
                shown = as_text(value) if q.field in self.ctx.answers else "(verl-init chooses)"
                if isinstance(value, list):
                    shown = ", ".join(map(str, value))
            rows.append((q.field, f"{q.field} = {shown}", q.description))
        rows.append((QUIT, "quit without writing anything", ""))
        choice = self.prompter.select(message, rows, rows[0][0])
        return None if choice == QUIT else str(choice)


def explain(console: Console, problems: list[Problem]) -> None:
    from rich.markup import escape

    console.print("[bold red]verl-init cannot plan these answers:[/bold red]")
    for p in problems:
        where = ", ".join(p.keys) if p.keys else "answers"
        console.print(f"  [red]✗ {p.rule}[/red] {escape(where)}: {escape(p.message)}")
        if p.hint:
            console.print(f"    [yellow]→ {escape(p.hint)}[/yellow]")


def topology_for(ctx: Context) -> list[list[int]] | None:
    """This machine's link levels, when the plan's node looks like it (same GPU count, no MIG)."""
    p = ctx.probes
    if p is None or not p.gpus.found or p.gpus.mig_gpus or ctx.get("gpus") != THIS_MACHINE:
        return None
    if p.gpus.count != int(ctx.get("gpus_per_node")) or p.gpus.count < 2:
        return None
    if ctx.get("cluster") == "kuberay":  # the pods run elsewhere
        return None
    return p.gpus.levels()


def summary(console: Console, the_plan: Plan, topology_used: bool) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from wizard.renderer.render import context

    c = context(the_plan)
    a = the_plan.answers
    console.print()
    console.rule(f"[bold]{escape(c['title'])}[/bold]")
    roles = Table(box=box.SIMPLE, show_header=True, header_style="bold", title="Roles (all colocated on the same GPUs)")
    roles.add_column("role")
    roles.add_column("what")
    roles.add_column("GPUs", justify="right")
    for role, what in the_plan.roles.items():
        roles.add_row(role, escape(what), str(the_plan.n_gpus))
    console.print(roles)
    for line in c["layout_lines"]:
        console.print(f"  {escape(line)}")
    if topology_used:
        console.print("  [dim]Tensor-parallel groups were placed with this machine's GPU topology.[/dim]")
    mem = the_plan.memory
    if mem is not None:
        table = Table(box=box.SIMPLE, header_style="bold", title="Memory per GPU (GiB)")
        table.add_column("part")
        for phase in c["memory"]["phases"]:
            table.add_column(phase, justify="right")
        for row in c["memory"]["rows"]:
            table.add_row(escape(row["part"].replace("**", "")), *row["cells"])
        console.print(table)
        colour = {"fits": "green", "tight": "yellow"}.get(mem.verdict, "red")
        console.print(f"  [{colour}]{escape(mem.verdict_line())}[/{colour}]")
    else:
        console.print(f"  memory: {escape(c['memory']['summary'])}")
    console.print("[bold]Batch arithmetic[/bold]")
    for line in c["batch_lines"]:
        console.print(f"  {escape(line)}")
    for p in the_plan.findings:
        color = "yellow" if p.severity == "warning" else "dim"
        console.print(f"  [{color}]{p.severity}: {escape(p.line())}[/{color}]")
    console.print(f"  [dim]cluster: {a.cluster}; rollout {a.rollout_engine}; training {a.train_backend}[/dim]")




def _free_folder(path: str) -> str:
    p = Path(path)
    if not (p.exists() and (not p.is_dir() or any(p.iterdir()))):
        return path
    k = 2
    while True:
        cand = Path(f"{path}-{k}")
        if not cand.exists() or (cand.is_dir() and not any(cand.iterdir())):
            return str(cand)
        k += 1


def _folder_error(text: str, force: bool) -> str | None:
    if not text.strip():
        return "a folder is needed"
    p = Path(text.strip()).expanduser()
    if p.exists() and not p.is_dir():
        return f"{p} exists and is not a folder [VI902]"
    if p.is_dir() and any(p.iterdir()) and not force:
        return f"{p} is not empty — choose another folder (or rerun with --force: rendered files are replaced, your other files kept) [VI903]"
    return None


def print_probes(console: Console, probes: Probes) -> None:
    from rich.markup import escape

    h = probes.host
    console.print(f"  [bold]GPUs[/bold]  {escape(probes.gpus.describe())}")
    console.print(f"  [bold]Ray[/bold]   {escape(probes.ray.describe())}")
    host = []
    if h.cpus:
        host.append(f"{h.cpus} CPUs")
    if h.memory_gb:
        host.append(f"{h.memory_gb:g} GB memory")
    if h.shm_gb is not None:
        host.append(f"/dev/shm {h.shm_gb:g} GB")
    if host:
        console.print(f"  [bold]Host[/bold]  {escape(', '.join(host))}")
    for p in probes.findings():
        color = "yellow" if p.severity in ("warning", "error") else "dim"
        console.print(f"  [{color}]{escape(p.line())}[/{color}]")


def run_wizard(*, out: str | None = None, force: bool = False, dry_run: bool = False, verify: bool = False,
               env: Mapping[str, str] | None = None, console: Console | None = None,
               probes: Probes | None = None, base_dir: str | None = None,
               prompter: Prompter | None = None) -> int:
    """The whole interactive session. Returns the exit status; KeyboardInterrupt propagates (nothing written)."""
    from rich.console import Console

    from wizard._version import VERL_TARGET, __version__
    from wizard.intent.answers import make_answers
    from wizard.renderer.writer import write_bundle
    from wizard.planner.pipeline import experiment_name, plan
    from wizard.env.probe import probe_all
    from wizard.renderer.render import render

    console = console or Console(highlight=False)
    prompter = prompter or Prompter(console)
    env = dict(os.environ if env is None else env)
    base = base_dir or os.getcwd()

    console.print(f"[bold]verl-init {__version__}[/bold]: a verl {VERL_TARGET} run in a few questions. "
                  "Ctrl-C quits without writing anything.")
    if probes is None:
        with console.status("Looking at this machine: GPUs (NVML) and the Ray cluster ..."):
            probes = probe_all(env)
    print_probes(console, probes)

    ctx = Context(probes=probes, base_dir=base)
    session = Session(prompter, console, ctx)
    session.walk()
    while True:
        try:
            answers = make_answers(ctx.answers)
            topology = topology_for(ctx)
            the_plan = plan(answers, base_dir=base, topology=topology)
            files = render(the_plan)
        except WizardError as exc:
            explain(console, exc.problems)
            fields = session.reask_for(exc.problems)
            if not fields:
                change = session.choose_change("Which answer do you want to change?")
                if change is None:
                    console.print("Nothing was written.")
                    return 1
                fields = {change}
            console.print(f"[dim]Asking again: {', '.join(q.field for q in QUESTIONS if q.field in fields)}[/dim]")
            session.walk(reask=fields, rejected=True)
            continue
        summary(console, the_plan, topology is not None)
        action = prompter.select("Write this bundle?", [
            ("write", "write the bundle", "verl_config.yaml, run.sh, PLAN.md, verl-init.yaml (your answers), ..."),
            ("change", "change an answer", ""),
            (QUIT, "quit without writing anything", ""),
        ], "write")
        if action == "change":
            change = session.choose_change("Which answer do you want to change?")
            if change is None:
                console.print("Nothing was written.")
                return 1
            session.walk(reask={change})
            continue
        if action == QUIT:
            console.print("Nothing was written.")
            return 1
        break

    target = out
    if dry_run:
        target = target or os.path.join("runs", experiment_name(answers))
        console.print(f"dry run; would write {target}/:")
        for name, text in files.items():
            console.print(f"  {name} ({len(text.encode())} bytes)")
        return 0
    while True:
        if target is None:
            suggested = _free_folder(os.path.join("runs", experiment_name(answers)))
            target = prompter.text("Bundle folder", suggested,
                                   lambda t: _folder_error(t, force) or True).strip()
        try:
            # data paths are stored relative to the bundle folder: plan and render again for that folder
            the_plan = plan(answers, base_dir=base, topology=topology, bundle_dir=target)
            files = render(the_plan)
            written = write_bundle(files, target, force=force)
            break
        except WizardError as exc:
            explain(console, exc.problems)
            target = None
    from rich.markup import escape

    console.print(f"[bold green]Wrote {escape(str(written))}/[/bold green] ({len(files)} files; your answers are in "
                  f"{escape(str(written / 'verl-init.yaml'))})")
    ray_url = probes.ray.url if probes.ray.found else None
    console.print("[bold]Next:[/bold]")
    for line in next_commands(the_plan, str(target), ray_url):
        console.print(f"  {escape(line)}", soft_wrap=True)
    console.print(f"  [dim]replay or edit: verl-init --answers {escape(shlex.quote(str(written / 'verl-init.yaml')))} "
                  "--out <new folder>[/dim]", soft_wrap=True)
    if verify:
        from wizard.cli.verify import verify_and_report

        return verify_and_report(str(written), None, as_json=False)
    return 0


__all__ = ["Prompter", "Session", "explain", "next_commands", "run_wizard", "summary", "topology_for"]
