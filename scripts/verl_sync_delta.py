#!/usr/bin/env python3
"""What verl 0.9.1's checkpoint engines accept and where its delta_sharded weight sync refuses a rollout: writes
wizard/check/data/verl_sync_delta.json, read by check's VI454 and VI455.

    python scripts/verl_sync_delta.py           # regenerate the table from the installed verl
    python scripts/verl_sync_delta.py --check   # exit 1 when the committed table differs

Read with ast from verl's source (never imported: the engines need cupy / zmq / mooncake, the servers vLLM):

- `engines`: for each name a `@CheckpointEngineRegistry.register("NAME")` class registers (nccl twice: the NCCL engine
  and, on Ascend, the HCCL one), the keyword parameters its __init__ takes, following `**kwargs` into the base class
  it passes them to (DeltaShardedCheckpointEngine(*args, encoding, batch_gather, verify_every, **kwargs) ->
  NCCLCheckpointEngine). verl builds the engine with `CheckpointEngineRegistry.new(backend, ..., **engine_kwargs)`
  where engine_kwargs is `checkpoint_engine.engine_kwargs[backend]` (every actor worker, workers/engine_workers.py:
  680-687; every standalone rollout's CheckpointEngineWorker, checkpoint_engine/base.py:332-339); `passed` holds the
  keywords verl passes itself there.
- `delta`: the encodings DeltaShardedCheckpointEngine asserts (`assert encoding == "indices"`), the rollout names
  CheckpointEngineWorker builds a delta consumer for (the set it compares rollout_config.name with before raising
  NotImplementedError), every `raise` in the `backend == "delta_sharded"` block of vLLMHttpServer.
  _preprocess_engine_kwargs (the vLLM server refuses the delta sync at launch), keyed by what its condition reads,
  and SGLang's PD-disaggregation assert in its delta apply path.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_sync_delta.json"
FOLDER = "checkpoint_engine"
WORKER = "workers/engine_workers.py"
VLLM = "workers/rollout/vllm_rollout/vllm_async_server.py"
VLLM_WTE = "workers/rollout/vllm_rollout/delta_weight_transfer.py"
SGLANG = "workers/rollout/sglang_rollout/sglang_rollout.py"
DELTA = "delta_sharded"
# what a guard's condition reads -> its tag (first match wins: engine_kwargs reads before the rollout's own keys)
GUARD_TAGS = (("verify_every", "verify_every"), ("engine_kwargs.get('data_parallel_size')", "engine_data_parallel_size"),
              ("engine_kwargs.get('pipeline_parallel_size')", "engine_pipeline_parallel_size"),
              ("engine_tp_size", "engine_tensor_parallel_size"), ("moe_backend", "moe_backend"),
              ("enable_eplb", "enable_eplb"), ("disaggregation", "disaggregation"),
              ("data_parallel_size", "data_parallel_size"), ("isinstance(weight_transfer_config", "weight_transfer_type"),
              ("weight_transfer_backend", "weight_transfer_backend"))


def _parse(root: Path, rel: str) -> ast.Module:
    return ast.parse((root / rel).read_text(encoding="utf-8"))


def _init(cls: ast.ClassDef) -> ast.FunctionDef | None:
    return next((b for b in cls.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)


def _registered(cls: ast.ClassDef) -> list[str]:
    return [d.args[0].value for d in cls.decorator_list if isinstance(d, ast.Call)
            and isinstance(d.func, ast.Attribute) and d.func.attr == "register" and d.args
            and isinstance(d.args[0], ast.Constant) and isinstance(d.args[0].value, str)]


def engines(root: Path) -> dict[str, Any]:
    """name -> {params, at}: the keywords each registered engine's constructor takes (union over the classes that
    register the name), following **kwargs into a base class of the same folder."""
    classes: dict[str, tuple[ast.ClassDef, str]] = {}
    for path in sorted((root / FOLDER).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, (node, path.name))

    def params(name: str) -> tuple[set[str], list[str]]:
        cls, file = classes[name]
        init = _init(cls)
        if init is None:
            return set(), []
        a = init.args
        own = {x.arg for x in a.args[1:] + a.kwonlyargs}
        at = [f"{FOLDER}/{file}:{init.lineno}"]
        if a.kwarg is not None:
            for base in cls.bases:
                base_name = ast.unparse(base)
                if base_name in classes:
                    more, more_at = params(base_name)
                    own |= more
                    at += more_at
        return own, at

    out: dict[str, Any] = {}
    for name, (cls, _file) in sorted(classes.items()):
        for reg in _registered(cls):
            got, at = params(name)
            entry = out.setdefault(reg, {"params": [], "at": []})
            entry["params"] = sorted(set(entry["params"]) | got)
            entry["at"] = sorted(set(entry["at"]) | set(at))
    return out


def _new_calls(tree: ast.Module, rel: str) -> list[dict[str, Any]]:
    """`CheckpointEngineRegistry.new(backend, k=..., **engine_kwargs)` calls: where, and the keywords verl passes."""
    return [{"at": f"{rel}:{n.lineno}", "passed": sorted(k.arg for k in n.keywords if k.arg)}
            for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "new" and ast.unparse(n.func.value) == "CheckpointEngineRegistry"
            and any(k.arg is None for k in n.keywords)]


def _encodings(root: Path) -> tuple[list[str], str]:
    rel = f"{FOLDER}/delta_checkpoint_engine.py"
    for node in ast.walk(_parse(root, rel)):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) \
                and ast.unparse(node.test.left) == "encoding":
            values = [c.value for c in node.test.comparators if isinstance(c, ast.Constant)]
            if isinstance(node.test.ops[0], ast.In):
                values = [e.value for c in node.test.comparators for e in getattr(c, "elts", [])]
            return sorted(values), f"{rel}:{node.lineno}"
    raise LookupError("no `assert encoding ...` in DeltaShardedCheckpointEngine")


def _consumers(root: Path) -> tuple[list[str], str]:
    rel = f"{FOLDER}/base.py"
    worker = next(n for n in ast.walk(_parse(root, rel)) if isinstance(n, ast.ClassDef)
                  and n.name == "CheckpointEngineWorker")
    for node in ast.walk(worker):
        if isinstance(node, ast.If) and DELTA in ast.unparse(node.test) and isinstance(node.body[0], ast.Raise):
            names = [e.value for c in ast.walk(node.test) if isinstance(c, ast.Set) for e in c.elts
                     if isinstance(e, ast.Constant)]
            return sorted(names), f"{rel}:{node.lineno}-{node.end_lineno}"
    raise LookupError("no delta_sharded gate in CheckpointEngineWorker.__init__")


def _tag(test: str) -> str:
    return next((tag for needle, tag in GUARD_TAGS if needle in test), "other")


def vllm_guards(root: Path) -> tuple[dict[str, Any], str]:
    fn = next(n for n in ast.walk(_parse(root, VLLM)) if isinstance(n, ast.FunctionDef)
              and n.name == "_preprocess_engine_kwargs")
    block = next(n for n in ast.walk(fn) if isinstance(n, ast.If) and repr(DELTA) in ast.unparse(n.test))
    out: dict[str, Any] = {}
    for node in ast.walk(block):
        if node is block or not isinstance(node, ast.If):
            continue
        raise_ = next((b for b in node.body if isinstance(b, ast.Raise)), None)
        if raise_ is None or not isinstance(raise_.exc, ast.Call):
            continue
        msg = raise_.exc.args[0] if raise_.exc.args else None
        text = ast.unparse(msg) if msg is not None else ""
        out.setdefault(_tag(ast.unparse(node.test)), {"at": f"{VLLM}:{node.lineno}-{raise_.end_lineno}",
                                                      "raises": ast.unparse(raise_.exc.func), "message": text})
    return out, f"{VLLM}:{block.lineno}-{block.end_lineno}"


def _wte_backend(root: Path) -> str:
    for node in ast.walk(_parse(root, VLLM_WTE)):
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == "VERL_DELTA_WEIGHT_TRANSFER_BACKEND"
                                                for t in node.targets) and isinstance(node.value, ast.Constant):
            return str(node.value.value)
    raise LookupError("VERL_DELTA_WEIGHT_TRANSFER_BACKEND not found")


def _sglang_pd(root: Path) -> str:
    for node in ast.walk(_parse(root, SGLANG)):
        if isinstance(node, ast.Assert) and "_pd_role" in ast.unparse(node.test) and node.msg is not None \
                and "delta" in ast.unparse(node.msg):
            return f"{SGLANG}:{node.lineno}"
    raise LookupError("no PD assert in SGLang's delta apply")


def build_from(root: Path) -> dict[str, Any]:
    encodings, enc_at = _encodings(root)
    consumers, gate = _consumers(root)
    guards, block = vllm_guards(root)
    return {"engines": engines(root),
            "new": _new_calls(_parse(root, WORKER), WORKER) + _new_calls(_parse(root, f"{FOLDER}/base.py"),
                                                                           f"{FOLDER}/base.py"),
            "delta": {"encodings": encodings, "encoding_assert": enc_at, "consumers": consumers,
                      "consumer_gate": gate, "vllm_block": block, "vllm_guards": guards,
                      "vllm_weight_transfer_backend": _wte_backend(root), "sglang_pd_assert": _sglang_pd(root)}}


def build() -> dict[str, Any]:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
