"""VI907 on verl's SFT trainers: Ulysses sequence parallel (engine.ulysses_sequence_parallel_size > 1) on a Gated
DeltaNet model (real case R47-02, verl#6486: Qwen3.5 SFT with SP 8). The PPO actor's rule, extended: both trainers
build the FSDP engine, whose apply_monkey_patch (workers/engine/fsdp/transformer_impl.py:324-330) routes Qwen3.5's
linear-attention layers through verl's forward that splits them with flash-linear-attention's context-parallel
kernels.

The oracles are verl's own code on the CPU: its packed chunk_gated_delta_rule raises NotImplementedError for an SP
context when the kernel takes no cp_context (models/transformers/qwen3_5.py:168-172), and its FSDP engine config
takes the SP size without a word, so nothing stops the launch before the workers run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_check_sft_parallel import ARGS, _bash_or_skip, _findings, _rows, _script
from wizard.check.lint import check

LAUNCH = "torchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer"
SP = "engine.ulysses_sequence_parallel_size"


def _kernel(takes_cp_context: bool):
    calls = []

    def with_cp(query, key, value, g=None, beta=None, initial_state=None, output_final_state=False,
                use_qk_l2norm_in_kernel=True, cp_context=None):
        calls.append(cp_context)
        return query, None

    def without_cp(query, key, value, g=None, beta=None, initial_state=None, output_final_state=False,
                   use_qk_l2norm_in_kernel=True, cu_seqlens=None):
        calls.append(cu_seqlens)
        return query, None

    return (with_cp if takes_cp_context else without_cp), calls


@pytest.mark.verl
def test_verl_raises_inside_the_workers_for_an_sp_split_without_flas_cp_kernel():
    """verl's own packed GDN kernel call: with an SP context (what Ulysses SP > 1 builds, qwen3_5.py:92-108, 223) and
    a chunk_gated_delta_rule without cp_context it raises NotImplementedError; with cp_context it runs; SP 1 (no
    context) needs neither. And verl's FSDP engine config accepts SP 8 for any model: no config-time check."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("verl")
    from types import SimpleNamespace

    from verl.models.transformers.qwen3_5 import _packed_chunk_gated_delta_rule
    from verl.workers.config import FSDPEngineConfig

    x, cu = torch.zeros(1, 4, 2, 8), torch.tensor([0, 4])
    kernel, calls = _kernel(takes_cp_context=False)
    with pytest.raises(NotImplementedError, match="cp_context"):
        _packed_chunk_gated_delta_rule(SimpleNamespace(chunk_gated_delta_rule=kernel), x, x, x, x, x, cu, None,
                                       cp_context=object())
    _packed_chunk_gated_delta_rule(SimpleNamespace(chunk_gated_delta_rule=kernel), x, x, x, x, x, cu, None)
    assert len(calls) == 1  # SP 1: the varlen call, no context needed
    kernel, calls = _kernel(takes_cp_context=True)
    marker = object()
    _packed_chunk_gated_delta_rule(SimpleNamespace(chunk_gated_delta_rule=kernel), x, x, x, x, x, cu, None,
                                   cp_context=marker)
    assert calls == [marker]
    assert FSDPEngineConfig(ulysses_sequence_parallel_size=8).ulysses_sequence_parallel_size == 8


def _sft(tmp_path: Path, model: str, sp: int):
    return check(_script(tmp_path, LAUNCH, *ARGS, f"data.train_files={_rows(tmp_path / 'train.parquet', 64)}",
                         f"model.path={model}", f"{SP}={sp}"), env={"HOME": "/root"})


@pytest.mark.slow
def test_r47_02_qwen35_sft_under_ulysses_warns_and_controls_stay_quiet(tmp_path):
    """The real case (Qwen3.5 from the catalogue, SP 8 on one 8-GPU node): one VI907 warning on the SFT key, naming
    the layers, the verl line and the way out. Controls: SP 1 on the same model, SP 4 on a dense Qwen2.5-7B."""
    _bash_or_skip()
    found = _findings(_sft(tmp_path, "Qwen/Qwen3.5-9B", 8), "VI907")
    assert len(found) == 1 and found[0].severity == "warning", found
    assert found[0].keys == (SP,) and f"{SP}=8" in found[0].message and "24 Gated DeltaNet layers" in found[0].message
    assert "qwen3_5.py:168-172" in found[0].message and f"{SP}=1" in found[0].hint
    assert not _findings(_sft(tmp_path, "Qwen/Qwen3.5-9B", 1), "VI907")
    assert not _findings(_sft(tmp_path, "Qwen/Qwen2.5-7B-Instruct", 4), "VI907")


