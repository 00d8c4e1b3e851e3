"""VI642-VI644: the attention kernel verl's FSDP engine trains with, against the model family's attention.

Real cases: verl PR#7131 (Gemma 4's global_head_dim=512 under verl's default flash_attention_2), verl#3894 (gpt-oss
trained without eager: the trainer's log-probs differ from the rollout's), verl PR#4551 (gpt-oss with Ulysses SP: the
sinks are not split). The oracles are verl's and transformers' own code: the table regenerated from their source,
AutoConfig with verl's default attention and transformers' Gemma 4 layers (head dimension per layer),
transformers' flash-kwargs filter (it hands `s_aux` only to a kernel that declares it), and verl's Ulysses wrapper.
Each fault is planted in a tiny local model folder, with a valid control beside it.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.attention_kernels import MAX_FLASH_HEAD_DIM, head_dims, table

ROOT = Path(__file__).resolve().parent.parent
TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=6, num_attention_heads=2, num_key_value_heads=1,
            head_dim=32, global_head_dim=512, vocab_size=128, hidden_size_per_layer_input=16,
            vocab_size_per_layer_input=128)


def _script():
    spec = importlib.util.spec_from_file_location("verl_attention_kernels", ROOT / "scripts" / "verl_attention_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_table_is_regenerated_from_verl_and_transformers():
    committed = json.loads((ROOT / "wizard" / "check" / "data" / "verl_attention_kernels.json").read_text("utf-8"))
    assert _script().build() == committed == table()
    assert committed["default_attention"]["value"] == "flash_attention_2"
    assert "gpt_oss" in committed["sink_model_types"] and committed["ulysses"]["reads_sinks"] is False


def _gemma4(tmp_path: Path, global_head_dim: int = 512) -> Path:
    from transformers import Gemma4Config

    folder = tmp_path / f"gemma4-{global_head_dim}"
    cfg = Gemma4Config(text_config={**TEXT, "global_head_dim": global_head_dim})
    cfg.architectures = ["Gemma4ForConditionalGeneration"]
    cfg.save_pretrained(folder)
    return folder


def _gpt_oss(tmp_path: Path) -> Path:
    from transformers import GptOssConfig

    folder = tmp_path / "gpt-oss"
    cfg = GptOssConfig(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=16, num_local_experts=4, vocab_size=128)
    cfg.architectures = ["GptOssForCausalLM"]
    cfg.save_pretrained(folder)
    return folder


def test_gemma4_layers_exceed_flash_under_verls_default(tmp_path):
    import torch
    from transformers import AutoConfig, Gemma4ForCausalLM

    folder = _gemma4(tmp_path)
    default = table()["default_attention"]["value"]
    # verl's call (workers/config/model.py:185-191): the config the FSDP engine loads the model with
    assert AutoConfig.from_pretrained(str(folder), attn_implementation=default).text_config._attn_implementation == default
    cfg = AutoConfig.from_pretrained(str(folder), attn_implementation="eager")  # flash-attn is not installed here
    with torch.device("meta"):
        model = Gemma4ForCausalLM(cfg.text_config)
    dims = {layer.self_attn.head_dim for layer in model.model.layers}
    assert max(dims) == 512 > MAX_FLASH_HEAD_DIM
    assert max(d for _, d in head_dims(json.loads((folder / "config.json").read_text("utf-8")))) == max(dims)


def test_flash_kwargs_drop_the_sinks_for_a_kernel_without_them():
    import torch
    from transformers.modeling_flash_attention_utils import _lazy_define_process_function

    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                               softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                               deterministic=False, return_attn_probs=False, block_table=None):
        """flash-attn 2.8's signature: no sink parameter."""

    def with_sinks(q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1), s_aux=None):
        """a kernel that declares the sinks (vllm-flash-attn3)."""

    sinks = torch.zeros(4)
    kept = _lazy_define_process_function(with_sinks)(query_length=4, key_length=4, is_causal=True, s_aux=sinks)
    dropped = _lazy_define_process_function(flash_attn_varlen_func)(query_length=4, key_length=4, is_causal=True,
                                                                    s_aux=sinks)
    assert "s_aux" in kept and "s_aux" not in dropped


