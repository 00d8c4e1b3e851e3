"""Reward classes in the wrong slot or of the wrong API for verl 0.9.1's reward loop (paths under site-packages/verl).

What the reward loop asks of a class is read from verl's source (wizard/check/data/verl_reward_manager_api.json,
written by scripts/verl_reward_manager_api.py); the user's file is read with ast (wizard._pysource), never imported.

- VI706 (error): reward.custom_reward_function.name names a class. verl loads whatever object has that name
  (trainer/ppo/reward.py:70-86, load_extern_object) and uses it as the scoring function: the reward manager calls it
  as compute_score(data_source=, solution_str=, ground_truth=, extra_info=) (reward_loop/reward_manager/naive.py:67-84)
  in the reward worker, so the class's constructor gets those keywords — a TypeError at the first reward, after the
  GPUs are booked — or, if it takes them, an instance comes back where a number or a dict with 'score' belongs
  (naive.py:89-99). A reward-manager class belongs in reward.reward_manager (source=importlib, module.path, name):
  verl#3606 (`custom_reward_function.name=CollabLLMRewardManager`).
- VI707 (error): the reward manager loaded with reward.reward_manager.source=importlib is not a reward-loop manager:
  * it derives from verl's legacy batch managers (workers/reward_manager/: AbstractRewardManager and its subclasses,
    __init__(tokenizer, num_examine, ...) and __call__(data)), which 0.9.1's main_ppo no longer builds (verl#4390); or
  * its __init__ (its own, an in-file base's, or the verl reward-loop base's) does not accept the keywords verl passes:
    load_reward_manager builds it as cls(config=, tokenizer=, compute_score=, **reward_kwargs) (trainer/ppo/reward.py:
    152-157) and the reward worker adds reward_router_address= and reward_model_tokenizer= (reward_loop.py:131-136);
    RewardManagerBase.__init__ takes only (config, tokenizer, compute_score) (reward_manager/base.py:37), so a
    subclass that does not override it fails too; or
  * it has no verl base and lacks a method the loop calls (run_single, reward_loop.py:148/155; assemble_rm_scores,
    :362), or run_single is missing along its in-file chain.
  Each fails when RewardLoopWorker builds or runs it (TypeError / AttributeError in a Ray actor, after the GPUs are
  booked). A class whose bases come from elsewhere (another package) is not judged.
"""

from __future__ import annotations

import ast
import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any

from wizard._pysource import parse_reward_file
from wizard.check.rules.context import Ctx, Facts, local_path
from wizard.check.shellargs import PLACEHOLDER

FN_PATH, FN_NAME = "reward.custom_reward_function.path", "reward.custom_reward_function.name"
RM = "reward.reward_manager"


@functools.lru_cache(maxsize=1)
def api() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_reward_manager_api.json").read_text(encoding="utf-8")
    return json.loads(text)


def _file(c: Ctx, key: str) -> tuple[Path, ast.Module] | None:
    value = c.v(key)
    if not isinstance(value, str) or not value or c.unknown(key) or value.startswith("pkg://") or PLACEHOLDER in value:
        return None
    path = local_path(c, value)
    if path is None or not path.is_file():
        return None
    tree = parse_reward_file(path)
    return (path, tree) if tree is not None else None


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted origin, for the file's top-level imports."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.asname and a.name or a.name.split(".")[0]
    return out


def _origin(base: ast.expr, imports: dict[str, str]) -> str | None:
    text = ast.unparse(base)
    head, _, rest = text.partition(".")
    if head not in imports:
        return None
    return imports[head] + ("." + rest if rest else "")


def _verl_base(origin: str) -> tuple[str, str] | None:
    """('legacy' | 'loop', class name) when `origin` is one of verl's reward-manager classes."""
    t = api()
    mod, _, name = origin.rpartition(".")
    if mod.startswith(t["legacy_module"]) and name in t["legacy_classes"]:
        return "legacy", name
    if mod.startswith(t["loop_module"]) and name in t["loop_classes"]:
        return "loop", name
    return None


def _walk(name: str, classes: dict[str, ast.ClassDef], imports: dict[str, str], depth: int = 0
          ) -> tuple[list[ast.ClassDef], list[tuple[str, str]], bool]:
    """The in-file class chain of `name` (itself first), the verl bases it reaches, and whether a base of unknown
    origin was met."""
    node = classes.get(name)
    if node is None or depth > 8:
        return [], [], True
    chain, verl, unknown = [node], [], False
    for base in node.bases:
        text = ast.unparse(base)
        if text in ("object", "ABC", "abc.ABC"):
            continue
        if text in classes and text != name:
            sub, v, u = _walk(text, classes, imports, depth + 1)
            chain += sub
            verl += v
            unknown |= u
            continue
        origin = _origin(base, imports)
        found = _verl_base(origin) if origin else None
        if found is None:
            unknown = True
        else:
            verl.append(found)
    return chain, verl, unknown


