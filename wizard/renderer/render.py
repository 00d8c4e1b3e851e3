"""Plan → files. Pure: returns {relative path: text}; writes nothing.

Every template under templates/ maps 1:1 to a bundle file (`run.sh.j2` → `run.sh`). Templates
only place values: numbers come from the plan, and quoting is done here, by filters: `sh` (shlex)
for shell, YAML through the YAML dumper, `md` for Markdown table cells.
"""

from __future__ import annotations

import importlib
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Optional

from wizard.planner import dataprep
from wizard.planner.nextsteps import launch_commands
from wizard.planner.pipeline import Plan

# Files that are rendered for every plan.
CORE_TEMPLATES = ("verl_config.yaml.j2", "run.sh.j2", "PLAN.md.j2", "verl-init.yaml.j2")
EXECUTABLE = frozenset({"run.sh"})

# Capabilities that add files to a bundle. Each provider is `module:function`, a pure function
# `(plan) -> list[Artefact]`; a template `k8s/rayjob.yaml.j2` becomes bundle file `k8s/rayjob.yaml`.
ARTEFACT_PROVIDERS = (
    "wizard.renderer.artefacts.cluster:artefacts",
    "wizard.renderer.artefacts.data:artefacts",
)


@dataclass(frozen=True)
class Artefact:
    template: str  # path under templates/, ending in .j2
    context: dict[str, Any] = field(default_factory=dict)  # extra values for this template only


def dump_yaml(data: Any) -> str:
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        lines = value.split("\n")
        style: str | None = None
        if any(not line.isprintable() or line != line.rstrip() for line in lines):
            style = '"'  # control characters, NEL, U+2028...: escaped, never raw
        elif len(lines) > 1 and value == value.strip():
            style = "|"
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=4096, default_flow_style=False)


def sh(value: Any) -> str:
    return shlex.quote(str(value))


def sh_path(path: str) -> str:
    """A path as one shell word; `${oc.env:HOME}` (OmegaConf) becomes "$HOME" (shell)."""
    marker = "${oc.env:HOME}"
    if path.startswith(marker):
        return '"$HOME"' + shlex.quote(path[len(marker) :])
    return shlex.quote(path)


def oneline(value: Any) -> str:
    """For comments: one line, with newlines and other control characters shown escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(value))


def md(value: Any) -> str:
    """Plain Markdown text (also a table cell): one line; `\\`, `|`, backticks, `<`, `>` and `](` escaped, so a
    user's value can neither open a code span nor an HTML tag or link, nor split a table row."""
    text = oneline(" ".join(str(value).split()))
    for ch in ("\\", "|", "`", "<", ">"):
        text = text.replace(ch, "\\" + ch)
    return " ".join(text.replace("](", "]\\(").split())


def code(value: Any, cell: bool = False) -> str:
    """A whole Markdown code span holding `value` literally: fenced by more backticks than the value's longest
    run of them. In a table cell (`cell=True`) backslashes and `|` are escaped, as GFM tables read them first."""
    text = " ".join(oneline(" ".join(str(value).split())).split())
    if cell:
        text = text.replace("\\", "\\\\").replace("|", "\\|")
    if not text:
        return "``"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _env():
    import jinja2

    from wizard.resources import data_dir

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["sh"] = sh
    env.filters["sh_path"] = sh_path
    env.filters["md"] = md
    env.filters["code"] = code
    env.filters["oneline"] = oneline
    return env


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if value is None:
        return "null"
    return str(value)


