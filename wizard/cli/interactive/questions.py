"""The questionnaire as data: one record per asked `Answers` field (copier's question model).

Each `Question` names the field it fills, when it applies (`when`, over the answers so far), the kind
of prompt, and where its default comes from (the probes, the planner, or the field's own default).
Prompts reuse the field's one-line `description` from `wizard.intent.answers.Answers`. The flow that asks
them lives in `wizard.cli.interactive.walk`; nothing here prints or prompts.

`NOT_ASKED` names every other field and why it is left to verl-init (or to `--set` / the answers
file); a test keeps QUESTIONS ∪ NOT_ASKED equal to the fields of `Answers`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from wizard.intent.answers import BUILTIN_DATASETS, DATA_SUFFIXES, Answers, answer_problems
from wizard.intent.errors import WizardError

if TYPE_CHECKING:
    from wizard.env.probe import Probes

Kind = Literal["select", "int", "float", "text", "checkbox"]


@dataclass
class Context:
    """The answers given so far (only fields set) and what the probes found (None: not probed)."""

    answers: dict[str, Any] = field(default_factory=dict)
    probes: Probes | None = None
    base_dir: str = "."

    def get(self, name: str) -> Any:
        if name in self.answers:
            return self.answers[name]
        return Answers.model_fields[name].get_default(call_default_factory=True)

    def model(self, **update: Any) -> Answers | None:
        """The answers so far as `Answers` (defaults for the rest), or None when they do not validate yet."""
        try:
            return Answers.model_validate({**self.answers, **update})
        except Exception:  # noqa: BLE001 - pydantic ValidationError: not complete or not consistent yet
            return None


Default = Callable[[Context], Any]
Condition = Callable[[Context], bool]


def always(ctx: Context) -> bool:
    return True


@dataclass(frozen=True)
class Question:
    """One prompt bound to one `Answers` field."""

    field: str
    kind: Kind
    section: str
    when: Condition = always
    default: Default | None = None  # probe- or planner-derived; None: the field's default
    optional: bool = False  # an empty answer leaves the field unset: verl-init chooses
    auto: Callable[[Context], str] | None = None  # what an empty answer means, shown in the prompt
    probe_fill: Default | None = None  # a probed value taken without asking (None: ask)
    choices: Callable[[Context], Sequence[tuple[Any, str]]] | None = None  # (value, description)
    note: Callable[[Context], str | None] | None = None  # one line shown under the prompt
    check: Callable[[Any, Context], str | None] | None = None  # extra immediate check: error text or None

    @property
    def description(self) -> str:
        return str(Answers.model_fields[self.field].description or self.field)

    def message(self) -> str:
        return f"{self.field} — {self.description}"


# --- helpers over the answers so far ---------------------------------------------------------------


def _algo(ctx: Context) -> Any:
    from wizard.verlspec.algorithms import ALGORITHMS

    return ALGORITHMS[ctx.get("algorithm")]


def _is_local_file(ctx: Context) -> bool:
    ds = str(ctx.get("dataset"))
    return ds not in BUILTIN_DATASETS and ds.lower().endswith(DATA_SUFFIXES)


def _ray_gpu_nodes(ctx: Context) -> list[Any]:
    p = ctx.probes
    return p.ray.gpu_nodes if p is not None and p.ray.found else []


def _use_ray_probe(ctx: Context) -> bool:
    return ctx.get("cluster") == "ray" and bool(_ray_gpu_nodes(ctx))


def _gpus_found(ctx: Context) -> bool:
    return ctx.probes is not None and ctx.probes.gpus.found


# --- defaults from the probes ---------------------------------------------------------------------


def default_cluster(ctx: Context) -> str:
    p = ctx.probes
    if p is not None and p.ray.found and (p.ray.explicit or len(p.ray.gpu_nodes) > 1):
        return "ray"
    return "local"


def default_nnodes(ctx: Context) -> int:
    nodes = _ray_gpu_nodes(ctx)
    if ctx.get("cluster") == "ray" and nodes:
        return len(nodes)
    return 2 if ctx.get("cluster") in ("kuberay", "slurm") else 1


def default_gpus_per_node(ctx: Context) -> int:
    if _use_ray_probe(ctx):
        return max(1, min(16, min(n.gpus for n in _ray_gpu_nodes(ctx))))
    if _gpus_found(ctx):
        assert ctx.probes is not None
        whole = ctx.probes.gpus.whole_gpus
        return max(1, min(16, len(whole))) if whole else 1
    return int(Answers.model_fields["gpus_per_node"].default)


def default_gpu_memory_gb(ctx: Context) -> float:
    if _gpus_found(ctx):
        assert ctx.probes is not None
        g = ctx.probes.gpus
        sizes = [x.memory_total_gb for x in g.whole_gpus if x.memory_total_gb]
        if not sizes:
            sizes = [s.memory_gb for x in g.mig_gpus for s in x.mig_slices if s.memory_gb]
        if sizes:
            return math.floor(min(sizes) * 10) / 10
    return float(Answers.model_fields["gpu_memory_gb"].default)


def default_gpu_type(ctx: Context) -> str:
    if _gpus_found(ctx):
        assert ctx.probes is not None
        g = ctx.probes.gpus
        whole = g.whole_gpus
        if whole:
            return whole[0].short_name
        return g.gpus[0].short_name + " MIG slice"
    return str(Answers.model_fields["gpu_type"].default)


def probed_gpu_type(ctx: Context) -> str | None:
    """On a local run, the GPU model is read, not asked."""
    return default_gpu_type(ctx) if ctx.get("cluster") == "local" and _gpus_found(ctx) else None


def probed_host_memory(ctx: Context) -> float | None:
    """On a local run, host memory is read from /proc/meminfo, not asked."""
    p = ctx.probes
    if ctx.get("cluster") == "local" and p is not None and p.host.memory_gb:
        return float(p.host.memory_gb)
    return None


def gpu_note(ctx: Context) -> str | None:
    p = ctx.probes
    if p is None:
        return None
    if _use_ray_probe(ctx):
        return f"probed: {p.ray.describe()}"
    return f"probed: {p.gpus.describe()}"


def cluster_note(ctx: Context) -> str | None:
    p = ctx.probes
    if p is None:
        return None
    return f"probed: {p.ray.describe()}"


# --- defaults from the planner ---------------------------------------------------------------------


def _plan_errors(a: Answers, ctx: Context) -> list[str] | None:
    """Rule IDs the planner rejects `a` with ([] when it plans); None when planning itself failed."""
    from wizard.planner.pipeline import plan

    try:
        plan(a, base_dir=ctx.base_dir, hints=False)
    except WizardError as exc:
        return exc.rules
    except Exception:  # noqa: BLE001 - a default must never stop the questionnaire
        return None
    return []


def default_lora_rank(ctx: Context) -> int:
    """0 (all weights) when it fits; 32 when only LoRA fits these GPUs (the planner's VI602 hint)."""
    full = ctx.model(lora_rank=0)
    if full is None or "lora_rank" in ctx.answers:
        return int(ctx.answers.get("lora_rank", 0))
    rules = _plan_errors(full, ctx)
    if rules and "VI602" in rules:
        lora = ctx.model(lora_rank=32)
        with_lora = _plan_errors(lora, ctx) if lora is not None else None
        if with_lora is not None and "VI602" not in with_lora:
            return 32
    return 0


def lora_note(ctx: Context) -> str | None:
    if default_lora_rank(ctx) == 32 and "lora_rank" not in ctx.answers:
        return "training all weights does not fit these GPUs; LoRA rank 32 does (0 = all weights)"
    return None


def _batch_step(ctx: Context) -> int:
    """prompts_per_step must be a multiple of this for the default samples and updates to divide evenly."""
    n = ctx.get("samples_per_prompt") or _algo(ctx).default_n
    updates = int(ctx.get("updates_per_step"))
    gpus = int(ctx.get("nnodes")) * int(ctx.get("gpus_per_node"))
    # each update's samples (prompts_per_step / updates × n) must split evenly over the data-parallel ranks
    from wizard.verlspec.arithmetic import mini_multiple

    return updates * mini_multiple(gpus, int(n))


def default_prompts_per_step(ctx: Context) -> int:
    """256 (the field's default) when it divides evenly, else the nearest multiple that does (planner-checked)."""
    base = int(Answers.model_fields["prompts_per_step"].default)
    try:
        step = _batch_step(ctx)
    except (ValueError, ZeroDivisionError, TypeError):
        return base
    lower = max(step, base // step * step)
    candidates = [base] if base % step == 0 else sorted({lower, lower + step}, key=lambda p: (abs(p - base), p))
    for p in candidates:
        a = ctx.model(prompts_per_step=p)
        rules = _plan_errors(a, ctx) if a is not None else None
        if rules is not None and not {"VI201", "VI202", "VI203"} & set(rules):
            return p
    return candidates[0]


def batch_note(ctx: Context) -> str | None:
    try:
        step = _batch_step(ctx)
    except (ValueError, ZeroDivisionError, TypeError):
        return None
    gpus = int(ctx.get("nnodes")) * int(ctx.get("gpus_per_node"))
    return f"a multiple of {step} divides evenly over {gpus} GPU(s) with the default samples and updates"


# --- choices -------------------------------------------------------------------------------------------


def _literal_values(name: str) -> list[Any]:
    ann = Answers.model_fields[name].annotation
    args = [a for a in get_args(ann) if a is not type(None)]
    if len(args) == 1 and get_args(args[0]):
        return list(get_args(args[0]))
    return list(get_args(ann))


CLUSTER_TEXT = {
    "local": "this machine; verl starts its own Ray (run.sh)",
    "ray": "an existing Ray cluster (ray/submit.sh → ray job submit)",
    "kuberay": "Kubernetes with the KubeRay operator (k8s/rayjob.yaml, k8s/submit.sh)",
    "slurm": "a Slurm allocation that starts Ray on every node (slurm/job.sbatch)",
}
REWARD_TEXT = {
    "rule": "verl's rule-based scorer, chosen by each row's data_source (GSM8K, MATH, ...)",
    "model": "a reward model (sequence classifier) scores each response",
    "function": "your own Python scorer (file.py:function), or the bundle's reward/reward_fn.py",
}
ENGINE_TEXT = {"vllm": "vLLM generates the rollouts", "sglang": "SGLang generates the rollouts"}
BACKEND_TEXT = {
    "fsdp": "PyTorch FSDP (verl's default; sequence parallel, LoRA, offload)",
    "fsdp2": "PyTorch FSDP2 (per-parameter sharding)",
    "megatron": "Megatron-LM (tensor/pipeline parallel for large models; no LoRA here)",
}


def algorithm_choices(ctx: Context) -> list[tuple[Any, str]]:
    from wizard.verlspec.algorithms import ALGORITHMS

    return [(name, f"{a.summary}" + (" (trains a critic)" if a.critic else "")) for name, a in ALGORITHMS.items()]


def _texts(table: Mapping[str, str]) -> Callable[[Context], list[tuple[Any, str]]]:
    return lambda ctx: [(k, v) for k, v in table.items()]


def logger_choices(ctx: Context) -> list[tuple[Any, str]]:
    return [(v, "") for v in _literal_values("logger")]


# --- immediate checks beyond the field's own type -------------------------------------------------------


def check_dataset(value: Any, ctx: Context) -> str | None:
    text = str(value)
    if text in BUILTIN_DATASETS or text.lower().endswith(DATA_SUFFIXES):
        return None
    return f"gsm8k, math or a local {'/'.join(DATA_SUFFIXES)} file (got {text!r}) [VI510]"


def needs_size(ctx: Context) -> bool:
    """model_params_b is asked only when the model cannot be sized from the catalogue, a folder or its name."""
    from wizard.planner.shapes import resolve_shape

    model = str(ctx.get("model"))
    try:
        return resolve_shape(model) is None
    except Exception:  # noqa: BLE001 - an unreadable local config.json: ask
        return True


# --- the questionnaire ---------------------------------------------------------------------------------

QUESTIONS: tuple[Question, ...] = (
    # hardware
    Question("cluster", "select", "hardware", default=default_cluster, choices=_texts(CLUSTER_TEXT), note=cluster_note),
    Question("nnodes", "int", "hardware", when=lambda c: c.get("cluster") != "local", default=default_nnodes),
    Question("gpus_per_node", "int", "hardware", default=default_gpus_per_node, note=gpu_note),
    Question("gpu_memory_gb", "float", "hardware", default=default_gpu_memory_gb),
    Question("gpu_type", "text", "hardware", default=default_gpu_type, probe_fill=probed_gpu_type),
    Question("host_memory_gb", "float", "hardware", optional=True, probe_fill=probed_host_memory,
             auto=lambda c: "not checked"),
    # algorithm and roles
    Question("algorithm", "select", "algorithm", choices=algorithm_choices),
    Question("model", "text", "algorithm"),
    Question("model_params_b", "float", "algorithm", when=needs_size,
             note=lambda c: f"{c.get('model')!r} is not in the catalogue and its name carries no size"),
    Question("critic_model", "text", "algorithm", when=lambda c: _algo(c).critic, optional=True,
             auto=lambda c: f"the policy, {c.get('model')}"),
    Question("reward", "select", "algorithm", choices=_texts(REWARD_TEXT)),
    Question("reward_model", "text", "algorithm", when=lambda c: c.get("reward") == "model"),
    Question("reward_function", "text", "algorithm", when=lambda c: c.get("reward") == "function", optional=True,
             auto=lambda c: "the bundle's reward/reward_fn.py"),
    Question("rollout_engine", "select", "algorithm", choices=_texts(ENGINE_TEXT)),
    Question("train_backend", "select", "algorithm", choices=_texts(BACKEND_TEXT)),
    Question("lora_rank", "int", "algorithm", when=lambda c: c.get("train_backend") != "megatron",
             default=default_lora_rank, note=lora_note),
    # data
    Question("dataset", "text", "data", check=check_dataset),
    Question("question_field", "text", "data", when=_is_local_file),
    Question("answer_field", "text", "data", when=_is_local_file),
    Question("answer_format", "select", "data", when=_is_local_file,
             choices=lambda c: [("number", "a number (GSM8K-style)"), ("boxed", "\\boxed{...} (MATH-style)"),
                                ("text", 'free text after "Answer:"')]),
    Question("max_prompt_length", "int", "data"),
    Question("max_response_length", "int", "data"),
    # batch intents
    Question("prompts_per_step", "int", "batch", default=default_prompts_per_step, note=batch_note),
    Question("samples_per_prompt", "int", "batch", optional=True,
             auto=lambda c: f"{_algo(c).default_n}, {c.get('algorithm')}'s default"),
    Question("updates_per_step", "int", "batch"),
    Question("total_steps", "int", "batch", optional=True, auto=lambda c: "15 passes over the data (epochs)"),
    # cluster artefacts
    Question("image", "text", "cluster", when=lambda c: c.get("cluster") in ("kuberay", "slurm"), optional=True,
             auto=lambda c: "a verl 0.9.1 release image" if c.get("cluster") == "kuberay" else "no container"),
    Question("k8s_namespace", "text", "cluster", when=lambda c: c.get("cluster") == "kuberay", optional=True,
             auto=lambda c: "kubectl's current namespace"),
    Question("k8s_secret", "text", "cluster", when=lambda c: c.get("cluster") == "kuberay"),
    Question("shared_pvc", "text", "cluster", when=lambda c: c.get("cluster") == "kuberay", optional=True,
             auto=lambda c: "none: each pod's working folder is its own"),
    Question("shm_size_gb", "int", "cluster", when=lambda c: c.get("cluster") == "kuberay", optional=True,
             auto=lambda c: "KubeRay's default"),
    Question("slurm_partition", "text", "cluster", when=lambda c: c.get("cluster") == "slurm", optional=True,
             auto=lambda c: "the cluster's default"),
    Question("slurm_account", "text", "cluster", when=lambda c: c.get("cluster") == "slurm", optional=True,
             auto=lambda c: "your default account"),
    Question("slurm_time", "text", "cluster", when=lambda c: c.get("cluster") == "slurm", optional=True,
             auto=lambda c: "the partition's limit"),
    # bookkeeping
    Question("logger", "checkbox", "bookkeeping", choices=logger_choices),
    Question("experiment_name", "text", "bookkeeping", optional=True, auto=lambda c: _experiment(c)),
)


def _experiment(ctx: Context) -> str:
    from wizard.planner.pipeline import experiment_name

    a = ctx.model()
    return experiment_name(a) if a is not None else "algorithm-model"


# Fields the wizard does not ask, and why. They stay at their defaults (verl-init chooses, with the reason in
# PLAN.md) and can be set with --set or in the bundle's verl-init.yaml, then replayed with --answers.
NOT_ASKED: dict[str, str] = {
    "lora_alpha": "twice lora_rank, the usual choice",
    "train_files": "data/prepare_data.py writes the training file from dataset",
    "val_files": "data/prepare_data.py writes the validation file from dataset",
    "epochs": "total_steps is asked; without it verl runs 15 epochs",
    "learning_rate": "1e-6 (3e-5 with LoRA), verl's recipes",
    "critic_learning_rate": "1e-5, verl's recipes",
    "kl_coef": "0.001 by algorithm (none for dapo/gspo)",
    "temperature": "1.0 for RL sampling",
    "rollout_tp": "chosen by the memory fit and the GPU topology",
    "gpu_memory_utilization": "chosen by the memory fit",
    "dynamic_batch": "on with FSDP, off with Megatron",
    "micro_batch_per_gpu": "chosen by the memory fit",
    "max_tokens_per_gpu": "chosen by the memory fit",
    "sequence_parallel": "chosen by the memory fit and the attention heads",
    "megatron_tp": "chosen by the memory fit",
    "megatron_pp": "chosen by the memory fit",
    "offload": "only when nothing else fits (the memory fit)",
    "project_name": "verl-init, a tracker project name",
    "save_freq": "every 20 steps",
    "test_freq": "every 5 steps",
    "job_name": "from experiment_name",
    "cpus_per_node": "8 per GPU (at least 3 per GPU + 1)",
    "memory_per_node_gb": "90% of host_memory_gb, else 32 GB per GPU",
    "head_cpus": "10 for verl's TaskRunner and TransferQueue",
    "head_memory_gb": "64 GB",
    "gpu_wait_timeout_s": "600 s",
    "k8s_ttl_seconds": "3600 s",
    "messages_field": "question_field is asked; chats are for --set messages_field=...",
    "instruction": "asks for the answer_format the scorer reads",
    "system_prompt": "none",
    "data_source": "selects verl's scorer from the dataset and answer_format",
    "val_fraction": "5% of a local file is held out",
    "split_seed": "42",
}

# Questions re-asked with a rejected answer's own keys because a rule's hint names them.
RELATED: dict[str, tuple[str, ...]] = {
    "VI602": ("lora_rank",),  # "... or LoRA rank 32 on these GPUs"
    "VI605": ("lora_rank", "nnodes"),  # "use more nodes, LoRA, or nodes with more host memory"
    "VI513": ("reward", "answer_format"),
    "VI514": ("reward", "answer_format"),
}

BY_FIELD: dict[str, Question] = {q.field: q for q in QUESTIONS}


def applicable(ctx: Context) -> list[Question]:
    return [q for q in QUESTIONS if q.when(ctx)]


def choices_for(q: Question, ctx: Context) -> list[tuple[Any, str]]:
    if q.choices is not None:
        return list(q.choices(ctx))
    return [(v, "") for v in _literal_values(q.field)]


def default_for(q: Question, ctx: Context) -> Any:
    """The value offered: the answer given before, else the probe/planner default, else the field's default."""
    if q.field in ctx.answers:
        return ctx.answers[q.field]
    if q.default is not None:
        try:
            value = q.default(ctx)
        except Exception:  # noqa: BLE001 - a broken default falls back to the field's own
            value = None
        if value is not None:
            return value
    if q.optional:
        return None
    return Answers.model_fields[q.field].get_default(call_default_factory=True)


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def parse(q: Question, text: str, ctx: Context | None = None) -> tuple[Any, str | None]:
    """(value, None) or (None, error text) for what was typed. An empty optional answer is (None, None)."""
    raw = text.strip()
    if raw == "":
        if q.optional:
            return None, None
        return None, "an answer is needed"
    value: Any = raw
    if q.kind == "int":
        try:
            value = int(raw)
        except ValueError:
            return None, f"a whole number, e.g. {as_text(Answers.model_fields[q.field].default) or 1}"
    elif q.kind == "float":
        try:
            value = float(raw)
        except ValueError:
            return None, "a number, e.g. 80 or 24.5"
    problems = answer_problems({q.field: value})
    if problems:
        p = problems[0]
        return None, f"{p.message} — {p.hint} [{p.rule}]" if p.hint else f"{p.message} [{p.rule}]"
    if q.check is not None:
        error = q.check(value, ctx or Context())
        if error:
            return None, error
    return value, None
