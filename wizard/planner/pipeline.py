"""Answers → Plan: every number verl needs, each with the reason it was chosen.

The planner never rewrites what the user chose: an explicit answer is used as given or the plan is
rejected with a rule ID, the keys involved and the nearest valid values. Derived values are
chosen so that every divisibility verl checks (on the driver, in the TaskRunner and inside the Ray
workers; see docs/verl-facts.md §1) holds by construction.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal, Optional, Sequence

from wizard.planner import agent, dataprep, genrm, sandbox
from wizard._version import VERL_TARGET, __version__
from wizard.intent.answers import BUILTIN_DATASETS, DATA_SUFFIXES, Answers
from wizard.intent.errors import Findings, Problem
from wizard.planner.memory import (Decision, Layout, choose, estimate, megatron_lora_params, reward_layout,
                                   rollout_weight_bytes)
from wizard.planner.shapes import ModelShape, resolve_shape
from wizard.verlspec import arithmetic as rc
from wizard.verlspec.algorithms import ALGORITHMS, VLLM_LORA_RANKS, Algo
from wizard.verlspec.arithmetic import divisors, largest_divisor_at_most, nearest, pow2_divisors
from wizard.verlspec.hardware import ACCELERATORS, accelerator_of_gpu_type
from wizard.verlspec.hydra_overrides import format_value, parse_override
from wizard.verlspec.lora import FSDP_TARGET_MODULES, MEGATRON_TARGET_MODULES
from wizard.verlspec.keys import PRE

Source = Literal["answer", "derived", "default", "override"]

# Tokens per training micro-batch that keep activations and the logits tensor modest.
MICRO_TOKEN_BUDGET = 8192
# Where the bundle's data/prepare_data.py writes (bundle-relative: run.sh launches verl from the bundle).
DATASET_DEFAULTS = {
    "gsm8k": ("data/train.parquet", "data/val.parquet"),
    "math": ("data/train.parquet", "data/val.parquet"),
}


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


# ---------------------------------------------------------------------------------------------
# hint helpers


def _or(values: list[int]) -> str:
    return " or ".join(str(v) for v in values)


def _refuse(b: "_Build", rule: str, keys: Sequence[str], message: str, render: Callable[[Confirm], str]) -> None:
    """An error whose hint offers values to set: the hint is written by `render` once every rule stage has run,
    and offers only values that `render`'s confirm callback accepts (each re-planned: see _settle)."""
    b.f.error(rule, keys, message, "")
    if not b.trial:
        b.pending.append((len(b.f.items) - 1, rule, render))


def _confirmed(ok: Confirm, key: str, candidates: Sequence[Any], k: int = 2, tries: int = 16) -> list[Any]:
    """The first k candidates (nearest first) that pass when taken, ascending; at most `tries` re-plans."""
    out: list[Any] = []
    for value in list(candidates)[:tries]:
        if ok(**{key: value}):
            out.append(value)
            if len(out) == k:
                break
    return sorted(out)


def _trial(b: "_Build", changes: dict[str, Any]) -> set[str]:
    """The rule IDs that refuse the answers with `changes` taken (every rule stage, no hints)."""
    a = b.a.model_copy(update=changes)
    written = b.written.model_copy(update=changes) if b.written is not None else None
    t = _Build(a=a, base=b.base, topology=b.topology, given=b.given | set(changes), trial=True, written=written,
               bundle=b.bundle)
    for stage in RULE_STAGES:
        stage(t)
    return {p.rule for p in t.f.errors}


def _layout_suggestions(b: "_Build") -> None:
    """The layout refusals raised inside the memory-fit stage (VI304 rollout_tp, VI309 megatron_tp, VI310 megatron_pp)
    get their values confirmed like every other suggestion."""
    a, gpn, n_gpus = b.a, b.a.gpus_per_node, b.a.nnodes * b.a.gpus_per_node
    if b.trial:
        return
    for index, p in enumerate(b.f.items):
        if p.severity != "error":
            continue
        if p.rule == "VI304" and a.rollout_tp:
            valid = divisors(gpn) + [gpn * k for k in range(2, a.nnodes + 1) if n_gpus % (gpn * k) == 0]
            render = _nearest_hint("rollout_tp", valid, a.rollout_tp, "a rollout replica must fill a node or whole nodes")
        elif p.rule == "VI309" and a.megatron_tp:
            render = _nearest_hint("megatron_tp", divisors(gpn), a.megatron_tp, f"megatron_tp must divide {gpn}")
        elif p.rule in _LAYOUT_HINTS:
            key = next((k for k in _LAYOUT_HINTS[p.rule] if getattr(a, k) is not None), _LAYOUT_HINTS[p.rule][-1])
            render = _nearest_hint(key, megatron_values(b, key), getattr(a, key) or 1,
                                   f"{key} must pass megatron-core's layout checks with your other megatron_* answers")
        else:
            continue
        b.pending.append((index, p.rule, render))


# The Megatron layout refusals' hints: the given answer each suggests values for, in this order of preference.
_LAYOUT_HINTS = {
    "VI310": ("megatron_pp", "megatron_cp", "megatron_tp"),
    "VI312": ("megatron_tp",),
    "VI313": ("megatron_ep",),
    "VI314": ("megatron_ep", "megatron_etp", "megatron_pp"),
    "VI315": ("megatron_ep", "megatron_etp"),
    "VI316": ("megatron_vpp", "megatron_pp"),
    "VI317": ("megatron_pp",),
}


def _settle(b: "_Build") -> None:
    """Write the hints of refusals that suggest values. A value is offered only if, taken alone, it leaves no error
    but those already reported for other reasons: "nearest valid" is valid (tests/test_suggestions.py)."""
    _layout_suggestions(b)
    if not b.pending:
        return
    base = {p.rule for p in b.f.errors}
    seen: dict[tuple[tuple[str, Any], ...], set[str]] = {}

    for index, rule, render in b.pending:
        allowed = base - {rule}

        def ok(_allowed: set[str] = allowed, **changes: Any) -> bool:
            key = tuple(sorted(changes.items()))
            if key not in seen:
                seen[key] = _trial(b, changes)
            return seen[key] <= _allowed

        b.f.items[index] = replace(b.f.items[index], hint=render(ok))


# ---------------------------------------------------------------------------------------------
# paths


def resolve_path(value: str, base_dir: str) -> str:
    """Local paths become absolute (bundles are launched from anywhere); `~/` becomes $HOME."""
    if value.startswith("~/"):
        return "${oc.env:HOME}/" + value[2:]
    if "${" in value or "://" in value or value.startswith("/"):
        return value
    return posixpath.normpath(posixpath.join(base_dir, value))


# ---------------------------------------------------------------------------------------------


class _Settings:
    def __init__(self) -> None:
        self.items: dict[str, Choice] = {}

    def set(self, key: str, value: Any, reason: str, source: Source = "derived") -> Any:
        self.items[key] = Choice(value, reason, source)
        return value


@dataclass
class _Build:
    """The planner's working state: the answers, and what each stage has resolved so far."""

    a: Answers
    base: str
    topology: Optional[Sequence[Sequence[int]]]
    given: set[str] = field(default_factory=set)
    f: Findings = field(default_factory=Findings)
    s: _Settings = field(default_factory=_Settings)
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
    # Suggested fixes, settled once every rule stage has run (see _settle): (index in f.items, rule, render).
    pending: list[tuple[int, str, Callable[["Confirm"], str]]] = field(default_factory=list)
    trial: bool = False  # a re-plan that checks a suggestion: it records rule IDs only, no hints


# Whether the answers with these changes pass every rule the suggesting one does not share (see _settle).
Confirm = Callable[..., bool]


def plan(answers: Answers, *, base_dir: Optional[str] = None,
         topology: Optional[Sequence[Sequence[int]]] = None, bundle_dir: Optional[str] = None,
         hints: bool = True) -> Plan:
    """Resolve answers into a Plan; raise WizardError listing every rule the answers break.

    `topology`: for a probed node, the link level between each pair of its GPUs (see LINK_LEVELS:
    1 NVLink/NVSwitch, 2 same PCIe switch, 3 across a PCIe host bridge, 4 across NUMA nodes).
    Tensor-parallel groups (consecutive GPUs) then avoid host-bridge and NUMA crossings whenever a
    layout without them fits, even at the cost of offloading.

    `hints=False`: refusals carry no suggested values (a caller that needs only the rule IDs skips the re-plans
    that confirm each suggestion).

    A pipeline: the rule stages resolve numbers and record findings; if none is an error, the key
    stages write verl's keys in the order verl_config.yaml shows them.

    `bundle_dir`: the folder the bundle will be written to. Data paths written relative (to `base_dir`, the
    current folder by default) are then stored relative to the bundle, in the plan's answers (verl-init.yaml)
    and in every file that names them, so the bundle works wherever it is copied with its data beside it."""
    base = base_dir if base_dir is not None else os.getcwd()
    a = with_absolute_paths(answers, base)
    # hints=False: a caller that only needs the rule IDs skips re-planning each suggested value (see _settle)
    b = _Build(a=a, base=base, topology=topology, given=set(a.model_fields_set), written=answers,
               bundle=os.path.abspath(os.path.join(base, bundle_dir)) if bundle_dir is not None else None,
               trial=not hints)
    for stage in RULE_STAGES:
        stage(b)
    _settle(b)
    b.f.raise_if_errors()
    for stage in KEY_STAGES:
        stage(b)
    b.f.raise_if_errors()  # the overrides stage refuses an override that would split a planned mapping
    return Plan(answers=a.model_copy(update=b.stored) if b.stored else a, base_dir=base, settings=b.s.items,
                facts=b.facts, roles=b.roles, findings=b.f.others,
                memory=b.decision.estimate if b.decision else None, bundle_dir=b.bundle, replaced=b.replaced)


# -- rule stages ------------------------------------------------------------------------------


def _cluster(b: _Build) -> None:
    a = b.a
    b.algo = ALGORITHMS[a.algorithm]
    b.n_gpus = a.nnodes * a.gpus_per_node
    b.facts["n_gpus"] = b.n_gpus
    if a.cluster == "local" and a.nnodes > 1:
        b.f.error("VI301", ("cluster", "nnodes"), f"cluster=local runs on one machine but nnodes={a.nnodes}",
                  "choose cluster=ray, kuberay or slurm for several nodes, or set nnodes=1")
    _accelerator(b)


def _accelerator(b: _Build) -> None:
    """The accelerator's device keys and what runs on it (wizard.verlspec.hardware.ACCELERATORS)."""
    a = b.a
    acc = ACCELERATORS[a.accelerator]
    b.facts["accelerator"] = acc
    if a.rollout_engine not in acc.rollout_engines:
        b.f.error("VI630", ("accelerator", "rollout_engine"),
                  f"rollout_engine={a.rollout_engine} has no build verl 0.9.1 drives on accelerator={a.accelerator} "
                  f"({acc.label}): {acc.why}", f"set rollout_engine={' or '.join(acc.rollout_engines)}")
    if a.train_backend not in acc.train_backends:
        b.f.error("VI631", ("accelerator", "train_backend"),
                  f"train_backend={a.train_backend} is not known to run under verl 0.9.1 on accelerator={a.accelerator} "
                  f"({acc.label}): {acc.why}", f"set train_backend={' or '.join(acc.train_backends)}")
    vendor = accelerator_of_gpu_type(a.gpu_type)
    if vendor is not None and vendor != a.accelerator:
        default = "the default " if "gpu_type" not in b.given else ""
        b.f.error("VI632", ("accelerator", "gpu_type"),
                  f"{default}gpu_type={a.gpu_type} is a {ACCELERATORS[vendor].label} but accelerator={a.accelerator}",
                  f"set gpu_type to a {acc.label} (e.g. {acc.gpu_types[0]}) and gpu_memory_gb to its memory, "
                  f"or accelerator={vendor}")
    if a.accelerator != "nvidia" and a.cluster == "kuberay" and a.image is None:
        b.f.error("VI633", ("accelerator", "image"),
                  f"accelerator={a.accelerator} on KubeRay needs an image: verl's release images "
                  "(verlai/verl:*) are CUDA builds",
                  f"set image to a {acc.label} build of verl {VERL_TARGET} (verl's docker/ folder has its recipes)")


def _samples_and_kl(b: _Build) -> None:
    a, f, algo = b.a, b.f, b.algo
    b.n = a.samples_per_prompt if a.samples_per_prompt is not None else algo.default_n
    b.n_src = "answer" if a.samples_per_prompt is not None else "default"
    if algo.group and b.n < 2:
        # verl 0.9.1 accepts it and runs: a group of one gets mean 0 and std 1 (core_algos.py:313-315 grpo,
        # :619-627 rloo), and DAPO's filter never drops it (replay_buffer.py:312 needs more than one value).
        f.warning("VI401", ("samples_per_prompt", "algorithm"),
                  f"{a.algorithm} with samples_per_prompt={b.n}: verl gives a group of one sample mean 0 and std 1 "
                  "(core_algos.py:313-315), so its advantage is the raw reward with no group baseline"
                  + (" and DAPO's filter never drops it" if algo.filter_groups else ""),
                  f"use samples_per_prompt={algo.default_n} (the default for {a.algorithm}; any value ≥ 2 compares "
                  "responses within a group)")
    if algo.kl == "none":
        if a.kl_coef:
            f.error("VI402", ("kl_coef", "algorithm"),
                    f"{a.algorithm} uses no KL penalty but kl_coef={a.kl_coef}",
                    "remove kl_coef (or set 0), or choose grpo / ppo / rloo to train with a KL term")
        b.kl_coef = 0.0
    else:
        b.kl_coef = a.kl_coef if a.kl_coef is not None else 0.001
    b.use_ref = b.kl_coef > 0
    b.kl_in_loss = b.use_ref and algo.kl == "loss"
    b.kl_in_reward = b.use_ref and algo.kl == "reward"


