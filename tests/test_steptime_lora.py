"""LoRA in the step time (wizard.planner.steptime_lora): the adapters' traffic traced on peft's own LoRA layers, the
frozen base's missing weight gradients written out as arithmetic, the unmerged sync's adapters counted on peft's
state dict, and a LoRA launch script read by `check`."""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from test_steptime import _work
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from wizard.check.lint import check
from wizard.planner import steptime as st
from wizard.planner import steptime_lora as sl
from wizard.planner.shapes import from_local, resolve_shape
from wizard.planner.steptime_config import workload_from_config

TINY = Path(__file__).parent / "data" / "tiny-qwen2-trace"
SHAPE = resolve_shape("Qwen/Qwen2.5-7B-Instruct")


class _Bytes(TorchDispatchMode):
    """Bytes every aten op reads and writes (its tensor inputs and outputs); views move none."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        storages = {t.untyped_storage().data_ptr() for t in ins}
        if not (outs and all(t.untyped_storage().data_ptr() in storages for t in outs)):
            self.n += sum(t.numel() * t.element_size() for t in ins + outs)
        return out


def _traced(model: nn.Module, x: torch.Tensor, call) -> tuple[float, float]:
    """(forward, backward) bytes per token of `model` on the bf16 activations x (requiring grad)."""
    with _Bytes() as f:
        y = call(model, x)
    with _Bytes() as b:
        y.float().sum().backward()
    return f.n / x.shape[-2], b.n / x.shape[-2]


def _adapter_bytes(base: nn.Module, targets, x_shape, call, r: int = 4) -> tuple[float, float]:
    """What peft's LoRA adds to a frozen bf16 module's traffic, per token: (forward, backward)."""
    from peft import LoraConfig, get_peft_model

    out = []
    for lora in (False, True):
        torch.manual_seed(0)
        m = base().to(torch.bfloat16).requires_grad_(False)
        if lora:
            m = get_peft_model(m, LoraConfig(r=r, lora_alpha=2 * r, target_modules=targets)).to(torch.bfloat16)
        out.append(_traced(m, torch.randn(*x_shape, dtype=torch.bfloat16, requires_grad=True), call))
    return out[1][0] - out[0][0], out[1][1] - out[0][1]


class _One(nn.Module):
    def __init__(self, i: int, o: int) -> None:
        super().__init__()
        self.proj = nn.Linear(i, o, bias=False)

    def forward(self, x):
        return self.proj(x)


@pytest.mark.parametrize("i,o", [(256, 384), (512, 128), (1024, 1024)])
def test_one_adapted_module_moves_what_peft_runs(i, o):
    """peft's Linear.forward: x into lora_A, lora_B's output written, scaled and added (in + 6·out elements); its
    backward 5·in + 4·out; the rank's r-sized tensors and the adapters' weights are the rest (under 2 %)."""
    fwd, bwd = _adapter_bytes(lambda: _One(i, o), ["proj"], (512, i), lambda m, x: m(x))
    assert fwd == pytest.approx(2 * (sl.FWD_IN * i + sl.FWD_OUT * o), rel=0.02)
    assert bwd == pytest.approx(2 * (sl.BWD_IN * i + sl.BWD_OUT * o), rel=0.02)
    # the planted fault: the adapter's product alone (x in, out written), without the scale and the sum
    assert abs(fwd - 2 * (i + o)) > 0.3 * fwd


def test_a_models_adapters_are_the_modules_peft_adapts():
    """peft's all-linear LoRA on a real (tiny) Qwen2: the traffic the whole model adds is adapter_io's modules (q, k,
    v, o, gate, up, down of every layer; not the LM head) at the per-module counts above."""
    import transformers

    cfg = transformers.AutoConfig.from_pretrained(TINY)
    fwd, bwd = _adapter_bytes(lambda: transformers.AutoModelForCausalLM.from_config(cfg), "all-linear",
                              (1, 256, cfg.hidden_size), lambda m, x: m(inputs_embeds=x).logits)
    io = sl.adapter_io(from_local(str(TINY)), megatron=False)
    assert fwd == pytest.approx(2 * (sl.FWD_IN * io[0] + sl.FWD_OUT * io[1]), rel=0.05)
    assert bwd == pytest.approx(2 * (sl.BWD_IN * io[0] + sl.BWD_OUT * io[1]), rel=0.05)
    # Σ inputs, Σ outputs of one layer written out: q, k, v, gate, up read the hidden state, o the heads, down the MLP
    h, q, kv, inter = 64, 64, 32, 128
    assert io == (2 * (5 * h + q + inter), 2 * (q + 2 * kv + h + 2 * inter + h))


def test_an_unmerged_sync_ships_the_adapters_peft_holds():
    """The adapter tensors and parameters of lora_fields are peft's state dict's: lora_A and lora_B of every adapted
    module."""
    import transformers
    from peft import LoraConfig, get_peft_model
    from peft.utils.save_and_load import get_peft_model_state_dict

    cfg = transformers.AutoConfig.from_pretrained(TINY)
    model = get_peft_model(transformers.AutoModelForCausalLM.from_config(cfg),
                           LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"))
    state = get_peft_model_state_dict(model)
    fields = sl.lora_fields(from_local(str(TINY)), 8, megatron=False)
    assert fields["adapter_tensors"] == len(state)
    assert fields["lora_params"] == sum(t.numel() for t in state.values())
    assert sl.lora_fields(from_local(str(TINY)), 8, megatron=False, merge=True)["adapter_tensors"] == 0
    assert sl.lora_fields(from_local(str(TINY)), 0, megatron=False) == {}


def test_a_moes_unmerged_sync_ships_the_tensors_peft_holds():
    """peft's all-linear on transformers' Qwen3-MoE wraps the fused experts' gate_up and down parameters whole (one
    lora_A, lora_B pair each), beside q, k, v, o and the router: seven adapted modules a layer, not one per expert."""
    import transformers
    from peft import LoraConfig, get_peft_model
    from peft.utils.save_and_load import get_peft_model_state_dict

    from wizard.planner.shapes import ModelShape

    cfg = transformers.Qwen3MoeConfig(vocab_size=128, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                      num_experts=8, num_experts_per_tok=2, mlp_only_layers=[])
    with warnings.catch_warnings():  # peft may name the experts' parameters it wraps
        warnings.simplefilter("ignore")
        state = get_peft_model_state_dict(get_peft_model(transformers.AutoModelForCausalLM.from_config(cfg),
                                                         LoraConfig(r=4, lora_alpha=8, target_modules="all-linear")))
    shape = ModelShape(name="tiny-moe", arch="qwen3_moe", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16,
                       intermediate=128, vocab=128, experts=8, active_experts=2, moe_intermediate=32)
    fields = sl.lora_fields(shape, 4, megatron=False)
    assert fields["adapter_tensors"] == len(state) == 2 * 7 * 2
    assert fields["lora_params"] == sum(t.numel() for t in state.values())


def test_the_frozen_base_has_no_weight_gradients():
    """One GPU (no FSDP gathers), lengths given: the update of a LoRA run does the full update's FLOPs less the
    base's weight gradients (2 × params per token) plus the adapters' own 6 × per token, and peft's adapter traffic
    (forward twice with recompute, and the backward); the optimizer offload moves only the adapters' state."""
    full = _work(n_gpus=1, prompt_mean=300, response_mean=700, offload_optimizer=True)
    lora = replace(full, **sl.lora_fields(SHAPE, 32, megatron=False))
    a, b = st.predict(full), st.predict(lora)
    pk = st.peak("H100")[1]
    tokens = 256 * 8 * (300 + 700)
    bw = pk.hbm_tb_s * 1e12 * st.DECODE_BW_ETA
    adapters = 2 * sl.adapter_seconds(lora.adapter_io, tokens, bw) + sl.adapter_seconds(lora.adapter_io, tokens, bw,
                                                                                         backward=True)
    saved = st._pass_seconds(tokens * (2 * SHAPE.params - 6 * lora.lora_params), pk, st.TRAIN_ETA,
                             st.TRAIN_INTENSITY)
    optim = 2 * 8 * (SHAPE.params - lora.lora_params) / 1e9 / st.PCIE_GB_S
    assert a.phases["update actor"] - b.phases["update actor"] == pytest.approx(saved - adapters + optim, rel=1e-6)
    # the old log-prob pass runs the adapters' forward once
    assert b.phases["old log-prob"] - a.phases["old log-prob"] == pytest.approx(
        sl.adapter_seconds(lora.adapter_io, tokens, bw), rel=1e-6)
    assert b.assumptions["lora_trained_params"] == round(lora.lora_params)


