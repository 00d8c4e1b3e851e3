#!/usr/bin/env python3
"""Where verl 0.9.1 hands rollout.load_format and the replica topology to its inference engines: writes
wizard/check/data/verl_vllm_rollout_loading.json, read by check's VI414 (a `dummy*` load_format other than `dummy`)
and VI415 (a vLLM parallel size set through engine_kwargs.vllm).

    python scripts/verl_vllm_rollout_loading.py           # regenerate the table from the installed verl
    python scripts/verl_vllm_rollout_loading.py --check   # exit 1 when the committed table differs

Read with ast from the installed verl (paths under site-packages/verl):
- `load_format`: the default of RolloutConfig.load_format (workers/config/rollout.py); for each engine server the
  line of its args literal that passes `self.config.load_format` verbatim (vllm_async_server.py,
  async_sglang_server.py, trtllm_async_server.py); the string verl itself compares load_format with
  (`self.config.load_format != "dummy"`, trtllm_async_server.py) and the substring test its weight sync keys on
  (`"dummy" not in self.config.rollout.load_format`, workers/engine_workers.py).
- `topology`: the rollout-config factors RolloutReplica multiplies into a replica's world size (workers/rollout/
  replica.py `self.world_size = (...)`), with the vLLM argument each becomes (verl's `_model_` dropped:
  tensor_model_parallel_size -> tensor_parallel_size); the `*_parallel_size` keys vLLMHttpServer.
  _preprocess_engine_kwargs reads from engine_kwargs (`engine_kwargs.get("...")`, the guard verl wrote because
  engine_kwargs "is forwarded verbatim to vLLM" and topology overrides "bypass VERL's worker and IPC mapping");
  and the line of RolloutConfig.__post_init__ that refuses pipeline_model_parallel_size > 1.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_vllm_rollout_loading.json"
CONFIG = "workers/config/rollout.py"
SERVERS = {"vllm": "workers/rollout/vllm_rollout/vllm_async_server.py",
           "sglang": "workers/rollout/sglang_rollout/async_sglang_server.py",
           "trtllm": "workers/rollout/trtllm_rollout/trtllm_async_server.py"}
WORKERS = "workers/engine_workers.py"
REPLICA = "workers/rollout/replica.py"


def _tree(root: Path, rel: str) -> ast.Module:
    return ast.parse((root / rel).read_text(encoding="utf-8"))


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(name)


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
            return item
    raise LookupError(f"{cls.name}.{name}")


def _default(root: Path) -> str:
    for item in _class(_tree(root, CONFIG), "RolloutConfig").body:
        if isinstance(item, ast.AnnAssign) and ast.unparse(item.target) == "load_format":
            assert isinstance(item.value, ast.Constant)
            return str(item.value.value)
    raise LookupError("RolloutConfig.load_format")


def _verbatim(root: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for engine, rel in SERVERS.items():
        for node in ast.walk(_tree(root, rel)):
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and k.value == "load_format" \
                            and ast.unparse(v) == "self.config.load_format":
                        out.setdefault(engine, {"file": rel.rsplit("/", 1)[-1], "line": k.lineno})
    return out


def _compared(root: Path) -> dict[str, Any]:
    """`self.config.load_format != "<name>"` in the servers, `"<name>" not in ...load_format` in the workers."""
    names: dict[str, Any] = {}
    for rel in [*SERVERS.values(), WORKERS]:
        for node in ast.walk(_tree(root, rel)):
            if isinstance(node, ast.Compare) and len(node.comparators) == 1:
                left, right = node.left, node.comparators[0]
                pair = [(left, right), (right, left)]
                for a, b in pair:
                    if ast.unparse(a).endswith("load_format") and isinstance(b, ast.Constant) \
                            and isinstance(b.value, str):
                        names.setdefault("equals", {"name": b.value, "file": rel.rsplit("/", 1)[-1],
                                                    "line": node.lineno})
                    if isinstance(node.ops[0], (ast.In, ast.NotIn)) and isinstance(a, ast.Constant) \
                            and ast.unparse(b).endswith("load_format"):
                        names.setdefault("contains", {"name": a.value, "file": rel.rsplit("/", 1)[-1],
                                                      "line": node.lineno})
    return names


def _world_size(root: Path) -> dict[str, Any]:
    init = _method(_class(_tree(root, REPLICA), "RolloutReplica"), "__init__")
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "self.world_size":
            factors = [n.attr for n in ast.walk(node.value)
                       if isinstance(n, ast.Attribute) and ast.unparse(n.value) == "self.config"]
            return {"line": node.lineno, "end_line": node.end_lineno,
                    "factors": {f: f.replace("_model_", "_") for f in factors}}
    raise LookupError("RolloutReplica.world_size")


def _guarded(root: Path) -> dict[str, int]:
    fn = _method(_class(_tree(root, SERVERS["vllm"]), "vLLMHttpServer"), "_preprocess_engine_kwargs")
    out: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "engine_kwargs.get" and node.args \
                and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).endswith("_parallel_size"):
            out.setdefault(str(node.args[0].value), node.lineno)
    return out


def _pp_refused(root: Path) -> int:
    post = _method(_class(_tree(root, CONFIG), "RolloutConfig"), "__post_init__")
    for node in ast.walk(post):
        if isinstance(node, ast.If) and "pipeline_model_parallel_size > 1" in ast.unparse(node.test):
            return node.lineno
    raise LookupError("RolloutConfig pipeline_model_parallel_size refusal")


def build_from(root: Path) -> dict[str, Any]:
    return {"load_format": {"default": _default(root), "verbatim": _verbatim(root), "compared": _compared(root)},
            "topology": {"world_size": _world_size(root), "engine_kwargs_guard": _guarded(root),
                         "pp_refused_line": _pp_refused(root)}}


def build() -> dict[str, Any]:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
