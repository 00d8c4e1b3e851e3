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
from wizard.planner.recompute import plan_line
from wizard.planner.state import Plan
from wizard.verlspec.lora import MEGATRON_TARGET_MODULES

# Files that are rendered for every plan.
CORE_TEMPLATES = ("verl_config.yaml.j2", "run.sh.j2", "PLAN.md.j2", "verl-init.yaml.j2")
EXECUTABLE = frozenset({"run.sh"})

# Capabilities that add files to a bundle. Each provider is `module:function`, a pure function
# `(plan) -> list[Artefact]`; a template `k8s/rayjob.yaml.j2` becomes bundle file `k8s/rayjob.yaml`.
ARTEFACT_PROVIDERS = (
    "wizard.renderer.artefacts.cluster:artefacts",
    "wizard.renderer.artefacts.data:artefacts",
    "wizard.renderer.artefacts.checkpoints:artefacts",
    "wizard.renderer.artefacts.agent:artefacts",
    "wizard.renderer.artefacts.sandbox:artefacts",
)


@dataclass(frozen=True)
class Artefact:
    template: str  # path under templates/, ending in .j2
    context: dict[str, Any] = field(default_factory=dict)  # extra values for this template only


def dump_yaml(data: Any) -> str:
    import yaml

    from wizard.renderer.yamlout import omegaconf_resolvers

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
    omegaconf_resolvers(_Dumper)  # a string OmegaConf would read as a number is quoted (1e3)
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


ABSOLUTE_WHERE = {
    "local": "this machine",
    "ray": "every node of the Ray cluster (verl's driver may run on any)",
    "slurm": "every node of the allocation (inside the container too, when image is set: it mounts only the bundle)",
    "kuberay": "the pods: bake them into the image or mount a volume there",
}


def source_where(cluster: str, shared_pvc: Optional[str], source: str) -> list[str]:
    """Where the local data file data/prepare_data.py reads (the `dataset` answer) must be (PLAN.md)."""
    how = (f"{code(source)} (relative to the bundle folder)" if not source.startswith(("/", "~"))
           else f"{code(source)}")
    line = f"Your data file {how} is read by `data/prepare_data.py` on this machine"
    if cluster == "kuberay":
        return [line + f", which writes `data/`: copy that onto PVC `{shared_pvc}` for the pods."]
    keep = (": keep it beside the bundle at the same relative place when you copy the bundle to another machine"
            if not source.startswith(("/", "~")) else ": it must exist at that path where you run it")
    return [line + keep + "."]


def data_where(cluster: str, shared_pvc: Optional[str], relative: list[str], hub: Optional[str],
               absolute: Optional[list[str]] = None) -> list[str]:
    """Where the data files must be when verl reads them, per cluster type (PLAN.md's Data section)."""
    lines = []
    if absolute:
        lines.append(f"{', '.join(code(f) for f in absolute)}: absolute; they must exist at that path on "
                     f"{ABSOLUTE_WHERE.get(cluster, 'every node that runs verl')}.")
    if not relative:
        return lines or ["The data paths are remote: every node that runs verl's driver must reach them."]
    return lines + _relative_where(cluster, shared_pvc, relative, hub)


def _relative_where(cluster: str, shared_pvc: Optional[str], relative: list[str], hub: Optional[str]) -> list[str]:
    names = ", ".join(code(f) for f in relative)  # Markdown: the template places these lines as they are
    if cluster == "local":
        return [f"{names} resolve from the bundle folder (run.sh runs there), on this machine: they must exist "
                "before `./run.sh` (`python3 data/prepare_data.py` writes the bundle's `data/*.parquet`)."]
    if cluster == "ray":
        return [f"{names} resolve in the bundle folder, which `ray/submit.sh` uploads as the job's working_dir: "
                "write them here before submitting. Ray refuses a working_dir over its upload limit (about "
                "500 MiB): for large data, put the files on storage every node mounts and set train_files / "
                "val_files to absolute paths."]
    if cluster == "slurm":
        return [f"{names} resolve from the bundle folder, where every Slurm step runs: keep the bundle (and any "
                "file outside it these paths reach) on a filesystem every node mounts, and write them before `sbatch`."]
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


