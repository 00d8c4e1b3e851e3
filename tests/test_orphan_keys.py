"""VI656: a config key only a module verl never loads reads (real case verl#2165: a Qwen3 multi-turn run with
rollout.multi_turn.tokenization_sanity_check_mode=ignore_strippable; in verl 0.9.1 the key's only reader,
workers/rollout/schemas.py, is imported by nothing, so no tokenization check runs at all).

The oracles are verl's own code: its MultiTurnConfig takes the values without a word (so verl says nothing at start-up),
and a scan of the installed verl with Python's tokenize (not the generator's ast walk) finds no module that names
workers/rollout/schemas.py or its request class, and the two keys' names only where verl declares them and in that
module. The orphan criterion itself (scripts/verl_readers.py orphan_modules) is tried on a tiny package built here.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.readers import readers_table

R = "actor_rollout_ref.rollout"
MT = f"{R}.multi_turn"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen3-4B", "data.train_batch_size=16",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{R}.n=4", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
        f"{R}.name=vllm", f"{R}.mode=async", f"{MT}.enable=True", f"{MT}.max_assistant_turns=5",
        f"{R}.agent.default_agent_loop=tool_agent", f"{MT}.function_tool_path=tools.py"]
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _verl() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def _hits(*extra: str):
    return [f for f in check(None, [*BASE, *extra]).findings if f.problem.rule in ("VI656", "VI797", "VI890")]


@pytest.mark.parametrize("key,value,severity", [
    (f"{MT}.tokenization_sanity_check_mode", "ignore_strippable", "warning"),
    (f"{MT}.tokenization_sanity_check_mode", "disable", "warning"),
    (f"{MT}.use_inference_chat_template", "True", "warning"),
    (f"{MT}.tokenization_sanity_check_mode", "strict", "info"),  # verl's default, written out: still no check runs
])
def test_check_flags_a_key_only_an_unloaded_module_reads(key, value, severity):
    (hit,) = _hits(f"{key}={value}")
    assert hit.problem.rule == "VI656" and hit.problem.severity == severity and hit.problem.keys == (key,)
    assert "verl/workers/rollout/schemas.py" in hit.problem.message and value in hit.problem.message
    assert f"remove {key}" in hit.problem.hint


@pytest.mark.parametrize("extra", [
    [],  # the control: a tool agent loop set up without the two keys
    [f"{MT}.max_tool_response_length=512", f"{MT}.format=hermes"],  # keys the tool agent loop reads
])
def test_check_is_silent_on_live_multi_turn_keys(extra):
    assert _hits(*extra) == []


def test_the_table_lists_the_two_keys_and_their_only_module():
    table = readers_table()
    orphan = table["orphan_only"]
    assert set(orphan) == {f"{MT}.tokenization_sanity_check_mode", f"{MT}.use_inference_chat_template"}
    assert "workers/rollout/schemas.py" in table["scopes"]["orphan"]["paths"]
    for evidence in orphan.values():
        assert {w.rsplit(":", 1)[0] for w in evidence["read_in"]} == {"verl/workers/rollout/schemas.py"}


@pytest.mark.verl
def test_verls_multi_turn_config_takes_the_values_silently():
    from verl.workers.config.rollout import MultiTurnConfig

    cfg = MultiTurnConfig(tokenization_sanity_check_mode="ignore_strippable", use_inference_chat_template=True)
    assert cfg.tokenization_sanity_check_mode == "ignore_strippable" and cfg.use_inference_chat_template is True


def _tokens(path: Path) -> list[tuple[int, str]]:
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if tok.type in (tokenize.NAME, tokenize.STRING) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            out.append((tok.start[0], tok.string))
    return out


@pytest.mark.slow
@pytest.mark.verl
def test_nothing_in_verl_loads_schemas_and_only_it_reads_the_keys():
    root = _verl()
    leaves = {"tokenization_sanity_check_mode", "use_inference_chat_template"}
    namers, where = [], set()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("tests/"):
            continue
        text = path.read_text(encoding="utf-8")
        if rel != "workers/rollout/schemas.py" and re.search(r"rollout[./]schemas\b|\bAsyncRolloutRequest\b", text):
            namers.append(rel)
        for _, s in _tokens(path):
            if set(_WORD.findall(s)) & leaves:
                where.add(rel)
    assert namers == []
    assert where == {"workers/config/rollout.py", "workers/rollout/schemas.py"}


def test_the_orphan_criterion_on_a_tiny_package(tmp_path):
    from helpers_scripts import load_script

    pkg = tmp_path / "verl"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "sub/__init__.py": "",
        "main.py": "from .sub import used\nimport verl.sub.absolute\n",
        "sub/used.py": "from . import relative\n",
        "sub/relative.py": "",
        "sub/absolute.py": "",
        "sub/named.py": "",  # loaded by a string: importlib.import_module("verl.sub.named")
        "sub/prefixed_a.py": "",  # named by a Hydra _target_ (cfg.yaml below)
        "sub/orphan.py": "x = cfg.tokenization_sanity_check_mode\n",
        "script.py": "if __name__ == '__main__':\n    pass\n",
        "loader.py": "import importlib\nimportlib.import_module('verl.sub.named')\n",
    }
    (pkg / "plug").mkdir()
    files["plug/__init__.py"] = ""
    files["plug/dyn.py"] = ""  # loaded by an f-string that completes the prefix "verl.plug."
    files["loader2.py"] = "import importlib\nname = 'x'\nimportlib.import_module(f'verl.plug.{name}')\n"
    (pkg / "cfg.yaml").write_text("_target_: verl.sub.prefixed_a.Thing\n", encoding="utf-8")
    for rel, text in files.items():
        (pkg / rel).write_text(text, encoding="utf-8")
    orphans = load_script("verl_readers").orphan_modules(pkg)
    # main/loader/loader2 are imported by nothing either: a module only a launcher runs is still an orphan here,
    # which is why the rule speaks only of keys whose every reader is one (verl's entry points are __main__ scripts)
    assert "sub/orphan.py" in orphans
    assert not {"sub/used.py", "sub/relative.py", "sub/absolute.py", "sub/named.py", "sub/prefixed_a.py",
                "plug/dyn.py", "script.py"} & set(orphans)
