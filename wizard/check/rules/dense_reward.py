"""A custom reward function that returns token-level (dense, per-step) rewards, which verl 0.9.1's reward loop takes as
one number per response (paths under site-packages/verl).

- VI628 (error): reward.custom_reward_function names a function that returns a list, tuple or comprehension (one value
  per token or per reasoning step, a process-reward style score), directly or as the dict's "score". Every reward
  manager verl registers takes `result["score"]` of a dict or the result itself as the sample's one score
  (experimental/reward_loop/reward_manager/naive.py:88-99, dapo.py:97-106, gdpo.py:83-90, limited.py:442-449,
  remote.py:121-128) and verl writes that one value at the response's last token: the reward loop's
  `assemble_rm_scores` (reward_manager/base.py:62-82: `rm_scores.new_tensor(scores)` at valid_response_length - 1)
  and the agent loop (experimental/agent_loop/agent_loop.py:103 `reward_score: Optional[float]`, :144-147
  `rm_scores[-1] = reward_score`, :1093-1098). A list per sample fails there (ValueError "expected sequence of
  length ..." or RuntimeError "shape mismatch"), at the first reward, in the reward workers after the cluster, the
  model and a whole rollout are up. verl has no token-level return from a reward function (verl#3683, verl#1039: a
  rule-based PRM); per-step credit needs a reward manager of one's own (reward.reward_manager.source=importlib) or a
  scalar (e.g. the mean or the minimum of the step scores). The function is read with wizard._pysource (never
  imported); said only when a `return` of it gives such a value as written: a list/tuple literal or comprehension,
  `list(...)`, a name the function binds only to those, a call of a top-level function of the same file whose every
  return is one, or a dict literal whose "score" is one. A reward manager of the user's own is not judged.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

from wizard._pysource import own_returns, parse_reward_file
from wizard.check.rules.context import Ctx, Facts, local_path

FN = "reward.custom_reward_function"
MANAGER = "reward.reward_manager"
WHERE = "experimental/reward_loop/reward_manager/"
_SEQ = (ast.List, ast.ListComp, ast.Tuple, ast.GeneratorExp)
_DEPTH = 3  # helper calls followed (a function that calls a function that builds the list)


def rule_dense_reward(c: Ctx, f: Facts) -> None:
    path = c.v(f"{FN}.path")
    if not isinstance(path, str) or not path or c.unknown(f"{FN}.path", f"{FN}.name", f"{MANAGER}.source"):
        return
    if (c.v(f"{MANAGER}.source") or "register") != "register":
        return  # a manager of the user's own may place per-token values itself
    name = str(c.v(f"{FN}.name") or "compute_score")
    local = local_path(c, path)
    tree = parse_reward_file(local) if local is not None and local.is_file() else None
    if tree is None:
        return
    found = _dense_return(tree, name)
    if found is None:
        return
    line, how = found
    c.add("VI628", "error", (f"{FN}.path", f"{FN}.name"),
          f"{FN}: {Path(path).name}:{name} returns {how} (line {line}), one value per token or step, but verl 0.9.1 "
          f"takes one number per response (the dict's 'score' or the value itself, {WHERE}naive.py:88-99) and writes "
          f"it at the last response token ({WHERE}base.py:79-81, experimental/agent_loop/agent_loop.py:144-147): "
          "the list fails there (ValueError/RuntimeError) at the first reward, after the cluster and a rollout are up "
          "(verl#3683)",
          f"return one float per response from {name} (e.g. the mean or the minimum of the step scores, with the "
          "step scores as other dict keys for logging), or place per-token rewards in a reward manager of your own "
          f"({MANAGER}.source=importlib)")


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's top-level functions, the last binding of each name (the one an import sees)."""
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.pop(target.id, None)
    return out


def _dense_return(tree: ast.Module, name: str) -> Optional[tuple[int, str]]:
    """(line, what) of the first `return` of top-level `name` that gives a sequence as written (or a dict whose
    "score" is one); None when none does or the function is not a plain top-level def."""
    fns = _functions(tree)
    fn = fns.get(name)
    if fn is None or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for s in fn.body for n in ast.walk(s)):
        return None
    for ret in sorted(own_returns(fn), key=lambda r: r.lineno):
        value = ret.value
        if isinstance(value, ast.Dict):
            score = next((v for k, v in zip(value.keys, value.values)
                          if isinstance(k, ast.Constant) and k.value == "score"), None)
            if score is not None and _sequence(score, fn, fns, _DEPTH):
                return ret.lineno, "a dict whose 'score' is a list"
        elif value is not None and _sequence(value, fn, fns, _DEPTH):
            return ret.lineno, "a list"
    return None


def _sequence(node: ast.AST, fn: ast.AST, fns: dict, depth: int) -> bool:
    """Whether `node`, in function `fn`, is a list/tuple as written (see the module docstring)."""
    if isinstance(node, _SEQ):
        return not (isinstance(node, ast.Tuple) and not node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in ("list", "tuple", "sorted"):
            return True
        helper = fns.get(node.func.id)
        if helper is not None and helper is not fn and depth > 0:
            returns = own_returns(helper)
            return bool(returns) and all(r.value is not None and _sequence(r.value, helper, fns, depth - 1)
                                         for r in returns)
        return False
    if isinstance(node, ast.Name):
        bound = _bindings(fn, node.id)
        return bool(bound) and all(b is not None and _sequence(b, fn, fns, depth) for b in bound)
    return False


def _bindings(fn: ast.AST, name: str) -> list[Optional[ast.AST]]:
    """The values `name` is bound to in `fn`'s own body (None for a binding that is not a plain `name = value`: a
    parameter, a loop target, an augmented assignment, a with/except target, an unpacking)."""
    out: list[Optional[ast.AST]] = []
    args = getattr(fn, "args", None)
    if args is not None and name in {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                                                     *([args.vararg] if args.vararg else []),
                                                     *([args.kwarg] if args.kwarg else [])]}:
        out.append(None)
    stack = list(getattr(fn, "body", []))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    out.append(node.value)
                elif any(isinstance(t, ast.Name) and t.id == name for t in ast.walk(target)):
                    out.append(None)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            out.append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr)):
            target = getattr(node, "target", None) or getattr(node, "optional_vars", None)
            if target is not None and any(isinstance(t, ast.Name) and t.id == name for t in ast.walk(target)):
                # `x += [..]` keeps a list a list; anything else is not told
                keeps = isinstance(node, ast.AugAssign) and isinstance(node.value, _SEQ)
                if not keeps:
                    out.append(None)
        stack.extend(ast.iter_child_nodes(node))
    return out
