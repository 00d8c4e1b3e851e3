"""The `verl-init check` rules: ID -> (title, what it checks / where verl checks it).

One home for the table: the README, wizard.check.rule_index and the tests read it, and
`Ctx.add` (wizard.check.rules.context) refuses an ID that is not here.
"""

from __future__ import annotations

RULES: dict[str, tuple[str, str]] = {
    "VI800": ("unresolved value", "a value the script takes from its environment, a command or a branch; rules that read it are skipped"),
    "VI801": ("unknown key", "not in verl's config tree: Hydra refuses the override (or verl ignores the YAML key); did you mean ..."),
    "VI802": ("added key verl ignores", "`+key` under a section verl reads as a plain mapping: accepted and silently ignored"),
    "VI803": ("`+` on an existing key", "Hydra refuses `+key=value` when the key exists (`Could not append to config`)"),
    "VI804": ("added key a dataclass rejects", "`+key` inside a section verl turns into a dataclass without that field (TypeError at start-up)"),
    "VI805": ("legacy reward key", "top-level reward_model.* / custom_reward_function.* / sandbox_fusion.* / reward_manager.*: ignored by verl 0.9 main_ppo (an error); fully_async_main maps them onto reward.* (a deprecation warning)"),
    "VI806": ("deprecated micro-batch key", "global *_micro_batch_size keys: the 0.9.1 workers assert on *_per_gpu (engine_workers.py:636)"),
    "VI807": ("required value missing", "`???` values and the micro-batch sizes verl requires without dynamic batching (validate_config)"),
    "VI808": ("wrong value type", "Hydra does not type-check verl's YAML: a text where a number or boolean belongs fails later"),
    "VI809": ("value not in verl's choices", "estimators, losses, KL types, rollout engines, loggers, reward managers, strategies, schedulers, ..."),
    "VI810": ("rollout layout does not tile the GPUs", "engine_workers.py:659 / replica.py:113 / vllm_async_server.py:385"),
    "VI811": ("rollout TP crosses nodes", "a tensor-parallel group spans or straddles nodes: valid, but its traffic crosses the network"),
    "VI812": ("Ulysses sequence parallel", "SP must divide the GPUs and the attention heads, and needs use_remove_padding (validate_config; for verl's SFT trainer engine.ulysses_sequence_parallel_size: fsdp/transformer_impl.py:148-152, monkey_patch.py:343-350)"),
    "VI813": ("Megatron layout", "TP×PP×CP and the expert grid ETP×EP×PP must divide the GPUs, VPP needs PP > 1, layers over "
                                 "PP×VPP (or, with override_transformer_config.num_layers_in_first/last_pipeline_stage, "
                                 "the layers left over the stages left), experts over EP (validate_config, Megatron-core); "
                                 "TP stays inside a node"),
    "VI818": ("Megatron TP and the attention heads", "num_attention_heads and num_query_groups (KV heads) must divide by "
                                                     "tensor_model_parallel_size (megatron-core's TransformerConfig)"),
    "VI819": ("expert group across nodes", "expert_tensor_parallel_size × expert_model_parallel_size consecutive ranks "
                                           "leave a node: the MoE all-to-all crosses the network"),
    "VI814": ("config vs hardware", "trainer.nnodes × n_gpus_per_node (plus separate reward/teacher pools) against the given hardware"),
    "VI815": ("rollout parallelism verl cannot run", "rollout PP > 1 (NotImplementedError) and EP ≠ TP×DP (RolloutConfig)"),
    "VI817": ("rollout engine without a build for the device", "trainer.device=npu (or an Ascend --gpu-type) with SGLang: "
                                                               "verl 0.9.1's SGLang server has no NPU path"),
    "VI816": ("critic sequence parallel set on the ignored key",
              "critic.ulysses_sequence_parallel_size is deprecated; verl 0.9's critic engine reads critic.fsdp's"),
    "VI820": ("mini-batch larger than the train batch", "validate_config checks it only without dynamic batching; with it verl pads the batch"),
    "VI821": ("train batch does not split over the GPUs", "validate_config: train_batch_size × n must divide by n_gpus (skipped under dynamic batching)"),
    "VI822": ("mini-batch does not split over data-parallel ranks", "engine_workers.py:264, asserted only inside the Ray workers"),
    "VI823": ("micro-batch does not divide the per-GPU mini-batch", "engine/utils.py:123, asserted only inside the Ray workers"),
    "VI824": ("log-prob micro-batch does not divide the per-GPU batch", "engine/utils.py:123 for the rollout and reference log-prob passes"),
    "VI825": ("padding sequences every step", "train_batch_size × n is not a multiple of lcm(dp, mini × n): verl pads the batch (trainer_base.py:1589)"),
    "VI826": ("dynamic-batching flags disagree", "actor.use_dynamic_bsz must equal rollout.log_prob_use_dynamic_bsz (engine_workers.py:616)"),
    "VI827": ("micro-batch sizes ignored", "micro-batch sizes set while dynamic batching packs by token budget"),
    "VI830": ("token budget below one sequence", "*_max_token_len_per_gpu × SP must hold prompt + response (seqlen_balancing.py:384)"),
    "VI831": ("rollout max_num_batched_tokens", "below prompt + response with chunked prefill off: verl raises it (vllm_async_server.py:1113)"),
    "VI833": ("context length", "prompt + response against the model's context and rollout.max_model_len (vllm_async_server.py:1101)"),
    "VI836": ("freeze_vision_tower without effect", "actor.freeze_vision_tower=True: verl 0.9.1 declares it (workers/config/actor.py:161) but no worker reads it"),
    "VI834": ("small token budget", "dynamic token budget below 2 × (prompt + response): one or two sequences per micro-batch (perf guide)"),
    "VI840": ("GAE without a critic", "adv_estimator=gae with critic.enable=False fails at step 1 (KeyError: 'values')"),
    "VI782": ("critic warmup without a critic", "trainer.critic_warmup > 1 in a run that builds no critic (grpo, ...): verl still skips the actor update for steps 1..critic_warmup-1"),
    "VI783": ("per-token discount fades the outcome reward", "algorithm.gamma / lam < 1 with gae or reinforce_plus_plus: the last token's reward reaches the first response token scaled by (gamma·lam)^(L-1), under 1e-3"),
    "VI784": ("critic vocabulary does not match the actor's", "critic.model.path a model whose vocab_size is below the actor tokenizer's ids (verl feeds the actor's ids to the critic unchanged), or whose tokenizer maps the ids to other tokens"),
    "VI841": ("critic settings without GAE", "a critic that is trained but unused, or critic.* settings that have no effect"),
    "VI842": ("KL in the loss and in the reward", "the KL term is counted twice (verl only prints a NOTICE)"),
    "VI843": ("KL coefficient without effect", "a KL coefficient set while that KL term is off (or a zero coefficient for a KL term that is on)"),
    "VI844": ("reference settings without a reference", "ref.* settings while neither KL loss nor KL reward uses the reference model"),
    "VI845": ("critic and reward model share a checkpoint", "the critic needs a value head, the reward model a classifier"),
    "VI846": ("critic model path left at verl's default", "critic.model.path is not interpolated from the policy: verl loads ~/models/deepseek-llm-7b-chat"),
    "VI847": ("group estimator with one sample per prompt", "grpo/rloo/... compare samples within a prompt's group: with n=1 there is no group (grpo/rloo fall back to the raw score)"),
    "VI848": ("reward model / group filtering settings", "reward_model.py:47-71 and trainer_base.py:195-203, checked only after Ray starts"),
    "VI850": ("gpu_memory_utilization out of range", "must be in (0, 1]; verl passes it to vLLM/SGLang unchecked"),
    "VI851": ("rollout.n below 1", "n=0 passes validate_config (0 % x == 0)"),
    "VI852": ("temperature 0 with sampling", "do_sample with temperature ≤ 0: identical samples (an error for the training rollout; a warning for validation, whose val_kwargs.temperature validate_config does not check)"),
    "VI853": ("rollout mode sync", "removed in verl 0.9: RolloutConfig raises"),
    "VI854": ("policy-loss parameters", "dual-clip needs clip_ratio_c > 1; the dro loss needs dro_beta > 0 (core_algos.py)"),
    "VI855": ("tools that never fire", "tools configured (multi_turn.*) but the default agent loop is single_turn_agent and rows name none (agent_loop.py:610)"),
    "VI856": ("LoRA rank and vLLM", "vLLM serves LoRA ranks up to 512 and reserves the next of 1,8,16,32,64,128,256,320,512"),
    "VI857": ("deprecated or rewritten setting", "data.val_batch_size (verl calls it deprecated and still reads it), "
              "trainer.device=cpu (rewritten to cuda)"),
    "VI858": ("tool config verl cannot load", "multi_turn.tool_config_path missing, without a native `tools:` list, or a class_name that does not import here (an error where verl's registry fails for certain: config.type not native, a verl module 0.9.1 does not ship)"),
    "VI859": ("tool agent loop without tools", "default_agent_loop=tool_agent or multi_turn.enable with no tool_config_path / function_tool_path"),
    "VI860": ("memory does not fit / is tight", "a phase's estimated peak per GPU (rollout, weight sync, log-prob, update; GiB, wizard.planner.memory) is over the card: error; only its ±20% band is: warning naming the phase"),
    "VI861": ("memory not estimated", "no GPU memory size, or no model shape (placeholder, unknown model)"),
    "VI862": ("rollout engine reservation too small", "gpu_memory_utilization × GPU memory cannot hold the weights per GPU and one sequence's KV cache"),
    "VI838": ("rollout TP against the attention heads", "vLLM/SGLang split each attention layer's heads (and KV heads, or "
              "replicate them evenly) over the rollout's tensor_model_parallel_size: a size that does not divide them fails "
              "at engine start (QKVParallelLinear divide(); vLLM ModelConfig.verify_with_parallel_config)"),
    "VI839": ("resume from a path verl cannot read", "resume_mode=resume_path needs a global_step_N folder, its step the "
              "text after the last 'global_step_' (int() at fit start), with an actor/ folder (trainer_base.py:866-881); "
              "sft_trainer: the global_step_N folder itself, with the engine's shards (checkpoint_handler.py:164-216)"),
    "VI849": ("LoRA on a vision tower vLLM ignores", "FSDP LoRA on a vision-language model whose target_modules reach the "
              "vision tower and exclude_modules does not exclude it: vLLM serves LoRA on the language model only"),
    "VI835": ("micro-batches under the interleaved schedule", "Megatron with virtual pipeline > 1 and fixed micro-batches: "
              "each pass's micro-batch count must divide by microbatch_group_size_per_vp_stage (the pipeline size), "
              "a worker-time assert (megatron/transformer_impl.py:914)"),
    "VI837": ("vision patch embedding on torch 2.9", "torch 2.9 with a cuDNN before 9.15 (as installed here) runs a Qwen-VL "
                                                     "tower's stride-equals-kernel Conv3d through aten::slow_conv_dilated3d: "
                                                     "patches × hidden single-channel fills per image, seconds per image "
                                                     "(the training file's own images when it is here) in each "
                                                     "training pass (pytorch/pytorch#166643, #174051)"),
    "VI895": ("predicted step time", "seconds per phase, per step and GPU-hours for the run (wizard.planner.steptime), with the response length and GPU it assumed"),
    "VI896": ("log-prob micro-batch far below what memory allows", "a fixed log_prob_micro_batch_size_per_gpu so small that per-micro-batch costs take half the log-prob pass while the memory estimate allows 4× more"),
    "VI897": ("idle rollout GPUs", "rollout replicas with no sequence to generate, or a rollout TP larger than the model needs (half the TP fits and the predicted rollout is 20% shorter)"),
    "VI898": ("padded training passes", "use_remove_padding=false where the training passes, computing every sequence at max_prompt_length + max_response_length, are predicted to take at least 20% of the step more than packed sequences"),
    "VI899": ("rollout and training out of balance on separate GPUs", "one-step-off or fully async: one side waits at least 40% of every step for the other, and another split of the same GPUs that training can run is predicted at least 20% faster"),
    "VI880": ("LoRA keys the training engine does not read", "a LoRA rank in the other engine's block (FSDP: model.lora_rank; Megatron: model.lora.rank): the engine trains all weights while verl keeps the reference in the actor and fails at its first pass (ray_trainer.py:360); other LoRA keys it ignores (warning)"),
    "VI881": ("Megatron LoRA without Megatron-Bridge", "model.lora.rank > 0 with megatron.use_mbridge=False or vanilla_mbridge=True: verl asserts it when the worker starts (megatron_peft.py:26)"),
    "VI882": ("Megatron LoRA with the delta_sharded weight sync", "checkpoint_engine.backend=delta_sharded asserts 'does not support LoRA' at the first sync (megatron/transformer_impl.py:1077)"),
    "VI887": ("reward function without the router keywords", "a reward model is enabled but the custom reward function takes neither reward_router_address/reward_model_tokenizer nor **kwargs (naive.py:56: TypeError at the first reward)"),
    "VI647": ("reward function signature verl cannot call", "the custom reward function takes no **kwargs and either lacks a keyword verl passes (data_source, solution_str, ground_truth, extra_info, and each custom_reward_function.reward_kwargs key) or requires a parameter verl never passes: TypeError at the first reward, in the reward-loop worker (reward_manager/naive.py:66-84; verl#3374, PR#2954)"),
    "VI653": ("reward function answer verl cannot read", "a dict the custom reward function returns lacks 'score' (KeyError, reward_manager/naive.py:90) or holds a nested dict (every key becomes a reward_extra_info value; validation's np.mean fails on it, metric_utils.py:1017; verl#2279)"),
    "VI888": ("judge function without a reward model", "the custom reward function requires reward_router_address (a generative judge's) but reward.reward_model.enable is false"),
    "VI705": ("checkpoint engine backend verl does not register", "actor_rollout_ref.rollout.checkpoint_engine.backend is not a name any verl engine registers (@CheckpointEngineRegistry.register: naive, nccl, nixl, kimi_ckpt_engine, mooncake, delta_sharded; 'hccl' registers as 'nccl', checkpoint_engine/hccl_checkpoint_engine.py:103) and no custom_backend_module is set: every actor worker raises 'not registered' at init (workers/engine_workers.py:686, checkpoint_engine/base.py:84-99; verl#6425)"),
    "VI706": ("a class named as the custom reward function", "reward.custom_reward_function.name names a class in its file: verl calls it as compute_score(data_source=, solution_str=, ...) in the reward worker (trainer/ppo/reward.py:70-86, reward_manager/naive.py:67-84): TypeError at the first reward; a reward manager belongs in reward.reward_manager (verl#3606)"),
    "VI707": ("importlib reward manager verl's reward loop cannot build", "reward.reward_manager.source=importlib names a class derived from the legacy batch managers (workers/reward_manager, verl#4390), or whose __init__ refuses the keywords verl passes (config, tokenizer, compute_score, reward_router_address, reward_model_tokenizer; trainer/ppo/reward.py:152-157, reward_loop.py:131-136), or that lacks run_single: fails in the reward worker"),
    "VI700": ("a generative model as the classifier reward model", "reward.reward_model.enable with no custom reward function and a vLLM reward model whose checkpoint is a causal/chat LM (architectures *ForCausalLM): verl posts to /classify, which vLLM's generate runner does not serve (error at the first reward)"),
    "VI889": ("reward model without enough GPUs", "a reward-model replica (TP×DP×PP) larger than its pool, or enable_resource_pool with n_gpus_per_node/nnodes ≤ 0 (verl fails after Ray starts)"),
    "VI879": ("cluster file disagrees with verl_config.yaml", "a bundle's RayJob/RayCluster GPUs, ConfigMap or Slurm nodes describe another job than its verl_config.yaml (a file left from an earlier render)"),
    "VI765": ("a reward function that times out with signals", "the custom reward function's file calls signal.signal/alarm/setitimer, or math_verify's parse/verify with their timeout on or math_metric, in a synchronous function: verl calls it in a worker thread (loop.run_in_executor, reward_manager/naive.py:74-84), where signals raise ValueError and math_verify scores 0 (verl PR#5635)"),
    "VI766": ("a prompt asking for an answer format its scorer rejects", "a data row's prompt names an answer format (\\boxed, ####, <answer>) that verl's built-in scorer for its data_source never gives full marks, and none it does (e.g. \\boxed{} with openai/gsm8k, whose scorer reads only '#### N'): every reward 0 (verl#2150); formats derived by running verl's scorers (scripts/verl_scorer_formats.py)"),
    "VI922": ("data_sources whose scorers return different shapes in one set", "the training (or validation) files mix data_sources whose built-in scorers give reward_extra_info different keys (a float -> {acc}; math_dapo's dict -> {acc, pred, score}): verl takes each chunk's keys from its first sample (agent_loop.py:1107-1111), so KeyError 'score' or dropped keys (verl#1031)"),
    "VI878": ("garbled data rows", "a data file's first rows: no row with the data.prompt_key column, a chat stored as JSON text, an empty prompt, a system message not first, no ground truth, a non-string ground truth for a scorer that compares strings (gsm8k, MATH, math_dapo/aime), a data_source no scorer knows, or <image>/<video>/<audio> placeholders that do not match the row's media"),
    "VI872": ("fewer training rows than one batch", "verl drops the incomplete batch (drop_last) and trains 0 steps"),
    "VI883": ("sandbox bypassed by a custom reward function", "reward.sandbox_fusion.url with reward.custom_reward_function.path: verl binds the sandbox into its default scorer only (ppo/reward.py:134)"),
    "VI884": ("sandbox URL verl cannot or should not use", "reward.sandbox_fusion.url not http(s) (every call fails, rewards 0) or with credentials in it (shown redacted)"),
    "VI885": ("sandbox never called", "reward.sandbox_fusion.url set but the training rows' data_source is not one verl routes to its code scorer"),
    "VI890": ("key read by nothing this configuration runs", "every module of verl that reads the key (wizard/check/data/"
              "verl_readers.json, from scripts/verl_readers.py) belongs to another strategy, engine, trainer mode or "
              "entry point: the setting is silently ignored"),
    "VI891": ("config not found: checked against a guessed tree", "a --config-path/--config-name that is not here (a "
              "recipe's config): one finding naming it and the verl tree the rest was checked against (*megatron* → "
              "ppo_megatron_trainer), the keys it would add left unchecked instead of one unknown-key error each"),
    "VI892": ("a value verl's code rejects or divides by", "an assert, a raise or a division in verl (wizard/check/data/"
              "verl_requirements.json, from scripts/verl_requirements.py, cited file:line) that the value fails, in a "
              "module this configuration runs"),
    "VI893": ("keys verl needs together", "verl passes a key on under a condition on its sibling (if use_dist_checkpointing: "
              "load(dist_checkpointing_path)) while it is still null"),
    "VI894": ("critic without a token-classification class", "verl's FSDP engine loads a value model with "
              "AutoModelForTokenClassification and falls back to trl's value head (utils/model.py:641-680); the installed "
              "transformers has no such class for the critic's model type"),
    "VI951": ("critic under a separation-family trainer", "a run that builds a critic (GAE, or critic.enable=True) under "
              "one_step_off_policy or fully_async_policy: verl 0.9.1's SeparateRayPPOTrainer._create_critic_class reads "
              "critic.model.fsdp_config (AttributeError) or rejects a non-fsdp strategy (NotImplementedError) once the "
              "GPUs are booked (verl#7822)"),
    "VI952": ("critic tokenizer folder without a tokenizer", "critic.model.tokenizer_path (else critic.model.path) is a "
              "local folder with no tokenizer files: verl loads the critic's tokenizer there (workers/config/model.py:"
              "153-161): transformers < 5 raises after the GPUs are booked, 5 saves an empty tokenizer in critic checkpoints"),
    "VI972": ("data file is a `datasets` folder", "data.train_files/val_files names a folder written by save_to_disk: "
              "verl's RLHFDataset reads .parquet/.json/.jsonl files only (rl_dataset.py:173-178 raises ValueError)"),
    "VI904": ("context parallel that does not lower the tokens per GPU", "Megatron CP with dynamic batching packs "
              "ppo_max_token_len_per_gpu × CP tokens before the CP split (engine/utils.py:111, megatron/transformer_impl.py:836): "
              "when the budget already holds prompt + response, each GPU holds as many tokens as without CP"),
    "VI905": ("rollout data parallel across nodes for a dense model", "a vLLM replica of TP×DP GPUs larger than a node "
              "becomes one multi-node server (replica.py:113-118, vllm_async_server.py:384-414) although a model without "
              "experts gains nothing over separate TP replicas (DP in a replica serves EP = TP×DP)"),
    "VI907": ("Ulysses sequence parallel on a Gated DeltaNet model", "verl 0.9.1 splits Qwen3.5's linear-attention "
              "layers with flash-linear-attention's context-parallel kernels (models/transformers/qwen3_5.py:168-172 "
              "raises NotImplementedError without them, inside the workers); PPO's actor and the SFT trainers' "
              "engine.ulysses_sequence_parallel_size alike"),
    "VI906": ("rollout max_model_len above max_num_batched_tokens", "vLLM admits it only through chunked prefill; verl's "
              "rollout config asks to raise max_num_batched_tokens or lower max_model_len (rollout.yaml:86, "
              "vllm_async_server.py:1113)"),
    "VI870": ("file not found", "data files, model folders, reward function, custom classes and configs that do not exist here"),
    "VI871": ("reward function not in its file", "reward.custom_reward_function.name is not defined in the file (verl fails when the reward loop starts)"),
    "VI873": ("named class not in its file", "data.custom_cls.name or reward.reward_manager.name (source=importlib) is not defined at the top of the module file: read, not imported (verl fails when it loads it)"),
    "VI874": ("--deep: verl's config code raised", "verl's composition, validate_config or a config dataclass raised on this config, run in the sandbox (the check's name and verl's message)"),
    "VI875": ("--deep: the reward raised", "verl's reward loading, the reward manager or the score function raised on a synthetic sample from the first training row, run in the sandbox; or the function scores that sample differently in a worker thread, where verl's reward managers call it, than in the main thread"),
    "VI876": ("--deep: the dataset raised", "verl's dataset class (RLHFDataset or data.custom_cls) raised on the first rows of a data file, run in the sandbox"),
    "VI863": ("--deep: the tool-call parser does not read the model's tool calls", "multi-turn runs: verl's parser that "
              "rollout.multi_turn.format names gives back no call from the assistant turn the model's own chat "
              "template writes for one tool call (tool_agent_loop.py:300-308 then ends the turn with no tool called); "
              "the hint names the parser verl registers that reads it"),
    "VI829": ("variables exported before `ray job submit` never reach the job", "bash's run of the script: a "
              "variable a verl job reads (CUDA_VISIBLE_DEVICES, VLLM_*, NCCL_*, HF_*, WANDB_*, PYTHONPATH, ...) exported "
              "before `ray job submit` and not in the job's runtime env: Ray starts the job with the cluster's "
              "environment and the runtime env's env_vars"),
    "VI832": ("token budget ignored", "*_max_token_len_per_gpu set while its use_dynamic_bsz is off: verl reads the "
              "budget only when it packs micro-batches by tokens (engine/utils.py:108-128)"),
    "VI908": ("model without a chat template", "the model's tokenizer (a local folder or the Hugging Face cache) has no "
              "chat template and neither model.custom_chat_template nor data.apply_chat_template_kwargs gives one: "
              "verl drops every row (overlong filter) or stops at the first rollout"),
    "VI909": ("FSDP device mesh that breaks training", "fsdp_size that does not divide the trainer's GPUs (a rank is "
              "left out), or fsdp_size 1 with FSDP1, whose gradients are then never averaged across the GPUs"),
    "VI798": ("image patch size unlike the model's", "data.image_patch_size (verl's default 14) differs from the "
              "model's vision patch (Qwen3-VL: 16) with the overlong filter on: the filter counts image tokens on "
              "another grid than the rollout, keeps prompts the rollout refuses and drops prompts that fit"),
    "VI799": ("image prompts with the overlong filter off", "a vision-language run with data.filter_overlong_prompts "
              "off: verl's agent loop raises ValueError mid-training on the first image prompt longer than "
              "rollout.prompt_length (it cuts only text prompts; data.truncation is not read)"),
    "VI920": ("mm_processor_kwargs with the SGLang rollout", "data.mm_processor_kwargs with rollout.name=sglang: verl "
              "forwards it to SGLangHttpServer.generate, which takes no such argument (TypeError at the first rollout)"),
    "VI912": ("Megatron without Megatron-Bridge", "megatron.use_mbridge=False on a Megatron actor, reference or "
              "critic: verl 0.9.1's Megatron engine asserts use_mbridge when its worker starts"),
    "VI913": ("SGLang rollout data parallel without DP attention", "rollout.data_parallel_size > 1 on SGLang without "
              "engine_kwargs.sglang.enable_dp_attention: SGLang launches DP groups of TP × DP GPUs each"),
    "VI914": ("data file verl cannot read", "a data.train_files/val_files path that is not a .parquet, .json or "
              ".jsonl file (a folder of shards, a .csv): verl's RLHFDataset raises 'Unsupported file format'"),
    "VI667": ("clip_ratio shadowed by clip_ratio_low/high", "actor.clip_ratio set while clip_ratio_low/high stay at "
              "verl's non-null defaults (0.2): every clipping loss mode reads those first and falls back to clip_ratio "
              "only when null (core_algos.py:1321-1322), so clip_ratio is never read (FlowRL#15)"),
    "VI670": ("CISPO importance weight floored", "policy_loss.loss_mode=cispo with clip_ratio_low < 1: the stop-gradient "
              "IS weight is clamped to at least 1 - clip_ratio_low (core_algos.py:2079), so off-policy tokens keep "
              "weight instead of being damped; verl's CISPO example sets clip_ratio_low=10 (SkyRL PR#553)"),
    "VI915": ("GSPO with token-level clip bounds", "policy_loss.loss_mode=gspo with clip bounds ≥ 0.05: the sequence "
              "ratio GSPO clips barely moves, so the off-policy updates go unclipped (verl's GSPO examples: 3e-4 / 4e-4)"),
    "VI911": ("reward function looks for special tokens", "the custom reward file's string constants contain a token "
              "the model's tokenizer marks special (added_tokens special=true, or its eos/pad/...): verl's reward "
              "managers decode the response with skip_special_tokens=True (reward_manager/naive.py:55), so "
              "solution_str never holds it and a format reward that needs it is 0 for every response"),
    "VI916": ("no checkpoint saved", "trainer.save_freq ≤ 0 (verl's default -1): the PPO trainers save nothing, not "
              "even the last step"),
    "VI923": ("resume from HDFS verl has not implemented", "trainer.default_hdfs_dir on the legacy PPO trainer "
              "(trainer.use_v1=False), the one-step-off-policy or the fully async trainer with resume_mode auto or "
              "resume_path: its _load_checkpoint raises NotImplementedError('load from hdfs is not implemented yet') "
              "after the workers are built (ray_trainer.py:1056-1058; verl#250)"),
    "VI924": ("HDFS checkpoint folder nothing is copied to", "trainer.default_hdfs_dir with a non-Megatron actor or "
              "critic: only verl's Megatron checkpoint manager uploads there (megatron_checkpoint_manager.py:1126-1134); "
              "FSDPCheckpointManager ignores the path (fsdp_checkpoint_manager.py:272-290), so nothing reaches HDFS"),
    "VI925": ("async checkpoint save that auto-resume cannot find", "actor.checkpoint.async_save=True with a "
              "non-Megatron actor and resume_mode=auto: the trainer leaves latest_checkpointed_iteration.txt to the "
              "checkpoint manager (trainer_base.py:1010-1020) and only Megatron's writes it, so a restart trains from "
              "step 0 over its own checkpoints (verl#7952)"),
    "VI926": ("checkpoint saved on a different number of GPUs", "the checkpoint a run resumes (resume_from_path, or "
              "the one default_local_dir's tracker names) holds FSDP shards *_world_size_W_rank_*.pt for another W "
              "than trainer.nnodes × n_gpus_per_node: verl opens its own world's files and stops with "
              "FileNotFoundError (fsdp_checkpoint_manager.py:213-214; verl#2265)"),
    "VI709": ("router replay mode the run cannot feed", "the actor engine's router_replay.mode against the rollout's "
              "enable_rollout_routing_replay and rollout_correction.bypass_mode: R3 without the rollout capture "
              "(RuntimeError 'no routed_experts' at the first compute_log_prob, megatron/transformer_impl.py:1312), "
              "R2 with the capture (legacy trainer: ValueError at step 1, ray_trainer.py:1604; V1: R2 silently runs as "
              "R3; verl PR#4973) or R2 with bypass_mode (no old-logprob pass records the routes: RuntimeError at the "
              "first update; verl PR#7805); table scripts/verl_router_replay.py"),
    "VI728": ("rollout routes captured and never replayed", "rollout.enable_rollout_routing_replay=True while the "
              "actor's router_replay.mode is disabled or its strategy is one verl reads no mode for (only megatron / "
              "veomni: workers/engine_workers.py:498-505): the rollout returns routed experts and nothing replays them "
              "(R3 silently off); table scripts/verl_router_replay.py"),
    "VI729": ("vLLM engine argument verl writes over", "a key under a rollout's engine_kwargs.vllm that verl's vLLM "
              "server writes after the **engine_kwargs spread (vllm_async_server.py:349): enable_expert_parallel is "
              "always set to rollout.expert_parallel_size > 1 (:402), so +engine_kwargs.vllm.enable_expert_parallel="
              "True with expert_parallel_size=1 (verl docs/perf/best_practices.rst:141) runs without EP; table "
              "scripts/verl_vllm_server_args.py"),
    "VI927": ("MoE aux-loss coefficient the router never applies", "a Megatron actor/critic's "
              "override_transformer_config.moe_aux_loss_coeff > 0 while moe_router_load_balancing_type names no aux "
              "loss: verl 0.9.1 sets it to 'none' on the provider (transformer_impl.py:369) and Megatron's router takes "
              "the coefficient only for the type it names (TopKRouter.get_aux_loss_coeff), so no load-balancing loss "
              "is trained (verl#5232, verl PR#4103)"),
    "VI928": ("overrides cut off the launch command", "a launch script whose backslash-continued launch ends early "
              "(a # comment line inside it, a blank line, a missing backslash or a blank after one): the overrides "
              "below it never reach verl and bash runs them as a command of their own (verl PR#4103)"),
    "VI917": ("CPU offload policy on FSDP1", "fsdp_config.offload_policy=True with strategy=fsdp: only verl's fsdp2 "
              "engine reads it, so nothing is offloaded"),
    "VI918": ("checkpoint deletion that deletes nothing", "trainer.del_local_ckpt_after_load=True: verl's checkpoint "
              "managers delete only hdfs:// paths, and test the local copy they loaded"),
    "VI864": ("bf16 rollout on a card without bf16", "--gpu-type names an NVIDIA card below compute capability 8.0 "
              "(V100, T4, Turing, Pascal): vLLM refuses rollout.dtype=bfloat16 when its server starts "
              "(vllm/platforms/cuda.py check_if_supports_dtype)"),
    "VI865": ("flash-attn on a card below compute capability 8.0", "--gpu-type names an NVIDIA card below 8.0 and an "
              "FSDP actor or critic loads the model with flash_attention_2 (verl's default, workers/config/model.py:185): "
              "flash-attn stops the first training pass (flash_api.cpp: Ampere GPUs or newer)"),
    "VI866": ("multi-turn responses too short for the turns", "data.max_response_length holds the whole conversation: "
              "max_assistant_turns - 1 tool replies of up to max_tool_response_length characters leave under 128 "
              "tokens a turn of the model's own (verl ends the conversation when the response is full)"),
    "VI867": ("prompts longer than max_prompt_length", "counted with the model's local tokenizer on the local data: with "
              "filter_overlong_prompts off verl 0.9.1 cuts their start (data.truncation is not read; a warning); with "
              "it on, a training set left under one batch empties the train dataloader (an error)"),
    "VI868": ("PPO clip settings with one update per batch", "clip_ratio* set, but one mini-batch in one epoch updates from "
              "the weights old_log_prob was just computed with: the ratio is 1 and no clip bound binds"),
    "VI869": ("total_training_steps the epochs never reach", "trainer.total_training_steps above total_epochs × the "
              "training file's batches: training ends first, without the last step's checkpoint and validation, and "
              "the learning-rate schedule is sized for steps that never run"),
    "VI886": ("a model that needs trust_remote_code", "the local model folder's config.json maps a model_type the "
              "installed transformers does not know to its own code (auto_map), and model.trust_remote_code is false"),
    "VI828": ("critic batching keys verl does not read", "critic.ppo_micro_batch_size_per_gpu / use_dynamic_bsz / "
              "ppo_max_token_len_per_gpu set, but verl 0.9.1's trainer sizes the critic's engine from "
              "critic.ppo_infer_max_token_len_per_gpu alone (default 32768 tokens, dynamic batching on)"),
    "VI910": ("the tool-call parser does not read the model's tool calls", "multi-turn runs with the model's tokenizer "
              "on this machine and verl installed: verl's parser that rollout.multi_turn.format names (default hermes) "
              "gives back no call from the assistant turn the model's own chat template writes for one tool call, so "
              "tool_agent_loop.py:300-308 ends every episode after its first turn with no tool called; an error naming "
              "the verl parser that reads it, a warning when none does (an info when the format was chosen), an info "
              "when the template writes no tool call"),
    "VI974": ("LoRA with hf_model in the checkpoint contents", "FSDP LoRA (model.lora_rank > 0) with 'hf_model' in "
              "actor.checkpoint.save_contents: verl save_pretrained()s the PEFT-wrapped state dict unmerged "
              "(fsdp_checkpoint_manager.py:422-462), so actor/huggingface holds base_layer / lora_A / lora_B keys that "
              "from_pretrained does not load (verl#4761); export with verl.model_merger instead"),
    "VI929": ("LoRA at the full-finetune learning rate", "LoRA enabled (FSDP model.lora_rank or Megatron model.lora.rank "
              "> 0) with actor.optim.lr at or below verl's full-finetune default 1e-6 (actor.yaml:151): the "
              "zero-initialised adapter barely moves and the reward stays flat (verl#4065); verl's LoRA guide raises "
              "the lr by an order of magnitude (ppo_lora.rst:164) and its LoRA examples use 3e-6 to 1e-5"),
    "VI930": ("LoRA alpha that zeroes the adapter", "LoRA enabled (PPO actor or SFT model) with model.lora_alpha "
              "(FSDP) or model.lora.alpha (Megatron) <= 0: the scaling alpha/rank is zero, the adapter adds nothing and gets no gradient, so the "
              "run trains nothing (peft LoraLayer; verl passes alpha as given, fsdp/transformer_impl.py:362)"),
    "VI975": ("reward model served but never consulted", "reward.reward_model.enable with reward.custom_reward_function.path "
              "whose function never reads reward_router_address: verl's reward loop scores with the function alone and "
              "calls the reward model only without one (reward_loop.py:145-155, verl#2934)"),
    "VI919": ("Hydra search path that does not resolve from the launch folder", "a relative `file://` entry of the "
              "config's hydra.searchpath (verl's one-step-off YAMLs: `file://verl/trainer/config`) is read from the "
              "folder the run starts in; where that folder lacks the config the `defaults:` list needs, Hydra stops "
              "with \"Could not load 'ppo_trainer'\" before anything runs (pkg:// entries resolve anywhere)"),
    "VI617": ("distillation loss settings verl refuses", "with distillation.enabled, verl's DistillationLossConfig "
              "looks distillation_loss.loss_mode up in its registry, accepts only policy_loss_mode vanilla and refuses "
              "k1 without use_policy_gradient (workers/config/distillation.py:100-124), inside the Ray job; the table "
              "is verl's own constructor (scripts/verl_distill_losses.py)"),
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
    "VI973": ("distillation teacher pool that does not match the teachers", "with distillation.enabled, the sum over "
              "teachers of num_replicas × TP×DP×PP must equal distillation.n_gpus_per_node × nnodes (one teacher: its "
              "TP×DP×PP must divide it); verl's DistillationConfig raises it inside the Ray job, after the GPUs are "
              "booked (workers/config/distillation.py:281-286, 300-305)"),
    "VI976": ("nsys report never written", "global_profiler.tool=nsys in whole-step mode (nsys.discrete=False) with "
              "worker_nsight_options.capture-range-end null: verl waits for repeat-shutdown:6×len(steps) profiler "
              "ranges (single_controller/ray/base.py:466-467) while each worker opens one a profiled step, so no report "
              "is written after the profiled steps (verl#4920)"),
    "VI678": ("profiling asked for but the role's profiler is not enabled", "global_profiler.tool and "
              "global_profiler.steps set while no role's profiler.enable is True, or a role's ranks chosen "
              "(all_ranks/ranks) with enable False: each worker's DistProfiler is disabled (utils/profiler/"
              "profile.py:123-134, 202, 217) and the profiled steps write nothing for it (verl#6181)"),
    "VI679": ("profiler tool_config of a tool that does not run", "settings under <role>.profiler.tool_config.<X> "
              "while the role profiles with another tool: the worker reads only tool_config[<role>.profiler.tool] "
              "(workers/engine_workers.py:488-491), so they are ignored and the running tool keeps its defaults "
              "(verl#6329)"),
    "VI688": ("nsys GPU metrics in every worker", "gpu-metrics-devices (or gpu-metrics-device) in "
              "global_profiler.global_tool_config.nsys.worker_nsight_options with several GPUs a node: verl starts "
              "every worker under its own nsys with those options (single_controller/ray/base.py:658-662) and one "
              "nsys session samples a GPU's metrics at a time, so the workers fail to start (verl#2438)"),
    "VI977": ("Slurm job where Ray counts the node's cores", "a script with #SBATCH options that lets verl's ray.init "
              "start Ray with ray_kwargs.ray_init.num_cpus=null (no `ray start`, RAY_ADDRESS or job submit): Ray counts "
              "the node's cores, not the job's CPUs, and its workers fail to register or hang (verl's YAML: \"Use a "
              "fixed number instead of null when using SLURM\", ppo_trainer.yaml:514)"),
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
    "VI608": ("rollout sampling key the agent loop pins", "a RolloutConfig sampling field the agent loop writes as a "
              "constant in every request (repetition_penalty=1.0: agent_loop.py:594, v1/agent_loop_tq.py:68) set to "
              "another value: vLLM's setdefault from the config (vllm_async_server.py:623) finds the key set and SGLang "
              "never reads it, so the engine never applies it (verl#7270)"),
    "VI609": ("reproducible rollouts on an engine that reads no seed", "rollout.full_determinism=True or a rollout.seed "
              "of one's own (the actor's or the reward model's rollout) with a rollout engine whose server reads neither (SGLang, TensorRT-LLM): only verl's vLLM "
              "server applies them (vllm_async_server.py:149-156, :343, :626-627), so runs differ (verl#3126; "
              "docs/advance/determinism.md: only vLLM)"),
    "VI657": ("ray_kwargs.ray_init key ray.init does not take", "a key under ray_kwargs.ray_init that is no parameter "
              "of the installed Ray's ray.init (ray_kwargs.ray_init.timeline_json_file, a typo): verl passes every key to "
              "ray.init (main_ppo.py:72-74), which raises 'Unknown keyword argument(s)' (ray/_private/worker.py:1752; "
              "verl PR#1768 and its FAQ name the timeline key ray_init.timeline_json_file)"),
    "VI658": ("Ray env_vars value that is not a string", "a ray_kwargs.ray_init.runtime_env.env_vars value Hydra types "
              "as int, float, bool or null (`+...env_vars.TRANSFER_QUEUE_ENABLE=1`): verl merges it into ray.init's "
              "runtime_env unchanged (main_ppo.py:71-74) and Ray raises TypeError 'env_vars must be of type Dict[str, "
              "str]' (runtime_env/validation.py:446; verl's examples/remax_trainer/run_qwen2.5_math_7b_sync_fsdp.sh)"),
    "VI675": ("reward model context shorter than prompt + response", "a discriminative reward model (reward.reward_model.enable, no custom reward function) whose context (rollout.max_model_len on vLLM, else the checkpoint's max_position_embeddings) is shorter than data.max_prompt_length + data.max_response_length: verl sends it each whole prompt + response uncut, and the server's 400 is raised without retry (reward_loop.py:165-172, :197-241)"),
    "VI676": ("reward model chat template missing or refusing the data", "a discriminative reward model whose tokenizer has no chat template, or whose template raises on a training row's prompt + an assistant message, as verl's reward loop renders it (reward_loop.py:197-220): fails at the first reward, in the reward worker"),
    "VI659": ("ray.init resources on a run that joins a cluster", "ray_kwargs.ray_init.num_cpus, num_gpus, resources, "
              "labels, object_store_memory or _system_config set while ray.init joins a running cluster (`ray start` "
              "in the script, RAY_ADDRESS, ray_init.address, `ray job submit`): Ray raises ValueError 'When connecting "
              "to an existing cluster, num_cpus and num_gpus must not be provided' (ray/_private/worker.py:1936-1966)"),
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
    "VI664": ("SGLang server argument verl already sets", "a key under a rollout's engine_kwargs.sglang that verl's "
              "SGLang server builds itself (mem_fraction_static from gpu_memory_utilization, disable_cuda_graph from "
              "enforce_eager, tp_size from TP x DP, dtype, trust_remote_code, base_gpu_id, ...): **engine_kwargs is "
              "spread last (async_sglang_server.py:314-340), so it silently replaces verl's value; set verl's own key"),
    "VI665": ("media rows and a model verl builds no processor for", "a training/validation row with images, "
              "videos or audio while verl 0.9.1's hf_processor gives None for the model (a processor class its match "
              "has no case for, such as Gemma3Processor; a folder without preprocessor_config.json; a text model): "
              "RLHFDataset asserts a processor at the first batch (tokenizer.py:208-246, rl_dataset.py:323); train a "
              "model verl's hf_processor keeps, from a folder with its processor files"),
    "VI988": ("rollout engine argument verl never hands to the engine", "a key directly under a rollout's "
              "engine_kwargs (not under its engine's child: vllm, sglang, trtllm) is accepted and dropped; keys under "
              "another engine's child are not read by this run's engine (vllm_async_server.py:287, "
              "async_sglang_server.py:276)"),
    "VI989": ("do_sample=False that the agent loop ignores", "rollout.do_sample / val_kwargs.do_sample=False with a "
              "temperature > 0: verl's agent loop builds sampling parameters from temperature/top_p/top_k only "
              "(agent_loop.py:588-606), so the run samples anyway; greedy validation needs val_kwargs.temperature=0"),
    "VI990": ("FP8 rollout shards that are not whole 128-blocks", "rollout.quantization=fp8 (verl asks for 128×128 "
              "FP8 blocks): every row-parallel slice (o_proj's heads × head_dim, down_proj's intermediate size, the "
              "experts' intermediate size) over the rollout TP must be a multiple of 128, or the engine refuses the "
              "model at load (vLLM's validate_fp8_block_shape)"),
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
    "VI981": ("optimizer key Megatron never receives", "an optim key of a Megatron actor/critic that verl's "
              "init_megatron_optim_config and LR scheduler do not pass on in this configuration "
              "(utils/megatron/optimizer.py:120-268), e.g. optim.betas: Adam runs with Megatron-Core's own betas; "
              "Megatron's fields go through optim.override_optimizer_config (adam_beta1/adam_beta2, verl#2937)"),
    "VI982": ("FSDP-section key the FSDP engine never reads", "an fsdp_config key of an FSDP role that only another "
              "engine reads, e.g. fsdp_config.dtype (read only by the Megatron engine, megatron/transformer_impl.py:292): "
              "the FSDP engine computes in mixed_precision.param_dtype, bf16 when unset (fsdp/transformer_impl.py:391-403)"),
    "VI983": ("critic attention override ignored", "critic.model.override_config.attn_implementation set to a "
              "non-flash attention: verl's load_valuehead_model hard-codes flash_attention_2 (utils/model.py:649, 674), "
              "so the critic still needs flash-attn and an Ampere or newer GPU (verl#5210, PR#6495)"),
    "VI984": ("trained model kept in 16 bits", "fsdp_config.model_dtype=bf16/fp16 on a trained FSDP actor/critic: "
              "the optimizer is built on 16-bit parameters (fsdp/transformer_impl.py:258-264, 496-499), no fp32 "
              "master weights, so updates below half a unit in the last place (lr/|w| ≤ 2^-9 for bf16) round away "
              "(verl#5308)"),
    "VI978": ("adaptive KL horizon read as steps", "algorithm.use_kl_in_reward with kl_ctrl.type=adaptive: verl updates "
              "the controller with n_steps = the batch's samples (ray_trainer.py:96,112), value *= 1 + clip(kl/target-1, "
              "±0.2)·n_steps/horizon (core_algos.py:172-174): horizon ≤ 0.2×samples turns the coefficient ≤ 0 after the "
              "first step (error), a horizon below one batch swings it more than ±20% a step (warning)"),
    "VI979": ("rollout correction without rollout log-probs", "algorithm.rollout_correction.rollout_is / rollout_rs / "
              "bypass_mode with rollout.calculate_log_probs=False: the decoupled correction runs only when "
              "rollout_log_probs are in the batch and is skipped silently (trainer_base.py:1765-1771), bypass mode "
              "raises (rollout_corr_helper.py:1131-1135)"),
    "VI623": ("estimator needs inputs the V1 trainer never fetches", "optimal_token_baseline / "
              "tir_optimal_token_baseline (sum_pi_squared) and gdpo (prompts, reward components) on trainer.use_v1=true: "
              "V1's advantage step fetches a fixed field list (v1/trainer_base.py:1745) and verl's compute_advantage "
              "raises at the first step; run them with trainer.use_v1=False"),
    "VI624": ("optimal token baseline without sum_pi_squared", "optimal_token_baseline on the legacy trainer needs "
              "actor.calculate_sum_pi_squared=True (else AssertionError, ray_trainer.py:265-270) and "
              "model.use_fused_kernels=False (else NotImplementedError in the engine)"),
    "VI625": ("GDPO without its reward keys", "algorithm.adv_estimator=gdpo needs +algorithm.gdpo_reward_keys "
              "naming the reward components; verl asserts it at the first advantage computation (core_algos.py:413-417)"),
    "VI980": ("ReMax on a trainer without its greedy baseline", "algorithm.adv_estimator=remax needs reward_baselines "
              "(core_algos.py:734-741), which only the legacy trainer (main_ppo with trainer.use_v1=False, "
              "ray_trainer.py:1493-1535) generates; V1 (the default), one_step_off and fully_async raise TypeError at "
              "the first advantage computation"),
    "VI985": ("val_only that trains", "trainer.val_only=True with trainer.val_before_train=False: every PPO-family "
              "trainer reads val_only only inside its val_before_train block (trainer/ppo/v1/trainer_base.py:439-448, "
              "ray_trainer.py:1438-1446, one_step_off_policy/ray_trainer.py:290-296), so nothing is validated and a full "
              "training run starts (verl#5483); the fully async entry point never reads val_only"),
    "VI986": ("SFT loop that crashes at a step", "verl's SFT trainer computes global_step % test_freq and % save_freq "
              "before testing them for > 0 (sft_trainer.py:413-414): a 0 stops it at step 1 (ZeroDivisionError); and "
              "with data.val_files null a test_freq > 0 still enters validation (sft_trainer.py:417-420): TypeError at "
              "step test_freq, after the steps before it are paid (verl#7545)"),
    "VI936": ("val_max_samples that keeps the head of val_files", "data.val_max_samples subsamples the validation "
              "set by the training flag data.shuffle (utils/dataset/rl_dataset.py:156, 185-192; data.validation_shuffle "
              "never reaches it, verl#7824): with data.shuffle=False it keeps the first rows of the concatenated "
              "val_files, so a later file (a whole benchmark) may never be validated; with data.shuffle=True and "
              "data.seed null the subset changes at every launch"),
    "VI937": ("validation repeats at temperature 0", "rollout.val_kwargs.n > 1 with val_kwargs.temperature 0 (its "
              "default): verl samples validation from val_kwargs.temperature alone (v1/agent_loop_tq.py:73-76, "
              "agent_loop.py:604-607) and 0 is greedy, so n copies of one answer: n times the generation and "
              "mean@n = best@n = the greedy score (verl#1352)"),
    "VI785": ("SFT pad mode the engine refuses", "data.pad_mode other than no_padding in verl's SFT trainer: every "
              "engine's forward accepts only no_padding (fsdp/transformer_impl.py:1166 assert, megatron/"
              "transformer_impl.py:1329-1332 NotImplementedError) though the dataset accepts 'right': the run dies at "
              "the first micro-batch"),
    "VI786": ("SFT micro batch size ignored under dynamic batching", "data.micro_batch_size_per_gpu set while "
              "data.use_dynamic_bsz is on (the SFT default): verl packs micro-batches up to max_token_len_per_gpu × "
              "Ulysses size and reads the micro batch size only with dynamic batching off (engine/utils.py:106-128)"),
    "VI794": ("tools_kwargs not keyed by tool name", "a data row's extra_info.tools_kwargs whose keys name no tool of "
              "the tool config (e.g. {create_kwargs: ...} without the tool name above it): verl's tool agent loop "
              "looks it up by tool name (tool_agent_loop.py:485) and creates the tool without its kwargs"),
    "VI795": ("data.truncation that RL does not apply", "data.truncation=error/right/middle with "
              "filter_overlong_prompts off in an RL run: verl 0.9.1 stores it and never reads it; the agent loop "
              "keeps the last prompt_length tokens of a long prompt (agent_loop.py:437-445)"),
    "VI796": ("chat-template kwarg the template never reads", "a data.apply_chat_template_kwargs key (enable_thinking, "
              "...) that the local model's chat template never names: transformers passes it to the template, "
              "which ignores it (a silent no-op)"),
    "VI787": ("SFT left truncation that cuts the end", "data.truncation=left with data.pad_mode=no_padding: verl's "
              "MultiTurnSFTDataset keeps the first max_length tokens in its no_padding branch whatever the truncation "
              "(multiturn_sft_dataset.py:404-411), so over-length samples lose their final assistant turn(s)"),
    "VI788": ("SFT validation set that makes no batch", "verl's SFT trainers batch validation like training: "
              "data.train_batch_size // dp rows a rank with drop_last=True (sft_trainer.py:240-241, 255-267): a val "
              "set with fewer rows than that per rank yields no batch and val/loss is nan (sft_trainer.py:419-429, "
              "verl#7464)"),
    "VI789": ("SFT learning rate left at the placeholder default", "optim.lr not set for a full-parameter SFT run: "
              "verl's SFT tree takes the generic optimizer lr (optim/fsdp.yaml:12, 1e-3; 'Must be specified', "
              "workers/config/optimizer.py:38) with a constant schedule and no warmup, 100x verl's earlier SFT "
              "default 1e-5; LoRA runs are not flagged"),
    "VI618": ("fully async LR schedule built before the run's length is known", "fully_async_main with "
              "lr_scheduler_type=cosine, a Megatron lr_decay_style without lr_decay_steps, or lr_warmup_steps_ratio "
              "(no absolute lr_warmup_steps) and no optim.total_training_steps: the trainer's workers build the LR "
              "scheduler (fully_async_main.py:78, :155) before set_total_train_steps (:90-92), so it runs with "
              "total_training_steps=-1: no warmup, and a cosine LR that jumps between lr and its floor every step "
              "(verl#6684)"),
    "VI619": ("fully async rollout budget of a handful of updates", "fully_async_main with rollout.total_rollout_steps "
              "left at fully_async_ppo_trainer.yaml:64's 100 or below one weight-sync cycle (ppo_mini_batch_size × "
              "require_batches × trigger_parameter_sync_step prompts): it counts prompts, and the rollouter stops "
              "after that many (fully_async_rollouter.py:405-407, :878-884); the run ends as if complete"),
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
    "VI987": ("relaunch opens a new W&B run", "trainer.resume_mode=auto (named in the launch) or resume_path with the "
              "wandb logger and no WANDB_RUN_ID/WANDB_RESUME: verl's Tracking calls wandb.init without id= or resume= "
              "(utils/tracking.py:85), so each relaunch that resumes a checkpoint logs to a new W&B run (verl#2783)"),
    "VI991": ("rollout log-probs of another distribution than the actor's", "algorithm.rollout_correction "
              "(rollout_is / rollout_rs / bypass_mode) on vLLM with a truncating training rollout (top_p < 1, top_k > 0) "
              "and processed log-probs, or a temperature ≠ 1 and raw ones: verl's actor scores the full vocabulary with "
              "the temperature only (transformer_impl.py:98-103), so every ratio is biased (verl#6240)"),
    "VI992": ("checkpoint limit that restarts do not keep", "max_actor/critic_ckpt_to_keep (SFT: max_ckpt_to_keep) "
              "with resume_mode auto or resume_path: verl prunes only checkpoints the running process saved "
              "(checkpoint_manager.py:59, 166-194), so each restart leaves older ones on disk (verl#7395)"),
    "VI774": ("adaptive KL coefficient lost on resume", "use_kl_in_reward with kl_ctrl.type=adaptive on a run that "
              "saves and resumes: the trainers' checkpoints hold no KL controller state, so a restart begins again at "
              "kl_coef (trainer_base.py:850-1000, verl#2653)"),
    "VI775": ("policy loss summed over tokens", "actor.loss_agg_mode token-sum / seq-mean-token-sum: verl's agg_loss "
              "divides by no length (core_algos.py:1176-1193), so the loss grows with the response length; Dr.GRPO's "
              "aggregation is seq-mean-token-sum-norm (verl#957)"),
    "VI776": ("policy-loss key the loss mode never reads", "an actor key some policy_loss.loss_mode reads (clip_ratio*, "
              "clip_ratio_c, tau_pos/neg, policy_loss.*) set beside a mode whose registered function never reads it "
              "(wizard/check/data/verl_policy_loss_reads.json, from core_algos.py): kl_cov reads no clip key, so its "
              "off-policy mini-batches run without a trust region (verl#2216)"),
    "VI791": ("role-level grad_clip that verl never reads", "actor_rollout_ref.actor.grad_clip / critic.grad_clip set "
              "to a value other than the role's optim.clip_grad: the keys are dataclass fields nothing reads "
              "(workers/config/actor.py:308, critic.py:210); the engines clip with optim.clip_grad, default 1.0 "
              "(fsdp/transformer_impl.py:795-811, verl PR#7923)"),
    "VI790": ("layered_summon that fails or does nothing", "rollout.layered_summon=True: with FSDP LoRA adapters synced "
              "to the rollout (lora_rank > 0, lora.merge False, naive checkpoint engine) and a dummy load_format, the "
              "first weight sync raises ValueError (workers/engine_workers.py:673, utils/fsdp_utils.py:725-730, "
              "verl#3516); anywhere else nothing reads it (fsdp/transformer_impl.py:977, vllm_rollout.py:125-127)"),
    "VI797": ("config key no code of verl reads", "a key set to a non-default value that verl declares as a config "
              "dataclass field and never reads anywhere (the `dead` list of wizard/check/data/verl_readers.json, e.g. "
              "rollout.over_sample_rate of PR#2929, workers/config/rollout.py:179): the run behaves as with the default "
              "(info where the value is what verl does anyway: rollout.multi_stage_wake_up=True)"),
    "VI651": ("weight-sync bucket below the largest tensor", "checkpoint_engine.update_weights_bucket_megabytes below "
              "embed_tokens / lm_head as the trainer sends it (vocab × hidden, fp32 from the FSDP actor), on a sync "
              "path that asserts instead of splitting a tensor: TensorRT-LLM rollout (trtllm_rollout.py:519), the "
              "mooncake engine (mooncake_checkpoint_engine.py:205), vLLM on Ascend without IPC "
              "(bucketed_weight_transfer.py:141; verl#5952)"),
    "VI652": ("LoRA adapters never reach a disaggregated rollout", "model.lora.merge=False with fully-async, "
              "one-step-off or separate_async syncing through a non-naive checkpoint engine: engine_workers.py:764 "
              "calls get_per_tensor_param() with its defaults, so only the frozen base is sent and the rollout "
              "samples the initial policy all run (verl#7495)"),
    "VI656": ("config key only a module verl never loads reads", "a key whose every reader is a verl module that no "
              "code of verl imports or names (the `orphan_only` map of wizard/check/data/verl_readers.json): "
              "rollout.multi_turn.tokenization_sanity_check_mode / use_inference_chat_template, read only by "
              "workers/rollout/schemas.py, so the tool agent loop runs no tokenization check (verl#2165)"),
    "VI921": ("rollout without CUDA graphs", "rollout.enforce_eager=True with vLLM/SGLang turns the engine's CUDA graphs "
              "off (vllm_async_server.py:339, async_sglang_server.py:318); freeing the engine does not need it (sleep "
              "reads only free_cache_engine, vllm_async_server.py:853-861); rollout.cudagraph_capture_sizes trims the "
              "graph memory instead (verl#1414)"),
    "VI792": ("PPO epochs replay one mini-batch order", "ppo_epochs > 1 over several mini-batches with shuffle=False "
              "(verl's default; the critic's follows the actor's): make_iterator re-iterates one unshuffled "
              "DataLoader, so each epoch takes the same mini-batches in the same order (tensordict_utils.py:603-610, "
              "verl#3213)"),
    "VI793": ("KL-Cov run strictly on-policy", "policy_loss.loss_mode=kl_cov with ppo_epochs=1 and "
              "ppo_mini_batch_size = train_batch_size: one optimizer step a batch at log_prob = old_log_prob, so the "
              "|log_prob - old_log_prob| penalty is 0 with zero gradient and the update is unclipped policy gradient "
              "(core_algos.py:1887-1912, PRIME-RL/Entropy-Mechanism-of-RL#1)"),
    "VI777": ("KL loss with zero expected gradient", "use_kl_loss=True with kl_loss_type kl / k1: verl's kl_penalty "
              "gives logprob - ref_logprob (core_algos.py:2228-2229), whose gradient on sampled tokens averages to 0, "
              "so the KL loss regularises nothing (verl PR#2953; k1+, k2, low_var_kl do)"),
    "VI778": ("entropy chunking on a path that ignores it", "entropy_from_logits_with_chunking=True on the FSDP engine "
              "with model.use_remove_padding=False or use_fused_kernels=True: only the remove-padding, unfused branch "
              "calls the chunked entropy (fsdp/transformer_impl.py:1397-1405, :1489-1491), so the full-vocabulary "
              "entropy is materialised anyway (verl PR#7582)"),
    "VI770": ("checkpoints split across nodes", "trainer.default_local_dir relative on a multi-node run (or a Ray job "
              "with a working_dir): every rank writes its shard in its own node's working folder (the job's "
              "working_dir copy, or where `ray start` ran), so no folder holds a whole checkpoint (verl#625, verl#1535)"),
    "VI771": ("working_dir too large to upload", "`ray job submit` with a working_dir (--working-dir, the runtime env) "
              "holding model weights, not excluded, past Ray's package limit (GCS_STORAGE_MAX_SIZE of the installed "
              "Ray): the upload is refused and the job never starts (verl#696)"),
    "VI772": ("variables exported before joining a running cluster", "bash's run of the script: NCCL_*, GLOO_*, TP_*, "
              "VLLM_*, ... exported before a main_ppo that joins a running cluster (RAY_ADDRESS, ray_init.address, "
              "nnodes > 1): verl's workers get only the cluster's environment and verl's runtime env (verl#967)"),
    "VI773": ("Ray's socket path too long", "RAY_TMPDIR / TMPDIR (exported by the script or #SBATCH --export) so long "
              "that Ray's plasma store socket passes the 107-byte AF_UNIX limit: verl's ray.init fails (verl#1120)"),
    "VI779": ("colocated Megatron engines with different layouts", "two Megatron engines in one process (actor, "
              "reference, critic: all in the global pool, fused by create_colocated_worker_cls) whose TP/PP/VPP/CP/EP/"
              "ETP sizes or dynamic_context_parallel differ: _init_device_mesh returns early once megatron's parallel "
              "state exists (transformer_impl.py:240-256), so the later engine runs on the first one's groups (verl#653)"),
    "VI996": ("reward_kwargs the reward manager never reads", "reward.reward_kwargs keys (overlong_buffer_cfg, "
              "max_resp_len) that the configured reward manager does not read: only the dapo manager reads them "
              "(reward_manager/dapo.py:33-35), so with naive the overlong penalty is silently skipped (verl#4268)"),
    "VI997": ("data.reward_fn_key that nothing reads", "data.reward_fn_key other than data_source: every reward-loop "
              "manager passes the data_source column (reward_manager/naive.py:42); only the legacy managers main_ppo "
              "no longer builds read the key (verl PR#975)"),
    "VI998": ("DAPO gen_batch_size the V1 trainer overrides", "data.gen_batch_size with filter_groups (or an async "
              "mode): the V1 trainer sets it to 1 (trainer_base.py:727-739); generation ahead is "
              "filter_groups.max_inflight_gen_batches (verl#876)"),
    "VI999": ("DAPO metric the reward function never returns", "filter_groups.metric names a key missing from every "
              "dict the custom reward function returns (acc is added only for a number): the replay buffer stops "
              "with 'Finished groups are missing DAPO metric' (replay_buffer.py:296-307, verl#2318)"),
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
    "VI993": ("separate_async precondition verl asserts", "trainer.v1.trainer_mode=separate_async with "
              "train_batch_size ≠ parameter_sync_step × ppo_mini_batch_size, no standalone rollout pool "
              "(actor_rollout_ref.rollout.nnodes / n_gpus_per_node ≤ 0), checkpoint_engine.backend=naive, or a "
              "colocated reward model: PPOTrainerSeparateAsync.__init__ asserts each (trainer_separate_async.py:55-76)"),
    "VI994": ("checkpoint engine backend verl replaces with naive", "actor_rollout_ref.rollout.checkpoint_engine.backend "
              "≠ naive under trainer_mode sync / colocate_async: the only weight sync there is the hybrid manager, "
              "whose backend verl sets to naive (trainer_base.py:380-383)"),
    "VI995": ("one-step-off / fully async setting its entry point overrides or rejects", "the one-step-off or "
              "fully async entry point with actor_rollout_ref.hybrid_engine not False (bare asserts, "
              "one_step_off_policy/ray_trainer.py:87-88, fully_async_trainer.py:75-76; ppo_trainer.yaml's default "
              "is true), or with actor_rollout_ref.rollout.nnodes / n_gpus_per_node that its main() overwrites from "
              "the top-level rollout.* keys (main_ppo.py:121-122, fully_async_main.py:235-236)"),
    "VI780": ("generation batch not divisible by the agent-loop workers", "the legacy trainer (trainer.use_v1=False) "
              "with train_batch_size (or gen_batch_size) × rollout.n (+ the ReMax baselines) not a multiple of "
              "rollout.agent.num_workers: DataProto.chunk asserts an equal split at the first step "
              "(agent_loop.py:1247, protocol.py:870-873, verl#6801)"),
    "VI781": ("tool schema keys verl drops", "a tool_config_path tool_schema with JSON-schema keys verl's schema "
              "models do not declare (minimum, maximum, default, pattern, items, ...): pydantic drops them and the "
              "chat template gets the rest, so the model never sees the constraints (tools/schemas.py:21-55, verl#7505)"),
    "VI941": ("bypass-mode settings the V1 trainer ignores", "algorithm.rollout_correction.bypass_mode=True on the "
              "default V1 trainer with rollout_rs, loss_type=reinforce, rollout_is or rollout_is_batch_normalize: only "
              "apply_bypass_mode (legacy trainer) selects the bypass loss that reads them; V1 runs plain PPO-clip "
              "against the rollout log-probs (trainer_base.py:1640-1648, verl#4912)"),
    "VI942": ("negative KL coefficient", "actor.kl_loss_coef < 0 with use_kl_loss, or algorithm.kl_ctrl.kl_coef < 0 "
              "with use_kl_in_reward: verl applies the sign unchecked, so the policy is pushed away from the reference "
              "(workers/utils/losses.py:140, ray_trainer.py:106; rllm#111)"),
    "VI943": ("rollout-correction value verl rejects at the first step", "a rollout_rs option outside verl's list "
              "(e.g. the pre-0.9 `geometric`), rollout_rs without rollout_rs_threshold, or a threshold verl cannot "
              "parse: ValueError inside the first training step (rollout_corr_helper.py:77-89, 93-194, 250-255)"),
    "VI932": ("Slurm node list kept in one array element", "a script that reads `scontrol show hostnames` into an "
              "array with quotes (nodes_array=(\"$nodes\")): one element holds every hostname, so `srun -w` on the "
              "head fails and no Ray worker starts (verl#548; verl's examples/tutorial/slurm/ray_on_slurm.slurm:47)"),
    "VI933": ("Ray's temp dir on a shared filesystem", "`ray start --temp-dir` on a multi-node launch under $HOME or the "
              "shared folder of the run's model/data/logs: every node joins the head's session folder, their raylet "
              "sockets collide (raylet.1, ...; ray/_private/node.py:762-771, 1060-1090) and processes reach another "
              "machine's socket (verl#158)"),
    "VI934": ("CUDA_VISIBLE_DEVICES hides GPUs verl asks for", "the script exports CUDA_VISIBLE_DEVICES with fewer "
              "devices than n_gpus_per_node to a one-node launch where verl starts Ray itself: Ray sees only "
              "those, and verl stops after Ray start (single_controller/ray/base.py:226-241, verl#372)"),
    "VI935": ("Ray head started with no worker", "a script that runs `ray start --head` and no worker `ray start` but "
              "sets trainer.nnodes > 1 (or n_gpus_per_node above the head's --num-gpus): a one-node cluster, so verl "
              "stops at base.py:226-241 or Ray waits on placement groups (verl#242)"),
    "VI672": ("fused Triton kernels on Ascend NPUs", "trainer.device=npu (or an Ascend --gpu-type) with "
              "use_fused_kernels=True on impl_backend=triton or the Megatron engine: verl's linear_cross_entropy "
              "kernels carry NVIDIA-sized autotune blocks (utils/kernel/kernels.py:183-188) that overflow the NPU "
              "core's Unified Buffer when triton-ascend compiles them (verl#7950)"),
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
    "VI673": ("mbridge with virtual pipeline stages on Ascend NPUs", "trainer.device=npu with a Megatron role's "
              "virtual_pipeline_model_parallel_size > 1 and use_mbridge=True (the default, workers/config/engine.py:208): "
              "not supported together on MindSpeed, IndexError at model build (verl#4815)"),
    "VI674": ("LoRA rank wider than a packed slice on vLLM-Ascend", "trainer.device=npu with rollout.name=vllm and a "
              "LoRA rank (as vLLM's max_lora_rank) above the narrowest packed-layer slice per rollout TP rank "
              "(qkv_proj, gate_up_proj, a Gated DeltaNet's in_proj_qkvz / in_proj_ba) from config.json: vllm-ascend's "
              "sgmv_expand refuses it at engine start (verl PR#7921)"),
    "VI944": ("ROCm visible-device variables verl's workers reject", "a ROCm launch that exports ROCR_VISIBLE_DEVICES "
              "beside HIP/CUDA_VISIBLE_DEVICES, or CUDA_VISIBLE_DEVICES beside HIP_VISIBLE_DEVICES: each worker stops "
              "while it sets up its device, after Ray placed it (single_controller/base/worker.py:240-267; Ray sets "
              "each actor's own HIP_VISIBLE_DEVICES, amd_gpu.py:115-124; verl#1471)"),
    "VI945": ("GeForce GPUs without NCCL's peer-to-peer switch", "--gpu-type names a GeForce card (RTX 20-50, GTX 10), "
              "the run spans several GPUs and the launch exports neither NCCL_P2P_DISABLE=1 nor "
              "NCCL_CUMEM_HOST_ENABLE=0: NCCL can stop with 'peer access is not supported' when verl's FSDP engine "
              "broadcasts the weights (fsdp/transformer_impl.py:444, fsdp_utils.py:513; verl#2803, verl#1874)"),
    "VI949": ("custom dataset class from a file path loses the overlong filter's methods", "data.custom_cls.path "
              "a file (not pkg://) to an RLHFDataset subclass, a vision-language model and "
              "data.filter_overlong_prompts=True: the pickled class loses RLHFDataset, every row raises inside "
              "doc2len and is dropped (rl_dataset.py:208-244), the dataset ends empty"),
    "VI956": ("deferred gradient sync keeps unsharded gradients", "fsdp_config.use_no_sync_for_gradient_accumulation=True (actor or critic.fsdp) with several micro-batches per mini-batch: the FSDP engine skips the reduce-scatter on all but the last (transformer_impl.py:692-721), so every GPU keeps the model's gradients unsharded in fp32 (4 B x parameters, not divided by the GPUs) through the update; error when that alone takes the update over the card (verl PR#7458)"),
    "VI947": ("colocated rollout engine never sleeps", "rollout.free_cache_engine=False (or the served reward "
              "model's) on GPUs shared with the trainer: verl skips the engine's sleep (vllm_async_server.py:854, "
              "async_sglang_server.py:505, trtllm_async_server.py:445), so its weights and gpu_memory_utilization × "
              "the card stay resident through log-prob and the actor update (verl PR#2459)"),
    "VI946": ("DeepEP dispatch on a card below Hopper", "moe_enable_deepep=True / moe_token_dispatcher_type=flex (or "
              "automodel backend_config.dispatcher=deepep) with --gpu-type below compute capability 9.0: verl's images "
              "build DeepEP for Hopper only (docs/perf/dpsk.md:29) and the first MoE dispatch fails (verl#4479)"),
    "VI938": ("launch script stops on an unset variable", "bash's run of the script: it reads a variable under "
              "`set -u` that it never sets and the caller did not give (--env), so bash stops with 'unbound variable' "
              "before the launch (verl PR#6430: ${DEVICE} in verl's own GRPO scripts)"),
    "VI939": ("override the shell rewrites before Hydra reads it", "an unquoted override word with {a,b} braces "
              "(brace expansion: one override per part, Hydra keeps the last) or, under zsh / bash failglob / "
              "nullglob, [..] * ? glob characters (the script stops with 'no matches found', or the override "
              "vanishes; verl PR#2509)"),
    "VI640": ("media column that is not a list", "a data row whose data.image_key/video_key/audio_key cell holds one "
              "item (an {bytes, path} image dict, a path string) instead of a list: verl indexes it as a list "
              "(rl_dataset.py:315-335), and with data.filter_overlong_prompts on the length filter swallows the "
              "error and drops every such row (rl_dataset.py:206-244; verl#837); verl's SFT dataset stops at the first batch "
              "(multiturn_sft_dataset.py:255-288)"),
    "VI641": ("parquet metadata the installed datasets cannot decode", "a data.train_files/val_files parquet whose "
              "Hugging Face feature metadata names a type the installed `datasets` lacks (datasets>=4's List read "
              "by datasets<4): verl's load_dataset('parquet') (rl_dataset.py:171-172) raises 'Feature type ... not "
              "found' in the TaskRunner (verl#2723); the oracle is the installed datasets' Features.from_dict"),
    "VI637": ("code test cases verl's code scorer cannot use", "a codecontests/apps/codeforces/taco row whose "
              "reward_model.ground_truth is not test cases verl's sandbox client or prime_code can run: not JSON, no "
              "inputs/outputs, unequal counts, or call-based (fn_name) arguments stored as lists instead of one JSON "
              "value per line of text (stdin=str(input), fn(*[json.loads(line)]): sandbox_fusion/utils.py:244,269,293; "
              "prime_code/testing_util.py:235): a correct solution scores 0, no error (verl PR#2199, Eurus-2-RL-Data)"),
    "VI638": ("code test case any answer passes", "with reward.sandbox_fusion.url, a code row's expected output is "
              "null (sandbox_fusion/utils.py:427 passes any program that runs) or, call-based, empty (the wrapper "
              "catches the exception and exits 0: :270-288): a solution that raises earns the reward (verl PR#7853)"),
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
    "VI877": ("--deep could not run", "no bubblewrap sandbox here (--deep and --verl refuse), or verl's code on the config stopped at a sandbox bound (time, memory, processes, output)"),
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
}