def config_doc(plan: Plan, *, planned: bool = False) -> dict[str, Any]:
    """verl_config.yaml as a mapping: verl's tree as the defaults, then the settings (`planned=True`: as planned,
    before the answers' overrides, which `verl-init check` lints against it: wizard.check.planned)."""
    defaults: list[Any] = ["ppo_trainer"]
    if plan.base_config == "megatron":
        defaults.append({"override model_engine": "megatron"})
    defaults.append("_self_")
    doc: dict[str, Any] = {"hydra": {"searchpath": ["pkg://verl.trainer.config"]}, "defaults": defaults}
    doc.update(plan.nested(plan.planned_settings() if planned else None))
    return doc


def merger_backend(plan: Plan) -> str:
    """verl's model merger backend for the plan's checkpoints (model_merger/base_model_merger.py:34)."""
    return "megatron" if plan.base_config == "megatron" else "fsdp"


def hf_subdir(plan: Plan) -> str:
    """Where a checkpoint's actor/ holds the model's config and tokenizer, which the merger reads
    (model_merger/base_model_merger.py:127: model/huggingface with Megatron's v2 layout)."""
    return "model/huggingface" if plan.base_config == "megatron" else "huggingface"


def checkpoint_lines(plan: Plan) -> list[str]:
    """PLAN.md's "Checkpoints and export" section, one Markdown paragraph per item (values already escaped)."""
    a, fx = plan.answers, plan.facts
    where = str(fx["checkpoint_dir"])
    mode = fx["resume"]
    if mode == "path":
        resume = (f"Resume: `trainer.resume_mode=resume_path`: the run starts from {code(a.resume_from_path)} "
                  "(its step number, weights, optimizer and dataloader position).")
    elif mode == "disable":
        resume = "Resume: `trainer.resume_mode=disable`: every launch starts from the model, whatever is saved."
    else:
        resume = (f"Resume: `trainer.resume_mode=auto`: a relaunch of the same bundle continues from the step "
                  f"named in {code(where + '/latest_checkpointed_iteration.txt')}, or starts fresh when there is none.")
    if a.save_freq <= 0:
        return [f"No checkpoints are saved (save_freq={a.save_freq}): set save_freq to a step count to save them "
                f"to {code(where)}.", resume]
    critic = ", `critic/` (the critic's, same parts)" if "critic" in plan.roles else ""
    keep = (f" Only the newest {a.keep_checkpoints} are kept." if a.keep_checkpoints is not None else
            " Every checkpoint is kept (set keep_checkpoints to bound the disk they use).")
    hf = hf_subdir(plan)
    saved = (f"Saved every {a.save_freq} steps and at the last step to {code(where + '/global_step_N/')}: `actor/` "
             "(model shards, optimizer and LR-scheduler state, RNG: verl's save_contents model, optimizer, extra; and "
             f"`{hf}/` with the model's config and tokenizer){critic}, `data.pt` (the dataloader's position).{keep}")
    relative = not where.startswith(("/", "${"))
    if a.cluster == "local":
        place = (f"Where: {code(where)} in the bundle folder (run.sh starts verl there)." if relative else
                 f"Where: {code(where)} on this machine.")
    elif a.cluster == "slurm":
        place = (f"Where: {code(where)} in the bundle folder, on the filesystem every node mounts (each node's ranks "
                 "write their shards there)." if relative else
                 f"Where: {code(where)}: every node writes its ranks' shards there, so it must be storage they all "
                 "mount.")
    elif a.cluster == "ray":
        place = ("Where: inside the Ray job's working_dir, a temporary copy of the bundle on each node: lost when the "
                 "job ends (VI556). Set checkpoint_dir to storage every node mounts." if relative else
                 f"Where: {code(where)}: every node writes its ranks' shards there, so it must be storage they all "
                 "mount.")
    else:
        place = (f"Where: {code(where)} in the pods' working folder, PVC `{a.shared_pvc}`: it outlives the pods, so "
                 "a new RayJob resumes from it." if a.shared_pvc else
                 f"Where: {code(where)} in every pod, on PVC `{a.checkpoint_pvc}` (checkpoint_pvc): it outlives the "
                 "pods, so a new RayJob resumes from it." if a.checkpoint_pvc else
                 f"Where: {code(where)} in the pods' emptyDir working folder: lost with the pods (VI757). Set "
                 "checkpoint_pvc or shared_pvc.")
    run_at = {"local": "in the bundle folder", "slurm": "in the bundle folder on a node (or `srun`)",
              "ray": "on a machine that mounts checkpoint_dir", "kuberay": "in a pod that holds the checkpoints "
              "(`kubectl cp` the script there, then `kubectl exec`)"}[a.cluster]
    export = (f"Export: `./export_hf.sh [STEP|latest] [TARGET_DIR]`, run {run_at}, with verl installed, merges the "
              "actor of a checkpoint (the trained policy) into a Hugging Face folder with verl's model merger "
              f"(`python3 -m verl.model_merger merge --backend {merger_backend(plan)}`); default target "
              "`hf/global_step_N`.")
    if plan.base_config == "megatron" and a.lora_rank:
        export += (" With Megatron LoRA the checkpoint's model shards are the adapters only (verl filters the "
                   "state dict to the PEFT adapters and saves them under model/dist_ckpt: utils/checkpoint/"
                   "megatron_checkpoint_manager.py:531-535, 705-711), and verl 0.9.1's Megatron merger builds a model "
                   "without adapters (model_merger/megatron_model_merger.py:221-260): verl-init has not verified that "
                   "this export holds the trained adapters. Resuming (above) reads them back; a new run can start "
                   "from them with model.lora.adapter_path, the key verl's checkpoint loader names.")
    return [saved, resume, place, export]