def _reward(b: _Build) -> None:
    a, f, algo = b.a, b.f, b.algo
    if a.reward == "model" and not a.reward_model:
        f.error("VI501", ("reward", "reward_model"), "reward=model needs reward_model",
                "set reward_model=<hub id or path of a sequence-classification model>, or use reward=rule")
    # VI502 (retired): reward=function without reward_function now uses the bundle's reward/reward_fn.py.
    if a.reward_model and a.reward not in ("model", "genrm"):
        f.error("VI503", ("reward_model", "reward"), f"reward_model is set but reward={a.reward}",
                "set reward=model (a classifier) or reward=genrm (a judge LLM), or remove reward_model")
    if a.reward == "function" and a.reward_function:
        _reward_file_rules(a, resolve_path(a.reward_function.rpartition(":")[0], b.base), f)
    if a.reward_function and a.reward != "function":
        f.error("VI504", ("reward_function", "reward"), f"reward_function is set but reward={a.reward}",
                "set reward=function, or remove reward_function")
    if algo.filter_groups and a.reward == "model":
        f.error("VI505", ("algorithm", "reward"),
                "algorithm=dapo filters groups by reward at sampling time, which reward=model (a colocated reward model) "
                "cannot provide (verl asserts it: trainer_base.py:199)",
                "use reward=rule or reward=function with dapo, or choose grpo")
    b.critic_model = a.critic_model or a.model
    if a.critic_model and not algo.critic:
        f.error("VI404", ("critic_model", "algorithm"),
                f"algorithm={a.algorithm} trains no critic but critic_model={a.critic_model!r} is set",
                "remove critic_model, or choose algorithm=ppo")
    sandbox.rules(b)
    if algo.critic and a.reward == "model" and a.reward_model and a.reward_model == b.critic_model:
        f.warning("VI405", ("critic_model", "reward_model"),
                  "critic and reward model are the same checkpoint; the critic needs a value head, the reward model a classifier",
                  "set critic_model to the policy (default) or another checkpoint")


def _parallelism(b: _Build) -> None:
    a, f = b.a, b.f
    b.sp = sp = a.sequence_parallel
    b.megatron = megatron = a.train_backend == "megatron"
    if megatron and sp > 1:
        f.error("VI306", ("sequence_parallel", "train_backend"),
                f"sequence_parallel={sp} is Ulysses sequence parallel, an FSDP option (train_backend=megatron)",
                "with megatron use megatron_tp / megatron_pp; or set sequence_parallel=1")
    if sp > 1 and (a.gpus_per_node % sp or sp > a.gpus_per_node):
        _refuse(b, "VI302", ("sequence_parallel", "gpus_per_node"),
                f"sequence_parallel={sp} must divide gpus_per_node={a.gpus_per_node} so each group stays in one node",
                _nearest_hint("sequence_parallel", divisors(a.gpus_per_node), sp,
                              f"sequence_parallel must divide gpus_per_node ({a.gpus_per_node})"))
    given_mp = [k for k in MEGATRON_ANSWERS if getattr(a, k) is not None]
    if not megatron and given_mp:
        f.error("VI307", (*given_mp, "train_backend"),
                f"{'/'.join(given_mp)} only apply to train_backend=megatron (got {a.train_backend})",
                "remove them, or set train_backend=megatron")


def _nearest_hint(key: str, valid: Sequence[int], current: int, requirement: str) -> Callable[[Confirm], str]:
    """`nearest valid: key=a or b`, from the values in `valid` nearest `current` that pass when taken."""
    def render(ok: Confirm) -> str:
        values = _confirmed(ok, key, sorted(set(valid), key=lambda v: (abs(v - current), v)))
        return f"nearest valid: {key}={_or(values)}" if values else f"{requirement}; no such value passes every rule here"
    return render


