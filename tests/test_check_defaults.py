"""wizard/verlspec/verl_defaults.yaml (the snapshot `verl-init check` uses without verl) against verl itself,
and verl-init's interpolation resolver against OmegaConf's."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

from wizard.check.tree import flatten, resolve_snapshot
from wizard.check.verltree import verl_base, verl_config_dir
from wizard.verlspec import keys


def test_snapshot_is_verl_091_with_both_required_engines():
    snap = keys.load_snapshot()
    assert snap["verl_version"] == "0.9.1"
    assert {"dp", "megatron"} <= set(snap["engines"])
    dp = snap["engines"]["dp"]
    assert dp["actor_rollout_ref"]["rollout"]["name"] == "???"
    assert dp["actor_rollout_ref"]["rollout"]["tensor_model_parallel_size"] == 2
    assert snap["engines"]["megatron"]["actor_rollout_ref"]["actor"]["strategy"] == "megatron"
    assert "verl.workers.config.RolloutConfig" in snap["dataclasses"]


def test_resolver_follows_omegaconf_select_semantics():
    tree = {"a": None, "b": "???", "c": "${oc.select:a,5}", "d": "${oc.select:b,6}", "e": "${oc.select:zz,7}",
            "f": {"g": 1, "h": "${oc.select:.g,9}", "i": "${..a}"}, "j": "${oc.select:f.g}", "k": "${oc.select:nope}",
            "l": "x${f.g}y", "m": "${oc.select:q,${f.g}}", "n": "${oc.env:HOME}/m", "o": "${oc.select:f.g, null}"}
    out, failures = resolve_snapshot(tree, {"HOME": "/h"})
    # OmegaConf.to_container(OmegaConf.create(tree), resolve=True) gives the same (checked by hand and below)
    assert out == {"a": None, "b": "???", "c": None, "d": 6, "e": 7, "f": {"g": 1, "h": 1, "i": None}, "j": 1, "k": None,
                   "l": "x1y", "m": 1, "n": "/h/m", "o": 1}
    assert not failures


@pytest.mark.verl
def test_resolver_matches_omegaconf():
    from omegaconf import OmegaConf

    tree = {"a": None, "b": "???", "c": "${oc.select:a,5}", "d": "${oc.select:b,6}", "e": "${oc.select:zz,7}",
            "f": {"g": 1, "h": "${oc.select:.g,9}", "i": "${..a}"}, "j": "${oc.select:f.g}", "k": "${oc.select:nope}",
            "l": "x${f.g}y", "m": "${oc.select:q,${f.g}}", "o": "${oc.select:f.g, null}"}
    ours, _ = resolve_snapshot(tree, {})
    assert ours == OmegaConf.to_container(OmegaConf.create(tree), resolve=True)


@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.parametrize("engine", ["dp", "megatron", "veomni", "torchtitan"])
def test_snapshot_equals_hydra_composition(engine):
    """Each engine's tree is exactly what Hydra composes from verl's ppo_trainer with model_engine=<engine>,
    unresolved and resolved."""
    from omegaconf import OmegaConf

    snap = keys.load_snapshot()["engines"][engine]
    assert verl_base(engine) == snap
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=[f"model_engine={engine}"])
    GlobalHydra.instance().clear()
    theirs = flatten(OmegaConf.to_container(cfg, resolve=True))
    ours, failures = resolve_snapshot(snap, {})
    assert flatten(ours) == theirs
    assert not failures


@pytest.mark.slow
@pytest.mark.verl
def test_snapshot_script_reproduces_the_shipped_file():
    out = subprocess.run([sys.executable, "scripts/snapshot_verl_defaults.py", "--check"], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    assert out.returncode == 0, out.stderr


@pytest.mark.verl
def test_enumerations_match_verls_registries():
    import verl.experimental.reward_loop.reward_manager  # noqa: F401 - registers the managers
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY
    from verl.utils.tracking import Tracking
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY

    assert set(keys.ADV_ESTIMATORS) == set(ADV_ESTIMATOR_REGISTRY)
    assert set(keys.LOSS_MODES) == set(POLICY_LOSS_REGISTRY)
    assert set(keys.ROLLOUT_NAMES) == {name for name, _mode in _ROLLOUT_REGISTRY}
    assert set(keys.LOGGERS) == set(Tracking.supported_backend) | {"tracking"}
    assert set(keys.REWARD_MANAGERS) == set(REWARD_MANAGER)
