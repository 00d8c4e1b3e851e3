"""A MoE rollout verl 0.9.1 cannot serve (round 96):

- VI430: a bf16 MoE model on vLLM on an SM100-family card (B200/GB200/B300) with vLLM's MoE backend left on auto:
  verl's checkpoint-format weight sync meets the FlashInfer TRT-LLM backend's 4-D expert layout and fails at the first
  sync (verl#7978).
- VI431: rollout.moe_load_balance_metrics_interval > 0 where verl gets no routed experts to count (the rollout capture
  off, or the legacy trainer): no rollout/moe/* metric appears (verl PR#6853).

The oracle is verl's own source and code: the table scripts/verl_moe_rollout.py writes regenerates unchanged, the
lines it cites hold the code the findings describe, verl's RolloutConfig accepts both planted faults (nothing stops
them before the workers), and verl's own metric functions, run here on CPU, return no load-balance metric when the
batch has no routed_experts and a full set when it has them.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers_scripts import regenerated

from wizard.check.lint import check

SPEC = importlib.util.find_spec("verl")
VERL = Path(SPEC.origin).parent if SPEC and SPEC.origin else None
DATA = Path(__file__).resolve().parent.parent / "wizard" / "check" / "data"
M, R = "actor_rollout_ref.model", "actor_rollout_ref.rollout"
BACKEND = f"{R}.engine_kwargs.vllm.moe_backend"
INTERVAL = f"{R}.moe_load_balance_metrics_interval"
CAPTURE = f"{R}.enable_rollout_routing_replay"
BASE = ["algorithm.adv_estimator=grpo", "data.train_files=/d/train.parquet", "data.val_files=/d/val.parquet",
        f"{R}.name=vllm", f"{R}.n=4", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "data.train_batch_size=16", "trainer.nnodes=1",
        "trainer.n_gpus_per_node=8", f"{R}.tensor_model_parallel_size=2"]
MOE = f"{M}.path=Qwen/Qwen3-30B-A3B"


def _table() -> dict:
    return json.loads((DATA / "verl_moe_rollout.json").read_text(encoding="utf-8"))


def _src(rel: str) -> list[str]:
    assert VERL is not None
    return (VERL / rel).read_text(encoding="utf-8").splitlines()


def _hits(rule: str, *extra: str, gpu_type: str | None = None, base: list[str] = BASE):
    hw = {"gpu_type": gpu_type} if gpu_type else {}
    report = check(None, [*base, *extra], defaults="snapshot", env={"HOME": "/nonexistent-home"}, **hw)
    return [f.problem for f in report.findings if f.problem.rule == rule]


def _moe_folder(tmp_path: Path, experts: int) -> Path:
    """A tiny local Qwen3-MoE config (experts=0: a dense Qwen3 of the same size)."""
    cfg = {"model_type": "qwen3_moe" if experts else "qwen3", "hidden_size": 512, "intermediate_size": 1024,
           "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
           "vocab_size": 151936, "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}
    if experts:
        cfg.update(num_experts=experts, num_experts_per_tok=2, moe_intermediate_size=256)
    folder = tmp_path / f"m{experts}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return folder


@pytest.mark.verl
def test_the_table_is_verls_source():
    if VERL is None:
        pytest.skip("verl is not installed")
    assert regenerated("verl_moe_rollout") == (DATA / "verl_moe_rollout.json").read_text(encoding="utf-8")


@pytest.mark.verl
def test_the_cited_lines_hold_the_code_the_findings_describe():
    if VERL is None:
        pytest.skip("verl is not installed")
    lines = _table()["lines"]
    (rel, n), = lines["sync_load_weights"].items()
    assert "model.load_weights(param_updates)" in _src(rel)[n - 1]
    (rel, n), = lines["delta_sharded_forces_triton"].items()
    assert _src(rel)[n - 1].strip() == 'engine_kwargs["moe_backend"] = "triton"'
    assert "is_moe_model(self.model_config.hf_config)" in "\n".join(_src(rel)[n - 8:n])
    for rel, n in lines["rollout_capture"].items():
        assert "enable_return_routed_experts" in _src(rel)[n - 1]
        assert "enable_rollout_routing_replay" in "\n".join(_src(rel)[n - 15:n])
    (rel, n), = lines["metrics_skip_without_routes"].items()
    assert "missing_routed_experts" in _src(rel)[n - 1]
    defaults = _table()["rollout_defaults"]
    assert defaults["moe_load_balance_metrics_interval"]["default"] == 0
    assert defaults["enable_rollout_routing_replay"]["default"] is False and defaults["quantization"]["default"] is None
    assert _table()["vllm_pin"]["spec"].startswith("vllm==")


@pytest.mark.verl
def test_verls_rollout_config_accepts_both_faults():
    if VERL is None:
        pytest.skip("verl is not installed")
    from verl.workers.config.rollout import RolloutConfig

    cfg = RolloutConfig(name="vllm", moe_load_balance_metrics_interval=10, enable_rollout_routing_replay=False,
                        engine_kwargs={"vllm": {}})
    assert cfg.moe_load_balance_metrics_interval == 10 and cfg.enable_rollout_routing_replay is False


@pytest.mark.verl
def test_verls_metrics_are_empty_without_routed_experts():
    """verl's own metric path on CPU: the batch without routed_experts (the capture off) yields no load-balance
    metric; the same batch with them yields verl's rollout/moe/*_vio metrics."""
    if VERL is None:
        pytest.skip("verl is not installed")
    torch = pytest.importorskip("torch")
    from verl.trainer.ppo.metric_utils import (RolloutMoELoadBalanceMetricsAccumulator,
                                               compute_moe_lb_metrics,
                                               get_metric_data_with_optional_routed_experts)

    asked: list[list[str]] = []

    def kv_batch_get(keys, partition_id, select_fields):  # a transfer queue whose rollout wrote no routes
        asked.append(list(select_fields))
        if "routed_experts" in select_fields:
            raise ValueError("field routed_experts not found in the partition")
        return {f: None for f in select_fields}

    acc = RolloutMoELoadBalanceMetricsAccumulator(model_config=SimpleNamespace(hf_config=SimpleNamespace(num_experts=8)))
    data = get_metric_data_with_optional_routed_experts(
        keys=["k"], partition_id="p", fields=["responses", "response_mask"], moe_lb_metrics_interval=10,
        global_steps=10, accumulator=acc, kv_batch_get=kv_batch_get)
    assert "routed_experts" not in data and asked[0][-1] == "routed_experts"
    mask = torch.ones(2, 4, dtype=torch.long)
    empty = compute_moe_lb_metrics(SimpleNamespace(batch={"response_mask": mask}), 10, 10, acc)
    assert not [k for k in empty if "_vio/" in k]
    acc2 = RolloutMoELoadBalanceMetricsAccumulator(model_config=SimpleNamespace(hf_config=SimpleNamespace(num_experts=8)))
    routes = torch.randint(0, 8, (2, 4, 2, 2))
    full = compute_moe_lb_metrics(SimpleNamespace(batch={"response_mask": mask, "routed_experts": routes}), 10, 10, acc2)
    assert [k for k in full if "_vio/" in k]


