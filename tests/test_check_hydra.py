"""`check` applies Hydra's and verl's own semantics (issue: zero false alarms on verl's scripts):

- `+key=value` is accepted where Hydra accepts it: the key is absent, its default is null, or the value is a
  mapping/list merged into it (hydra/_internal/config_loader_impl.py `_apply_overrides_to_config`); refused
  only over a set scalar;
- a key verl 0.9 removed, added with `+`, is a warning (Hydra adds it, verl never reads it), not an error;
- value types come from verl's config dataclasses: `rollout.top_p: float` although its YAML default is `1`;
- `--config-name ppo_megatron_trainer` (or `--config-name=...` among the overrides, `.yaml` or not) names
  verl's Megatron tree, as main_ppo's own flag does;
- GRPO/RLOO with one sample per prompt: verl 0.9.1 uses the raw score (core_algos.py), a warning.
Each case was checked against verl 0.9.1's Hydra compose (test_check_vs_verl.py covers the sampled grid).
"""

from __future__ import annotations

import pytest

from wizard.check.lint import check
from wizard.intent.errors import UserError

BASE = ["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True", "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True"]


def _rules(report, *keys: str) -> dict[str, str]:
    return {f.problem.rule: f.problem.severity for f in report.findings if any(k in f.problem.keys for k in keys)}


@pytest.mark.parametrize("defaults", ["snapshot", "verl"])
def test_plus_on_a_null_default_is_accepted(defaults):
    key = "actor_rollout_ref.rollout.val_kwargs.top_k"  # a number
    report = check(None, [*BASE, "+data.seed=3"], defaults=defaults)  # data.seed: null in verl 0.9.1
    assert "VI803" not in _rules(report, "data.seed")
    report = check(None, [*BASE, f"+{key}=5"], defaults=defaults)
    assert _rules(report, key).get("VI803") == "error"  # a set scalar: Hydra refuses to append


def test_removed_key_added_with_plus_is_a_warning():
    report = check(None, [*BASE, "+trainer.use_legacy_worker_impl=disable"], defaults="snapshot")
    assert _rules(report, "trainer.use_legacy_worker_impl") == {"VI802": "warning"}
    report = check(None, [*BASE, "trainer.use_legacy_worker_impl=disable"], defaults="snapshot")
    assert _rules(report, "trainer.use_legacy_worker_impl") == {"VI801": "error"}


@pytest.mark.parametrize("override", ["actor_rollout_ref.rollout.top_p=0.8", "actor_rollout_ref.actor.entropy_coeff=0.001",
                                      "actor_rollout_ref.rollout.val_kwargs.temperature=0.6"])
def test_float_fields_take_fractions(override):
    report = check(None, [*BASE, override], defaults="snapshot")
    assert "VI808" not in _rules(report, override.split("=")[0])


def test_integer_fields_still_refuse_fractions():
    report = check(None, [*BASE, "actor_rollout_ref.rollout.n=2.5"], defaults="snapshot")
    assert _rules(report, "actor_rollout_ref.rollout.n").get("VI808") == "error"


@pytest.mark.parametrize("how", ["option", "flag", "flag-yaml"])
def test_config_name_picks_verls_megatron_tree(how):
    key = "+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform"
    overrides = [*BASE, key]
    if how == "option":
        report = check(None, overrides, defaults="snapshot", config_name="ppo_megatron_trainer")
    else:
        name = "ppo_megatron_trainer.yaml" if how == "flag-yaml" else "ppo_megatron_trainer"
        report = check(None, [f"--config-name={name}", *overrides], defaults="snapshot")
    assert not _rules(report, key[1:].split("=")[0]), [f.problem.line() for f in report.findings]
    plain = check(None, overrides, defaults="snapshot")  # the FSDP tree has no megatron section
    assert _rules(plain, key[1:].split("=")[0]).get("VI804") == "error"


def test_unknown_config_name_is_one_clear_error():
    with pytest.raises(UserError, match="--config-name"):
        check(None, ["--config-name=my_own", *BASE], defaults="snapshot")


def test_grpo_with_one_sample_is_a_warning_saying_what_verl_does():
    report = check(None, [*BASE, "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=1"], defaults="snapshot")
    (finding,) = [f for f in report.findings if f.problem.rule == "VI847"]
    assert finding.problem.severity == "warning" and "raw score" in finding.problem.message


