"""The questionnaire as data: one record per decision (copier's question model).

Each `Question` names what it fills — an `Answers` field, or a wizard decision (`DECISIONS`: which GPUs, whether
to adjust advanced settings) that fills several fields at once — when it applies (`when`, over the answers so
far), the kind of prompt, where its default comes from (the probes, the planner, or the field's own default) and,
for selects, the choices it offers. Prompts reuse the field's one-line `description` from
`wizard.intent.answers.Answers`. The flow that asks them lives in `wizard.cli.interactive.walk`; nothing here
prints or prompts.

Every answer is checked the moment it is given against the plan so far (`refusal`): the real planner runs on the
answers given, with this one, and a rule it breaks is the answer's to fix unless a question still to come names
one of the rule's keys (it will offer values that fix it). Choices that would be refused are not offered
(`offered`), and a default is always one that passes (`default_for`).

Probed facts of this machine (NVML GPUs, host memory) fill answers only when the user says the run is on this
machine (the `gpus` decision's "this machine" choice); GPUs picked by name say nothing about host memory.

`NOT_ASKED` names every other field and why it is left to verl-init (or to `--set` / the answers
file); a test keeps QUESTIONS ∪ NOT_ASKED ∪ DECISIONS equal to the fields of `Answers` plus the decisions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, get_args

from wizard.cli.interactive import dataq
from wizard.cli.interactive.qcore import (  # noqa: F401 - re-exported: the walk and the tests import them from here
    DECISIONS, MEMORY_RULES, OTHER, THIS_MACHINE, Condition, Context, Default, Kind, Question, _plan_problems, always,
    never,
)
from wizard.intent.answers import BUILTIN_DATASETS, Answers, answer_problems, local_dataset
from wizard.intent.errors import Problem
from wizard.planner.steptime import RESPONSE_SQRT as _RESPONSE_SQRT


def give(q: Question, value: Any, ctx: Context) -> None:
    """Record `value` as the answer to `q` (None: the field is left unset, verl-init chooses)."""
    ctx.asked.add(q.field)
    if q.field in DECISIONS:
        ctx.decisions[q.field] = value
        if q.apply is not None:
            filled = q.apply(value, ctx)
            for name in q.owns:
                ctx.asked.discard(name)  # the decision, not the field's own question, answers it now
                if name in filled:
                    ctx.answers[name] = filled[name]
                else:
                    ctx.answers.pop(name, None)
        return
    if value is None:
        ctx.answers.pop(q.field, None)
    else:
        ctx.answers[q.field] = value


def prune(ctx: Context) -> None:
    """Drop the answers to questions that no longer apply (e.g. critic_model after algorithm changed from ppo)."""
    for q in QUESTIONS:
        if q.field in ctx.asked and not applies(q, ctx):
            ctx.asked.discard(q.field)
            if q.field in DECISIONS:
                ctx.decisions.pop(q.field, None)
            else:
                ctx.answers.pop(q.field, None)


def _settle(q: Question, value: Any, ctx: Context) -> None:
    give(q, value, ctx)
    prune(ctx)


Context.settle = staticmethod(_settle)  # type: ignore[assignment]


# --- helpers over the answers so far ---------------------------------------------------------------


def _algo(ctx: Context) -> Any:
    from wizard.verlspec.algorithms import ALGORITHMS

    return ALGORITHMS[ctx.get("algorithm")]


def _is_local_file(ctx: Context) -> bool:
    return local_dataset(str(ctx.get("dataset")), ctx.base_dir)


def _ray_gpu_nodes(ctx: Context) -> list[Any]:
    p = ctx.probes
    return p.ray.gpu_nodes if p is not None and p.ray.found else []


def _use_ray_probe(ctx: Context) -> bool:
    return ctx.get("cluster") == "ray" and bool(_ray_gpu_nodes(ctx))


def _gpus_found(ctx: Context) -> bool:
    return ctx.probes is not None and ctx.probes.gpus.found


def _other_gpus(ctx: Context) -> bool:
    return ctx.get("gpus") == OTHER


def _on_this_machine(ctx: Context) -> bool:
    return ctx.get("gpus") == THIS_MACHINE


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
    return int(Answers.model_fields["gpus_per_node"].default)


def _probed_gpus(ctx: Context) -> dict[str, Any]:
    """This machine's GPUs as answers (count, smallest memory, model) and its host memory."""
    assert ctx.probes is not None
    g = ctx.probes.gpus
    whole = g.whole_gpus
    sizes = [x.memory_total_gb for x in whole if x.memory_total_gb]
    if not sizes:
        sizes = [s.memory_gb for x in g.mig_gpus for s in x.mig_slices if s.memory_gb]
    out: dict[str, Any] = {
        "gpus_per_node": max(1, min(16, len(whole))) if whole else 1,
        "gpu_type": whole[0].short_name if whole else g.gpus[0].short_name + " MIG slice",
    }
    if sizes:
        out["gpu_memory_gb"] = math.floor(min(sizes) * 10) / 10
    if ctx.probes.host.memory_gb:
        out["host_memory_gb"] = float(ctx.probes.host.memory_gb)
    if g.vendor != "nvidia":  # AMD GPUs found through amdsmi: plan for them
        out["accelerator"] = g.vendor
    return out


