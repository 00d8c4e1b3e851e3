"""The `verl-init check` rules VI600-VI699: ID -> (title, what it checks / where verl checks it).

Part of wizard.check.catalog.RULES (which merges this table), kept apart only to keep each module short; the
rules came from the held-out rounds of verl's real mistakes (docs/internals/held-out.md).
"""

from __future__ import annotations

RULES_6XX: dict[str, tuple[str, str]] = {
    "VI600": ("vLLM engine argument verl already sets", "a key of verl's own vLLM args literal (max_model_len, "
              "gpu_memory_utilization, enforce_eager, max_num_seqs, tensor_parallel_size, trust_remote_code, ...: "
              "vllm_async_server.py:325-350) repeated under a rollout's engine_kwargs.vllm: **engine_kwargs is spread "
              "last (:349), so vLLM uses the engine_kwargs value while verl keeps reasoning with its own key (max_tokens "
              "from rollout.max_model_len at :593); table scripts/verl_vllm_server_args.py"),
    "VI608": ("rollout sampling key the agent loop pins", "a RolloutConfig sampling field the agent loop writes as a "
              "constant in every request (repetition_penalty=1.0: agent_loop.py:594, v1/agent_loop_tq.py:68) set to "
              "another value: vLLM's setdefault from the config (vllm_async_server.py:623) finds the key set and SGLang "
              "never reads it, so the engine never applies it (verl#7270)"),
    "VI609": ("reproducible rollouts on an engine that reads no seed", "rollout.full_determinism=True or a rollout.seed "
              "of one's own (the actor's or the reward model's rollout) with a rollout engine whose server reads neither (SGLang, TensorRT-LLM): only verl's vLLM "
              "server applies them (vllm_async_server.py:149-156, :343, :626-627), so runs differ (verl#3126; "
              "docs/advance/determinism.md: only vLLM)"),
    "VI610": ("Megatron resume in another parallel layout", "trainer.resume_mode auto/resume_path resuming a "
              "Megatron actor/critic checkpoint (found on this machine) whose transformer_config.json holds other "
              "tensor/pipeline (or expert) parallel sizes than the run's, while load_contents keeps 'extra' (RNG "
              "state sharded by (pp, tp), megatron_checkpoint_manager.py:295-305) or 'optimizer' saved "
              "dp_reshardable (dist_ckpt_optim_fully_reshardable off, :441-454): the load stops in the worker after "
              "the GPUs are booked (verl PR#5154, PR#5705); fix: the saved layout, or load_contents=[model]"),
    "VI611": ("Megatron resume with use_dist_checkpointing flipped", "trainer.resume_mode auto/resume_path "
              "resuming a Megatron actor/critic checkpoint (found on this machine) whose ckpt_contents.json records "
              "its weights as Hugging Face only while the run sets megatron.use_dist_checkpointing=True (verl reads "
              "model/dist_ckpt), or as Megatron shards only while it is False (verl reads model/huggingface): the "
              "load stops in the worker after the GPUs are booked (megatron_checkpoint_manager.py:257-266, 916-940); "
              "fix: the flag the checkpoint was saved with"),
    "VI612": ("vLLM quantization set around verl's quantization path", "engine_kwargs.vllm.quantization reaches vLLM "
              "by the spread (vllm_async_server.py:349) while verl's _apply_quantization reads only rollout.quantization "
              "(:1211): no FP8 block-quant hf_overrides, weight-loading patches or VERL_VLLM_FP8_QUANT_ENABLED "
              "(:1244-1261), and no refusal of unsupported methods (:1240-1242), so the per-step bf16 weight sync goes "
              "into quantized layers; set rollout.quantization instead"),
    "VI613": ("training precision name verl does not know", "a precision key an engine that runs reads "
              "(fsdp_config.model_dtype, mixed_precision.param_dtype/reduce_dtype/buffer_dtype, megatron.dtype; the "
              "SFT trainer's engine.*) with a name outside verl's PrecisionType lists (bf16, bfloat16, fp16, float16, "
              "16, fp32, float32, 32): to_dtype raises 'unexpected precision' while the workers build the model "
              "(utils/torch_dtypes.py:61-69; Flash-RL#39: model_dtype=int8); fix: one of those names"),
    "VI614": ("rollout in the other 16-bit format than training", "rollout.dtype float16 while the actor computes "
              "in bf16 (FSDP mixed_precision.param_dtype unset or bf16, Megatron megatron.dtype=bfloat16), or bfloat16 "
              "against an fp16 actor: the rollout samples from a policy whose log-probs differ from the actor's "
              "recomputed ones by more than either format's rounding (rollout.yaml:42 'Align with actor model's "
              "FSDP/Megatron type'; verl PR#4036); fix: the same format on both sides"),
    "VI615": ("vLLM engine_kwargs key verl rewrites before the spread", "a key verl writes into engine_kwargs.vllm "
              "itself, set by the user too: with rollout.limit_images set verl replaces the whole "
              "engine_kwargs.vllm.limit_mm_per_prompt by {'image': limit_images} (vllm_async_server.py:289-290), so a "
              "video/audio limit there is dropped; table scripts/verl_vllm_server_args.py"),
    "VI616": ("Megatron recompute settings megatron-core rejects", "a Megatron role's override_transformer_config "
              "recompute_granularity / recompute_method / recompute_num_layers / recompute_modules that megatron-core's "
              "TransformerConfig refuses (granularity full without recompute_method or recompute_num_layers, selective "
              "with recompute_num_layers, a method other than block/uniform, a selective module outside its set): "
              "verl passes them through unchecked (megatron/transformer_impl.py:371-372) and the worker raises when it "
              "finalises the provider (core_v0.18.2 transformer_config.py:1544-1601); table scripts/mcore_recompute.py"),
    "VI617": ("distillation loss settings verl refuses", "with distillation.enabled, verl's DistillationLossConfig "
              "looks distillation_loss.loss_mode up in its registry, accepts only policy_loss_mode vanilla and refuses "
              "k1 without use_policy_gradient (workers/config/distillation.py:100-124), inside the Ray job; the table "
              "is verl's own constructor (scripts/verl_distill_losses.py)"),
    "VI618": ("fully async LR schedule built before the run's length is known", "fully_async_main with "
              "an FSDP engine, lr_scheduler_type=cosine or lr_warmup_steps_ratio (no absolute lr_warmup_steps) and "
              "no optim.total_training_steps (Megatron, VeOmni: VI410): the trainer's workers build the LR "
              "scheduler (fully_async_main.py:78, :155) before set_total_train_steps (:90-92), so it runs with "
              "total_training_steps=-1: no warmup, and a cosine LR that jumps between lr and its floor every step "
              "(verl#6684)"),
    "VI619": ("fully async rollout budget of a handful of updates", "fully_async_main with rollout.total_rollout_steps "
              "left at fully_async_ppo_trainer.yaml:64's 100 or below one weight-sync cycle (ppo_mini_batch_size × "
              "require_batches × trigger_parameter_sync_step prompts): it counts prompts, and the rollouter stops "
              "after that many (fully_async_rollouter.py:405-407, :878-884); the run ends as if complete"),
    "VI620": ("teacher top-k log-probs verl's teacher config refuses", "a top-k distillation loss (forward_kl_topk) "
              "needs distillation_loss.topk, a teacher on vllm or sglang, and a teacher vLLM engine_kwargs.vllm."
              "max_logprobs of at least topk (workers/config/distillation.py:188-218); verl raises inside the Ray job"),
    "VI621": ("teacher temperature verl never applies", "a distillation teacher's inference.temperature other than "
              "1.0: the teacher only scores the student's tokens and verl sends temperature 1.0 with a worker-log "
              "warning (experimental/teacher_loop/teacher_manager.py:45-56; verl#7769)"),
    "VI622": ("teacher tokenizer that numbers the student's tokens differently", "verl sends the student's token ids "
              "to the distillation teacher unchanged (teacher_manager.py:116-144, skip_tokenizer_init) and distils "
              "against their log-probs there: the local tokenizer files of student and teacher must map tokens to "
              "the same ids (verl-omni#382)"),
    "VI623": ("estimator needs inputs the V1 trainer never fetches", "optimal_token_baseline / "
              "tir_optimal_token_baseline (sum_pi_squared) and gdpo (prompts, reward components) on trainer.use_v1=true: "
              "V1's advantage step fetches a fixed field list (v1/trainer_base.py:1745) and verl's compute_advantage "
              "raises at the first step; run them with trainer.use_v1=False"),
    "VI624": ("optimal token baseline without sum_pi_squared", "optimal_token_baseline on the legacy trainer needs "
              "actor.calculate_sum_pi_squared=True (else AssertionError, ray_trainer.py:265-270) and "
              "model.use_fused_kernels=False (else NotImplementedError in the engine)"),
    "VI625": ("GDPO without its reward keys", "algorithm.adv_estimator=gdpo needs +algorithm.gdpo_reward_keys "
              "naming the reward components; verl asserts it at the first advantage computation (core_algos.py:413-417)"),
    "VI626": ("MTP under a full recompute verl's MTP patch refuses", "model.mtp.enable + enable_train with "
              "recompute_granularity=full: verl's MTP checkpointed forward asserts recompute_num_layers == 1 for "
              "recompute_method=uniform at the first training step and skips the MTP checkpoint (a warning) for "
              "block (models/mcore/mtp_patch.py:541-546; verl#7346); fix: uniform with recompute_num_layers=1"),
    "VI627": ("recipe code imports what the installed verl lacks", "a recipe entry point (python -m recipe.<name>.main) "
              "whose package imports a verl module or name the installed verl does not have (verl 0.9 removed "
              "workers/fsdp_workers.py, sharding_manager/ and trainer/ppo/reward.py's compute_reward, which the PRIME, "
              "SPIN and SPPO recipes, pinned to a pre-0.8 verl, import): ImportError at launch (error) or when that "
              "code runs (warning); the installed verl's files are the table (verl-recipe#86)"),
    "VI628": ("reward function returns token-level rewards", "reward.custom_reward_function returns a list (one value "
              "per token or reasoning step, a process-reward style score), directly or as the dict's 'score': every "
              "registered reward manager takes one number per response and verl writes it at the last token "
              "(reward_manager/naive.py:88-99, base.py:79-81, agent_loop.py:144-147), so the list fails at the first "
              "reward, after the cluster is up (verl#3683, verl#1039)"),
    "VI629": ("pipeline_model_parallel_layout megatron-core rejects", "a Megatron actor/critic "
              "override_transformer_config.pipeline_model_parallel_layout whose stages do not divide by "
              "pipeline_model_parallel_size, imply a virtual pipeline other than virtual_pipeline_model_parallel_size, "
              "lack 'E' first / 'L' last, count other than the model's layers in 't', use an unknown character, or "
              "come with num_layers_in_first/last_pipeline_stage / account_for_*: verl passes it through unchecked "
              "(megatron/transformer_impl.py:371-372) and megatron-core asserts in the worker "
              "(transformer_config.py:1031-1081; Megatron-Bridge#1502, Megatron-LM#1852)"),
    "VI635": ("pipeline layout with an unset virtual pipeline size", "a pipeline_model_parallel_layout with more "
              "stages than pipeline_model_parallel_size while virtual_pipeline_model_parallel_size is null: "
              "megatron-core takes the VPP from the layout (transformer_config.py:1075-1077) but verl initialises "
              "the process groups without one (megatron/transformer_impl.py:271-274)"),
    "VI637": ("code test cases verl's code scorer cannot use", "a codecontests/apps/codeforces/taco row whose "
              "reward_model.ground_truth is not test cases verl's sandbox client or prime_code can run: not JSON, no "
              "inputs/outputs, unequal counts, or call-based (fn_name) arguments stored as lists instead of one JSON "
              "value per line of text (stdin=str(input), fn(*[json.loads(line)]): sandbox_fusion/utils.py:244,269,293; "
              "prime_code/testing_util.py:235): a correct solution scores 0, no error (verl PR#2199, Eurus-2-RL-Data)"),
    "VI638": ("code test case any answer passes", "with reward.sandbox_fusion.url, a code row's expected output is "
              "null (sandbox_fusion/utils.py:427 passes any program that runs) or, call-based, empty (the wrapper "
              "catches the exception and exits 0: :270-288): a solution that raises earns the reward (verl PR#7853)"),
    "VI639": ("rollout quantization the engine's server refuses", "rollout.quantization set to a value the chosen "
              "rollout.name's verl server does not accept (SGLang and TensorRT-LLM: fp8 only; vLLM: fp8, torchao, "
              "ascend, unless rollout.qat.enable): RolloutConfig takes any string and the server raises ValueError "
              "at launch, in the rollout worker after the GPUs are booked (async_sglang_server.py:302-312, "
              "vllm_async_server.py:1238-1242, trtllm_async_server.py:209-222; verl PRs #7186, #7519: mxfp8)"),
    "VI640": ("media column that is not a list", "a data row whose data.image_key/video_key/audio_key cell holds one "
              "item (an {bytes, path} image dict, a path string) instead of a list: verl indexes it as a list "
              "(rl_dataset.py:315-335), and with data.filter_overlong_prompts on the length filter swallows the "
              "error and drops every such row (rl_dataset.py:206-244; verl#837); verl's SFT dataset stops at the first batch "
              "(multiturn_sft_dataset.py:255-288)"),
    "VI641": ("parquet metadata the installed datasets cannot decode", "a data.train_files/val_files parquet whose "
              "Hugging Face feature metadata names a type the installed `datasets` lacks (datasets>=4's List read "
              "by datasets<4): verl's load_dataset('parquet') (rl_dataset.py:171-172) raises 'Feature type ... not "
              "found' in the TaskRunner (verl#2723); the oracle is the installed datasets' Features.from_dict"),
    "VI642": ("attention head dimension above flash-attn's 256", "an FSDP actor (model.override_config."
              "attn_implementation, flash_attention_2 by default, workers/config/model.py:185) or FSDP critic (always "
              "flash_attention_2, utils/model.py:649) on a model with an attention head dimension above 256 (Gemma 4's "
              "global_head_dim=512): flash-attn stops the first training forward (verl PR#7131)"),
    "VI643": ("attention sinks dropped by the training kernel", "a model whose attention has learned sinks (gpt-oss: "
              "transformers passes s_aux) trained by the FSDP actor with an attention other than eager: the trainer's "
              "forward leaves the sinks out (or takes a Hopper-only hub kernel) while the rollout applies them "
              "(verl#3894); an error for sdpa where transformers has no sdpa path for the model (gpt-oss); verl's documented "
              "fix is override_config.attn_implementation=eager"),
    "VI644": ("Ulysses sequence parallel on a model with attention sinks", "actor Ulysses SP > 1 on gpt-oss: verl "
              "0.9.1's Ulysses attention (monkey_patch.py:87) splits the heads but not the per-head sinks, and wraps only "
              "flash attention (\"s_aux must have shape (num_heads)\", verl PR#4551)"),
    "VI645": ("FP8 SGLang rollout of a linear-attention hybrid without ignored layers", "rollout.quantization=fp8 "
              "with rollout.name=sglang on a Gated DeltaNet hybrid (Qwen3.5, Qwen3-Next) at SGLang tp_size (TP x DP) "
              "above 1 and no SGLANG_FP8_IGNORED_LAYERS: the linear_attn b/a projections' per-rank slice is narrower "
              "than verl's 128-wide FP8 block and verl ignores no layer by itself (sglang_fp8_utils.py:99-115), so "
              "SGLang refuses the layer while loading (verl PR #6906)"),
    "VI646": ("VeOmni mesh that does not tile the GPUs", "model_engine=veomni (or a role's strategy veomni): "
              "veomni.ulysses_parallel_size must divide the GPUs, veomni.fsdp_size (when 0 < it < world/ulysses) the "
              "data-parallel size (VeOmniEngine raises ValueError on the workers, veomni/transformer_impl.py:151-163), "
              "and veomni.expert_parallel_size the FSDP shard group (VeOmni asserts it, PR#867); nothing checks them "
              "before the GPUs are booked"),
    "VI647": ("reward function signature verl cannot call", "the custom reward function takes no **kwargs and either lacks a keyword verl passes (data_source, solution_str, ground_truth, extra_info, and each custom_reward_function.reward_kwargs key) or requires a parameter verl never passes: TypeError at the first reward, in the reward-loop worker (reward_manager/naive.py:66-84; verl#3374, PR#2954)"),
    "VI648": ("DAPO metric verl's built-in scorer never returns", "filter_groups.metric (not reward) that the "
              "default scorer of the training rows' data_source (or of any data_source) never puts in "
              "reward_extra_info (a number -> acc, math_dapo -> acc/pred/score: scripts/verl_scorer_formats.py), e.g. "
              "the old recipe's seq_final_reward: 'Finished groups are missing DAPO metric' after the first rollout "
              "(replay_buffer.py:304-308, verl#1427)"),
    "VI649": ("DAPO filter on the overlong-shaped reward", "filter_groups.metric=reward (0.9.1's default) with the DAPO "
              "manager's overlong penalty on: the penalty is in rm_scores (dapo.py:108-119), so same-outcome groups "
              "of different lengths survive the filter and train on length alone (verl-recipe#125); filter on acc"),
    "VI650": ("DAPO filter on the legacy trainer", "algorithm.filter_groups.enable=True with trainer.use_v1=False: "
              "main_ppo's legacy trainer (main_ppo_v0.py, ray_trainer.py) never reads filter_groups, so dynamic "
              "sampling is silently off (only trainer/ppo/v1/ reads it; verl#2211)"),
    "VI651": ("weight-sync bucket below the largest tensor", "checkpoint_engine.update_weights_bucket_megabytes below "
              "embed_tokens / lm_head as the trainer sends it (vocab × hidden, fp32 from the FSDP actor), on a sync "
              "path that asserts instead of splitting a tensor: TensorRT-LLM rollout (trtllm_rollout.py:519), the "
              "mooncake engine (mooncake_checkpoint_engine.py:205), vLLM on Ascend without IPC "
              "(bucketed_weight_transfer.py:141; verl#5952)"),
    "VI652": ("LoRA adapters never reach a disaggregated rollout", "model.lora.merge=False with fully-async, "
              "one-step-off or separate_async syncing through a non-naive checkpoint engine: engine_workers.py:764 "
              "calls get_per_tensor_param() with its defaults, so only the frozen base is sent and the rollout "
              "samples the initial policy all run (verl#7495)"),
    "VI653": ("reward function answer verl cannot read", "a dict the custom reward function returns lacks 'score' (KeyError, reward_manager/naive.py:90) or holds a nested dict (every key becomes a reward_extra_info value; validation's np.mean fails on it, metric_utils.py:1017; verl#2279), or whose returns give different key sets (a number is {acc}): verl names the extra-info columns after the first sample and reads info[key] from the others (reward_loop.py:365-369): KeyError (verl PR#6545)"),
    "VI654": ("VeOmni Ulysses without remove-padding", "veomni.ulysses_parallel_size > 1 with the role's "
              "model.use_remove_padding=False: the VeOmni engine SP-slices only on the remove-padding path "
              "(veomni/transformer_impl.py:120-123; VeOmniActorConfig, workers/config/actor.py:367-376) and verl "
              "accepts it, where the FSDP actor refuses the pair (actor.py:331-341)"),
    "VI655": ("FSDP merger on a VeOmni checkpoint", "`verl.model_merger merge --backend fsdp` on the checkpoint of a "
              "model_engine=veomni run: VeOmni's FSDP2 shards carry a ('dp_shard',) mesh and verl 0.9.1's merger "
              "asserts mesh_dim_names in (('fsdp',), ('ddp', 'fsdp')) (model_merger/fsdp_model_merger.py:138; "
              "verl PR#7942); save 'hf_model' in actor.checkpoint.save_contents instead"),
    "VI656": ("config key only a module verl never loads reads", "a key whose every reader is a verl module that no "
              "code of verl imports or names (the `orphan_only` map of wizard/check/data/verl_readers.json): "
              "rollout.multi_turn.tokenization_sanity_check_mode / use_inference_chat_template, read only by "
              "workers/rollout/schemas.py, so the tool agent loop runs no tokenization check (verl#2165)"),
    "VI657": ("ray_kwargs.ray_init key ray.init does not take", "a key under ray_kwargs.ray_init that is no parameter "
              "of the installed Ray's ray.init (ray_kwargs.ray_init.timeline_json_file, a typo): verl passes every key to "
              "ray.init (main_ppo.py:72-74), which raises 'Unknown keyword argument(s)' (ray/_private/worker.py:1752; "
              "verl PR#1768 and its FAQ name the timeline key ray_init.timeline_json_file)"),
    "VI658": ("Ray env_vars value that is not a string", "a ray_kwargs.ray_init.runtime_env.env_vars value Hydra types "
              "as int, float, bool or null (`+...env_vars.TRANSFER_QUEUE_ENABLE=1`): verl merges it into ray.init's "
              "runtime_env unchanged (main_ppo.py:71-74) and Ray raises TypeError 'env_vars must be of type Dict[str, "
              "str]' (runtime_env/validation.py:446; verl's examples/remax_trainer/run_qwen2.5_math_7b_sync_fsdp.sh)"),
    "VI659": ("ray.init resources on a run that joins a cluster", "ray_kwargs.ray_init.num_cpus, num_gpus, resources, "
              "labels, object_store_memory or _system_config set while ray.init joins a running cluster (`ray start` "
              "in the script, RAY_ADDRESS, ray_init.address, `ray job submit`): Ray raises ValueError 'When connecting "
              "to an existing cluster, num_cpus and num_gpus must not be provided' (ray/_private/worker.py:1936-1966)"),
    "VI661": ("Megatron LR schedule restarted on resume", "a Megatron actor/critic that resumes (resume_mode="
              "resume_path, or auto with save_freq > 0) with a warmup or a decaying lr_decay_style and "
              "optim.use_checkpoint_opt_param_scheduler=False (the default): verl saves the scheduler state but loads "
              "it only behind that flag (megatron_checkpoint_manager.py:411-412, 753-759, 956-962), so each resume "
              "replays the warmup and restarts the decay (verl#7953); fix: use_checkpoint_opt_param_scheduler=True"),
    "VI662": ("FSDP optimizer verl cannot build", "optim.optimizer not in optim.optimizer_impl, a documented "
              "optimizer module missing here, or a keyword (betas, an override_optimizer_config key) the class does "
              "not take: verl's build_optimizer raises AttributeError/ImportError/TypeError in each worker after the "
              "GPUs are booked (workers/config/optimizer.py:298-351, verl PR#3656)"),
    "VI663": ("Muon at an AdamW learning rate", "Megatron optim.optimizer=muon with the default "
              "muon_extra_scale_factor=1.0 and muon_match_adamw_update_rms=False: verl documents 1.0 as not "
              "AdamW-comparable (workers/config/optimizer.py:173-182); the same lr steps about 1/sqrt((1-b1)/(1+b1)) "
              "= 4.4x as far at beta1=0.9 (utils/megatron/optimizer.py:91-100, verl PR#7120); fix: "
              "muon_match_adamw_update_rms=True"),
    "VI664": ("SGLang server argument verl already sets", "a key under a rollout's engine_kwargs.sglang that verl's "
              "SGLang server builds itself (mem_fraction_static from gpu_memory_utilization, disable_cuda_graph from "
              "enforce_eager, tp_size from TP x DP, dtype, trust_remote_code, base_gpu_id, ...): **engine_kwargs is "
              "spread last (async_sglang_server.py:314-340), so it silently replaces verl's value; set verl's own key"),
    "VI665": ("media rows and a model verl builds no processor for", "a training/validation row with images, "
              "videos or audio while verl 0.9.1's hf_processor gives None for the model (a processor class its match "
              "has no case for, such as Gemma3Processor; a folder without preprocessor_config.json; a text model): "
              "RLHFDataset asserts a processor at the first batch (tokenizer.py:208-246, rl_dataset.py:323); train a "
              "model verl's hf_processor keeps, from a folder with its processor files"),
    "VI666": ("vision-language LoRA module the rollout never receives", "Megatron LoRA with model.lora.type="
              "vlm_lora and a freeze_vision_model / freeze_vision_projection / freeze_language_model switch False: "
              "VLMLoRA then trains that module's own weights in full, but with lora.merge=False verl syncs only the "
              "adapters after the first weight sync (megatron/transformer_impl.py:1036, :1044), so the rollout keeps "
              "the module's starting weights for the whole run (verl PR #6670); set lora.merge=True"),
    "VI667": ("clip_ratio shadowed by clip_ratio_low/high", "actor.clip_ratio set while clip_ratio_low/high stay at "
              "verl's non-null defaults (0.2): every clipping loss mode reads those first and falls back to clip_ratio "
              "only when null (core_algos.py:1321-1322), so clip_ratio is never read (FlowRL#15)"),
    "VI668": ("reference offload switch the FSDP engine overrides", "actor_rollout_ref.ref.fsdp_config.param_offload="
              "False (or offload_policy=False) for a reference on fsdp / fsdp2: the ref engine is forward_only "
              "(trainer/config/ref/dp_ref.yaml:20) and the FSDP engine CPU-offloads every forward_only engine's "
              "parameters whatever it says (workers/engine/fsdp/transformer_impl.py:432-435, :459-463), so the "
              "reference streams from host memory each micro-batch (verl PR#7182); table scripts/verl_ref_placement.py"),
    "VI669": ("reference settings in a LoRA run", "actor_rollout_ref.ref.* set while model.lora.rank / lora_rank > 0 "
              "or a lora_adapter_path and the reference is used: verl builds no ref worker (ref_in_actor, "
              "trainer/ppo/v1/trainer_base.py:234-237, ray_trainer.py:356-360), the ref log-probs are the actor's "
              "with the adapter disabled, sized by rollout.log_prob_* (workers/engine_workers.py:616-625), so the "
              "ref.* keys are never read (verl#3366); table scripts/verl_ref_placement.py"),
    "VI670": ("CISPO importance weight floored", "policy_loss.loss_mode=cispo with clip_ratio_low < 1: the stop-gradient "
              "IS weight is clamped to at least 1 - clip_ratio_low (core_algos.py:2079), so off-policy tokens keep "
              "weight instead of being damped; verl's CISPO example sets clip_ratio_low=10 (SkyRL PR#553)"),
    "VI672": ("fused Triton kernels on Ascend NPUs", "trainer.device=npu (or an Ascend --gpu-type) with "
              "use_fused_kernels=True on impl_backend=triton or the Megatron engine: verl's linear_cross_entropy "
              "kernels carry NVIDIA-sized autotune blocks (utils/kernel/kernels.py:183-188) that overflow the NPU "
              "core's Unified Buffer when triton-ascend compiles them (verl#7950)"),
    "VI673": ("mbridge with virtual pipeline stages on Ascend NPUs", "trainer.device=npu with a Megatron role's "
              "virtual_pipeline_model_parallel_size > 1 and use_mbridge=True (the default, workers/config/engine.py:208): "
              "not supported together on MindSpeed, IndexError at model build (verl#4815)"),
    "VI674": ("LoRA rank wider than a packed slice on vLLM-Ascend", "trainer.device=npu with rollout.name=vllm and a "
              "LoRA rank (as vLLM's max_lora_rank) above the narrowest packed-layer slice per rollout TP rank "
              "(qkv_proj, gate_up_proj, a Gated DeltaNet's in_proj_qkvz / in_proj_ba) from config.json: vllm-ascend's "
              "sgmv_expand refuses it at engine start (verl PR#7921)"),
    "VI675": ("reward model context shorter than prompt + response", "a discriminative reward model (reward.reward_model.enable, no custom reward function) whose context (rollout.max_model_len on vLLM, else the checkpoint's max_position_embeddings) is shorter than data.max_prompt_length + data.max_response_length: verl sends it each whole prompt + response uncut, and the server's 400 is raised without retry (reward_loop.py:165-172, :197-241)"),
    "VI676": ("reward model chat template missing or refusing the data", "a discriminative reward model whose tokenizer has no chat template, or whose template raises on a training row's prompt + an assistant message, as verl's reward loop renders it (reward_loop.py:197-220): fails at the first reward, in the reward worker"),
    "VI678": ("profiling asked for but the role's profiler is not enabled", "global_profiler.tool and "
              "global_profiler.steps set while no role's profiler.enable is True, or a role's ranks chosen "
              "(all_ranks/ranks) with enable False: each worker's DistProfiler is disabled (utils/profiler/"
              "profile.py:123-134, 202, 217) and the profiled steps write nothing for it (verl#6181)"),
    "VI679": ("profiler tool_config of a tool that does not run", "settings under <role>.profiler.tool_config.<X> "
              "while the role profiles with another tool: the worker reads only tool_config[<role>.profiler.tool] "
              "(workers/engine_workers.py:488-491), so they are ignored and the running tool keeps its defaults "
              "(verl#6329)"),
    "VI680": ("SFT resume from an epoch-end checkpoint skips an epoch", "trainer.resume_mode auto/resume_path with "
              "trainer.save_freq=after_each_epoch or a multiple of the steps of an epoch: verl restores the exhausted "
              "train dataloader (checkpoint_handler.py:164-178) while the trainer starts the next epoch "
              "(sft_trainer.py:341, 356-357), so a relaunch silently skips an epoch, or exits 0 untrained (verl#7401)"),
    "VI681": ("SFT data without the messages column", "a local train/val parquet without the column "
              "data.messages_key names: verl's MultiTurnSFTDataset takes dataframe[messages_key] "
              "(multiturn_sft_dataset.py:165), a KeyError on every rank after torchrun started them (verl#1934: "
              "RL-format gsm8k data given to the SFT trainer)"),
    "VI682": ("SFT max_length above the dynamic-batch token budget", "data.max_length > data.max_token_len_per_gpu "
              "x Ulysses size with data.use_dynamic_bsz on: rearrange_micro_batches asserts every sample fits the "
              "budget (seqlen_balancing.py:384-386), so the first batch with a longer sample stops the run "
              "mid-training (verl#3088)"),
    "VI683": ("--deep: SFT tokens differ from the chat template, hidden", "data.ignore_input_ids_mismatch=true "
              "and verl's MultiTurnSFTDataset, read with it off in the sandbox, asserts on the first rows that the "
              "turns tokenized one by one differ from the whole conversation under the chat template "
              "(multiturn_sft_dataset.py:425-470): the run trains on sequences inference never sees (verl#7807)"),
    "VI684": ("model-merger backend that does not fit the run's checkpoint", "a `verl.model_merger merge` in the "
              "launch script whose --backend reads files the run never writes: --backend megatron on a Megatron run "
              "without megatron.use_dist_checkpointing (the merger reads only model/dist_ckpt; the run saved Hugging "
              "Face weights to model/huggingface, megatron_checkpoint_manager.py:118-143; verl#4338), or a backend "
              "other than the training engine's"),
    "VI685": ("--tie-word-embedding for an untied model", "`verl.model_merger merge --backend megatron "
              "--tie-word-embedding` for a model whose config has tie_word_embeddings=false: the merger drops every "
              "output_layer tensor (megatron_model_merger.py:373-375) and the exported lm_head is left uninitialised "
              "(verl#2612); drop the flag"),
    "VI686": ("merger output of a LoRA run loaded as a merged model", "`verl.model_merger merge` on an FSDP LoRA run "
              "writes the base weights to --target_dir and the adapter, unmerged, to <target_dir>/lora_adapter "
              "(base_model_merger.py:311-423): serving target_dir without the adapter serves the base model "
              "(verl#7285); merge with peft's merge_and_unload or serve with --enable-lora"),
    "VI687": ("Megatron merger on a vision-language model", "`verl.model_merger merge --backend megatron` on a "
              "vision-language model trained with megatron.use_dist_checkpointing: the merger's name table maps only "
              "the language model (megatron_model_merger.py:175-214), so the vision tower is not converted "
              "(verl#4498); read model/huggingface, written with 'hf_model' in checkpoint.save_contents"),
    "VI688": ("nsys GPU metrics in every worker", "gpu-metrics-devices (or gpu-metrics-device) in "
              "global_profiler.global_tool_config.nsys.worker_nsight_options with several GPUs a node: verl starts "
              "every worker under its own nsys with those options (single_controller/ray/base.py:658-662) and one "
              "nsys session samples a GPU's metrics at a time, so the workers fail to start (verl#2438)"),
    "VI689": ("role-level key the FSDP engine never reads", "actor_rollout_ref.actor/ref.use_torch_compile set on "
              "fsdp / fsdp2: the engine compiles entropy_from_logits from <role>.fsdp_config.use_torch_compile "
              "(workers/engine/fsdp/transformer_impl.py:183-186), a literal true in verl's trainer YAML "
              "(_generated_ppo_trainer.yaml:44, :252) that nothing fills from the role key (actor.py:319-325), so "
              "the role-level value is ignored (verl-recipe PR#150); table scripts/verl_engine_flags.py"),
    "VI690": ("fused kernels the Megatron engine turns off", "model.use_fused_kernels=True on the Megatron engine with "
              "use_remove_padding=False, model.mtp.enable=True or on the critic (a value model): "
              "_maybe_enable_fused_kernels sets it False with only a worker-log warning "
              "(workers/engine/megatron/transformer_impl.py:522-531), so the full [tokens, vocab] logits are "
              "materialised and long-context memory runs out (verl PR#7826)"),
    "VI691": ("tool-call parser verl does not register", "rollout.multi_turn.format names no parser of "
              "ToolParser's registry (hermes, gpt-oss, qwen3_coder, glm, seed, minimax, kimi, deepseek_v4, gemma4 in "
              "0.9.1; table scripts/verl_tool_parsers.py): the tool agent loop raises ValueError('Unknown tool "
              "parser') at the first rollout, after the GPUs are booked (tool_parser.py:82-85, "
              "tool_agent_loop.py:120); verl's rollout.yaml offers llama3_json and its search_r1 example used qwen "
              "(verl PR#5114); a warning when a module of the user's that could register one is not readable here"),
    "VI692": ("serving-layer option verl's agent loop never reaches", "engine_kwargs.<vllm|sglang> sets a tool-call "
              "parser, reasoning parser or chat template of the engine's OpenAI serving layer while every rollout goes "
              "through verl's token-in agent loops (TokensPrompt / input_ids, vllm_async_server.py:648-667): inert; "
              "the tool agent loop reads calls with rollout.multi_turn.format (verl PR#6844, #6424)"),
    "VI693": ("tokenizer remote code not trusted where verl loads it", "actor_rollout_ref.model.trust_remote_code "
              "is false while data.trust_remote_code=True (main_ppo never reads it: verl loads the tokenizer and "
              "processor with the model's flag, workers/config/model.py:153-162; only the experimental fully_async / "
              "one_step_off mains read the data flag, for the dataset tokenizer alone) or the tokenizer folder's "
              "tokenizer_config.json maps AutoTokenizer to its own code (auto_map): transformers refuses it, or "
              "silently loads its built-in class instead; fix: actor_rollout_ref.model.trust_remote_code=true"),
    "VI694": ("relaunch resumes a checkpoint at the step budget", "trainer.resume_mode auto/resume_path resuming a "
              "global_step_N (found on this machine) with N ≥ trainer.total_training_steps (or total_epochs × the "
              "batches of an epoch): the legacy trainer trains and saves step N+1 past the budget on every relaunch "
              "(ray_trainer.py:1451, 1465, 1507; verl#6232), the V1 trainer validates and exits 0 without a step "
              "(v1/trainer_base.py:467)"),
    "VI697": ("SFT resume path with two global_step folders", "trainer.resume_from_path (resume_mode resume_path, or "
              "auto with a path) holding more than one global_step_N: verl's SFT trainer loads the last folder but "
              "restores the step from the first (utils/checkpoint/checkpoint_handler.py:33-37, 151; PR verl#7257, "
              "#6543); fix: put the checkpoint where no other global_step_N is in its path"),
    "VI698": ("SFT async checkpoint save never finalized", "checkpoint.async_save=True on the SFT trainer's Megatron "
              "engine: the writes are queued with the manifest/tracker as the queue's finalize "
              "(megatron_checkpoint_manager.py:1164-1169), which the SFT trainer never runs, while it writes the "
              "tracker at once (checkpoint_handler.py:126-133; PR verl#7363); fix: drop checkpoint.async_save"),
    "VI695": ("config group replaced by a plain value", "an override sets a key that is a group in verl's "
              "defaults to a scalar (actor_rollout_ref.rollout.multi_turn=True, as verl's multiturn.rst writes it, "
              "verl PR#7673): omega_conf_to_dataclass keeps the scalar unchecked and the first read of a field "
              "fails with AttributeError in the workers (agent_loop.py:526, ray_trainer.py:1329); an error for a "
              "dataclass group (_target_ below it), a warning for another mapping"),
    "VI696": ("function-tool file that fails in the agent-loop workers", "rollout.multi_turn.function_tool_path "
              "does not parse, or imports a verl module verl 0.9.1 does not ship (verl PR#6189's description: "
              "verl.tools.utils.function_tool; 0.9.1: verl.tools.function_tool): the dataset only logs the failure "
              "(rl_dataset.py:128-145) and every AgentLoopWorker fails loading it after the GPUs are booked "
              "(agent_loop.py:526-531, tools/function_tool.py:151-169); the file is parsed with ast, never run"),
    "VI699": ("generation-only run with dummy rollout weights", "verl.trainer.main_generation_server with actor_rollout_ref.rollout.load_format a dummy* format (verl's default, rollout/rollout.yaml:100): its standalone servers (init_standalone, main_generation_server.py:40-56) are never synced, so every response comes from random weights, with no error (PR #6126's example sets load_format=auto)"),
}
