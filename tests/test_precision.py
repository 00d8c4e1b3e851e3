"""Cards below compute capability 8.0 (V100, T4, Turing, Pascal): verl 0.9.1's defaults are bf16 and flash-attn 2, and
neither runs there (real case verl#2594: GRPO on a Tesla V100-SXM2-32GB stops with vLLM's "Bfloat16 is only supported
on GPUs with compute capability of at least 8.0").

What the tests hold, and against what:
- the card's capability by the name NVML reports, from NVIDIA's list of CUDA GPUs (developer.nvidia.com/cuda-gpus),
  written out here per name;
- `check` (VI864, VI865) fires on those cards only, for the settings that reach vLLM's dtype check and flash-attn,
  and its `--fix` gives overrides verl's own validation accepts and check no longer flags;
- the planner writes fp16 and sdpa for such a card: verl's composition, validation and dataclasses accept the bundle
  (FSDPEngineConfig.mixed_precision is verl's own field), verl's engine workers run a step with it on the CPU, and
  a card with bf16 gets none of these keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wizard
from wizard.check.lint import check, run_verl_checks
from wizard.check.report import fixed_overrides
from wizard.check.source import load_source
from wizard.intent.answers import make_answers
from wizard.verlspec.hardware import compute_capability_of_gpu_type, without_bf16

R = "actor_rollout_ref.rollout"
ATTN = "actor_rollout_ref.model.override_config.attn_implementation"
CRITIC_ATTN = "critic.model.override_config.attn_implementation"

# NVML's names (nvidia-smi --query-gpu=name) → compute capability, as NVIDIA lists them
NVML_NAMES = {
    "Tesla V100-SXM2-32GB": (7, 0), "Tesla V100-PCIE-16GB": (7, 0), "Tesla V100S-PCIE-32GB": (7, 0),
    "Tesla T4": (7, 5), "NVIDIA GeForce RTX 2080 Ti": (7, 5), "Quadro RTX 6000": (7, 5), "TITAN RTX": (7, 5),
    "Tesla P100-PCIE-16GB": (6, 0), "Tesla P40": (6, 1),
    "NVIDIA A100-SXM4-80GB": (8, 0), "NVIDIA A10G": (8, 6), "NVIDIA GeForce RTX 3090": (8, 6),
    "NVIDIA RTX A6000": (8, 6), "NVIDIA RTX 6000 Ada Generation": (8, 9), "NVIDIA L40S": (8, 9),
    "NVIDIA H100 80GB HBM3": (9, 0), "NVIDIA H20": (9, 0), "NVIDIA B200": (10, 0),
}


@pytest.mark.parametrize("name, capability", NVML_NAMES.items())
def test_capability_of_the_name_nvml_reports(name, capability):
    found = compute_capability_of_gpu_type(name)
    assert found is not None and found[1] == capability
    assert (without_bf16(name) is not None) == (capability < (8, 0))


@pytest.mark.parametrize("name", ["RTX 6000", "MI300X", "Ascend910B", "cpu", "p4d.24xlarge", ""])
def test_a_name_that_does_not_pin_the_card_is_unknown(name):
    """A bare "RTX 6000" is Turing or Ada; AWS's p4d is an instance of A100s, not a P4: nothing is assumed."""
    assert without_bf16(name) is None