# Nodes people rent: (GPUs per node, GPU model, GB per GPU). Host memory is not known from a name: not set.
NODES: dict[str, tuple[int, str, float]] = {
    "8x H100 80GB": (8, "H100", 80.0),
    "8x H200 141GB": (8, "H200", 141.0),
    "8x A100 80GB": (8, "A100", 80.0),
    "8x A100 40GB": (8, "A100", 40.0),
    "8x L40S 48GB": (8, "L40S", 48.0),
    "4x L4 24GB": (4, "L4", 24.0),
    "1x RTX 4090 24GB": (1, "RTX 4090", 24.0),
}


def gpus_choices(ctx: Context) -> list[tuple[Any, str]]:
    out: list[tuple[Any, str]] = []
    if ctx.get("cluster") == "local" and _gpus_found(ctx):
        assert ctx.probes is not None
        host = ctx.probes.host.memory_gb
        out.append((THIS_MACHINE, f"probed: {ctx.probes.gpus.describe()}" + (f"; {host:g} GB host memory" if host else "")))
    out += [(name, f"{n} × {t} with {m:g} GB each; host memory not checked") for name, (n, t, m) in NODES.items()]
    out.append((OTHER, "type the GPU count, memory and model"))
    return out


def default_gpus(ctx: Context) -> str:
    if ctx.get("cluster") == "local" and _gpus_found(ctx):
        return THIS_MACHINE
    if _use_ray_probe(ctx):
        return OTHER
    return next(iter(NODES))


def apply_gpus(value: Any, ctx: Context) -> dict[str, Any]:
    if value == THIS_MACHINE:
        return _probed_gpus(ctx)
    if value in NODES:
        n, gpu, mem = NODES[value]
        return {"gpus_per_node": n, "gpu_type": gpu, "gpu_memory_gb": mem}
    # other: the typed answers (kept when given before), asked next
    return {k: ctx.answers[k] for k in ("gpus_per_node", "gpu_memory_gb", "gpu_type") if k in ctx.answers}


def gpu_note(ctx: Context) -> str | None:
    p = ctx.probes
    if p is None:
        return None
    if _use_ray_probe(ctx):
        return f"probed: {p.ray.describe()}"
    if not p.gpus.found:
        return None  # no GPU: said once, with the probes
    if ctx.get("cluster") != "local":
        return "this machine's GPUs are not the cluster's: pick the nodes the job runs on"
    return f"probed: {p.gpus.describe()}"


def cluster_note(ctx: Context) -> str | None:
    p = ctx.probes
    if p is None:
        return None
    return f"probed: {p.ray.describe()}"


# --- the plan so far ----------------------------------------------------------------------------------


def applies(q: Question, ctx: Context) -> bool:
    """`q` is asked: its condition holds, and it is not an advanced setting the user chose to leave alone."""
    if not q.when(ctx):
        return False
    return not q.advanced(ctx) or ctx.decisions.get("advanced") is True


def open_fields(ctx: Context) -> set[str]:
    """Fields that questions still to come will answer."""
    out: set[str] = set()
    for q in QUESTIONS:
        if q.field not in ctx.asked and applies(q, ctx):
            out.update(q.fields)
    return out