@pytest.mark.slow
def test_a_local_hybrid_config_is_read_for_its_linear_layers(tmp_path):
    """A Qwen3.5 model folder (config.json written by transformers: the language model in text_config, 3
    linear-attention layers of 4) warns under SP 2; a dense Qwen3 folder of the same sizes does not."""
    _bash_or_skip()
    transformers = pytest.importorskip("transformers")
    small = dict(num_hidden_layers=4, vocab_size=256, hidden_size=128, intermediate_size=256, head_dim=32,
                 num_attention_heads=4, num_key_value_heads=2, linear_num_key_heads=2, linear_num_value_heads=4,
                 linear_key_head_dim=32, linear_value_head_dim=32)
    hybrid_cfg = transformers.AutoConfig.for_model("qwen3_5", text_config=small, vision_config=dict(
        depth=1, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=128))
    dense_cfg = transformers.AutoConfig.for_model("qwen3", **{k: v for k, v in small.items() if not k.startswith("linear_")})
    hybrid, dense = tmp_path / "hybrid", tmp_path / "dense"
    for folder, config in ((hybrid, hybrid_cfg), (dense, dense_cfg)):
        folder.mkdir()
        (folder / "config.json").write_text(config.to_json_string(), encoding="utf-8")
    found = _findings(_sft(tmp_path, str(hybrid), 2), "VI907")
    assert len(found) == 1 and "3 Gated DeltaNet layers" in found[0].message, found
    assert not _findings(_sft(tmp_path, str(dense), 2), "VI907")


@pytest.mark.slow
def test_a_qwen35_size_the_catalogue_lacks_is_known_by_its_family_name(tmp_path):
    """R47-01's Qwen3.5-0.8B (verl#5957) and the other hub sizes are not in the catalogue: their shape is scaled from
    the size in the name, with no layer types; the family name still marks the Gated DeltaNet layers. A dense Qwen3
    scaled the same way stays quiet."""
    _bash_or_skip()
    for model in ("Qwen/Qwen3.5-0.8B", "Qwen/Qwen3.5-27B"):
        found = _findings(_sft(tmp_path, model, 2), "VI907")
        assert len(found) == 1 and "Qwen3.5-family" in found[0].message, (model, found)
    assert not _findings(_sft(tmp_path, "Qwen/Qwen3-4B", 2), "VI907")


@pytest.mark.verl
def test_the_family_is_the_one_verls_monkey_patch_splits():
    """GDN_MODEL_TYPES is the branch of verl's apply_monkey_patch that installs its Gated DeltaNet forward (the one
    that builds FLA's cp context under Ulysses), and the family name matches each of those model types."""
    pytest.importorskip("verl")
    import ast

    from helpers_verl import verl_root, verl_tree
    from wizard.check.rules.layout import GDN_MODEL_TYPES, GDN_NAME

    rel = "models/transformers/monkey_patch.py"
    src = (verl_root() / rel).read_text(encoding="utf-8")
    func = next(n for n in ast.walk(verl_tree(rel)) if isinstance(n, ast.FunctionDef) and n.name == "apply_monkey_patch")
    body = ast.get_source_segment(src, func)
    branch = body.split(f"elif model.config.model_type in {list(GDN_MODEL_TYPES)}:".replace("'", '"'))
    assert len(branch) == 2, "verl's apply_monkey_patch no longer keys the Qwen3.5 patches on these model types"
    assert "Qwen3_5GatedDeltaNet.forward = qwen3_5_gated_delta_net_forward" in branch[1].split("elif model.config")[0]
    assert all(GDN_NAME.search(t) for t in GDN_MODEL_TYPES)