def _memory_fit(b: _Build) -> None:
    """Model shape, parallel layout and memory fit (wizard.planner.memory)."""
    a, f, given, n_gpus = b.a, b.f, b.given, b.n_gpus
    b.seq = seq = a.max_prompt_length + a.max_response_length
    b.dynamic = dynamic = a.dynamic_batch if a.dynamic_batch is not None else not b.megatron
    try:
        b.shape = shape = resolve_shape(a.model, a.model_params_b)
    except (OSError, ValueError) as exc:  # a local folder whose config.json is unreadable or not a model config
        f.error("VI601", ("model",), f"cannot read the model folder's config.json: {exc}",
                "give a model folder with a Hugging Face config.json, or set model_params_b")
        b.shape = shape = None
    # one model size everywhere: the shape's (PLAN.md, the memory estimate and the facts agree)
    b.facts["model_params_b"] = round(shape.params_b, 2) if shape else None
    b.facts["model_size_source"] = shape.source if shape else "unknown"
    if shape is None:
        f.error("VI601", ("model", "model_params_b"),
                f"cannot size {a.model!r}: not in the catalogue, not a local folder, no size in its name",
                "give a local model folder (only config.json is read) or set model_params_b (e.g. 7)")
    if b.algo.critic:
        b.critic_shape = shape if b.critic_model == a.model else resolve_shape(b.critic_model)
        if b.critic_shape is None:
            f.error("VI601", ("critic_model",), f"cannot size critic_model {b.critic_model!r}",
                    "give a local model folder or a catalogue model as critic_model")
    b.tp_options = tp_options = _rollout_tp_options(a, n_gpus, f)
    _rollout_dp_options(a, shape, n_gpus, tp_options, f)
    b.mp_options = mp_options = _megatron_options(a, shape, n_gpus, f) if b.megatron else [rc.MegatronGrid()]
    fit_args = (b.critic_shape, n_gpus, seq, dynamic, b.megatron, b.use_ref, b.n, given)
    decision = None
    if not f.errors and shape is not None:
        topology = b.topology
        if topology is not None:
            fast = [t for t in tp_options if group_level(topology, t) < 3]
            # Megatron's TP groups and expert groups (consecutive ranks) on fast links too, when such layouts fit
            fast_mp = [g for g in mp_options if group_level(topology, g.tp) < 3 and group_level(topology, g.expert_group) < 3]
            if (fast and len(fast) < len(tp_options)) or (fast_mp and len(fast_mp) < len(mp_options)):
                decision = _fit(a, shape, *fit_args, fast or tp_options, fast_mp or mp_options)
        if decision is None:
            decision = _fit(a, shape, *fit_args, tp_options, mp_options)
        if decision is not None and topology is not None and group_level(topology, decision.layout.rollout_tp) >= 3:
            f.warning("VI311", ("rollout_tp",),
                      f"rollout_tp={decision.layout.rollout_tp} groups GPUs across a "
                      f"{LINK_LEVELS[group_level(topology, decision.layout.rollout_tp)]}: slower tensor-parallel traffic",
                      "nothing smaller fits; more GPUs per NVLink domain or a smaller model would avoid it")
        unlimited = None
        if decision is None and a.host_memory_gb is not None:
            unlimited = _fit(a, shape, *fit_args, tp_options, mp_options, host_limit=False)
        if unlimited is not None:
            f.error("VI605", ("host_memory_gb", "offload"),
                    f"fitting the GPUs needs offloaded training state: {unlimited.estimate.host_gb_per_node:.0f} GB of host "
                    f"memory per node, more than 90% of host_memory_gb={a.host_memory_gb:g}",
                    "use more nodes, LoRA, or nodes with more host memory")
        elif decision is None and (culprit := _explicit_culprit(a, shape, *fit_args)) is not None:
            knob, freed = culprit
            f.error("VI606", (knob,),
                    f"{knob}={getattr(a, knob)} does not fit {a.gpus_per_node} × {a.gpu_memory_gb:g} GB GPUs "
                    "(peak memory over the budget in every layout with it)",
                    f"remove it and verl-init chooses {_describe(knob, freed)}")
        elif decision is None:
            f.error("VI602", ("model", "nnodes", "gpus_per_node", "gpu_memory_gb"),
                    f"{shape.name} ({shape.params_b:.1f}B, {a.algorithm}{', LoRA' if a.lora_rank else ''}) does not fit "
                    f"{a.nnodes}×{a.gpus_per_node} × {a.gpu_memory_gb:g} GB GPUs with any layout or offload verl-init can choose",
                    _suggest(a, shape, *fit_args))
    b.decision = decision
    _, b.reward_tp, b.reward_gmu = _reward_engine(a, seq, a.gpus_per_node)
    if decision is not None:
        lay = decision.layout
        b.sp, b.dp = lay.sp, lay.dp
        chosen = (lay.megatron_tp, lay.megatron_pp, lay.megatron_cp, lay.megatron_ep, lay.megatron_etp, lay.megatron_vpp)
        b.grid = next((g for g in mp_options if (g.tp, g.pp, g.cp, g.ep, g.etp, g.vpp) == chosen),
                      rc.MegatronGrid(*chosen)) if b.megatron else rc.MegatronGrid()
        b.rtp, b.gmu, b.offload, b.rdp = lay.rollout_tp, lay.gmu, lay.offload_params, lay.rollout_dp
    else:
        b.grid = mp_options[0] if mp_options else rc.MegatronGrid()
        b.dp = rc.data_parallel_size(n_gpus, megatron=b.megatron, sp=b.sp, tp=b.grid.tp, pp=b.grid.pp,
                                     cp=b.grid.cp) or 0
        b.rtp = tp_options[0] if tp_options else 0
        b.rdp = a.rollout_dp or 1
        b.gmu = a.gpu_memory_utilization or 0.6
        b.offload = bool(a.offload)
    b.mtp, b.mpp = b.grid.tp, b.grid.pp
    _rollout_ep(b)
    b.facts.update(dp=b.dp, sequence_parallel=b.sp, megatron_tp=b.mtp, megatron_pp=b.mpp, megatron_cp=b.grid.cp,
                   megatron_ep=b.grid.ep, megatron_etp=b.grid.etp, megatron_vpp=b.grid.vpp,
                   megatron_first=b.grid.first, megatron_last=b.grid.last,
                   megatron_expert_dp=b.grid.expert_data_parallel(n_gpus) if b.megatron else None,
                   rollout_tp=b.rtp, rollout_dp=b.rdp, rollout_ep=b.rep, moe_experts=shape.experts if shape else 0,
                   offload=b.offload,
                   rollout_replicas=n_gpus // (b.rtp * b.rdp) if b.rtp and n_gpus % (b.rtp * b.rdp) == 0 else 0)


def _ranks(b: _Build) -> rc.Ranks:
    """The layout verl's batch checks read (wizard.verlspec.arithmetic.batch_checks)."""
    micro = b.a.micro_batch_per_gpu if not b.dynamic else None
    return rc.Ranks(dp=b.dp, n_gpus=b.n_gpus, megatron=b.megatron, dynamic=b.dynamic, micro=micro)


def _memory_verdict(b: _Build) -> None:
    """The final plan's memory verdict (wizard.planner.memory): "tight" is a warning naming the phase and by how
    much, as `check` says of the same config (its VI860 warning)."""
    mem = b.decision.estimate if b.decision is not None else None
    if mem is None or b.f.errors or mem.verdict != "tight":
        return
    phase = max(mem.tight_phases, key=lambda p: mem.tight_phases[p])
    high = mem.band(phase)[1]
    given = [k for k in ("gpu_memory_utilization", "max_tokens_per_gpu", "micro_batch_per_gpu", "offload", "rollout_tp")
             if k in b.given]
    b.f.warning("VI607", tuple(given) or ("gpu_memory_gb",),
                f"memory is tight in the {phase} phase: {mem.phase_gib(phase):.1f} GiB per GPU estimated, up to {high:.1f} GiB "
                f"at the band's high end, {high - mem.capacity_gib:.1f} GiB over the {mem.capacity_gib:.1f} GiB card",
                ("lower gpu_memory_utilization or offload" if phase in ("rollout", "weight sync") else
                 "lower the token budget / micro-batch") + (f" (set by you: {', '.join(given)})" if given else ""))


def _batch_ok(b: _Build, p: int, u: int) -> bool:
    """Whether prompts_per_step p and updates_per_step u pass every batch check with this plan's layout."""
    return not rc.batch_checks(p, u, b.n, _ranks(b))



def _batch_hint(b: _Build, keys: Sequence[str], requirement: str, extra: Sequence[tuple[str, Any]] = ()) -> Callable[[Confirm], str]:
    """A hint offering, for each of `keys`, the nearest values that pass every batch check jointly with the other
    answers held (wizard.verlspec.arithmetic.batch_candidates), each confirmed by a re-plan; `extra`: other single
    changes (key, value) offered when they pass too."""
    P, U, n, ranks = b.prompts, b.updates, b.n, _ranks(b)
    min_n = 2 if b.algo.group else 1  # a group of one is legal but degenerate (VI401)

    def render(ok: Confirm) -> str:
        parts = []
        for key in keys:
            values = _confirmed(ok, key, rc.batch_candidates(P, U, n, ranks, key, min_n=min_n))
            if values:
                parts.append(f"{key}={_or(values)}")
        parts += [f"{key}={str(v).lower()}" for key, v in extra if ok(**{key: v})]
        if parts:
            return "nearest valid: " + " or ".join(parts)
        return f"no nearby {' or '.join(keys)} passes every rule with your other answers: {requirement}"
    return render


def _step_batches(b: _Build) -> None:
    """prompts_per_step, updates_per_step and samples_per_prompt against verl's batch arithmetic: exactly verl's
    asserts (wizard.verlspec.arithmetic.batch_checks), with suggestions that pass them all jointly."""
    a, f, n, dp, n_gpus = b.a, b.f, b.n, b.dp, b.n_gpus
    b.prompts, b.updates = P, U = a.prompts_per_step, a.updates_per_step
    if b.dynamic and a.micro_batch_per_gpu is not None:
        f.error("VI206", ("micro_batch_per_gpu", "dynamic_batch"),
                f"micro_batch_per_gpu={a.micro_batch_per_gpu} applies only without dynamic batching "
                f"(dynamic_batch={'true' if a.dynamic_batch else 'unset: on with ' + a.train_backend})",
                "set dynamic_batch=false, or remove micro_batch_per_gpu (set max_tokens_per_gpu instead)")
    if not b.dynamic and a.max_tokens_per_gpu is not None:
        f.error("VI207", ("max_tokens_per_gpu", "dynamic_batch"),
                f"max_tokens_per_gpu={a.max_tokens_per_gpu} applies only with dynamic batching "
                f"(dynamic_batch={'false' if a.dynamic_batch is False else 'unset: off with ' + a.train_backend})",
                "set dynamic_batch=true, or remove max_tokens_per_gpu (set micro_batch_per_gpu instead)")

    checks = rc.batch_checks(P, U, n, _ranks(b))
    b.mini = mini = rc.mini_batch(P, U) or 0
    if "equal_updates" in checks:
        _refuse(b, "VI201", ("updates_per_step", "prompts_per_step"),
                f"updates_per_step={U} does not divide prompts_per_step={P} into equal mini-batches "
                "(verl's ppo_mini_batch_size is prompts_per_step / updates_per_step)",
                _batch_hint(b, ("updates_per_step", "prompts_per_step"),
                            "prompts_per_step must be a multiple of updates_per_step"))
    b.facts.update(prompts_per_step=P, samples_per_prompt=n, updates_per_step=U, mini_batch_prompts=mini,
                   samples_per_step=P * n, samples_per_update=mini * n, dynamic_batch=b.dynamic, seq_len=b.seq)
    if mini and dp:
        if "mini_split" in checks:
            _refuse(b, "VI202", ("prompts_per_step", "samples_per_prompt", "updates_per_step"),
                    f"each update holds prompts_per_step={P} / updates_per_step={U} = {mini} prompts × "
                    f"samples_per_prompt={n} = {mini * n} samples, which {dp} data-parallel ranks cannot share evenly "
                    "(verl's workers assert it: engine_workers.py:264)",
                    _batch_hint(b, ("prompts_per_step", "samples_per_prompt"),
                                f"each update's samples must be a multiple of the {dp} data-parallel ranks"))
        elif "minimal_batch" in checks:
            # verl skips this check under dynamic batching (utils/config.py:103): offer that too when it passes
            extra = [("dynamic_batch", True)] if a.micro_batch_per_gpu is None and a.dynamic_batch is False else []
            _refuse(b, "VI203", ("prompts_per_step", "samples_per_prompt", "dynamic_batch", "nnodes", "gpus_per_node"),
                    f"prompts_per_step={P} × samples_per_prompt={n} = {P * n} samples per step do not divide over the "
                    f"{n_gpus} GPUs: without dynamic batching verl's validate_config refuses it (utils/config.py:115-127)",
                    _batch_hint(b, ("prompts_per_step", "samples_per_prompt"),
                                f"prompts_per_step × samples_per_prompt must be a multiple of the {n_gpus} GPUs", extra))
        else:
            b.per_rank = rc.update_split(mini, n, dp, None).per_rank or 0
    b.facts["samples_per_rank_per_update"] = b.per_rank


def _micro_batches(b: _Build) -> None:
    """Token budgets (dynamic batching) or micro-batch sizes, within what the memory fit allows."""
    a, f, seq, decision = b.a, b.f, b.seq, b.decision
    # the GPUs that share one micro-batch's tokens: verl multiplies the token budget by them (arithmetic.token_split)
    sp = rc.token_split("megatron" if b.megatron else "fsdp", ulysses=b.sp, context_parallel=b.grid.cp)
    fit_tokens = decision.layout.train_tokens if decision else _round_up(3 * seq, 1024)
    fit_lp_tokens = decision.layout.logprob_tokens if decision else 2 * fit_tokens
    if b.dynamic:
        # verl packs max_tokens_per_gpu × SP tokens per micro-batch and splits them over the SP group
        # (verl/workers/engine/utils.py): each GPU holds max_tokens_per_gpu tokens; the layout counts the group's.
        floor_tokens = rc.min_token_budget(seq, sp)
        fit_tokens //= sp
        fit_lp_tokens //= sp
        tokens = a.max_tokens_per_gpu or max(floor_tokens, (fit_tokens // 1024) * 1024, min(fit_tokens, _round_up(floor_tokens, 256)))
        if tokens < floor_tokens:
            recommended = _round_up(3 * seq, 1024) // sp

            def tokens_hint(ok: Confirm, floor: int = floor_tokens, rec: int = recommended) -> str:
                values = _confirmed(ok, "max_tokens_per_gpu", [rec, _round_up(floor, 1024), floor], k=1)
                return (f"set max_tokens_per_gpu={values[0]} (one sequence needs ≥ {floor})" if values else
                        f"max_tokens_per_gpu must be ≥ {floor} (one sequence), but no such budget fits the GPUs' "
                        "memory: shorten max_prompt_length/max_response_length")

            _refuse(b, "VI205", ("max_tokens_per_gpu", "max_prompt_length", "max_response_length"),
                    f"max_tokens_per_gpu={tokens} cannot hold one sequence of max_prompt_length + max_response_length = "
                    f"{seq} tokens" + (f" split over {'megatron_cp' if b.megatron else 'sequence_parallel'}={sp}" if sp > 1 else "")
                    + " (verl asserts it at the first step: seqlen_balancing.py:384)", tokens_hint)
        b.tokens = tokens
        b.logprob_tokens = max(tokens, (fit_lp_tokens // 1024) * 1024)
        b.critic_tokens = tokens
    elif b.per_rank:
        cap = max(1, fit_tokens // seq)
        if a.micro_batch_per_gpu is not None:
            b.micro = a.micro_batch_per_gpu
            if rc.update_split(b.mini, b.n, b.dp, b.micro).micro_ok is False:
                per_rank, micro = b.per_rank, b.micro

                def micro_hint(ok: Confirm) -> str:
                    ordered = sorted(divisors(per_rank), key=lambda d: (abs(d - micro), d))
                    values = _confirmed(ok, "micro_batch_per_gpu", ordered)
                    return (f"nearest valid: micro_batch_per_gpu={_or(values)}" if values else
                            f"micro_batch_per_gpu must divide {per_rank}; remove it and verl-init chooses one")

                _refuse(b, "VI204", ("micro_batch_per_gpu",),
                        f"micro_batch_per_gpu={micro} does not divide the {per_rank} samples each GPU gets per update "
                        "(verl's workers assert it: engine/utils.py:123)", micro_hint)
        else:
            b.micro = largest_divisor_at_most(b.per_rank, cap)
        step = rc.step_batch(b.prompts, b.n, b.dp, b.mini, b.mini if b.algo.critic else None)
        b.logprob_micro = largest_divisor_at_most(step.per_rank, max(b.micro, fit_lp_tokens // seq))
    if decision is not None and not f.errors:
        assert b.shape is not None
        final = replace(decision.layout,
                        train_tokens=b.tokens * sp if b.dynamic else b.micro * seq,
                        logprob_tokens=b.logprob_tokens * sp if b.dynamic else b.logprob_micro * seq)
        memory = estimate(b.shape, final)
        if memory.plan_verdict == "does not fit":
            knob = "max_tokens_per_gpu" if b.dynamic else "micro_batch_per_gpu"
            f.error("VI603", (knob,),
                    f"{knob}={a.max_tokens_per_gpu if b.dynamic else b.micro} needs {memory.peak_gb:.1f} GB per GPU "
                    f"(budget {memory.budget_gb:.1f} GB of {a.gpu_memory_gb:g} GB)",
                    f"lower it to ≤ {decision.layout.train_tokens // sp if b.dynamic else max(1, decision.layout.train_tokens // seq)}, "
                    "or remove it and let verl-init choose")
        b.decision = Decision(final, memory, decision.reasons)
    b.facts.update(micro_batch_per_gpu=b.micro, logprob_micro_batch_per_gpu=b.logprob_micro, max_tokens_per_gpu=b.tokens,
                   logprob_max_tokens_per_gpu=b.logprob_tokens)


def _lora(b: _Build) -> None:
    """LoRA: FSDP through peft (model.lora_rank, ...), Megatron through Megatron-Bridge's PEFT (model.lora.*;
    wizard.verlspec.lora has both blocks and the verl lines that read them)."""
    a, f = b.a, b.f
    b.lora_alpha = a.lora_alpha if a.lora_alpha is not None else 2 * a.lora_rank
    if a.lora_rank and b.megatron and b.shape is not None and b.shape.vision:
        # verl 0.9.1 has lora.type=vlm_lora and freeze_vision_* keys (trainer/config/model/hf_model.yaml:102-161) but
        # no recipe or test of them; lora.type=lora would put adapters on the vision tower's linear layers too
        # (Megatron-Bridge matches target_modules by name), which vLLM does not serve as LoRA.
        f.error("VI406", ("lora_rank", "train_backend", "model"),
                f"lora_rank={a.lora_rank} with train_backend=megatron on the vision-language model {a.model}: verl 0.9.1 "
                "ships no Megatron LoRA recipe for vision-language models (lora.type=vlm_lora is untested there), so "
                "verl-init does not plan it",
                "use train_backend=fsdp or fsdp2 with LoRA on a vision-language model, or lora_rank=0 with megatron")
    if a.lora_rank:
        b.facts["lora"] = {
            "rank": a.lora_rank, "alpha": b.lora_alpha,
            "engine": "Megatron-Bridge PEFT (model.lora.*)" if b.megatron else "peft (model.lora_rank, lora_alpha)",
            "params": (megatron_lora_params(b.shape, a.lora_rank) if b.megatron else b.shape.lora_params(a.lora_rank))
            if b.shape is not None else None,
        }
    if a.lora_rank and a.rollout_engine == "vllm":
        if a.lora_rank > VLLM_LORA_RANKS[-1]:
            _refuse(b, "VI407", ("lora_rank", "rollout_engine"), f"vLLM serves LoRA ranks up to 512 (lora_rank={a.lora_rank})",
                    _nearest_hint("lora_rank", list(VLLM_LORA_RANKS), a.lora_rank,
                                  f"lora_rank must be one of {', '.join(map(str, VLLM_LORA_RANKS))}"))
        elif a.lora_rank not in VLLM_LORA_RANKS:
            up = min(r for r in VLLM_LORA_RANKS if r >= a.lora_rank)
            f.warning("VI408", ("lora_rank",), f"vLLM reserves adapters of rank {up} for lora_rank={a.lora_rank}",
                      f"use one of {', '.join(map(str, VLLM_LORA_RANKS))} to waste no memory")
    if a.lora_alpha is not None and not a.lora_rank:
        f.error("VI409", ("lora_alpha", "lora_rank"), "lora_alpha is set but lora_rank=0 (full fine-tune)",
                "set lora_rank (e.g. 32), or remove lora_alpha")


def _data(b: _Build) -> None:
    a, f, shape, seq = b.a, b.f, b.shape, b.seq
    from wizard.planner import datafacts

    datafacts.paths(b)  # first: the data paths as the bundle names them (b.stored)
    b.train_files, b.val_files = _data_files(a, b.base, f, b.stored)
    datafacts.pods(b)
    if not _enough_rows(b):
        datafacts.overlong_prompts(b, lambda p: _batch_ok(b, p, b.updates))
    if shape is not None and shape.source == "name":
        f.warning("VI308", ("model", "model_params_b"),
                  f"{a.model!r} is not in the catalogue: its shape is estimated from the {shape.params_b:.1f}B in its name",
                  "give a local model folder (config.json is read) for an exact memory estimate")
    if shape is not None and shape.max_pos and seq > shape.max_pos:
        f.error("VI604", ("max_prompt_length", "max_response_length"),
                f"prompt + response = {seq} tokens exceeds the model's context of {shape.max_pos}",
                f"keep max_prompt_length + max_response_length ≤ {shape.max_pos}")


def _enough_rows(b: _Build) -> bool:
    """verl's train dataloader drops the last incomplete batch (drop_last=True) and trains rows // train_batch_size
    steps (trainer/ppo/v1/trainer_base.py): a local file with fewer training rows than prompts_per_step trains 0
    steps, and verl stops with "Train dataloader is empty!". Counted where the file is here; data/prepare_data.py
    holds out max(1, round(rows × val_fraction)) rows for validation (its split_file)."""
    a, P = b.a, b.prompts
    if not P:
        return False
    if a.train_files:
        path, held_out = resolve_path(a.train_files, b.base), 0.0
    elif a.dataset not in BUILTIN_DATASETS:
        path, held_out = resolve_path(a.dataset, b.base), a.val_fraction
    else:
        return False
    if not os.path.isfile(path):
        return False
    from wizard._io import count_file_rows

    rows = count_file_rows(path, P + max(1, round(P * held_out)) + 1)
    if rows is None:
        return False
    val = min(rows - 1, max(1, round(rows * held_out))) if held_out > 0 and rows >= 2 else 0
    train = rows - val
    if train >= P:
        return False
    candidates = [p for p in range(min(train, P), 0, -1) if _batch_ok(b, p, b.updates)]

    def rows_hint(ok: Confirm) -> str:
        fits = _confirmed(ok, "prompts_per_step", candidates, k=1)
        return (f"use prompts_per_step={fits[0]} (the largest that fits and divides evenly), or more data" if fits
                else "use more data")

    _refuse(b, "VI519", ("prompts_per_step", "dataset" if not a.train_files else "train_files"),
            f"{path} gives {train} training row(s)" + (f" ({rows} rows, {val} held out for validation)" if val else "")
            + f", fewer than prompts_per_step={P}: verl drops the incomplete batch and trains 0 steps", rows_hint)
    return True


# -- overrides: verl keys the answers do not model (the escape hatch) ------------------------------

# verl keys an answer sets: an override of one is refused, the answer says it (and the plan re-derives every value
# that depends on it, which an override after the plan cannot). tests/test_overrides_answers.py keeps this table
# in step with the planner: every key a plan takes from an answer is listed.
ANSWER_KEYS: dict[str, str] = {
    "algorithm.adv_estimator": "algorithm",
    "algorithm.use_kl_in_reward": "kl_coef",
    "algorithm.kl_ctrl.kl_coef": "kl_coef",
    "data.train_files": "train_files",
    "data.val_files": "val_files",
    "data.train_batch_size": "prompts_per_step",
    "data.max_prompt_length": "max_prompt_length",
    "data.max_response_length": "max_response_length",
    f"{PRE}.model.path": "model",
    f"{PRE}.model.lora_rank": "lora_rank",
    f"{PRE}.model.lora_alpha": "lora_alpha",
    f"{PRE}.model.lora.rank": "lora_rank",
    f"{PRE}.model.lora.alpha": "lora_alpha",
    f"{PRE}.actor.strategy": "train_backend",
    f"{PRE}.actor.optim.lr": "learning_rate",
    f"{PRE}.actor.use_dynamic_bsz": "dynamic_batch",
    f"{PRE}.actor.ppo_max_token_len_per_gpu": "max_tokens_per_gpu",
    f"{PRE}.actor.ppo_micro_batch_size_per_gpu": "micro_batch_per_gpu",
    f"{PRE}.actor.use_kl_loss": "kl_coef",
    f"{PRE}.actor.kl_loss_coef": "kl_coef",
    f"{PRE}.actor.ulysses_sequence_parallel_size": "sequence_parallel",
    f"{PRE}.actor.fsdp_config.param_offload": "offload",
    f"{PRE}.actor.fsdp_config.optimizer_offload": "offload",
    f"{PRE}.actor.megatron.tensor_model_parallel_size": "megatron_tp",
    f"{PRE}.actor.megatron.pipeline_model_parallel_size": "megatron_pp",
    f"{PRE}.actor.megatron.virtual_pipeline_model_parallel_size": "megatron_vpp",
    f"{PRE}.actor.megatron.context_parallel_size": "megatron_cp",
    f"{PRE}.actor.megatron.expert_model_parallel_size": "megatron_ep",
    f"{PRE}.actor.megatron.expert_tensor_parallel_size": "megatron_etp",
    **{f"{role}.megatron.{key}": answer for role in (f"{PRE}.ref", "critic") for answer, key in (
        ("megatron_tp", "tensor_model_parallel_size"), ("megatron_pp", "pipeline_model_parallel_size"),
        ("megatron_vpp", "virtual_pipeline_model_parallel_size"), ("megatron_cp", "context_parallel_size"),
        ("megatron_ep", "expert_model_parallel_size"), ("megatron_etp", "expert_tensor_parallel_size"))},
    f"{PRE}.actor.megatron.param_offload": "offload",
    f"{PRE}.actor.megatron.optimizer_offload": "offload",
    f"{PRE}.rollout.name": "rollout_engine",
    f"{PRE}.rollout.n": "samples_per_prompt",
    f"{PRE}.rollout.tensor_model_parallel_size": "rollout_tp",
    f"{PRE}.rollout.expert_parallel_size": "rollout_ep",
    f"{PRE}.rollout.data_parallel_size": "rollout_dp",
    f"{PRE}.rollout.gpu_memory_utilization": "gpu_memory_utilization",
    f"{PRE}.rollout.temperature": "temperature",
    "critic.enable": "algorithm",
    "critic.strategy": "train_backend",
    "critic.model.path": "critic_model",
    "critic.optim.lr": "critic_learning_rate",
    "critic.fsdp.param_offload": "offload",
    "critic.fsdp.optimizer_offload": "offload",
    "critic.megatron.param_offload": "offload",
    "critic.megatron.optimizer_offload": "offload",
    "reward.reward_model.enable": "reward",
    "reward.reward_model.model_path": "reward_model",
    "reward.custom_reward_function.path": "reward_function",
    "reward.custom_reward_function.name": "reward_function",
    "trainer.device": "accelerator",
    "trainer.nnodes": "nnodes",
    "trainer.n_gpus_per_node": "gpus_per_node",
    "trainer.logger": "logger",
    "trainer.project_name": "project_name",
    "trainer.experiment_name": "experiment_name",
    "trainer.total_training_steps": "total_steps",
    "trainer.total_epochs": "epochs",
    "trainer.save_freq": "save_freq",
    "trainer.test_freq": "test_freq",
    "trainer.resume_mode": "resume",
    "trainer.resume_from_path": "resume_from_path",
    "trainer.default_local_dir": "checkpoint_dir",
    "trainer.max_actor_ckpt_to_keep": "keep_checkpoints",
    "trainer.max_critic_ckpt_to_keep": "keep_checkpoints",
    f"{PRE}.rollout.multi_turn.enable": "agent",
    f"{PRE}.rollout.multi_turn.max_assistant_turns": "max_turns",
    f"{PRE}.rollout.multi_turn.tool_config_path": "tool",
    f"{PRE}.rollout.agent.default_agent_loop": "agent",
    **sandbox.ANSWER_KEYS,
}
_OVERRIDE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)+")
_OVERRIDE_FORM = "write key=value for a key verl has, +key=value to add one (e.g. +actor_rollout_ref.model.override_config.attention_dropout=0.0)"


def _overrides(b: _Build) -> None:
    """Each override is one Hydra override on a dotted verl key, given once, that no answer sets (VI550, VI551)."""
    seen: dict[str, str] = {}
    for text in b.a.overrides:
        ov = parse_override(text, "overrides")
        if ov is None or ov.op == "~":
            b.f.error("VI550", ("overrides",), f"override {text!r} is not key=value" + (
                      ": removing a key (~key) is not possible in a config file" if ov is not None else ""),
                      _OVERRIDE_FORM if ov is None else "set the key to the value you want instead")
            continue
        if not _OVERRIDE_KEY.fullmatch(ov.key) or ov.key.split(".")[0] in ("hydra", "defaults"):
            b.f.error("VI550", ("overrides",), f"override {text!r}: {ov.key!r} is not a dotted verl config key"
                      + (" (Hydra's own settings and the defaults list belong to verl-init)"
                         if ov.key.split(".")[0] in ("hydra", "defaults") else ""), _OVERRIDE_FORM)
            continue
        if ov.key in seen:
            b.f.error("VI550", ("overrides",), f"override {text!r}: {ov.key} is already set by {seen[ov.key]!r}",
                      "keep one of the two")
            continue
        seen[ov.key] = text
        if ov.has_value and isinstance(ov.value, str) and ov.value == "???":
            b.f.error("VI550", ("overrides",), f"override {text!r}: '???' is OmegaConf's missing value",
                      "write the actual value")
            continue
        field_name = ANSWER_KEYS.get(ov.key)
        if field_name is not None:
            b.f.error("VI551", ("overrides", field_name), f"override {text!r}: {ov.key} is set by the answer "
                      f"{field_name}", f"set {field_name} instead (--set {field_name}=VALUE): the plan then re-derives "
                      "every value that depends on it")


# verl's trainer.resume_mode for each `resume` answer (verl/trainer/config/ppo_trainer.yaml, trainer.resume_mode)
RESUME_MODES = {"auto": "auto", "path": "resume_path", "disable": "disable"}
# verl reads the step from the folder name: int(path.split("global_step_")[-1]) (trainer/ppo/v1/trainer_base.py:876)
_STEP_FOLDER = re.compile(r"global_step_(\d+)$")


def checkpoint_dir(a: Answers) -> str:
    """Where verl writes checkpoints: the answer (`~/` as `${oc.env:HOME}/`, as OmegaConf resolves it on the node
    that runs verl) or verl's default, checkpoints/<project>/<experiment> under the folder verl runs in."""
    if a.checkpoint_dir is not None:
        return "${oc.env:HOME}/" + a.checkpoint_dir[2:] if a.checkpoint_dir.startswith("~/") else a.checkpoint_dir
    return posixpath.join("checkpoints", a.project_name, experiment_name(a))


def _checkpoints(b: _Build) -> None:
    """Resume mode (auto / a path / disable) and where checkpoints land per cluster type (VI555-VI557)."""
    a, f = b.a, b.f
    mode = a.resume or ("path" if a.resume_from_path else "auto")
    b.facts["resume"] = mode
    b.facts["checkpoint_dir"] = where = checkpoint_dir(a)
    if mode == "path" and not a.resume_from_path:
        f.error("VI555", ("resume", "resume_from_path"), "resume=path needs resume_from_path",
                f"set resume_from_path={where}/global_step_N (a saved step), or resume=auto")
    if a.resume_from_path and mode != "path":
        f.error("VI555", ("resume_from_path", "resume"), f"resume_from_path is set but resume={mode}",
                "set resume=path, or remove resume_from_path")
    if a.resume_from_path and not _STEP_FOLDER.search(a.resume_from_path):
        f.error("VI555", ("resume_from_path",), f"verl resumes only from a step folder ending in global_step_N "
                f"(got {a.resume_from_path!r}); it reads the step from that name", "point it at the step folder "
                f"itself, e.g. {where}/global_step_20 (no trailing / and not its actor/ subfolder)")
    if a.resume_from_path and a.cluster == "ray" and not a.resume_from_path.startswith(("/", "~/")):
        f.warning("VI556", ("resume_from_path", "cluster"), f"resume_from_path={a.resume_from_path} resolves inside the "
                  "Ray job's working_dir, a fresh copy of the bundle that holds no checkpoint",
                  "give the absolute path of the step folder on storage every node mounts")
    if a.keep_checkpoints is not None and a.save_freq <= 0:
        f.warning("VI557", ("keep_checkpoints", "save_freq"), f"keep_checkpoints has no effect: save_freq={a.save_freq} "
                  "saves no checkpoint", "set save_freq to a step count, or remove keep_checkpoints")
    if a.save_freq <= 0:
        return
    relative = not where.startswith(("/", "${"))
    if a.cluster == "ray" and relative:
        f.warning("VI556", ("checkpoint_dir", "cluster"), f"checkpoints go to {where} inside the Ray job's working_dir, "
                  "a temporary copy of the bundle on each node: they are lost when the job ends, and a relaunch "
                  "(resume=auto) finds none", "set checkpoint_dir to an absolute path on storage every node mounts, "
                  f"e.g. /mnt/shared/{where}")
    # KubeRay without shared_pvc: checkpoints need checkpoint_pvc, else VI757 refuses the plan (planner/datafacts.py)


# -- vision-language models (VI570-VI574) ---------------------------------------------------------

TEXT_DATASETS = ("gsm8k", "math")  # built-in datasets without images
VISION_ANSWERS = ("image_key", "images_per_prompt", "image_max_pixels", "freeze_vision_tower")
# verl fails a multimodal prompt longer than rollout.prompt_length instead of truncating it (agent_loop.py:352):
# the image tokens and this many text tokens (question, instruction, chat template) must fit max_prompt_length.
MIN_TEXT_TOKENS = 64


def has_images(a: Answers, shape: Optional[ModelShape]) -> bool:
    """A vision-language model on data that may carry images: every dataset but the text-only built-in ones, and any
    train_files of yours (they replace the dataset)."""
    return bool(shape is not None and shape.vision and (a.dataset not in TEXT_DATASETS or a.train_files is not None))


def image_share(a: Answers, shape: Optional[ModelShape], seq: int) -> float:
    """Share of a sequence's tokens that are image tokens, assuming full-length sequences each holding
    images_per_prompt images of image_max_pixels (the memory plan's assumption; PLAN.md states it)."""
    if not has_images(a, shape) or not seq:
        return 0.0
    assert shape is not None
    return min(1.0, a.images_per_prompt * shape.image_tokens(a.image_max_pixels) / seq)


def _vision(b: _Build) -> None:
    """A vision-language model: image tokens within max_prompt_length, freeze_vision_tower, image answers on a
    text model, image data on a text model."""
    a, f, shape = b.a, b.f, b.shape
    if shape is None:
        return
    hub = dataprep.HUB.get(a.dataset)
    if not shape.vision:
        if hub is not None and hub.images:
            f.error("VI572", ("dataset", "model"), f"dataset={a.dataset} has images but {a.model} is a text model "
                    "(no vision_config in the catalogue or its config.json)",
                    "choose a vision-language model, e.g. model=Qwen/Qwen2.5-VL-3B-Instruct")
        given = [k for k in VISION_ANSWERS if k in b.given]
        if given:
            f.warning("VI573", tuple(given), f"{', '.join(given)} only apply to a vision-language model; {a.model} is "
                      "a text model, so they are ignored", "remove them, or choose a vision-language model")
        return
    per_image = shape.image_tokens(a.image_max_pixels)
    b.facts["vision"] = {
        "tower_params_b": round(shape.vision_params() / 1e9, 3),
        "tower": f"{shape.vision}: {shape.vision_depth} blocks × hidden {shape.vision_hidden}, MLP {shape.vision_intermediate}",
        "factor": shape.vision_patch * shape.vision_merge,
        "images": has_images(a, shape),
        "image_tokens_per_image": per_image,
        "image_tokens_per_prompt": a.images_per_prompt * per_image,
        "image_share": round(image_share(a, shape, b.seq), 4),
        "act_mb_per_image_token": round(shape.vision_act_bytes_per_token(True) / 1e6, 3),
    }
    need = a.images_per_prompt * per_image + MIN_TEXT_TOKENS
    if has_images(a, shape) and a.max_prompt_length < need:
        most_pixels = max(0, (a.max_prompt_length - MIN_TEXT_TOKENS) // a.images_per_prompt) * (shape.vision_patch * shape.vision_merge) ** 2
        f.error("VI570", ("max_prompt_length", "image_max_pixels", "images_per_prompt"),
                f"max_prompt_length={a.max_prompt_length} cannot hold {a.images_per_prompt} image(s) of "
                f"{per_image} tokens (image_max_pixels={a.image_max_pixels}) and {MIN_TEXT_TOKENS} text tokens: verl "
                "drops such prompts at load time and fails one at rollout (agent_loop.py:352)",
                f"set max_prompt_length={_round_up(need, 256)}" + (
                    f", or image_max_pixels={most_pixels}" if most_pixels >= 3136 else ""))
    if a.freeze_vision_tower:
        f.warning("VI571", ("freeze_vision_tower",),
                  "verl 0.9.1 declares actor.freeze_vision_tower (workers/config/actor.py:161) but no FSDP worker reads "
                  "it: the vision tower is trained anyway, and the memory plan counts its gradients and optimizer states",
                  "keep it for a later verl that honours it, or remove it; freezing needs a verl change")


RULE_STAGES = (_cluster, _samples_and_kl, _reward, genrm.rules, _parallelism, _memory_fit, _step_batches, _micro_batches,
               _memory_verdict, _lora, _data, _vision, _checkpoints, agent.rules, _overrides)


# -- key stages: verl's keys, in the order they appear in verl_config.yaml ---------------------


def _algorithm_keys(b: _Build) -> None:
    a, s, given, algo = b.a, b.s, b.given, b.algo
    s.set("algorithm.adv_estimator", algo.adv_estimator, f"{a.algorithm}: {algo.summary}"
          + ("" if b.use_ref or algo.kl == "none" else "; kl_coef=0 turns the KL term off"))
    s.set("algorithm.use_kl_in_reward", b.kl_in_reward,
          "KL penalty folded into the reward" if b.kl_in_reward else
          ("KL is a loss term instead (never both)" if b.kl_in_loss else "no KL penalty"))
    if b.kl_in_reward:
        s.set("algorithm.kl_penalty", algo.kl_penalty, "per-token KL estimate subtracted from the reward")
        s.set("algorithm.kl_ctrl.kl_coef", b.kl_coef, _given("kl_coef", given, "KL coefficient"), _src("kl_coef", given))
    if algo.filter_groups:
        # verl 0.9.1's V1 trainer ignores max_num_gen_batches (it logs so: trainer/ppo/v1/trainer_base.py:205-210)
        s.set("algorithm.filter_groups.enable", True,
              "DAPO: drop groups whose samples all got the same reward; verl 0.9.1 samples more prompts until the step "
              "is full, with no limit (it ignores max_num_gen_batches)")
        s.set("algorithm.filter_groups.metric", "reward", "filter on the canonical reward (every scorer returns it)")


def _data_keys(b: _Build) -> None:
    a, s, given = b.a, b.s, b.given
    s.set("data.train_files", *b.train_files)
    s.set("data.val_files", *b.val_files)
    s.set("data.train_batch_size", b.prompts, "prompts_per_step: prompts drawn per step", _src("prompts_per_step", given))
    s.set("data.max_prompt_length", a.max_prompt_length, "max_prompt_length", _src("max_prompt_length", given))
    s.set("data.max_response_length", a.max_response_length, "max_response_length", _src("max_response_length", given))
    s.set("data.filter_overlong_prompts", True,
          "drop prompts longer than max_prompt_length at load time instead of truncating them mid-run")


def _model_keys(b: _Build) -> None:
    a, s, given = b.a, b.s, b.given
    s.set(f"{PRE}.model.path", _model_path(a.model, b.base), "model", _src("model", given))
    if a.lora_rank and b.megatron:
        # the Megatron engine reads model.lora.*, never the flat FSDP keys (wizard.verlspec.lora)
        s.set(f"{PRE}.model.lora.rank", a.lora_rank,
              "LoRA adapters instead of full weights, through Megatron-Bridge's PEFT (megatron_peft.py reads model.lora, "
              "not model.lora_rank)", "answer")
        s.set(f"{PRE}.model.lora.alpha", b.lora_alpha, _given("lora_alpha", given, "twice the rank"), _src("lora_alpha", given))
        s.set(f"{PRE}.model.lora.target_modules", list(MEGATRON_TARGET_MODULES),
              "adapters on every linear layer (Megatron's fused QKV, attention output, MLP fc1/fc2; verl's default)")
        s.set(f"{PRE}.model.lora.merge", False,
              "adapters synced to the rollout engine as a LoRA adapter each step; the base weights are never re-sent")
    elif a.lora_rank:
        s.set(f"{PRE}.model.lora_rank", a.lora_rank, "LoRA adapters instead of full weights", "answer")
        s.set(f"{PRE}.model.lora_alpha", b.lora_alpha, _given("lora_alpha", given, "twice the rank"), _src("lora_alpha", given))
        s.set(f"{PRE}.model.target_modules", FSDP_TARGET_MODULES, "adapters on every linear layer")
    s.set(f"{PRE}.model.use_remove_padding", True, "sequence packing: no compute spent on padding")
    if not b.megatron:  # only the FSDP/VeOMni engines read it (wizard/check/data/verl_readers.json, check VI890)
        s.set(f"{PRE}.model.enable_gradient_checkpointing", True, "recompute activations in backward to save memory")


def _offload_reason(b: _Build) -> str:
    return ("offload (your answer)" if "offload" in b.given else
            "training state does not fit beside the rollout engine: kept in host memory between uses" if b.offload
            else "fits on the GPU: no offload needed")


def _actor_keys(b: _Build) -> None:
    a, s, given, algo, seq, sp = b.a, b.s, b.given, b.algo, b.seq, b.sp
    lr = a.learning_rate if a.learning_rate is not None else (3e-5 if a.lora_rank else 1e-6)
    if a.train_backend == "fsdp2":
        s.set(f"{PRE}.actor.strategy", "fsdp2", "train_backend=fsdp2 (reference follows the actor)", "answer")
    s.set(f"{PRE}.actor.optim.lr", lr,
          _given("learning_rate", given, "1e-6 for full fine-tuning, 3e-5 for LoRA adapters"), _src("learning_rate", given))
    s.set(f"{PRE}.actor.ppo_mini_batch_size", b.mini,
          f"prompts_per_step / updates_per_step = {b.prompts} / {b.updates}: {b.updates} optimizer updates per step, "
          "each sample used once")
    if b.dynamic:
        s.set(f"{PRE}.actor.use_dynamic_bsz", True,
              _given("dynamic_batch", given, "micro-batches packed by token budget (fsdp default)"), _src("dynamic_batch", given))
        s.set(f"{PRE}.actor.ppo_max_token_len_per_gpu", b.tokens,
              _given("max_tokens_per_gpu", given, f"3 × (prompt + response) = 3 × {seq}, rounded to 1024"),
              _src("max_tokens_per_gpu", given))
    else:
        s.set(f"{PRE}.actor.use_dynamic_bsz", False,
              _given("dynamic_batch", given, "megatron plans use fixed micro-batches"), _src("dynamic_batch", given))
        s.set(f"{PRE}.actor.ppo_micro_batch_size_per_gpu", b.micro,
              _given("micro_batch_per_gpu", given,
                     f"largest divisor of the {b.per_rank} samples per GPU per update within ~{MICRO_TOKEN_BUDGET} tokens"),
              _src("micro_batch_per_gpu", given))
    s.set(f"{PRE}.actor.use_kl_loss", b.kl_in_loss,
          "KL to the reference as a loss term" if b.kl_in_loss else "no KL loss term")
    if b.kl_in_loss:
        s.set(f"{PRE}.actor.kl_loss_coef", b.kl_coef, _given("kl_coef", given, "KL coefficient"), _src("kl_coef", given))
        s.set(f"{PRE}.actor.kl_loss_type", algo.kl_loss_type, f"{a.algorithm}'s usual KL estimator")
    s.set(f"{PRE}.actor.entropy_coeff", 0, "no entropy bonus (verl's recipes)")
    if algo.loss_agg_mode:
        s.set(f"{PRE}.actor.loss_agg_mode", algo.loss_agg_mode, f"{a.algorithm}'s loss aggregation")
    if algo.clip_low is not None:
        s.set(f"{PRE}.actor.clip_ratio_low", algo.clip_low, f"{a.algorithm}'s lower clip range")
        s.set(f"{PRE}.actor.clip_ratio_high", algo.clip_high, f"{a.algorithm}'s upper clip range")
    if algo.loss_mode != "vanilla":
        s.set(f"{PRE}.actor.policy_loss.loss_mode", algo.loss_mode, f"{a.algorithm}'s policy loss")
    off_reason = _offload_reason(b)
    if not b.megatron:
        s.set(f"{PRE}.actor.ulysses_sequence_parallel_size", sp,
              _given("sequence_parallel", given,
                     "no sequence parallelism needed: one sequence's activations fit a GPU" if sp == 1 else
                     f"one {seq}-token sequence's activations only fit split over {sp} GPUs (divides the attention and KV heads)"),
              _src("sequence_parallel", given))
        s.set(f"{PRE}.actor.fsdp_config.param_offload", b.offload, off_reason, _src("offload", given))
        s.set(f"{PRE}.actor.fsdp_config.optimizer_offload", b.offload, off_reason, _src("offload", given))
    else:
        _megatron_layout_keys(b, f"{PRE}.actor.megatron")
        _uneven_keys(b, f"{PRE}.actor.megatron")
        s.set(f"{PRE}.actor.megatron.param_offload", b.offload, off_reason, _src("offload", given))
        s.set(f"{PRE}.actor.megatron.optimizer_offload", b.offload, off_reason, _src("offload", given))
        if a.lora_rank:
            s.set(f"{PRE}.actor.megatron.use_mbridge", True,
                  "LoRA needs Megatron-Bridge (workers/config/megatron_peft.py:26 asserts it)")
            s.set(f"{PRE}.actor.megatron.vanilla_mbridge", False,
                  "LoRA needs the Megatron-Bridge provider, which the legacy mbridge does not build "
                  "(megatron/transformer_impl.py:326-348)")


def _megatron_reasons(b: _Build) -> dict[str, str]:
    """Why each of the actor's Megatron layout sizes (wizard.verlspec.arithmetic.MEGATRON_CHECKS for the checks)."""
    g, shape, n_gpus, gpn = b.grid, b.shape, b.n_gpus, b.a.gpus_per_node
    exact = _exact(shape)
    moe = bool(shape is not None and shape.experts)
    heads = f"divides the {shape.heads} attention and {shape.kv_heads} KV heads; " if exact and shape else ""
    layers = ""
    if exact and shape and g.pp > 1:
        layers = (f" ({shape.layers} layers: {g.first} in the first stage, {g.last} in the last, at most "
                  f"{g.stage_layers(shape.layers)} per stage)" if g.first is not None else
                  f" ({shape.layers} layers, {shape.layers // (g.pp * (g.vpp or 1))} per "
                  f"{'virtual stage' if g.vpp else 'stage'})")
    out = {
        "megatron_tp": f"{g.tp}: {heads}with PP={g.pp}" + (f", CP={g.cp}" if g.cp > 1 else "")
                       + ", the least model parallelism whose training state fits"
                       + (f"; each TP group is {g.tp} consecutive GPUs inside one node (NVLink)" if g.tp > 1 else ""),
        "megatron_pp": f"{g.pp}: " + ("no pipeline stages needed" if g.pp == 1 else
                                      f"pipeline stages needed beside TP={g.tp} for the training state to fit{layers}"),
        "megatron_vpp": (f"{g.vpp} virtual stages per pipeline rank (interleaved schedule){layers}" if g.vpp else
                         "null: no interleaved pipeline schedule"),
        "megatron_cp": ("1: no context parallel, one sequence's activations fit beside the rest" if g.cp == 1 else
                        f"{g.cp}: each {b.seq}-token sequence is split over {g.cp} GPUs; its activations fit no other way"),
        "megatron_ep": "1: a dense model has no experts to spread",
        "megatron_etp": "null: a dense model (megatron-core's default, ETP = TP, applies to no expert)",
    }
    if moe and shape is not None:
        edp = g.expert_data_parallel(n_gpus)
        out["megatron_ep"] = (f"{g.ep}: the {shape.experts} experts of each MoE layer spread over {g.ep} GPUs "
                              f"({shape.experts // g.ep} whole experts each); the expert group ETP×EP = {g.expert_group} "
                              f"consecutive GPUs sits inside one node of {gpn} (token all-to-all over NVLink); "
                              f"expert data parallel {edp} (world {n_gpus} / ETP×EP×PP {g.expert_grid})"
                              + ("; the least expert parallelism whose training state fits" if g.ep > 1 else ""))
        out["megatron_etp"] = (f"{g.expert_tp}: " + ("whole experts on each GPU: the small expert matrices are not split "
                                                     "by tensor parallel (verl's MoE examples run ETP=1)"
                                                     if g.expert_tp == 1 else f"each expert split over {g.expert_tp} GPUs"))
    return out


def _uneven_keys(b: _Build, prefix: str, reason: str = "") -> None:
    """An uneven pipeline split (layers that do not divide over PP): the first and last stages' layers, in the
    engine's override_transformer_config (megatron-core's TransformerConfig fields; verl passes the mapping through,
    workers/engine/megatron/transformer_impl.py _build_tf_config)."""
    g, shape = b.grid, b.shape
    if g.first is None and g.last is None or shape is None:
        return
    middle = (shape.layers - (g.first or 0) - (g.last or 0)) // max(g.pp - 2, 1) if g.pp > 2 else 0
    why = reason or (f"the {shape.layers} layers do not split evenly over PP={g.pp}: {g.first} + "
                     + (f"{g.pp - 2} × {middle} + " if g.pp > 2 else "") + f"{g.last} layers (as verl's 235B example)")
    base = f"{prefix}.override_transformer_config"
    b.s.set(f"{base}.num_layers_in_first_pipeline_stage", g.first, why)
    b.s.set(f"{base}.num_layers_in_last_pipeline_stage", g.last, why)


def _megatron_layout_keys(b: _Build, prefix: str, same_as: str = "") -> None:
    """The six Megatron layout keys under `prefix` (the actor's, the reference's, the critic's): TP, PP, VPP, CP, EP
    and ETP. `same_as`: the reason a role other than the actor takes the actor's layout."""
    g, given, s = b.grid, b.given, b.s
    reasons = _megatron_reasons(b)
    values = {"megatron_tp": g.tp, "megatron_pp": g.pp, "megatron_vpp": g.vpp, "megatron_cp": g.cp,
              "megatron_ep": g.ep, "megatron_etp": g.etp}
    for answer, value in values.items():
        key = f"{prefix}.{MEGATRON_KEYS[answer]}"
        if same_as:
            s.set(key, value, same_as)
        else:
            s.set(key, value, _given(answer, given, reasons[answer]), _src(answer, given))


# verl's engine key of each Megatron layout answer (trainer/config/engine/megatron.yaml)
MEGATRON_KEYS = {"megatron_tp": "tensor_model_parallel_size", "megatron_pp": "pipeline_model_parallel_size",
                 "megatron_vpp": "virtual_pipeline_model_parallel_size", "megatron_cp": "context_parallel_size",
                 "megatron_ep": "expert_model_parallel_size", "megatron_etp": "expert_tensor_parallel_size"}
SAME_PROCESS = ("the actor's layout: the reference runs in the actor's processes, whose Megatron process groups are set "
                "once (verl workers/engine/megatron/transformer_impl.py:271)")


def _rollout_keys(b: _Build) -> None:
    a, s, given, seq, rtp, gmu, shape = b.a, b.s, b.given, b.seq, b.rtp, b.gmu, b.shape
    mem = b.decision.estimate if b.decision else None
    s.set(f"{PRE}.rollout.name", a.rollout_engine, "rollout_engine", _src("rollout_engine", given))
    s.set(f"{PRE}.rollout.n", b.n,
          _given("samples_per_prompt", given, f"{a.algorithm}'s usual group size"), b.n_src)
    weights_gb = (rollout_weight_bytes(shape, b.decision.layout) if b.decision else 2 * shape.params / rtp) / 1e9 \
        if shape else 0.0
    s.set(f"{PRE}.rollout.tensor_model_parallel_size", rtp,
          _given("rollout_tp", given,
                 f"{rtp}: smallest split inside a node whose reservation holds the bf16 weights ({weights_gb:.1f} GB per GPU) "
                 f"and a KV cache for {mem.kv_seqs:.0f} full sequences" if mem else f"{rtp}"),
          _src("rollout_tp", given))
    if shape is not None and shape.experts or b.rdp > 1:
        s.set(f"{PRE}.rollout.data_parallel_size", b.rdp,
              _given("rollout_dp", given,
                     f"{b.rdp}: the least rollout data parallel whose expert split (EP = TP {rtp} × DP {b.rdp} = "
                     f"{rtp * b.rdp} GPUs per replica) holds the bf16 weights in each engine's reservation "
                     "(replica = TP × DP GPUs filling whole nodes: replica.py:108, vllm_async_server.py:384)"
                     if b.rdp > 1 else "1: one engine per replica; the experts fit its TP GPUs"), _src("rollout_dp", given))
    if shape is not None and shape.experts or b.rep > 1:
        s.set(f"{PRE}.rollout.expert_parallel_size", b.rep,
              _given("rollout_ep", given,
                     f"{b.rep}: whole experts spread over the replica's {rtp * b.rdp} GPUs (vLLM enable_expert_parallel); verl "
                     "requires EP = TP × DP (workers/config/rollout.py:294)" if b.rep > 1 else
                     "1: one GPU per replica holds every expert"), _src("rollout_ep", given))
    s.set(f"{PRE}.rollout.gpu_memory_utilization", gmu,
          _given("gpu_memory_utilization", given,
                 f"{gmu:g} × {a.gpu_memory_gb:g} GB for the engine; what training keeps resident "
                 f"({mem.gb('rollout', 'actor', 'resident (not offloaded)'):.1f} GB actor) and a {int(mem.margin * 100)}% margin fit beside it"
                 if mem else f"{gmu:g}"),
          _src("gpu_memory_utilization", given))
    if a.rollout_engine != "sglang":  # SGLang never reads it (wizard/check/data/verl_readers.json, check VI890)
        s.set(f"{PRE}.rollout.max_num_batched_tokens", max(8192, seq),
              f"max(8192, prompt + response = {seq}): one full sequence fits a prefill batch")
    s.set(f"{PRE}.rollout.temperature", a.temperature, "temperature", _src("temperature", given))
    if a.lora_rank:
        s.set(f"{PRE}.rollout.load_format", "safetensors",
              "LoRA: the engine loads the real base weights from the model, only the adapters are synced (verl marks "
              "the base as synced unless load_format is dummy: engine_workers.py:673)" if b.megatron else
              "LoRA: the engine loads real base weights, adapters synced")
    if b.dynamic:
        s.set(f"{PRE}.rollout.log_prob_max_token_len_per_gpu", b.logprob_tokens,
              "2 × the training budget: forward-only passes keep no activations")
    else:
        per_rank_step = rc.step_batch(b.prompts, b.n, b.dp, b.mini).per_rank if b.dp else 0
        s.set(f"{PRE}.rollout.log_prob_micro_batch_size_per_gpu", b.logprob_micro,
              f"divides the {per_rank_step} samples per GPU per step; forward-only, so up to 2× the training micro-batch")


def _ref_keys(b: _Build) -> None:
    a, s = b.a, b.s
    if not b.use_ref:
        return
    b.roles["ref"] = "frozen copy of the policy for the KL term" + (" (inside the actor: LoRA base weights)" if a.lora_rank else "")
    if b.dynamic:
        s.set(f"{PRE}.ref.log_prob_max_token_len_per_gpu", b.logprob_tokens, "same budget as the actor's log-prob pass")
    else:
        s.set(f"{PRE}.ref.log_prob_micro_batch_size_per_gpu", b.logprob_micro, "same as the actor's log-prob pass")
    if b.megatron:
        _megatron_layout_keys(b, f"{PRE}.ref.megatron", SAME_PROCESS)
    if not b.megatron and not a.lora_rank:
        s.set(f"{PRE}.ref.fsdp_config.param_offload", True,
              "the reference only runs forward passes: keep its weights in host memory between them")


def _critic_keys(b: _Build) -> None:
    a, s, given = b.a, b.s, b.given
    if not b.algo.critic:
        s.set("critic.enable", False, f"{a.algorithm} needs no critic")
        return
    b.roles["critic"] = f"value model initialised from {b.critic_model}"
    s.set("critic.enable", True, "ppo: GAE needs a critic (never inferred silently)")
    if a.train_backend == "fsdp2":
        s.set("critic.strategy", "fsdp2", "train_backend=fsdp2", "answer")
    s.set("critic.model.path", _model_path(b.critic_model, b.base),
          _given("critic_model", given, "initialised from the policy model"), _src("critic_model", given))
    s.set("critic.optim.lr", a.critic_learning_rate or 1e-5,
          _given("critic_learning_rate", given, "critics learn faster than the policy"), _src("critic_learning_rate", given))
    if b.dynamic:
        # the V1 trainer sizes the critic's engine from ppo_infer_max_token_len_per_gpu only (trainer_base.py:267-268)
        s.set("critic.ppo_infer_max_token_len_per_gpu", b.critic_tokens,
              "the actor's token budget: the memory estimate's critic update")
    else:
        s.set("critic.ppo_micro_batch_size_per_gpu", b.micro, "same split as the actor")
    critic_off = "same as the actor: the memory estimate offloads both or neither"
    if not b.megatron:
        # verl 0.9 builds the critic's engine from critic.fsdp; critic.ulysses_sequence_parallel_size is
        # deprecated and not copied there (unlike the actor's), but validate() still reads it: set both.
        s.set("critic.fsdp.ulysses_sequence_parallel_size", b.sp, "same as the actor")
        s.set("critic.ulysses_sequence_parallel_size", b.sp, "same as the actor (read by verl's validate())")
        s.set("critic.fsdp.param_offload", b.offload, critic_off, _src("offload", given))
        s.set("critic.fsdp.optimizer_offload", b.offload, critic_off, _src("offload", given))
    else:
        _megatron_layout_keys(b, "critic.megatron", "same layout as the actor")
        critic = b.critic_shape
        if b.grid.ep > 1 and critic is not None and not critic.experts:
            # a dense critic beside a MoE actor: megatron-core refuses EP > 1 without experts (transformer_config.py:808)
            s.set("critic.megatron.expert_model_parallel_size", 1, "a dense critic has no experts to spread")
            s.set("critic.megatron.expert_tensor_parallel_size", None, "a dense critic has no experts")
        if critic is None or critic.layers == (b.shape.layers if b.shape else 0):
            _uneven_keys(b, "critic.megatron", "same pipeline split as the actor")
        s.set("critic.megatron.param_offload", b.offload, critic_off, _src("offload", given))
        s.set("critic.megatron.optimizer_offload", b.offload, critic_off, _src("offload", given))


# The reward model's engine reservation when its model cannot be sized: a share of each GPU beside the policy's
# engine. vLLM refuses to start when util × GPU memory is not free, so policy + reward reservations + what training
# keeps resident must stay under the GPU (tests/test_algorithms.py writes that sum out).
REWARD_MODEL_GMU = 0.2


def _reward_keys(b: _Build) -> None:
    a, s, algo, roles = b.a, b.s, b.algo, b.roles
    s.set("reward.reward_manager.name", algo.reward_manager,
          "DAPO's reward manager" if algo.reward_manager == "dapo" else "one scorer call per sample")
    if a.reward == "function" and a.reward_function:
        path, _, name = a.reward_function.rpartition(":")
        s.set("reward.custom_reward_function.path", resolve_path(path, b.base), "reward_function", "answer")
        s.set("reward.custom_reward_function.name", name, "reward_function", "answer")
        roles["reward"] = f"custom function {name} in {path}"
    elif a.reward == "function":
        prep = dataprep.resolve(a, b.base)
        s.set("reward.custom_reward_function.path", dataprep.BUNDLE_REWARD_FN,
              f"verl-init's scorer for answer_format={prep.answer_format}, shipped in the bundle "
              "(relative: run.sh starts verl in the bundle folder)")
        s.set("reward.custom_reward_function.name", dataprep.BUNDLE_REWARD_NAME, "the scorer's function in reward_fn.py")
        roles["reward"] = (f"{dataprep.BUNDLE_REWARD_FN} (answer_format={prep.answer_format}): "
                           f"{dataprep.FORMAT_WORDS[prep.answer_format]}")
    elif a.reward == "model" and a.reward_model:
        s.set("reward.reward_model.enable", True, "reward=model")
        s.set("reward.reward_model.model_path", _model_path(a.reward_model, b.base), "reward_model", "answer")
        s.set("reward.reward_model.rollout.name", a.rollout_engine, "served by the same engine as the rollout")
        s.set("reward.reward_model.rollout.tensor_model_parallel_size", b.reward_tp,
              "smallest split whose engine share stays ≤ 0.3 of the card")
        s.set("reward.reward_model.rollout.gpu_memory_utilization", b.reward_gmu,
              "the reward model's bf16 weights and KV cache for 8 full sequences, beside the policy's engine")
        s.set("reward.reward_model.rollout.free_cache_engine", True,
              "the reward model's engine sleeps beside the policy's and wakes for its own turn after rollout "
              "(reward_loop.py compute_rm_score), as the memory plan counts it")
        roles["reward"] = f"reward model {a.reward_model}"
    elif a.reward == "sandbox":
        sandbox.reward_keys(b)
    else:
        roles["reward"] = "verl's rule-based scorer chosen by each row's data_source"


def _trainer_keys(b: _Build) -> None:
    a, s, given = b.a, b.s, b.given
    if a.accelerator != "nvidia":
        acc = ACCELERATORS[a.accelerator]
        s.set("trainer.device", acc.device,
              "accelerator=amd: ROCm PyTorch names its devices cuda (verl plugin/platform/platform_rocm.py:25)"
              if a.accelerator == "amd" else
              "accelerator=ascend: verl's NPU platform device (plugin/platform/platform_npu.py:47)", "answer")
        # as verl's Ascend CI runs (tests/special_npu/nightly_ci_ascend/*_npu.sh); the Megatron engine never reads it
        if a.accelerator == "ascend" and not b.megatron:
            for role in ("actor", "ref"):
                s.set(f"actor_rollout_ref.{role}.use_torch_compile", False,
                      "accelerator=ascend: torch.compile off, as verl's own Ascend runs set it")
    s.set("trainer.nnodes", a.nnodes, "nnodes", _src("nnodes", given))
    s.set("trainer.n_gpus_per_node", a.gpus_per_node, "gpus_per_node", _src("gpus_per_node", given))
    s.set("trainer.logger", list(a.logger), "logger", _src("logger", given))
    s.set("trainer.project_name", a.project_name, "project_name", _src("project_name", given))
    s.set("trainer.experiment_name", experiment_name(a), _given("experiment_name", given, "algorithm-model"),
          _src("experiment_name", given))
    if a.total_steps is not None:
        s.set("trainer.total_training_steps", a.total_steps, "total_steps", "answer")
    else:
        s.set("trainer.total_epochs", a.epochs or 15, _given("epochs", given, "15 passes, as verl's GSM8K recipes"),
              _src("epochs", given))
    s.set("trainer.save_freq", a.save_freq, "save_freq", _src("save_freq", given))
    s.set("trainer.test_freq", a.test_freq, "test_freq", _src("test_freq", given))
    mode, where = b.facts["resume"], b.facts["checkpoint_dir"]
    s.set("trainer.resume_mode", RESUME_MODES[mode],
          "resume=path: start from resume_from_path" if mode == "path" else
          "resume=disable: every launch starts over" if mode == "disable" else
          _given("resume", given, f"a relaunch continues from the newest checkpoint in {where} (or starts fresh)"),
          "answer" if "resume" in given or mode == "path" else "default")
    if a.resume_from_path:
        s.set("trainer.resume_from_path", a.resume_from_path,
              "resume_from_path (relative: from the bundle folder, where verl runs)", "answer")
    if a.checkpoint_dir is not None:
        s.set("trainer.default_local_dir", where, "checkpoint_dir", "answer")
    if a.keep_checkpoints is not None:
        s.set("trainer.max_actor_ckpt_to_keep", a.keep_checkpoints, "keep_checkpoints: older actor checkpoints deleted",
              "answer")
        if b.algo.critic:
            s.set("trainer.max_critic_ckpt_to_keep", a.keep_checkpoints, "keep_checkpoints: the critic's too", "answer")


def _override_keys(b: _Build) -> None:
    """The answers' overrides, after every planned key: a planned value they replace is named (VI553); a mapping
    the plan sets keys inside, or a key inside a planned value, is refused (VI552). `verl-init` (the CLI) then
    checks the final config with `verl-init check`'s rules and refuses any error (wizard.check.planned)."""
    s, items = b.s, b.s.items
    applied: list[dict[str, str]] = []
    for text in b.a.overrides:
        ov = parse_override(text, "overrides")
        if ov is None:
            continue  # refused by the _overrides stage
        key = ov.key
        inside = [k for k in items if k.startswith(key + ".")]
        above = [k for k in items if key.startswith(k + ".")]
        if inside or above:
            clash = (inside or above)[0]
            b.f.error("VI552", ("overrides",), f"override {text!r}: " + (
                f"{key} is a mapping the plan sets keys inside ({clash})" if inside else
                f"{key} lies inside {clash}, which the plan sets as one value"),
                f"override the keys inside one by one, e.g. {clash}=VALUE" if inside else
                f"set {ANSWER_KEYS[clash]} instead (--set {ANSWER_KEYS[clash]}=VALUE)" if clash in ANSWER_KEYS else
                f"override {clash} as a whole: {clash}=VALUE")
            continue
        old = items.get(key)
        planned = format_value(old.value) if old is not None else ""
        if old is not None:
            b.replaced[key] = old
            b.f.warning("VI553", ("overrides",), f"override {text!r} replaces the planned value {planned} ({old.reason})",
                        "values the plan derived from the planned one are not re-derived: verl-init checks the final "
                        "config with `verl-init check`'s rules before writing it")
        s.set(key, ov.value, f"override {text} (your answer)"
              + (f"; the plan chose {planned}: {old.reason}" if old is not None else ""), "override")
        applied.append({"text": text, "key": key, "planned": planned, "reason": old.reason if old else ""})
    b.facts["overrides"] = applied


def _roles(b: _Build) -> None:
    a, roles = b.a, b.roles
    roles["actor"] = f"{a.model} trained with {a.train_backend}" + (
        f" + LoRA r={a.lora_rank} (Megatron-Bridge PEFT; base weights frozen)" if a.lora_rank and b.megatron else
        f" + LoRA r={a.lora_rank}" if a.lora_rank else "")
    roles["rollout"] = (f"{a.rollout_engine}, {b.facts['rollout_replicas']} replica(s) of TP={b.rtp}"
                        + (f" × DP={b.rdp}" if b.rdp > 1 else "") + ", colocated with the actor")
    b.roles = {k: roles[k] for k in ("actor", "rollout", "ref", "critic", "reward", "sandbox") if k in roles}


def _vision_keys(b: _Build) -> None:
    """verl's keys for a vision-language model. verl builds the processor (chat template and image processor) from
    the model folder itself (trainer/main_ppo.py: hf_processor) and turns each row's <image> placeholders and
    images into the processor's chat (utils/dataset/rl_dataset.py:_build_messages): no key names it."""
    a, s, given, shape = b.a, b.s, b.given, b.shape
    if shape is None or not shape.vision:
        return
    s.set("data.image_key", a.image_key, _given("image_key", given, "the column data/prepare_data.py writes the images to"),
          _src("image_key", given))
    if a.freeze_vision_tower is not None:
        s.set(f"{PRE}.actor.freeze_vision_tower", a.freeze_vision_tower,
              "freeze_vision_tower (your answer; verl 0.9.1 does not act on it, VI571)", "answer")
    if a.rollout_engine == "vllm" and has_images(a, shape):
        # vLLM's serve argument, as verl's own rollout.limit_images sets it (vllm_async_server.py:289); limit_images
        # is a RolloutConfig field that verl 0.9.1's rollout.yaml does not declare, so the config cannot name it,
        # while engine_kwargs.vllm is passed to `vllm serve` as is (vllm_rollout/utils.py:build_cli_args_from_config)
        # verl's own VLM runs (examples/grpo_trainer/run_qwen2_5_vl_7b_fsdp.sh, run_qwen3_vl_8b_fsdp.sh) turn chunked
        # prefill off; vLLM then needs max_num_batched_tokens ≥ the longest sequence, which the rollout stage sets
        s.set(f"{PRE}.rollout.enable_chunked_prefill", False,
              "as verl's own VLM examples: whole prompts (image tokens included) prefilled at once; "
              "max_num_batched_tokens holds the longest sequence")
        s.set(f"{PRE}.rollout.engine_kwargs.vllm.limit_mm_per_prompt", {"image": a.images_per_prompt},
              _given("images_per_prompt", given, "one image per prompt") + ": vLLM reserves encoder room for this many")


ANSWER_KEYS.update({
    "data.image_key": "image_key",
    f"{PRE}.actor.freeze_vision_tower": "freeze_vision_tower",
})


def _genrm_keys(b: _Build) -> None:
    """reward=genrm's keys (wizard.planner.genrm): the judge, its placement and the bundle's judge function."""
    genrm.keys(b, _model_path(b.a.reward_model, b.base) if b.a.reward_model else "")


KEY_STAGES = (_algorithm_keys, _data_keys, _model_keys, _actor_keys, _rollout_keys, agent.keys, _ref_keys, _critic_keys,
              _reward_keys, _genrm_keys, _trainer_keys, _vision_keys, _override_keys, _roles)


# ---------------------------------------------------------------------------------------------


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _given(name: str, given: set[str], default_reason: str) -> str:
    return f"{name} (your answer)" if name in given else default_reason


def _src(name: str, given: set[str]) -> Source:
    return "answer" if name in given else "default"


def _looks_local(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~"))


def _reward_file_rules(a: Answers, path: str, f: Findings) -> None:
    """The reward function's file, where verl will import it from."""
    if path.startswith("${"):
        return  # ~/...: expanded on the machine that runs verl
    here = os.path.isfile(path)
    if a.cluster == "local" and not here:
        f.error("VI506", ("reward_function",), f"reward_function={a.reward_function}: file not found: {path}",
                "check the path, or remove reward_function to use the bundle's reward/reward_fn.py")
    elif a.cluster in ("ray", "kuberay"):
        carrier = "the job's working_dir upload (the bundle)" if a.cluster == "ray" else "the pods (image + ConfigMap)"
        f.warning("VI507", ("reward_function", "cluster"),
                  f"reward function {path} is a file on this machine; {carrier} does not carry it",
                  "put it at the same path on every node (image or shared storage), or remove reward_function "
                  "to use the bundle's reward/reward_fn.py, which travels with the bundle")
    elif not here:
        f.warning("VI506", ("reward_function",), f"reward_function={a.reward_function}: file not found here: {path}",
                  "it must exist at this path on the cluster's nodes")


def _model_path(model: str, base: str) -> str:
    return resolve_path(model, base) if _looks_local(model) else model


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
        if isinstance(given.get(key), str) and _looks_local(given[key]):
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


LINK_LEVELS = {0: "same GPU", 1: "NVLink/NVSwitch", 2: "PCIe switch", 3: "PCIe host bridge", 4: "NUMA boundary"}


def group_level(topology: Sequence[Sequence[int]], tp: int) -> int:
    """Worst link level inside any group of `tp` consecutive GPUs (verl's TP groups are consecutive ranks)."""
    n = len(topology)
    worst = 0
    for start in range(0, n - n % tp if tp <= n else 0, tp):
        for i in range(start, start + tp):
            for j in range(start, start + tp):
                worst = max(worst, int(topology[i][j]))
    return worst


def _rollout_tp_options(a: Answers, n_gpus: int, f: Findings) -> list[int]:
    """Rollout TP candidates, smallest first: powers of two inside one node; an explicit answer is
    validated (a replica must fill a node or whole nodes) and then the only candidate."""
    gpn = a.gpus_per_node
    if a.rollout_tp is None:
        return pow2_divisors(gpn)
    tp = a.rollout_tp
    if tp <= gpn and gpn % tp == 0:
        return [tp]
    if tp > gpn and tp % gpn == 0 and n_gpus % tp == 0:
        f.warning("VI305", ("rollout_tp", "gpus_per_node"),
                  f"rollout_tp={tp} spans {tp // gpn} nodes: tensor-parallel traffic crosses the network",
                  f"prefer rollout_tp ≤ {gpn} (one node) when the model fits")
        return [tp]
    valid = divisors(gpn) + [gpn * k for k in range(2, a.nnodes + 1) if n_gpus % (gpn * k) == 0]
    f.error("VI304", ("rollout_tp", "gpus_per_node", "nnodes"),
            f"rollout_tp={tp} does not tile {a.nnodes} node(s) × {gpn} GPUs (a replica must fill a node or whole nodes)",
            f"nearest valid: {_or(nearest(valid, tp))}")
    return []


# The Megatron layout answers, each with the MegatronGrid field it sets.
MEGATRON_ANSWERS = {"megatron_tp": "tp", "megatron_pp": "pp", "megatron_cp": "cp", "megatron_ep": "ep",
                    "megatron_etp": "etp", "megatron_vpp": "vpp"}


def _exact(shape: Optional[ModelShape]) -> bool:
    """A shape whose layer, head and expert counts are the model's own (a catalogue entry or a local config.json);
    a shape scaled from a size has estimated counts, which no given layout is refused for."""
    return shape is not None and shape.source in ("catalogue", "local")


def _model_counts(shape: Optional[ModelShape]) -> dict[str, Optional[int]]:
    """The counts megatron-core checks a layout against (None: unknown, not checked)."""
    if not _exact(shape):
        return dict(layers=None, heads=None, kv_heads=None, experts=None)
    assert shape is not None
    return dict(layers=shape.layers, heads=shape.heads, kv_heads=shape.kv_heads, experts=shape.experts)


def megatron_grids(a: Answers, shape: Optional[ModelShape], n_gpus: int, gpus_per_node: Optional[int] = None,
                   free: Sequence[str] = ()) -> list[rc.MegatronGrid]:
    """Every Megatron layout that passes megatron-core's checks with the given megatron_* answers held (but those in
    `free`), least model parallelism first (wizard.verlspec.arithmetic.megatron_grids)."""
    held = {field: getattr(a, key) for key, field in MEGATRON_ANSWERS.items() if key not in free}
    return rc.megatron_grids(n_gpus, gpus_per_node or a.gpus_per_node, **_model_counts(shape), **held)


def megatron_values(b: "_Build", key: str) -> list[int]:
    """The values of one megatron_* answer that some valid layout takes with the other answers held."""
    field_name = MEGATRON_ANSWERS[key]
    return sorted({v for g in megatron_grids(b.a, b.shape, b.n_gpus, free=(key,))
                   if (v := getattr(g, field_name)) is not None})


def _megatron_options(a: Answers, shape: Optional[ModelShape], n_gpus: int, f: Findings) -> list[rc.MegatronGrid]:
    """Megatron layouts (TP, PP, CP, EP, ETP, VPP) that megatron-core accepts, least model parallelism first; TP and
    the expert groups stay inside a node. Given values that break a check are refused, each under its own rule."""
    gpn = a.gpus_per_node
    counts = _model_counts(shape)
    tp, pp, cp, ep, etp, vpp = (getattr(a, k) for k in MEGATRON_ANSWERS)
    moe = bool(counts["experts"])
    if tp is not None and (gpn % tp or tp > gpn):
        f.error("VI309", ("megatron_tp", "gpus_per_node"),
                f"megatron_tp={tp} must divide gpus_per_node={gpn} (tensor parallel stays inside a node)",
                f"nearest valid: {_or(nearest(divisors(gpn), tp))}")
        return []
    # each given value against the check it alone can break (megatron-core's asserts: arithmetic.MEGATRON_CHECKS)
    ends = rc.uneven_split(counts["layers"], pp) if counts["layers"] and pp and vpp is None else None
    given = rc.MegatronGrid(tp or 1, pp or 1, cp or 1, ep or 1, etp if etp is not None else (1 if moe else None), vpp,
                            *(ends or (None, None)))
    found = rc.megatron_checks(n_gpus, given, gpus_per_node=gpn, **counts)
    refusals = []
    if tp is not None and ("heads" in found or "kv_heads" in found):
        refusals.append(("VI312", ("megatron_tp", "model"),
                         f"megatron_tp={tp}: {found.get('heads') or found['kv_heads']} (megatron-core's TransformerConfig "
                         "raises)"))
    if ep is not None and ("dense_ep" in found or "experts" in found):
        refusals.append(("VI313", ("megatron_ep", "model"),
                         f"megatron_ep={ep}: {found.get('dense_ep') or found['experts']} (megatron-core raises)"))
    if (ep is not None or etp is not None) and "expert_node" in found:
        refusals.append(("VI315", ("megatron_ep", "megatron_etp", "gpus_per_node"),
                         f"{found['expert_node']}: expert all-to-all would cross the network"))
    elif (ep is not None or etp is not None) and "expert_grid" in found:
        refusals.append(("VI314", ("megatron_ep", "megatron_etp", "megatron_pp", "nnodes", "gpus_per_node"),
                         f"{found['expert_grid']} (megatron-core's initialize_model_parallel raises)"))
    # without megatron_pp the planner chooses a PP that VPP and the layers allow: only a given PP is refused here
    if vpp is not None and pp is not None and "interleaved" in found:
        refusals.append(("VI317", ("megatron_vpp", "megatron_pp"), f"megatron_vpp={vpp}: {found['interleaved']}"))
    elif pp is not None and "layers" in found:
        refusals.append(("VI316", ("megatron_pp", "megatron_vpp", "model"),
                         f"{found['layers']} (megatron-core: num_layers % PP, then % VPP; an uneven split, equal first and "
                         "last stages, only without VPP)"))
    if "dense_grid" in found and any(v is not None for v in (tp, pp, cp)):
        refusals.append(("VI310", ("megatron_tp", "megatron_pp", "megatron_cp", "nnodes", "gpus_per_node"),
                         f"megatron_tp×megatron_pp×megatron_cp={given.dense} does not divide the {n_gpus} GPUs"))
    for rule, keys, message in refusals:
        f.error(rule, keys, message, "")  # the hint is written once every stage has run (_layout_suggestions)
    if refusals:
        return []
    out = megatron_grids(a, shape, n_gpus)
    if not out:
        named = [k for k in MEGATRON_ANSWERS if getattr(a, k) is not None]
        f.error("VI310", tuple(named) + ("nnodes", "gpus_per_node"),
                f"no Megatron layout of {n_gpus} GPUs passes megatron-core's checks with "
                f"{', '.join(f'{k}={getattr(a, k)}' for k in named) or 'any TP/PP'}",
                "remove one of them and verl-init chooses it")
    return out


def _rollout_ep(b: "_Build") -> None:
    """The rollout engine's expert parallel size (rollout.expert_parallel_size): verl asserts EP = TP × DP when
    EP > 1 (workers/config/rollout.py:294; verl-init's replicas have DP = 1), and vLLM then spreads whole experts
    over the replica's GPUs (vllm_async_server.py:402, enable_expert_parallel) instead of splitting each one."""
    a, shape = b.a, b.shape
    moe = bool(shape is not None and shape.experts)
    if a.rollout_ep is None:
        b.rep = b.rtp * b.rdp if moe and b.rtp * b.rdp > 1 else 1
        return
    b.rep = a.rollout_ep
    if a.rollout_ep > 1 and shape is not None and _exact(shape) and not moe:
        b.f.error("VI318", ("rollout_ep", "model"), f"rollout_ep={a.rollout_ep} for {shape.name}, a dense model: "
                  "the engine has no experts to spread", "remove rollout_ep (or set it to 1)")
    elif a.rollout_ep > 1 and b.rtp and a.rollout_ep != b.rtp * b.rdp:
        b.f.error("VI318", ("rollout_ep", "rollout_tp", "rollout_dp"),
                  f"rollout_ep={a.rollout_ep} must equal rollout_tp × rollout_dp = {b.rtp} × {b.rdp} "
                  "(verl's RolloutConfig asserts it: workers/config/rollout.py:294)",
                  f"nearest valid: rollout_ep=1 or {b.rtp * b.rdp}" + (" (or set rollout_tp and rollout_dp to the EP you want)"
                                                             if "rollout_tp" not in b.given else ""))


def _rollout_dp_options(a: Answers, shape: Optional[ModelShape], n_gpus: int, tp_options: list[int],
                        f: Findings) -> None:
    """A given rollout_dp (the rollout engine's data_parallel_size) must be 1 for a dense model and, for a MoE
    model, make a replica verl can build with one of the rollout TPs (rc.rollout_dp_options: TP × DP filling
    whole nodes, dividing the GPUs, TP dividing a node; vllm_async_server.py:384-392, replica.py:108-116)."""
    rdp = a.rollout_dp
    if rdp is None or rdp == 1 or shape is None or f.errors:
        return
    gpn = a.gpus_per_node
    if not shape.experts:
        if _exact(shape):
            f.error("VI319", ("rollout_dp", "model"), f"rollout_dp={rdp} for {shape.name}, a dense model: verl-init "
                    "serves a dense model with data_parallel_size 1 (more replicas do the same work)",
                    "remove rollout_dp (or set rollout_dp=1)")
        return
    if any(rdp in rc.rollout_dp_options(n_gpus, gpn, tp, shape.experts) for tp in tp_options):
        return
    valid = sorted({d for tp in tp_options for d in rc.rollout_dp_options(n_gpus, gpn, tp, shape.experts)})
    tps = ", ".join(str(t) for t in tp_options)
    f.error("VI319", ("rollout_dp", "rollout_tp", "nnodes", "gpus_per_node"),
            f"rollout_dp={rdp} makes no rollout replica verl can build with rollout_tp {tps} on {a.nnodes}×{gpn} GPUs "
            f"(TP × DP must fill whole nodes, divide the {n_gpus} GPUs and not exceed the {shape.experts} experts)",
            f"nearest valid: rollout_dp={' or '.join(str(v) for v in nearest(valid, rdp))}")


def _fit(a: Answers, shape: ModelShape, critic: Optional[ModelShape], n_gpus: int, seq: int, dynamic: bool,
         megatron: bool, use_ref: bool, n: int, given: set[str], tp_options: list[int],
         mp_options: list[rc.MegatronGrid], *, nnodes: Optional[int] = None, lora_rank: Optional[int] = None,
         gpus_per_node: Optional[int] = None, any_offload: bool = False,
         host_limit: bool = True) -> Optional[Decision]:
    """The least-offload, least-parallel layout whose memory peak fits (wizard.planner.memory.choose).
    With other hardware (nnodes/gpus_per_node), every layout of that hardware is considered."""
    gpn = gpus_per_node or a.gpus_per_node
    n_all = gpn * (nnodes or a.nnodes)
    other_hw = n_all != n_gpus or gpn != a.gpus_per_node
    if "sequence_parallel" in given or megatron:
        sp_options = [a.sequence_parallel] if not other_hw else [1]
    else:
        sp_options = [d for d in pow2_divisors(gpn) if shape.heads % d == 0 and shape.kv_heads % d == 0]
    if dynamic:
        token_cap = a.max_tokens_per_gpu or _round_up(3 * seq, 1024)
    elif a.micro_batch_per_gpu is not None:
        token_cap = a.micro_batch_per_gpu * seq
    else:
        token_cap = max(MICRO_TOKEN_BUDGET, seq)
    if other_hw:
        tp_options = pow2_divisors(gpn)
        mp_options = megatron_grids(a, shape, n_all, gpn, free=tuple(MEGATRON_ANSWERS)) if megatron else [rc.MegatronGrid()]
    reward, reward_tp, reward_gmu = _reward_engine(a, seq, gpn)
    rank = a.lora_rank if lora_rank is None else lora_rank
    base = Layout(
        gpu_gb=a.gpu_memory_gb, n_gpus=n_all, gpus_per_node=gpn, seq_len=seq, rollout_tp=1, gmu=0.0, dp=1,
        megatron=megatron, use_ref=use_ref, ref_resident=megatron,
        lora_rank=rank, lora_adapter_sync=megatron and rank > 0, critic=critic,  # (_lora_keys: merge off, safetensors)
        host_memory_gb=a.host_memory_gb if host_limit else None, static_micro=not dynamic, gpu_type=a.gpu_type,
        reward=reward, reward_tp=reward_tp, reward_gmu=reward_gmu,
        reward_seq_len=genrm.judge_seq(a) if a.reward == "genrm" else 0,
        # a colocated reward engine (classifier or judge) sleeps outside its own turn
        # (reward.reward_model.rollout.free_cache_engine, which the plan sets true: _reward_keys, genrm.keys), as
        # `check` counts it
        reward_free_cache=a.reward in ("model", "genrm"),
        image_share=image_share(a, shape, seq),
        update_entropy=False,  # the plan writes actor.entropy_coeff=0 (_actor keys): the update computes no entropy
    )
    offload = [False, True] if (a.offload is None or any_offload) else [a.offload]
    experts = shape.experts or 0

    def rollout_dps(tp: int) -> list[int]:
        options = rc.rollout_dp_options(n_all, gpn, tp, experts)
        if a.rollout_dp is not None and not other_hw:
            return [a.rollout_dp] if a.rollout_dp in options else []
        return options

    kw = dict(tp_options=tp_options, gmu_fixed=None if any_offload else a.gpu_memory_utilization, rollout_dps=rollout_dps,
              sp_options=sp_options, token_cap=token_cap, mp_options=mp_options, batch_samples=a.prompts_per_step * n)
    # a layout whose every phase fits with the band first; one that is only tight (the band's high end over the
    # card) is the fallback
    for accept in (("fits",), ("fits", "tight")):
        if len(offload) > 1:
            # A layout whose GPUs fit activations for less than two sequences trains slowly: offload (which frees
            # the rollout phase, and lets an offloaded actor and critic take turns) is preferred to it; the cramped
            # layout is the fallback.
            roomy = choose(shape, base, offload_options=offload, min_gpu_tokens=min(token_cap, 2 * seq), accept=accept, **kw)
            if roomy is not None:
                return roomy
        d = choose(shape, base, offload_options=offload, accept=accept, **kw)
        if d is not None:
            return d
    return None


def _reward_engine(a: Answers, seq: int, gpn: int) -> tuple[Optional[ModelShape], int, float]:
    """The reward model's engine beside the policy (reward=model): its shape, TP and share of each GPU, sized
    from the model (wizard.planner.memory.reward_layout); a model verl-init cannot size gets REWARD_MODEL_GMU."""
    if a.reward == "genrm":
        return genrm.engine(a, gpn)
    if a.reward != "model":
        return None, 1, 0.0
    try:
        reward = resolve_shape(a.reward_model) if a.reward_model else None
    except (OSError, ValueError):  # an unreadable local config.json: sized like an unknown model
        reward = None
    if reward is None:
        return None, 1, REWARD_MODEL_GMU
    tp, gmu = reward_layout(reward, a.gpu_memory_gb, seq, gpn)
    return reward, tp, gmu


_FREEABLE = ("gpu_memory_utilization", "rollout_tp", "rollout_dp", "offload", "sequence_parallel", "megatron_tp", "megatron_pp",
             "megatron_cp", "megatron_ep", "megatron_etp", "megatron_vpp", "max_tokens_per_gpu", "micro_batch_per_gpu")


def _explicit_culprit(a: Answers, shape: ModelShape, critic: Optional[ModelShape], n_gpus: int, seq: int,
                      dynamic: bool, megatron: bool, use_ref: bool, n: int,
                      given: set[str]) -> Optional[tuple[str, Decision]]:
    """An explicit answer without which the plan would fit: the user's value, not the hardware, is the problem."""
    for knob in _FREEABLE:
        if knob not in given or getattr(a, knob) is None:
            continue
        update: dict[str, Any] = {knob: 1 if knob == "sequence_parallel" else None}
        freed_a = a.model_copy(update=update)
        freed_given = given - {knob}
        tps = pow2_divisors(a.gpus_per_node) if freed_a.rollout_tp is None else [freed_a.rollout_tp]
        mps = megatron_grids(freed_a, shape, n_gpus) if megatron else [rc.MegatronGrid()]
        d = _fit(freed_a, shape, critic, n_gpus, seq, dynamic, megatron, use_ref, n, freed_given, tps, mps)
        if d is not None:
            return knob, d
    return None


def _describe(knob: str, d: Decision) -> str:
    lay = d.layout
    return {
        "gpu_memory_utilization": f"gpu_memory_utilization={lay.gmu:g}",
        "rollout_tp": f"rollout_tp={lay.rollout_tp}",
        "rollout_dp": f"rollout_dp={lay.rollout_dp}",
        "offload": f"offload={str(lay.offload_params).lower()}",
        "sequence_parallel": f"sequence_parallel={lay.sp}",
        "megatron_tp": f"megatron_tp={lay.megatron_tp}",
        "megatron_pp": f"megatron_pp={lay.megatron_pp}",
        "megatron_cp": f"megatron_cp={lay.megatron_cp}",
        "megatron_ep": f"megatron_ep={lay.megatron_ep}",
        "megatron_etp": f"megatron_etp={lay.megatron_etp}",
        "megatron_vpp": f"megatron_vpp={lay.megatron_vpp}",
        "max_tokens_per_gpu": f"a token budget of {lay.train_tokens}",
        "micro_batch_per_gpu": f"micro-batches of {max(1, lay.train_tokens // lay.seq_len)}",
    }[knob]


def _suggest(a: Answers, shape: ModelShape, critic: Optional[ModelShape], n_gpus: int, seq: int, dynamic: bool,
             megatron: bool, use_ref: bool, n: int, given: set[str]) -> str:
    """What would fit instead: more GPUs, LoRA, or a smaller model (each checked with the same estimate)."""
    from wizard.planner.shapes import from_params

    gpn = a.gpus_per_node
    options = []

    def fits(sh: ModelShape, **kw: Any) -> Optional[Decision]:
        return _fit(a, sh, None if critic is None else sh if critic is shape else critic, n_gpus, seq, dynamic,
                    megatron, use_ref, n, given, pow2_divisors(gpn),
                    megatron_grids(a, sh, n_gpus, free=tuple(MEGATRON_ANSWERS)) if megatron else [rc.MegatronGrid()],
                    any_offload=True, **kw)

    hardware = [(1, g) for g in (2, 4, 8) if g > gpn] + [(k, max(gpn, 8)) for k in (2, 4, 8, 16, 32, 64)]
    for nodes, g in hardware:
        if nodes * g <= n_gpus:
            continue
        d = fits(shape, nnodes=nodes, gpus_per_node=g)
        if d:
            options.append(f"needs ≥ {nodes}×{g} × {a.gpu_memory_gb:g} GB GPUs"
                           + (" with offload" if d.layout.offload_params else ""))
            break
    if not a.lora_rank and not (megatron and shape.vision) and fits(shape, lora_rank=32):
        options.append(f"or LoRA rank 32 on these {n_gpus} GPU(s)")
    lo, hi = 0.05, shape.params_b
    if fits(from_params(lo, "answer")):
        for _ in range(10):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fits(from_params(mid, "answer")) else (lo, mid)
        options.append(f"or a model of ≤ {lo:.1f}B parameters on these GPUs")
    if not any(o.startswith("needs") for o in options):
        options.insert(0, f"no number of {a.gpu_memory_gb:g} GB GPUs fits it: use GPUs with more memory")
    if len(options) == 1:
        options.append("or shorten max_prompt_length/max_response_length")
    return ", ".join(options)


def _data_files(a: Answers, base: str, f: Findings, stored: Optional[dict[str, str]] = None,
                ) -> tuple[tuple[str, str, Source], tuple[str, str, Source]]:
    """Where verl reads the data (data/prepare_data.py writes it by default) and the VI5xx data rules.
    `stored`: data paths as the bundle names them (relative to it), where they differ from the answers."""
    stored = stored or {}
    ds = a.dataset
    builtin = ds in BUILTIN_DATASETS
    if not builtin and not ds.lower().endswith(DATA_SUFFIXES):
        f.error("VI510", ("dataset",), f"dataset must be gsm8k, math, geo3k, codecontests or a local data file (got {ds!r})",
                "use gsm8k, math, geo3k, codecontests, or a .jsonl/.json/.csv/.parquet path")
        return ("", "", "answer"), ("", "", "answer")
    for key in ("train_files", "val_files"):
        value = getattr(a, key)
        if value and value.lower().endswith(".csv"):
            f.error("VI511", (key,), f"verl reads parquet, json and jsonl but not csv ({key}={value!r})",
                    f"set dataset={value} and leave {key} unset: data/prepare_data.py converts it to parquet; "
                    "or point it at a .parquet/.jsonl file in verl's schema")
    if builtin:
        stray = dataprep.local_only_keys_given(a)
        if stray:
            f.error("VI516", tuple(stray), f"{', '.join(stray)} only apply to a local data file, not dataset={ds}",
                    f"remove {' and '.join(stray)}; {ds} has its own columns and a test split")
    if a.messages_field and "question_field" in a.model_fields_set:
        f.error("VI515", ("messages_field", "question_field"),
                "set messages_field (a chat column) or question_field (a question column), not both",
                f"remove question_field to build prompts from {a.messages_field!r}")

    prep = dataprep.resolve(a, base)
    scorer = prep.scorer
    prepared_used = not (a.train_files and a.val_files)
    if a.reward == "rule" and prepared_used:
        if scorer is None:
            rule_ds = dataprep.RULE_DATA_SOURCE.get(prep.answer_format)
            hint = "use reward=function (the bundle gets reward/reward_fn.py for your answer_format)"
            if rule_ds:
                hint += f", or data_source={rule_ds}"
            f.error("VI513", ("data_source", "reward", "answer_format"),
                    f"data_source={prep.data_source!r} has no scorer in verl's default scoring: every reward step "
                    "would fail with NotImplementedError", hint)
        else:
            expects = dataprep.SCORER_FORMAT.get(scorer)
            if expects is not None and expects != prep.answer_format:
                f.error("VI514", ("answer_format", "data_source", "reward"),
                        f"verl scores data_source={prep.data_source!r} with its {scorer} scorer, which reads "
                        f"answer_format={expects}, but prompts ask for answer_format={prep.answer_format}: "
                        "every reward would be 0",
                        f"set answer_format={expects}, or reward=function to score {prep.answer_format} answers")

    train_default, val_default = DATASET_DEFAULTS.get(ds, (dataprep.PREPARED_TRAIN, dataprep.PREPARED_VAL))
    shown = stored.get("dataset", ds)
    why = f"written by data/prepare_data.py from {shown}"
    if not builtin and a.val_fraction == 0 and a.val_files is None:
        val_default = train_default
        f.warning("VI512", ("val_files", "val_fraction"), "no validation file: validating on the training file",
                  "set val_fraction (e.g. 0.05) or val_files to a held-out split")
    if bool(a.train_files) != bool(a.val_files):
        mine, theirs = ("train_files", "val_files") if a.train_files else ("val_files", "train_files")
        f.warning("VI517", (mine, theirs),
                  f"{mine} is your file but {theirs} is the bundle's {val_default if theirs == 'val_files' else train_default}, "
                  f"written by data/prepare_data.py from {shown}",
                  f"set {theirs} too (val_files=<your train file> validates on the training data)")
    train: tuple[str, str, Source] = (
        (stored.get("train_files") or resolve_path(a.train_files, base), "train_files (your answer)", "answer")
        if a.train_files
        else (train_default, why, "default"))
    val: tuple[str, str, Source] = (
        (stored.get("val_files") or resolve_path(a.val_files, base), "val_files (your answer)", "answer")
        if a.val_files
        else (val_default, why, "default"))
    return train, val
