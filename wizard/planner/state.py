"""The planner's ground floor: the `Plan` it returns, the build state (`Build`) every stage reads and writes, and the
refusals that suggest values (`refuse`, then `settle` confirms each suggested value by re-running the rule stages).

It imports no stage: `settle` is handed the stage list by wizard.planner.pipeline, so the arrows point down.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal, Optional, Sequence

from wizard._version import VERL_TARGET, __version__
from wizard.intent.answers import Answers
from wizard.intent.errors import Findings, Problem
from wizard.planner import dataprep
from wizard.planner.memory import Decision
from wizard.planner.shapes import ModelShape
from wizard.verlspec import arithmetic as rc
from wizard.verlspec.algorithms import ALGORITHMS, Algo


Source = Literal["answer", "derived", "default", "override"]


# Tokens per training micro-batch that keep activations and the logits tensor modest.
MICRO_TOKEN_BUDGET = 8192


# -- the plan ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Choice:
    value: Any
    reason: str
    source: Source


@dataclass
class Plan:
    """A resolved plan. `settings` maps verl's dotted keys to the chosen value and its reason."""

    answers: Answers
    base_dir: str
    settings: dict[str, Choice]
    facts: dict[str, Any]
    roles: dict[str, str]
    findings: list[Problem] = field(default_factory=list)
    memory: Optional[Any] = None  # filled by the memory-fit planner (its own issue); None = not estimated
    bundle_dir: Optional[str] = None  # the bundle folder (absolute) when known: data paths are stored relative to it
    replaced: dict[str, Choice] = field(default_factory=dict)  # planned choices the answers' overrides replaced
    version: str = __version__
    verl_version: str = VERL_TARGET

    @property
    def n_gpus(self) -> int:
        return int(self.facts["n_gpus"])

    @property
    def base_config(self) -> str:
        return "megatron" if self.answers.train_backend == "megatron" else "fsdp"

    def value(self, key: str) -> Any:
        return self.settings[key].value

    def overrides(self) -> list[str]:
        """The plan as Hydra command-line overrides (for `check`, logs and docs)."""
        import json

        out = []
        for key, choice in self.settings.items():
            v = choice.value
            text = json.dumps(v) if isinstance(v, (list, dict)) else ("null" if v is None else str(v))
            if isinstance(v, bool):
                text = str(v)
            out.append(f"{key}={text}")
        return out

    def planned_settings(self) -> dict[str, Choice]:
        """The settings as planned, before the answers' overrides (what `verl-init check` lints them against)."""
        return {k: self.replaced.get(k, c) for k, c in self.settings.items() if c.source != "override" or k in self.replaced}

    def nested(self, settings: Optional[dict[str, Choice]] = None) -> dict[str, Any]:
        """The settings (default: the final ones) as the nested mapping the verl YAML holds."""
        root: dict[str, Any] = {}
        for key, choice in (self.settings if settings is None else settings).items():
            node = root
            parts = key.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = choice.value
        return root


# -- the build state: what each stage has resolved so far --------------------------------------------------------------

class Settings:
    def __init__(self) -> None:
        self.items: dict[str, Choice] = {}

    def set(self, key: str, value: Any, reason: str, source: Source = "derived") -> Any:
        self.items[key] = Choice(value, reason, source)
        return value