def agent_lines(plan: Plan) -> list[str]:
    """PLAN.md's "Multi-turn tool calling" lines (Markdown; user values through `code`)."""
    from wizard.planner import agent

    facts = plan.facts.get("agent")
    if facts is None:
        return []
    bud, cap = plan.facts["turn_budget"], agent.TOOL_RESPONSE_TOKENS
    return [
        f"Agent loop: verl's `tool_agent` on the async {plan.answers.rollout_engine} server, up to {facts['turns']} "
        f"assistant turns; tool {code(facts['class'])} from `{agent.TOOL_CONFIG}` (verl's tool registry imports it "
        "in every agent-loop worker; " + (
            f"k8s/configmap.yaml puts `{agent.TOOLS_DIR}/` into every pod's working folder, which is on their "
            "sys.path)." if plan.answers.cluster == "kuberay" else "the bundle folder is on their sys.path)."),
        f"The response covers the whole conversation after the prompt: {bud.response_length} tokens = up to "
        f"{bud.tool_replies} tool replies × {cap} tokens ({bud.tool_tokens}; verl cuts each reply to "
        f"max_tool_response_length={cap} characters, so at most that many tokens) + {bud.assistant_tokens} tokens of "
        f"the model's own (~{bud.per_turn} per turn). verl ends the conversation when the response is full.",
        "Tool replies are masked out of the loss (response_mask 0): the policy is trained on its own tokens only, "
        f"but tool tokens count in every sequence's length, so the memory estimate and token budgets use the full "
        f"prompt + response ({plan.facts['seq_len']} tokens).",
        "Each data row carries `agent_name: tool_agent`" + (
            f" and `extra_info.tools_kwargs` (the ground truth for {code(agent.GSM8K_TOOL_NAME)}'s create call)"
            if facts["tool"] == "gsm8k" else "") + "; `rollout.agent.default_agent_loop=tool_agent` covers rows "
        "without agent_name. Check your own files with `verl-init validate-dataset FILE --agent tool`.",
    ]


