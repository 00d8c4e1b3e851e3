"""VI613 / VI614: training precision names verl does not know, and a rollout in the other 16-bit format than the
actor trains in (held-out round 49: yaof20/Flash-RL#39, a public script of the verl PR#4036 class). The oracles are
verl's own code, run on the CPU:
- VI613: verl's PrecisionType.to_dtype on the planted names, and the FSDP engine's _build_module raising on the
  planted model_dtype before it touches anything else (scripts/verl_precision_names.py builds the table check reads
  from verl's own lists);
- VI614: verl's Hydra tree composed into RolloutConfig (the dtype verl hands the rollout engine) and the FSDP
  engine's own _build_fsdp_module resolving the actor's compute dtype (torch's MixedPrecision stubbed to record it).
"""

from __future__ import annotations

import os
import types

import pytest

from wizard.check.lint import check
from wizard.check.rules.dtypes import dtype_of, precision_table

A = "actor_rollout_ref.actor"
R = "actor_rollout_ref.rollout"
REF = "actor_rollout_ref.ref"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "data.train_batch_size=16", f"{A}.ppo_mini_batch_size=8", f"{R}.n=4", f"{A}.use_dynamic_bsz=True",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=2", f"{R}.tensor_model_parallel_size=1", f"{R}.name=vllm",
        f"{A}.optim.lr=1e-6"]
MEGATRON = "ppo_megatron_trainer"
FP16_MIXED = f"+{A}.fsdp_config.mixed_precision.param_dtype=fp16"


def _hits(rule: str, *extra: str, config: str | None = None):
    report = check(None, [*BASE, *extra], config_name=config)
    return [f for f in report.findings if f.problem.rule == rule]


def _compose(*overrides: str, config: str = "ppo_trainer"):
    import verl
    from hydra import compose, initialize_config_dir

    cfgdir = os.path.join(os.path.dirname(verl.__file__), "trainer/config")
    with initialize_config_dir(config_dir=cfgdir, version_base=None):
        return compose(config_name=config, overrides=list(overrides))


# --- the table and its oracle ---------------------------------------------------------------------------------------

@pytest.mark.verl
def test_regenerating_the_precision_table_gives_the_committed_one():
    from pathlib import Path

    from helpers_scripts import regenerated

    data = Path(__file__).resolve().parent.parent / "wizard" / "check" / "data" / "verl_precision_names.json"
    assert regenerated("verl_precision_names") == data.read_text(encoding="utf-8")


@pytest.mark.verl
@pytest.mark.parametrize("name", ["int8", "fp8", "BF16", "half", "float", "bfloat"])
def test_verl_raises_on_the_names_the_rule_flags(name):
    from verl.utils.torch_dtypes import PrecisionType

    assert dtype_of(name) is None
    with pytest.raises(RuntimeError, match="unexpected precision"):
        PrecisionType.to_dtype(name)


@pytest.mark.verl
def test_verl_accepts_every_name_of_the_table():
    import torch
    from verl.utils.torch_dtypes import PrecisionType

    want = {"fp16": torch.float16, "fp32": torch.float32, "bf16": torch.bfloat16}
    for dtype, names in precision_table()["names"].items():
        assert names and all(PrecisionType.to_dtype(n) == want[dtype] and dtype_of(n) == dtype for n in names)


@pytest.mark.verl
def test_the_fsdp_engine_raises_on_int8_model_dtype_before_it_loads_anything():
    """verl's own _build_module with only an engine config: int8 stops it at to_dtype (Flash-RL#39's error); bf16
    passes that line and fails only later, on the stub's missing model config."""
    from verl.workers.engine.fsdp import transformer_impl as ti

    def build(model_dtype: str) -> BaseException:
        stub = types.SimpleNamespace(engine_config=types.SimpleNamespace(model_dtype=model_dtype, forward_only=False))
        with pytest.raises(Exception) as caught:
            ti.FSDPEngine._build_module(stub)
        return caught.value

    err = build("int8")
    assert isinstance(err, RuntimeError) and "unexpected precision: int8" in str(err)
    assert "unexpected precision" not in str(build("bf16"))


# --- VI613 ----------------------------------------------------------------------------------------------------------

def test_vi613_flags_an_unknown_model_dtype_and_not_a_known_one():
    hits = _hits("VI613", f"{A}.fsdp_config.model_dtype=int8")
    assert len(hits) == 1 and hits[0].problem.severity == "error" and hits[0].fix is None
    assert "int8" in hits[0].problem.message and "transformer_impl.py:264" in hits[0].problem.message
    for ok in ("bf16", "bfloat16", "fp32", "float16", "32"):
        assert not _hits("VI613", f"{A}.fsdp_config.model_dtype={ok}"), ok


def test_vi613_fixes_an_upper_case_mixed_precision_name():
    hits = _hits("VI613", f"+{A}.fsdp_config.mixed_precision.param_dtype=BF16")
    assert len(hits) == 1 and hits[0].fix is not None
    assert hits[0].fix.set == {f"{A}.fsdp_config.mixed_precision.param_dtype": "bf16"}
    assert hits[0].fix.plus == [f"{A}.fsdp_config.mixed_precision.param_dtype"]
    assert not _hits("VI613", f"+{A}.fsdp_config.mixed_precision.param_dtype=bf16")


