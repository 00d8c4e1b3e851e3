"""The `verl-init check` rules VI410-VI499: ID -> (title, what it checks / where verl checks it).

Part of wizard.check.catalog.RULES (which merges this table), kept apart only to keep each module short. The
VI6xx and VI9xx ranges of the check's rules are full; VI401-VI409 are the planner's role rules
(wizard/check/rule_index.py), so the check's rules continue at VI410.
"""

from __future__ import annotations

RULES_4XX: dict[str, tuple[str, str]] = {
    "VI454": ("delta_sharded weight sync with a rollout its consumer refuses", "checkpoint_engine.backend="
              "delta_sharded with a rollout engine that has no delta consumer (not sglang/vllm: CheckpointEngineWorker "
              "raises at init, checkpoint_engine/base.py:327-331), a vLLM rollout the server's delta block refuses at "
              "launch (engine_kwargs.delta_sharded.verify_every>0, rollout DP>1, PD disaggregation, engine_kwargs.vllm "
              "DP/PP>1 or another TP, a non-triton MoE backend or EPLB, another weight_transfer backend: "
              "vllm_async_server.py:1142-1195), or SGLang PD (sglang_rollout.py:403); real cases: verl PRs #7181, "
              "#7227, #6243, verl-omni PR #613; table scripts/verl_sync_delta.py"),
    "VI455": ("checkpoint engine argument the engine refuses", "checkpoint_engine.engine_kwargs.<backend> holding a "
              "key the engine's __init__ does not take (TypeError), bucket_size / is_master that verl passes itself "
              "(TypeError 'multiple values'), or delta_sharded encoding other than 'indices' (assert, "
              "delta_checkpoint_engine.py:402): raised when each actor worker builds the engine "
              "(engine_workers.py:686, base.py:337); table scripts/verl_sync_delta.py"),
    "VI450": ("agent-loop token builder that cannot be built with the tokenizer", "config.json model_type picks "
              "verl's Continuous Token builder for every agent loop (continuous_token_wiring.py:112-138, "
              "agent_loop.py:242-254) and the run's tokenizer lacks a boundary token that builder requires "
              "(require_token_id, continuous_token.py:846-856: Qwen <|im_end|>, GLM <|observation|>/<|user|>, "
              "Gemma 4 <|tool_response>, ...): the rollout workers raise after the GPUs are booked, or, with an unk "
              "token, split turns at the unk id (verl PR #7640); checked by calling verl's own builder on CPU"),
    "VI414": ("rollout load_format the engine does not know", "a dummy* rollout.load_format other than `dummy` "
              "(dummy_dtensor / dummy_hf / dummy_megatron, retired names still in verl's docs) is passed verbatim to "
              "vLLM / SGLang / TensorRT-LLM (vllm_async_server.py:327, async_sglang_server.py:326, "
              "trtllm_async_server.py:239), which know only `dummy`: the server fails after the GPUs are booked "
              "(verl PR #7644); table scripts/verl_vllm_rollout_loading.py"),
    "VI415": ("vLLM parallel size set around verl's replica layout", "engine_kwargs.vllm.pipeline_parallel_size (or "
              "data_parallel_size while rollout.data_parallel_size=1) is spread into vLLM's args "
              "(vllm_async_server.py:349) while verl sizes the replica from rollout tp*dp*pp (replica.py:107-111) "
              "and gives the server only those GPUs (:1342-1360): vLLM asks for more ranks and fails at launch "
              "(verl PR #6732; verl refuses rollout.pipeline_model_parallel_size>1, rollout.py:319); table "
              "scripts/verl_vllm_rollout_loading.py"),
    "VI430": ("bf16 MoE vLLM rollout on an SM100 card with vLLM's MoE backend on auto", "a bf16 MoE model served by "
              "vLLM on B200/GB200/B300 (--gpu-type, compute capability 10.x) without engine_kwargs.vllm.moe_backend="
              "triton: verl 0.9.1 pins vllm==0.24.0, whose FlashInfer TRT-LLM MoE backend re-lays the experts out in "
              "4-D, and verl's checkpoint-format weight sync (vllm_rollout/utils.py:405) raises 'shard_dim=0 is not a "
              "valid data dimension' at the first sync (verl#7978); table scripts/verl_moe_rollout.py"),
    "VI431": ("rollout MoE load-balance metrics with no routes to count", "rollout.moe_load_balance_metrics_interval > 0 "
              "while rollout.enable_rollout_routing_replay=False (the servers return routed_experts only then: "
              "vllm_async_server.py:451, async_sglang_server.py:404) or trainer.use_v1=False (only the V1 trainer "
              "reads it, trainer_base.py:1882): verl logs one skip line (metric_utils.py:308) and no rollout/moe/* "
              "metric appears (verl PR#6853); table scripts/verl_moe_rollout.py"),
    "VI426": ("norm_adv_by_std_in_grpo=False that the estimator never reads",
              "algorithm.norm_adv_by_std_in_grpo=False (Dr.GRPO) with an estimator verl 0.9.1 never passes it to and "
              "that still divides by a standard deviation (grpo_vectorized, gdpo, reinforce_plus_plus, "
              "reinforce_plus_plus_baseline: ray_trainer.py:235-279, core_algos.py:334-357); verl's own "
              "compute_advantage gives the same advantages for True and False (warning; fix: adv_estimator=grpo)"),
    "VI427": ("rejection sampling whose rejected responses still set the group baseline",
              "algorithm.rollout_correction.rollout_rs outside bypass mode with an estimator whose group baseline "
              "counts every row: rejection only zeroes response_mask (rollout_corr_helper.py:412) before "
              "compute_advantage (v1/trainer_base.py:1764-1775), so a rejected response still shifts its siblings' "
              "advantages (warning; fix: bypass_mode=True or an estimator that excludes masked rows)"),
    "VI418": ("training subset drawn without a seed", "data.train_max_samples with data.shuffle=True and data.seed "
              "null: verl 0.9.1 draws the training subset with an unseeded np.random.default_rng() "
              "(utils/dataset/rl_dataset.py:156-157, 185-192) at every launch and rebuilds it before loading a "
              "checkpoint (trainer/ppo/v1/trainer_base.py:228, :392, :893-896), so a resumed run continues the saved "
              "dataloader position over other rows, silently (verl#7816)"),
    "VI410": ("fully async optimizer built before the run's length, on Megatron or VeOmni", "fully_async_main with "
              "a Megatron (or MindSpeed) or VeOmni actor/critic and no optim.total_training_steps (Megatron: nor "
              "optim.lr_decay_steps): the trainer's workers build the optimizer in init_workers "
              "(fully_async_main.py:78, :155) before set_total_train_steps (:90-92), so Megatron-core's "
              "OptimizerParamScheduler gets lr_decay_steps=-1 and asserts lr_decay_steps > 0 "
              "(utils/megatron/optimizer.py:239-257; verl#6987), and VeOmni lays its schedule over -1 steps "
              "(workers/engine/veomni/transformer_impl.py:286-297; verl#6683)"),
    "VI438": ("update epochs below 1: the role never trains", "actor_rollout_ref.actor.ppo_epochs (or critic.ppo_epochs "
              "when a critic trains) < 1: verl passes it as the update's epochs (ray_trainer.py:1364/1391, "
              "v1/trainer_base.py:1811/1853) and make_iterator loops range(epochs) (utils/tensordict_utils.py:608), "
              "so no mini-batch trains, silently; set it ≥ 1"),
    "VI439": ("run budget below 1: the trainer never enters its loop", "trainer.total_epochs < 1 (PPO V1 and legacy, "
              "SFT) or trainer.total_training_steps < 1 (PPO V1): fit's loop (v1/trainer_base.py:467, "
              "ray_trainer.py:1465, sft_trainer.py:356) is never entered, so the job exits 0 with no training step"),
    "VI434": ("Ray CPUs below verl's placement-group reservation", "the launch gives Ray N CPUs (`ray start "
              "--num-cpus N`, or ray_kwargs.ray_init.num_cpus=N when verl starts Ray) but verl holds more in "
              "placement groups before training: 3 CPUs per GPU bundle (single_controller/ray/base.py:146, "
              "max_colocate_count :192) plus, with the V1 trainer, TransferQueue's num_data_storage_units + 1 "
              "controller (main_ppo.py:143); the unplaceable bundle waits forever in ray.get(pg.ready()) "
              "(base.py:160): a silent hang (verl#7656)"),
    "VI422": ("LoRA on the critic under the FSDP engine", "critic.model.lora_rank > 0 with critic.strategy "
              "fsdp/fsdp2: verl 0.9.1 wraps the critic's token-classification value model with peft "
              "TaskType.CAUSAL_LM (workers/engine/fsdp/transformer_impl.py:359-368), which needs "
              "prepare_inputs_for_generation: AttributeError when the critic worker builds its model (verl#4620)"),
    "VI442": ("custom reward manager that reads meta_info['validate'] on the agent-loop reward path", "an importlib "
              "reward manager (reward.reward_manager.source=importlib) that branches on meta_info['validate'] while "
              "the reward runs in the agent loop (no reward model, or one on its own pool: reward_loop.py:313-321): "
              "the agent loop builds the reward DataProto without meta_info (agent_loop.py:1021-1026), so validation "
              "is scored like training, silently (verl#7121)"),
    "VI443": ("reward function answer with a key validation fills itself", "a custom reward function's returned "
              "dict holds 'reward' (the keys verl's _validate fills from the scores, read from its source): every "
              "key becomes a reward_extra_info column (naive.py:86-92) appended to the same list "
              "(trainer_base.py:1124, 1136-1139), so val-core's reward is read from a misaligned list (the legacy "
              "trainer asserts, ray_trainer.py:707-708; agentcore-rl-toolkit PR#136)"),
}