@pytest.mark.slow
def test_json_carries_the_memory_estimate_when_the_gpu_is_known(tmp_path, cli_env):
    import json

    from conftest import run_cli

    bundle = tmp_path / "b"
    assert run_cli(["--profile", "single-node-8gpu", "--out", str(bundle)], cwd=tmp_path, env=cli_env).returncode == 0
    doc = json.loads(run_cli(["check", str(bundle), "--json"], cwd=tmp_path, env=cli_env).stdout)
    memory = doc["memory"]
    assert isinstance(memory["fits"], bool) and memory["fits"] and memory["verdict"] in ("fits", "tight")
    assert memory["unit"] == "GiB" and 0 < memory["peak_gib_per_gpu"] <= memory["capacity_gib_per_gpu"] < 80
    assert set(memory["phases"]) == {"rollout", "weight sync", "log-prob", "update"}
    # the peak is the largest phase, summed from its terms
    phases = memory["phases"].values()
    assert memory["peak_gib_per_gpu"] == pytest.approx(max(sum(p["terms"].values()) for p in phases), abs=0.05)
    assert all(p["band_gib"][0] <= p["total_gib"] <= p["band_gib"][1] for p in phases)
    overrides_only = json.loads(run_cli(["check", "--json", "--", *BASE], cwd=tmp_path, env=cli_env).stdout)
    assert "memory" not in overrides_only  # no GPU memory known: no estimate claimed


@pytest.mark.slow
def test_a_dataclass_field_the_yaml_lacks_needs_a_plus():
    """RolloutConfig fields that verl's rollout.yaml does not list (verl 0.9.1 itself is the oracle: Hydra's compose
    on verl's config folder, and the dataclass's fields): without `+` Hydra refuses the override, with it the config
    composes; `check` says so and offers the `+`, not a spelling hint."""
    import dataclasses
    import os

    import verl
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException
    from verl.workers.config.rollout import RolloutConfig

    scalar = {"int", "float", "bool", "str", int, float, bool, str}
    with initialize_config_dir(config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer", "config"),
                               version_base=None):
        node = compose("ppo_trainer").actor_rollout_ref.rollout
        fields = [f for f in dataclasses.fields(RolloutConfig) if f.name not in node and not f.name.startswith("_")
                  and f.type in scalar and f.name != "name" and f.default is not dataclasses.MISSING]
        assert len(fields) >= 3, [f.name for f in fields]
        cases = []
        for f in fields:
            key = f"actor_rollout_ref.rollout.{f.name}"
            value = {"bool": "true", bool: "true", "str": "x", str: "x"}.get(f.type, "2")
            with pytest.raises(ConfigCompositionException):
                compose("ppo_trainer", overrides=[f"{key}={value}"])
            compose("ppo_trainer", overrides=[f"+{key}={value}"])
            cases.append((f.name, key, value))
    for name, key, value in cases:
        report = check(None, [*BASE, f"{key}={value}"], defaults="verl")
        (hit,) = [x.problem for x in report.findings if x.problem.rule == "VI801" and key in x.problem.keys]
        assert hit.hint == f"write +{key}={value}" and "RolloutConfig has the field" in hit.message
        plus = check(None, [*BASE, f"+{key}={value}"], defaults="verl")
        assert not {"VI801", "VI802", "VI804"} & set(_rules(plus, key)), name


@pytest.mark.slow
def test_a_key_under_a_free_form_mapping_is_passed_on_not_gone():
    """rollout.engine_kwargs.sglang is a free-form mapping in verl 0.9.1 (rollout.yaml `sglang: {}`), which verl hands to
    SGLang as it is (async_sglang_server.py reads engine_kwargs.sglang); verl 0.4-0.5 listed attention_backend there. The
    key is not "gone": with `+` Hydra adds it and SGLang gets it, without `+` Hydra refuses it (verl's own compose says
    which)."""
    import os

    import verl
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException

    key = "actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend"
    with initialize_config_dir(config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer", "config"),
                               version_base=None):
        assert compose("ppo_trainer", overrides=[f"+{key}=fa3"]).actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend == "fa3"
        with pytest.raises(ConfigCompositionException):
            compose("ppo_trainer", overrides=[f"{key}=fa3"])
    sglang = ["actor_rollout_ref.rollout.name=sglang"]
    assert not {"VI801", "VI802"} & set(_rules(check(None, [*sglang, f"+{key}=fa3"], defaults="verl"), key))
    plain = check(None, [*sglang, f"{key}=fa3"], defaults="verl")
    (hit,) = [f.problem for f in plain.findings if f.problem.rule == "VI801" and key in f.problem.keys]
    assert hit.hint == f"write +{key}=fa3" and "gone" not in hit.message
