"""VI990: FP8 rollout at a TP size whose row-parallel slices are not whole 128×128 blocks (real cases vllm#52997 and
verl#6112: Qwen2.5-14B at rollout TP 8; the same error is vLLM's well-known refusal of Qwen3-30B-A3B FP8 at TP 4).

Two independent sources: verl's own source (installed) asks the engine for weight_block_size [128, 128]; vLLM's
check, written out below from model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape (row
parallel: tp_size > 1 and input_size_per_partition % block_k != 0 raises) and Fp8MoEMethod.create_weights (the
experts' intermediate_size_per_partition % block_n), applied to the sizes in each model's own config.json, written
out here. vLLM is not installed on this machine, so its rule is read, not run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.quant import BLOCK

R = "actor_rollout_ref.rollout"
# config.json values (Hugging Face): Qwen2.5-14B-Instruct and Qwen3-30B-A3B
QWEN25_14B = {"num_attention_heads": 40, "head_dim": 5120 // 40, "intermediate_size": 13824}
QWEN3_30B = {"num_attention_heads": 32, "head_dim": 128, "moe_intermediate_size": 768}


def vllm_refuses(block: int, tp: int, rows: list[int], experts: int = 0, ep: bool = False) -> bool:
    """vLLM's own conditions at load time, per row-parallel input size and per expert intermediate size."""
    if tp > 1 and any((size // tp) % block for size in rows):
        return True
    per_rank = experts if ep else experts // tp
    return bool(experts) and per_rank % block != 0


@pytest.mark.verl
def test_verl_asks_for_128_blocks():
    import verl

    text = (Path(verl.__file__).parent / "workers/rollout/vllm_rollout/vllm_async_server.py").read_text(encoding="utf-8")
    fp8 = text[text.index('if quantization == "fp8":'):]
    assert re.search(r'"weight_block_size":\s*\[(\d+),\s*(\d+)\]', fp8).groups() == (str(BLOCK), str(BLOCK))


def _vi990(model: str, tp: int, *extra: str):
    report = check(None, ["algorithm.adv_estimator=grpo", f"actor_rollout_ref.model.path={model}", f"{R}.name=vllm",
                          f"{R}.quantization=fp8", "trainer.n_gpus_per_node=8", f"{R}.tensor_model_parallel_size={tp}",
                          *extra])
    return [f.problem for f in report.findings if f.problem.rule == "VI990"]


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_dense_model_matches_vllms_rule(tp):
    m = QWEN25_14B
    rows = [m["num_attention_heads"] * m["head_dim"], m["intermediate_size"]]
    assert bool(_vi990("Qwen/Qwen2.5-14B-Instruct", tp)) == vllm_refuses(128, tp, rows)
    if tp == 8:
        [hit] = _vi990("Qwen/Qwen2.5-14B-Instruct", tp)
        assert "1728" in hit.message and "2 or 4" in hit.hint


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_moe_model_matches_vllms_rule(tp):
    m = QWEN3_30B
    rows = [m["num_attention_heads"] * m["head_dim"]]
    assert bool(_vi990("Qwen/Qwen3-30B-A3B", tp)) == vllm_refuses(128, tp, rows, m["moe_intermediate_size"])


def test_expert_parallel_keeps_whole_experts():
    # EP: each rank holds whole experts (768 = 6 blocks), so only the attention rows split over TP
    assert not _vi990("Qwen/Qwen3-30B-A3B", 4, f"{R}.expert_parallel_size=4")
    assert not vllm_refuses(128, 4, [32 * 128], 768, ep=True)


def test_no_fp8_no_finding():
    report = check(None, ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-14B-Instruct",
                          f"{R}.name=vllm", "trainer.n_gpus_per_node=8", f"{R}.tensor_model_parallel_size=8"])
    assert "VI990" not in report.ids()
