"""VI664: engine_kwargs.sglang keys that repeat a ServerArgs field verl's SGLang server sets from its own keys.

Real cases (round 44): public verl launchers with `+...engine_kwargs.sglang.tp_size=1`, `mem_fraction_static=0.4`,
`trust_remote_code=True`, `disable_cuda_graph=True` beside the rollout's own TP / gpu_memory_utilization /
enforce_eager, and a troubleshooting table that lowers engine_kwargs.sglang.mem_fraction_static for an SGLang OOM.

The oracle is verl's own code: SGLangHttpServer.launch_server needs SGLang, Ray and a GPU to run, so its `args = {...}`
literal (the one it hands to ServerArgs, async_sglang_server.py:314-341) is taken from the installed verl's source and
evaluated as verl wrote it, with the rollout config verl would pass; whatever engine_kwargs repeats wins. The table the
rule reads is regenerated from that source and compared with the committed one.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from wizard.check.lint import check

ROOT = Path(__file__).resolve().parent.parent
R = "actor_rollout_ref.rollout"
EK = f"{R}.engine_kwargs.sglang"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", f"{R}.name=sglang",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"{R}.n=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=4",
        f"{R}.tensor_model_parallel_size=2", f"{R}.gpu_memory_utilization=0.5"]


def _hits(*extra: str, base: list[str] = BASE):
    return [f for f in check(None, [*base, *extra]).findings if f.problem.rule == "VI664"]


class _Config(SimpleNamespace):
    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)


class _Names(dict):
    """Locals for verl's literal: the names launch_server computed before it (None where this test does not care)."""

    def __missing__(self, key: str) -> Any:
        return None


def _verl_args(engine_kwargs: dict[str, Any], **rollout: Any) -> dict[str, Any]:
    """verl's own `args = {...}` from SGLangHttpServer.launch_server, evaluated with a rollout config."""
    from helpers_scripts import load_script
    from helpers_verl import verl_root

    gen = load_script("verl_sglang_server_args")
    tree = ast.parse((verl_root() / gen.SERVER).read_text(encoding="utf-8"))
    literal = gen.args_literal(gen.launch_server(tree))
    fn = gen.launch_server(tree)
    # launch_server pops the keys it consumes itself before the literal (:277-282): do as it does
    popped = set(gen._popped(fn))
    kwargs = {k: v for k, v in engine_kwargs.items() if k not in popped}
    cfg = _Config(dtype="bfloat16", gpu_memory_utilization=0.5, enforce_eager=False, tensor_model_parallel_size=2,
                  data_parallel_size=1, expert_parallel_size=1, load_format="dummy", skip_tokenizer_init=True,
                  max_num_seqs=1024, **rollout)
    me = SimpleNamespace(config=cfg, model_config=SimpleNamespace(local_path="/m", trust_remote_code=False),
                         base_gpu_id=0, node_rank=0, nnodes=1)
    names = _Names(self=me, engine_kwargs=kwargs, json=json,
                   infer_tp=cfg.tensor_model_parallel_size * cfg.data_parallel_size)
    return eval(compile(ast.Expression(literal), "async_sglang_server.py", "eval"), {}, names)  # noqa: S307


@pytest.mark.verl
def test_regenerating_gives_the_committed_table():
    from helpers_scripts import regenerated

    committed = (ROOT / "wizard" / "check" / "data" / "verl_sglang_server_args.json").read_text("utf-8")
    assert regenerated("verl_sglang_server_args") == committed


@pytest.mark.verl
def test_verls_literal_lets_engine_kwargs_replace_its_own_values():
    plain = _verl_args({})
    assert plain["mem_fraction_static"] == 0.5 and plain["tp_size"] == 2 and plain["disable_cuda_graph"] is False
    # the real cases' engine_kwargs: each repeated key replaces what verl built from its own keys
    mixed = _verl_args({"tp_size": 1, "mem_fraction_static": 0.4, "disable_cuda_graph": True,
                        "trust_remote_code": True, "attention_backend": "fa3"})
    assert mixed["tp_size"] == 1 and mixed["mem_fraction_static"] == 0.4 and mixed["disable_cuda_graph"] is True
    assert mixed["trust_remote_code"] is True
    # the control: attention_backend is popped and passed by verl itself, so it is not a second copy
    assert mixed["attention_backend"] is None  # the test's stand-in for the backend verl chose from the popped value
    from wizard.check.rules.sglang_args import table

    t = table()
    replaced = {k for k, v in plain.items() if _verl_args({k: object()})[k] is not v}
    assert replaced - set(t["popped"]) <= set(t["replaced_by_engine_kwargs"])
    assert t["replaced_by_engine_kwargs"]["mem_fraction_static"]["from"] == "rollout.gpu_memory_utilization"
    assert t["replaced_by_engine_kwargs"]["disable_cuda_graph"]["from"] == "rollout.enforce_eager"


def test_planted_copies_are_named_with_verls_own_key():
    hits = {f.problem.keys[0].rsplit(".", 1)[1]: f for f in _hits(
        f"+{EK}.tp_size=1", f"+{EK}.mem_fraction_static=0.9", f"+{EK}.disable_cuda_graph=True",
        f"+{EK}.base_gpu_id=2", f"+{EK}.dtype=bfloat16", f"+{EK}.enable_lora=True")}
    assert {k: f.problem.severity for k, f in hits.items()} == {
        "tp_size": "error", "base_gpu_id": "error", "mem_fraction_static": "warning", "disable_cuda_graph": "warning",
        "dtype": "info", "enable_lora": "info"}
    mem = hits["mem_fraction_static"]
    assert f"{R}.gpu_memory_utilization" in mem.problem.keys and "0.9" in mem.problem.message
    assert mem.fix.set == {f"{R}.gpu_memory_utilization": 0.9} and mem.fix.delete == [f"{EK}.mem_fraction_static"]
    assert hits["tp_size"].fix.set == {f"{R}.tensor_model_parallel_size": 1}
    assert hits["disable_cuda_graph"].fix.set == {f"{R}.enforce_eager": True}


def test_controls_stay_clean():
    # keys verl pops and passes itself, and SGLang options verl does not set
    assert not _hits(f"+{EK}.attention_backend=flashinfer", f"+{EK}.chunked_prefill_size=-1",
                     f"+{EK}.cuda_graph_max_bs=64")
    assert not _hits(f"+{EK}.tp_size=2")  # the TP verl passes anyway
    # a vLLM run never builds SGLang's arguments (VI988 says the sglang child is unused)
    vllm = [a.replace(f"{R}.name=sglang", f"{R}.name=vllm") for a in BASE]
    assert not _hits(f"+{EK}.mem_fraction_static=0.9", base=vllm)