def _blamed(problems: Sequence[Problem], ctx: Context) -> list[Problem]:
    """The problems no question still to come can fix (none of their keys, nor the keys their hints name, is open)."""
    waiting = open_fields(ctx)
    return [p for p in problems if not ((set(p.keys) | set(RELATED.get(p.rule, ()))) & waiting)]


def blame(q: Question, value: Any, ctx: Context) -> Problem | None:
    """The planner's error that refuses `value` as the answer to `q` given the answers so far, or None."""
    t = ctx.trial(q, value)
    problems = t.problems(t.answers)
    if not problems:
        return None
    blamed = _blamed(problems, t)
    return blamed[0] if blamed else None


def refusal(q: Question, value: Any, ctx: Context) -> str | None:
    """Why `value` cannot be the answer to `q` given the answers so far (the planner's message and fix), or None."""
    p = blame(q, value, ctx)
    if p is None:
        return None
    t = ctx.trial(q, value)
    shown = [x for x in (t.problems(t.answers, hints=True) or []) if x.rule == p.rule and x.keys == p.keys]
    p = shown[0] if shown else p  # the same refusal with the planner's confirmed suggestions in its hint
    return f"{p.message} — {p.hint} [{p.rule}]" if p.hint else f"{p.message} [{p.rule}]"


def nothing_passes(q: Question, ctx: Context) -> bool:
    """`q` offers choices and the plan so far accepts none of them: an earlier answer has to change."""
    if q.kind != "select" and q.choices is None:
        return False
    return all(v == OTHER or blame(q, v, ctx) is not None for v, _ in choices_for(q, ctx))


def earlier_to_change(q: Question, value: Any, ctx: Context) -> list[Question]:
    """The questions answered before whose answers the error refusing `value` names (every answered question
    when it names none of them): one of them may have to change instead."""
    p = blame(q, value, ctx)
    named = set(p.keys) | set(RELATED.get(p.rule, ())) if p is not None else set()
    answered = [o for o in QUESTIONS if o.field != q.field and o.field in ctx.asked and applies(o, ctx)]
    return [o for o in answered if set(o.fields) & named] or answered


def offered(q: Question, ctx: Context) -> list[tuple[Any, str]]:
    """The choices of `q` whose answer the plan so far accepts (all of them when none is accepted: the refusal
    then says why)."""
    all_choices = choices_for(q, ctx)
    good = [(v, d) for v, d in all_choices if v == OTHER or blame(q, v, ctx) is None]
    return good if [v for v, _ in good if v != OTHER] else all_choices


# --- LoRA: asked when training all weights does not fit ------------------------------------------------------

LORA_RANKS = (8, 16, 32, 64, 128, 256, 512)  # vLLM's served ranks (VLLM_LORA_RANKS) a person would pick


def _memory_refused(ctx: Context, **update: Any) -> bool:
    problems = ctx.problems({**ctx.answers, **update})
    return problems is not None and any(p.rule in MEMORY_RULES for p in problems)


def full_misfits(ctx: Context) -> bool:
    """Training all weights does not fit these GPUs (a memory rule refuses lora_rank=0)."""
    return _memory_refused(ctx, lora_rank=0)


def fitting_ranks(ctx: Context) -> list[int]:
    return [r for r in LORA_RANKS if not _memory_refused(ctx, lora_rank=r)]


def lora_asked(ctx: Context) -> bool:
    return not full_misfits(ctx) or bool(fitting_ranks(ctx))


def lora_choices(ctx: Context) -> list[tuple[Any, str]]:
    out: list[tuple[Any, str]] = []
    if not full_misfits(ctx):
        out.append((0, "train all weights"))
    out += [(r, f"LoRA adapters of rank {r} (alpha {2 * r})") for r in LORA_RANKS]
    return out


def default_lora_rank(ctx: Context) -> int:
    """0 (all weights) when it fits; else the LoRA rank 32 (or the nearest rank that fits)."""
    if not full_misfits(ctx):
        return 0
    ranks = fitting_ranks(ctx) or [32]
    return min(ranks, key=lambda r: (abs(r - 32), r))


def lora_note(ctx: Context) -> str | None:
    if full_misfits(ctx):
        ranks = fitting_ranks(ctx)
        return f"training all weights does not fit these GPUs; LoRA ranks that fit: {', '.join(map(str, ranks))}"
    return None


# --- prompts per step: values that pass the batch rules and the data ---------------------------------------