def test_vi613_reads_the_reference_only_when_it_runs_outside_the_actor():
    planted = f"{REF}.fsdp_config.model_dtype=int8"
    assert not _hits("VI613", planted)  # no KL term: verl builds no reference
    assert _hits("VI613", planted, f"{A}.use_kl_loss=True")
    # a LoRA rank puts the reference in the actor's engine (trainer/ppo/v1/trainer_base.py:234-237)
    assert not _hits("VI613", planted, f"{A}.use_kl_loss=True", "actor_rollout_ref.model.lora_rank=8")


@pytest.mark.verl
def test_lora_puts_the_reference_in_the_actor_in_verls_trainer():
    from helpers_verl import verl_root

    source = (verl_root() / "trainer" / "ppo" / "v1" / "trainer_base.py").read_text(encoding="utf-8")
    assert "self.ref_in_actor = lora_rank > 0" in source


def test_vi613_reads_megatron_dtype_on_the_megatron_engine():
    assert _hits("VI613", f"{A}.megatron.dtype=fp8", config=MEGATRON)
    assert not _hits("VI613", f"{A}.megatron.dtype=float16", config=MEGATRON)


def test_vi613_reads_the_sft_engine(tmp_path):
    script = tmp_path / "sft.sh"
    script.write_text("#!/bin/bash\ntorchrun --nproc_per_node=2 -m verl.trainer.sft_trainer \\\n"
                      "  model.path=Qwen/Qwen2.5-0.5B-Instruct data.messages_key=messages optim.lr=1e-5 \\\n"
                      "  trainer.logger=[console] engine.model_dtype={}\n")
    for value, flagged in (("int8", True), ("bf16", False)):
        script.write_text(script.read_text().rsplit("=", 1)[0] + f"={value}\n")
        assert ("VI613" in check(str(script)).ids()) is flagged, value


# --- VI614 ----------------------------------------------------------------------------------------------------------

@pytest.mark.verl
def test_verl_rolls_out_in_fp16_and_trains_in_bf16_when_only_the_rollout_is_set(monkeypatch):
    import torch
    import torch.distributed.fsdp as fsdp
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.engine.fsdp import transformer_impl as ti

    class Resolved(Exception):
        pass

    def record(param_dtype=None, **_):
        raise Resolved(param_dtype)

    monkeypatch.setattr(fsdp, "MixedPrecision", record)

    def compute_dtype(cfg):
        stub = types.SimpleNamespace(engine_config=omega_conf_to_dataclass(cfg.actor_rollout_ref.actor.fsdp_config))
        with pytest.raises(Resolved) as caught:
            ti.FSDPEngine._build_fsdp_module(stub, None)
        return caught.value.args[0]

    planted = _compose(f"{R}.dtype=float16", f"{R}.name=vllm")
    assert omega_conf_to_dataclass(planted.actor_rollout_ref.rollout).dtype == "float16"  # vllm_async_server.py:326
    assert compute_dtype(planted) == torch.bfloat16
    assert compute_dtype(_compose(f"{R}.dtype=float16", f"{R}.name=vllm", FP16_MIXED)) == torch.float16


def test_vi614_flags_an_fp16_rollout_of_a_bf16_actor():
    hits = _hits("VI614", f"{R}.dtype=float16")
    assert len(hits) == 1 and hits[0].problem.severity == "warning"
    msg, hint = hits[0].problem.message, hits[0].problem.hint
    assert "rollout.dtype=float16" in msg and "bf16" in msg and "unset" in msg
    assert "rollout.dtype=bfloat16" in hint and FP16_MIXED in hint


def test_vi614_names_the_override_that_does_not_change_the_compute_dtype():
    override = "+actor_rollout_ref.model.override_config={attn_implementation:eager,torch_dtype:float16}"
    msg = _hits("VI614", f"{R}.dtype=float16", override)[0].problem.message
    assert "override_config.torch_dtype=float16 only edits the HF config" in msg


def test_vi614_stays_quiet_when_both_sides_agree():
    assert not _hits("VI614")  # verl's defaults: bf16 on both sides
    assert not _hits("VI614", f"{R}.dtype=float16", FP16_MIXED, f"+{REF}.fsdp_config.mixed_precision.param_dtype=fp16")
    assert not _hits("VI614", f"+{A}.fsdp_config.mixed_precision.param_dtype=fp32")  # fp32 training: not this class


def test_vi614_flags_a_bf16_rollout_of_an_fp16_actor():
    hits = _hits("VI614", FP16_MIXED)
    assert len(hits) == 1 and "rollout.dtype=bfloat16" in hits[0].problem.message
    assert "rollout.dtype=float16" in hits[0].problem.hint


def test_vi614_reads_megatron_dtype():
    assert _hits("VI614", f"{R}.dtype=float16", config=MEGATRON)
    assert not _hits("VI614", f"{R}.dtype=float16", f"{A}.megatron.dtype=float16", config=MEGATRON)
