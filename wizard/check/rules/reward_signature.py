"""What verl 0.9.1 calls a custom reward function with and what it does with the answer, against the function's own
definition (VI647, VI653; paths under site-packages/verl).

- The function named by reward.custom_reward_function.path / .name is loaded by `get_custom_reward_fn`
  (trainer/ppo/reward.py:50-86) and wrapped in `_call_with_kwargs` (:32-38), which adds the keys of
  reward.custom_reward_function.reward_kwargs (:82) as keywords. Every registered reward-loop manager then calls it
  with keywords only: `self.compute_score(data_source=, solution_str=, ground_truth=, extra_info=, **extra)`
  (experimental/reward_loop/reward_manager/naive.py:66-84; dapo.py:76-92, gdpo.py:60-76, limited.py:379-394,
  remote.py:109-115), where `extra` is the reward model's router pair, VI887/VI888's concern. The managers run inside
  the reward-loop workers (experimental/reward_loop/reward_loop.py:131), so a signature that does not fit fails with
  TypeError at the first reward, after the cluster, the policy and the rollout engines are up.
  The keywords are derived, not tabulated: `call_keywords` parses verl's own manager modules (found with importlib,
  never imported) and collects, for each `@register`ed class, the keyword names of its `compute_score(...)` /
  `compute_score.remote(...)` calls.
- VI647 (error): the function takes no **kwargs and (a) a keyword verl passes (those above, plus each reward_kwargs
  key) is none of its parameters — "got an unexpected keyword argument" (verl#3374: verl's own
  utils/reward_score/gsm8k.py:52 `compute_score(solution_str, ground_truth, ...)` used as the custom function), or
  (b) a parameter without a default is none of those keywords, or positional-only — "missing required argument"
  (verl PR#2954: `custom_compute_score(data_source, prompt_str, ...)`). Checked only for a `register` manager (an
  importlib manager calls the function its own way) and a plain, undecorated top-level `def` (an alias, a partial
  or a decorator's wrapper is not read).
- VI653: a `return` of the function is a dict literal that lacks "score" (error: the managers read `result["score"]`,
  naive.py:89-90; dapo.py:99, gdpo.py:83, limited.py:442, remote.py:121: KeyError at the first reward), or one that
  holds (error when validation runs, else warning) a value that is itself a dict literal or comprehension (e.g.
  `{"score": s, "reward_extra_info": {...}}`, verl#2279). verl does not unpack it: every key of the dict becomes a
  reward_extra_info column (naive.py:91-92), validation collects them (trainer/ppo/v1/trainer_base.py:1136-1139) and
  `process_validation_metrics` (trainer/ppo/metric_utils.py:1017) takes np.mean over the values: TypeError on dicts,
  at the first validation (trainer.val_before_train, default true, or every trainer.test_freq steps).
- VI653 (error), a third form: the function's returns give different reward_extra_info key sets (every return a
  number or a dict literal with constant keys, and not all the same set; a number counts as {'acc'}, naive.py:93-95,
  as dapo.py:104, gdpo.py:88, limited.py:447, remote.py:126). verl takes the column names from the batch's first
  sample and indexes every other with info[key] (experimental/reward_loop/reward_loop.py:365-369; the streaming path,
  experimental/agent_loop/agent_loop.py:1108-1111): KeyError as soon as a sample lacks a key the first one has, and
  keys only later samples have are dropped (verl PR#6545). The test runs verl's own manager and assembly on the CPU.
The file is read as text (bounded) and parsed with `ast`, never imported.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from wizard._pysource import own_returns, top_level_function
from wizard.check.rules.context import Ctx, Facts, local_path, parse_module
from wizard.check.rules.reward_managers import register_names, registered_name, manager_folder

FN = "reward.custom_reward_function"
MANAGER = "reward.reward_manager"
ROUTER_KWARGS = frozenset({"reward_router_address", "reward_model_tokenizer"})  # VI887 / VI888


def _score_call_keywords(cls: ast.ClassDef) -> tuple[frozenset[str], int] | None:
    """(keyword names, line of the first call) of the class's `....compute_score(...)` / `compute_score.remote(...)`
    calls; None when it makes none."""
    names: set[str] = set()
    line = 0
    for node in ast.walk(cls):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        f = node.func
        if f.attr == "remote" and isinstance(f.value, ast.Attribute):
            f = f.value
        if f.attr != "compute_score":
            continue
        names |= {k.arg for k in node.keywords if k.arg is not None}
        line = line or node.lineno
    return (frozenset(names), line) if names else None


@functools.lru_cache(maxsize=1)
def call_keywords() -> dict[str, tuple[frozenset[str], str]]:
    """{registered manager name: (the keywords it calls the reward function with, "file:line")} of the installed
    verl; {} without verl."""
    folder = manager_folder()
    if folder is None:
        return {}
    out: dict[str, tuple[frozenset[str], str]] = {}
    for path in sorted(folder.glob("*.py")):
        try:
            tree = parse_module(path, 4 << 20)
        except SyntaxError:
            continue
        if tree is None:
            continue
        register = register_names(tree)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                name = registered_name(node, register)
                found = _score_call_keywords(node) if name else None
                if name and found:
                    out[name] = (found[0], f"{path.name}:{found[1]}")
    return out


def rule_reward_signature(c: Ctx, f: Facts) -> None:
    path, name = c.v(f"{FN}.path"), c.v(f"{FN}.name") or "compute_score"
    if not isinstance(path, str) or not path or c.unknown(f"{FN}.path", f"{FN}.name"):
        return
    if c.src.entry in ("sft", "generation", "eval") or getattr(c.src, "recipe", None):
        return
    local = local_path(c, path)
    fn = top_level_function(local, str(name)) if local is not None and local.is_file() else None
    if fn is None:
        return
    source, manager = c.v(f"{MANAGER}.source") or "register", c.v(f"{MANAGER}.name") or "naive"
    if source != "register" or c.unknown(f"{MANAGER}.source", f"{MANAGER}.name"):
        return  # an importlib manager calls the function and reads its answer its own way
    if str(manager) not in call_keywords():
        return  # no verl here, or a name verl does not register (VI809's)
    _rule_signature(c, fn, Path(path).name, str(manager))
    _rule_returns(c, fn, Path(path).name)


def _reward_kwargs(c: Ctx) -> set[str]:
    prefix = f"{FN}.reward_kwargs."
    return {k[len(prefix):].split(".", 1)[0] for k in c.res.flat if k.startswith(prefix)}


def _rule_signature(c: Ctx, fn: ast.FunctionDef | ast.AsyncFunctionDef, file: str, manager: str) -> None:
    known = call_keywords().get(manager)
    if known is None:
        return
    passed, where = known
    passed = (set(passed) - ROUTER_KWARGS) | _reward_kwargs(c)
    a = fn.args
    if a.kwarg is not None or fn.decorator_list:
        return  # **kwargs takes anything; a decorator may change what the name is called with
    positional = a.posonlyargs + a.args
    defaults = {p.arg for p in positional[len(positional) - len(a.defaults):]} if a.defaults else set()
    defaults |= {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
    keyword_params = {p.arg for p in a.args + a.kwonlyargs}
    unexpected = sorted(passed - keyword_params)
    missing = [p.arg for p in positional + a.kwonlyargs
               if p.arg not in defaults and (p.arg not in passed or p in a.posonlyargs)]
    missing = [m for m in missing if m not in ROUTER_KWARGS]  # VI888's
    if not unexpected and not missing:
        return
    what = []
    if unexpected:
        what.append(f"does not take {', '.join(unexpected)}")
    if missing:
        what.append(f"requires {', '.join(missing)}, which verl never passes")
    sig = ", ".join(sorted(passed))
    c.add("VI647", "error", (f"{FN}.path", f"{FN}.name", f"{MANAGER}.name"),
          f"{file}:{fn.name} {' and '.join(what)}: the {manager!r} reward manager calls it with keywords {sig} only "
          f"({where}; trainer/ppo/reward.py:32-38 adds {FN}.reward_kwargs): TypeError at the first reward, inside the "
          "reward-loop worker",
          f"define it as `def {fn.name}(data_source, solution_str, ground_truth, extra_info=None, **kwargs)` (a "
          "scorer of verl's own, e.g. utils/reward_score/gsm8k.py, is called from such a wrapper), or give the "
          "extra parameters defaults")


NESTED = (ast.Dict, ast.DictComp)


def _rule_returns(c: Ctx, fn: ast.FunctionDef | ast.AsyncFunctionDef, file: str) -> None:
    lacking, nested = [], []
    for ret in own_returns(fn):
        value = ret.value
        if not isinstance(value, ast.Dict) or any(k is None for k in value.keys):
            continue  # a number, a variable, a call, or **unpacking: not read
        keys = [k.value if isinstance(k, ast.Constant) else None for k in value.keys]
        if "score" not in keys and all(isinstance(k, str) for k in keys):
            lacking.append(ret.lineno)
        nested += [(k, ret.lineno) for k, v in zip(keys, value.values) if isinstance(k, str) and isinstance(v, NESTED)]
    keys = (f"{FN}.path", f"{FN}.name")
    _rule_key_sets(c, fn, file)
    if lacking:
        c.add("VI653", "error", keys,
              f"{file}:{fn.name} returns a dict without a 'score' key (line {', '.join(map(str, lacking))}): verl's "
              "reward managers read result['score'] (reward_manager/naive.py:89-90): KeyError at the first reward",
              "put the reward under 'score' (other keys are logged as extra info), or return the float itself")
    if nested:
        val_runs = c.v("trainer.val_before_train") is not False or (c.v("trainer.test_freq") or -1) > 0
        shown = ", ".join(f"'{k}' (line {line})" for k, line in nested)
        c.add("VI653", "error" if val_runs and c.v("data.val_files") else "warning", keys,
              f"{file}:{fn.name} returns a dict whose {shown} is itself a dict: verl does not unpack it, every "
              "key becomes one reward_extra_info value (naive.py:91-92) and validation's process_validation_metrics "
              "takes np.mean of them (trainer/ppo/metric_utils.py:1017): TypeError at the first validation, and the "
              "parts are never logged (verl#2279)",
              "return a flat dict: {'score': total, 'reward_1': r1, 'reward_2': r2} (each extra key a number or "
              "a string)")


def _extra_keys(value: ast.expr | None) -> frozenset[str] | None:
    """The reward_extra_info keys verl makes of one returned value: a number -> {'acc'}, a dict literal with constant
    string keys -> those keys; None when it cannot be told from the source."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.USub, ast.UAdd)):
        value = value.operand
    if isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) and not isinstance(value.value, bool):
        return frozenset({"acc"})
    if isinstance(value, ast.Dict) and value.keys and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                          for k in value.keys):
        return frozenset(k.value for k in value.keys)
    return None


def _rule_key_sets(c: Ctx, fn: ast.FunctionDef | ast.AsyncFunctionDef, file: str) -> None:
    sets = [(_extra_keys(r.value), r.lineno) for r in own_returns(fn)]
    if len(sets) < 2 or any(k is None for k, _ in sets) or len({k for k, _ in sets}) < 2:
        return
    shown = "; ".join(f"line {line}: {{{', '.join(sorted(k))}}}" for k, line in sorted(sets, key=lambda x: x[1]))
    c.add("VI653", "error", (f"{FN}.path", f"{FN}.name"),
          f"{file}:{fn.name} gives different reward_extra_info keys on different paths ({shown}; a number becomes "
          "{acc}): verl names the columns after the batch's first sample and reads info[key] from every other "
          "(reward_loop.py:365-369, agent_loop.py:1108-1111): KeyError once a sample lacks one, and keys only later "
          "samples have are dropped (verl PR#6545)",
          "return the same dict keys on every path (e.g. {'score': s, 'pred': p or '', 'acc': s} everywhere, a "
          "placeholder where a value is missing)")
