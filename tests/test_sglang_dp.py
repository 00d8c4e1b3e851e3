"""SGLang rollout data parallel (real case: verl PR#7784): check's VI913, the plan's DP attention, and no vLLM-only
layout assert applied to SGLang (VI810 named vllm_async_server.py's DP rule for an SGLang run before).

Oracles: verl's SGLang server arguments are read from verl's source (tp_size = TP × DP, dp_size = DP), and SGLang's
launch of DP groups is the arithmetic of its DataParallelController.launch_dp_schedulers written out below
(sglang/srt/managers/data_parallel_controller.py: without DP attention, dp_size groups of tp_size × pp_size GPUs,
each starting tp_size × pp_size GPUs after the last; with it, one group of tp_size GPUs). SGLang is not installed
here.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from wizard import plan
from wizard.check.lint import check
from wizard.intent.answers import make_answers

SPEC = importlib.util.find_spec("verl")
VERL = Path(SPEC.origin).parent if SPEC and SPEC.origin else None
R = "actor_rollout_ref.rollout"
DPA = f"{R}.engine_kwargs.sglang.enable_dp_attention"


def sglang_gpus(tp_size: int, dp_size: int, dp_attention: bool, pp_size: int = 1) -> int:
    """GPUs SGLang's DataParallelController launches schedulers on (launch_dp_schedulers / launch_dp_attention_
    schedulers)."""
    return tp_size * pp_size if dp_attention else dp_size * tp_size * pp_size


def _server_args() -> dict[str, str]:
    """The tp_size / dp_size expressions verl's SGLang server passes (async_sglang_server.py)."""
    tree = ast.parse((VERL / "workers/rollout/sglang_rollout/async_sglang_server.py").read_text(encoding="utf-8"))
    infer = next(ast.unparse(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and any(getattr(t, "id", "") == "infer_tp" for t in n.targets))
    args = next(n for n in ast.walk(tree) if isinstance(n, ast.Dict)
                and any(isinstance(k, ast.Constant) and k.value == "tp_size" for k in n.keys))
    out = {k.value: ast.unparse(v) for k, v in zip(args.keys, args.values) if isinstance(k, ast.Constant)}
    return {"infer_tp": infer, **out}


def _findings(*extra: str, gpus: int = 8) -> list:
    report = check(None, ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
                          "data.train_files=/d/t.parquet", "data.val_files=/d/v.parquet", f"{R}.n=4",
                          "actor_rollout_ref.actor.use_dynamic_bsz=True", f"trainer.n_gpus_per_node={gpus}",
                          "trainer.nnodes=1", *extra], defaults="snapshot", env={"HOME": "/nonexistent-home"})
    return [f for f in report.findings if f.problem.rule in ("VI810", "VI913")]


@pytest.mark.parametrize("tp,dp", [(2, 2), (4, 2), (1, 4)])
def test_sglang_dp_without_dp_attention_asks_for_more_gpus_than_the_replica(tp, dp):
    if VERL is None:
        pytest.skip("verl is not installed")
    args = _server_args()
    assert args["infer_tp"] == "self.config.tensor_model_parallel_size * self.config.data_parallel_size"
    assert args["tp_size"] == "infer_tp" and args["dp_size"] == "self.config.data_parallel_size"
    replica = tp * dp
    assert sglang_gpus(replica, dp, dp_attention=False) > replica == sglang_gpus(replica, dp, dp_attention=True)
    found = _findings(f"{R}.name=sglang", f"{R}.tensor_model_parallel_size={tp}", f"{R}.data_parallel_size={dp}")
    assert [(f.problem.rule, f.problem.severity) for f in found] == [("VI913", "error")]
    assert f"{sglang_gpus(replica, dp, False)} GPUs" in found[0].problem.message
    assert _findings(f"{R}.name=sglang", f"{R}.tensor_model_parallel_size={tp}", f"{R}.data_parallel_size={dp}",
                     f"+{DPA}=true") == []


def test_vllms_dp_assert_is_not_sglangs():
    """TP 2 × DP 2 on 8 GPUs: vLLM's server asserts a DP replica fills its node (vllm_async_server.py:384-392);
    SGLang's server has no such rule."""
    if VERL is None:
        pytest.skip("verl is not installed")
    rollout = VERL / "workers/rollout"
    assert "data_parallel_size_local" in (rollout / "vllm_rollout/vllm_async_server.py").read_text(encoding="utf-8")
    assert "data_parallel_size_local" not in (rollout / "sglang_rollout/async_sglang_server.py").read_text(encoding="utf-8")
    layout = [f"{R}.tensor_model_parallel_size=2", f"{R}.data_parallel_size=2"]
    assert [f.problem.rule for f in _findings(f"{R}.name=vllm", *layout)] == ["VI810"]
    assert _findings(f"{R}.name=sglang", *layout, f"+{DPA}=true") == []


def test_dp_1_needs_nothing():
    assert _findings(f"{R}.name=sglang", f"{R}.tensor_model_parallel_size=2") == []


def test_a_moe_plan_with_sglang_dp_turns_dp_attention_on_and_checks_clean(tmp_path):
    import wizard

    p = plan(make_answers(dict(model="Qwen/Qwen3-30B-A3B", train_backend="megatron", nnodes=1, gpus_per_node=8,
                               gpu_memory_gb=96, gpu_type="H20", max_prompt_length=1024, max_response_length=2048,
                               prompts_per_step=128, samples_per_prompt=8, updates_per_step=4,
                               rollout_engine="sglang", rollout_dp=2)), base_dir=str(tmp_path))
    assert p.value(f"{R}.data_parallel_size") == 2 and p.value(DPA) is True
    bundle = wizard.write_bundle(wizard.render(p), tmp_path / "b")
    report = check(str(bundle), defaults="snapshot")
    assert not [f.problem.line() for f in report.findings if f.problem.rule in ("VI913", "VI801", "VI802")]
    # and without DP the plan writes no DP attention
    p1 = plan(make_answers(dict(model="Qwen/Qwen2.5-7B-Instruct", nnodes=1, gpus_per_node=8, gpu_memory_gb=80,
                                rollout_engine="sglang")), base_dir=str(tmp_path))
    assert DPA not in p1.settings