def sandbox_lines(plan: Plan) -> list[str]:
    """PLAN.md's "Code reward sandbox" lines (Markdown; user values through `code`)."""
    from wizard.planner import dataprep, sandbox

    fx = plan.facts.get("sandbox")
    if fx is None:
        return []
    a = plan.answers
    url = code(fx["url"])
    where = {
        "local": f"{url} must answer from this machine, where verl's reward workers run: e.g. `docker run -d -p "
                 f"{sandbox.SANDBOX_PORT}:{sandbox.SANDBOX_PORT} {sandbox.SANDBOX_IMAGE}` before `./run.sh`.",
        "ray": f"{url} must answer from every node of the Ray cluster: verl's reward workers are Ray actors placed "
               "on any node. A loopback address is refused (VI761).",
        "slurm": f"{url} must answer from every node of the allocation: verl's reward workers are Ray actors placed "
                 "on any node. A loopback address is refused (VI761).",
        "kuberay": (f"In the cluster: `k8s/sandbox-fusion.yaml` (a SandboxFusion Deployment + the Service {url} "
                    "names), which `k8s/submit.sh` applies and waits for before the job." if fx["in_cluster"] else
                    f"{url} must answer from every pod (a loopback address is refused, VI761); or set sandbox_url="
                    f"{code(sandbox.in_cluster_url(a.k8s_namespace))} to have the bundle run one in the cluster."),
    }[a.cluster]
    return [
        f"Scoring: rows with data_source {code(fx['data_source'])} go to verl's `sandbox_fusion` scorer: the program in "
        "each response's last ```` ```python ```` block runs once per test case (its input on stdin, its output "
        f"compared with the expected one); the reward is the share of the first {dataprep.SCORED_CASES} cases passed. "
        "A response without a code block scores 0 without a call.",
        f"Load: {fx['responses_per_step']} responses per step, one call per test case of their row; at most "
        f"{fx['workers']} reward workers × {fx['max_concurrent']} (max_concurrent) = {fx['in_flight']} calls in "
        f"flight. Each program: {fx['memory_mb']} MB (memory_limit_mb), {sandbox.CASE_TIMEOUT_S} s to compile and "
        f"{sandbox.CASE_TIMEOUT_S} s to run; a service that ran every call in flight at once would need up to "
        f"{fx['in_flight']} × {fx['memory_mb']} MB = {fx['in_flight'] * fx['memory_mb'] / 1024:g} GiB for the programs "
        "(SandboxFusion queues what its workers cannot run): size its host, or lower sandbox_max_concurrent. "
        "A 504 is retried 3 times; any other failure (service down, refused) "
        "scores the case as not passed and logs `API Call Failed` in the reward workers: a reward stuck at 0 from "
        "the first step means the sandbox is not answering.",
        f"Where: {where}",
        "Why a sandbox: without a URL verl's prime_code runs the programs inside its reward workers, whose guard is "
        "not a security sandbox (VI585).",
    ]


def context(plan: Plan) -> dict[str, Any]:
    """Everything the templates place, computed here (templates hold no logic)."""
    a = plan.answers
    fx = plan.facts
    doc = config_doc(plan)

    local_files = [
        plan.value(k)
        for k in ("data.train_files", "data.val_files")
        if "://" not in plan.value(k) and ("${" not in plan.value(k) or plan.value(k).startswith("${oc.env:HOME}/"))
    ]
    local_files = list(dict.fromkeys(local_files))
    rows = [
        {"key": k, "value": _fmt(c.value), "source": c.source, "reason": c.reason} for k, c in plan.settings.items()
    ]
    batch_lines = _batch_lines(fx)
    layout_lines = _layout_lines(plan)
    answers_doc = {
        "verl_init_version": plan.version,
        "verl_version": plan.verl_version,
        # data paths relative to the bundle (when the plan knows its folder), other local paths absolute (planner)
        "answers": a.model_dump(mode="json", exclude_unset=True),
    }
    command = "python3 -m verl.trainer.main_ppo --config-path <bundle> --config-name verl_config"
    where = _data_where(plan, local_files)
    return {
        "data_where": where,
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
        "time_lines": _time_lines(plan),
        "checkpoint_lines": checkpoint_lines(plan),
        "agent_lines": agent_lines(plan),
        "sandbox_lines": sandbox_lines(plan),
        "resume_from": a.resume_from_path or "",
        "overrides": [{"text": o["text"], "planned": code(o["planned"], cell=True) if o["planned"] else "—",
                       "reason": o["reason"] or "not set by the plan (verl's default)"}
                      for o in fx.get("overrides", [])],
    }




def _batch_lines(fx: dict[str, Any]) -> list[str]:
    """PLAN.md's batch section: prompts, samples, updates, ranks and micro-batches per step."""
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
    return batch_lines