def _batch_step(ctx: Context) -> int:
    """prompts_per_step must be a multiple of this for the samples and updates to divide evenly."""
    n = ctx.get("samples_per_prompt") or _algo(ctx).default_n
    updates = int(ctx.get("updates_per_step"))
    gpus = int(ctx.get("nnodes")) * int(ctx.get("gpus_per_node"))
    # each update's samples (prompts_per_step / updates × n) must split evenly over the data-parallel ranks
    from wizard.verlspec.arithmetic import mini_multiple

    return updates * mini_multiple(gpus, int(n))


PROMPT_TARGETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def prompts_choices(ctx: Context) -> list[tuple[Any, str]]:
    try:
        step = _batch_step(ctx)
    except (ValueError, ZeroDivisionError, TypeError):
        step = 1
    values = sorted({max(step, round(t / step) * step) for t in PROMPT_TARGETS})
    n = ctx.get("samples_per_prompt") or _algo(ctx).default_n
    updates = int(ctx.get("updates_per_step"))
    return [(p, f"{p} prompts × {n} samples = {p * n} samples per step, in {updates} updates") for p in values]


def default_prompts_per_step(ctx: Context) -> int:
    """The offered value nearest the field's default (256) that the plan so far accepts."""
    base = int(Answers.model_fields["prompts_per_step"].default)
    q = BY_FIELD["prompts_per_step"]
    values = [v for v, _ in offered(q, ctx) if v != OTHER]
    return min(values, key=lambda p: (abs(p - base), p)) if values else base


def batch_note(ctx: Context) -> str | None:
    try:
        step = _batch_step(ctx)
    except (ValueError, ZeroDivisionError, TypeError):
        return None
    gpus = int(ctx.get("nnodes")) * int(ctx.get("gpus_per_node"))
    return f"a multiple of {step} divides evenly over {gpus} GPU(s) with these samples and updates"


# --- choices -------------------------------------------------------------------------------------------


def _literal_values(name: str) -> list[Any]:
    ann = Answers.model_fields[name].annotation
    args = [a for a in get_args(ann) if a is not type(None)]
    if len(args) == 1 and get_args(args[0]):
        return list(get_args(args[0]))
    return list(get_args(ann))


