"""Signal-based timeouts in a custom reward function, of verl 0.9.1 (paths under site-packages/verl).

- VI765 (warning): the file at reward.custom_reward_function.path calls signal.signal / signal.alarm /
  signal.setitimer inside a function, or math_verify's parse / verify without disabling their timeout
  (parsing_timeout=None / timeout_seconds=None; math_verify 0.9 parser.py:657, grader.py:762) or math_metric (whose
  scorer always times out with signal.alarm: math_verify/metric.py:44), and the named function is synchronous.
  verl's reward-loop managers call a synchronous compute_score with `self.loop.run_in_executor(None, ...)`, in a
  worker thread (experimental/reward_loop/reward_manager/naive.py:74-84; dapo.py:84, gdpo.py:68, limited.py:387,
  remote.py the same), and Python's signal.signal raises ValueError("signal only works in main thread of the main
  interpreter") there. math_verify catches it and returns no match: every reward is 0 with no error (verl PR#5635
  moved verl's own utils/reward_score/math_verify.py:33-62 to a process pool for this reason). The file is parsed
  with ast, never imported; silent when the function is `async def` or the file uses a process pool (as verl's
  own scorer now does); `check --deep` calls the function in a worker thread as verl does (VI875).
"""

from __future__ import annotations

import ast
from pathlib import Path

from wizard.check.rules.context import Ctx, Facts, local_path, parse_module

KEY = "reward.custom_reward_function.path"
SIGNAL_CALLS = {"signal", "alarm", "setitimer"}
# math_verify function -> the argument that turns its signal.alarm timeout off (None or <= 0), or None: no such argument
MATH_VERIFY = {"parse": "parsing_timeout", "verify": "timeout_seconds", "math_metric": None}


def _imported(tree: ast.Module) -> dict[str, str]:
    """local name -> 'signal.<fn>' / 'math_verify.<fn>' / the module, for names bound by imports."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ("signal", "math_verify"):
                    names[(a.asname or a.name).split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("signal", "math_verify"):
            for a in node.names:
                names[a.asname or a.name] = f"{node.module.split('.')[0]}.{a.name}"
    return names


def _disabled(call: ast.Call, arg: str | None) -> bool:
    if arg is None:
        return False
    for kw in call.keywords:
        if kw.arg == arg and isinstance(kw.value, ast.Constant):
            value = kw.value.value
            return value is None or (isinstance(value, (int, float)) and value <= 0)
    return False


def signal_calls(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) for each signal-based timeout the file runs when its functions are called."""
    names = _imported(tree)
    found: list[tuple[int, str]] = []
    for fn in ast.walk(tree):
        inside = isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn) if inside else ():
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                qual = f"{names.get(func.value.id, func.value.id)}.{func.attr}"
            elif isinstance(func, ast.Name):
                qual = names.get(func.id, "")
            else:
                continue
            mod, _, attr = qual.partition(".")
            if mod == "signal" and attr in SIGNAL_CALLS:
                found.append((node.lineno, f"signal.{attr}()"))
            elif mod == "math_verify" and attr in MATH_VERIFY and not _disabled(node, MATH_VERIFY[attr]):
                off = MATH_VERIFY[attr]
                found.append((node.lineno, f"math_verify.{attr}()" + (f" without {off}=None" if off else "")))
    for node in ast.walk(tree):  # math_metric builds a scorer that always times out with signal.alarm
        if isinstance(node, ast.Call) and not any(n == node.lineno for n, _ in found):
            func = node.func
            qual = (f"{names.get(func.value.id, '')}.{func.attr}" if isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Name) else names.get(func.id, "") if isinstance(func, ast.Name)
                    else "")
            if qual == "math_verify.math_metric":
                found.append((node.lineno, "math_verify.math_metric()"))
    return sorted(set(found))


def _process_pool(tree: ast.Module) -> bool:
    """The file runs work in other processes (a ProcessPoolExecutor, multiprocessing, pebble), where signal.alarm
    works: verl's own utils/reward_score/math_verify.py:33-62 runs math_verify in a spawn ProcessPoolExecutor."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("multiprocessing", "pebble")
                                                for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module.split(".")[0] in ("multiprocessing", "pebble")
                or any(a.name == "ProcessPoolExecutor" for a in node.names)):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "ProcessPoolExecutor":
            return True
    return False


def _is_async(tree: ast.Module, name: str) -> bool:
    return any(isinstance(n, ast.AsyncFunctionDef) and n.name == name for n in tree.body)


def rule_reward_signals(c: Ctx, f: Facts) -> None:
    path = c.v(KEY)
    if not isinstance(path, str) or not path or c.unknown(KEY):
        return
    local = local_path(c, path)
    if local is None or not local.is_file():
        return
    try:
        tree = parse_module(Path(local))
    except SyntaxError:
        return  # VI871 says so
    name = str(c.v("reward.custom_reward_function.name") or "compute_score")
    if tree is None or _is_async(tree, name) or _process_pool(tree):
        return
    calls = signal_calls(tree)
    if not calls:
        return
    shown = ", ".join(f"{what} at line {line}" for line, what in calls[:4]) + (", ..." if len(calls) > 4 else "")
    c.add("VI765", "warning", (KEY, "reward.custom_reward_function.name"),
          f"{local.name} times out with signals ({shown}), and verl calls the synchronous {name} in a worker thread "
          "(loop.run_in_executor, experimental/reward_loop/reward_manager/naive.py:74-84), where signal.signal raises "
          "ValueError('signal only works in main thread'): math_verify swallows it and scores 0, so every reward "
          "is 0 with no error (verl PR#5635)",
          "turn the signal timeouts off (math_verify.parse(..., parsing_timeout=None), verify(..., "
          "timeout_seconds=None); math_metric has no such switch: call parse/verify), and bound the time another way "
          "(a process pool, as verl's utils/reward_score/math_verify.py does), or make the function `async def`")