def _layout_lines(plan: Plan) -> list[str]:
    """PLAN.md's layout section: nodes and GPUs, rollout, judge, training layout, LoRA, accelerator, vision tower."""
    a, fx = plan.answers, plan.facts
    layout_lines = [
        f"{a.nnodes} node(s) × {a.gpus_per_node} GPUs ({a.gpu_type}, {a.gpu_memory_gb:g} GB) = {plan.n_gpus} GPUs, one resource pool shared by all roles.",
        _rollout_line(fx, a.rollout_engine, a.gpus_per_node),
    ]
    judge = fx.get("judge")
    if judge and judge["nodes"]:
        layout_lines.append(
            f"Judge (reward=genrm): its own resource pool of {judge['gpus']} GPU(s) on {judge['nodes']} more node(s) "
            f"(reward.reward_model.enable_resource_pool): {judge['replicas']} replica(s) of TP={judge['tp']} at "
            f"gpu_memory_utilization {judge['gmu']:g}; the cluster has {a.nnodes + judge['nodes']} node(s) in all."
            + _judge_memory(judge))
    elif judge:
        layout_lines.append(
            f"Judge (reward=genrm): colocated, {judge['replicas']} replica(s) of TP={judge['tp']} reserving "
            f"{judge['gmu']:g} of each GPU; its engine sleeps beside the rollout engine and wakes for its own turn once "
            "rollout is done (free_cache_engine), and both sleep while the actor trains."
            + _judge_memory(judge))
    if plan.base_config == "megatron":
        layout_lines += megatron_layout_lines(fx, a.gpus_per_node, plan.n_gpus)
    else:
        layout_lines.append(
            f"Training: {a.train_backend.upper()} over {plan.n_gpus} GPUs, Ulysses sequence parallel {fx['sequence_parallel']}, data-parallel size {fx['dp']}."
        )
    lora = fx.get("lora")
    if lora and plan.base_config == "megatron":
        size = f"{lora['params'] / 1e6:.0f}M adapter parameters" if lora.get("params") is not None else "the adapters"
        layout_lines.append(
            f"LoRA on Megatron: rank {lora['rank']}, alpha {lora['alpha']}, through Megatron-Bridge's PEFT, which verl "
            "builds from actor_rollout_ref.model.lora.* (workers/config/megatron_peft.py; the FSDP keys "
            "model.lora_rank / lora_alpha are not read by the Megatron engine, so the bundle does not set them). "
            f"Adapters on {', '.join(MEGATRON_TARGET_MODULES)} (every linear layer under Megatron's fused names): "
            f"{size} train, split like their layers over the layout above; the base stays frozen in bf16. "
            "megatron.use_mbridge=True and vanilla_mbridge=False: Megatron LoRA needs Megatron-Bridge "
            "(megatron_peft.py:26). The reference log-probs are the actor's with its adapters off, so no reference "
            f"copy is built (ray_trainer.py:360). {a.rollout_engine} serves the adapter (lora.merge=False): it loads the "
            "base from the model (rollout.load_format=safetensors) and each step's sync sends only the adapters.")
    if a.accelerator != "nvidia":
        from wizard.verlspec.hardware import ACCELERATORS

        acc = ACCELERATORS[a.accelerator]
        layout_lines += [
            f"Accelerator: {acc.label} (accelerator={a.accelerator}): trainer.device={acc.device} (verl's "
            f"'{acc.verl_platform}' platform, detected at start-up; VERL_PLATFORM={acc.verl_platform} forces it); "
            f"Ray resource {acc.ray_resource}; Kubernetes resource {acc.k8s_resource}; Slurm GRES {acc.slurm_gres}; "
            f"devices hidden with {acc.visible_devices}, never by hand.",
            f"On this accelerator verl 0.9.1 runs rollout with {' or '.join(acc.rollout_engines)} and trains with "
            f"{', '.join(acc.train_backends)} — {acc.why}. verl, torch and {a.rollout_engine} must be builds for "
            f"this accelerator ({'image ' + a.image if a.image else 'installed on the nodes: no image given'}).",
        ]
    vision = fx.get("vision")
    if vision:  # a vision-language model (planner.stages.vision): the tower's size and the image-token assumption
        layout_lines.append(
            f"Vision tower: {vision['tower']} = {vision['tower_params_b']:g}B parameters, inside the model size above; "
            "trained with the language model (its weights, gradients and Adam states are in the memory table), and "
            "the rollout engine holds its bf16 weights too.")
        if vision["images"]:
            layout_lines.append(
                f"Images: at most {a.images_per_prompt} per prompt of at most {a.image_max_pixels} pixels "
                f"(data/prepare_data.py shrinks bigger ones) = {vision['image_tokens_per_image']} image tokens each "
                f"(one per {vision['factor']}×{vision['factor']} pixels), {vision['image_tokens_per_prompt']} per prompt, "
                f"counted inside max_prompt_length={a.max_prompt_length}. Memory assumes full-length sequences, so "
                f"{vision['image_share']:.0%} of the training tokens are image tokens, each adding "
                f"{vision['act_mb_per_image_token']:g} MB of vision-tower activations (in 'activations + logits'). "
                "verl reads the images with qwen_vl_utils (and scores geo3k with mathruler): both come with verl's "
                "verl-core extra.")
            if vision.get("slow_patch_embed_s_per_image"):
                layout_lines.append(
                    "The tower embeds patches with a Conv3d: on torch 2.9 with a cuDNN before 9.15 (the 9.10 its pip "
                    "wheel brings) that runs through aten's per-channel fallback, about "
                    f"{vision['slow_patch_embed_s_per_image']:g} s per image of {a.image_max_pixels} pixels in every "
                    "log-prob and update pass, not in the time and cost below. Run `verl-init doctor` on the "
                    "nodes (VI762); use torch 2.8 or >= 2.10, or nvidia-cudnn-cu12>=9.15 beside torch 2.9.")
    if a.cluster == "kuberay":  # which image the pods run, and how sure that is (issue 27 item 8)
        from wizard.renderer.images import image_choice

        layout_lines.append("Image of every pod: {} ({}).".format(*image_choice(a, plan.verl_version)))
    return layout_lines


