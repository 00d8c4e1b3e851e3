"""VI931: LoRA adapters synced from an FSDP2 actor under offload_policy (held-out case R80-03, verl#5390).

Oracle: verl 0.9.1's own source, read with ast. The rule rests on four facts of that code; if verl changes any of
them (e.g. stages the LoRA shards to the GPU), these tests fail and the rule must be revisited.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from wizard.check.lint import check

M, A, R = "actor_rollout_ref.model", "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
POLICY = f"{A}.fsdp_config.offload_policy"


def _functions(relpath: str) -> dict[str, str]:
    import verl

    path = Path(verl.__file__).parent / relpath
    text = path.read_text()
    return {n.name: ast.get_source_segment(text, n) or "" for n in ast.walk(ast.parse(text))
            if isinstance(n, ast.FunctionDef)}


@pytest.mark.verl
def test_verl_gathers_lora_shards_where_the_offload_policy_left_them():
    engine = _functions("workers/engine/fsdp/transformer_impl.py")
    utils = _functions("utils/fsdp_utils.py")
    # 1. offload_policy (fsdp2 branch) puts the shards under CPUOffloadPolicy and sets the flag
    init = next(src for src in engine.values() if "CPUOffloadPolicy(pin_memory=True)" in src)
    assert 'strategy == "fsdp2"' in init and "self._uses_fsdp2_cpu_offload_policy = True" in init
    # 2. the sync skips the load to GPU under that flag and sends non-merged LoRA to collect_lora_params
    sync = engine["get_per_tensor_param"]
    assert "if not self._uses_fsdp2_cpu_offload_policy and not _skip_staging" in sync
    assert "collect_lora_params(" in sync
    # 3. the LoRA collectors all-gather with full_tensor() and never move a shard to the device first
    for name in ("collect_lora_params", "layered_summon_lora_params"):
        src = utils[name]
        assert "param.full_tensor()" in src and ".to(device" not in src and "get_device_id" not in src, name
    # 4. the non-LoRA path does stage each shard for exactly this case
    assert "param.to(device, non_blocking=True).full_tensor()" in sync


def _hits(*overrides: str) -> list:
    report = check(None, [f"{R}.name=vllm", *overrides])
    return [f.problem for f in report.findings if f.problem.rule == "VI931"]


@pytest.mark.verl
def test_offload_policy_with_lora_adapters_warns():
    # the planted fault: verl#5390's launch (fsdp2, offload_policy, LoRA, layered_summon)
    [hit] = _hits(f"{A}.strategy=fsdp2", f"{POLICY}=True", f"{M}.lora_rank=64", f"{M}.lora_alpha=128",
                  f"{R}.load_format=safetensors", f"{R}.layered_summon=True")
    assert hit.severity == "warning" and POLICY in hit.keys and "verl#5390" in hit.message
    # without layered_summon the collector gathers the same CPU shards
    assert _hits(f"{A}.strategy=fsdp2", f"{POLICY}=True", f"{M}.lora_rank=8")


@pytest.mark.verl
def test_controls_stay_clean():
    # param_offload: verl loads the shards to the GPU before the sync
    assert not _hits(f"{A}.strategy=fsdp2", f"{A}.fsdp_config.param_offload=True", f"{M}.lora_rank=64")
    # merged adapters, no LoRA, FSDP1 (offload_policy not read there: VI917's case)
    assert not _hits(f"{A}.strategy=fsdp2", f"{POLICY}=True", f"{M}.lora_rank=64", f"{M}.lora.merge=True")
    assert not _hits(f"{A}.strategy=fsdp2", f"{POLICY}=True")
    assert not _hits(f"{A}.strategy=fsdp", f"{POLICY}=True", f"{M}.lora_rank=64")
