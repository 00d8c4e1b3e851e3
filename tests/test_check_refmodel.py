"""VI668 / VI669: where verl 0.9.1 really runs the reference model (wizard/check/rules/refmodel.py).

Each rule is planted and seen, beside valid controls that stay clean; the oracle is verl's own code: its composed
trainer config, the FSDP engine's module builder and the trainers' own ref_in_actor lines, run here on CPU.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers_scripts import regenerated

from wizard.check.lint import check
from wizard.check.rules import refmodel

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "wizard" / "check" / "data"
A, REF, M, R = "actor_rollout_ref.actor", "actor_rollout_ref.ref", "actor_rollout_ref.model", "actor_rollout_ref.rollout"
BASE = ["algorithm.adv_estimator=grpo", f"{M}.path=Qwen/Qwen2.5-0.5B-Instruct", f"{R}.name=vllm",
        "data.train_batch_size=256", f"{R}.n=8", f"{A}.ppo_mini_batch_size=32", f"{A}.ppo_micro_batch_size_per_gpu=4",
        f"{R}.log_prob_micro_batch_size_per_gpu=8", f"{REF}.log_prob_micro_batch_size_per_gpu=8",
        f"{A}.use_kl_loss=True", f"{A}.kl_loss_coef=0.001", f"{A}.kl_loss_type=low_var_kl",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
LORA = [f"{M}.lora_rank=32", f"{M}.lora_alpha=32", f"{M}.target_modules=all-linear"]


def _hits(rule: str, *extra: str):
    return [f.problem for f in check(None, [*BASE, *extra]).findings if f.problem.rule == rule]


def _verl() -> Path:
    import verl

    return Path(verl.__file__).resolve().parent


def _site(site: str) -> tuple[list[str], int]:
    path, line = site.rsplit(":", 1)
    return (_verl() / path.removeprefix("verl/")).read_text(encoding="utf-8").splitlines(), int(line)


@pytest.mark.verl
def test_regenerating_the_ref_placement_table_gives_the_committed_one():
    assert regenerated("verl_ref_placement") == (DATA / "verl_ref_placement.json").read_text(encoding="utf-8")


# --- VI668: the FSDP engine offloads the forward-only reference whatever param_offload says -------------------------

@pytest.mark.verl
def test_verl_builds_the_reference_forward_only_and_forces_its_offload():
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(_verl() / "trainer/config/_generated_ppo_trainer.yaml")
    assert cfg.actor_rollout_ref.ref.fsdp_config.forward_only is True
    assert cfg.actor_rollout_ref.ref.fsdp_config.param_offload is False  # what the user reads: "not offloaded"
    table = refmodel.ref_placement()["forced_offload"]
    assert set(table) == {"fsdp", "fsdp2"}
    lines, at = _site(table["fsdp"])
    assert "forward_only" in lines[at - 1] and "CPUOffload(offload_params=True)" in lines[at]
    lines, at = _site(table["fsdp2"])
    branch = "\n".join(lines[at - 1:at + 4])
    assert "forward_only" in lines[at - 1] and "CPUOffloadPolicy(pin_memory=True)" in branch
    assert "param_offload" not in branch  # the user's switch is not consulted


def test_vi668_ref_param_offload_false_on_fsdp():
    for strategy in ("fsdp", "fsdp2"):
        hits = _hits("VI668", f"{A}.strategy={strategy}", f"{REF}.fsdp_config.param_offload=False")
        assert len(hits) == 1 and hits[0].severity == "warning", strategy
        assert f"{REF}.fsdp_config.param_offload=False" in hits[0].message and strategy in hits[0].message
    hit = _hits("VI668", f"{A}.strategy=fsdp2", f"{REF}.fsdp_config.offload_policy=False")
    assert hit and hit[0].keys == (f"{REF}.fsdp_config.offload_policy",)


def test_vi668_controls_stay_clean():
    assert not _hits("VI668")  # verl's default, not written: nothing to mislead
    assert not _hits("VI668", f"{REF}.fsdp_config.param_offload=True")  # says what happens
    assert not _hits("VI668", f"{A}.use_kl_loss=False", f"{REF}.fsdp_config.param_offload=False")  # no ref: VI844's
    assert not _hits("VI668", *LORA, f"{REF}.fsdp_config.param_offload=False")  # no ref worker: VI669's


# --- VI669: with LoRA the reference is the actor with its adapter disabled ------------------------------------------

def _ref_in_actor(site: str, model: dict) -> bool:
    """Run the trainer's own lines that decide ref_in_actor (verl 0.9.1) on a config."""
    from omegaconf import OmegaConf

    lines, at = _site(site)
    start = next(i for i in range(at - 1, at - 6, -1) if "lora_rank = " in lines[i] and ".get(\"lora\"" in lines[i])
    code = textwrap.dedent("\n".join(lines[start:at]))
    code = code.replace("self.config", "config").replace("self.ref_in_actor", "ref_in_actor")
    scope = {"config": OmegaConf.create({"actor_rollout_ref": {"model": model}})}
    exec(code, scope)  # noqa: S102 - verl's own source lines, the oracle
    return bool(scope["ref_in_actor"])