BASE = ["trainer.nnodes=1", "trainer.n_gpus_per_node=4", "data.train_batch_size=32",
        "actor_rollout_ref.actor.ppo_mini_batch_size=16", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2", "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.name=vllm"]


def _hits(overrides, gpu_type, **kw):
    report = check(None, [*BASE, *overrides], gpu_type=gpu_type, **kw)
    return report, {f.problem.rule: f for f in report.findings if f.problem.rule in ("VI864", "VI865")}


@pytest.mark.parametrize("gpu_type", ["Tesla V100-SXM2-32GB", "T4", "8xT4", "Quadro RTX 6000"])
def test_verls_defaults_on_a_card_without_bf16_are_two_errors(gpu_type):
    _, hits = _hits([], gpu_type)
    assert set(hits) == {"VI864", "VI865"}
    assert hits["VI864"].problem.severity == "error" and hits["VI864"].problem.keys == (f"{R}.dtype",)
    assert "bfloat16" in hits["VI864"].problem.message and "mixed_precision.param_dtype=fp16" in hits["VI864"].problem.hint
    assert hits["VI865"].problem.keys == (ATTN,) and "flash_attention_2" in hits["VI865"].problem.message
    assert hits["VI865"].fix is not None and hits["VI865"].fix.set == {"+" + ATTN: "sdpa"}


@pytest.mark.parametrize("gpu_type", ["A100", "NVIDIA H100 80GB HBM3", "RTX 6000 Ada", "RTX 6000", "MI300X", None])
def test_a_card_with_bf16_or_an_unknown_one_is_not_flagged(gpu_type):
    assert not _hits([], gpu_type)[1]


@pytest.mark.slow
def test_each_setting_that_runs_there_silences_its_rule():
    assert set(_hits([f"{R}.dtype=float16"], "V100")[1]) == {"VI865"}
    assert set(_hits([f"{R}.name=sglang"], "V100")[1]) == {"VI865"}  # vLLM's check; SGLang's is not on record
    assert set(_hits([f"+{ATTN}=sdpa"], "V100")[1]) == {"VI864"}
    assert set(_hits([f"+{ATTN}=eager", f"{R}.dtype=float16"], "V100")[1]) == set()


def test_an_explicit_flash_attention_is_fixed_in_place():
    _, hits = _hits([f"+{ATTN}=flash_attention_2"], "V100")
    assert "verl default" not in hits["VI865"].problem.message
    assert hits["VI865"].fix.set == {ATTN: "sdpa"}


def test_an_fsdp_critic_cannot_run_there_whatever_its_attention():
    gae = ["algorithm.adv_estimator=gae", "critic.enable=true", "critic.ppo_micro_batch_size_per_gpu=2",
           f"+{ATTN}=sdpa", f"{R}.dtype=float16"]
    for extra in ([], [f"+{CRITIC_ATTN}=sdpa"]):  # the override is not read for the critic (the oracle below)
        report, hits = _hits([*gae, *extra], "V100")
        [hit] = [f for f in report.findings if f.problem.rule == "VI865"]
        assert hit.problem.keys == ("critic.strategy", CRITIC_ATTN) and "utils/model.py:649, 674" in hit.problem.message
        assert hit.fix is None and "critic-free estimator" in hit.problem.hint
    assert ("is not read for it" in hit.problem.message)  # the second round: sdpa given, and said to be ignored
    assert not _hits([*gae[2:], "algorithm.adv_estimator=grpo", "critic.enable=false"], "V100")[1]


@pytest.mark.verl
def test_verl_loads_the_fsdp_critic_with_flash_attention_whatever_the_config_says(tiny_model, monkeypatch):
    """The oracle: verl's own load_valuehead_model (what the FSDP engine calls for a value model,
    engine/fsdp/transformer_impl.py:291-305) asks transformers for flash_attention_2 with a config that says sdpa."""
    import torch
    from transformers import AutoConfig, AutoModelForTokenClassification

    from verl.utils.model import load_valuehead_model

    asked: list[dict] = []

    def record(*args, **kwargs):
        asked.append(kwargs)
        return "loaded"

    monkeypatch.setattr(AutoModelForTokenClassification, "from_pretrained", record)
    config = AutoConfig.from_pretrained(str(tiny_model), attn_implementation="sdpa")
    assert load_valuehead_model(str(tiny_model), torch.float32, config, False) == "loaded"
    assert asked[0]["attn_implementation"] == "flash_attention_2"


@pytest.mark.verl
def test_a_gae_critic_counts_without_critic_enable():
    """verl runs a critic for adv_estimator=gae when critic.enable is unset (trainer/ppo/utils.py need_critic, the
    oracle here): its flash-attn load is flagged as with critic.enable=true (verl#1633's GAE run on V100)."""
    from omegaconf import OmegaConf

    from verl.trainer.ppo.utils import need_critic

    assert need_critic(OmegaConf.create({"critic": {"enable": None}, "algorithm": {"adv_estimator": "gae"}}))
    gae = ["algorithm.adv_estimator=gae", "critic.ppo_micro_batch_size_per_gpu=2", f"+{ATTN}=sdpa",
           f"{R}.dtype=float16"]
    report, _ = _hits(gae, "V100")
    [hit] = [f for f in report.findings if f.problem.rule == "VI865"]
    assert hit.problem.keys == ("critic.strategy", CRITIC_ATTN)
    grpo = ["algorithm.adv_estimator=grpo", f"+{ATTN}=sdpa", f"{R}.dtype=float16"]
    assert not _hits(grpo, "V100")[1]


def test_megatron_reads_no_attn_implementation():
    """Only the FSDP engines load the model with override_config's attention (workers/config/model.py:185 feeds
    transformers); the Megatron engine builds its own layers: VI865 stays out, VI864 (the rollout) stays."""
    _, hits = _hits([], "V100", config_name="ppo_megatron_trainer")
    assert set(hits) == {"VI864"}
    assert "megatron.dtype=float16" in hits["VI864"].problem.hint and "fsdp_config" not in hits["VI864"].problem.hint


@pytest.mark.verl
@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_the_fix_is_accepted_by_verl_and_leaves_nothing_to_flag():
    report, hits = _hits([], "V100", defaults="verl")
    assert set(hits) == {"VI864", "VI865"}
    fixed, changes = fixed_overrides(report)
    assert len(changes) == 2 and f"{R}.dtype=float16" in fixed and f"+{ATTN}=sdpa" in fixed
    assert not check(None, fixed, gpu_type="V100", defaults="verl").ids("error") & {"VI864", "VI865"}
    verdict = run_verl_checks(load_source(None, [*fixed, "+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp16"]))
    assert verdict.ok, verdict.summary()


# -- the planner ---------------------------------------------------------------------------------------------------

SMALL = dict(nnodes=1, gpus_per_node=4, gpu_memory_gb=32, model="Qwen/Qwen2.5-0.5B-Instruct", dataset="gsm8k",
             prompts_per_step=16, samples_per_prompt=4, updates_per_step=2, max_prompt_length=256,
             max_response_length=256, total_steps=1)
HALF = {f"{R}.dtype": "float16", ATTN: "sdpa", "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype": "fp16"}


def _bundle(tmp_path: Path, name: str, **changes) -> tuple[wizard.Plan, Path]:
    plan = wizard.plan(make_answers({**SMALL, **changes}), base_dir=str(tmp_path))
    return plan, wizard.write_bundle(wizard.render(plan), tmp_path / name)


@pytest.mark.slow
@pytest.mark.verl
def test_a_v100_plan_trains_in_fp16_with_pytorch_attention_and_verl_accepts_it(tmp_path, tiny_model):
    from omegaconf import OmegaConf

    from verl.utils.config import omega_conf_to_dataclass
    from wizard.verify.harness import compose_bundle, verify_with_verl

    plan, bundle = _bundle(tmp_path, "v100", gpu_type="Tesla V100-SXM2-32GB", algorithm="grpo")
    values = {k: it.value for k, it in plan.settings.items()}
    assert HALF.items() <= values.items()
    assert "compute capability 7.0" in plan.settings[f"{R}.dtype"].reason
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, [c.line() for c in report.checks if not c.ok]
    cfg = compose_bundle(bundle)
    engine = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor.fsdp_config)  # verl's own constructor
    assert type(engine).__name__ == "FSDPEngineConfig" and engine.mixed_precision["param_dtype"] == "fp16"
    assert OmegaConf.select(cfg, ATTN) == "sdpa"
    # check (verl-init's own lint of the bundle) agrees; the bf16 it replaced, planted back, is flagged
    assert not check(str(bundle), gpu_type="V100").ids() & {"VI864", "VI865"}
    assert "VI864" in check(str(bundle / "run.sh"), [f"{R}.dtype=bfloat16"], gpu_type="V100").ids("error")