@dataclass
class Build:
    """The planner's working state: the answers, and what each stage has resolved so far."""

    a: Answers
    base: str
    topology: Optional[Sequence[Sequence[int]]]
    given: set[str] = field(default_factory=set)
    f: Findings = field(default_factory=Findings)
    s: Settings = field(default_factory=Settings)
    facts: dict[str, Any] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    algo: Algo = ALGORITHMS["grpo"]
    n_gpus: int = 0
    n: int = 1  # samples per prompt
    n_src: Source = "default"
    kl_coef: float = 0.0
    use_ref: bool = False
    kl_in_loss: bool = False
    kl_in_reward: bool = False
    critic_model: str = ""
    sp: int = 1
    megatron: bool = False
    seq: int = 0
    dynamic: bool = True
    shape: Optional[ModelShape] = None
    critic_shape: Optional[ModelShape] = None
    tp_options: list[int] = field(default_factory=list)
    mp_options: list[rc.MegatronGrid] = field(default_factory=list)
    decision: Optional[Decision] = None
    dp: int = 0
    mtp: int = 1
    mpp: int = 1
    grid: rc.MegatronGrid = field(default_factory=rc.MegatronGrid)  # the Megatron layout (TP, PP, CP, EP, ETP, VPP)
    rtp: int = 0
    rep: int = 1  # the rollout engine's expert parallel size (1, or rollout TP × DP for a MoE model)
    rdp: int = 1  # the rollout engine's data_parallel_size (> 1 only for a MoE model whose experts need more GPUs)
    gmu: float = 0.6
    offload: bool = False
    reward_tp: int = 1  # the reward model's engine (reward=model): TP and share of each GPU, sized from its model
    reward_gmu: float = 0.0
    prompts: int = 0  # prompts_per_step (data.train_batch_size)
    updates: int = 1  # updates_per_step
    mini: int = 0  # prompts per update (ppo_mini_batch_size); 0 when the updates are unequal
    per_rank: int = 0  # samples each data-parallel rank trains on per update
    micro: int = 0
    logprob_micro: int = 0
    tokens: int = 0
    logprob_tokens: int = 0
    critic_tokens: int = 0
    lora_alpha: int = 0
    train_files: tuple[str, str, Source] = ("", "", "default")
    val_files: tuple[str, str, Source] = ("", "", "default")
    written: Optional[Answers] = None  # the answers as given (relative paths as the user wrote them)
    bundle: Optional[str] = None  # the bundle folder, absolute, when known
    stored: dict[str, str] = field(default_factory=dict)  # data paths as the bundle names them (bundle-relative)
    replaced: dict[str, Choice] = field(default_factory=dict)  # planned choices an override replaced
    # Suggested fixes, settled once every rule stage has run (see settle): (index in f.items, rule, render).
    pending: list[tuple[int, str, Callable[["Confirm"], str]]] = field(default_factory=list)
    trial: bool = False  # a re-plan that checks a suggestion: it records rule IDs only, no hints


# Whether the answers with these changes pass every rule the suggesting one does not share (see settle).
Confirm = Callable[..., bool]
# The rule stages, in order (wizard.planner.pipeline.RULE_STAGES): settle re-runs them to confirm each suggestion.
Stages = Sequence[Callable[["Build"], None]]


# -- refusals that suggest values, confirmed by re-planning ------------------------------------------------------------

def refuse(b: "Build", rule: str, keys: Sequence[str], message: str, render: Callable[[Confirm], str]) -> None:
    """An error whose hint offers values to set: the hint is written by `render` once every rule stage has run,
    and offers only values that `render`'s confirm callback accepts (each re-planned: see settle)."""
    b.f.error(rule, keys, message, "")
    if not b.trial:
        b.pending.append((len(b.f.items) - 1, rule, render))


def either(values: list[int]) -> str:
    return " or ".join(str(v) for v in values)


def nearest_hint(key: str, valid: Sequence[int], current: int, requirement: str) -> Callable[[Confirm], str]:
    """`nearest valid: key=a or b`, from the values in `valid` nearest `current` that pass when taken."""
    def render(ok: Confirm) -> str:
        values = confirmed(ok, key, sorted(set(valid), key=lambda v: (abs(v - current), v)))
        return f"nearest valid: {key}={either(values)}" if values else f"{requirement}; no such value passes every rule here"
    return render


def confirmed(ok: Confirm, key: str, candidates: Sequence[Any], k: int = 2, tries: int = 16) -> list[Any]:
    """The first k candidates (nearest first) that pass when taken, ascending; at most `tries` re-plans."""
    out: list[Any] = []
    for value in list(candidates)[:tries]:
        if ok(**{key: value}):
            out.append(value)
            if len(out) == k:
                break
    return sorted(out)