def test_the_weight_sync_ships_adapters_unless_merged():
    full = _work()
    lora = replace(full, **sl.lora_fields(SHAPE, 32, megatron=False))
    merged = replace(full, **sl.lora_fields(SHAPE, 32, megatron=False, merge=True))
    # 28 layers × 7 adapted modules × (lora_A, lora_B)
    assert lora.adapter_tensors == 28 * 7 * 2
    expect = st.SYNC_FIXED_S["fsdp"] + 2 * lora.lora_params / 1e9 / st.SYNC_GB_S["fsdp"] + 392 * st.SYNC_TENSOR_S
    assert st.predict(lora).phases["weight sync"] == pytest.approx(expect)
    assert st.predict(merged).phases["weight sync"] == pytest.approx(st.predict(full).phases["weight sync"])
    # Megatron-Bridge's four fused modules: linear_qkv, linear_proj, linear_fc1, linear_fc2
    assert sl.lora_fields(SHAPE, 32, megatron=True)["adapter_tensors"] == 28 * 4 * 2


def test_vllm_runs_its_lora_kernels_only_for_an_unmerged_adapter(monkeypatch):
    """Unmerged, every decoder layer adds lora_shrink and lora_expand for its four LoRA layers: the per-layer
    decode costs grow by 8 kernels over the dozen; merged weights decode as the base model."""
    for eager in (False, True):
        full = _work(enforce_eager=eager, rollout_tp=2)
        lora = replace(full, **sl.lora_fields(SHAPE, 32, megatron=False))
        merged = replace(full, **sl.lora_fields(SHAPE, 32, megatron=False, merge=True))
        assert st.predict(merged).phases["rollout"] == pytest.approx(st.predict(full).phases["rollout"])
        factor = 1 + 8 / 12
        with monkeypatch.context() as m:
            m.setattr(st, "DECODE_LAYER_S", st.DECODE_LAYER_S * factor)
            m.setattr(st, "EAGER_LAYER_S", st.EAGER_LAYER_S * factor)
            by_hand = st.predict(full).phases["rollout"]
        assert st.predict(lora).phases["rollout"] == pytest.approx(by_hand)
        assert by_hand > st.predict(full).phases["rollout"]


