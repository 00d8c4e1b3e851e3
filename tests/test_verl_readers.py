"""Who reads what (scripts/verl_readers.py → wizard/check/data/verl_readers.json) and the rules built on it:
VI890 (a key only modules of another configuration read), VI891 (a missing recipe config: one finding), entry
points read with their own trees (wizard.check.entrypoints)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules import readers

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "verl_readers.py"
BASE = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "algorithm.adv_estimator=grpo",
        "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]


def _script():
    from helpers_scripts import load_script

    return load_script("verl_readers")


def _vi890(report) -> dict[str, str]:
    return {f.problem.keys[0]: f.problem.hint for f in report.findings if f.problem.rule == "VI890"}


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_regenerating_gives_the_committed_table():
    fresh = json.dumps(_script().build(), indent=1, sort_keys=True) + "\n"
    assert fresh == (ROOT / "wizard" / "check" / "data" / "verl_readers.json").read_text(encoding="utf-8")


def test_the_table_holds_verls_own_reads():
    keys = readers.readers_table()["keys"]
    # only the FSDP and VeOMni engines read gradient checkpointing (verl/workers/engine/fsdp/transformer_impl.py:335)
    assert set(keys["actor_rollout_ref.model.enable_gradient_checkpointing"]) == {
        "engine:fsdp/transformer_impl", "engine:veomni/transformer_impl"}
    # engine scopes come from EngineRegistry.register and inheritance: VeOmni's engines subclass the FSDP ones
    scopes = readers.readers_table()["scopes"]
    assert scopes["engine:fsdp/transformer_impl"]["any"][0]["in"] == ["fsdp", "fsdp2", "fsdp_turbo", "veomni"]
    assert "verl/trainer/ppo/ray_trainer.py:333" in keys["actor_rollout_ref.hybrid_engine"]["trainer:legacy"]
    assert "always" in keys["data.train_batch_size"]


def test_gradient_checkpointing_on_megatron_is_read_by_nothing():
    got = _vi890(check(None, BASE + ["model_engine=megatron", "actor_rollout_ref.model.enable_gradient_checkpointing=true"]))
    assert "actor_rollout_ref.model.enable_gradient_checkpointing" in got
    assert "recompute" in got["actor_rollout_ref.model.enable_gradient_checkpointing"]
    assert not _vi890(check(None, BASE + ["actor_rollout_ref.model.enable_gradient_checkpointing=true"]))


def test_a_key_the_trainer_mode_decides():
    key = "actor_rollout_ref.hybrid_engine=false"
    assert "actor_rollout_ref.hybrid_engine" in _vi890(check(None, BASE + [key]))
    assert not _vi890(check(None, BASE + [key, "trainer.v1.trainer_mode=separate_async"]))
    assert not _vi890(check(None, BASE + [key, "trainer.use_v1=false"]))


def test_balance_batch_true_on_v1_is_what_runs_anyway():
    """The V1 trainer balances every batch outside any condition (the oracle: verl's own step, parsed); so
    balance_batch=True there, as in verl's examples, is a note, and False (which V1 ignores) stays a warning."""
    import ast
    import importlib.util

    verl_dir = Path(importlib.util.find_spec("verl").origin).parent  # the module imports what a GPU node has: read it
    tree = ast.parse((verl_dir / "trainer" / "ppo" / "v1" / "trainer_base.py").read_text(encoding="utf-8"))
    calls = [(n, p) for p in ast.walk(tree) for n in ast.iter_child_nodes(p)
             if isinstance(n, (ast.Assign, ast.Expr)) and isinstance(getattr(n, "value", None), ast.Call)
             and getattr(n.value.func, "attr", "") == "_balance_batch"]
    assert any(isinstance(parent, ast.FunctionDef) for _, parent in calls)  # a call straight in a method's body

    def severity(value: str) -> str:
        report = check(None, BASE + [f"trainer.balance_batch={value}"])
        [hit] = [f for f in report.findings if f.problem.rule == "VI890" and f.problem.keys[0] == "trainer.balance_batch"]
        return hit.problem.severity

    assert severity("true") == "info" and severity("false") == "warning"
    assert not any(f.problem.rule == "VI890" and f.problem.keys[0] == "trainer.balance_batch"
                   for f in check(None, BASE + ["trainer.balance_batch=true", "trainer.use_v1=false"]).findings)


def test_planted_fault_in_the_table_is_seen(monkeypatch):
    """The rule follows the table: a key whose only reader is moved to an inactive scope gets a finding."""
    table = json.loads(json.dumps(readers.readers_table()))
    table["keys"]["actor_rollout_ref.rollout.top_k"] = {"engine:megatron/transformer_impl": ["verl/x.py:1"]}
    monkeypatch.setattr(readers, "readers_table", lambda: table)
    assert "actor_rollout_ref.rollout.top_k" in _vi890(check(None, BASE + ["actor_rollout_ref.rollout.top_k=20"]))


def test_a_missing_recipe_config_is_one_finding(tmp_path):
    (tmp_path / "run.sh").write_text(
        "python3 -m verl.trainer.main_ppo --config-path=recipe/config --config-name=dapo_megatron_trainer \\\n"
        "  actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 +my_recipe.knob=3 my_recipe.other=1 \\\n"
        + " \\\n".join(f"  {o}" for o in BASE) + "\n", encoding="utf-8")
    report = check(str(tmp_path / "run.sh"), workdir=str(tmp_path))
    rules = [f.problem.rule for f in report.findings]
    assert rules.count("VI891") == 1 and not {"VI801", "VI802", "VI804"} & set(rules), rules
    one = next(f for f in report.findings if f.problem.rule == "VI891")
    assert "dapo_megatron_trainer" in one.problem.message and "ppo_megatron_trainer" in one.problem.message
    assert report.source.config_name == "ppo_megatron_trainer"


def test_a_yaml_whose_defaults_name_a_missing_recipe_config_is_one_finding(tmp_path):
    """A user YAML composing a recipe config (`defaults: [dapo_megatron_trainer]`) from a search path that is not here:
    one VI891 and the tree guessed from the entry's name, not one unknown-key error per recipe key nor Hydra's
    MissingConfigException; the control: the same YAML with the recipe config present gets no VI891."""
    body = ("hydra:\n  searchpath:\n    - file://recipe/config\ndefaults:\n  - dapo_megatron_trainer\n  - _self_\n"
            "actor_rollout_ref:\n  actor:\n    megatron:\n      tensor_model_parallel_size: 2\nmy_recipe:\n  knob: 3\n")
    (tmp_path / "mine.yaml").write_text(body, encoding="utf-8")
    report = check(str(tmp_path / "mine.yaml"), BASE)
    rules = [f.problem.rule for f in report.findings]
    assert rules.count("VI891") == 1 and not {"VI801", "VI802", "VI804"} & set(rules), rules
    one = next(f.problem for f in report.findings if f.problem.rule == "VI891")
    assert "dapo_megatron_trainer.yaml" in one.message and "ppo_megatron_trainer" in one.message, one.line()
    assert report.source.config_name == "ppo_megatron_trainer"
    assert report.config.get("actor_rollout_ref.actor.strategy") == "megatron"
    # the recipe config is there: Hydra composes it, nothing is missing
    (tmp_path / "recipe" / "config").mkdir(parents=True)
    (tmp_path / "recipe" / "config" / "dapo_megatron_trainer.yaml").write_text(
        "hydra:\n  searchpath:\n    - pkg://verl.trainer.config\ndefaults:\n  - ppo_megatron_trainer\n  - _self_\n"
        "my_recipe:\n  knob: 1\n", encoding="utf-8")
    found = check(str(tmp_path / "mine.yaml"), BASE, workdir=str(tmp_path))
    assert "VI891" not in found.ids() and found.source.config_missing is None, [f.problem.line() for f in found.findings]


def test_other_entry_points_use_their_own_trees():
    sft = check(None, ["--config-name=sft_trainer_engine", "model.path=Qwen/Qwen2.5-0.5B-Instruct",
                       "trainer.n_gpus_per_node=1", "+data.prompt_key=question"])
    assert sft.source.entry == "sft"
    assert not sft.errors, [f.problem.line() for f in sft.errors]
    assert [f.problem.keys for f in sft.findings if f.problem.rule == "VI802"] == [("data.prompt_key",)]
    fa = check(None, ["--config-name=fully_async_ppo_trainer", *BASE, "async_training.staleness_threshold=1"])
    assert fa.source.entry == "fully_async"
    assert not [f for f in fa.findings if f.problem.rule == "VI801"], [f.problem.line() for f in fa.findings]
    # hybrid_engine is read by the fully_async trainer (fully_async_trainer.py:75): no VI890 there
    assert "actor_rollout_ref.hybrid_engine" not in _vi890(
        check(None, ["--config-name=fully_async_ppo_trainer", *BASE, "actor_rollout_ref.hybrid_engine=false"]))


def test_ulysses_across_nodes_is_a_warning_not_an_error():
    """verl builds the (dp, sp) mesh over the world; only world % sp is required (real-mistakes C06)."""
    r = check(None, BASE[1:-2] + ["actor_rollout_ref.model.path=Qwen/Qwen2.5-14B", "trainer.nnodes=5", "trainer.n_gpus_per_node=8", "data.train_batch_size=960",
                                 "actor_rollout_ref.actor.ppo_mini_batch_size=240",
                                 "actor_rollout_ref.actor.ulysses_sequence_parallel_size=40",
                                 "actor_rollout_ref.model.use_remove_padding=true"])
    assert [f.problem.severity for f in r.findings if f.problem.rule == "VI812"] == ["warning"]


def test_a_critic_without_a_token_classification_class():
    """VI894: the installed transformers' auto mapping decides (real-mistakes C37: a Qwen2.5-VL critic)."""
    ppo = [o for o in BASE if "adv_estimator" not in o] + ["algorithm.adv_estimator=gae"]
    vl = check(None, ppo + ["critic.model.path=Qwen/Qwen2.5-VL-7B-Instruct", "critic.ppo_micro_batch_size_per_gpu=4"])
    assert [f.problem.keys[0] for f in vl.findings if f.problem.rule == "VI894"] == ["critic.model.path"]
    text = check(None, ppo + ["critic.model.path=Qwen/Qwen2.5-7B-Instruct", "critic.ppo_micro_batch_size_per_gpu=4"])
    assert not [f for f in text.findings if f.problem.rule == "VI894"]