def data_where(cluster: str, shared_pvc: Optional[str], relative: list[str], hub: Optional[str]) -> list[str]:
    """Where the data files must be when verl reads them, per cluster type (PLAN.md's Data section)."""
    if not relative:
        return ["The data paths are absolute or remote: they must exist on every node that runs verl's driver."]
    names = ", ".join(code(f) for f in relative)  # Markdown: the template places these lines as they are
    if cluster == "local":
        return [f"{names} resolve in the bundle folder (run.sh runs there): write them before `./run.sh`."]
    if cluster == "ray":
        return [f"{names} resolve in the bundle folder, which `ray/submit.sh` uploads as the job's working_dir: "
                "write them here before submitting. Ray refuses a working_dir over its upload limit (about "
                "500 MiB): for large data, put the files on storage every node mounts and set train_files / "
                "val_files to absolute paths."]
    if cluster == "slurm":
        return [f"{names} resolve in the bundle folder, where every Slurm step runs: keep the bundle on a "
                "filesystem all nodes mount and write the files before `sbatch`."]
    if hub:
        where = f"the head pod writes them on PVC `{shared_pvc}`, which every pod mounts" if shared_pvc else \
            "every pod writes its own copy"
        return [f"{names} resolve in the pods' working folder: {where} before Ray starts (init container "
                f"prepare-data runs this bundle's data/prepare_data.py from the ConfigMap and downloads {hub} "
                "from the Hugging Face hub; the pods need access to it, HF_TOKEN from the Secret when set)."]
    if shared_pvc:
        return [f"{names} resolve in the pods' working folder, PVC `{shared_pvc}`: copy them there (e.g. "
                "`kubectl cp`, or run data/prepare_data.py in a pod that mounts it) before applying the manifests."]
    return [f"{names} resolve in the pods' working folder, a pod-local emptyDir: the pods cannot see this bundle's "
            "data/. Set shared_pvc (a ReadWriteMany PVC holding the files), or bake the files into the image and "
            "point train_files / val_files at their absolute paths."]


def context(plan: Plan) -> dict[str, Any]:
    """Everything the templates place, computed here (templates hold no logic)."""
    a = plan.answers
    fx = plan.facts
    defaults: list[Any] = ["ppo_trainer"]
    if plan.base_config == "megatron":
        defaults.append({"override model_engine": "megatron"})
    defaults.append("_self_")
    doc = {"hydra": {"searchpath": ["pkg://verl.trainer.config"]}, "defaults": defaults}
    doc.update(plan.nested())

    local_files = [
        plan.value(k)
        for k in ("data.train_files", "data.val_files")
        if "://" not in plan.value(k) and ("${" not in plan.value(k) or plan.value(k).startswith("${oc.env:HOME}/"))
    ]
    local_files = list(dict.fromkeys(local_files))
    rows = [
        {"key": k, "value": _fmt(c.value), "source": c.source, "reason": c.reason} for k, c in plan.settings.items()
    ]
    n = fx["samples_per_prompt"]
    if fx["dynamic_batch"]:
        micro_line = (
            f"Micro-batches are packed by token budget: {fx['max_tokens_per_gpu']} tokens per GPU for training, "
            f"{fx['logprob_max_tokens_per_gpu']} for log-prob passes (one sequence is at most {fx['seq_len']} tokens)."
        )
    else:
        micro_line = (
            f"Each GPU splits its {fx['samples_per_rank_per_update']} samples into micro-batches of "
            f"{fx['micro_batch_per_gpu']} ({fx['samples_per_rank_per_update'] // fx['micro_batch_per_gpu']} "
            f"gradient-accumulation steps); log-prob passes use micro-batches of {fx['logprob_micro_batch_per_gpu']}."
        )
    batch_lines = [
        f"{fx['prompts_per_step']} prompts per step × {n} samples each = {fx['samples_per_step']} samples per step.",
        f"{fx['updates_per_step']} updates per step: mini-batches of {fx['mini_batch_prompts']} prompts = "
        f"{fx['samples_per_update']} samples each; every sample is used once per step.",
        f"{fx['dp']} data-parallel ranks × {fx['samples_per_rank_per_update']} samples per rank = "
        f"{fx['samples_per_update']} samples per update.",
        micro_line,
    ]
    layout_lines = [
        f"{a.nnodes} node(s) × {a.gpus_per_node} GPUs ({a.gpu_type}, {a.gpu_memory_gb:g} GB) = {plan.n_gpus} GPUs, one resource pool shared by all roles.",
        f"Rollout: {fx['rollout_replicas']} {a.rollout_engine} replica(s) of tensor-parallel size {fx['rollout_tp']}, each inside one node.",
    ]
    if plan.base_config == "megatron":
        layout_lines.append(
            f"Training: Megatron TP={fx['megatron_tp']} × PP={fx['megatron_pp']}, data-parallel size {fx['dp']}."
        )
    else:
        layout_lines.append(
            f"Training: {a.train_backend.upper()} over {plan.n_gpus} GPUs, Ulysses sequence parallel {fx['sequence_parallel']}, data-parallel size {fx['dp']}."
        )
    answers_doc = {
        "verl_init_version": plan.version,
        "verl_version": plan.verl_version,
        "answers": a.model_dump(mode="json", exclude_unset=True),  # paths already absolute (planner)
    }
    command = "python3 -m verl.trainer.main_ppo --config-path <bundle> --config-name verl_config"
    relative = [f for f in local_files if not f.startswith(("/", "${"))]
    return {
        "data_where": data_where(a.cluster, a.shared_pvc, relative, dataprep.hub_prepared_in_place(
            a, plan.base_dir, str(plan.value("data.train_files")), str(plan.value("data.val_files")))),
        "version": plan.version,
        "verl_version": plan.verl_version,
        "title": f"{a.algorithm} on {plan.value('actor_rollout_ref.model.path')} ({a.nnodes}×{a.gpus_per_node} GPUs)",
        "config_yaml": dump_yaml(doc),
        "answers_yaml": dump_yaml(answers_doc),
        "command": command,
        "launch": launch_commands(plan)[0],
        "model": plan.value("actor_rollout_ref.model.path"),
        "experiment": plan.value("trainer.experiment_name"),
        "project": a.project_name,
        "train_files": plan.value("data.train_files"),
        "val_files": plan.value("data.val_files"),
        "local_files": local_files,
        "prepared_files": [f for f in local_files if f in (dataprep.PREPARED_TRAIN, dataprep.PREPARED_VAL)],
        "own_files": [f for f in local_files if f not in (dataprep.PREPARED_TRAIN, dataprep.PREPARED_VAL)],
        "dataset": a.dataset,
        "nnodes": a.nnodes,
        "gpus_per_node": a.gpus_per_node,
        "n_gpus": plan.n_gpus,
        "check_local_gpus": a.cluster == "local",
        "needs_wandb": "wandb" in a.logger,
        "roles": plan.roles,
        "batch_lines": batch_lines,
        "layout_lines": layout_lines,
        "rows": rows,
        "findings": [p.line() for p in plan.findings],
        "memory": _memory_rows(plan),
    }


