"""`verl-init check` on verl's own example configs (tests/data/reference/verl-examples.json).

verl 0.9.1 accepts every one of them on the hardware it declares (trainer.nnodes × n_gpus_per_node),
so the checker must report no error, but for ALLOWED_ERRORS below: errors true of an example that validates
and then stops at its first step. UNSET_* values are placeholders for what the scripts take from
their environment: they are reported as info (VI800). The warnings we allow, each with its reason:
"""

from __future__ import annotations

import json

import pytest
from conftest import REFERENCE, ROOT

from wizard.check.lint import check

EXAMPLES = json.loads((REFERENCE / "verl-examples.json").read_text(encoding="utf-8"))["configs"]
IDS = [c["source"].split(":", 1)[1].removeprefix("examples/") for c in EXAMPLES]
ENV = {"HOME": "/root"}  # the examples read their data from $HOME/data on verl's machines

ALLOWED_WARNINGS = {
    # tuning/lora/run_qwen2_5_vl_7b_fsdp.sh sets rollout.free_cache_engine=False: verl never puts its vLLM engine to
    # sleep (vllm_async_server.py:854), so the engine's weights and KV cache stay beside the LoRA update. A 7B LoRA
    # run fits on its 80 GB cards all the same: the memory is given away, not short. A fair warning.
    "VI947",
    "VI770",  # TRUE: multi-node examples (trainer.nnodes > 1) keep verl's relative default_local_dir; each node's
    # ranks write their shards in their own working folder (fsdp_checkpoint_manager.py:310-318)
    # The data files the examples read (/root/data/gsm8k/*.parquet, ...) are written by verl's
    # examples/data_preprocess scripts on the machine that trains; they are not on this one, and a run
    # started here would fail at start-up. A maintainer would agree the file is missing *here*.
    "VI870",
    # tuning/scaling/run_qwen2_5_72b_fsdp.sh runs vLLM with tensor_model_parallel_size=16 on nodes of 8
    # GPUs: each replica's tensor-parallel all-reduces cross the network, although TP 8 already holds
    # the 72B model's bf16 weights (18 GB per GPU). Valid for verl, slow by design: a fair warning.
    "VI811",
    # ascend_extras/ppo_trainer/run_qwen3_8b_fsdp.sh sets critic.ulysses_sequence_parallel_size=2 only: verl
    # 0.9 builds the critic's engine from critic.fsdp and does not copy that deprecated key there, so the
    # critic runs without sequence parallelism. The run works (SP 1 is valid), just not as written.
    "VI816",
    # keys no module of this configuration reads (wizard/check/data/verl_readers.json): trainer.balance_batch
    # (the V1 trainer always balances, trainer_base.py:582; only the legacy/separate trainers read the key),
    # critic.ppo_max_token_len_per_gpu (the V1 trainer sizes the critic from ppo_infer_max_token_len_per_gpu,
    # trainer_base.py:267-268), rollout.enable_chunked_prefill under SGLang (only vLLM/TRT-LLM read it). True, harmless.
    "VI890",
    # the same examples' critic: with critic.ppo_infer_max_token_len_per_gpu unset, verl 0.9.1 runs it on the
    # dataclass default, 32768 tokens a micro-batch, whatever critic.ppo_max_token_len_per_gpu says
    # (trainer_base.py:267-268): a fair warning about memory, the run starts.
    "VI828",
    # on_policy_distillation_trainer/run_qwen3_5_4b_fsdp.sh: FSDP2 with use_dynamic_bsz=False and micro-batches of 1,
    # beside ppo_max_token_len_per_gpu=24576 that verl reads only when it packs by tokens (engine/utils.py:108-128):
    # the budget does nothing. True, and the run works: a fair warning.
    "VI832",
    # grpo_trainer/run_qwen3_5_35b_fsdp.sh, on_policy_distillation_trainer/run_qwen3_5_4b_fsdp.sh and the Ascend FSDP
    # examples set actor_rollout_ref.actor/ref.use_torch_compile=False: verl 0.9.1's FSDP engine reads only
    # fsdp_config.use_torch_compile (transformer_impl.py:183-186), so entropy_from_logits is compiled all the same.
    # True (verl-recipe PR#150 moved its scripts for it); the run starts, compiled: a fair warning.
    "VI689",
    # remax_trainer/run_qwen2.5_math_7b_sync_fsdp.sh writes ref.fsdp_config.param_offload=False: verl 0.9.1's FSDP
    # engine CPU-offloads the forward-only reference whatever it says (transformer_impl.py:432-435, :459-463; verl
    # PR#7182). True, and the run works, with the offloaded ref it always had: a fair warning.
    "VI668",
    # tuning/lora/*.sh keep the ref block of full fine-tuning (ref.fsdp_config.param_offload=True) in LoRA runs, where
    # verl builds no ref worker and computes the reference on the actor with its adapter disabled (ref_in_actor,
    # trainer_base.py:234-237): the key is never read. True, harmless: a fair warning.
    "VI669",
    # ascend_extras/gspo_trainer/run_qwen3_32b_fsdp.sh sets clip_ratio_c=10.0 beside loss_mode=gspo:
    # compute_policy_loss_gspo reads only clip_ratio(_low/_high) (core_algos.py:1546-1619), the dual-clip bound is
    # vanilla's (:1323). TRUE and harmless (the GSPO bounds 3e-4/4e-4 are read): a fair warning.
    "VI776",
    # grpo_trainer/run_qwen3_vl_8b_megatron.sh, on_policy_distillation_trainer/run_qwen3_vl_8b_fsdp.sh and
    # run_qwen3_5_4b_fsdp.sh turn data.filter_overlong_prompts on and keep verl's YAML default image_patch_size=14
    # (legacy_data.yaml:77), which RLHFDataset uses over the processor's 16 (rl_dataset.py:112-114): the filter counts
    # Qwen3-VL's image tokens on the 28-pixel grid, the rollout on the 32-pixel one. TRUE (verl#6592): the run starts,
    # and only a prompt near data.max_prompt_length is miscounted: a fair warning.
    "VI798",
}