def _trial(b: "Build", changes: dict[str, Any], stages: Stages) -> set[str]:
    """The rule IDs that refuse the answers with `changes` taken (every rule stage, no hints)."""
    a = b.a.model_copy(update=changes)
    written = b.written.model_copy(update=changes) if b.written is not None else None
    t = Build(a=a, base=b.base, topology=b.topology, given=b.given | set(changes), trial=True, written=written,
              bundle=b.bundle)
    for stage in stages:
        stage(t)
    return {p.rule for p in t.f.errors}


def settle(b: "Build", stages: Stages) -> None:
    """Write the hints of refusals that suggest values. A value is offered only if, taken alone, it leaves no error
    but those already reported for other reasons: "nearest valid" is valid (tests/test_suggestions.py). Each value
    is confirmed by re-running `stages` (the rule stages) with it taken."""
    if not b.pending:
        return
    base = {p.rule for p in b.f.errors}
    seen: dict[tuple[tuple[str, Any], ...], set[str]] = {}

    for index, rule, render in b.pending:
        allowed = base - {rule}

        def ok(_allowed: set[str] = allowed, **changes: Any) -> bool:
            key = tuple(sorted(changes.items()))
            if key not in seen:
                seen[key] = _trial(b, changes, stages)
            return seen[key] <= _allowed

        b.f.items[index] = replace(b.f.items[index], hint=render(ok))


# -- paths and names ---------------------------------------------------------------------------------------------------

def resolve_path(value: str, base_dir: str) -> str:
    """Local paths become absolute (bundles are launched from anywhere); `~/` becomes $HOME."""
    if value.startswith("~/"):
        return "${oc.env:HOME}/" + value[2:]
    if "${" in value or "://" in value or value.startswith("/"):
        return value
    return posixpath.normpath(posixpath.join(base_dir, value))


def looks_local(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~"))


def model_path(model: str, base: str) -> str:
    return resolve_path(model, base) if looks_local(model) else model


def with_absolute_paths(a: Answers, base_dir: str) -> Answers:
    """The answers with relative local paths (model, data, reward function ...) made absolute against
    `base_dir`: every file of the bundle, verl-init.yaml included, then names the same files, and replaying
    verl-init.yaml from any folder gives the same bundle. `~/...`, `${...}`, URLs and hub ids are kept.
    (When plan() knows the bundle folder, data paths written relative are then stored relative to it:
    wizard.planner.datafacts.paths.)"""
    given = a.model_dump(mode="json", exclude_unset=True)

    def fixed(value: str) -> str:
        return resolve_path(value, base_dir) if not value.startswith(("/", "~")) and "${" not in value else value

    changes: dict[str, Any] = {}
    for key in ("model", "critic_model", "reward_model"):
        if isinstance(given.get(key), str) and looks_local(given[key]):
            changes[key] = fixed(given[key])
    if isinstance(given.get("reward_function"), str) and ":" in given["reward_function"]:
        path, _, name = given["reward_function"].rpartition(":")
        changes["reward_function"] = f"{fixed(path)}:{name}"
    for key in ("train_files", "val_files"):
        if isinstance(given.get(key), str) and "://" not in given[key]:
            changes[key] = fixed(given[key])
    if isinstance(given.get("dataset"), str) and given["dataset"] not in dataprep.HUB:
        changes["dataset"] = fixed(given["dataset"])
    changes = {k: v for k, v in changes.items() if given.get(k) != v}
    return a.model_copy(update=changes) if changes else a


def experiment_name(a: Answers) -> str:
    if a.experiment_name:
        return a.experiment_name
    short = a.model.rstrip("/").rsplit("/", 1)[-1].lower()
    return f"{a.algorithm}-{short}"


# -- reasons and sources -----------------------------------------------------------------------------------------------

def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def given_reason(name: str, given: set[str], default_reason: str) -> str:
    return f"{name} (your answer)" if name in given else default_reason


def source_of(name: str, given: set[str]) -> Source:
    return "answer" if name in given else "default"