CLUSTER_TEXT = {
    "local": "one node (this machine or another); run.sh starts verl and its own Ray",
    "ray": "an existing Ray cluster (ray/submit.sh → ray job submit)",
    "kuberay": "Kubernetes with the KubeRay operator (k8s/rayjob.yaml, k8s/submit.sh)",
    "slurm": "a Slurm allocation that starts Ray on every node (slurm/job.sbatch)",
}
REWARD_TEXT = {
    "rule": "verl's rule-based scorer, chosen by each row's data_source (GSM8K, MATH, ...)",
    "model": "a reward model (sequence classifier) scores each response",
    "function": "your own Python scorer (file.py:function), or the bundle's reward/reward_fn.py",
    "sandbox": "code RL: each response's program runs against the row's test cases in a SandboxFusion service",
    "genrm": "an LLM judge (e.g. Qwen2.5-7B-Instruct) grades each response through verl's reward loop",
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


check_dataset = dataq.check_dataset


def needs_size(ctx: Context) -> bool:
    """model_params_b is asked only when the model cannot be sized from the catalogue, a folder or its name."""
    from wizard.planner.shapes import resolve_shape

    model = str(ctx.get("model"))
    try:
        return resolve_shape(model) is None
    except Exception:  # noqa: BLE001 - an unreadable local config.json: ask
        return True


# --- multi-turn tool calling: the agent loop, its tool and turns ------------------------------------------------

AGENT_TEXT = {
    "single_turn": "one response per prompt (verl's single_turn_agent)",
    "tool": "multi-turn tool calling (verl's tool_agent): the model calls a tool between turns",
}


def _tool_agent(ctx: Context) -> bool:
    return ctx.get("agent") == "tool"


def _default_turns(ctx: Context) -> str:
    from wizard.planner.agent import DEFAULT_TURNS

    return f"{DEFAULT_TURNS} assistant turns"


def turns_note(ctx: Context) -> str | None:
    """How the response length is shared by the turns (wizard.verlspec.arithmetic.turn_budget, as the planner)."""
    from wizard.planner.agent import DEFAULT_TURNS, TOOL_RESPONSE_TOKENS
    from wizard.verlspec.arithmetic import turn_budget

    turns = ctx.get("max_turns") or DEFAULT_TURNS
    b = turn_budget(int(ctx.get("max_response_length")), turns, TOOL_RESPONSE_TOKENS)
    return (f"max_response_length={b.response_length} covers every turn: with {turns} turns, {b.tool_replies} tool "
            f"replies take up to {b.tool_tokens} tokens, leaving ~{max(b.per_turn, 0)} per turn of the model's own")


# --- vision-language models: asked only when the model has a vision tower ---------------------------------------


def _shape(ctx: Context) -> Any:
    from wizard.planner.shapes import resolve_shape

    try:
        return resolve_shape(str(ctx.get("model")))
    except Exception:  # noqa: BLE001 - an unreadable local config.json: not a known vision-language model
        return None


def _vision(ctx: Context) -> bool:
    shape = _shape(ctx)
    return bool(shape is not None and shape.vision)


def _vision_data(ctx: Context) -> bool:
    """A vision-language model on data that may carry images (the planner's has_images)."""
    from wizard.planner.pipeline import TEXT_DATASETS

    return _vision(ctx) and str(ctx.get("dataset")) not in TEXT_DATASETS


IMAGE_TOKENS = (4096, 2048, 1280, 1024, 768, 512, 256, 128, 64)  # image tokens per image a person would pick


def pixel_choices(ctx: Context) -> list[tuple[Any, str]]:
    """Largest-image budgets as pixels, from the model's own patch and merge (tokens = pixels / (patch × merge)²)."""
    shape = _shape(ctx)
    factor = shape.vision_patch * shape.vision_merge if shape is not None and shape.vision else 28
    out: list[tuple[Any, str]] = []
    for tokens in IMAGE_TOKENS:
        pixels = tokens * factor * factor
        if not answer_problems({"image_max_pixels": pixels}):  # within the field's range
            side = int(math.sqrt(pixels))
            out.append((pixels, f"{tokens} image tokens per image (about {side}×{side} pixels)"))
    return out


def image_note(ctx: Context) -> str | None:
    shape = _shape(ctx)
    if shape is None or not shape.vision:
        return None
    factor = shape.vision_patch * shape.vision_merge
    return (f"{ctx.get('model')} turns each {factor}×{factor} pixels into one token; images and text must fit "
            f"max_prompt_length={ctx.get('max_prompt_length')} (a longer one, under advanced settings, fits bigger "
            "images; data/prepare_data.py shrinks bigger ones)")


# --- the questionnaire ---------------------------------------------------------------------------------

QUESTIONS: tuple[Question, ...] = (
    # hardware
    Question("cluster", "select", "hardware", default=default_cluster, choices=_texts(CLUSTER_TEXT), note=cluster_note),
    Question("nnodes", "int", "hardware", when=lambda c: c.get("cluster") != "local", default=default_nnodes),
    Question("gpus", "select", "hardware", default=default_gpus, choices=gpus_choices, note=gpu_note,
             apply=apply_gpus, owns=("gpus_per_node", "gpu_memory_gb", "gpu_type", "host_memory_gb", "accelerator")),
    Question("gpus_per_node", "int", "hardware", when=_other_gpus, default=default_gpus_per_node),
    Question("gpu_memory_gb", "float", "hardware", when=_other_gpus),
    Question("gpu_type", "text", "hardware", when=_other_gpus),
    # algorithm and roles
    Question("algorithm", "select", "algorithm", choices=algorithm_choices),
    Question("model", "text", "algorithm"),
    Question("model_params_b", "float", "algorithm", when=needs_size,
             note=lambda c: f"{c.get('model')!r} is not in the catalogue and its name carries no size"),
    Question("lora_rank", "select", "algorithm", when=lora_asked, advanced=lambda c: not full_misfits(c),
             default=default_lora_rank, choices=lora_choices, note=lora_note),
    # data
    Question("dataset", "text", "data", check=check_dataset),
    # the file's schema decides: its chat column is offered, the other columns default to what the schema maps
    Question("messages_field", "select", "data", when=dataq.has_chat, choices=dataq.chat_choices,
             note=dataq.columns_note, check=dataq.check_column),
    Question("question_field", "text", "data", when=dataq.asks_question, default=dataq.default_question,
             note=dataq.columns_note, check=dataq.check_column),
    Question("answer_field", "text", "data", when=_is_local_file, default=dataq.default_answer,
             note=dataq.columns_note, check=dataq.check_column),
    Question("answer_format", "select", "data", when=_is_local_file,
             choices=lambda c: [("number", "a number (GSM8K-style)"), ("boxed", "\\boxed{...} (MATH-style)"),
                                ("text", 'free text after "Answer:"'),
                                ("code", "a program, run against the test cases the answer column holds")]),
    # a vision-language model's images (only when the model has a vision tower and the data may carry images)
    Question("image_key", "text", "data", when=lambda c: _vision(c) and _is_local_file(c),
             default=dataq.offered_column("image_key"), note=dataq.offered_note("image_key"),
             check=dataq.check_image_column),
    # per-row columns verl reads: asked when the file has one named as verl's preprocessing names it (offered)
    *(Question(k, "text", "data", when=dataq.offers(k), default=dataq.offered_column(k), optional=True,
               note=dataq.offered_note(k), check=dataq.check_column, auto=lambda c: "none: one value for every row")
      for k in ("data_source_field", "agent_name_field")),
    Question("images_per_prompt", "int", "data", when=_vision_data),
    Question("image_max_pixels", "int", "data", when=_vision_data, choices=pixel_choices, typed=True,
             note=image_note),
    Question("reward", "select", "algorithm", choices=_texts(REWARD_TEXT)),
    Question("reward_model", "text", "algorithm", when=lambda c: c.get("reward") in ("model", "genrm")),
    # the judge's own pool is more nodes: only where the cluster has more than this machine
    Question("judge_gpus", "int", "algorithm", when=lambda c: c.get("reward") == "genrm" and c.get("cluster") != "local"),
    Question("judge_max_tokens", "int", "algorithm", when=lambda c: c.get("reward") == "genrm", advanced=always),
    Question("reward_function", "text", "algorithm", when=lambda c: c.get("reward") == "function", optional=True,
             auto=lambda c: "the bundle's reward/reward_fn.py"),
    Question("sandbox_url", "text", "algorithm", when=lambda c: c.get("reward") == "sandbox"),
    # batch
    Question("prompts_per_step", "int", "batch", default=default_prompts_per_step, choices=prompts_choices,
             typed=True, note=batch_note),
    # cluster artefacts a cluster run needs
    Question("shared_pvc", "text", "cluster", when=lambda c: c.get("cluster") == "kuberay", optional=True,
             auto=lambda c: "none: each pod's working folder is its own"),
    # Without shared_pvc the pods' working folder is an emptyDir: checkpoints need a PVC of their own (VI757).
    Question("checkpoint_pvc", "text", "cluster", optional=True, default=lambda c: "verl-checkpoints",
             when=lambda c: c.get("cluster") == "kuberay" and not c.get("shared_pvc") and (c.get("save_freq") or 0) > 0,
             note=lambda c: "a ReadWriteMany PVC in the namespace; the next step checks that it exists",
             auto=lambda c: "none: the plan refuses checkpoints on pod-local storage (VI757)"),
    Question("slurm_partition", "text", "cluster", when=lambda c: c.get("cluster") == "slurm", optional=True,
             auto=lambda c: "the cluster's default"),
    # everything else: verl-init's choices unless the user asks to adjust them
    Question("advanced", "confirm", "advanced", default=lambda c: False),
    Question("host_memory_gb", "float", "hardware", advanced=always, when=lambda c: not _on_this_machine(c),
             optional=True, auto=lambda c: "not checked"),
    Question("critic_model", "text", "algorithm", when=lambda c: _algo(c).critic, advanced=always, optional=True,
             auto=lambda c: f"the policy, {c.get('model')}"),
    Question("rollout_engine", "select", "algorithm", advanced=always, choices=_texts(ENGINE_TEXT)),
    Question("train_backend", "select", "algorithm", advanced=always, choices=_texts(BACKEND_TEXT)),
    Question("max_prompt_length", "int", "data", advanced=always),
    Question("max_response_length", "int", "data", advanced=always),
    # multi-turn tool calling: the agent loop is an advanced setting; its tool and turns follow once agent=tool
    Question("agent", "select", "algorithm", advanced=always, choices=_texts(AGENT_TEXT)),
    Question("tool", "text", "algorithm", when=_tool_agent, optional=True,
             auto=lambda c: "gsm8k, the bundle's GSM8K answer checker",
             note=lambda c: "gsm8k, or module.Class: your verl BaseTool subclass, importable where verl runs"),
    Question("max_turns", "int", "algorithm", when=_tool_agent, optional=True, note=turns_note,
             auto=_default_turns),
    Question("freeze_vision_tower", "confirm", "algorithm", when=_vision, advanced=always,
             note=lambda c: "verl 0.9.1 declares actor.freeze_vision_tower but no worker reads it (VI571): the tower "
                            "is trained either way"),
    Question("samples_per_prompt", "int", "batch", advanced=always, optional=True,
             auto=lambda c: f"{_algo(c).default_n}, {c.get('algorithm')}'s default"),
    Question("updates_per_step", "int", "batch", advanced=always),
    Question("total_steps", "int", "batch", advanced=always, optional=True,
             auto=lambda c: "15 passes over the data (epochs)"),
    Question("image", "text", "cluster", when=lambda c: c.get("cluster") in ("kuberay", "slurm"), advanced=always,
             optional=True,
             auto=lambda c: "a verl 0.9.1 release image" if c.get("cluster") == "kuberay" else "no container"),
    Question("k8s_namespace", "text", "cluster", when=lambda c: c.get("cluster") == "kuberay", advanced=always,
             optional=True, auto=lambda c: "kubectl's current namespace"),
    Question("k8s_secret", "text", "cluster", when=lambda c: c.get("cluster") == "kuberay", advanced=always),
    Question("shm_size_gb", "int", "cluster", when=lambda c: c.get("cluster") == "kuberay", advanced=always,
             optional=True, auto=lambda c: "KubeRay's default"),
    Question("slurm_account", "text", "cluster", when=lambda c: c.get("cluster") == "slurm", advanced=always,
             optional=True, auto=lambda c: "your default account"),
    Question("slurm_time", "text", "cluster", when=lambda c: c.get("cluster") == "slurm", advanced=always,
             optional=True, auto=lambda c: "the partition's limit"),
    Question("logger", "checkbox", "bookkeeping", advanced=always, choices=logger_choices),
    Question("experiment_name", "text", "bookkeeping", advanced=always, optional=True, auto=lambda c: _experiment(c)),
)


def _experiment(ctx: Context) -> str:
    from wizard.planner.pipeline import experiment_name

    a = ctx.model()
    return experiment_name(a) if a is not None else "algorithm-model"


# Fields the wizard does not ask, and why. They stay at their defaults (verl-init chooses, with the reason in
# PLAN.md) and can be set with --set or in the bundle's verl-init.yaml, then replayed with --answers.
NOT_ASKED: dict[str, str] = {
    "accelerator": "taken from the probed GPUs (NVML: nvidia, amdsmi: amd); else --set accelerator=amd|ascend or a profile",
    "lora_alpha": "twice lora_rank, the usual choice",
    "sandbox_max_concurrent": "64 calls in flight per reward worker, verl's default (reward=sandbox)",
    "sandbox_memory_mb": "1024 MB per program, verl's default (reward=sandbox)",
    "overrides": "the escape hatch for verl keys the answers do not model: --override or the answers file",
    "train_files": "data/prepare_data.py writes the training file from dataset",
    "val_files": "data/prepare_data.py writes the validation file from dataset",
    "epochs": "total_steps is asked; without it verl runs 15 epochs",
    "learning_rate": "1e-6 (3e-5 with LoRA), verl's recipes",
    "critic_learning_rate": "1e-5, verl's recipes",
    "kl_coef": "0.001 by algorithm (none for dapo/gspo)",
    "temperature": "1.0 for RL sampling",
    "response_length_mean": f"{_RESPONSE_SQRT:g} × √max_response_length (the step-time calibration's median), half of "
                            "max_response_length for a model that reasons by default; named in PLAN.md",
    "rollout_tp": "chosen by the memory fit, the GPU topology and the predicted step time",
    "gpu_memory_utilization": "chosen by the memory fit",
    "dynamic_batch": "on with FSDP, off with Megatron, unless the other is predicted faster",
    "micro_batch_per_gpu": "chosen by the memory fit",
    "max_tokens_per_gpu": "chosen by the memory fit",
    "sequence_parallel": "chosen by the memory fit and the attention heads",
    "megatron_tp": "chosen by the memory fit",
    "megatron_pp": "chosen by the memory fit",
    "megatron_vpp": "none: no interleaved pipeline schedule unless set",
    "megatron_cp": "chosen by the memory fit (context parallel only when nothing else fits)",
    "megatron_ep": "chosen by the memory fit for a MoE model (whole experts per GPU, groups inside a node)",
    "megatron_etp": "1 for a MoE model (whole experts on each GPU)",
    "rollout_ep": "rollout TP × DP for a MoE model (the engine's expert parallel)",
    "rollout_dp": "1, or for a MoE model the least rollout data parallel whose expert split fits",
    "offload": "only when nothing else fits (the memory fit)",
    "project_name": "verl-init, a tracker project name",
    "save_freq": "every 20 steps",
    "test_freq": "every 5 steps",
    "resume": "auto: a relaunch continues from the newest checkpoint",
    "resume_from_path": "only for starting from a given checkpoint (resume=path)",
    "checkpoint_dir": "checkpoints/<project>/<experiment> in the bundle folder (PLAN.md says where, per cluster)",
    "keep_checkpoints": "every checkpoint is kept",
    "job_name": "from experiment_name",
    "cpus_per_node": "8 per GPU (at least 3 per GPU + 1)",
    "memory_per_node_gb": "90% of host_memory_gb, else 32 GB per GPU",
    "head_cpus": "10 for verl's TaskRunner and TransferQueue",
    "head_memory_gb": "64 GB",
    "gpu_wait_timeout_s": "600 s",
    "k8s_ttl_seconds": "3600 s",
    "instruction": "asks for the answer_format the scorer reads",
    "system_prompt": "none",
    "data_source": "selects verl's scorer from the dataset and answer_format",
    "val_fraction": "5% of a local file is held out",
    "split_seed": "42",
}

# Fields a rule's hint names besides its keys: a question still to come that answers one of them can fix it, and a
# rejected plan asks them again.
RELATED: dict[str, tuple[str, ...]] = {
    "VI602": ("lora_rank",),  # "... or LoRA rank 32 on these GPUs"
    "VI605": ("lora_rank", "nnodes"),  # "use more nodes, LoRA, or nodes with more host memory"
    "VI513": ("reward", "answer_format"),
    "VI514": ("reward", "answer_format"),
}

BY_FIELD: dict[str, Question] = {q.field: q for q in QUESTIONS}


def applicable(ctx: Context) -> list[Question]:
    return [q for q in QUESTIONS if applies(q, ctx)]


def choices_for(q: Question, ctx: Context) -> list[tuple[Any, str]]:
    if q.choices is not None:
        return list(q.choices(ctx))
    return [(v, "") for v in _literal_values(q.field)]


def _computed_default(q: Question, ctx: Context) -> Any:
    if q.default is not None:
        try:
            value = q.default(ctx)
        except Exception:  # noqa: BLE001 - a broken default falls back to the field's own
            value = None
        if value is not None:
            return value
    if q.optional or q.field in DECISIONS:
        return None
    return Answers.model_fields[q.field].get_default(call_default_factory=True)


def default_for(q: Question, ctx: Context) -> Any:
    """The value offered: the answer given before, else the probe/planner default, else the field's default —
    and when the plan so far refuses that, the first choice it accepts."""
    if q.field in DECISIONS and q.field in ctx.decisions:
        return ctx.decisions[q.field]
    if q.field in ctx.answers and q.field not in DECISIONS:
        return ctx.answers[q.field]
    value = _computed_default(q, ctx)
    if q.kind == "confirm" or (q.choices is None and q.kind != "select"):
        return value
    try:
        if blame(q, value, ctx) is None:
            return value
        good = [v for v, _ in offered(q, ctx) if v != OTHER]
    except Exception:  # noqa: BLE001 - a default must never stop the questionnaire
        return value
    return good[0] if good else value


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


def validate(q: Question, value: Any, ctx: Context) -> str | None:
    """The immediate check of an answer already parsed: the question's own check, then the plan so far."""
    if q.check is not None and q.kind in ("select", "checkbox"):
        error = q.check(value, ctx)
        if error:
            return error
    if q.kind == "checkbox":
        return None
    return refusal(q, value, ctx)
