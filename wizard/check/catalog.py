"""The `verl-init check` rules: ID -> (title, what it checks / where verl checks it).

One home for the table (with wizard/check/catalog_6xx.py and catalog_4xx.py, which it merges): the README, wizard.check.rule_index
and the tests read it, and `Ctx.add` (wizard.check.rules.context) refuses an ID that is not here.
"""

from __future__ import annotations

from wizard.check.catalog_4xx import RULES_4XX
from wizard.check.catalog_6xx import RULES_6XX

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
    "VI888": ("judge function without a reward model", "the custom reward function requires reward_router_address (a generative judge's) but reward.reward_model.enable is false"),
    "VI708": ("main_eval without a reward function it can read", "verl.trainer.main_eval with no +reward.custom_reward_function.path: get_custom_reward_fn reads config.reward.custom_reward_function (trainer/ppo/reward.py:70), but evaluation.yaml keeps custom_reward_function at the top level and has no reward node: every scoring task raises ConfigAttributeError (or TypeError on a None reward_fn), main_eval.py:35-37"),
    "VI737": ("model path that is a verl training checkpoint", "actor_rollout_ref.model.path / critic.model.path names a local folder verl's checkpoint manager wrote (model_world_size_*_rank_*.pt, fsdp_config.json, model/dist_ckpt; no config.json): HFModelConfig's AutoConfig.from_pretrained fails in the workers (workers/config/model.py:187) after the GPUs are placed; merge with verl.model_merger first (verl#298)"),
    "VI738": ("images or videos a generation-only run never sends", "verl.trainer.main_generation_server posts only the data.prompt_key messages to the chat server (main_generation_server.py:157-159, :91-97): data.image_key / video_key are never read, so a vision-language model answers without its images (verl#2573)"),
    "VI739": ("SFT messages with a per-message loss-mask field verl ignores", "a local train/val parquet whose data.messages_key messages carry loss_mask / trainable / weight: MultiTurnSFTDataset sets the loss mask from the role only (multiturn_sft_dataset.py:234-240), so masked assistant turns are trained anyway (verl#5316, PR#5472 unmerged)"),
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
    "VI900": ("SGLang LoRA with a regex target_modules", "rollout.name=sglang serving LoRA as an adapter (model.lora_rank "
              "or model.lora.rank > 0, model.lora.merge False) with model.target_modules a string other than "
              "all-linear: the config and PEFT accept it, but the SGLang server's sglang_lora_target_modules raises "
              "ValueError at launch (sglang_rollout/utils.py:93-102, async_sglang_server.py:349; verl PR#7413)"),
    "VI931": ("LoRA adapter sync from an FSDP2 actor under offload_policy", "actor.strategy=fsdp2 with "
              "actor.fsdp_config.offload_policy=True and non-merged LoRA (model.lora_rank > 0): the shards stay on "
              "the CPU and verl's LoRA collector all-gathers them with full_tensor() unstaged (fsdp_utils.py:703, "
              "745, 756; transformer_impl.py:979-999), unlike its non-LoRA path (:1028-1033); reported to crash the "
              "first weight sync with a CPU-vs-CUDA device mismatch (verl#5390)"),
    "VI975": ("reward model served but never consulted", "reward.reward_model.enable with reward.custom_reward_function.path "
              "whose function never reads reward_router_address: verl's reward loop scores with the function alone and "
              "calls the reward model only without one (reward_loop.py:145-155, verl#2934)"),
    "VI919": ("Hydra search path that does not resolve from the launch folder", "a relative `file://` entry of the "
              "config's hydra.searchpath (verl's one-step-off YAMLs: `file://verl/trainer/config`) is read from the "
              "folder the run starts in; where that folder lacks the config the `defaults:` list needs, Hydra stops "
              "with \"Could not load 'ppo_trainer'\" before anything runs (pkg:// entries resolve anywhere)"),
    "VI973": ("distillation teacher pool that does not match the teachers", "with distillation.enabled, the sum over "
              "teachers of num_replicas × TP×DP×PP must equal distillation.n_gpus_per_node × nnodes (one teacher: its "
              "TP×DP×PP must divide it); verl's DistillationConfig raises it inside the Ray job, after the GPUs are "
              "booked (workers/config/distillation.py:281-286, 300-305)"),
    "VI976": ("nsys report never written", "global_profiler.tool=nsys in whole-step mode (nsys.discrete=False) with "
              "worker_nsight_options.capture-range-end null: verl waits for repeat-shutdown:6×len(steps) profiler "
              "ranges (single_controller/ray/base.py:466-467) while each worker opens one a profiled step, so no report "
              "is written after the profiled steps (verl#4920)"),
    "VI977": ("Slurm job where Ray counts the node's cores", "a script with #SBATCH options that lets verl's ray.init "
              "start Ray with ray_kwargs.ray_init.num_cpus=null (no `ray start`, RAY_ADDRESS or job submit): Ray counts "
              "the node's cores, not the job's CPUs, and its workers fail to register or hang (verl's YAML: \"Use a "
              "fixed number instead of null when using SLURM\", ppo_trainer.yaml:514)"),
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
    "VI944": ("ROCm visible-device variables verl's workers reject", "a ROCm launch that exports ROCR_VISIBLE_DEVICES "
              "beside HIP/CUDA_VISIBLE_DEVICES, or CUDA_VISIBLE_DEVICES beside HIP_VISIBLE_DEVICES: each worker stops "
              "while it sets up its device, after Ray placed it (single_controller/base/worker.py:240-267; Ray sets "
              "each actor's own HIP_VISIBLE_DEVICES, amd_gpu.py:115-124; verl#1471)"),
    "VI945": ("GeForce GPUs without NCCL's peer-to-peer switch", "--gpu-type names a GeForce card (RTX 20-50, GTX 10), "
              "the run spans several GPUs and the launch exports neither NCCL_P2P_DISABLE=1 nor "
              "NCCL_CUMEM_HOST_ENABLE=0: NCCL can stop with 'peer access is not supported' when verl's FSDP engine "
              "broadcasts the weights (fsdp/transformer_impl.py:444, fsdp_utils.py:513; verl#2803, verl#1874)"),
    "VI948": ("multi-node launch that pins NCCL's interface but not Gloo's", "the workers of a run on several nodes "
              "get NCCL_SOCKET_IFNAME (or HCCL_SOCKET_IFNAME) and no GLOO_SOCKET_IFNAME: every verl worker also opens "
              "a Gloo group (utils/distributed.py:63, :89 \"cpu:gloo,...\"), which binds the address the hostname "
              "resolves to, often the management NIC (verl#967, verl PR#7386)"),
    "VI953": ("agent-loop config file by a relative path on several nodes", "rollout.agent.agent_loop_config_path / "
              "multi_turn.tool_config_path / function_tool_path relative on a multi-node launch with no Ray job "
              "working_dir: AgentLoopWorkers resolve it on their own node, against the folder `ray start` ran in "
              "there, then verl's root only (agent_loop.py:529-536, import_utils.py:91-144; verl PR#4029)"),
    "VI954": ("Megatron checkpoint retention on every rank", "trainer.max_actor/critic_ckpt_to_keep (or "
              "remove_previous_ckpt_in_save) on a multi-node run whose role saves through the Megatron manager: every "
              "rank rmtree()s the same old checkpoint (megatron_checkpoint_manager.py:1148, :1199-1200; FSDP only on "
              "rank 0), and on HDFS FUSE / NFS the concurrent deletes can abort the save (verl PR#7989)"),
    "VI955": ("GDPO weights not one per reward key", "algorithm.gdpo_reward_weights of another length than "
              "algorithm.gdpo_reward_keys: verl pairs them by position unchecked (core_algos.py:435-462): fewer "
              "weights -> IndexError at the first advantage step (error), more -> the extras silently ignored "
              "(warning) (verl PR#7965). Fix: one weight per key, in order, or no weights"),
    "VI957": ("standalone classifier reward model without extra info", "reward.reward_model.enable_resource_pool"
              "=True, no reward.custom_reward_function: the agent loop reads result['reward_extra_info'] "
              "(agent_loop.py:1026-1028) and verl's classifier path returns only reward_score (reward_loop.py:270): "
              "KeyError at the first rollout (verl#7368). Fix: colocate the reward model, or score through a custom "
              "function"),
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
    "VI958": ("SGLang attention backend the card refuses", "rollout.name=sglang with engine_kwargs.sglang."
              "attention_backend unset (verl then picks flashinfer for sglang >= 0.5.12, else fa3, with no look at "
              "the card or the model: async_sglang_server.py:289-297) or set to a backend SGLang asserts against on "
              "the --gpu-type card: fa3 outside compute capability 8.x/9.x, flashinfer for a hybrid GDN model "
              "(Qwen3.5 / Qwen3-Next) on Blackwell; the rollout server dies at start-up (sglang#35080, verl's "
              "one-step-off example on B300)"),
    "VI959": ("SGLang attention backend depends on the sglang version", "engine_kwargs.sglang.attention_backend unset "
              "on a Blackwell card with no sglang installed here to read: verl gives fa3 (refused on Blackwell) to an "
              "sglang older than 0.5.12 and flashinfer to a newer one (async_sglang_server.py:289-297)"),
    "VI877": ("--deep could not run", "no bubblewrap sandbox here (--deep and --verl refuse), or verl's code on the config stopped at a sandbox bound (time, memory, processes, output)"),
}

# the VI6xx rules (the held-out rounds from round 41 on) live in their own table, to keep each module short
RULES.update(RULES_6XX)
# the VI410-VI499 rules (the held-out rounds from round 91 on): the VI6xx and VI9xx ranges are full
RULES.update(RULES_4XX)