def test_transformers_refuses_sdpa_for_gpt_oss(tmp_path):
    import torch
    from transformers import AutoConfig, GptOssForCausalLM

    assert "gpt_oss" in table()["sink_model_types_without_sdpa"]
    cfg = AutoConfig.from_pretrained(str(_gpt_oss(tmp_path)), attn_implementation="sdpa")
    with torch.device("meta"), pytest.raises(ValueError, match="scaled_dot_product_attention"):
        GptOssForCausalLM(cfg)


def test_verls_ulysses_wrapper_never_reads_the_sinks():
    from verl.models.transformers import monkey_patch

    src = inspect.getsource(monkey_patch._ulysses_flash_attention_forward)
    assert "s_aux" not in src and "sinks" not in src
    assert "s_aux" not in inspect.signature(monkey_patch._ulysses_flash_attention_forward).parameters


def _ids(folder: Path, *extra: str) -> dict[str, list]:
    report = check(None, [f"actor_rollout_ref.model.path={folder}", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
                          *extra])
    out: dict[str, list] = {}
    for f in report.findings:
        if f.problem.rule in ("VI642", "VI643", "VI644"):
            out.setdefault(f.problem.rule, []).append(f.problem)
    return out


ATTN = "actor_rollout_ref.model.override_config.attn_implementation"


def test_head_dim_above_256_under_flash(tmp_path):
    folder = _gemma4(tmp_path)
    [hit] = _ids(folder)["VI642"]
    assert hit.severity == "error" and hit.keys[0] == ATTN and "512" in hit.message and "=sdpa" in hit.hint
    assert "VI642" in _ids(folder, f"+{ATTN}=flash_attention_3")
    assert "VI642" not in _ids(folder, f"+{ATTN}=sdpa")  # the fix
    assert "VI642" not in _ids(_gemma4(tmp_path, 256))  # a model flash-attn takes
    assert "VI642" not in _ids(folder, "--config-name=ppo_megatron_trainer")  # Megatron: TE attention, not HF


def test_fsdp_critic_always_flash(tmp_path):
    big, small = _gemma4(tmp_path), _gemma4(tmp_path, 256)
    hits = _ids(small, "algorithm.adv_estimator=gae", f"critic.model.path={big}",
                f"+critic.model.override_config.attn_implementation=sdpa")["VI642"]
    assert [h.keys for h in hits] == [("critic.model.path",)] and "load_valuehead_model" in hits[0].message
    assert "VI642" not in _ids(small, "algorithm.adv_estimator=gae", f"critic.model.path={small}")


def test_sinks_need_eager(tmp_path):
    folder = _gpt_oss(tmp_path)
    found = _ids(folder)
    assert [h.severity for h in found["VI643"]] == ["warning"] and "=eager" in found["VI643"][0].hint
    [refused] = _ids(folder, f"+{ATTN}=sdpa")["VI643"]
    assert refused.severity == "error" and "_supports_sdpa" in refused.message
    assert not _ids(folder, f"+{ATTN}=eager")  # the control: verl's documented setting, nothing else fires
    assert "VI643" not in _ids(_gemma4(tmp_path, 256))  # a model without sinks


@pytest.mark.parametrize("key", ["actor_rollout_ref.actor.ulysses_sequence_parallel_size",
                                 "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size"])
def test_sinks_with_ulysses(tmp_path, key):
    folder = _gpt_oss(tmp_path)
    [hit] = _ids(folder, f"+{ATTN}=eager", f"{key}=2")["VI644"]
    assert hit.severity == "error" and "s_aux" in hit.message
    assert "VI644" not in _ids(folder, f"+{ATTN}=eager", f"{key}=1")
    assert "VI644" not in _ids(_gemma4(tmp_path, 256), f"{key}=2")