def _data_where(plan: Plan, local_files: list[str]) -> list[str]:
    """Where the data files must be for the run to find them (and, for a vision model, the images in each row)."""
    a = plan.answers
    vision = plan.facts.get("vision")
    relative = [f for f in local_files if not f.startswith(("/", "${"))]
    absolute = [f.replace("${oc.env:HOME}", "~") for f in local_files if f.startswith(("/", "${"))]
    prepared_read = bool(set(local_files) & {dataprep.PREPARED_TRAIN, dataprep.PREPARED_VAL})
    source = a.dataset if prepared_read and a.dataset not in dataprep.HUB else None
    where = data_where(a.cluster, a.shared_pvc, relative, dataprep.hub_prepared_in_place(
        a, plan.base_dir, str(plan.value("data.train_files")), str(plan.value("data.val_files"))), absolute)
    if source:
        where = source_where(a.cluster, a.shared_pvc, source) + where
    if vision and vision["images"]:
        where = where + [f"Each row also holds its images in `{a.image_key}` (`data.image_key`), as `[{{\"bytes\": ...}}]`, one per "
                         "`<image>` placeholder in its prompt, in order; check them with `verl-init validate-dataset "
                         f"{dataprep.PREPARED_TRAIN} --image-key {a.image_key}`."]
    overlong = plan.facts.get("overlong")
    return where + [x for x in (plan.facts.get("data_mapping"), plan.facts.get("data_preview"), overlong) if x]


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
    vm = getattr(m, "verl_metrics", {}) or {}
    for key in ("max_memory_allocated_gb", "max_memory_reserved_gb"):
        if vm:
            rows.append({"part": f"verl's perf/{key} (full-length)",
                         "cells": [f"{vm[p][key]:.1f}" if p in vm else "" for p in phases]})
    summary = (
        f"{m.verdict_line()[0].upper()}{m.verdict_line()[1:]}. "
        f"GiB = 2^30 bytes; the card's {m.gpu_gb:g} GB is {m.capacity_gib:.1f} GiB as it reports itself. The band is "
        f"±{int(m.margin * 100)}% (the calibration on measured verl runs, benchmarks/memory_calibration.md), and its high "
        f"end also covers micro-batches of full-length sequences. The rollout KV cache holds {m.kv_seqs:.0f} full "
        f"sequences per GPU. Host memory per node for offloaded state and the sleeping engine: ~{m.host_gb_per_node:.0f} GB."
    )
    from wizard.planner.phasemem import explain

    return {"known": True, "rows": rows, "phases": phases, "summary": summary, "notes": explain(m)}


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


