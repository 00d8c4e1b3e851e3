"""VI988 (rollout engine arguments verl drops) and VI989 (do_sample=False that the agent loop ignores).

Real cases: verl PR#1442's flat `rollout.engine_kwargs.swap_space=32`, still copied into launchers, and verl#6202's
greedy validation asked for with val_kwargs.do_sample=False beside the model card's temperature 0.6.

The oracles are verl's own code. verl's RolloutConfig takes any engine_kwargs without a word, and each rollout server's
source reads one child of engine_kwargs, named after its engine: the children of the tree's own engine_kwargs. The
agent loop, the one path of vLLM/SGLang/TensorRT-LLM rollouts in 0.9.1, reads no `do_sample` at all (its source is
read with ast; the same scan finds the reads in the hf rollout, which does use it), and builds its sampling
parameters from temperature / top_p / top_k. The servers and the agent loop need vLLM, SGLang and uvicorn to import, so
their source is read rather than run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from wizard.check.lint import check

R = "actor_rollout_ref.rollout"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", f"{R}.name=vllm",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{R}.n=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=1",
        f"{R}.tensor_model_parallel_size=1"]


def _verl() -> Path:
    import verl

    return Path(verl.__file__).parent


def _hits(rule: str, *extra: str):
    return [f for f in check(None, [*BASE, *extra]).findings if f.problem.rule == rule]


def _engine_children_read(path: Path) -> set[str]:
    """Names a server passes to `<its config's engine_kwargs>.get(NAME)`, or returns from _get_engine_kwargs_key
    (the checkpoint engine's own engine_kwargs, keyed by backend, is another section)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and "config" in ast.unparse(node.func.value) and "engine_kwargs" in ast.unparse(node.func.value) \
                and "checkpoint" not in ast.unparse(node.func.value) \
                and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names.add(node.args[0].value)
        if isinstance(node, ast.FunctionDef) and node.name == "_get_engine_kwargs_key":
            names |= {r.value.value for r in ast.walk(node) if isinstance(r, ast.Return)
                      and isinstance(r.value, ast.Constant)}
    return names - {"engine_kwargs"}


@pytest.mark.verl
def test_each_server_reads_only_its_engines_child_and_the_config_takes_anything():
    from verl.workers.config import RolloutConfig


    root = _verl() / "workers/rollout"
    read = {p.parent.name: _engine_children_read(p) for p in
            (root / "vllm_rollout/vllm_async_server.py", root / "sglang_rollout/async_sglang_server.py",
             root / "trtllm_rollout/trtllm_async_server.py")}
    assert read == {"vllm_rollout": {"vllm"}, "sglang_rollout": {"sglang"}, "trtllm_rollout": {"trtllm"}}
    from wizard.check.resolve import resolve
    from wizard.check.source import load_source

    res = resolve(load_source(None, BASE), "verl", lambda *a, **k: None, {})
    head = f"{R}.engine_kwargs."
    tree_children = {k[len(head):].split(".")[0] for k in res.defaults_flat if k.startswith(head)}
    assert tree_children == set().union(*read.values())
    # a flat key is taken without a word: nothing tells the user it goes nowhere
    cfg = RolloutConfig(name="vllm", engine_kwargs={"vllm": {}, "swap_space": 32, "kv_cache_dtype": "fp8"})
    assert cfg.engine_kwargs["swap_space"] == 32 and cfg.engine_kwargs.get("vllm") == {}


@pytest.mark.slow
def test_check_moves_a_flat_engine_argument_under_the_engine():
    [hit] = _hits("VI988", f"+{R}.engine_kwargs.swap_space=32")
    assert hit.problem.severity == "warning"
    assert hit.fix.set == {f"{R}.engine_kwargs.vllm.swap_space": 32} and hit.fix.delete == [f"{R}.engine_kwargs.swap_space"]
    [other] = _hits("VI988", f"+{R}.engine_kwargs.sglang.enable_dp_attention=true")
    assert other.problem.severity == "info" and other.fix is None  # for SGLang, on a vLLM run
    assert not _hits("VI988", f"+{R}.engine_kwargs.vllm.swap_space=32")  # where verl reads it
    assert not _hits("VI988")


def _reads_do_sample(path: Path) -> list[int]:
    """Lines that read a `do_sample` attribute, key or .get("do_sample") (not ReMax's internal __do_sample__)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == "do_sample":
            lines.append(node.lineno)
        if isinstance(node, ast.Constant) and node.value == "do_sample":
            lines.append(node.lineno)
    return lines


@pytest.mark.verl
def test_the_agent_loop_never_reads_do_sample():
    loop = _verl() / "experimental/agent_loop"
    assert not {p.name: _reads_do_sample(p) for p in loop.glob("*.py") if _reads_do_sample(p)}
    assert _reads_do_sample(_verl() / "workers/rollout/hf_rollout.py")  # the scan sees a reader where there is one
    text = (loop / "agent_loop.py").read_text(encoding="utf-8")
    for knob in ("temperature", "top_p", "top_k"):  # what validation's sampling is built from
        assert f'sampling_params["{knob}"] = config.val_kwargs.{knob}' in text


@pytest.mark.slow  # over 4.5 s in the quick loop (--durations, 2026-12-07): CI runs it
def test_check_warns_that_do_sample_false_still_samples():
    [val] = _hits("VI989", f"{R}.val_kwargs.do_sample=False", f"{R}.val_kwargs.temperature=0.6")
    assert val.problem.severity == "warning" and val.fix.set == {f"{R}.val_kwargs.temperature": 0}
    [train] = _hits("VI989", f"{R}.do_sample=False")  # rollout.temperature defaults to 1.0
    assert train.fix is None and "must stay > 0" in train.problem.hint
    assert not _hits("VI989", f"{R}.val_kwargs.do_sample=False", f"{R}.val_kwargs.temperature=0")  # greedy indeed
    assert not _hits("VI989", f"{R}.val_kwargs.do_sample=True", f"{R}.val_kwargs.temperature=0.6")