def _method(chain: list[ast.ClassDef], name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in chain:
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                return item
    return None


def _refused(fn: ast.FunctionDef | ast.AsyncFunctionDef, passed: list[str]) -> tuple[list[str], list[str]]:
    """(keywords verl passes that __init__ does not take, parameters it requires that verl never passes)."""
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args)][1:]
    posonly = {x.arg for x in a.posonlyargs}
    kwonly = [x.arg for x in a.kwonlyargs]
    takes = {n for n in names if n not in posonly} | set(kwonly)
    extra = [] if a.kwarg is not None else [k for k in passed if k not in takes]
    required = names[:len(names) - len(a.defaults)] + [k for k, d in zip(kwonly, a.kw_defaults) if d is None]
    return extra, [p for p in required if p not in passed]


def rule_reward_classes(c: Ctx, f: Facts) -> None:
    _rule_class_as_function(c)
    if c.v(f"{RM}.source") == "importlib" and not c.unknown(f"{RM}.source", f"{RM}.name"):
        _rule_manager_api(c)


def _rule_class_as_function(c: Ctx) -> None:
    got = _file(c, FN_PATH)
    name = c.v(FN_NAME) or "compute_score"
    if got is None or not isinstance(name, str) or c.unknown(FN_NAME):
        return
    path, tree = got
    node = _classes(tree).get(name)
    if node is None:
        return
    t = api()
    _, verl, _ = _walk(name, _classes(tree), _imports(tree))
    manager = bool(verl) or "RewardManager" in name
    hint = (f"a reward manager goes in {RM}: {RM}.source=importlib {RM}.module.path={c.v(FN_PATH)} {RM}.name={name}, "
            f"and {FN_PATH} / {FN_NAME} name a scoring function or are left unset" if manager else
            f"set {FN_NAME} to a function fn(data_source, solution_str, ground_truth, extra_info=None, **kwargs) "
            "that returns a number or a dict with 'score'")
    c.add("VI706", "error", (FN_NAME, FN_PATH),
          f"{FN_NAME}={name!r} is a class in {path.name} (line {node.lineno}), not a scoring function: verl calls it "
          f"as compute_score({', '.join(k + '=' for k in t['score_call']['keywords'])}) in the reward worker "
          f"({t['score_call']['at']}), so the class is constructed with those keywords (TypeError at the first "
          "reward) and its instance is no score", hint)


def _rule_manager_api(c: Ctx) -> None:
    got = _file(c, f"{RM}.module.path")
    name = c.v(f"{RM}.name")
    if got is None or not isinstance(name, str):
        return
    path, tree = got
    classes = _classes(tree)
    if name not in classes:
        return  # VI873 says so
    t = api()
    chain, verl, unknown = _walk(name, classes, _imports(tree))
    keys = (f"{RM}.name", f"{RM}.module.path")
    where = f"{name} ({path.name}:{classes[name].lineno})"
    legacy = [n for kind, n in verl if kind == "legacy"]
    if legacy:
        c.add("VI707", "error", keys,
              f"{RM}.name={name!r}: {where} derives from verl's legacy batch manager {legacy[0]} "
              f"({t['legacy_classes'][legacy[0]]}), which 0.9.1's reward loop cannot build or call: it constructs "
              f"the class as cls({', '.join(k + '=' for k in t['ctor_keywords'])}) ({', '.join(t['ctor_at'])}) "
              f"and awaits run_single per sample ({t['abstract'].get('run_single', 'reward_manager/base.py')})",
              f"port it to RewardManagerBase (from {t['loop_module']}.base import RewardManagerBase): "
              "__init__(self, config, tokenizer, compute_score, reward_router_address=None, "
              "reward_model_tokenizer=None) and async run_single(self, data) returning {'reward_score': ..., "
              "'reward_extra_info': {...}}")
        return
    if unknown:
        return
    init = _method(chain, "__init__")
    passed = list(t["ctor_keywords"])
    if init is not None:
        extra, missing = _refused(init, passed)
    elif verl:
        inherited = t["loop_init"].get(verl[0][1]) or {"params": [], "var_kw": True}
        extra = [] if inherited["var_kw"] else [k for k in passed if k not in inherited["params"]]
        missing = []
    else:
        extra, missing = [], []  # object.__init__ would refuse every keyword; said below with the missing methods
    absent = [m for m in t["loop_uses"] if _method(chain, m) is None] if not verl else \
        [m for m in t["abstract"] if _method(chain, m) is None and verl[0][1] == "RewardManagerBase"]
    if not (extra or missing or absent):
        return
    parts = []
    if extra:
        parts.append(f"its __init__ does not take {', '.join(extra)}, which verl passes ({', '.join(t['ctor_at'])})")
    if missing:
        parts.append(f"its __init__ requires {', '.join(missing)}, which verl never passes")
    if absent:
        parts.append(f"it defines no {', '.join(absent)}, which the reward loop calls")
    c.add("VI707", "error", keys, f"{RM}.name={name!r}: {where} is no reward-loop manager verl can build: "
          + "; ".join(parts) + " (TypeError / AttributeError in the reward worker, after the GPUs are booked)",
          "subclass RewardManagerBase (or one of verl's reward-loop managers) with __init__(self, config, tokenizer, "
          "compute_score, reward_router_address=None, reward_model_tokenizer=None, **kwargs) and async "
          "run_single(self, data)")
