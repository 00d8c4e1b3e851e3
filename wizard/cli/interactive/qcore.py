"""The questionnaire's building blocks: the answers so far (`Context`, which plans them), the `Question` record
and the wizard decisions (wizard.cli.interactive.questions holds the table)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from wizard.intent.answers import Answers, answer_problems
from wizard.intent.errors import Problem, WizardError

if TYPE_CHECKING:
    from wizard.env.probe import Probes

Kind = Literal["select", "int", "float", "text", "checkbox", "confirm"]

# Wizard decisions that are not `Answers` fields: their answer fills fields (Question.apply).
DECISIONS: dict[str, str] = {
    "gpus": "GPUs of each node: this machine's, a common node, or other (typed).",
    "advanced": "Adjust advanced settings (engines, lengths, multi-turn tools, samples, steps, LoRA, logging, names)?",
}
OTHER = "__other__"  # the "another value" entry of a select that also takes a typed value
THIS_MACHINE = "this machine"
MEMORY_RULES = frozenset({"VI602", "VI603", "VI605", "VI606"})


@dataclass
class Context:
    """The answers given so far (only fields set), the wizard's decisions, which questions were answered, and what
    the probes found (None: not probed)."""

    answers: dict[str, Any] = field(default_factory=dict)
    probes: Probes | None = None
    base_dir: str = "."
    decisions: dict[str, Any] = field(default_factory=dict)
    asked: set[str] = field(default_factory=set)  # names of the questions answered (fields or decisions)
    _cache: dict[Any, list[Problem] | None] = field(default_factory=dict, repr=False)

    def get(self, name: str) -> Any:
        if name in DECISIONS:
            return self.decisions.get(name)
        if name in self.answers:
            return self.answers[name]
        return Answers.model_fields[name].get_default(call_default_factory=True)

    def model(self, **update: Any) -> Answers | None:
        """The answers so far as `Answers` (defaults for the rest), or None when they do not validate yet."""
        try:
            return Answers.model_validate({**self.answers, **update})
        except Exception:  # noqa: BLE001 - pydantic ValidationError: not complete or not consistent yet
            return None

    def problems(self, answers: Mapping[str, Any], *, hints: bool = False) -> list[Problem] | None:
        """The errors the planner (and the cluster files' rules) find in `answers`: [] when they plan; None when
        planning itself failed for another reason. Cached: the questions ask about the same answers many times.
        `hints=False` (filtering choices) skips the planner's re-plans that confirm suggested values; a refusal
        shown to the user asks for them."""
        key = (hints, *sorted((k, repr(v)) for k, v in answers.items()))
        if key not in self._cache:
            self._cache[key] = _plan_problems(dict(answers), self.base_dir, hints=hints)
        return self._cache[key]

    def trial(self, q: Question, value: Any) -> Context:
        """A copy of this context with `value` given as the answer to `q` (decisions fill their fields)."""
        t = Context(dict(self.answers), self.probes, self.base_dir, dict(self.decisions), set(self.asked), self._cache)
        type(self).settle(q, value, t)
        return t

    # give the answer and drop the answers that no longer apply: set by wizard.cli.interactive.questions (which
    # holds the table that decides it; this module sits below it)
    settle: ClassVar[Callable[[Question, Any, Context], None]]


def _plan_problems(answers: dict[str, Any], base_dir: str, *, hints: bool = False) -> list[Problem] | None:
    from wizard.planner.pipeline import plan
    from wizard.renderer.artefacts.cluster import cluster_problems

    problems = answer_problems(answers)
    if problems:
        return problems
    try:
        the_plan = plan(Answers.model_validate(answers), base_dir=base_dir, hints=hints)
        return [p for p in cluster_problems(the_plan) if p.severity == "error"]
    except WizardError as exc:
        return [p for p in exc.problems if p.severity == "error"]
    except Exception:  # noqa: BLE001 - a check must never stop the questionnaire
        return None


Default = Callable[[Context], Any]
Condition = Callable[[Context], bool]


def always(ctx: Context) -> bool:
    return True


def never(ctx: Context) -> bool:
    return False


@dataclass(frozen=True)
class Question:
    """One prompt bound to one `Answers` field, or to one decision of `DECISIONS`."""

    field: str
    kind: Kind
    section: str
    when: Condition = always
    default: Default | None = None  # probe- or planner-derived; None: the field's default
    optional: bool = False  # an empty answer leaves the field unset: verl-init chooses
    auto: Callable[[Context], str] | None = None  # what an empty answer means, shown in the prompt
    choices: Callable[[Context], Sequence[tuple[Any, str]]] | None = None  # (value, description)
    typed: bool = False  # an int/float question with choices also takes another value, typed (OTHER)
    note: Callable[[Context], str | None] | None = None  # one line shown under the prompt
    check: Callable[[Any, Context], str | None] | None = None  # extra immediate check: error text or None
    advanced: Condition = never  # asked only after "adjust advanced settings?" was answered yes
    apply: Callable[[Any, Context], dict[str, Any]] | None = None  # a decision: the fields its answer sets
    owns: tuple[str, ...] = ()  # a decision: every field its answer may set (the rest are cleared)

    @property
    def description(self) -> str:
        if self.field in DECISIONS:
            return DECISIONS[self.field]
        return str(Answers.model_fields[self.field].description or self.field)

    @property
    def fields(self) -> tuple[str, ...]:
        """The `Answers` fields this question fills."""
        return self.owns if self.field in DECISIONS else (self.field,)

    def message(self) -> str:
        return f"{self.field} — {self.description}"
