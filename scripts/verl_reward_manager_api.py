#!/usr/bin/env python3
"""What verl 0.9.1's reward loop asks of a reward-manager class: writes wizard/check/data/verl_reward_manager_api.json,
read by check's VI706 / VI707.

    python scripts/verl_reward_manager_api.py           # regenerate the table from the installed verl
    python scripts/verl_reward_manager_api.py --check   # exit 1 when the committed table differs

Read with ast from the installed verl (never imported):
- ctor_keywords: the keywords load_reward_manager passes to the class (trainer/ppo/reward.py:152-157:
  config, tokenizer, compute_score, then **reward_kwargs) joined with the keywords RewardLoopWorker._init_reward_fn
  hands load_reward_manager (experimental/reward_loop/reward_loop.py:131-136: reward_router_address,
  reward_model_tokenizer).
- abstract: the abstract methods of RewardManagerBase (experimental/reward_loop/reward_manager/base.py:57-58
  run_single), which the reward loop awaits (reward_loop.py:148, 155).
- loop_classes / legacy_classes: the classes of verl's reward-loop managers (experimental/reward_loop/reward_manager/)
  and of the legacy batch managers (workers/reward_manager/: AbstractRewardManager and its subclasses, whose
  __init__(tokenizer, num_examine, ...) / __call__(data) API main_ppo no longer builds), with their modules.
- score_call: where the reward manager calls the custom reward function with keywords (naive.py), for VI706.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_reward_manager_api.json"
REWARD = "trainer/ppo/reward.py"
LOOP = "experimental/reward_loop/reward_loop.py"
LOOP_PKG = "experimental/reward_loop/reward_manager"
LEGACY_PKG = "workers/reward_manager"


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    raise LookupError(name)


def ctor_call(tree: ast.Module) -> ast.Call:
    """load_reward_manager's `return reward_manager_cls(...)`."""
    fn = _function(tree, "load_reward_manager")
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "reward_manager_cls":
            return node
    raise LookupError("reward_manager_cls(...) not in load_reward_manager")


def worker_call(tree: ast.Module) -> ast.Call:
    """RewardLoopWorker._init_reward_fn's load_reward_manager(...) call."""
    fn = _function(tree, "_init_reward_fn")
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "load_reward_manager":
            return node
    raise LookupError("load_reward_manager(...) not in _init_reward_fn")


def _classes(root: Path, pkg: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted((root / pkg).glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and "RewardManager" in node.name:
                out[node.name] = f"{pkg}/{path.name}:{node.lineno}"
    return out


def _abstract(tree: ast.Module) -> dict[str, str]:
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RewardManagerBase")
    return {item.name: f"{LOOP_PKG}/base.py:{item.lineno}" for item in cls.body
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(ast.unparse(d) in ("abstractmethod", "abc.abstractmethod") for d in item.decorator_list)}


def _init_params(node: ast.ClassDef) -> dict[str, Any] | None:
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            a = item.args
            names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)][1:]
            return {"params": names, "var_kw": a.kwarg is not None}
    return None


def loop_inits(root: Path) -> dict[str, Any]:
    """Each reward-loop manager class's __init__ parameters (its own, else the first verl base that has one)."""
    nodes: dict[str, ast.ClassDef] = {}
    for path in sorted((root / LOOP_PKG).glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                nodes[node.name] = node

    def resolve(name: str, depth: int = 0) -> dict[str, Any] | None:
        node = nodes.get(name)
        if node is None or depth > 8:
            return None
        own = _init_params(node)
        if own is not None:
            return own
        for base in node.bases:
            got = resolve(ast.unparse(base).split(".")[-1], depth + 1)
            if got is not None:
                return got
        return None

    return {name: resolve(name) for name in nodes if "RewardManager" in name}


def loop_uses(tree: ast.Module) -> list[str]:
    """Attributes the reward loop reads from the manager class / instance (self.reward_manager_cls.X,
    self.reward_manager.X)."""
    return sorted({n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                   and ast.unparse(n.value) in ("self.reward_manager_cls", "self.reward_manager")})


def build_from(root: Path) -> dict[str, Any]:
    call = ctor_call(ast.parse((root / REWARD).read_text(encoding="utf-8")))
    wcall = worker_call(ast.parse((root / LOOP).read_text(encoding="utf-8")))
    keywords = [k.arg for k in call.keywords if k.arg] + [k.arg for k in wcall.keywords if k.arg]
    naive = ast.parse((root / LOOP_PKG / "naive.py").read_text(encoding="utf-8"))
    score = [n for n in ast.walk(naive) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "compute_score" and n.keywords]
    return {"ctor_keywords": keywords,
            "ctor_at": [f"{REWARD}:{call.lineno}-{call.end_lineno}", f"{LOOP}:{wcall.lineno}-{wcall.end_lineno}"],
            "loop_init": loop_inits(root),
            "loop_uses": loop_uses(ast.parse((root / LOOP).read_text(encoding="utf-8"))),
            "abstract": _abstract(ast.parse((root / LOOP_PKG / "base.py").read_text(encoding="utf-8"))),
            "loop_classes": _classes(root, LOOP_PKG), "legacy_classes": _classes(root, LEGACY_PKG),
            "loop_module": "verl." + LOOP_PKG.replace("/", "."), "legacy_module": "verl." + LEGACY_PKG.replace("/", "."),
            "score_call": {"at": f"{LOOP_PKG}/naive.py:{score[0].lineno}" if score else None,
                           "keywords": [k.arg for k in score[0].keywords if k.arg] if score else []}}


def build() -> dict[str, Any]:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