def _judge_memory(judge: dict[str, Any]) -> str:
    """PLAN.md's sentence on what a judge's engine holds per GPU (reward=genrm), when the judge could be sized."""
    if "weights_gib" not in judge:
        return " The judge could not be sized: its engine's memory is unchecked (VI596)."
    seq = judge["prompt_tokens"] + judge["max_tokens"]
    return (f" Its engine reserves {judge['reserved_gib']:g} GiB per GPU: {judge['weights_gib']:g} GiB of bf16 weights, "
            f"the rest KV cache for ~{judge['kv_seqs']} judge sequences of {seq} tokens "
            f"({judge['prompt_tokens']} of prompt + {judge['max_tokens']} of verdict).")


def megatron_layout_lines(fx: dict[str, Any], gpus_per_node: int, n_gpus: int) -> list[str]:
    """PLAN.md's Megatron layout: the dense grid, the expert grid for a MoE model, and which groups sit in a node
    (megatron-core's rank order tp-cp-ep-dp-pp: a TP group is consecutive ranks, an expert group ETP×EP too)."""
    tp, pp, cp, vpp = fx["megatron_tp"], fx["megatron_pp"], fx["megatron_cp"], fx["megatron_vpp"]
    lines = [f"Training: Megatron TP={tp} × PP={pp}" + (f" (× VPP={vpp} virtual stages, interleaved)" if vpp else "")
             + f" × CP={cp}, data-parallel size {fx['dp']}"
             + (f"; each TP group is {tp} consecutive GPUs inside one node" if tp > 1 else "")
             + (f", each TP×CP group {tp * cp}" if cp > 1 else "")
             + (f"; uneven pipeline split: {fx['megatron_first']} layers in the first stage, {fx['megatron_last']} "
                "in the last" if fx.get("megatron_first") is not None else "") + "."]
    recompute = plan_line(fx)  # Megatron full recompute, when the layout has it
    if recompute:
        lines.append(recompute)
    if fx.get("moe_experts"):
        ep, etp = fx["megatron_ep"], fx["megatron_etp"] if fx["megatron_etp"] is not None else tp
        lines.append(f"Experts: {fx['moe_experts']} per MoE layer over EP={ep} × ETP={etp} = {ep * etp} consecutive GPUs "
                     f"inside one node of {gpus_per_node} (token all-to-all over NVLink), "
                     f"{fx['moe_experts'] // max(ep, 1)} whole experts per GPU; expert data-parallel size "
                     f"{fx['megatron_expert_dp']} = {n_gpus} GPUs / (ETP×EP×PP = {etp * ep * pp}).")
        rdp = fx.get("rollout_dp") or 1
        lines.append(f"Rollout experts: expert_parallel_size={fx['rollout_ep']}"
                     + (f": each replica's {fx['rollout_tp'] * rdp} GPUs hold whole experts "
                        f"(EP = TP × DP = {fx['rollout_tp']} × {rdp})."
                        if fx["rollout_ep"] > 1 else ": every expert on the replica's GPU."))
    return lines


def _rollout_line(fx: dict, engine: str, gpus_per_node: int) -> str:
    """PLAN.md's rollout layout: replicas of TP GPUs, or (a MoE model's rollout data parallel) of TP × DP GPUs,
    one engine per DP rank, each TP group inside a node."""
    rdp = fx.get("rollout_dp") or 1
    if rdp == 1:
        return (f"Rollout: {fx['rollout_replicas']} {engine} replica(s) of tensor-parallel size {fx['rollout_tp']}, "
                "each inside one node.")
    world = fx["rollout_tp"] * rdp
    return (f"Rollout: {fx['rollout_replicas']} {engine} replica(s) of TP={fx['rollout_tp']} × DP={rdp} = {world} GPUs "
            f"({max(1, world // gpus_per_node)} node(s) each): {rdp} data-parallel engines per replica, each TP group "
            "inside one node, the experts spread over all the replica's GPUs.")


def _time_lines(plan: Any) -> list[str]:
    """PLAN.md's "Time and cost" lines (wizard.planner.steptime), or the one line that says why there are none."""
    from wizard.planner.steptime_plan import lines, not_predicted, of_plan

    doc = of_plan(plan)
    if doc:
        return lines(doc)
    why = not_predicted(plan)
    return [why[0].upper() + why[1:] + "."] if why else []