@pytest.mark.verl
def test_ref_in_actor_matches_verls_trainers():
    from wizard.check.rules.context import Ctx

    models = [{"lora_rank": 0, "lora": {"rank": 0}, "lora_adapter_path": None},
              {"lora_rank": 32, "lora": {"rank": 0}, "lora_adapter_path": None},
              {"lora_rank": 0, "lora": {"rank": 16}, "lora_adapter_path": None},
              {"lora_rank": 0, "lora": {"rank": 0}, "lora_adapter_path": "/ckpt/sft_adapter"}]
    sites = refmodel.ref_placement()["ref_in_actor"]["sites"]
    assert len(sites) >= 4
    for model in models:
        verdicts = {_ref_in_actor(site, model) for site in sites}
        assert len(verdicts) == 1, (model, sites)  # every trainer decides alike
        flat = {f"{M}.lora_rank": model["lora_rank"], f"{M}.lora.rank": model["lora"]["rank"],
                f"{M}.lora_adapter_path": model["lora_adapter_path"]}
        c = Ctx.__new__(Ctx)
        c.res = SimpleNamespace(flat=flat, user=set(flat))
        c.used = {}
        assert refmodel.ref_in_actor(c) == verdicts.pop(), model


def test_vi669_ref_keys_in_a_lora_run():
    hits = _hits("VI669", *LORA, f"{REF}.fsdp_config.param_offload=True")
    assert len(hits) == 1 and hits[0].severity == "warning"
    assert hits[0].keys == (f"{REF}.fsdp_config.param_offload",) and "no reference worker" in hits[0].message
    # any spelling verl takes for LoRA: the Megatron-style block, an adapter path
    assert _hits("VI669", f"{M}.lora.rank=16", f"{REF}.fsdp_config.param_offload=True")
    assert _hits("VI669", f"{M}.lora_adapter_path=/ckpt/sft_adapter", f"{REF}.log_prob_use_dynamic_bsz=True",
                 f"{REF}.log_prob_max_token_len_per_gpu=16384")
    # the validate_config-required micro-batch is named only when it differs from the rollout's (what runs)
    hit = _hits("VI669", *LORA, f"{REF}.log_prob_micro_batch_size_per_gpu=2")
    assert hit and hit[0].keys == (f"{REF}.log_prob_micro_batch_size_per_gpu",)


def test_vi669_controls_stay_clean():
    assert not _hits("VI669", *LORA)  # ref.log_prob_micro_batch_size_per_gpu equals the rollout's: required, harmless
    # a ref engine key equal to the actor's, whose engine computes the reference: the same effect either way
    assert not _hits("VI669", *LORA, f"{A}.fsdp_config.use_torch_compile=False", f"{REF}.fsdp_config.use_torch_compile=False")
    assert not _hits("VI669", f"{REF}.fsdp_config.param_offload=True")  # full fine-tuning: a real ref worker
    assert not _hits("VI669", *LORA, f"{A}.use_kl_loss=False", f"{REF}.fsdp_config.param_offload=True")  # VI844's
