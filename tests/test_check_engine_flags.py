"""VI689 (a role-level use_torch_compile the FSDP engine never reads, verl-recipe PR#150) and VI690 (fused kernels the
Megatron engine turns off again, verl PR#7826).

The oracles are verl's own code: its FSDPActorConfig built from its generated trainer YAML (the engine config it
hands the FSDP engine keeps use_torch_compile=True whatever the role key says), and MegatronEngine's
_maybe_enable_fused_kernels, taken from verl's source and run on stand-ins for the engine (the Megatron module itself
needs megatron-core to import). The table is regenerated from the installed verl and compared.
"""

from __future__ import annotations

import ast
import json
import logging
import sys
import warnings
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from helpers_scripts import regenerated

from wizard.check.lint import check
from wizard.check.rules import engine_flags

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "wizard" / "check" / "data"
A, REF, M = "actor_rollout_ref.actor", "actor_rollout_ref.ref", "actor_rollout_ref.model"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "actor_rollout_ref.rollout.name=vllm", "data.train_batch_size=256", "actor_rollout_ref.rollout.n=8",
        f"{A}.ppo_mini_batch_size=32", f"{A}.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
MEGATRON = ["model_engine=megatron", f"{M}.use_fused_kernels=True"]


def _hits(rule: str, *extra: str):
    return [f for f in check(None, [*BASE, *extra]).findings if f.problem.rule == rule]


def _verl_file(rel: str) -> Path:
    import verl

    return Path(verl.__file__).resolve().parent / rel.removeprefix("verl/")


def test_regenerating_the_engine_flags_table_gives_the_committed_one():
    assert regenerated("verl_engine_flags") == (DATA / "verl_engine_flags.json").read_text(encoding="utf-8")


# --- VI689: role-level keys the FSDP engine never reads ---------------------------------------------------------------