# Errors that are true of a v0.9.0 example run on verl 0.9.1, by example, each with its reason. The examples pass
# verl 0.9.1's config validation (the premise of verl-examples.json), but these ones stop at the first training step:
ALLOWED_ERRORS = {
    # ReMax launched with verl.trainer.main_ppo on the default V1 trainer (trainer.use_v1=true): V1 never generates the
    # greedy baseline, and verl's compute_advantage raises TypeError: missing 'reward_baselines' at the first step
    # (tests/test_check_algorithm.py runs verl's compute_advantage on V1's batch); only trainer.use_v1=False runs it.
    "remax_trainer/run_qwen3_8b_fsdp.sh": {"VI980"},
    # ... and it passes +ray_kwargs.ray_init.runtime_env.env_vars.TRANSFER_QUEUE_ENABLE=1 (PR#6340): Hydra makes it the
    # int 1, verl merges it into ray.init's runtime_env unchanged (main_ppo.py:71-74) and Ray 2.60 raises TypeError
    # "env_vars must be of type Dict[str, str]" in ray.init (tests/test_check_ray_init.py runs Ray's RuntimeEnv on it)
    "remax_trainer/run_qwen2.5_math_7b_sync_fsdp.sh": {"VI980", "VI658"},
    # OTB and GDPO launched on the default V1 trainer: V1's advantage step fetches no sum_pi_squared (OTB asserts it,
    # ray_trainer.py:265-270) and no prompts / reward components (GDPO reads them, core_algos.py:419-428); verl's
    # compute_advantage on V1's fields raises at the first step (tests/test_check_estimator_inputs.py, verl PR#6153,
    # PR#6159). Only trainer.use_v1=False runs them.
    "otb_trainer/run_qwen3_8b_fsdp.sh": {"VI623"},
    "gdpo_trainer/run_qwen3_8b_fsdp.sh": {"VI623"},
}