def _memory_rows(plan: Plan) -> dict[str, Any]:
    from wizard.planner.memory import PHASES

    m = plan.memory
    if m is None:
        return {"known": False, "rows": [], "phases": list(PHASES), "summary": "not estimated (the model could not be sized)"}
    phases = [p for p in PHASES if p in m.phases]
    keys = list(dict.fromkeys(t.label for p in phases for t in m.phases[p]))
    tables = {p: m.table(p) for p in phases}
    rows = [{"part": k, "cells": [f"{tables[p][k]:.1f}" if k in tables[p] else "" for p in phases]} for k in keys]
    rows.append({"part": "**total**", "cells": [f"{m.phase_gib(p):.1f}" for p in phases]})
    rows.append({"part": "band (low – high)", "cells": ["{:.1f} – {:.1f}".format(*m.band(p)) for p in phases]})
    summary = (
        f"{m.verdict_line()[0].upper()}{m.verdict_line()[1:]}. "
        f"GiB = 2^30 bytes; the card's {m.gpu_gb:g} GB is {m.capacity_gib:.1f} GiB as it reports itself. The band is "
        f"±{int(m.margin * 100)}% (the calibration on measured verl runs, benchmarks/memory_calibration.md), and its high "
        f"end also covers micro-batches of full-length sequences. The rollout KV cache holds {m.kv_seqs:.0f} full "
        f"sequences per GPU. Host memory per node for offloaded state and the sleeping engine: ~{m.host_gb_per_node:.0f} GB."
    )
    return {"known": True, "rows": rows, "phases": phases, "summary": summary}


def render(plan: Plan) -> dict[str, str]:
    """Render every bundle file for a plan. Pure: the same plan gives the same bytes."""
    env = _env()
    ctx = context(plan)
    files: dict[str, str] = {}
    for name in CORE_TEMPLATES:
        files[name[: -len(".j2")]] = env.get_template(name).render(**ctx)
    for provider in ARTEFACT_PROVIDERS:
        module, _, func = provider.partition(":")
        for art in getattr(importlib.import_module(module), func)(plan):
            out = art.template[: -len(".j2")]
            if out in files:
                raise ValueError(f"two templates render {out}")
            files[out] = env.get_template(art.template).render(**{**ctx, **art.context})
    return files
