"""One registry of every rule ID verl-init emits, for generated documentation.

`RULES` maps each ID to (area, one-line title of what it detects). The `verl-init check` linter's
VI8xx rules are described in `wizard.check.catalog.RULES` and are not repeated here; `all_rules()` merges
both, and `markdown()` renders the merged table. tests/test_rule_index.py keeps this file in step
with the `"VIddd"` literals in the code (every ID covered, no stale entries).

Only the standard library (and the linter's table, wizard.check.catalog) is imported at module level.
"""

from __future__ import annotations

from wizard.check.catalog import RULES as LINT_RULES

AREAS = ("answers", "batching", "layout", "roles", "reward & data", "memory", "cluster", "probe & doctor",
         "bundle", "verify", "smoke", "internal")
LINT_AREA = "check (linter)"

RULES: dict[str, tuple[str, str]] = {
    # -- internal ----------------------------------------------------------------------------------
    "VI000": ("internal", "user-fixable error raised without a rule of its own (default ID of WizardError/UserError)"),
    # -- answers (wizard.intent.answers, wizard.intent.profiles) ------------------------------------------------
    "VI101": ("answers", "unknown answer key (in answers, --set, or at the top level of a profile/answers file)"),
    "VI102": ("answers", "answer value has the wrong type or lies outside the values/range its key allows"),
    "VI103": ("answers", "answer keys conflict with each other (e.g. total_steps and epochs both set)"),
    "VI104": ("answers", "--set argument is not in key=value form"),
    "VI105": ("answers", "answers/profile file not found, not valid YAML, or not a mapping (top level or answers:)"),
    "VI106": ("answers", "no shipped profile has the given name"),
    # -- answers: overrides, verl keys the answers do not model (wizard.planner.pipeline, wizard.check.planned) --
    "VI550": ("answers", "an override is not key=value / +key=value on a dotted verl key (or ~key, hydra.*, a key twice)"),
    "VI551": ("answers", "an override sets a verl key that an answer sets: set the answer, the plan re-derives the rest"),
    "VI552": ("answers", "an override replaces a mapping the plan sets keys inside, or a key inside a planned value"),
    "VI553": ("answers", "an override replaces a value the plan derived (named with the planned value and its reason)"),
    "VI554": ("answers", "an override adds a key verl never reads (Hydra adds it, verl ignores it, verify refuses it)"),
    # -- answers: resume and checkpoints (wizard.planner.pipeline) ------------------------------------------------
    "VI555": ("answers", "resume_from_path missing for resume=path, set with another resume, or not a global_step_N folder"),
    "VI556": ("cluster", "checkpoints (or resume_from_path) in a Ray job's working_dir copy: lost when the job ends"),
    "VI557": ("answers", "keep_checkpoints set while save_freq saves no checkpoint"),
    # -- vision-language models (wizard.planner.pipeline._vision, wizard.env.datasets) ----------------------------
    "VI569": ("answers", "agent=tool: no tool-call parser of verl reads the tool call the model's own chat template writes"),
    "VI570": ("reward & data", "max_prompt_length cannot hold the image tokens of images_per_prompt images of image_max_pixels"),
    "VI571": ("answers", "freeze_vision_tower=true: verl 0.9.1 declares actor.freeze_vision_tower but no worker reads it"),
    "VI572": ("reward & data", "a dataset with images (geo3k) for a text model (no vision tower)"),
    "VI573": ("answers", "image answers (image_key, images_per_prompt, ...) given for a text model: ignored"),
    "VI574": ("reward & data", "image column (data.image_key) missing from the data, or not a list of images"),
    "VI575": ("reward & data", "an image is neither {bytes} nor a path, or its bytes do not decode as an image"),
    "VI576": ("reward & data", "the prompt's <image> placeholders do not match the row's number of images"),
    # -- answers: multi-turn tool calling (wizard.planner.agent) ------------------------------------------
    # code RL with a sandbox reward (wizard.planner.sandbox)
    "VI580": ("reward & data", "reward=sandbox without sandbox_url (verl runs each program in a SandboxFusion service)"),
    "VI581": ("reward & data", "sandbox_url is not an http(s) URL, or carries credentials (shown redacted)"),
    "VI582": ("reward & data", "code rows with a data_source verl's default scorer does not route to a code scorer"),
    "VI583": ("reward & data", "reward=sandbox without answer_format=code, or code rows scored by a function or model"),
    "VI584": ("reward & data", "sandbox_url, sandbox_max_concurrent or sandbox_memory_mb set while reward is not sandbox"),
    "VI585": ("reward & data", "reward=rule on code rows: verl's prime_code runs model-written programs unsandboxed"),
    "VI560": ("answers", "tool or max_turns set while agent=single_turn (the single-turn loop never calls a tool)"),
    "VI561": ("answers", "tool=gsm8k (checks a number after ####) with answers in another answer_format"),
    "VI562": ("answers", "max_response_length too short for max_turns: tool replies leave < 128 tokens per turn"),
    "VI563": ("answers", "the tool's module.Class does not import here (error with cluster=local, warning elsewhere)"),
    "VI564": ("answers", "agent=tool with your own train_files: their rows need agent_name and tools_kwargs"),
    "VI565": ("answers", "tool=module.Class with cluster=kuberay: the pods import your class from their image"),
    # -- batching (wizard.planner.pipeline) ----------------------------------------------------------------
    "VI201": ("batching", "updates_per_step does not divide prompts_per_step into equal mini-batches"),
    "VI202": ("batching", "the samples of one update (mini-batch × samples_per_prompt) do not split over DP ranks"),
    "VI203": ("batching", "without dynamic batching, prompts_per_step × samples_per_prompt does not divide over the GPUs"),
    "VI204": ("batching", "micro_batch_per_gpu does not divide the samples each GPU gets per update"),
    "VI205": ("batching", "max_tokens_per_gpu (× sequence_parallel) cannot hold one prompt + response sequence"),
    "VI206": ("batching", "micro_batch_per_gpu set while dynamic batching is on"),
    "VI207": ("batching", "max_tokens_per_gpu set while dynamic batching is off"),
    # -- layout (wizard.planner.pipeline) ------------------------------------------------------------------
    "VI301": ("layout", "cluster=local (one machine) with nnodes > 1"),
    "VI302": ("layout", "sequence_parallel does not divide gpus_per_node (an SP group would leave its node)"),
    "VI304": ("layout", "rollout_tp does not tile the GPUs: it must divide a node or fill whole nodes"),
    "VI305": ("layout", "rollout_tp spans several nodes: tensor-parallel traffic crosses the network"),
    "VI306": ("layout", "Ulysses sequence_parallel > 1 with the megatron backend (an FSDP-only option)"),
    "VI307": ("layout", "megatron_* layout answers (tp, pp, cp, ep, etp, vpp) set while train_backend is not megatron"),
    "VI308": ("layout", "model not in the catalogue: its shape is estimated from the size in its name"),
    "VI309": ("layout", "megatron_tp does not divide gpus_per_node (tensor parallel must stay inside a node)"),
    "VI310": ("layout", "megatron_tp × _pp × _cp does not divide the GPUs, or no Megatron layout passes with the given sizes"),
    "VI311": ("layout", "the only fitting rollout_tp groups GPUs across a slow link (PCIe host bridge or NUMA)"),
    "VI312": ("layout", "megatron_tp does not divide the model's attention heads and KV heads (megatron-core)"),
    "VI313": ("layout", "megatron_ep > 1 for a dense model, or the MoE model's experts do not spread evenly over it"),
    "VI314": ("layout", "the expert grid megatron_etp × _ep × _pp does not divide the GPUs (megatron-core)"),
    "VI315": ("layout", "an expert group megatron_etp × megatron_ep leaves a node (expert all-to-all stays on NVLink)"),
    "VI316": ("layout", "the model's layers do not split evenly into megatron_pp × megatron_vpp pipeline chunks"),
    "VI317": ("layout", "megatron_vpp (interleaved schedule) without megatron_pp > 1"),
    "VI318": ("layout", "rollout_ep for a dense model, or not equal to rollout_tp × rollout_dp (verl: EP = TP × DP)"),
    "VI321": ("layout", "rollout_tp does not split the model's attention heads (vLLM/SGLang refuse it at engine start)"),
    "VI320": ("layout", "sequence_parallel > 1 on a Gated DeltaNet model: needs flash-linear-attention's CP kernels"),
    "VI319": ("layout", "rollout_dp for a dense model, or a rollout replica (TP × DP) verl cannot build on these GPUs"),
    # -- roles: algorithm, KL, critic, LoRA (wizard.planner.pipeline) ---------------------------------------
    "VI401": ("roles", "group-relative algorithm with samples_per_prompt=1: the advantage is the raw reward (warning)"),
    "VI402": ("roles", "kl_coef set for an algorithm that uses no KL penalty"),
    "VI404": ("roles", "critic_model set for an algorithm that trains no critic"),
    "VI405": ("roles", "critic and reward model are the same checkpoint (value head vs classifier)"),
    "VI406": ("roles", "LoRA with the megatron backend on a vision-language model (no Megatron LoRA recipe for it in verl)"),
    "VI407": ("roles", "lora_rank above 512, the largest rank vLLM serves"),
    "VI403": ("roles", "learning_rate at or below verl's full fine-tuning rate (1e-6) with LoRA (check's VI929)"),
    "VI408": ("roles", "lora_rank is not one of vLLM's ranks: vLLM reserves adapters of the next larger rank"),
    "VI409": ("roles", "lora_alpha set while lora_rank=0 (full fine-tune)"),
    # -- reward & data (wizard.planner.pipeline; validate-dataset in wizard.env.datasets) ------------------------
    "VI501": ("reward & data", "reward=model without a reward_model"),
    "VI503": ("reward & data", "reward_model set while reward is not model"),
    "VI504": ("reward & data", "reward_function set while reward is not function"),
    "VI505": ("reward & data", "dapo with reward=model: group filtering needs rewards a colocated RM cannot give"),
    "VI590": ("reward & data", "reward=genrm without a reward_model (the judge LLM)"),
    "VI591": ("reward & data", "judge_gpus set while reward is not genrm"),
    "VI592": ("reward & data", "judge_gpus (the judge's own GPUs) with cluster=local, which is one machine"),
    "VI593": ("reward & data", "judge_gpus is not a multiple of gpus_per_node (the judge's pool is whole nodes like the policy's)"),
    "VI594": ("reward & data", "the judge does not fit its pool at any TP (> 0.85 of a card), or colocated takes > 0.5 of each card"),
    "VI595": ("reward & data", "dapo with a colocated judge: group filtering needs rewards at sampling time (judge_gpus)"),
    "VI596": ("reward & data", "the judge model cannot be sized: its engine share and TP are not checked"),
    "VI506": ("reward & data", "the reward_function file does not exist (error with cluster=local, warning elsewhere)"),
    "VI507": ("reward & data", "reward_function is a file on this machine that a ray/kuberay job does not carry"),
    "VI508": ("reward & data", "dapo's group filter stays on the overlong-shaped reward: the function's return is unread (VI649)"),
    "VI510": ("reward & data", "dataset is neither gsm8k, math nor a local .jsonl/.json/.csv/.parquet file"),
    "VI511": ("reward & data", "train_files or val_files points at a CSV file, which verl cannot read"),
    "VI512": ("reward & data", "local dataset without a validation split or file: validation runs on the training file"),
    "VI513": ("reward & data", "reward=rule but the data_source has no scorer in verl's default scoring"),
    "VI514": ("reward & data", "verl's scorer for the data_source expects another answer_format than the prompts ask"),
    "VI515": ("reward & data", "both messages_field and question_field set"),
    "VI516": ("reward & data", "local-file data keys (question_field, val_fraction, ...) set for a built-in dataset"),
    "VI517": ("reward & data", "only one of train_files / val_files is yours: the other is the bundle's prepared file"),
    "VI518": ("reward & data", "train_files / val_files, read by verl as they are, have no 'prompt' column (a raw file)"),
    "VI519": ("reward & data", "the local training data has fewer rows than one step's prompts: verl trains 0 steps"),
    "VI539": ("reward & data", "a local data file (dataset, train_files, val_files) is missing where it must exist"),
    "VI540": ("reward & data", "a relative data path cannot travel with the bundle (no common folder, or outside what travels)"),
    "VI541": ("reward & data", "verl's overlong filter leaves fewer training rows than one step's prompts (or no validation row)"),
    "VI542": ("reward & data", "verl's overlong filter drops some training prompts at start-up (counted with the local tokenizer)"),
    "VI520": ("reward & data", "data file cannot be read: missing, unsupported format, broken parquet or bad row"),
    "VI521": ("reward & data", "a required column is missing from the file, or a row's prompt is null/empty"),
    "VI522": ("reward & data", "prompt is not a non-empty list of {role, content} chat messages with allowed roles"),
    "VI523": ("reward & data", "reward_model is not a mapping, or its ground_truth is missing or empty"),
    "VI524": ("reward & data", "reward_model.ground_truth is not text (a warning with a custom reward function)"),
    "VI525": ("reward & data", "a row's data_source is missing or empty"),
    "VI526": ("reward & data", "data_source has no scorer in verl's default scoring and no reward function is given"),
    "VI543": ("reward & data", "a message's content is itself a JSON chat (a chat column read as the question text)"),
    "VI544": ("reward & data", "a prompt is empty or whitespace"),
    "VI545": ("reward & data", "a system message that is not the first message of the prompt"),
    "VI546": ("reward & data", "a column named in the answers (question_field, messages_field, image_key, ...) the data lacks"),
    "VI548": ("reward & data", "a model id in neither the catalogue nor the local Hugging Face cache (did-you-mean for a near miss)"),
    "VI549": ("reward & data", "a local model folder with no chat template, none given: verl's overlong filter drops every row"),
    "VI970": ("reward & data", "a named per-row column (data_source_field, agent_name_field, image_key) holds another kind"),
    "VI971": ("reward & data", "agent_name_field: a row's agent_name is not one of verl's agent loops"),
    "VI547": ("reward & data", "no column mapping given and the local data file's schema is ambiguous (the candidates are named)"),
    "VI527": ("reward & data", "the tokenizer's chat template fails on a prompt"),
    "VI528": ("reward & data", "prompts longer than max_prompt_length tokens"),
    "VI529": ("reward & data", "duplicate prompts within a file"),
    "VI530": ("reward & data", "prompts shared between files (train/validation overlap)"),
    "VI531": ("reward & data", "the file has no rows, or no row survives verl's overlong-prompt filter"),
    "VI532": ("reward & data", "extra_info.index is missing (verl reports index 0 for such rows)"),
    "VI533": ("reward & data", "prompt ends with an assistant message (the answer may be in the prompt)"),
    "VI534": ("reward & data", "no --model-dir given: chat template and token lengths not checked"),
    "VI535": ("reward & data", "preference chosen/rejected text is missing, null or empty"),
    "VI536": ("reward & data", "preference chosen and rejected are the same text"),
    "VI537": ("reward & data", "preference prompt/chosen/rejected value is not text"),
    "VI538": ("reward & data", "the --model-dir tokenizer cannot be loaded"),
    "VI566": ("reward & data", "validate-dataset --agent tool: a row has no agent_name (runs the default agent loop)"),
    "VI567": ("reward & data", "validate-dataset --agent tool: extra_info.tools_kwargs lacks the tool's create_kwargs"),
    "VI568": ("reward & data", "validate-dataset --agent tool: agent_name is not one of verl's agent loops"),
    "VI586": ("reward & data", "validate-dataset: a code row's test cases are not what verl's code scorer can run"),
    # -- memory (wizard.planner.pipeline with wizard.planner.memory) -------------------------------------------------
    # -- hardware beyond NVIDIA: the accelerator answer (wizard.planner.pipeline, wizard.verlspec.hardware) ------
    "VI630": ("layout", "rollout_engine has no build verl 0.9.1 drives on the accelerator (e.g. sglang on Ascend)"),
    "VI631": ("layout", "train_backend not known to run under verl 0.9.1 on the accelerator (e.g. megatron on ROCm)"),
    "VI632": ("layout", "gpu_type names another vendor's accelerator than the accelerator answer"),
    "VI634": ("layout", "a critic on the FSDP engine on a card below compute capability 8.0: verl loads it with flash-attn 2"),
    "VI633": ("cluster", "accelerator amd/ascend on KubeRay without image: verl's release images are CUDA builds"),
    "VI601": ("memory", "model or critic_model cannot be sized: not in the catalogue, no local folder, no size in name"),
    "VI602": ("memory", "model does not fit the GPUs with any layout or offload verl-init can choose"),
    "VI603": ("memory", "the planned micro_batch_per_gpu / max_tokens_per_gpu pushes peak GPU memory over the budget"),
    "VI604": ("memory", "max_prompt_length + max_response_length exceeds the model's context length"),
    "VI605": ("memory", "fitting the GPUs needs offloaded state beyond 90% of host_memory_gb per node"),
    "VI606": ("memory", "an explicitly set answer keeps every layout over GPU memory; without it the plan fits"),
    "VI607": ("memory", "the plan is tight: a phase's ±20% band (or full-length micro-batches) reaches over the card"),
    # -- cluster: planned resources (wizard.renderer.artefacts.cluster) --------------------------------------
    "VI701": ("cluster", "cpus_per_node below what verl asks Ray for on a node (3 CPUs per GPU + 1)"),
    "VI702": ("cluster", "the cluster's logical CPUs fall short of verl's 3 per GPU plus TransferQueue's"),
    "VI703": ("cluster", "KubeRay shm_size_gb is not below the worker pod's memory_per_node_gb"),
    "VI704": ("cluster", "memory_per_node_gb is larger than host_memory_gb"),
    # -- cluster: `check --mode cluster` against a live Ray cluster (wizard.env.cluster) -----------
    "VI710": ("cluster", "no Ray cluster answers at the dashboard address, or it is not a dashboard URL"),
    "VI711": ("cluster", "the address answers but not as a Ray dashboard, or its state API lists no nodes"),
    "VI712": ("cluster", "the Ray cluster has fewer GPUs than trainer.nnodes × trainer.n_gpus_per_node"),
    "VI713": ("cluster", "nodes cannot host nnodes groups of n_gpus_per_node GPUs (+ 3 CPUs per GPU) on one node each"),
    "VI714": ("cluster", "Ray GPU nodes differ in GPU count or from trainer.n_gpus_per_node"),
    "VI715": ("cluster", "the Ray cluster has fewer logical CPUs than verl needs (3 per GPU + TransferQueue)"),
    "VI716": ("cluster", "cluster GPUs in use by other jobs (an error when too few stay free for the config)"),
    "VI717": ("cluster", "RAY_ADDRESS is the dashboard URL instead of the GCS address"),
    "VI718": ("cluster", "RAY_ADDRESS goes through Ray Client (ray://) or is not HOST:PORT"),
    "VI719": ("cluster", "CUDA_VISIBLE_DEVICES set by hand (an error when it hides GPUs a local run needs)"),
    "VI720": ("cluster", "the config's Ray runtime env or the bundle's ray/runtime_env.yaml sets CUDA_VISIBLE_DEVICES"),
    "VI721": ("cluster", "the cluster's Ray version differs from this machine's"),
    "VI722": ("cluster", "the Ray cluster lists DEAD nodes (ignored in the counts)"),
    "VI723": ("cluster", "check target unusable: missing, invalid YAML, not a mapping, or a count not a whole number"),
    "VI724": ("cluster", "a bundle's k8s/slurm/ray files are invalid YAML or disagree with verl_config.yaml"),
    "VI764": ("cluster", "the reward model's own pool (its nnodes × n_gpus_per_node) does not fit beside the trainer's groups"),
    "VI725": ("cluster", "the Ray dashboard wants a token (Ray token authentication) or refused the one given"),
    "VI726": ("cluster", "the Ray dashboard redirects to another origin (not followed) or answers more than 8 MiB"),
    "VI727": ("cluster", "a Ray token file is not a regular file (FIFO, device), is over 64 KiB, or cannot be read"),
    "VI730": ("cluster", "RayJob/RayCluster name is not a DNS-1035 label within the length limit"),
    "VI731": ("cluster", "KubeRay cluster spec missing, or worker groups do not carry exactly the planned GPUs"),
    "VI732": ("cluster", "a KubeRay GPU container has fewer CPUs than verl asks Ray for (3 per GPU + 1)"),
    "VI733": ("cluster", "a secret-like env var written inline in a KubeRay manifest, or env from a ConfigMap"),
    "VI734": ("cluster", "CUDA_VISIBLE_DEVICES set by hand in a KubeRay container"),
    "VI735": ("cluster", "the KubeRay head pod requests GPUs or advertises them to Ray"),
    "VI736": ("cluster", "RayJob keeps its GPUs after the job (shutdownAfterJobFinishes/ttlSecondsAfterFinished)"),
    "VI761": ("cluster", "sandbox_url names this machine's loopback while verl's reward workers run on other nodes/pods"),
    "VI756": ("cluster", "KubeRay without shared_pvc: the pods cannot see a data file of this machine"),
    "VI757": ("cluster", "KubeRay without shared_pvc or checkpoint_pvc: checkpoints go to pod-local storage and are lost"),
    "VI758": ("cluster", "checkpoint_pvc set for a cluster other than kuberay"),
    "VI759": ("cluster", "a KubeRay bundle's pods would read their data files from pod-local storage nothing fills"),
    "VI760": ("cluster", "a KubeRay bundle's pods would write checkpoints to pod-local storage (lost with the pods)"),
    "VI767": ("cluster", "the KubeRay ConfigMap of the bundle's files would be over Kubernetes' 1 MiB"),
    "VI768": ("cluster", "a KubeRay bundle's pods would not find the tool config / tool module of agent=tool"),
    "VI769": ("cluster", "k8s/configmap.yaml carries another copy of a tool file than the bundle folder"),
    # -- probe & doctor (wizard.env.probe, wizard.env.doctor) -----------------------------------------------
    "VI740": ("probe & doctor", "no usable NVIDIA GPU found on this machine (NVML missing, failing or 0 GPUs)"),
    "VI741": ("probe & doctor", "a GPU is MIG-partitioned: a process sees one slice and NCCL cannot join slices"),
    "VI742": ("probe & doctor", "this machine mixes GPU models or memory sizes"),
    "VI743": ("probe & doctor", "a GPU has more than 10% of its memory in use by other processes"),
    "VI744": ("probe & doctor", "GPU pairs talk across NUMA nodes (SYS) without NVLink"),
    "VI745": ("probe & doctor", "peer-to-peer access is not possible between some GPUs"),
    "VI746": ("probe & doctor", "the Ray dashboard probe timed out or failed"),
    "VI747": ("probe & doctor", "the Ray cluster's GPU nodes have different GPU counts"),
    "VI748": ("probe & doctor", "the Ray dashboard wants a token or refused it: the cluster cannot be seen"),
    "VI749": ("probe & doctor", "/dev/shm is smaller than 8 GB"),
    "VI763": ("probe & doctor", "a GPU below compute capability 8.0 (V100, T4): no bf16 in vLLM, no flash-attn 2"),
    "VI750": ("probe & doctor", "an NCCL transport is disabled in the environment (NCCL_P2P/IB/SHM_DISABLE)"),
    "VI751": ("probe & doctor", "other NCCL_* variables are set in the environment"),
    "VI752": ("probe & doctor", "RAY_DEDUP_LOGS=0: identical log lines printed once per worker"),
    "VI753": ("probe & doctor", "torch is a CPU build on a GPU machine, or built for a newer CUDA than the driver"),
    "VI754": ("probe & doctor", "verl is not installed, or its version differs from the one bundles target"),
    "VI755": ("probe & doctor", "neither vllm nor sglang is installed: bundles can be planned but not run"),
    "VI762": ("probe & doctor", "torch 2.9 with a cuDNN before 9.15: a vision tower's Conv3d patch embedding runs a slow fallback"),
    # -- bundle writing (wizard.renderer.writer) -------------------------------------------------------------
    "VI901": ("bundle", "a bundle file name would be written outside the bundle folder (a bug)"),
    "VI902": ("bundle", "the output path exists and is not a folder"),
    "VI903": ("bundle", "the output folder is not empty and --force was not given"),
    # -- verify (wizard.verify.harness) ---------------------------------------------------------------------
    "VI950": ("verify", "verl is not importable, so the bundle cannot be verified with verl"),
    # -- smoke (wizard.smoketest.run) ------------------------------------------------------------------------
    "VI960": ("smoke", "smoke target is not a verl-init bundle (no verl_config.yaml)"),
    "VI961": ("smoke", "--prompts is below 1 or does not keep the bundle's batch geometry"),
    "VI962": ("smoke", "unknown smoke --engine"),
    "VI963": ("smoke", "the bundle's batch geometry is not valid for verl, or no smaller batch keeps it"),
    "VI964": ("smoke", "--data-dir is not a folder"),
    "VI965": ("smoke", "the prepared GPU smoke's --out folder already holds a tiny model"),
    # -- smoke --engine verl-workers (wizard.smoketest.engine_workers) ----------------------------------------
    "VI966": ("smoke", "smoke --engine verl-workers found no GPU and --device cpu was not given"),
    "VI967": ("smoke", "smoke --engine verl-workers: the bundle's actor or critic strategy is not FSDP (Megatron not yet)"),
    "VI968": ("smoke", "smoke --engine verl-workers: an option that does not apply, or a bad option value"),
    "VI969": ("smoke", "smoke --engine verl-workers: a phase failed in verl's engine workers (verl's message) or timed out"),
}


def all_rules() -> dict[str, tuple[str, str]]:
    """RULES plus the linter's VI8xx rules as (area "check (linter)", title), sorted by ID."""
    merged = dict(RULES)
    for rule, entry in LINT_RULES.items():
        merged.setdefault(rule, (LINT_AREA, entry[0]))
    return dict(sorted(merged.items()))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """A Markdown table of every rule: `| rule | area | what it detects |`, one row per ID."""
    lines = ["| rule | area | what it detects |", "| --- | --- | --- |"]
    for rule, (area, title) in all_rules().items():
        lines.append(f"| {rule} | {_cell(area)} | {_cell(title)} |")
    return "\n".join(lines)