def _actor_engine(**sets):
    """The engine config verl's own FSDPActorConfig hands the FSDP engine, from verl's generated trainer YAML."""
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass

    cfg = OmegaConf.load(_verl_file("verl/trainer/config/_generated_ppo_trainer.yaml"))
    cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 2
    for dotted, value in sets.items():
        OmegaConf.update(cfg, dotted, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return omega_conf_to_dataclass(cfg.actor_rollout_ref.actor).engine


def test_verl_ignores_the_role_level_key_and_reads_fsdp_config():
    [row] = [r for r in engine_flags.table()["unfed_role_keys"] if r["name"] == "use_torch_compile"]
    assert _actor_engine(**{f"{A}.use_torch_compile": False}).use_torch_compile is True  # the fault: still compiled
    assert _actor_engine(**{f"{A}.fsdp_config.use_torch_compile": False}).use_torch_compile is False  # the fix
    path, line = row["read"].rsplit(":", 1)
    assert "self.engine_config.use_torch_compile" in _verl_file(path).read_text().splitlines()[int(line) - 1]


def test_role_level_use_torch_compile_is_reported_with_the_fsdp_config_key():
    [hit] = _hits("VI689", f"{A}.use_torch_compile=False")
    assert hit.problem.keys == (f"{A}.use_torch_compile", f"{A}.fsdp_config.use_torch_compile")
    assert "never read" in hit.problem.message and "=True" in hit.problem.message
    assert hit.fix.set == {f"{A}.fsdp_config.use_torch_compile": False} and hit.fix.delete == [f"{A}.use_torch_compile"]
    [hit] = _hits("VI689", f"{REF}.use_torch_compile=False", f"{A}.use_kl_loss=True")
    assert hit.problem.keys[0] == f"{REF}.use_torch_compile"


def test_use_torch_compile_controls_stay_clean():
    assert not _hits("VI689", f"{A}.fsdp_config.use_torch_compile=False")  # where the engine reads it
    assert not _hits("VI689", f"{A}.use_torch_compile=True")  # what the engine does anyway
    assert not _hits("VI689", f"{A}.use_torch_compile=False", f"{A}.fsdp_config.use_torch_compile=False")
    assert not _hits("VI689", f"{REF}.use_torch_compile=False")  # no reference model (VI844's)
    assert not _hits("VI689", "model_engine=megatron", f"{A}.use_torch_compile=False")  # not the FSDP engine
    assert not _hits("VI689")


# --- VI690: fused kernels the Megatron engine turns off ----------------------------------------------------------------

def _maybe_enable_fused_kernels():
    """verl's MegatronEngine._maybe_enable_fused_kernels, compiled from its source (megatron-core is not needed)."""
    spec = engine_flags.table()["megatron_fused_off"]
    path, span = spec["function"].rsplit(":", 1)
    start, end = (int(x) for x in span.split("-"))
    text = _verl_file(path).read_text(encoding="utf-8").splitlines()[start - 1:end]
    src = "\n".join(line[4:] for line in text)  # a method body one class level deep
    namespace = {"logger": logging.getLogger("verl-stand-in")}
    exec(compile(ast.parse(src), path, "exec"), namespace)  # noqa: S102 - verl's own function is the oracle
    return namespace["_maybe_enable_fused_kernels"]


def _engine(remove_padding=True, value_model=False, mtp=False):
    return SimpleNamespace(engine_config=SimpleNamespace(use_fused_kernels=True, use_remove_padding=remove_padding),
                           is_value_model=value_model, model_config=SimpleNamespace(mtp=SimpleNamespace(enable=mtp)),
                           module=[object()])


def test_verl_turns_fused_kernels_off_exactly_under_the_table_conditions(monkeypatch):
    patched = []
    fake = ModuleType("verl.models.mcore.model_forward_fused")
    fake.patch_fused_forward = patched.append
    monkeypatch.setitem(sys.modules, "verl.models.mcore.model_forward_fused", fake)
    fn = _maybe_enable_fused_kernels()
    assert engine_flags.table()["megatron_fused_off"]["conditions"] == ["not use_remove_padding", "is_value_model",
                                                                        "mtp.enable"]
    for kwargs in ({"remove_padding": False}, {"value_model": True}, {"mtp": True}):
        engine = _engine(**kwargs)
        fn(engine)
        assert engine.engine_config.use_fused_kernels is False, kwargs
    engine = _engine()
    fn(engine)
    assert engine.engine_config.use_fused_kernels is True and len(patched) == 1  # the control keeps them


@pytest.mark.parametrize("extra, key", [
    ([f"{M}.mtp.enable=True"], f"{M}.mtp.enable"),
    ([f"{M}.use_remove_padding=False"], f"{M}.use_remove_padding"),
])
def test_fused_kernels_switched_off_on_megatron_are_reported(extra, key):
    [hit] = _hits("VI690", *MEGATRON, *extra)
    assert hit.problem.keys == (f"{M}.use_fused_kernels", key)
    assert "switched off" in hit.problem.message and "PR#7826" in hit.problem.message


def test_fused_kernels_on_a_megatron_critic_are_reported():
    hits = _hits("VI690", "model_engine=megatron", "algorithm.adv_estimator=gae", "critic.model.use_fused_kernels=True",
                 "critic.ppo_micro_batch_size_per_gpu=4", "critic.model.path=Qwen/Qwen2.5-0.5B-Instruct")
    assert [h.problem.keys[0] for h in hits] == ["critic.model.use_fused_kernels"]
    assert "value model" in hits[0].problem.message


def test_fused_kernel_controls_stay_clean():
    assert not _hits("VI690", *MEGATRON)  # remove padding on (verl's default), no MTP: the fused path runs
    assert not _hits("VI690", "model_engine=megatron", f"{M}.mtp.enable=True")  # fused kernels not asked for
    assert not _hits("VI690", f"{M}.use_fused_kernels=True", f"{M}.mtp.enable=True")  # FSDP engine: not this switch


def test_the_table_is_plain_json_the_rules_read():
    assert json.loads((DATA / "verl_engine_flags.json").read_text(encoding="utf-8")) == engine_flags.table()