def test_a_ppo_plan_with_an_fsdp_critic_is_refused_on_a_v100_and_planned_with_megatron(tmp_path):
    """VI634: the FSDP critic's flash-attn load (test_verl_loads_the_fsdp_critic_with_flash_attention_... above is
    verl's side) cannot run below compute capability 8.0; the Megatron engine builds its own layers."""
    with pytest.raises(wizard.WizardError) as err:
        _bundle(tmp_path, "v100-ppo", gpu_type="Tesla V100-SXM2-32GB", algorithm="ppo")
    assert "VI634" in str(err.value) and "train_backend=megatron" in str(err.value)
    plan, _ = _bundle(tmp_path, "a100-ppo", gpu_type="A100", algorithm="ppo")  # the control: a card with flash-attn
    assert plan.settings["algorithm.adv_estimator"].value == "gae"


def test_a_card_with_bf16_gets_none_of_it(tmp_path):
    plan, _ = _bundle(tmp_path, "a100", gpu_type="A100")
    assert not {k for k in plan.settings if "mixed_precision" in k or "attn_implementation" in k or k == f"{R}.dtype"}


@pytest.mark.verl
def test_a_megatron_plan_sets_megatrons_own_dtype(tmp_path, tiny_model):
    from wizard.verify.harness import verify_with_verl

    plan, bundle = _bundle(tmp_path, "mg", gpu_type="T4", gpu_memory_gb=16, train_backend="megatron",
                           algorithm="ppo")
    values = {k: it.value for k, it in plan.settings.items()}
    assert values[f"{R}.dtype"] == "float16" and values["actor_rollout_ref.actor.megatron.dtype"] == "float16"
    assert values["critic.megatron.dtype"] == "float16"
    assert not {k for k in values if "attn_implementation" in k or "mixed_precision" in k}
    report = verify_with_verl(bundle, model_dir=str(tiny_model))
    assert report.ok, [c.line() for c in report.checks if not c.ok]