def test_each_engine_reads_its_own_lora_keys():
    """FSDP reads model.lora_rank (workers/engine/fsdp/transformer_impl.py), Megatron model.lora.rank
    (workers/config/megatron_peft.py); the other engine's key trains every weight (VI880)."""
    base = {"data.train_batch_size": 64, "actor_rollout_ref.rollout.n": 4}
    M = "actor_rollout_ref.model"

    def work(keys):
        return workload_from_config(keys.get, SHAPE, n_gpus=8, gpu_type="H100", gpu_memory_gb=80)

    meg = {**base, "actor_rollout_ref.actor.strategy": "megatron"}
    assert work({**base, f"{M}.lora_rank": 32}).lora_params == sl.lora_fields(SHAPE, 32, False)["lora_params"]
    assert work({**meg, f"{M}.lora.rank": 32}).lora_params == sl.lora_fields(SHAPE, 32, True)["lora_params"]
    assert work({**meg, f"{M}.lora_rank": 32}).lora_params == 0
    assert work({**base, f"{M}.lora.rank": 32}).lora_params == 0
    assert work({**base, f"{M}.lora_rank": 32, f"{M}.lora.merge": True}).adapter_tensors == 0


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_times_a_lora_script_as_lora(tmp_path):
    words = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
             "actor_rollout_ref.rollout.name=vllm", "data.train_batch_size=256", "actor_rollout_ref.rollout.n=8",
             "data.max_prompt_length=1024", "data.max_response_length=2048", "trainer.nnodes=1",
             "trainer.n_gpus_per_node=8", "actor_rollout_ref.actor.ppo_mini_batch_size=64",
             "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
             "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
             "actor_rollout_ref.rollout.tensor_model_parallel_size=2"]
    times = {}
    for name, extra in (("full", []), ("lora", ["actor_rollout_ref.model.lora_rank=32",
                                                "actor_rollout_ref.model.lora_alpha=64",
                                                "actor_rollout_ref.rollout.load_format=safetensors"])):
        path = tmp_path / f"{name}.sh"
        path.write_text("#!/bin/bash\npython3 -m verl.trainer.main_ppo \\\n    " + " \\\n    ".join(words + extra)
                        + "\n", encoding="utf-8")
        report = check(str(path), env={"HOME": str(tmp_path)}, gpu_type="H100", gpu_memory_gb=80)
        assert report.time is not None
        times[name] = report.time
    full, lora = times["full"], times["lora"]
    assert "lora_trained_params" not in full["assumptions"]
    assert lora["assumptions"]["lora_trained_params"] == round(sl.lora_fields(SHAPE, 32, False)["lora_params"])
    assert lora["assumptions"]["lora_weight_sync"] == "the adapters alone"
    assert lora["phases"]["update"] < full["phases"]["update"]
    assert lora["phases"]["weight sync"] < full["phases"]["weight sync"]
    assert lora["phases"]["rollout"] > full["phases"]["rollout"]


