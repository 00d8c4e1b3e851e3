"""VI616 / VI626: Megatron activation recompute settings (round 83: R83-01 verl#7346 MTP + full recompute with
recompute_method=uniform and recompute_num_layers != 1, R83-02 MTP + block, R83-03 granularity full alone, R83-04
selective with recompute_num_layers; rebuilt on verl's MiMo MTP / Qwen3 Megatron examples).

Oracles: verl's own `_patched_checkpointed_forward` (models/mcore/mtp_patch.py), run here on CPU with stand-ins for
megatron's checkpoint functions; verl's own McoreEngineConfig, which accepts every recompute setting at config time;
and megatron-core's own TransformerConfig where megatron-core is importable (verl 0.9.1's [megatron] extra, not in
this venv: that comparison skips here, and the table's megatron-core part is the one scripts/mcore_recompute.py read
from core_v0.18.2's transformer_config.py).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import types
import warnings
from pathlib import Path

import pytest
import torch

from wizard.check.lint import check
from wizard.check.rules.recompute import TABLE, mcore_problems, mtp_verdict

ROOT = Path(__file__).resolve().parent.parent
OTC = "actor_rollout_ref.actor.megatron.override_transformer_config"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
        "data.train_batch_size=256", "actor_rollout_ref.actor.ppo_mini_batch_size=64",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=12288",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
MTP = ["actor_rollout_ref.model.mtp.enable=True", "actor_rollout_ref.model.mtp.enable_train=True"]


def _recompute(g=None, m=None, n=None, modules=None) -> list[str]:
    out = [f"+{OTC}.recompute_granularity={g}"] if g is not None else []
    out += [f"+{OTC}.recompute_method={m}"] if m is not None else []
    out += [f"+{OTC}.recompute_num_layers={n}"] if n is not None else []
    out += [f"{OTC}.recompute_modules={modules}"] if modules is not None else []
    return out


def run(*extra: str):
    return check(None, [*BASE, *extra], config_name="ppo_megatron_trainer")


def hits(report, rule: str):
    return [f.problem for f in report.findings if f.problem.rule == rule]


# --- verl's own MTP checkpointed forward, run on CPU -------------------------------------------------------------

def _verl_mtp_forward():
    """verl's `_patched_checkpointed_forward`, its source taken from the installed verl and executed with stand-ins for
    megatron.core's tensor_parallel / parallel_state (megatron is not importable here)."""
    spec = importlib.util.find_spec("verl")
    path = Path(list(spec.submodule_search_locations)[0]) / "models" / "mcore" / "mtp_patch.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_patched_checkpointed_forward"]
    calls: list[str] = []

    def checkpoint(run, _distribute, *tensors):
        calls.append("checkpoint")
        return run(*tensors)

    scope = {"torch": torch, "warnings": warnings, "parallel_state": types.SimpleNamespace(),
             "tensor_parallel": types.SimpleNamespace(checkpoint=checkpoint)}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(path), "exec"), scope)  # noqa: S102 - verl's own code
    return scope["_patched_checkpointed_forward"], calls


