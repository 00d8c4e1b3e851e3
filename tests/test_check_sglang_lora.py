"""VI900: SGLang serving LoRA adapters with a regex model.target_modules (held-out case R80-01, verl PR#7413).

Oracle: verl 0.9.1's own ``sglang_lora_target_modules`` and ``lora_served_as_adapter`` /  ``lora_rank_of``
(workers/rollout/sglang_rollout/utils.py), loaded from the installed source with ast (importing the module needs
SGLang's server stack) and run on the values the rule sees.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from wizard.check.lint import check
from wizard.check.rules.sglang_lora import sglang_rejects

M, R = "actor_rollout_ref.model", "actor_rollout_ref.rollout"
REGEX = r"'.*\.(q_proj|v_proj)'"
VALUES = ("all-linear", ".*\\.(q_proj|v_proj)", "q_proj", "all", ["q_proj", "v_proj"], ["all-linear"], None)


def _verl_functions() -> dict:
    """sglang_lora_target_modules, lora_rank_of and lora_served_as_adapter, defined from verl's source."""
    import verl

    path = Path(verl.__file__).parent / "workers" / "rollout" / "sglang_rollout" / "utils.py"
    tree = ast.parse(path.read_text())
    wanted = {"sglang_lora_target_modules", "lora_rank_of", "lora_served_as_adapter"}
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    assert {n.name for n in nodes} == wanted
    scope: dict = {"Any": Any}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec"), scope)
    return scope


def _verl_raises(fn, value) -> bool:
    try:
        fn(value)
    except ValueError:
        return True
    except TypeError:  # list(None): verl fails too, but not on this rule's path (target_modules null)
        return False
    return False


@pytest.mark.verl
def test_predicate_matches_verls_function():
    fn = _verl_functions()["sglang_lora_target_modules"]
    for value in VALUES:
        if value is None:
            continue
        assert sglang_rejects(value) == _verl_raises(fn, value), value


@pytest.mark.verl
def test_adapter_mode_matches_verl():
    verl_fns = _verl_functions()
    served = verl_fns["lora_served_as_adapter"]
    cases = [(32, {}, True), (0, {"rank": 16}, True), (32, {"merge": True}, False), (0, {}, False)]
    for flat, block, expected in cases:
        config = SimpleNamespace(lora_rank=flat, lora=block)
        assert served(config) is expected


def _hits(*overrides: str) -> list:
    report = check(None, list(overrides))
    return [f.problem for f in report.findings if f.problem.rule == "VI900"]


@pytest.mark.verl
def test_regex_targets_with_sglang_adapter_is_an_error():
    # the planted fault: FSDP LoRA, SGLang rollout, a PEFT regex string
    [hit] = _hits(f"{R}.name=sglang", f"{M}.lora_rank=32", f"{M}.lora_alpha=64", f"{M}.target_modules={REGEX}")
    assert hit.severity == "error" and f"{M}.target_modules" in hit.keys and "utils.py:93-102" in hit.message
    # a single module name is a string too: verl raises the same way
    assert _hits(f"{R}.name=sglang", f"{M}.lora_rank=8", f"{M}.target_modules=q_proj")
    # the Megatron block's rank also makes SGLang serve an adapter, and the server reads the flat key
    assert _hits("model_engine=megatron", f"{R}.name=sglang", f"{M}.lora.rank=16", f"{M}.target_modules={REGEX}")


@pytest.mark.verl
def test_controls_stay_clean():
    # verl's default all-linear, and an explicit list
    assert not _hits(f"{R}.name=sglang", f"{M}.lora_rank=32")
    assert not _hits(f"{R}.name=sglang", f"{M}.lora_rank=32", f"{M}.target_modules=[q_proj,k_proj,v_proj,o_proj]")
    # merged adapters: SGLang starts without LoRA
    assert not _hits(f"{R}.name=sglang", f"{M}.lora_rank=32", f"{M}.lora.merge=True", f"{M}.target_modules={REGEX}")
    # vLLM needs no target list; no LoRA at all
    assert not _hits(f"{R}.name=vllm", f"{M}.lora_rank=32", f"{M}.target_modules={REGEX}")
    assert not _hits(f"{R}.name=sglang", f"{M}.target_modules={REGEX}")
