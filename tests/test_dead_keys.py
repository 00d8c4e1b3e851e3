"""VI797: a config key verl declares and no code of verl reads (real case PR#2929: rollout.over_sample_rate=0.1 to
cut the long tail of 8k-token rollouts, documented in rollout.yaml, read by nothing in verl 0.9.1).

The oracles are verl's own code. Its RolloutConfig takes the value without a word; a scan of verl's source with
Python's tokenize (not the generator's ast walk) finds each dead key's name only on its declaration line, in code
and strings alike (comments left out); and the one dataclass verl iterates field by field to hand to another library
(VeOmniEngineConfig, workers/engine/veomni/transformer_impl.py:77) keeps its keys off the list although their names
occur nowhere else.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.deadkeys import OWN_RULE
from wizard.check.rules.readers import readers_table

R = "actor_rollout_ref.rollout"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{R}.n=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
        f"{R}.name=sglang"]
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _verl() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def _occurrences(leaves: set[str]) -> dict[str, list[str]]:
    root = _verl()
    out: dict[str, list[str]] = {leaf: [] for leaf in leaves}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("tests/"):
            continue
        text = path.read_text(encoding="utf-8")
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NAME, tokenize.STRING) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                for word in set(_WORD.findall(tok.string)) & leaves:
                    out[word].append(f"verl/{rel}:{tok.start[0]}")
    return out


def _dead() -> dict:
    return readers_table()["dead"]


@pytest.mark.slow
@pytest.mark.verl
def test_each_dead_keys_name_occurs_only_where_verl_declares_it():
    dead = _dead()
    assert "actor_rollout_ref.rollout.over_sample_rate" in dead
    leaves = {k.rsplit(".", 1)[-1] for k in dead}
    found = _occurrences(leaves)
    for key, evidence in dead.items():
        declared = {d.split(" ")[0] for d in evidence["declared"]}
        assert set(found[key.rsplit(".", 1)[-1]]) == declared, key


@pytest.mark.verl
def test_verls_rollout_config_takes_over_sample_rate_silently():
    from verl.workers.config.rollout import RolloutConfig

    assert RolloutConfig(name="sglang", over_sample_rate=0.1).over_sample_rate == 0.1


@pytest.mark.verl
def test_keys_verl_consumes_wholesale_are_not_dead():
    dead = _dead()
    veomni = (_verl() / "workers" / "engine" / "veomni" / "transformer_impl.py").read_text(encoding="utf-8")
    assert "for f in fields(engine_config):" in veomni  # every *_implementation field goes to VeOmni by name
    unread = set(readers_table()["unread"])
    wholesale = [k for k in unread if ".veomni." in k or ".override_transformer_config." in k
                 or k.startswith(("ray_kwargs.", "transfer_queue.")) or ".tool_config." in k]
    assert wholesale and not set(wholesale) & set(dead)
    # VI791's grad_clip and the deprecated micro-batch keys have their own rules; they are not on the list
    assert not {k for k in dead if k.endswith(("grad_clip", "warmup_style", "micro_batch_size"))}


def _hits(*extra: str):
    return [f for f in check(None, [*BASE, *extra]).findings if f.problem.rule in ("VI797", "VI890")]


@pytest.mark.parametrize("key,value", [
    (f"{R}.over_sample_rate", "0.1"), (f"{R}.multi_turn.num_repeat_rollouts", "4"),
])
def test_check_warns_on_a_dead_key_set_to_a_new_value(key, value):
    (hit,) = _hits(f"{key}={value}")
    assert hit.problem.rule == "VI797" and hit.problem.severity == "warning" and hit.problem.keys == (key,)
    assert "workers/config/rollout.py" in hit.problem.message


@pytest.mark.parametrize("extra", [
    [],
    [f"{R}.over_sample_rate=0.0"], [f"{R}.over_sample_rate=0"],  # verl's default, written out
    [f"{R}.multi_stage_wake_up=False"],
    ["actor_rollout_ref.actor.veomni.dsa_attention_implementation=eager"],  # VeOmni takes it by name
])
def test_check_is_silent_on_defaults_and_live_keys(extra):
    assert _hits(*extra) == []


@pytest.mark.verl
def test_multi_stage_wake_up_is_what_the_worker_does_anyway():
    import ast

    src = (_verl() / "workers" / "engine_workers.py").read_text(encoding="utf-8")
    fn = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.AsyncFunctionDef) and n.name == "update_weights")
    body = ast.unparse(fn)
    weights = body.index("resume(tags=['weights'])")
    sync = body.index("self.rollout.update_weights(", weights)
    assert weights < sync < body.index("resume(tags=['kv_cache'])", sync)
    (hit,) = _hits(f"{R}.multi_stage_wake_up=True")  # verl's examples/profile scripts set it
    assert hit.problem.rule == "VI797" and hit.problem.severity == "info" and "engine_workers.py:782" in hit.problem.message


def test_keys_with_their_own_rule_are_left_to_it():
    key = "actor_rollout_ref.actor.freeze_vision_tower"
    assert key in _dead() and OWN_RULE[key] == "VI836"
    assert _hits(f"{key}=True") == []