@pytest.mark.parametrize("gpu", ["B200", "NVIDIA GB200", "B300"])
def test_bf16_moe_vllm_on_sm100_with_auto_backend_is_a_warning(gpu):
    hits = _hits("VI430", MOE, gpu_type=gpu)
    assert [(h.severity, h.keys) for h in hits] == [("warning", (f"{M}.path", BACKEND))]
    assert "moe_backend=triton" in hits[0].hint and "verl#7978" in hits[0].message
    assert _hits("VI430", MOE, f"++{BACKEND}=flashinfer_trtllm", gpu_type=gpu)  # a named non-triton backend too


def test_a_local_moe_config_is_read(tmp_path):
    assert _hits("VI430", f"{M}.path={_moe_folder(tmp_path, 8)}", gpu_type="B200")
    assert not _hits("VI430", f"{M}.path={_moe_folder(tmp_path, 0)}", gpu_type="B200")


@pytest.mark.parametrize("extra, gpu", [
    ([MOE, f"++{BACKEND}=triton"], "B200"),                          # the fix
    ([MOE, f"{R}.quantization=fp8"], "B200"),                         # FP8 rollout: another load path
    ([MOE, f"{R}.checkpoint_engine.backend=delta_sharded"], "B200"),  # verl forces triton itself
    ([MOE, f"{R}.name=sglang"], "B200"),
    ([MOE], "H100"), ([MOE], "RTX 5090"), ([MOE], None),               # not SM100, or the card unknown
    ([f"{M}.path=Qwen/Qwen2.5-7B-Instruct"], "B200"),                 # a dense model
])
def test_vi430_controls_stay_clean(extra, gpu):
    assert not _hits("VI430", *extra, gpu_type=gpu)


def test_metrics_interval_without_the_capture_is_a_warning():
    hits = _hits("VI431", f"{INTERVAL}=10")
    assert [(h.severity, h.keys) for h in hits] == [("warning", (INTERVAL, CAPTURE))]
    assert "metric_utils.py" in hits[0].message


def test_metrics_interval_on_the_legacy_trainer_is_a_warning():
    hits = _hits("VI431", f"{INTERVAL}=10", f"{CAPTURE}=True", "trainer.use_v1=False")
    assert [h.keys for h in hits] == [(INTERVAL, "trainer.use_v1")]


@pytest.mark.parametrize("extra", [[f"{INTERVAL}=10", f"{CAPTURE}=True"], [f"{INTERVAL}=0"], []])
def test_vi431_controls_stay_clean(extra):
    assert not _hits("VI431", *extra)


def test_a_capture_for_the_metrics_is_not_a_capture_nothing_uses():
    """VI728 (rules/router_replay.py) stays quiet when the routes feed the load-balance metrics."""
    assert _hits("VI728", f"{CAPTURE}=True")
    assert not _hits("VI728", f"{CAPTURE}=True", f"{INTERVAL}=10")