def _errors(config: dict, report) -> list[str]:
    allowed = ALLOWED_ERRORS.get(config["source"].split(":", 1)[1].removeprefix("examples/"), set())
    return [f.problem.line() for f in report.errors if f.problem.rule not in allowed]


def test_allowed_errors_are_still_reported():
    """Each allowance above still matches a real error on its example (a narrowed rule is noticed)."""
    for config in EXAMPLES:
        name = config["source"].split(":", 1)[1].removeprefix("examples/")
        if name in ALLOWED_ERRORS:
            assert ALLOWED_ERRORS[name] <= _report(config, "snapshot").ids("error"), name
    # an allowance names an example here or one of verl's newer launch scripts (tests/data/reference/
    # verl-main-scripts, where tests/test_bashtrace.py holds it to a real error the same way)
    scripts = json.loads((REFERENCE / "verl-main-scripts" / "index.json").read_text(encoding="utf-8"))
    text = json.dumps(scripts)
    assert not [n for n in ALLOWED_ERRORS if n not in IDS and f'"examples/{n}"' not in text]


def _report(config: dict, defaults: str):
    return check(None, config["overrides"], defaults=defaults, env=ENV)


@pytest.mark.parametrize("config", EXAMPLES, ids=IDS)
def test_no_error_on_verls_examples_snapshot(config):
    report = _report(config, "snapshot")
    assert not _errors(config, report), _errors(config, report)
    assert report.ids("warning") <= ALLOWED_WARNINGS, [f.problem.line() for f in report.warnings]
    # the hardware is the example's own declaration
    assert str(report.config["trainer.nnodes"]) == config["nnodes"]
    assert str(report.config["trainer.n_gpus_per_node"]) == config["n_gpus_per_node"]


def test_placeholders_are_info_not_errors():
    with_placeholders = [c for c in EXAMPLES if c["unresolved"]]
    assert with_placeholders
    for config in with_placeholders:
        report = _report(config, "snapshot")
        vi800 = [f.problem for f in report.findings if f.problem.rule == "VI800"]
        assert vi800 and all(p.severity == "info" for p in vi800), config["source"]


def test_placeholder_model_paths_skip_memory_with_an_info():
    config = next(c for c in EXAMPLES if any(o.startswith("actor_rollout_ref.model.path=UNSET_") for o in c["overrides"]))
    report = check(None, config["overrides"], defaults="snapshot", env=ENV, gpu_memory_gb=80)
    assert "VI861" in report.ids("info") and not report.errors


@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.parametrize("config", EXAMPLES, ids=IDS)
def test_no_error_on_verls_examples_with_verls_hydra_tree(config):
    report = _report(config, "verl")
    assert report.defaults.startswith("verl "), report.defaults
    assert not _errors(config, report), _errors(config, report)
    assert report.ids("warning") <= ALLOWED_WARNINGS


@pytest.mark.slow
@pytest.mark.verl
def test_snapshot_resolves_every_example_exactly_like_hydra():
    """The shipped snapshot + verl-init's own interpolation resolver give the same ~900 keys as Hydra."""
    from wizard.check.resolve import resolve
    from wizard.check.source import load_source

    for config in EXAMPLES:
        src = load_source(None, config["overrides"], env=ENV)
        trees = {}
        for mode in ("snapshot", "verl"):
            trees[mode] = resolve(src, mode, lambda *a, **k: None, ENV)
        assert trees["verl"].mode == "verl"
        a, b = trees["snapshot"].flat, trees["verl"].flat
        diff = sorted(k for k in set(a) | set(b) if a.get(k, "<missing>") != b.get(k, "<missing>"))
        assert not diff, (config["source"], diff[:10])