def verl_mtp_outcome(method: str, num_layers) -> str:
    """'checkpointed', 'skipped' (warned, no checkpoint) or 'raises' for verl's MTP forward under full recompute."""
    forward, calls = _verl_mtp_forward()
    cfg = types.SimpleNamespace(recompute_method=method, recompute_num_layers=num_layers, fp8=None,
                                distribute_saved_activations=False)
    layer = types.SimpleNamespace(config=cfg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = forward(layer, lambda x, scale=1.0: x * scale, torch.ones(2), scale=2.0)
        except (AssertionError, ValueError):
            return "raises"
    assert torch.equal(out, torch.full((2,), 2.0))
    if calls:
        return "checkpointed"
    assert caught, "verl ran the MTP layer without a checkpoint and without a warning"
    return "skipped"


@pytest.mark.parametrize("method,num_layers", [("uniform", 1), ("uniform", 2), ("uniform", 4), ("block", 1),
                                               ("block", 8), ("uniform", None)])
def test_mtp_verdict_matches_verls_own_forward(method, num_layers):
    outcome = verl_mtp_outcome(method, num_layers)
    verdict = mtp_verdict("full", method, num_layers)
    expected = {"checkpointed": None, "raises": "error", "skipped": "warning"}[outcome]
    assert (verdict[0] if verdict else None) == expected, (outcome, verdict)


def test_r83_01_mtp_uniform_many_layers():
    report = run(*MTP, *_recompute("full", "uniform", 4))
    (hit,) = hits(report, "VI626")
    assert hit.severity == "error" and "recompute_num_layers == 1" in hit.message
    assert f"{OTC}.recompute_num_layers" in hit.keys and "recompute_num_layers=1" in hit.hint
    assert not hits(report, "VI616")  # megatron-core itself takes full + uniform + 4


def test_r83_02_mtp_block_skips_the_checkpoint():
    (hit,) = hits(run(*MTP, *_recompute("full", "block", 8)), "VI626")
    assert hit.severity == "warning" and "Skipping recompute" in hit.message


def test_mtp_control_and_no_mtp_stay_clean():
    assert not hits(run(*MTP, *_recompute("full", "uniform", 1)), "VI626")  # verl's examples' three keys
    assert not hits(run(*_recompute("full", "uniform", 4)), "VI626")  # no MTP layer to patch
    assert not hits(run(*MTP, *_recompute("selective")), "VI626")  # the MTP checkpoint runs under full only


# --- megatron-core's TransformerConfig ----------------------------------------------------------------------------

CASES = [  # (granularity, method, num_layers, modules) -> megatron-core rejects?
    (None, None, None, None, False), ("full", "uniform", 1, None, False), ("full", "block", 4, None, False),
    ("selective", None, None, ["core_attn", "moe_act"], False), ("full", None, None, None, True),
    ("full", "uniform", None, None, True), ("full", None, 2, None, True), ("selective", None, 4, None, True),
    ("selective", "uniform", None, ["core_attn"], False), ("selective", None, None, ["attention"], True),
    ("full", "every", 1, None, True), ("all", None, None, None, True)]


@pytest.mark.parametrize("g,m,n,mods,rejected", CASES)
def test_mcore_problems_match_the_table(g, m, n, mods, rejected):
    assert bool(mcore_problems(g, m, n, mods)) is rejected


def test_mcore_problems_match_megatron_core():
    """Where megatron-core is importable, its own TransformerConfig gives each case's verdict; without it (this venv:
    verl's [megatron] extra is not installed) the table names the megatron-core release its values were read from."""
    if importlib.util.find_spec("megatron") is None or importlib.util.find_spec("megatron.core") is None:
        mc = json.loads(TABLE.read_text(encoding="utf-8"))["megatron_core"]
        assert mc["version"].startswith("megatron-core ") and mc["file"].endswith("transformer_config.py")
        return
    from megatron.core.transformer.transformer_config import TransformerConfig

    for g, m, n, mods, _ in CASES:
        kw = {"num_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "recompute_granularity": g,
              "recompute_method": m, "recompute_num_layers": n, "recompute_modules": mods}
        try:
            TransformerConfig(**kw)
            said = False
        except (ValueError, AssertionError):
            said = True
        assert said is bool(mcore_problems(g, m, n, mods)), (g, m, n, mods)


def test_verl_accepts_every_recompute_setting_at_config_time():
    """verl's own McoreEngineConfig takes the rejected combinations without a word: the failure is a worker one."""
    from verl.workers.config.engine import McoreEngineConfig

    for g, m, n, mods, rejected in CASES:
        if not rejected:
            continue
        otc = {k: v for k, v in (("recompute_granularity", g), ("recompute_method", m), ("recompute_num_layers", n),
                                  ("recompute_modules", mods)) if v is not None}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = McoreEngineConfig(override_transformer_config=otc)
        assert dict(cfg.override_transformer_config) == otc


def test_r83_03_full_alone():
    (hit,) = hits(run(*_recompute("full")), "VI616")
    assert hit.severity == "error" and "recompute_method" in hit.message and "recompute_num_layers" in hit.message
    assert "recompute_method=uniform" in hit.hint


def test_r83_04_selective_with_num_layers():
    (hit,) = hits(run(*_recompute("selective", None, 4)), "VI616")
    assert "selective takes no recompute_num_layers" in hit.message


def test_critic_is_checked_too():
    report = run("critic.strategy=megatron", "critic.model.path=Qwen/Qwen2.5-7B-Instruct", "algorithm.adv_estimator=gae",
                 "+critic.megatron.override_transformer_config.recompute_granularity=full")
    assert any("critic Megatron" in h.message for h in hits(report, "VI616"))


def test_verl_defaults_and_examples_stay_clean():
    assert not hits(run(), "VI616") and not hits(run(), "VI626")
    assert not hits(run(*_recompute("full", "uniform", 1)), "VI616")


# --- the table ----------------------------------------------------------------------------------------------------

def test_table_verl_part_regenerates_from_installed_verl():
    spec = importlib.util.spec_from_file_location("mcore_recompute", ROOT / "scripts" / "mcore_recompute.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    committed = json.loads(TABLE.read_text(encoding="utf-8"))
    fresh = mod.from_installed_verl(mod.verl_part)
    assert fresh == committed["verl"]
    assert committed["verl"]["defaults"]["recompute_granularity"] is None


def _sft_script(tmp_path, num_layers: int) -> str:
    path = tmp_path / "sft_mtp.sh"
    path.write_text("torchrun --nproc_per_node=8 -m verl.trainer.sft_trainer \\\n"
                    "    model.path=XiaomiMiMo/MiMo-7B-RL engine=megatron optim=megatron optim.lr=1e-5 \\\n"
                    "    +engine.override_transformer_config.recompute_granularity=full \\\n"
                    "    +engine.override_transformer_config.recompute_method=uniform \\\n"
                    f"    +engine.override_transformer_config.recompute_num_layers={num_layers} \\\n"
                    "    model.mtp.enable=True model.mtp.enable_train=True trainer.n_gpus_per_node=8\n",
                    encoding="utf-8")
    return str(path)


def test_sft_megatron_engine_mtp(tmp_path):
    """verl's SFT trainer builds the same MegatronEngine (engine=megatron), MTP patch included (examples/sft/gsm8k/
    run_mimo_7b_mtp_megatron.sh uses uniform with recompute_num_layers=1)."""
    (hit,) = hits(check(_sft_script(tmp_path, 4)), "VI626")
    assert hit.severity == "error" and hit.keys[0] == "engine.override_transformer_config.recompute_method"
    assert not hits(check(_sft_script(tmp_path, 1)), "VI626")
