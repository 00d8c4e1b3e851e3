#!/usr/bin/env python3
"""Which rollout sampling settings reach the engine in verl 0.9.1: writes wizard/check/data/verl_sampling_reach.json,
read by check's VI608 and VI609.

    python scripts/verl_sampling_reach.py           # regenerate the table from the installed verl
    python scripts/verl_sampling_reach.py --check   # exit 1 when the committed table differs

`pinned`: every vLLM / SGLang / TensorRT-LLM rollout goes through an agent loop whose generate_sequences builds one
`sampling_params = dict(...)` for all requests (experimental/agent_loop/agent_loop.py:590-596, and the V1 trainer's
trainer/ppo/v1/agent_loop_tq.py:64-70). A keyword of that call given a constant while RolloutConfig
(workers/config/rollout.py) has a field of the same name is pinned: the user's value never enters the request, and the
servers' own fallbacks from the config (`sampling_params.setdefault("repetition_penalty", self.config.get(...))`,
workers/rollout/vllm_rollout/vllm_async_server.py:623) find the key already there. In 0.9.1 that is
repetition_penalty=1.0 (agent_loop.py:594, agent_loop_tq.py:68).

`server_reads`: for each rollout engine (the folders workers/rollout/<engine>_rollout/), the lines of its modules that
read the determinism keys `seed` and `full_determinism` from the rollout config (`self.config.X`, `config.X`,
`.get("X")`). In 0.9.1 only vLLM's server reads them (vllm_async_server.py:150-156 enable_full_determinism and the
replica seed, :343 the engine seed, :625-627 the per-request seed); SGLang's and TensorRT-LLM's servers read neither.
The trainer entry point reads both for every engine (trainer/main_ppo.py:47-50), but only to export
VLLM_BATCH_INVARIANT and PYTHONHASHSEED, hence the per-engine table (VI890 sees main_ppo's read and stays silent).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_sampling_reach.json"
LOOPS = ("experimental/agent_loop/agent_loop.py", "trainer/ppo/v1/agent_loop_tq.py")
CONFIG = "workers/config/rollout.py"
ROLLOUT_DIR = "workers/rollout"
DETERMINISM = ("seed", "full_determinism")


def config_fields(tree: ast.Module, cls: str = "RolloutConfig") -> set[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    raise LookupError(f"{cls} not found")


def sampling_dict(tree: ast.Module) -> ast.Call:
    """The `sampling_params = dict(...)` call in a generate_sequences of this agent-loop module."""
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == "generate_sequences":
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                        and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "sampling_params" \
                        and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "dict":
                    return node.value
    raise LookupError("sampling_params = dict(...) not found in generate_sequences")


def pinned_from(trees: dict[str, ast.Module], fields: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rel, tree in trees.items():
        for kw in sampling_dict(tree).keywords:
            if kw.arg in fields and isinstance(kw.value, ast.Constant):
                entry = out.setdefault(kw.arg, {"value": kw.value.value, "sites": []})
                entry["sites"].append(f"{rel}:{kw.value.lineno}")
    return dict(sorted(out.items()))


def _read_key(node: ast.AST) -> str | None:
    """X for `<...>config.X` or `<...>config.get("X", ...)`, else None."""
    if isinstance(node, ast.Attribute) and ast.unparse(node.value).split(".")[-1] == "config":
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and ast.unparse(node.func.value).split(".")[-1] == "config" and node.args \
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def reads_from(files: dict[str, ast.Module], keys: tuple[str, ...]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {k: [] for k in keys}
    for rel, tree in sorted(files.items()):
        for node in ast.walk(tree):
            k = _read_key(node)
            if k in out:
                out[k].append(f"{rel}:{node.lineno}")
    return {k: sorted(set(v), key=lambda s: (s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1]))) for k, v in out.items()}


def build_from(root: Path) -> dict[str, Any]:
    fields = config_fields(ast.parse((root / CONFIG).read_text(encoding="utf-8")))
    loops = {rel: ast.parse((root / rel).read_text(encoding="utf-8")) for rel in LOOPS}
    engines: dict[str, Any] = {}
    for folder in sorted((root / ROLLOUT_DIR).glob("*_rollout")):
        files = {str(p.relative_to(root)): ast.parse(p.read_text(encoding="utf-8"))
                 for p in sorted(folder.rglob("*.py"))}
        engines[folder.name[: -len("_rollout")]] = reads_from(files, DETERMINISM)
    return {"pinned": pinned_from(loops, fields), "server_reads": engines}


def build() -> dict[str, Any]:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
