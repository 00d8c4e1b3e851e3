"""VI672-VI674: settings verl 0.9.1 accepts on Ascend NPUs that then fail there (wizard/check/rules/npu.py).

Real cases: verl#7950 (use_fused_kernels=True on a 910B: triton-ascend's "ub overflow" compiling verl's
efficient_entropy kernel), verl#4815 (Qwen3-8B, Megatron on NPU with VPP while use_mbridge kept its default True:
IndexError) and verl PR#7921 (Qwen3.5-2B LoRA rank 32 at rollout TP=2: vllm-ascend's sgmv_expand refuses it against
the 8-wide Gated DeltaNet in_proj_ba slice). Each fault is planted beside valid controls. The oracles are verl's own code on the CPU: its
patch_forward_with_backends really swaps in the Triton forward for impl_backend=triton and the torch one otherwise,
the kernel table regenerated from verl's source equals the committed one (and its tuned block needs more than the
NPU core's Unified Buffer), verl's McoreEngineConfig takes VPP with use_mbridge=True without a word, and verl's
get_vllm_max_lora_rank (run from its source) gives the rank vLLM is started with.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers_scripts import regenerated

from wizard.check.lint import check
from wizard.check.rules import npu

ROOT = Path(__file__).resolve().parent.parent
M = "actor_rollout_ref.model"
A = "actor_rollout_ref.actor"
BASE = ["algorithm.adv_estimator=grpo", f"{M}.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        "data.train_batch_size=64", f"{A}.ppo_mini_batch_size=32", f"{A}.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4", "actor_rollout_ref.rollout.n=4",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
FUSED = [f"{M}.use_fused_kernels=True", f"{M}.fused_kernel_options.impl_backend=triton"]


def _hits(rule: str, overrides: list[str], **kw):
    return [f.problem for f in check(None, overrides, **kw).findings if f.problem.rule == rule]


def _mega(rule: str, overrides: list[str]):
    return _hits(rule, overrides, config_name="ppo_megatron_trainer")


# --- VI672: verl's Triton fused kernels on Ascend ------------------------------------------------------------------

def test_fused_triton_kernels_on_npu_are_an_error_naming_the_key_and_the_fix():
    (hit,) = _hits("VI672", [*BASE, *FUSED, "trainer.device=npu"])
    assert hit.severity == "error" and f"{M}.use_fused_kernels" in hit.keys
    assert "efficient_entropy" in hit.message and "192 KiB" in hit.message and "verl#7950" in hit.message
    assert f"{M}.use_fused_kernels=False" in hit.hint and "impl_backend=torch" in hit.hint


def test_an_ascend_gpu_type_counts_as_npu():
    assert _hits("VI672", [*BASE, *FUSED], gpu_type="Ascend910B")


@pytest.mark.parametrize("extra", [
    [f"{M}.use_fused_kernels=True", f"{M}.fused_kernel_options.impl_backend=torch", "trainer.device=npu"],
    [f"{M}.use_fused_kernels=True", "trainer.device=npu"],  # verl's default backend: torch
    [f"{M}.use_fused_kernels=True", f"{M}.fused_kernel_options.impl_backend=liger", "trainer.device=npu"],
    [f"{M}.use_fused_kernels=False", f"{M}.fused_kernel_options.impl_backend=triton", "trainer.device=npu"],
    [*FUSED, "trainer.device=cuda"],  # NVIDIA: the kernels' own target
    ["trainer.device=npu"],
])
def test_controls_stay_clean(extra):
    assert not _hits("VI672", [*BASE, *extra])


def test_megatron_always_takes_the_triton_kernels_on_npu():
    mega = [*BASE, f"{A}.strategy=megatron", "actor_rollout_ref.ref.strategy=megatron", "trainer.device=npu"]
    (hit,) = _mega("VI672", [*mega, f"{M}.use_fused_kernels=True"])
    assert "Megatron engine" in hit.message and "impl_backend=torch" not in hit.hint
    # without remove-padding verl's Megatron engine turns fused kernels off itself (transformer_impl.py:526-531)
    assert not _mega("VI672", [*mega, f"{M}.use_fused_kernels=True", f"{M}.use_remove_padding=False"])


@pytest.mark.verl
def test_verl_swaps_in_the_triton_forward_only_for_impl_backend_triton():
    from verl.models.transformers import dense_common, monkey_patch

    table = npu.kernel_table()
    for backend in table["accepted_backends"]:
        model_cls = type("Tiny", (), {"forward": lambda self: None})
        model = model_cls()
        model.config = SimpleNamespace(model_type="llama")
        monkey_patch.patch_forward_with_backends(model, use_fused_kernels=True, fused_kernels_backend=backend)
        triton = model_cls.forward is dense_common.forward_with_triton_backend
        assert triton == (backend in table["triton_backends"]), backend
        if not triton:
            assert model_cls.forward is dense_common.forward_with_torch_backend, backend
    assert table["triton_backends"] == ["triton"] and table["default_impl_backend"] == "torch"


@pytest.mark.verl
def test_regenerating_the_kernel_table_gives_the_committed_one():
    assert regenerated("verl_npu_kernels") == (ROOT / "wizard" / "check" / "data" / "verl_npu_kernels.json").read_text(encoding="utf-8")


def test_the_tuned_block_overflows_the_unified_buffer():
    name, cfg, need = npu.worst_kernel()
    assert name == "efficient_entropy_kernel_general_mainloop"
    assert (cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"], cfg["BLOCK_SIZE_K"], cfg["num_stages"]) == (128, 256, 32, 3)
    assert need == 128 * 256 * 4 + 3 * (128 + 256) * 32 * 2 > npu.ASCEND_UB_BYTES == 192 * 1024
    assert npu.tile_bytes({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64}) == 0  # an epilogue: no matmul tiles


def test_sft_fused_kernels_on_npu(tmp_path):
    script = tmp_path / "sft.sh"
    script.write_text("torchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer "
                      "data.train_files=/d/train.parquet data.val_files=/d/test.parquet data.messages_key=messages "
                      "model.path=Qwen/Qwen2.5-0.5B-Instruct trainer.device=npu model.use_fused_kernels=True "
                      "{backend}\n".format(backend="model.fused_kernel_options.impl_backend=triton"), encoding="utf-8")
    hits = [f.problem for f in check(str(script)).findings if f.problem.rule == "VI672"]
    assert len(hits) == 1 and "model.use_fused_kernels" in hits[0].keys
    script.write_text(script.read_text(encoding="utf-8").replace("impl_backend=triton", "impl_backend=torch"),
                      encoding="utf-8")
    assert not [f for f in check(str(script)).findings if f.problem.rule == "VI672"]


# --- VI673: mbridge with virtual pipeline stages on Ascend ---------------------------------------------------------

MEGA = [*BASE, f"{A}.strategy=megatron", "actor_rollout_ref.ref.strategy=megatron", "critic.strategy=megatron",
        f"{A}.megatron.pipeline_model_parallel_size=2", f"{A}.megatron.virtual_pipeline_model_parallel_size=2"]


def test_vpp_with_default_mbridge_on_npu_is_an_error():
    (hit,) = _mega("VI673", [*MEGA, "trainer.device=npu"])
    assert hit.severity == "error" and f"{A}.megatron.use_mbridge" in hit.keys
    assert "verl#4815" in hit.message and f"{A}.megatron.use_mbridge=False" in hit.hint


@pytest.mark.parametrize("extra", [
    [f"{A}.megatron.use_mbridge=False", "trainer.device=npu"],  # verl's Ascend guide's fix
    ["trainer.device=cuda"],
    [f"{A}.megatron.virtual_pipeline_model_parallel_size=null", "trainer.device=npu"],
])
def test_vpp_controls_stay_clean(extra):
    assert not _mega("VI673", [*MEGA, *extra])


def test_a_reference_model_verl_does_not_build_is_not_reported():
    ref = ["actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=2",
           "actor_rollout_ref.ref.megatron.virtual_pipeline_model_parallel_size=2", "trainer.device=npu"]
    roles = {h.keys[0].rsplit(".megatron", 1)[0] for h in _mega("VI673", [*MEGA, *ref])}
    assert roles == {A}
    roles = {h.keys[0].rsplit(".megatron", 1)[0] for h in
             _mega("VI673", [*MEGA, *ref, f"{A}.use_kl_loss=True"])}
    assert roles == {A, "actor_rollout_ref.ref"}


@pytest.mark.verl
def test_verl_takes_vpp_with_mbridge_on_without_a_word():
    from verl.workers.config.engine import McoreEngineConfig

    cfg = McoreEngineConfig(pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=2)
    assert cfg.use_mbridge is True and cfg.virtual_pipeline_model_parallel_size == 2


# --- VI674: a LoRA rank wider than a packed slice on vLLM-Ascend ---------------------------------------------------

HYBRID = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 2048,
          "num_hidden_layers": 24, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
          "intermediate_size": 6144, "vocab_size": 151936, "linear_num_key_heads": 16, "linear_num_value_heads": 16,
          "linear_key_head_dim": 128, "linear_value_head_dim": 128, "full_attention_interval": 4,
          "tie_word_embeddings": True}
DENSE = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536, "num_hidden_layers": 28,
         "num_attention_heads": 12, "num_key_value_heads": 2, "intermediate_size": 8960, "vocab_size": 151936,
         "tie_word_embeddings": True}


def _model(tmp_path, config: dict) -> str:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return str(folder)


def _lora(tmp_path, config: dict, *extra: str, **kw):
    over = [o for o in BASE if not o.startswith(f"{M}.path=")]
    return _hits("VI674", [*over, f"{M}.path={_model(tmp_path, config)}", *extra], **kw)


def test_lora_rank_wider_than_the_gdn_slice_is_an_error(tmp_path):
    # verl PR#7921: rank 32 at rollout TP=2 against in_proj_ba's 16 value heads / 2 = 8
    (hit,) = _lora(tmp_path, HYBRID, f"{M}.lora_rank=32", "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
                   "trainer.device=npu")
    assert hit.severity == "error" and "in_proj_ba is 8 wide" in hit.message and "PR#7921" in hit.message
    assert f"{M}.lora_rank to 8 or lower" in hit.hint
    # TP 1: 16 wide, still narrower than rank 32; an Ascend --gpu-type says NPU as well
    assert _lora(tmp_path, HYBRID, f"{M}.lora_rank=32", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
                 gpu_type="Ascend910B")


@pytest.mark.parametrize("config,extra", [
    (HYBRID, [f"{M}.lora_rank=8", "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "trainer.device=npu"]),
    (HYBRID, [f"{M}.lora_rank=16", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
              "trainer.device=npu"]),  # TP 1: exactly the 16-wide slice
    (HYBRID, [f"{M}.lora_rank=32", "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "trainer.device=cuda"]),
    (HYBRID, [f"{M}.lora.rank=32", f"{M}.lora.merge=True", "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
              "trainer.device=npu"]),  # merged adapters: vLLM serves no LoRA
    (DENSE, [f"{M}.lora_rank=32", "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "trainer.device=npu"]),
])
def test_lora_controls_stay_clean(tmp_path, config, extra):
    assert not _lora(tmp_path, config, *extra)


def test_a_shape_guessed_from_the_name_is_not_judged():
    assert not _hits("VI674", [*BASE[:1], f"{M}.path=Qwen/Qwen3.5-2B", *BASE[2:], f"{M}.lora_rank=32",
                               "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "trainer.device=npu"])


@pytest.mark.verl
def test_served_rank_is_verls_get_vllm_max_lora_rank():
    """verl's function, run from its source (its module imports vLLM, absent here; the function then uses verl's own
    fallback list of vLLM's ranks)."""
    import ast
    from typing import Literal, get_args

    from helpers_verl import verl_root
    from wizard.check.rules.npu_lora import served_rank

    tree = ast.parse((verl_root() / "workers/rollout/vllm_rollout/utils.py").read_text(encoding="utf-8"))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_vllm_max_lora_rank")
    scope: dict = {"Literal": Literal, "get_args": get_args}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "utils.py", "exec"), scope)  # noqa: S102 - verl's own code
    for rank in range(1, 513):
        assert scope["get_vllm_max_lora_rank"](rank) == served_rank(rank), rank
    with pytest.raises(ValueError):
        scope["get_vllm_max_lora_rank"](513)
    assert served_rank(513) is None
