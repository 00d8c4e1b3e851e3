"""`Answers`: the one model of what the user wants.

Profiles, `--answers` files, `--set key=value` and the Python API all speak these names. A field
left at ``None`` means "verl-init chooses" (the plan records why); a field the user set is
respected or rejected, never silently changed.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from wizard.intent.errors import Problem, WizardError, did_you_mean
from wizard.intent.text import TextRefused, check_text, expand_user_home, shown

TEXT_ERROR = "verl_init_text"  # pydantic error type of a refused string (see wizard.intent.text)

Algorithm = Literal["grpo", "ppo", "dapo", "rloo", "reinforce_plus_plus", "remax", "gspo"]
Cluster = Literal["local", "ray", "kuberay", "slurm"]
Accelerator = Literal["nvidia", "amd", "ascend"]
Reward = Literal["rule", "model", "function", "sandbox", "genrm"]
RolloutEngine = Literal["vllm", "sglang"]
TrainBackend = Literal["fsdp", "fsdp2", "megatron"]
Logger = Literal[
    "console", "wandb", "mlflow", "swanlab", "vemlp_wandb", "tensorboard", "clearml", "trackio", "file"
]

DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
BUILTIN_DATASETS = ("gsm8k", "math", "geo3k", "codecontests")
SAVED_DATASET = "a `datasets` folder saved with save_to_disk"


def local_dataset(value: str, base: str = "") -> bool:
    """`value` names the user's own data: a file by its suffix, or a `datasets` folder saved with
    Dataset.save_to_disk / DatasetDict.save_to_disk found at `base`/`value` (wizard._parquet reads both)."""
    import os

    if value in BUILTIN_DATASETS:
        return False
    if value.lower().endswith(DATA_SUFFIXES):
        return True
    from wizard._parquet import saved_dataset

    return saved_dataset(os.path.join(base, os.path.expanduser(value.replace("${oc.env:HOME}", "~", 1))))


class Answers(BaseModel):
    """Everything verl-init needs to know. Every field has a default and a one-line description."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    # --- hardware -------------------------------------------------------------------------------
    nnodes: int = Field(1, ge=1, le=1024, description="Number of nodes (machines) in the run.")
    gpus_per_node: int = Field(8, ge=1, le=16, description="GPUs on each node; verl needs the same count on every node.")
    gpu_memory_gb: float = Field(80.0, gt=0, le=1024, description="Memory of one GPU in GB (e.g. 24, 40, 80, 141).")
    gpu_type: str = Field("H100", min_length=1, description="GPU model name: the step time, the cluster manifests, and fp16 with PyTorch attention on a card below compute capability 8.0 (V100, T4).")
    accelerator: Accelerator = Field(
        "nvidia", description="Accelerator vendor: nvidia (CUDA), amd (ROCm) or ascend (Huawei NPU); sets verl's device "
                              "and the Ray, Kubernetes and Slurm resource names.",
    )
    host_memory_gb: Optional[float] = Field(
        None, gt=0, description="Host (CPU) memory per node in GB; checked when training state is offloaded."
    )
    cluster: Cluster = Field("local", description="Where the job runs: local, ray (existing cluster), kuberay or slurm.")

    # --- algorithm and roles ----------------------------------------------------------------------
    algorithm: Algorithm = Field("grpo", description="RL algorithm; ppo means a critic with GAE.")
    model: str = Field("Qwen/Qwen2.5-0.5B-Instruct", min_length=1, description="Policy model: hub id or local path.")
    model_params_b: Optional[float] = Field(
        None, gt=0, description="Model size in billions of parameters, when it cannot be read from the name."
    )
    critic_model: Optional[str] = Field(None, min_length=1, description="Critic (value) model for ppo; defaults to model.")
    reward: Reward = Field("rule", description="Reward source: rule (verl's scorer by data_source), model (a classifier), "
                                               "function, sandbox (code rows run against their test cases in a "
                                               "SandboxFusion service), or genrm (an LLM judge scoring each response).")
    reward_model: Optional[str] = Field(
        None, min_length=1, description="Reward model path: a sequence classifier for reward=model, the judge LLM for reward=genrm."
    )
    reward_function: Optional[str] = Field(
        None, min_length=1, description="Custom scorer as file.py:function_name, for reward=function."
    )
    sandbox_url: Optional[str] = Field(
        None, min_length=1, max_length=2000,
        description="reward=sandbox: the SandboxFusion run_code endpoint verl's reward workers call, e.g. "
                    "http://sandbox-fusion:8080/run_code (reward.sandbox_fusion.url); it must answer from every node.",
    )
    sandbox_max_concurrent: Optional[int] = Field(
        None, ge=1, le=4096, description="reward=sandbox: sandbox calls in flight per reward worker "
                                         "(reward.sandbox_fusion.max_concurrent; verl's default 64).",
    )
    sandbox_memory_mb: Optional[int] = Field(
        None, ge=64, le=65536, description="reward=sandbox: memory limit of each sandboxed program in MB "
                                           "(reward.sandbox_fusion.memory_limit_mb; verl's default 1024).",
    )
    judge_gpus: int = Field(
        0, ge=0, le=1024, description="reward=genrm: 0 serves the judge on the policy's GPUs (colocated, woken after the "
                                      "rollout); N, a multiple of gpus_per_node, gives it a pool of its own on N / "
                                      "gpus_per_node extra nodes (scoring while rollout runs).",
    )
    judge_max_tokens: int = Field(
        512, ge=1, le=32768, description="reward=genrm: most tokens the judge writes per verdict (its sampling max_tokens).",
    )
    rollout_engine: RolloutEngine = Field("vllm", description="Inference engine that generates rollouts.")
    train_backend: TrainBackend = Field("fsdp", description="Training engine for actor, reference and critic.")
    lora_rank: int = Field(0, ge=0, le=1024, description="LoRA rank; 0 trains all weights.")
    lora_alpha: Optional[int] = Field(None, ge=1, description="LoRA alpha; defaults to twice the rank.")

    # --- data ----------------------------------------------------------------------------------
    dataset: str = Field("gsm8k", min_length=1,
                         description="gsm8k, math, geo3k (images; for a vision-language model), codecontests (programs with "
                                     "test cases; reward=sandbox), a local .jsonl/.json/.csv/.parquet file, or a `datasets` "
                                     "folder saved with save_to_disk.")
    train_files: Optional[str] = Field(None, min_length=1, description="Training parquet/json(l) in verl's schema.")
    val_files: Optional[str] = Field(None, min_length=1, description="Validation parquet/json(l) in verl's schema.")
    max_prompt_length: int = Field(512, ge=16, le=262144, description="Longest prompt in tokens.")
    max_response_length: int = Field(1024, ge=16, le=262144, description="Longest generated response in tokens.")
    response_length_mean: Optional[float] = Field(
        None, gt=0, le=262144,
        description="Mean tokens per generated response, for the predicted step time and cost (PLAN.md's Time and "
                    "cost) and the token-budget ranking; at most max_response_length. Unset: a multiple of "
                    "√max_response_length, at most half of it (the step-time calibration reports' median), or half "
                    "of it for a model that reasons by default (PLAN.md names which).",
    )

    # --- vision-language models (the model's config has a vision tower) ------------------------------
    image_key: str = Field(
        "images", min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Column holding each row's images (a list of {bytes} or paths), in the local file and in the "
                    "prepared data (data.image_key).",
    )
    images_per_prompt: int = Field(
        1, ge=1, le=64, description="Most images in one prompt (rollout.limit_images; image tokens in the memory plan)."
    )
    image_max_pixels: int = Field(
        1003520, ge=3136, le=16777216,
        description="Largest image in pixels: data/prepare_data.py shrinks bigger ones; sets the image tokens per image "
                    "(Qwen2.5-VL: pixels / 28², Qwen3-VL: pixels / 32²; default 1003520 = 1280 tokens at 28²).",
    )
    freeze_vision_tower: Optional[bool] = Field(
        None, description="Ask verl not to train the vision tower (actor.freeze_vision_tower; verl 0.9.1 declares it "
                          "but no worker reads it, see VI571)."
    )

    # --- batch intents -------------------------------------------------------------------------
    prompts_per_step: int = Field(256, ge=1, le=65536, description="Prompts drawn per training step (data.train_batch_size).")
    samples_per_prompt: Optional[int] = Field(
        None, ge=1, le=1024, description="Responses sampled per prompt (rollout.n); default by algorithm."
    )
    updates_per_step: int = Field(4, ge=1, le=1024, description="Optimizer updates (mini-batches) per step.")
    total_steps: Optional[int] = Field(None, ge=1, description="Training steps; overrides epochs when set.")
    epochs: Optional[int] = Field(None, ge=1, le=10000, description="Passes over the training data (default 15).")
    learning_rate: Optional[float] = Field(
        None, gt=0, lt=1, description="Actor learning rate; default 1e-6 (3e-5 with LoRA)."
    )
    critic_learning_rate: Optional[float] = Field(None, gt=0, lt=1, description="Critic learning rate (ppo); default 1e-5.")
    kl_coef: Optional[float] = Field(
        None, ge=0, le=10, description="KL coefficient against the reference; 0 disables the reference model."
    )
    temperature: float = Field(1.0, gt=0, le=5, description="Rollout sampling temperature.")

    # --- performance knobs (None = verl-init chooses) -------------------------------------------
    rollout_tp: Optional[int] = Field(None, ge=1, le=64, description="Rollout tensor-parallel size.")
    gpu_memory_utilization: Optional[float] = Field(
        None, gt=0, le=1, description="Share of GPU memory the rollout engine reserves (0-1]."
    )
    dynamic_batch: Optional[bool] = Field(None, description="Token-budget micro-batches (use_dynamic_bsz).")
    micro_batch_per_gpu: Optional[int] = Field(None, ge=1, description="Training micro-batch per GPU (no dynamic batch).")
    max_tokens_per_gpu: Optional[int] = Field(None, ge=64, description="Training token budget per GPU (dynamic batch).")
    sequence_parallel: int = Field(1, ge=1, le=64, description="Ulysses sequence-parallel size (FSDP).")
    megatron_tp: Optional[int] = Field(None, ge=1, le=64, description="Megatron tensor-parallel size.")
    megatron_pp: Optional[int] = Field(None, ge=1, le=128, description="Megatron pipeline-parallel size.")
    megatron_vpp: Optional[int] = Field(
        None, ge=1, le=64, description="Megatron virtual pipeline stages per pipeline rank (interleaved schedule; needs megatron_pp > 1)."
    )
    megatron_cp: Optional[int] = Field(None, ge=1, le=64, description="Megatron context-parallel size (splits each sequence).")
    megatron_ep: Optional[int] = Field(
        None, ge=1, le=1024, description="Megatron expert-parallel size: a MoE model's experts spread over this many GPUs."
    )
    megatron_etp: Optional[int] = Field(
        None, ge=1, le=64, description="Megatron expert tensor-parallel size (each expert split over this many GPUs)."
    )
    rollout_ep: Optional[int] = Field(
        None, ge=1, le=1024, description="Rollout expert-parallel size for a MoE model: 1, or the rollout_tp (verl: EP = TP × DP)."
    )
    rollout_dp: Optional[int] = Field(
        None, ge=1, le=1024, description="Rollout data_parallel_size for a MoE model: engines per replica, the experts "
                                         "spread over rollout_tp × rollout_dp GPUs (default: the least that fits).",
    )
    offload: Optional[bool] = Field(None, description="Offload actor parameters and optimizer states to host memory.")

    # --- bookkeeping ------------------------------------------------------------------------------
    logger: list[Logger] = Field(default_factory=lambda: ["console"], description="Experiment trackers.")
    project_name: str = Field("verl-init", min_length=1, description="Tracker project name.")
    experiment_name: Optional[str] = Field(None, min_length=1, description="Run name; default from algorithm and model.")
    save_freq: int = Field(20, ge=-1, description="Checkpoint every N steps (-1: never).")
    test_freq: int = Field(5, ge=-1, description="Validate every N steps (-1: never).")
    resume: Optional[Literal["auto", "path", "disable"]] = Field(
        None, description="When the job (re)starts: auto continues from the newest checkpoint in checkpoint_dir, path "
                          "from resume_from_path, disable starts over; default auto (path when resume_from_path is set).",
    )
    resume_from_path: Optional[str] = Field(
        None, min_length=1, description="Checkpoint to start from: a .../global_step_N folder (relative: from the "
                                        "bundle folder, where verl runs).",
    )
    checkpoint_dir: Optional[str] = Field(
        None, min_length=1, description="Where verl writes checkpoints (trainer.default_local_dir); default "
                                        "checkpoints/<project_name>/<experiment_name> in the folder verl runs in.",
    )
    keep_checkpoints: Optional[int] = Field(
        None, ge=1, le=100000, description="Keep only the newest N checkpoints, deleting older ones; default: keep all."
    )
    image: Optional[str] = Field(None, min_length=1, description="Container image for kuberay/slurm (default: a verl release).")

    # --- cluster artefacts (kuberay / slurm / ray) ---------------------------------------------
    # Names are checked here (DNS / Slurm shapes) because they land in manifests and #SBATCH lines.
    job_name: Optional[str] = Field(
        None, max_length=47, pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        description="Cluster job name: RayJob/RayCluster, Slurm job, Ray submission id (DNS-1035, ≤ 47 characters); default from experiment_name.",
    )
    k8s_namespace: Optional[str] = Field(
        None, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="Kubernetes namespace of the kuberay manifests (default: kubectl's current namespace).",
    )
    k8s_secret: str = Field(
        "verl-secrets", max_length=253, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="Kubernetes Secret the pods read WANDB_API_KEY and HF_TOKEN from (secretKeyRef; never inline).",
    )
    cpus_per_node: Optional[int] = Field(
        None, ge=1, le=4096,
        description="CPUs per GPU node (pod CPUs, Slurm --cpus-per-task, Ray --num-cpus); default 8 per GPU, at least 3 per GPU + 1.",
    )
    memory_per_node_gb: Optional[int] = Field(
        None, ge=1, le=65536,
        description="Memory in GB the job takes on each GPU node (pod memory, Slurm --mem); default 90% of host_memory_gb, else 32 per GPU.",
    )
    head_cpus: Optional[int] = Field(
        None, ge=1, le=4096,
        description="CPUs of the GPU-less KubeRay head pod; default 10 (verl's TaskRunner and TransferQueue's 9 actors).",
    )
    head_memory_gb: Optional[int] = Field(None, ge=1, le=65536, description="Memory of the KubeRay head pod in GB; default 64.")
    shm_size_gb: Optional[int] = Field(
        None, ge=1, le=65536, description="/dev/shm size in GB for the KubeRay GPU pods; default: left to KubeRay, which mounts one."
    )
    shared_pvc: Optional[str] = Field(
        None, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="ReadWriteMany PersistentVolumeClaim mounted as every KubeRay pod's working folder: data/, checkpoints/ and outputs/ live on it.",
    )
    checkpoint_pvc: Optional[str] = Field(
        None, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="ReadWriteMany PersistentVolumeClaim mounted at the checkpoint folder of every KubeRay pod (without shared_pvc, checkpoints are lost with the pods).",
    )
    slurm_partition: Optional[str] = Field(
        None, max_length=200, pattern=r"^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$", description="Slurm partition(s) (--partition)."
    )
    slurm_account: Optional[str] = Field(
        None, max_length=200, pattern=r"^[A-Za-z0-9_.-]+$", description="Slurm account to charge (--account)."
    )
    slurm_time: Optional[str] = Field(
        None, max_length=20, pattern=r"^(UNLIMITED|([0-9]+-)?[0-9]+(:[0-9]{1,2}){0,2})$",
        description="Slurm time limit (--time), e.g. 2-00:00:00 or 04:00:00.",
    )
    gpu_wait_timeout_s: int = Field(
        600, ge=10, le=86400,
        description="Seconds the Slurm job and submit scripts wait for all nnodes × gpus_per_node GPUs to join Ray.",
    )
    k8s_ttl_seconds: int = Field(
        3600, ge=0, le=604800, description="Seconds KubeRay keeps a finished RayJob's cluster (for its logs) before deleting it."
    )

    # --- data preparation and reward function -----------------------------------------------
    question_field: str = Field("question", min_length=1, description="Column of a local data file that holds the question.")
    answer_field: str = Field("answer", min_length=1, description="Column of a local data file that holds the reference answer.")
    messages_field: Optional[str] = Field(
        None, min_length=1, description="Column of a local file holding a chat (list of {role, content}) used as the prompt."
    )
    answer_format: Optional[Literal["number", "boxed", "text", "code"]] = Field(
        None, description="How answers are written and scored: number, boxed (\\boxed{}), text, or code (a ```python "
                          "program run against the row's test cases: answer_field holds them); default by dataset."
    )
    instruction: Optional[str] = Field(
        None, description="Text added after each question, or a template with {question}; default asks for answer_format."
    )
    system_prompt: Optional[str] = Field(None, min_length=1, description="System message put before every prompt.")
    data_source: Optional[str] = Field(
        None, min_length=1, description="data_source written in every row; selects verl's scorer (default by dataset)."
    )
    data_source_field: Optional[str] = Field(
        None, min_length=1, description="Column of a local data file holding each row's data_source (selects verl's "
                                        "scorer row by row); unset: data_source for every row."
    )
    agent_name_field: Optional[str] = Field(
        None, min_length=1, description="Column of a local data file holding each row's agent_name (the verl agent "
                                        "loop that runs it: single_turn_agent, tool_agent); unset: agent's loop."
    )
    val_fraction: float = Field(0.05, ge=0, lt=1, description="Share of a local file held out for validation (0: none).")
    split_seed: int = Field(42, ge=0, description="Seed of the train/validation split of a local file.")

    # --- multi-turn tool calling (verl's tool agent loop) ---------------------------------------
    agent: Literal["single_turn", "tool"] = Field(
        "single_turn", description="Rollout agent loop: single_turn (one response per prompt) or tool (multi-turn "
                                   "tool calling with verl's tool_agent loop).",
    )
    tool: Optional[str] = Field(
        None, min_length=1, max_length=200,
        description="Tool for agent=tool: gsm8k (a GSM8K answer checker shipped in the bundle) or module.Class, "
                    "your BaseTool subclass importable where verl runs; default gsm8k.",
    )
    max_turns: Optional[int] = Field(
        None, ge=1, le=64, description="Most assistant turns per conversation for agent=tool (tool replies count "
                                       "against max_response_length); default 3.",
    )

    # --- escape hatch: verl keys the answers do not model -------------------------------------
    overrides: list[str] = Field(
        default_factory=list,
        description="verl keys the answers do not model, as Hydra overrides (key=value; +key=value adds a key); "
                    "applied after the plan and checked as `verl-init check` checks a config.",
    )

    @field_validator("*")
    @classmethod
    def _safe_text(cls, v: Any, info: ValidationInfo) -> Any:
        """Every string answer (and string in a list): no control characters or OmegaConf syntax; `~user` expanded."""
        key = info.field_name or ""
        try:
            if isinstance(v, str):
                check_text(key, v)
                return expand_user_home(key, v)
            if isinstance(v, list):
                for item in v:
                    if isinstance(item, str):
                        check_text(key, item)
        except TextRefused as exc:
            hint = exc.hint
            if key == "overrides" and "${" in exc.message:
                hint = "overrides take literal values: write the value itself (no interpolation)"
            raise PydanticCustomError(TEXT_ERROR, "{message}", {"message": exc.message, "hint": hint}) from None
        return v

    @field_validator("logger", mode="before")
    @classmethod
    def _logger_list(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [part.strip() for part in v.split(",") if part.strip()]
        return v

    @field_validator("logger")
    @classmethod
    def _logger_unique(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("needs at least one tracker, e.g. [console]")
        if len(set(v)) != len(v):
            raise ValueError("lists a tracker twice")
        return v

    @field_validator("reward_function")
    @classmethod
    def _reward_function_shape(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        path, sep, name = v.rpartition(":")
        if not sep or not path.endswith(".py") or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError("must be file.py:function_name")
        return v

    @field_validator("tool")
    @classmethod
    def _tool_shape(cls, v: Optional[str]) -> Optional[str]:
        if v is None or v == "gsm8k":
            return v
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+", v):
            raise ValueError("must be gsm8k or module.Class (a dotted Python path to a BaseTool subclass)")
        return v

    @model_validator(mode="after")
    def _steps_or_epochs(self) -> "Answers":
        if self.total_steps is not None and self.epochs is not None:
            raise ValueError("set total_steps or epochs, not both")
        return self

    @model_validator(mode="after")
    def _mean_within_cap(self) -> "Answers":
        if self.response_length_mean is not None and self.response_length_mean > self.max_response_length:
            raise ValueError(f"response_length_mean {self.response_length_mean:g} is longer than max_response_length "
                             f"{self.max_response_length}: a mean response cannot exceed the cap")
        return self


FIELD_NAMES: tuple[str, ...] = tuple(Answers.model_fields)
LIST_FIELDS = frozenset({"logger"})


def _allowed(name: str) -> str:
    """Human description of what a field accepts, for error messages."""
    from typing import get_args, get_origin

    info = Answers.model_fields[name]
    ann = info.annotation
    args = [a for a in get_args(ann) if a is not type(None)]
    if get_origin(ann) is Optional or (args and get_origin(ann) is not Literal and type(None) in get_args(ann)):
        ann = args[0]
    if get_origin(ann) is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(ann))
    if name == "overrides":
        return "a list of key=value / +key=value / ++key=value (Hydra override syntax, literal values)"
    if get_origin(ann) is list:
        inner = get_args(ann)[0]
        if get_origin(inner) is Literal:
            return "a list of " + ", ".join(str(a) for a in get_args(inner))
    bounds = []
    for meta in info.metadata:
        for attr, sym in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if getattr(meta, attr, None) is not None:
                bounds.append(f"{sym} {getattr(meta, attr)}")
    kind = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(ann, str(ann))  # type: ignore[call-overload]
    return kind + (" " + " and ".join(bounds) if bounds else "")


def answer_problems(data: dict[str, Any]) -> list[Problem]:
    """Unknown keys and type errors as one Problem per key (no raw pydantic dumps)."""
    problems: list[Problem] = []
    for key in data:
        if key not in Answers.model_fields:
            hint = did_you_mean(key, FIELD_NAMES) or "see `verl-init keys` for the list of answer keys"
            problems.append(Problem("VI101", "error", (key,), f"unknown answer key ({shown(key)})", hint))
    if problems:
        return problems
    try:
        Answers.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = [str(p) for p in err["loc"]]
            key = loc[0] if loc else ""
            if key in Answers.model_fields:
                value = data.get(key)
                msg = err["msg"]
                if msg.startswith("Value error, "):
                    msg = msg[len("Value error, ") :]
                ctx = err.get("ctx") or {}
                hint = str(ctx["hint"]) if err["type"] == TEXT_ERROR else f"allowed: {_allowed(key)}"
                problems.append(Problem("VI102", "error", (key,), f"{msg} (got {shown(value)})", hint))
            else:
                msg = err["msg"].removeprefix("Value error, ")
                named = tuple(k for k in Answers.model_fields if re.search(rf"(?<![\w.]){re.escape(k)}(?!\w)", msg))
                problems.append(Problem("VI103", "error", named, msg,
                                        f"change one of {', '.join(named)}" if named else "change one of the keys it names"))
    return problems


def make_answers(data: dict[str, Any]) -> Answers:
    """Validate a merged answer mapping; raise WizardError listing every bad key."""
    problems = answer_problems(data)
    if problems:
        raise WizardError(problems)
    return Answers.model_validate(data)


def parse_set(item: str) -> tuple[str, Any]:
    """`key=value` from the command line. Lists take YAML flow syntax or commas; `null` or nothing (`key=`)
    clears the answer (None: merge_answers drops it, so the default applies, as with --unset KEY)."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise WizardError(
            [Problem("VI104", "error", (item,), f"--set needs key=value (got {shown(item)})", "e.g. --set nnodes=2")]
        )
    if key not in Answers.model_fields:
        hint = did_you_mean(key, FIELD_NAMES) or "see `verl-init keys` for the list of answer keys"
        raise WizardError([Problem("VI101", "error", (key,), f"unknown answer key ({shown(key)})", hint)])
    if key == "overrides":  # a list of key=value items has no unambiguous one-word form
        raise WizardError([Problem("VI104", "error", (key,), f"--set cannot hold verl overrides ({shown(item)})",
                                   "pass each one as --override KEY=VALUE (repeatable)")])
    if raw.strip().lower() in ("null", "none", "~", ""):
        return key, None
    if key in LIST_FIELDS:
        import yaml

        if raw.strip().startswith("["):
            try:
                return key, yaml.safe_load(raw)
            except (yaml.YAMLError, RecursionError):
                raise WizardError([Problem("VI102", "error", (key,), f"not a YAML list ({shown(raw)})",
                                           f"e.g. --set {key}=[console, wandb] or --set {key}=console,wandb")]) from None
        return key, [part.strip() for part in raw.split(",") if part.strip()]
    return key, raw
