"""One test per `verl-init check` rule: a minimal valid config, one change, the rule's ID on the right key.

The base config is GRPO on one node of 8 × 80 GB GPUs with fixed micro-batches, so that every
batch rule applies; it raises no error and no warning (test_base_config_is_clean).
Runs with verl-init's snapshot of verl's defaults (no verl needed); test_check_examples.py and
test_check_defaults.py show the snapshot resolves exactly like verl's own Hydra tree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wizard.check.catalog import RULES
from wizard.check.lint import check

HW = {"nnodes": 1, "gpus_per_node": 8, "gpu_memory_gb": 80}


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    for name in ("train.parquet", "val.parquet"):
        (tmp_path / name).write_bytes(b"PAR1")
    return tmp_path


def base(data: Path) -> list[str]:
    return [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=False",
        f"data.train_files={data / 'train.parquet'}",
        f"data.val_files={data / 'val.parquet'}",
        "data.train_batch_size=64",
        "data.max_prompt_length=512",
        "data.max_response_length=1024",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct",
        "actor_rollout_ref.actor.ppo_mini_batch_size=32",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.5",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
        "trainer.logger=[console]",
        "trainer.nnodes=1",
        "trainer.n_gpus_per_node=8",
    ]


def _key(text: str) -> str:
    return text.split("=", 1)[0].lstrip("+~")


def edited(data: Path, changes: list[str], remove: tuple[str, ...] = ()) -> list[str]:
    """The base with `changes` replacing the same keys (or appended) and `remove` keys dropped."""
    out = [o for o in base(data) if _key(o) not in remove]
    for ch in changes:
        keys = [_key(o) for o in out]
        if _key(ch) in keys and not ch.startswith(("+", "~")):
            out[keys.index(_key(ch))] = ch
        else:
            out.append(ch)
    return out


def run(data: Path, changes: list[str], remove: tuple[str, ...] = (), **kw: Any):
    hw = dict(HW)
    hw.update(kw.pop("hw", {}))
    return check(None, edited(data, changes, remove), defaults="snapshot", env={"HOME": "/nonexistent-home"}, **hw, **kw)


def test_base_config_is_clean(data):
    report = run(data, [])
    assert not report.errors and not report.warnings, [f.problem.line() for f in report.findings]
    assert report.memory is not None and report.memory.peak_gb < 80


RM_ON = ["reward.reward_model.enable=True", "reward.reward_model.model_path=Qwen/Qwen2.5-7B-Instruct",
         "reward.reward_model.rollout.name=vllm", "reward.reward_model.rollout.tensor_model_parallel_size=1",
         "reward.reward_model.rollout.gpu_memory_utilization=0.2"]

# (rule, severity, changes, removed keys, a key the finding must name, extra check() arguments)
CASES: list[tuple[str, str, list[str], tuple[str, ...], str, dict[str, Any]]] = [
    ("VI800", "info", ["data.train_files=UNSET_DATA_HOME/train.parquet"], (), "data.train_files", {}),
    ("VI801", "error", ["actor_rollout_ref.actor.ppo_mini_batchsize=16"], (), "actor_rollout_ref.actor.ppo_mini_batchsize", {}),
    ("VI801", "error", ["critic.model.fsdp_config.param_offload=False"], (), "critic.model.fsdp_config.param_offload", {}),
    ("VI801", "error", ["trainer.use_legacy_worker_impl=auto"], (), "trainer.use_legacy_worker_impl", {}),
    ("VI802", "warning", ["+data.max_prompt_len=100"], (), "data.max_prompt_len", {}),
    ("VI803", "error", ["+actor_rollout_ref.rollout.gpu_memory_utilization=0.4"], (), "actor_rollout_ref.rollout.gpu_memory_utilization", {}),
    ("VI804", "error", ["+actor_rollout_ref.rollout.gpu_mem_util=0.9"], (), "actor_rollout_ref.rollout.gpu_mem_util", {}),
    # a key an older verl had, re-added with + inside RolloutConfig: verl 0.9.1 refuses it, not ignores it
    ("VI804", "error", ["+actor_rollout_ref.rollout.skip_rollout=True"], (), "actor_rollout_ref.rollout.skip_rollout", {}),
    # the key verl's own bucket assertion names (bucketed_weight_transfer.py:141-143) moved under checkpoint_engine
    ("VI801", "error", ["+actor_rollout_ref.rollout.update_weights_bucket_megabytes=4096"], (),
     "actor_rollout_ref.rollout.update_weights_bucket_megabytes", {}),
    ("VI805", "error", ["custom_reward_function.path=/r/reward.py"], (), "custom_reward_function.path", {}),
    ("VI805", "error", ["reward_model.reward_manager=dapo"], (), "reward_model.reward_manager", {}),
    ("VI805", "error", ["+reward_manager.name=dapo"], (), "reward_manager.name", {}),
    ("VI805", "error", ["sandbox_fusion.url=http://sandbox:8080"], (), "sandbox_fusion.url", {}),
    ("VI806", "error", ["actor_rollout_ref.rollout.log_prob_micro_batch_size=64"],
     ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",), "actor_rollout_ref.rollout.log_prob_micro_batch_size", {}),
    ("VI807", "error", [], ("actor_rollout_ref.rollout.name",), "actor_rollout_ref.rollout.name", {}),
    ("VI807", "error", [], ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",),
     "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", {}),
    ("VI808", "error", ["data.train_batch_size=abc"], (), "data.train_batch_size", {}),
    ("VI809", "error", ["algorithm.adv_estimator=grpoo"], (), "algorithm.adv_estimator", {}),
    ("VI809", "error", ["trainer.logger=[console,wandbb]"], (), "trainer.logger", {}),
    ("VI810", "error", ["actor_rollout_ref.rollout.tensor_model_parallel_size=3"], (), "actor_rollout_ref.rollout.tensor_model_parallel_size", {}),
    ("VI811", "warning", ["actor_rollout_ref.rollout.tensor_model_parallel_size=16", "trainer.nnodes=2"], (),
     "actor_rollout_ref.rollout.tensor_model_parallel_size", {"hw": {"nnodes": 2}}),
    ("VI816", "warning", ["algorithm.adv_estimator=gae", "critic.enable=True", "critic.model.path=Qwen/Qwen2.5-1.5B-Instruct",
                          "critic.ppo_micro_batch_size_per_gpu=4", "critic.ulysses_sequence_parallel_size=2",
                          "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"], (),
     "critic.fsdp.ulysses_sequence_parallel_size", {}),
    ("VI812", "error", ["actor_rollout_ref.actor.ulysses_sequence_parallel_size=3"], (), "actor_rollout_ref.actor.ulysses_sequence_parallel_size", {}),
    ("VI812", "error", ["actor_rollout_ref.actor.ulysses_sequence_parallel_size=8"], (), "actor_rollout_ref.actor.ulysses_sequence_parallel_size", {}),
    ("VI812", "error", ["actor_rollout_ref.actor.ulysses_sequence_parallel_size=2", "actor_rollout_ref.model.use_remove_padding=False"],
     (), "actor_rollout_ref.model.use_remove_padding", {}),
    ("VI813", "error", ["model_engine=megatron", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3"], (),
     "actor_rollout_ref.actor.megatron.tensor_model_parallel_size", {}),
    ("VI814", "error", [], (), "trainer.n_gpus_per_node", {"hw": {"gpus_per_node": 4}}),
    ("VI814", "warning", [], (), "trainer.nnodes", {"hw": {"nnodes": 2}}),
    ("VI815", "error", ["actor_rollout_ref.rollout.pipeline_model_parallel_size=2"], (), "actor_rollout_ref.rollout.pipeline_model_parallel_size", {}),
    ("VI820", "error", ["actor_rollout_ref.actor.ppo_mini_batch_size=128"], (), "actor_rollout_ref.actor.ppo_mini_batch_size", {}),
    ("VI821", "error", ["data.train_batch_size=65"], (), "data.train_batch_size", {}),
    ("VI822", "error", ["actor_rollout_ref.actor.ppo_mini_batch_size=3"], (), "actor_rollout_ref.actor.ppo_mini_batch_size", {}),
    ("VI823", "error", ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"], (), "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", {}),
    ("VI824", "error", ["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=5"], (), "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", {}),
    ("VI825", "warning", ["data.train_batch_size=48"], (), "data.train_batch_size", {}),
    ("VI826", "error", ["actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True"], (), "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz", {}),
    ("VI827", "info", ["actor_rollout_ref.actor.use_dynamic_bsz=True"], (), "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", {}),
    ("VI830", "error", ["actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=1000"], (),
     "actor_rollout_ref.actor.ppo_max_token_len_per_gpu", {}),
    ("VI831", "warning", ["actor_rollout_ref.rollout.enable_chunked_prefill=False", "actor_rollout_ref.rollout.max_num_batched_tokens=1024"],
     (), "actor_rollout_ref.rollout.max_num_batched_tokens", {}),
    ("VI833", "error", ["data.max_prompt_length=30000", "data.max_response_length=4096"], (), "data.max_prompt_length", {}),
    ("VI833", "warning", ["actor_rollout_ref.rollout.max_model_len=1024"], (), "actor_rollout_ref.rollout.max_model_len", {}),
    ("VI834", "info", ["actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=2048"], (),
     "actor_rollout_ref.actor.ppo_max_token_len_per_gpu", {}),
    ("VI840", "error", ["algorithm.adv_estimator=gae", "critic.enable=False"], (), "critic.enable", {}),
    ("VI841", "warning", ["critic.enable=True", "critic.model.path=Qwen/Qwen2.5-1.5B-Instruct", "critic.ppo_micro_batch_size_per_gpu=4"],
     (), "critic.enable", {}),
    ("VI841", "warning", ["critic.optim.lr=1e-5"], (), "critic.optim.lr", {}),
    ("VI842", "warning", ["algorithm.use_kl_in_reward=True"], (), "algorithm.use_kl_in_reward", {}),
    ("VI843", "warning", ["actor_rollout_ref.actor.use_kl_loss=False"], (), "actor_rollout_ref.actor.kl_loss_coef", {}),
    ("VI843", "info", ["actor_rollout_ref.actor.kl_loss_coef=0"], (), "actor_rollout_ref.actor.kl_loss_coef", {}),
    ("VI844", "info", ["actor_rollout_ref.actor.use_kl_loss=False"], ("actor_rollout_ref.actor.kl_loss_coef",),
     "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", {}),
    ("VI845", "warning", ["algorithm.adv_estimator=gae", "critic.model.path=org/rm-7b", "critic.ppo_micro_batch_size_per_gpu=4",
                          "reward.reward_model.enable=True", "reward.reward_model.model_path=org/rm-7b",
                          "reward.reward_model.rollout.name=vllm"], (), "reward.reward_model.model_path", {}),
    ("VI846", "error", ["algorithm.adv_estimator=gae", "critic.ppo_micro_batch_size_per_gpu=4"], (), "critic.model.path", {}),
    ("VI847", "warning", ["actor_rollout_ref.rollout.n=1"], (), "actor_rollout_ref.rollout.n", {}),
    ("VI848", "error", ["reward.reward_model.enable=True", "reward.reward_model.rollout.name=vllm"], (), "reward.reward_model.model_path", {}),
    ("VI848", "error", ["algorithm.filter_groups.enable=True", "reward.reward_model.enable=True",
                        "reward.reward_model.model_path=org/rm", "reward.reward_model.rollout.name=vllm"], (),
     "reward.reward_model.enable_resource_pool", {}),
    ("VI836", "warning", ["actor_rollout_ref.actor.freeze_vision_tower=True"], (), "actor_rollout_ref.actor.freeze_vision_tower", {}),
    ("VI850", "error", ["actor_rollout_ref.rollout.gpu_memory_utilization=1.5"], (), "actor_rollout_ref.rollout.gpu_memory_utilization", {}),
    ("VI850", "error", ["actor_rollout_ref.rollout.gpu_memory_utilization=0"], (), "actor_rollout_ref.rollout.gpu_memory_utilization", {}),
    ("VI851", "error", ["actor_rollout_ref.rollout.n=0"], (), "actor_rollout_ref.rollout.n", {}),
    ("VI852", "error", ["actor_rollout_ref.rollout.temperature=0"], (), "actor_rollout_ref.rollout.temperature", {}),
    # validation samples with val_kwargs.temperature, which validate_config does not check (real case verl#1352)
    ("VI852", "warning", ["actor_rollout_ref.rollout.val_kwargs.do_sample=True", "actor_rollout_ref.rollout.val_kwargs.temperature=0"], (),
     "actor_rollout_ref.rollout.val_kwargs.temperature", {}),
    ("VI813", "error", ["model_engine=megatron", "actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B",
                        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
                        "actor_rollout_ref.actor.megatron.expert_model_parallel_size=8"], (),
     "actor_rollout_ref.actor.megatron.expert_model_parallel_size", {}),
    ("VI817", "warning", ["trainer.device=npu", "actor_rollout_ref.rollout.name=sglang"], (), "actor_rollout_ref.rollout.name", {}),
    ("VI818", "error", ["model_engine=megatron", "actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B",
                        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=8"], (),
     "actor_rollout_ref.actor.megatron.tensor_model_parallel_size", {}),
    ("VI819", "warning", ["model_engine=megatron", "actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B", "trainer.nnodes=2",
                          "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
                          "actor_rollout_ref.actor.megatron.expert_model_parallel_size=8",
                          "actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=2"], (),
     "actor_rollout_ref.actor.megatron.expert_model_parallel_size", {"hw": {"nnodes": 2}}),
    ("VI853", "error", ["actor_rollout_ref.rollout.mode=sync"], (), "actor_rollout_ref.rollout.mode", {}),
    ("VI854", "error", ["actor_rollout_ref.actor.clip_ratio_c=0.5"], (), "actor_rollout_ref.actor.clip_ratio_c", {}),
    ("VI854", "error", ["actor_rollout_ref.actor.policy_loss.loss_mode=dro"], (), "actor_rollout_ref.actor.policy_loss.dro_beta", {}),
    ("VI856", "error", ["actor_rollout_ref.model.lora_rank=1024"], (), "actor_rollout_ref.model.lora_rank", {}),
    ("VI856", "warning", ["actor_rollout_ref.model.lora_rank=48"], (), "actor_rollout_ref.model.lora_rank", {}),
    ("VI857", "info", ["data.val_batch_size=16"], (), "data.val_batch_size", {}),
    # LoRA keys per engine (tests/test_lora_megatron.py has the rest): Megatron's block on FSDP, FSDP's on Megatron
    ("VI880", "error", ["actor_rollout_ref.model.lora.rank=16"], (), "actor_rollout_ref.model.lora.rank", {}),
    ("VI880", "error", ["model_engine=megatron", "actor_rollout_ref.model.lora_rank=16"], (),
     "actor_rollout_ref.model.lora_rank", {}),
    ("VI881", "error", ["model_engine=megatron", "actor_rollout_ref.model.lora.rank=16",
                        "actor_rollout_ref.actor.megatron.vanilla_mbridge=True"], (),
     "actor_rollout_ref.actor.megatron.vanilla_mbridge", {}),
    ("VI882", "error", ["model_engine=megatron", "actor_rollout_ref.model.lora.rank=16",
                        "actor_rollout_ref.rollout.checkpoint_engine.backend=delta_sharded"], (),
     "actor_rollout_ref.rollout.checkpoint_engine.backend", {}),
    ("VI860", "error", ["actor_rollout_ref.model.path=Qwen/Qwen2.5-72B-Instruct"], (), "actor_rollout_ref.model.path",
     {"hw": {"gpu_memory_gb": 24}}),
    ("VI861", "info", [], (), "", {"hw": {"gpu_memory_gb": None}}),
    ("VI862", "error", ["actor_rollout_ref.rollout.gpu_memory_utilization=0.05"], (), "actor_rollout_ref.rollout.gpu_memory_utilization", {}),
    ("VI862", "error", ["reward.reward_model.enable=True", "reward.reward_model.model_path=Qwen/Qwen2.5-7B-Instruct",
                        "reward.reward_model.rollout.name=vllm", "reward.reward_model.rollout.gpu_memory_utilization=0.05"], (),
     "reward.reward_model.rollout.gpu_memory_utilization", {}),
    ("VI870", "warning", ["data.train_files=/nonexistent/train.parquet"], (), "data.train_files", {}),
    # multi-turn tools with the single-turn default loop (the fake parquet files cannot say whether rows name one)
    ("VI855", "warning", ["actor_rollout_ref.rollout.multi_turn.enable=True",
                          "actor_rollout_ref.rollout.multi_turn.tool_config_path=/nonexistent/tools.yaml"], (),
     "actor_rollout_ref.rollout.agent.default_agent_loop", {}),
    ("VI858", "warning", ["actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
                          "actor_rollout_ref.rollout.multi_turn.tool_config_path=/nonexistent/tools.yaml"], (),
     "actor_rollout_ref.rollout.multi_turn.tool_config_path", {}),
    ("VI859", "warning", ["actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent"], (),
     "actor_rollout_ref.rollout.agent.default_agent_loop", {}),
    # sandbox reward (the data rule VI885 is tested with real rows in tests/test_sandbox_reward.py)
    ("VI883", "warning", ["reward.sandbox_fusion.url=http://sandbox:8080/run_code",
                          "reward.custom_reward_function.path=/nonexistent/reward.py"], (), "reward.sandbox_fusion.url", {}),
    ("VI884", "error", ["reward.sandbox_fusion.url=ftp://sandbox/run_code"], (), "reward.sandbox_fusion.url", {}),
    ("VI884", "warning", ["reward.sandbox_fusion.url=http://u:p@sandbox:8080/run_code"], (), "reward.sandbox_fusion.url", {}),
    # a reward model served by verl's reward loop (VI887/VI888 read a function file: test_vi887_vi888_... below)
    ("VI889", "error", RM_ON + ["reward.reward_model.rollout.tensor_model_parallel_size=16"], (),
     "reward.reward_model.rollout.tensor_model_parallel_size", {}),
    ("VI889", "error", RM_ON + ["reward.reward_model.enable_resource_pool=True", "reward.reward_model.nnodes=0"], (),
     "reward.reward_model.nnodes", {}),
    # rules derived from verl's source (tests/test_verl_readers.py, tests/test_verl_requirements.py test them further)
    ("VI890", "warning", ["actor_rollout_ref.hybrid_engine=False"], (), "actor_rollout_ref.hybrid_engine", {}),
    ("VI892", "error", ["reward.reward_manager.name=dapo", "+reward.reward_kwargs.overlong_buffer_cfg.enable=true",
                        "+reward.reward_kwargs.overlong_buffer_cfg.len=0", "+reward.reward_kwargs.max_resp_len=512"], (),
     "reward.reward_kwargs.overlong_buffer_cfg.len", {}),
    ("VI893", "error", ["reward.reward_model.enable=True"], (), "reward.reward_model.model_path", {}),
    ("VI894", "warning", ["algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-VL-7B-Instruct"], (),
     "critic.model.path", {}),
]


@pytest.mark.parametrize("rule,severity,changes,remove,key,kw", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(data, rule, severity, changes, remove, key, kw):
    report = run(data, changes, remove, **kw)
    hits = [f.problem for f in report.findings if f.problem.rule == rule and f.problem.severity == severity]
    assert hits, [f.problem.line() for f in report.findings]
    if key:
        assert any(key in p.keys for p in hits), [p.line() for p in hits]
    for p in hits:
        assert p.message and (p.hint or p.severity == "info"), p
    if severity == "error":
        assert not report.ok


def test_vi871_reward_function_must_define_the_scorer(data, tmp_path):
    fn = tmp_path / "reward.py"
    fn.write_text("def score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")
    report = run(data, [f"reward.custom_reward_function.path={fn}", "reward.custom_reward_function.name=compute_score"])
    hits = [f.problem for f in report.findings if f.problem.rule == "VI871"]
    assert hits and "did you mean score" in hits[0].hint
    ok = run(data, [f"reward.custom_reward_function.path={fn}", "reward.custom_reward_function.name=score"])
    assert "VI871" not in ok.ids() and "VI870" not in ok.ids()
    missing = run(data, [f"reward.custom_reward_function.path={tmp_path / 'nope.py'}"])
    assert "VI870" in missing.ids("warning")


def test_vi872_fewer_rows_than_one_batch_trains_nothing(data, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    def parquet(name: str, rows: int) -> Path:
        path = tmp_path / name
        pq.write_table(pa.table({"prompt": [f"q{i}" for i in range(rows)]}), path)
        return path

    small = parquet("small.parquet", 3)
    report = run(data, [f"data.train_files={small}"])  # train_batch_size=64
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI872"]
    assert hit.severity == "error" and "holds 3 row(s), fewer than data.train_batch_size=64" in hit.message
    assert "data.train_batch_size ≤ 3" in hit.hint and not report.ok
    assert "VI872" not in run(data, [f"data.train_files=[{small},{parquet('more.parquet', 61)}]"]).ids()
    lines = tmp_path / "t.jsonl"
    lines.write_text("".join('{"prompt": "q"}\n' for _ in range(10)))
    assert "VI872" in run(data, [f"data.train_files={lines}"]).ids("error")
    assert "VI872" not in run(data, [f"data.train_files={lines}", "data.train_batch_size=8",
                                     "actor_rollout_ref.actor.ppo_mini_batch_size=8"]).ids()


def test_vi887_vi888_reward_function_and_the_reward_models_router(data, tmp_path):
    """verl passes reward_router_address / reward_model_tokenizer to the custom reward function exactly when a reward
    model is enabled (naive.py:56-63)."""
    rule_fn = tmp_path / "rule.py"
    rule_fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")
    judge_fn = tmp_path / "judge.py"
    judge_fn.write_text("async def compute_score(data_source, solution_str, ground_truth, extra_info, "
                        "reward_router_address, reward_model_tokenizer):\n    return 0.0\n")
    report = run(data, RM_ON + [f"reward.custom_reward_function.path={rule_fn}"])
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI887"]
    assert hit.severity == "error" and "reward_router_address" in hit.hint and not report.ok
    assert "VI887" not in run(data, RM_ON + [f"reward.custom_reward_function.path={judge_fn}"]).ids()
    report = run(data, [f"reward.custom_reward_function.path={judge_fn}"])
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI888"]
    assert hit.severity == "error" and "reward.reward_model.enable=true" in hit.hint
    assert "VI888" not in run(data, [f"reward.custom_reward_function.path={rule_fn}"]).ids()


def test_every_rule_has_a_test():
    # VI895-VI898 (step time, log-prob micro-batch, idle rollout GPUs, padded passes): tests/test_steptime.py plants
    # each fault
    tested = {c[0] for c in CASES} | {"VI871", "VI872", "VI885", "VI887", "VI888", "VI895", "VI896", "VI897", "VI898"}
    tested |= {"VI873", "VI874", "VI875", "VI876", "VI877"}  # tests/test_sandbox_boundary.py (static read, --deep)
    tested |= {"VI878", "VI879"}  # VI878: test_data_content.py, VI879: test_force_stale.py
    tested |= {"VI794", "VI795", "VI796"}  # tests/test_check_rl_data.py (VI878's ground-truth type there too)
    tested |= {"VI765", "VI766", "VI922"}  # tests/test_check_reward_scoring.py (and VI875's worker-thread call)
    tested |= {"VI891"}  # a missing --config-path config needs a launch script: tests/test_verl_readers.py
    tested |= {"VI422"}  # LoRA on the FSDP critic: tests/test_critic_lora.py (verl's own LoRA builder as oracle)
    tested |= {"VI637", "VI638"}  # code rows' test cases, verl's scorers as oracle: tests/test_check_code_tests.py
    tested |= {"VI629", "VI635"}  # pipeline_model_parallel_layout, megatron-core verdicts: tests/test_pp_layout.py
    tested |= {"VI616", "VI626"}  # Megatron recompute settings, MTP patch run on CPU: tests/test_mcore_recompute.py
    tested |= {"VI904", "VI905", "VI906"}  # tests/test_check_mechanisms.py (each class twice, with a valid control)
    tested |= {"VI972"}  # a save_to_disk folder as train_files: tests/test_data_saved.py
    tested |= {"VI699", "VI708", "VI737", "VI738"}  # offline entry points, checkpoint paths: tests/test_check_offline_entries.py
    tested |= {"VI951"}  # a critic under one_step_off/fully_async: tests/test_check_separation_critic.py
    tested |= {"VI672", "VI673", "VI674"}  # NPU-only failures (fused Triton kernels, mbridge+VPP, LoRA slice):
    #                                        tests/test_check_npu.py
    tested |= {"VI642", "VI643", "VI644"}  # attention kernel vs the model family: tests/test_check_attention_kernels.py
    tested |= {"VI952"}  # a critic tokenizer folder without tokenizer files: tests/test_check_critic_tokenizer.py
    tested |= {"VI957"}  # a standalone classifier RM with no custom function: tests/test_check_reward_standalone_disrm.py
    tested |= {"VI426", "VI427"}  # inert Dr.GRPO flag / rejected rows in the GRPO baseline, verl's compute_advantage
    #                                as oracle: tests/test_algo_estimator_flags.py
    tested |= {"VI955"}  # GDPO weights vs reward keys, verl's own estimator as oracle: tests/test_check_estimator_inputs.py
    tested |= {"VI646", "VI654"}  # VeOmni mesh / Ulysses without remove-padding: tests/test_check_veomni_mesh.py
    tested |= {"VI655"}  # FSDP merger on a VeOmni checkpoint: tests/test_check_merger.py
    tested |= {"VI442", "VI443"}  # validate flag, reserved reward key: tests/test_valid_reward_meta.py
    tested |= {"VI931"}  # FSDP2 offload_policy + LoRA adapter sync, verl's source as oracle: tests/test_check_lora_offload.py
    tested |= {"VI900"}  # SGLang LoRA with a regex target_modules, verl's function as oracle: tests/test_check_sglang_lora.py
    tested |= {"VI639", "VI645"}  # rollout quantization the server refuses / SGLang FP8 on a GDN hybrid: tests/test_check_rollout_quant.py
    tested |= {"VI899"}  # verl's own skewed and balanced rollout/trainer splits: tests/test_split.py
    tested |= {"VI907"}  # Ulysses SP on a Gated DeltaNet model: tests/test_hybrid_shapes.py, SFT: test_check_sft_gdn_ulysses.py
    tested |= {"VI912"}  # Megatron without Megatron-Bridge: tests/test_mbridge.py
    tested |= {"VI928"}  # overrides cut off the launch command, against bash's own run: tests/test_launch_break.py
    tested |= {"VI709", "VI728", "VI729"}  # router replay halves and vLLM EP in engine_kwargs: tests/test_router_replay.py
    tested |= {"VI454", "VI455"}  # delta_sharded consumer refusals / engine kwargs refused: tests/test_sync_delta.py
    tested |= {"VI430", "VI431"}  # MoE bf16 sync on SM100 / load-balance metrics without routes: tests/test_moe_rollout.py
    tested |= {"VI927"}  # MoE aux-loss coefficient with no load-balancing type, against verl's engine: tests/test_moe_router.py
    tested |= {"VI919"}  # a relative file:// search path from the launch folder: tests/test_searchpath.py
    tested |= {"VI977"}  # a Slurm batch script where Ray counts the node's cores: tests/test_check_slurm.py
    tested |= {"VI657", "VI658", "VI659"}  # ray_kwargs.ray_init keys ray.init refuses: tests/test_check_ray_init.py
    tested |= {"VI434"}  # Ray CPUs below verl's placement-group reservation: tests/test_launch_cpus.py
    tested |= {"VI651", "VI652"}  # weight-sync bucket and LoRA behind a non-naive sync: tests/test_check_weightsync.py
    tested |= {"VI932", "VI933", "VI934", "VI935"}  # the Ray cluster a script builds: tests/test_check_scriptcluster.py
    tested |= {"VI668", "VI669"}  # where the reference really runs, against verl's own source: tests/test_check_refmodel.py
    tested |= {"VI600", "VI612", "VI615"}  # engine_kwargs.vllm copies of verl-set vLLM args: tests/test_check_vllm_spread.py
    tested |= {"VI414", "VI415"}  # retired dummy* load_format / vLLM parallel size in engine_kwargs: tests/test_vllm_rollout_loading.py
    tested |= {"VI691", "VI695", "VI696"}  # parser name, group as a value, function-tool file: tests/test_check_tool_loaders.py
    tested |= {"VI664"}  # engine_kwargs.sglang copies of verl-set ServerArgs, against verl's literal: tests/test_check_sglang_args.py
    tested |= {"VI665"}  # media rows, no processor verl builds, against verl's hf_processor: tests/test_check_vlm_processor.py
    tested |= {"VI988", "VI989"}  # engine_kwargs / do_sample verl never reads: tests/test_rollout_engine_settings.py
    tested |= {"VI613", "VI614"}  # precision names / rollout vs training dtype, against verl's engines: tests/test_check_dtypes.py
    tested |= {"VI990"}  # FP8 rollout shards against vLLM's block rule: tests/test_fp8_rollout.py
    tested |= {"VI981", "VI982", "VI983", "VI984"}  # optimizer/precision keys verl does not act on: tests/test_check_optim.py
    tested |= {"VI661", "VI662", "VI663"}  # Megatron schedule on resume, FSDP optimizer build, Muon scale: tests/test_check_optim_sched.py
    tested |= {"VI991"}  # rollout log-probs vs the actor's, against verl's engine: tests/test_rollout_logprobs.py
    tested |= {"VI774", "VI775"}  # adaptive KL coefficient lost on resume: tests/test_check_algorithm.py
    tested |= {"VI776", "VI777", "VI778"}  # loss-mode keys, KL-loss gradient, entropy chunking: tests/test_check_losses.py
    tested |= {"VI689", "VI690"}  # role-level use_torch_compile, Megatron fused kernels switched off: tests/test_check_engine_flags.py
    tested |= {"VI782", "VI783", "VI784"}  # critic warmup/discount/vocabulary, against verl's own code: tests/test_critic_rules.py
    tested |= {"VI779"}  # colocated Megatron engines with different layouts: tests/test_megatron_pool.py
    tested |= {"VI798", "VI799", "VI920"}  # vision-language data settings, against verl's dataset, agent loop and servers: tests/test_check_multimodal.py
    tested |= {"VI791", "VI792", "VI793"}  # role grad_clip, epochs without shuffle, kl_cov on-policy: tests/test_check_ppo_updates.py
    tested |= {"VI790"}  # layered_summon with LoRA and dummy weights / unread, against verl's collect_lora_params: tests/test_layered_summon.py
    tested |= {"VI797"}  # config keys no code of verl reads (verl_readers.json's dead list): tests/test_dead_keys.py
    tested |= {"VI656"}  # keys only a module nothing in verl loads reads (orphan_only): tests/test_orphan_keys.py
    tested |= {"VI921"}  # enforce_eager rollout, against verl's servers' graph switch and sleep: tests/test_enforce_eager.py
    tested |= {"VI949"}  # file-path custom dataset class loses the filter methods, against verl: tests/test_check_custom_dataset.py
    tested |= {"VI958", "VI959"}  # SGLang attention backend vs the card, against verl's default pick: tests/test_check_sglang_attention.py
    tested |= {"VI956"}  # deferred FSDP gradient sync, against verl's engine context and torch FSDP2 on CPU: tests/test_grad_sync.py
    tested |= {"VI947"}  # free_cache_engine=False on a colocated engine, against verl's sleep: tests/test_free_cache_engine.py
    tested |= {"VI976"}  # nsys whole-step capture range, against verl's worker group and profiler: tests/test_check_profiling.py
    tested |= {"VI678", "VI679", "VI688"}  # profiler enable / other tool's tool_config / nsys GPU metrics, against verl's DistProfiler, workers and worker group: tests/test_check_profiler_roles.py
    tested |= {"VI973"}  # distillation teacher pool vs the teachers: tests/test_distill_pool.py
    tested |= {"VI617", "VI620", "VI621", "VI622"}  # distillation loss / teacher top-k / temperature / tokenizer: tests/test_distill_settings.py
    tested |= {"VI915"}  # GSPO with token-level clip bounds, against verl's own losses: tests/test_gspo_clip.py
    tested |= {"VI667", "VI670"}  # clip_ratio shadowed / CISPO weight floor, against verl's own losses: tests/test_check_clip_bounds.py
    tested |= {"VI944", "VI945", "VI946"}  # ROCm visible devices, GeForce P2P, DeepEP below Hopper, against verl's worker set-up and Ray's AMD manager: tests/test_check_accel_env.py
    tested |= {"VI941", "VI942", "VI943"}  # V1 bypass settings, negative KL coefficient, rollout_rs values, against verl's own losses and parsers: tests/test_check_rollout_corr.py
    tested |= {"VI923", "VI924", "VI925", "VI926"}  # checkpoint storage and resume world, against verl's trainers and managers: tests/test_check_ckpt_store.py
    tested |= {"VI916", "VI917", "VI918", "VI992"}  # saving and offload settings verl ignores: tests/test_saving_rules.py
    tested |= {"VI996", "VI997", "VI998", "VI999"}  # reward managers' reads, DAPO sampling: tests/test_reward_managers.py
    tested |= {"VI647", "VI653"}  # reward function signature / answer against verl's managers: tests/test_check_reward_signature.py
    tested |= {"VI648", "VI649", "VI650"}  # DAPO filter metric, overlong shaping, legacy trainer: tests/test_dapo_filter.py
    tested |= {"VI913"}  # SGLang rollout DP without DP attention: tests/test_sglang_dp.py
    tested |= {"VI993", "VI994", "VI995"}  # trainer-mode preconditions, run in verl's own code: tests/test_check_modes.py
    tested |= {"VI618", "VI619"}  # fully async LR schedule and rollout budget, against verl's own code: tests/test_check_fully_async.py
    tested |= {"VI450"}  # Continuous Token builder vs tokenizer, against verl's own builder: tests/test_chat_ct_builder.py
    tested |= {"VI410"}  # fully async optimizer on Megatron / VeOmni, against verl's own code: tests/test_async_lr_engines.py
    tested |= {"VI914"}  # data paths verl cannot read, against verl's RLHFDataset: tests/test_data_format.py
    tested |= {"VI837"}  # the Conv3d patch embedding on the installed torch: tests/test_patch_embed.py
    tested |= {"VI640"}  # a media cell that is not a list (PPO and SFT), against verl's datasets' _build_messages: tests/test_check_media_not_list.py
    tested |= {"VI641"}  # parquet metadata the installed datasets cannot decode, against verl's reader: tests/test_check_parquet_features.py
    tested |= {"VI627"}  # recipe code importing what the installed verl lacks, against Python's import: tests/test_check_recipe_imports.py
    tested |= {"VI628"}  # reward function returning token-level rewards, against verl's reward manager: tests/test_check_dense_reward.py
    tested |= {"VI838"}  # rollout TP against the attention heads: tests/test_rollout_heads.py (vLLM and SGLang)
    tested |= {"VI849"}  # LoRA on a vision tower vLLM ignores: tests/test_vlm_lora.py (peft and transformers as oracles)
    tested |= {"VI666"}  # VLMLoRA module the rollout never receives: tests/test_check_vlm_lora_sync.py (verl's get_per_tensor_param run on a stub bridge)
    tested |= {"VI835"}  # micro-batches under the interleaved schedule: tests/test_check_interleaved.py
    tested |= {"VI839"}  # resume_from_path against verl's own _load_checkpoint: tests/test_check_resume.py
    tested |= {"VI828"}  # the critic's unread batching keys: tests/test_critic_budget.py (verl's source read)
    tested |= {"VI909"}  # the FSDP mesh: tests/test_check_fsdp_mesh.py (torch's FSDP1/FSDP2 on the CPU)
    tested |= {"VI908"}  # no chat template: tests/test_check_chat_template.py (verl's RLHFDataset keeps no row)
    tested |= {"VI832"}  # a token budget with dynamic batching off: tests/test_check_ignored_budget.py (verl's split)
    tested |= {"VI770", "VI771", "VI772", "VI773"}  # Ray cluster launches: tests/test_check_cluster.py
    tested |= {"VI938", "VI939"}  # unset variable under set -u / shell-rewritten override: tests/test_check_shell_words.py (bash)
    tested |= {"VI829"}  # variables exported before `ray job submit`: tests/test_check_launch_env.py (a real Ray job)
    tested |= {"VI864", "VI865"}  # bf16 / flash-attn on a card below compute capability 8.0: tests/test_precision.py
    tested |= {"VI886"}  # custom model code without trust_remote_code: tests/test_check_remote_code.py
    tested |= {"VI693"}  # tokenizer remote code / data.trust_remote_code: tests/test_check_tokenizer_trust.py (verl's
    # hf_tokenizer and HFModelConfig refuse the folder without the model's flag)
    tested |= {"VI869"}  # total_training_steps beyond the epochs: tests/test_check_steps.py
    tested |= {"VI868"}  # clip settings with one update per batch: tests/test_estimators.py (verl's ratio, computed)
    tested |= {"VI867"}  # prompts over max_prompt_length with the model's tokenizer: tests/test_check_prompts.py
    tested |= {"VI866"}  # the multi-turn response budget: tests/test_agent_tools.py (the planner's VI562 arithmetic)
    tested |= {"VI863"}  # --deep tools phase, verl's parsers on the model's template: tests/test_check_toolcall.py
    tested |= {"VI911"}  # reward file vs the tokenizer's special tokens: tests/test_reward_special_tokens.py (verl's naive manager)
    tested |= {"VI692"}  # serving-layer options verl's token-in agent loops never reach: tests/test_serve_parsers.py
    tested |= {"VI910"}  # the same comparison in the default check, verl's parsers as oracles: tests/test_tool_format.py
    tested |= {"VI684", "VI685", "VI686", "VI687"}  # model-merger commands: tests/test_check_merger.py (verl's merger code)
    tested |= {"VI974"}  # FSDP LoRA with hf_model: tests/test_check_lora_export.py (verl's checkpoint manager on gloo)
    tested |= {"VI929", "VI930"}  # LoRA lr / zero alpha: tests/test_check_lora_scale.py (verl's actor.yaml, peft LoraLayer)
    tested |= {"VI975"}  # an RM no reward comes from: tests/test_check_reward_unused.py (verl's RewardLoopWorker)
    tested |= {"VI700"}  # a chat model as the classifier RM: tests/test_check_reward_classifier.py
    tested |= {"VI706", "VI707"}  # reward classes: tests/test_check_reward_classes.py (verl's load_reward_manager)
    tested |= {"VI705"}  # unregistered checkpoint engine: tests/test_check_ckpt_backends.py (verl's registry)
    tested |= {"VI978"}  # adaptive KL horizon vs the batch rows: tests/test_check_algorithm.py (verl's apply_kl_penalty)
    tested |= {"VI979"}  # rollout correction without rollout log-probs: tests/test_check_algorithm.py (verl's gates)
    tested |= {"VI623", "VI624", "VI625"}  # estimator inputs vs the trainer: tests/test_check_estimator_inputs.py
    # (verl's compute_advantage on V1's fields and on the legacy batch)
    tested |= {"VI980"}  # ReMax under V1: tests/test_check_algorithm.py (verl's compute_advantage, the trainers' source)
    tested |= {"VI985"}  # val_only without val_before_train: tests/test_check_validation.py (the trainers' fit, read)
    tested |= {"VI986"}  # the SFT loop's crashes: tests/test_check_validation.py (verl's SFT trainers, run on the CPU)
    tested |= {"VI936", "VI937"}  # val_max_samples head slice / n greedy copies: tests/test_check_val_sampling.py
    tested |= {"VI418"}  # unseeded train_max_samples subset on resume: tests/test_data_train_subset.py (verl's
    # RLHFDataset, create_rl_sampler and a StatefulDataLoader resumed from its state)
    tested |= {"VI438", "VI439"}  # update epochs / run budget below 1: tests/test_update_epochs.py (verl's
    # make_iterator and FSDPActorConfig, the trainers' fit loop headers evaluated from verl's source)
    tested |= {"VI608", "VI609"}  # pinned repetition_penalty / unseeded SGLang: tests/test_check_sampling_reach.py
    # (verl's RLHFDataset and process_validation_metrics on the CPU)
    tested |= {"VI785", "VI786", "VI787"}  # SFT pad mode / micro batch / truncation: tests/test_check_sft_data.py
    tested |= {"VI788", "VI789"}  # SFT val set of no batch / placeholder lr: tests/test_check_sft_parallel.py (verl's
    # SFTTrainer._build_dataloader on the CPU, verl's composed sft_trainer_engine optimizer)
    tested |= {"VI739"}  # SFT per-message loss-mask field verl ignores (tests/test_check_sft_message_fields.py)
    tested |= {"VI680", "VI681", "VI682"}  # SFT epoch-end resume / messages column / max_length over the token
    # budget: tests/test_check_sft_runs.py (verl's CheckpointHandler, MultiTurnSFTDataset, rearrange_micro_batches)
    tested |= {"VI610", "VI611"}  # Megatron resume in another parallel layout / with use_dist_checkpointing flipped:
    # tests/test_check_mcore_resume.py (verl's _build_sharded_state_dict_metadata, get_rng_state,
    # _build_checkpoint_manifest and should_load_* run from its source on the CPU)
    tested |= {"VI694"}  # relaunch resuming a checkpoint at the step budget: tests/test_check_resume_budget.py (verl's
    # find_latest_ckpt_path; both trainers' fit loops read from verl's source)
    tested |= {"VI683"}  # --deep: a hidden SFT token mismatch: tests/test_check_deep_sft.py (verl's sanity_check)
    tested |= {"VI987"}  # a resumed launch's new W&B run: tests/test_check_tracking.py (verl's Tracking, read)
    tested |= {"VI675", "VI676"}  # reward-model context / chat template: tests/test_check_reward_inputs.py (verl's
    # RewardLoopWorker._preprocess_reward_inputs on the CPU)
    tested |= {"VI780"}  # legacy trainer's unequal agent-loop split: tests/test_check_agent_config.py (verl's DataProto.chunk)
    tested |= {"VI781"}  # tool_schema keys verl drops: tests/test_check_agent_config.py (verl's schema models, dumped)
    tested |= {"VI948", "VI953", "VI954"}  # Gloo's interface / relative agent-loop config / Megatron retention on
    # several nodes: tests/test_check_multinode_paths.py (verl's process-group backend, resolve_config_path and
    # retention methods on the CPU)
    tested |= {"VI697", "VI698"}  # SFT resume step from the first global_step / SFT Megatron async_save never
    # finalized: tests/test_check_sft_ckpt.py (verl's CheckpointHandler.load_checkpoint; the SFT trainers' source)
    assert tested == set(RULES), sorted(set(RULES) ^ tested)


# --- the classics the issue lists, and the five pitfalls of shared/docs/pitfalls.md -------------------

CLASSICS = {
    "rollout TP 2 (verl's default) on one GPU": (
        ["trainer.n_gpus_per_node=1", "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=4"],
        ("actor_rollout_ref.rollout.tensor_model_parallel_size",), {"hw": {"gpus_per_node": 1}},
        "VI810", "actor_rollout_ref.rollout.tensor_model_parallel_size"),
    "mini-batch larger than the train batch": (["actor_rollout_ref.actor.ppo_mini_batch_size=256"], (), {}, "VI820",
                                               "actor_rollout_ref.actor.ppo_mini_batch_size"),
    "micro-batch not dividing the per-GPU mini-batch": (["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=6"], (), {},
                                                        "VI823", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"),
    "token budget below prompt+response": (["actor_rollout_ref.actor.use_dynamic_bsz=True",
                                            "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=1200"], (), {},
                                           "VI830", "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu"),
    "TP larger than GPUs per node": (["actor_rollout_ref.rollout.tensor_model_parallel_size=16"], (), {}, "VI810",
                                     "actor_rollout_ref.rollout.tensor_model_parallel_size"),
    "critic settings under GRPO": (["critic.ppo_micro_batch_size_per_gpu=8", "critic.model.path=Qwen/Qwen2.5-1.5B-Instruct"], (), {},
                                   "VI841", "critic.ppo_micro_batch_size_per_gpu"),
    "KL in both loss and reward": (["algorithm.use_kl_in_reward=True", "algorithm.kl_ctrl.kl_coef=0.001"], (), {}, "VI842",
                                   "actor_rollout_ref.actor.use_kl_loss"),
    "what verl skips under dynamic batch size": (["actor_rollout_ref.actor.use_dynamic_bsz=True", "data.train_batch_size=16"], (), {},
                                                 "VI820", "data.train_batch_size"),
    # pitfall 1, roles that share one model: a GAE run whose critic is switched off
    "pitfall 1: GAE without its critic": (["algorithm.adv_estimator=gae", "critic.enable=False"], (), {}, "VI840", "critic.enable"),
    # pitfall 2, batches out of step: the update does not split over the data-parallel ranks
    "pitfall 2: mini-batch not splitting over ranks": (["actor_rollout_ref.actor.ppo_mini_batch_size=6",
                                                        "actor_rollout_ref.rollout.n=5"], (), {}, "VI822", "actor_rollout_ref.rollout.n"),
    # pitfall 3, device mapping: Megatron TP×PP that does not divide the GPUs
    "pitfall 3: Megatron TP×PP vs GPUs": (["model_engine=megatron", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
                                           "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=3"], (), {}, "VI813",
                                          "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size"),
    # pitfall 4, data verl does not read: a data file that is not there
    "pitfall 4: data file missing": (["data.val_files=/nonexistent/val.parquet"], (), {}, "VI870", "data.val_files"),
    # pitfall 5, local versus cluster: the config wants more GPUs than the machine has
    "pitfall 5: more GPUs than the hardware": (["trainer.nnodes=2"], (), {}, "VI814", "trainer.nnodes"),
}


@pytest.mark.parametrize("name", sorted(CLASSICS))
def test_classic_mistakes(data, name):
    changes, remove, kw, rule, key = CLASSICS[name]
    report = run(data, changes, remove, **kw)
    hits = [f.problem for f in report.findings if f.problem.rule == rule]
    assert hits and any(key in p.keys for p in hits), [f.problem.line() for f in report.findings]


def test_nearest_valid_values_in_hints(data):
    r = run(data, ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"])
    vi823 = next(f.problem for f in r.findings if f.problem.rule == "VI823")
    assert "nearest valid: 2 or 4" in vi823.hint
    r = run(data, ["actor_rollout_ref.rollout.tensor_model_parallel_size=3"])
    vi810 = next(f.problem for f in r.findings if f.problem.rule == "VI810")
    assert "2 or 4" in vi810.hint
    r = run(data, ["actor_rollout_ref.actor.ppo_mini_batchsize=16"])
    vi801 = next(f.problem for f in r.findings if f.problem.rule == "VI801")
    assert "did you mean actor_rollout_ref.actor.ppo_mini_batch_size?" in vi801.hint


def test_dynamic_batching_skips_what_verl_skips(data):
    """Under dynamic batching verl skips validate_config's batch checks; the lint keeps what the workers assert."""
    dyn = ["actor_rollout_ref.actor.use_dynamic_bsz=True", "data.train_batch_size=65"]
    ids = run(data, dyn).ids("error")
    assert "VI821" not in ids  # validate_config's train-batch divisibility is skipped by verl ...
    assert "VI825" in run(data, dyn).ids("warning")  # ... and verl pads the batch instead
    assert "VI822" in run(data, dyn + ["actor_rollout_ref.actor.ppo_mini_batch_size=3"]).ids("error")  # worker assert stays


