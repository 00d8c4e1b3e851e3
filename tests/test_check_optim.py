"""VI981-VI984: optimizer / precision settings verl 0.9.1 does not act on the way the user means (real cases verl#2937,
PR#2516, verl#5210 with PR#6495, verl#5308). The oracles are verl's own code, run on the CPU:
- VI981: init_megatron_optim_config with Megatron-Core's OptimizerConfig stubbed to record what verl hands it
  (scripts/verl_optim.py builds the table check reads from the same run);
- VI982: verl's Hydra tree composed into FSDPEngineConfig, and the ast scan of verl's engines for engine_config.dtype;
- VI983: verl's load_valuehead_model on a tiny random Qwen2 with flash-attn absent, next to the actor's loading path;
- VI984: torch's AdamW on bf16 vs fp32 parameters at the config's lr, bf16's precision from torch.finfo, and verl's
  FSDP engine source handing model_dtype to the parameters the optimizer gets.
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.optim import MANTISSA_BITS, optim_table

ROOT = Path(__file__).resolve().parent.parent
A = "actor_rollout_ref.actor"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "data.train_batch_size=16", f"{A}.ppo_mini_batch_size=8", "actor_rollout_ref.rollout.n=4",
        f"{A}.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=2",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1", "actor_rollout_ref.rollout.name=vllm", f"{A}.optim.lr=1e-6"]
MEGATRON = "ppo_megatron_trainer"  # verl's Megatron tree: optim/megatron.yaml, engine/megatron.yaml


def _hits(rule: str, *extra: str, gpu_type: str | None = None, config: str | None = None):
    report = check(None, [*BASE, *extra], gpu_type=gpu_type, config_name=config)
    return [f.problem for f in report.findings if f.problem.rule == rule]


@pytest.fixture
def stubbed_megatron():
    """The generator's Megatron-Core stubs go into sys.modules: take them (and verl's module bound to them) out after."""
    import sys

    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.split(".")[0] == "megatron" or name.startswith("verl.utils.megatron"):
            del sys.modules[name]


# --- the oracles: verl's own code ---------------------------------------------------------------------------------

@pytest.mark.verl
def test_regenerating_gives_the_committed_table(stubbed_megatron):
    from helpers_scripts import regenerated

    assert regenerated("verl_optim") == (ROOT / "wizard" / "check" / "data" / "verl_optim.json").read_text("utf-8")


@pytest.mark.verl
def test_megatron_receives_override_betas_but_not_optim_betas(stubbed_megatron):
    import os

    from helpers_scripts import load_script
    from hydra import compose, initialize_config_dir

    seen = load_script("verl_optim")._stub_megatron()
    import verl
    import verl.utils.megatron.optimizer as mo
    from verl.utils.config import omega_conf_to_dataclass

    cfgdir = os.path.join(os.path.dirname(verl.__file__), "trainer/config")
    got = {}
    for name, overrides in (("betas", [f"{A}.optim.betas=[0.9,0.95]"]),
                            ("override", [f"+{A}.optim.override_optimizer_config.adam_beta1=0.9",
                                          f"+{A}.optim.override_optimizer_config.adam_beta2=0.95"])):
        with initialize_config_dir(config_dir=cfgdir, version_base=None):
            cfg = compose(config_name="ppo_megatron_trainer", overrides=overrides)
        mo.init_megatron_optim_config(omega_conf_to_dataclass(cfg.actor_rollout_ref.actor.optim), bf16=True)
        got[name] = dict(seen["optimizer_config"])
    assert "adam_beta2" not in got["betas"] and not any("beta" in k for k in got["betas"])
    assert got["override"]["adam_beta1"] == 0.9 and got["override"]["adam_beta2"] == 0.95
    table = optim_table()["megatron"]
    adam_bf16 = table["contexts"].index({"optimizer": "adam", "precision": "bf16", "use_precision_aware_optimizer": False,
                                         "muon_match_adamw_update_rms": False})
    assert adam_bf16 not in table["effective"]["betas"] and adam_bf16 in table["effective"]["weight_decay"]


@pytest.mark.verl
def test_fsdp_engine_never_reads_dtype():
    import os

    import verl
    from hydra import compose, initialize_config_dir
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.engine.fsdp import transformer_impl as ti

    cfgdir = os.path.join(os.path.dirname(verl.__file__), "trainer/config")
    with initialize_config_dir(config_dir=cfgdir, version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=[f"{A}.fsdp_config.dtype=float16"])
    ec = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor.fsdp_config)
    assert ec.dtype == "float16" and ec.mixed_precision is None  # what the FSDP engine reads: bf16 when None
    src = inspect.getsource(ti.FSDPEngine._build_fsdp_module)
    assert "param_dtype = torch.bfloat16" in src and "engine_config.dtype" not in inspect.getsource(ti)
    readers = optim_table()["engine_reads"]["dtype"]
    assert readers and all("engine/megatron/" in r for r in readers)


@pytest.mark.verl
def test_critic_loader_asks_for_flash_attention(tmp_path):
    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed here: the critic would load")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM
    from verl.utils.model import load_valuehead_model

    cfg = Qwen2Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, architectures=["Qwen2ForCausalLM"])
    Qwen2ForCausalLM(cfg).save_pretrained(tmp_path)
    hf = AutoConfig.from_pretrained(tmp_path, attn_implementation="sdpa")  # workers/config/model.py:185-191
    actor = AutoModelForCausalLM.from_pretrained(tmp_path, config=hf, torch_dtype=torch.float32)
    assert actor.config._attn_implementation == "sdpa"  # the actor honours the override
    hf.num_labels = 1
    with pytest.raises(BaseException) as err:
        load_valuehead_model(str(tmp_path), torch.float32, hf, False)
    chain, e = [], err.value
    while e is not None:
        chain.append(str(e))
        e = e.__cause__ or e.__context__
    assert any("FlashAttention2" in m or "flash_attn" in m for m in chain), chain


@pytest.mark.verl
def test_bf16_adamw_loses_updates_below_the_mantissa():
    import torch
    from verl.workers.engine.fsdp import transformer_impl as ti

    assert torch.finfo(torch.bfloat16).eps == 2.0 ** -MANTISSA_BITS["bf16"]
    assert torch.finfo(torch.float16).eps == 2.0 ** -MANTISSA_BITS["fp16"]
    lr = 1e-6
    edge = lr * 2.0 ** (MANTISSA_BITS["bf16"] + 2)  # the rule's bound: above it a step of lr rounds away
    for w, moves in ((edge * 1.01, False), (edge * 1.9, False), (edge / 4, True)):
        t = torch.tensor([w], dtype=torch.bfloat16)
        assert bool((t - lr != t).item()) is moves, w
    torch.manual_seed(0)
    changed = {}
    for dt in (torch.float32, torch.bfloat16):
        w = torch.nn.Parameter((torch.randn(256, 256) * 0.02).to(dt))
        w0 = w.detach().clone()
        opt = torch.optim.AdamW([w], lr=lr, weight_decay=0.01)
        for _ in range(5):
            w.grad = torch.randn_like(w) * 1e-3
            opt.step()
        changed[dt] = (w.detach() != w0).float().mean().item()
        assert opt.state[w]["exp_avg"].dtype == dt  # no fp32 moments for bf16 parameters
    assert changed[torch.float32] > 0.99 and changed[torch.bfloat16] < 0.1
    build = inspect.getsource(ti.FSDPEngine._build_module)
    assert "torch_dtype = self.engine_config.model_dtype" in build and "module.to(torch_dtype)" in build
    assert "build_optimizer(module.parameters(), self.optimizer_config)" in inspect.getsource(ti.FSDPEngine._build_optimizer)


# --- check --------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_vi981_megatron_betas_and_the_override_control():
    [hit] = _hits("VI981", f"{A}.optim.betas=[0.9,0.95]", config=MEGATRON)
    assert hit.severity == "warning" and "adam_beta2=0.95" in hit.hint
    assert not _hits("VI981", f"+{A}.optim.override_optimizer_config.adam_beta1=0.9",
                     f"+{A}.optim.override_optimizer_config.adam_beta2=0.95", config=MEGATRON)
    assert not _hits("VI981", f"{A}.optim.weight_decay=0.1", f"{A}.optim.lr_warmup_steps_ratio=0.1", config=MEGATRON)
    assert not _hits("VI981", f"{A}.optim.betas=[0.9,0.95]", config=None)  # FSDP's build_optimizer passes betas
    [dt] = _hits("VI981", f"{A}.optim.exp_avg_dtype=bf16", config=MEGATRON)  # only with the precision-aware optimizer
    assert "use_precision_aware_optimizer=True" in dt.message
    assert not _hits("VI981", f"{A}.optim.exp_avg_dtype=bf16", f"{A}.optim.use_precision_aware_optimizer=True",
                     config=MEGATRON)


def test_vi982_fsdp_dtype():
    hits = _hits("VI982", f"{A}.fsdp_config.dtype=float16", "actor_rollout_ref.ref.fsdp_config.dtype=float16")
    assert len(hits) == 2 and "mixed_precision.param_dtype=fp16" in hits[0].hint
    assert not _hits("VI982", f"+{A}.fsdp_config.mixed_precision.param_dtype=fp16", f"{A}.fsdp_config.model_dtype=fp32")
    assert not _hits("VI982", f"{A}.megatron.dtype=float16", config=MEGATRON)


@pytest.mark.slow
def test_vi983_critic_attention():
    critic = ["algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-0.5B-Instruct", "critic.optim.lr=1e-5"]
    [hit] = _hits("VI983", *critic, "+critic.model.override_config.attn_implementation=sdpa")
    assert hit.severity == "warning" and "utils/model.py" in hit.message
    [old] = _hits("VI983", *critic, "+critic.model.override_config.attn_implementation=sdpa", gpu_type="T4")
    assert old.severity == "error"
    assert not _hits("VI983", *critic)  # no override: VI865 speaks for the default
    assert not _hits("VI983", "+critic.model.override_config.attn_implementation=sdpa")  # grpo: no critic
    assert not _hits("VI983", "+actor_rollout_ref.model.override_config.attn_implementation=sdpa", *critic)


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_vi984_bf16_trained_actor():
    [hit] = _hits("VI984", f"{A}.fsdp_config.model_dtype=bf16")
    assert "0.000512" in hit.message and hit.severity == "warning"
    assert not _hits("VI984", "actor_rollout_ref.ref.fsdp_config.model_dtype=bf16")  # forward-only ref
    assert not _hits("VI984", f"{A}.fsdp_config.model_dtype=fp32")
    assert not _hits("VI984", f"{A}.fsdp_config.model_dtype=bf16", "actor_rollout_ref.model.lora_rank=16")
    assert not _hits("VI984", f"{A}.fsdp_config.model_dtype=bf16", f"{A}.optim.optimizer_impl=torchao.optim",
                     f"{A}.optim.optimizer=_AdamW", f"+{A}.optim.override_optimizer_config.bf16_stochastic_round=True")


def test_vi981_betas_with_the_override_as_well_is_silent():
    assert not _hits("VI981", f"{A}.optim.betas=[0.9,0.95]", f"+{A}.optim.override_optimizer_config.adam_beta1=0.9",
                     f"+{A}.optim.override_optimizer_config.adam_beta2=0.95", config=MEGATRON)
