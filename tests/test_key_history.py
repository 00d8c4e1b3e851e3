"""wizard/verlspec/key_history.json (scripts/verl_key_history.py): in which verl releases a key verl 0.9.1
lacks existed, and where 0.9.1 moved it.

The hand-checked spans below were read from the release tags of https://github.com/verl-project/verl with
`git show TAG:verl/trainer/config/FILE` (the file named beside each); 0.9.1 from the installed verl's
verl/trainer/config/_generated_ppo_*trainer.yaml.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

from wizard.verlspec import history

SCRIPT = ROOT / "scripts" / "verl_key_history.py"


def _script():
    from helpers_scripts import load_script

    return load_script("verl_key_history")


def test_file_loads_and_is_consistent():
    data = history.load_history()
    versions = data["versions"]
    assert versions[0] == "0.3.0.post0" and versions[-1] == "0.9.1"
    assert {"0.4.0", "0.5.0", "0.7.1", "0.8.0", "0.9.0"} <= set(versions)
    assert len(versions) == len(set(versions))
    assert data["source"].startswith("https://github.com/verl-project/verl")
    assert len(data["keys"]) > 100
    for key, (first, last) in data["keys"].items():
        assert 0 <= first <= last < len(versions) - 1, key  # never in the last version (0.9.1)
    for old, new in data["renamed"].items():
        assert old in data["keys"] and new not in data["keys"], old
    assert history.load_history() is data  # cached


# (key, first, last, what was read)
HAND_CHECKED = [
    # v0.4.1 ppo_trainer.yaml: absent; v0.5.0 _generated_ppo_trainer.yaml:217 `use_legacy_worker_impl: auto`;
    # v0.7.1 _generated_ppo_trainer.yaml:689 present; v0.8.0 _generated_ppo_trainer.yaml and _megatron_: absent
    ("trainer.use_legacy_worker_impl", "0.5.0", "0.7.1"),
    # v0.3.0.post1 ppo_megatron_trainer.yaml: no grad_offload; v0.4.0 ppo_megatron_trainer.yaml:75 under
    # actor_rollout_ref.actor.megatron; v0.9.0 _generated_ppo_megatron_trainer.yaml:48; 0.9.1: none in any tree
    ("actor_rollout_ref.actor.megatron.grad_offload", "0.4.0", "0.9.0"),
    # v0.3.0.post0 ppo_trainer.yaml:critic.model.fsdp_config.param_offload; v0.7.1 _generated_ppo_trainer.yaml
    # same place; v0.8.0 _generated_ppo_trainer.yaml has critic.fsdp.param_offload instead
    ("critic.model.fsdp_config.param_offload", "0.3.0.post0", "0.7.1"),
    # v0.5.0 _generated_ppo_trainer.yaml: absent; v0.6.0 ..:235 and v0.7.1 ..:310 `skip_rollout: false`;
    # v0.8.0 _generated_ppo_trainer.yaml:324 has rollout.skip (a section) instead; 0.9.1 has top-level skip
    ("actor_rollout_ref.rollout.skip_rollout", "0.6.0", "0.7.1"),
]


@pytest.mark.parametrize("key,first,last", HAND_CHECKED)
def test_hand_checked_spans(key, first, last):
    assert history.key_history(key) == (first, last)


def test_renames():
    assert history.renamed("critic.model.fsdp_config.param_offload") == "critic.fsdp.param_offload"
    assert history.renamed("actor_rollout_ref.actor.router_replay.mode") == \
        "actor_rollout_ref.actor.megatron.router_replay.mode"
    assert history.renamed("reward_manager.name") == "reward.reward_manager.name"
    assert history.renamed("trainer.use_legacy_worker_impl") is None  # removed, not moved
    # rule (4): the leaf moved down into a new subsection of its own section (verl's bucket assertion still names
    # the old path, vllm_rollout/bucketed_weight_transfer.py:141-143; Azure/azureml-assets PR#5288)
    assert history.renamed("actor_rollout_ref.rollout.update_weights_bucket_megabytes") == \
        "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes"
    assert history.renamed("trainer.total_epochs") is None  # still there
    assert history.describe("critic.model.fsdp_config.param_offload") == \
        "existed in verl 0.3.0.post0\u20130.7.1; verl 0.9.1 calls it critic.fsdp.param_offload"
    assert history.describe("actor_rollout_ref.rollout.skip.enable") == "existed in verl 0.8.0"


def test_hydra_prefixes_and_values_are_stripped():
    for raw in ("+trainer.use_legacy_worker_impl", "++trainer.use_legacy_worker_impl",
                "~trainer.use_legacy_worker_impl", "trainer.use_legacy_worker_impl=disable",
                "++trainer.use_legacy_worker_impl=auto"):
        assert history.key_history(raw) == ("0.5.0", "0.7.1"), raw
    assert history.renamed("+critic.model.fsdp_config.param_offload=True") == "critic.fsdp.param_offload"


def test_unknown_and_current_keys_have_no_history():
    assert history.key_history("trainer.total_epochs") is None  # in 0.9.1
    assert history.key_history("actor_rollout_ref.rollout.name") is None
    assert history.key_history("trainer.no_such_key") is None


def _verl_091_keys() -> set[str]:
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("verl not installed")
    base = Path(list(spec.submodule_search_locations)[0])
    if (base / "version" / "version").read_text().strip() != history.load_history()["versions"][-1]:
        pytest.skip("installed verl is not the version the history ends with")
    config = base / "trainer" / "config"
    files = sorted(config.glob("_generated_ppo_*trainer.yaml"))
    assert config / "_generated_ppo_trainer.yaml" in files and config / "_generated_ppo_megatron_trainer.yaml" in files

    keys: set[str] = set()

    def walk(node, prefix=""):
        for k, v in node.items():
            dotted = f"{prefix}.{k}" if prefix else str(k)
            keys.add(dotted)
            if isinstance(v, dict):
                walk(v, dotted)

    for f in files:
        walk(yaml.safe_load(f.read_text(encoding="utf-8")))
    return keys


def test_no_listed_key_is_in_verl_091():
    current = _verl_091_keys()
    data = history.load_history()
    assert not (set(data["keys"]) & current)
    assert set(data["renamed"].values()) <= current  # every proposed new name exists in 0.9.1


def test_size_cap():
    assert history.HISTORY.stat().st_size < 300_000


def test_build_ranges_and_renames_on_a_small_history():
    mod = _script()
    v1 = {"a", "a.x", "a.y", "a.z", "b", "b.k", "c", "c.old.leaf", "c.old"}
    v2 = {"a", "a.x", "b", "b.k", "c", "c.old", "c.old.leaf"}
    v3 = {"a", "a.x", "a.y", "b", "b.k", "c"}  # a.y came back; a.z and c.old went
    v4 = {"a", "a.x", "b", "b.k", "new", "new.x", "new.y", "new.z", "c", "d.old.leaf", "d.old"}
    out = mod.build([("1", v1, ""), ("2", v2, ""), ("3", v3, ""), ("4", v4, "")])
    assert out["versions"] == ["1", "2", "3", "4"]
    assert out["keys"] == {"a.y": [2, 2], "a.z": [0, 0], "c.old": [0, 1], "c.old.leaf": [0, 1]}
    # `a` is still there, so nothing moved to `new`; c.old.leaf -> the one key ending old.leaf; c.old had one
    # child, too few to call it a moved section
    assert out["renamed"] == {"c.old.leaf": "d.old.leaf"}
    assert out["moved_sections"] == {}


def test_leaf_moved_into_a_subsection_of_its_section():
    mod = _script()
    ref = {"a.r.ce", "a.r.ce.bucket_mb", "a.r.ce.backend", "a.s.p.enable", "a.s.q.enable", "b.mb"}
    out, _ = mod.renames(["a.r.bucket_mb", "a.s.enable", "b.x.mb"], ref, {})
    # a.s.enable: two candidates below a.s, none taken; b.x.mb: nothing below b.x (b.mb is its sibling)
    assert out == {"a.r.bucket_mb": "a.r.ce.bucket_mb"}


def test_moved_sections_prefers_the_same_root():
    mod = _script()
    ref = {"critic.fsdp", "critic.fsdp.p", "critic.fsdp.q", "critic.fsdp.r",
           "actor.fsdp_config", "actor.fsdp_config.p", "actor.fsdp_config.q", "actor.fsdp_config.r",
           "data.custom_cls", "data.custom_cls.name", "data.custom_cls.path"}
    moves = mod.moved_sections({"critic.model.fsdp_config": {"p", "q", "r"}, "data.datagen": {"name", "path"}}, ref)
    assert moves == {"critic.model.fsdp_config": "critic.fsdp"}  # two generic names are not enough


def test_composer_resolves_package_placement():
    mod = _script()
    files = {
        "ppo_trainer.yaml": "defaults:\n  - actor@actor_rollout_ref.actor: dp_actor\n  - _self_\ntrainer:\n  n: 1\n"
                            "hydra:\n  run: {dir: x}\n",
        "actor/dp_actor.yaml": "defaults:\n  - ../optim@optim: fsdp\n  - actor\n  - _self_\nstrategy: fsdp\n",
        "actor/actor.yaml": "ppo_epochs: 1\n",
        "optim/fsdp.yaml": "lr: 1.0\n",
    }
    keys = mod.compose_keys(files.get, "ppo_trainer")
    assert keys == {"trainer", "trainer.n", "actor_rollout_ref", "actor_rollout_ref.actor",
                    "actor_rollout_ref.actor.strategy", "actor_rollout_ref.actor.ppo_epochs",
                    "actor_rollout_ref.actor.optim", "actor_rollout_ref.actor.optim.lr"}


# -- check uses the history ------------------------------------------------------------------------------------


def _renamed_scalars(limit: int = 12) -> list[tuple[str, str, object]]:
    """(old key, 0.9.1 key, a value of the new key's type: verl 0.9.1's own default) for renamed leaf keys."""
    from wizard.check.tree import NOTHING, lookup, snapshot_tree

    base = snapshot_tree("dp")
    out = []
    per_section: dict[str, int] = {}
    for old, new in sorted(history.load_history()["renamed"].items()):
        section = ".".join(old.split(".")[:2])
        if per_section.get(section, 0) >= 3:  # a spread over sections, not one section's leaves
            continue
        default = lookup(base, new)
        if default is NOTHING or isinstance(default, (dict, list)) or default is None or old.endswith("_target_"):
            continue
        if isinstance(default, str) and ("${" in default or default == "???"):
            continue
        out.append((old, new, default))
        per_section[section] = per_section.get(section, 0) + 1
    return out[:limit]


@pytest.mark.slow
def test_check_names_the_versions_and_fix_gives_a_list_verl_accepts(tmp_path):
    """Old keys added to a plan verl accepts: check names the releases and 0.9.1's name; --fix's list then has
    no key error and verl 0.9.1's own validation accepts it."""
    import wizard
    from wizard.check.lint import check
    from wizard.check.overrides import format_value
    from wizard.check.report import fixed_overrides

    olds = _renamed_scalars()
    assert len(olds) >= 5, olds
    p = wizard.plan(wizard.load_profile("single-gpu"), base_dir=str(tmp_path))
    planned = [o for o in p.overrides() if not o.startswith(("data.train_files", "data.val_files"))]
    overrides = planned + [f"{old}={format_value(value)}" for old, _, value in olds]
    hw = dict(nnodes=1, gpus_per_node=p.answers.gpus_per_node, gpu_memory_gb=p.answers.gpu_memory_gb)
    report = check(None, overrides, defaults="snapshot", **hw)
    for old, new, _ in olds:
        (f,) = [f for f in report.findings if old in f.problem.keys]
        if f.problem.rule == "VI805":  # a legacy reward key: verl's own migration names its new place
            assert new in f.problem.hint
        else:
            assert f.problem.rule == "VI801" and "existed in verl" in f.problem.message and new in f.problem.message
    fixed, _ = fixed_overrides(report)
    again = check(None, fixed, defaults="snapshot", **hw)
    assert not [f for f in again.errors if f.problem.rule in ("VI801", "VI802", "VI803", "VI804")], \
        [f.problem.line() for f in again.errors]
    verdict = check(None, fixed, defaults="verl", run_verl=True, **hw)
    assert verdict.verl is not None and verdict.verl.ok, verdict.verl.summary()