def test_deprecated_micro_fix_uses_verls_old_conversion(data):
    r = run(data, ["actor_rollout_ref.rollout.log_prob_micro_batch_size=64"],
            ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",))
    fd = next(f for f in r.findings if f.problem.rule == "VI806")
    assert fd.fix is not None and fd.fix.set == {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 8}


def test_unresolved_values_skip_rules_instead_of_failing_them(data):
    r = run(data, ["trainer.n_gpus_per_node=UNSET_GPUS", "actor_rollout_ref.actor.ppo_mini_batch_size=UNSET_MINI"])
    assert not r.errors, [f.problem.line() for f in r.errors]
    assert "VI800" in r.ids("info")


def test_memory_check_reads_a_local_model_folder(data, tiny_model):
    r = run(data, [f"actor_rollout_ref.model.path={tiny_model}"])
    assert "VI861" not in r.ids() and r.memory is not None


def test_config_lists_the_keys_the_rules_read(data):
    r = run(data, [])
    assert r.config["data.train_batch_size"] == 64
    assert r.config["actor_rollout_ref.rollout.n"] == 4
    assert r.config["trainer.n_gpus_per_node"] == 8
    assert all(isinstance(k, str) for k in r.config)


def test_unknown_model_is_an_info_not_an_error(data):
    r = run(data, ["actor_rollout_ref.model.path=org/mystery-model"])
    assert "VI861" in r.ids("info") and not r.errors


WEIRD = ["abc", "-1", "0", "null", "[1,2]", "{a:1}", "1.5", "True", "???", "${oc.select:nope}", "''"]
WEIRD_KEYS = ["data.train_batch_size", "data.train_files", "data.max_prompt_length", "trainer.n_gpus_per_node",
              "trainer.nnodes", "trainer.logger", "actor_rollout_ref.rollout.n", "actor_rollout_ref.actor.ppo_mini_batch_size",
              "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.rollout.tensor_model_parallel_size",
              "actor_rollout_ref.rollout.gpu_memory_utilization", "actor_rollout_ref.model.path", "critic.enable",
              "actor_rollout_ref.actor.ulysses_sequence_parallel_size", "model_engine"]


@pytest.mark.parametrize("key", WEIRD_KEYS)
def test_odd_values_are_findings_not_crashes(data, key):
    for value in WEIRD:
        report = run(data, [f"{key}={value}"])
        assert report.findings is not None
    bad = run(data, [f"{key}=abc"])
    if key not in ("trainer.logger", "actor_rollout_ref.model.path", "data.train_files"):
        assert bad.errors, (key, [f.problem.line() for f in bad.findings])


def test_a_full_config_dump_is_read_like_verls_own(tmp_path, data):
    """A YAML without `defaults` (e.g. Hydra's outputs/.../.hydra/config.yaml) is the whole config."""
    import yaml

    from wizard.check.resolve import resolve
    from wizard.check.source import load_source
    from wizard.check.tree import set_key

    src = load_source(None, base(data) + ["model_engine=megatron"], env={})
    tree = resolve(src, "snapshot", lambda *a, **k: None, {})
    nested: dict = {}
    for k, v in tree.flat.items():
        set_key(nested, k, v)
    dump = tmp_path / "config.yaml"
    dump.write_text(yaml.safe_dump(nested))
    report = check(str(dump), defaults="snapshot", **HW)
    assert not report.errors and not report.warnings, [f.problem.line() for f in report.findings]
    assert report.config["actor_rollout_ref.actor.strategy"] == "megatron"


def test_vi861_unknown_gpu_type_is_said_not_ignored(data):
    report = run(data, [], hw={"gpu_memory_gb": None}, gpu_type="FOO-9000")
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI861" and "--gpu-type" in f.problem.keys]
    assert "--gpu-type FOO-9000 does not name a GPU" in hit.message and "--gpu-memory-gb" in hit.hint
    known = run(data, [], hw={"gpu_memory_gb": None}, gpu_type="H100")
    assert any("assuming 80 GB per GPU" in f.problem.message for f in known.findings if f.problem.rule == "VI861")


def test_vi833_names_a_rope_override_the_rollout_never_sees():
    """verl's docs (advance/rope.rst) lengthen the context with YaRN in model.override_config; verl 0.9.1 applies it
    to the training engines' config (workers/config/model.py:215-219) and its vLLM server sends only quantization
    overrides (vllm_async_server.py:305-346): the error says so and points at config.json (real case: PR verl#1522)."""
    from wizard.check.lint import check

    long = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "data.max_prompt_length=2048",
            "data.max_response_length=41000", "actor_rollout_ref.rollout.name=vllm"]
    plain = [f.problem for f in check(None, long).findings if f.problem.rule == "VI833" and f.problem.severity == "error"]
    assert plain and "override_config" not in plain[0].message
    rope = [*long, "+actor_rollout_ref.model.override_config.rope_scaling.type=yarn",
            "+actor_rollout_ref.model.override_config.rope_scaling.factor=4.0"]
    [hit] = [f.problem for f in check(None, rope).findings if f.problem.rule == "VI833" and f.problem.severity == "error"]
    assert "never receives" in hit.message and "config.json" in hit.hint


def test_vi846_says_when_the_critic_comes_from_an_unset_estimator():
    """PRIME-RL/PRIME#11: adv_estimator never set (verl's default gae) with a group of samples per prompt: the critic
    on verl's default model is the error, and the message names the unset estimator; with gae set, it does not."""
    from wizard.check.lint import check

    base = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "actor_rollout_ref.rollout.n=5",
            "actor_rollout_ref.rollout.name=vllm"]
    [hit] = [f.problem for f in check(None, base).findings if f.problem.rule == "VI846"]
    assert "adv_estimator is unset" in hit.message and "adv_estimator=grpo" in hit.hint
    [hit] = [f.problem for f in check(None, [*base, "algorithm.adv_estimator=gae"]).findings if f.problem.rule == "VI846"]
    assert "adv_estimator" not in hit.message