def test_the_calibration_harness_reads_a_lora_report_as_lora():
    """A kept-aside report of a LoRA run states its rank in its overrides (or its config): the harness gives the
    Workload its adapters, under the key the report's engine reads."""
    import steptime_cases as sc

    every = sc.cases()
    fsdp = next(c for c in every if c["id"] == "T26")
    meg = next(c for c in every if c["id"] == "T15")
    assert sc.workload(fsdp, every).lora_params == 0
    with_rank = {**fsdp, "overrides": [*(fsdp.get("overrides") or []), "actor_rollout_ref.model.lora_rank=32"]}
    w = sc.workload(with_rank, every)
    assert w.lora_params == sl.lora_fields(sc.shape_of(fsdp), 32, False)["lora_params"] and w.adapter_tensors
    merged = {**with_rank, "overrides": [*with_rank["overrides"], "actor_rollout_ref.model.lora.merge=True"]}
    assert sc.workload(merged, every).adapter_tensors == 0
    meg_rank = {**meg, "config": {**meg["config"], "lora_rank": 16}}
    assert sc.workload(meg_rank, every).lora_params == sl.lora_fields(sc.shape_of(meg), 16, True)["lora_params"]
    # the other engine's key is not read: the run trains every weight (VI880)
    wrong = {**meg, "overrides": [*(meg.get("overrides") or []), "actor_rollout_ref.model.lora_rank=16"]}
    assert sc.workload(wrong, every).lora_params == 0


def test_plan_names_what_a_lora_step_assumes():
    """PLAN.md's LoRA line names the adapters trained, their traffic, what the sync ships and how the engine
    decodes: through its LoRA kernels unmerged, as the base model merged."""
    from wizard.planner.steptime_plan import lines

    for merge, ships, decodes in ((False, "the adapters alone", "LoRA kernels"),
                                  (True, "the merged weights", "decodes the merged weights")):
        w = replace(_work(), **sl.lora_fields(SHAPE, 32, megatron=False, merge=merge))
        doc = {"step_s": 1.0, "phases_detail": {}, "run_steps": 1, "run_hours": 1.0, "run_gpu_hours": 1.0,
               "assumptions": {**st.predict(w).assumptions, "run_steps_basis": "test"}}
        line = next(x for x in lines(doc) if x.startswith("LoRA:"))
        assert f"{round(w.lora_params):,} adapter parameters" in line and ships in line and decodes in line
    assert not any(x.startswith("LoRA:") for x in lines({**doc, "assumptions": {
        **st.predict(_work()).assumptions, "run_steps_basis": "test"}}))