@pytest.mark.verl
def test_verls_key_check_reads_mapping_fields_from_the_dataclass(tmp_path):
    """FSDPEngineConfig.mixed_precision is Optional[dict] in verl's dataclass and absent from its YAML: its keys pass
    the key check; a misspelt field does not."""
    from wizard.verify.harness import _unknown_keys

    _, bundle = _bundle(tmp_path, "k", gpu_type="V100")
    _unknown_keys(bundle, "verl_config")
    text = (bundle / "verl_config.yaml").read_text(encoding="utf-8")
    (bundle / "verl_config.yaml").write_text(text.replace("mixed_precision:", "mixed_precison:", 1), encoding="utf-8")
    with pytest.raises(KeyError, match="mixed_precison"):
        _unknown_keys(bundle, "verl_config")


@pytest.mark.verl
@pytest.mark.slow
def test_verls_engine_workers_run_the_v100_plan(tmp_path, capsys):
    """verl's own FSDP engine workers (on the CPU) build the actor with the plan's fp16 mixed precision and sdpa,
    and run the log-prob passes and an update with it."""
    from wizard.cli.app import main
    from wizard.smoketest.tiny import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "weights", weights=True)
    plan = wizard.plan(make_answers(dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=16, gpu_type="Tesla V100-SXM2-16GB",
                                         model="./tiny-model", model_params_b=0.001, dataset="gsm8k",
                                         max_prompt_length=128, max_response_length=64, prompts_per_step=8,
                                         samples_per_prompt=4, updates_per_step=2, total_steps=1, save_freq=-1,
                                         test_freq=-1)), base_dir=str(tmp_path))
    assert plan.settings["actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype"].value == "fp16"
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    rc = main(["smoke", str(bundle), "--engine", "verl-workers", "--device", "cpu", "--model-dir", str(model_dir),
               "--steps", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["ok"], out.get("failure")
    assert {p["name"] for p in out["phases"] if p["status"] == "ok"} >= {"old_log_prob", "update_actor"}
