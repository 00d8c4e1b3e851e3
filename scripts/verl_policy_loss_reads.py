#!/usr/bin/env python3
"""Which actor config keys each policy-loss mode of verl reads: writes wizard/check/data/verl_policy_loss_reads.json,
read by check's VI776.

    python scripts/verl_policy_loss_reads.py           # regenerate the table from the installed verl's source
    python scripts/verl_policy_loss_reads.py --check   # exit 1 when the committed table differs

Walks verl/trainer/ppo/core_algos.py with `ast` (nothing is imported): every function decorated
`@register_policy_loss("<mode>")` is the loss `actor.policy_loss.loss_mode=<mode>` runs (workers/utils/losses.py:101-104
looks it up with get_policy_loss_fn). In it, and in every function of core_algos.py it calls with the config (as
bypass_mode calls compute_policy_loss_vanilla and compute_policy_loss_reinforce), a read is an attribute chain on the
config parameter (`config.clip_ratio_low`, `config.policy_loss.kl_cov_ratio`), a `.get("key")` on it, or either one
on a local name bound to a part of it (`rollout_corr_config = config.policy_loss.get("rollout_correction")`).

A read counts as a key of the table when verl's actor YAML (trainer/config/actor/actor.yaml) has the key: that leaves
out fields the worker fills at run time (global_batch_info) and policy_loss.rollout_correction, which verl copies from
algorithm.rollout_correction (trainer/ppo/rollout_corr_helper.py:1142); those are listed under "runtime".
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_policy_loss_reads.json"
SOURCE = "verl/trainer/ppo/core_algos.py"
YAML = "verl/trainer/config/actor/actor.yaml"


def _verl_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec and spec.origin, "verl is not installed"
    return Path(spec.origin).parent


def _chain(node: ast.AST, env: dict[str, str]) -> tuple[str, int] | None:
    """The dotted config path `node` denotes (relative to the config), when it is rooted at a tracked name:
    `config.policy_loss.get("x")` → "policy_loss.x"."""
    if isinstance(node, ast.Name):
        return (env[node.id], node.lineno) if node.id in env else None
    if isinstance(node, ast.Attribute) and node.attr != "get":
        base = _chain(node.value, env)
        if base is None:
            return None
        return (f"{base[0]}.{node.attr}".lstrip("."), node.lineno)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        base = _chain(node.func.value, env)
        if base is None:
            return None
        return (f"{base[0]}.{node.args[0].value}".lstrip("."), node.lineno)
    if isinstance(node, ast.IfExp):  # `x.get("a") if hasattr(x, "a") else None`
        return _chain(node.body, env)
    return None


def _reads(fn: ast.FunctionDef, env: dict[str, str], functions: dict[str, ast.FunctionDef],
           out: dict[str, int], seen: set[tuple[str, tuple]]) -> None:
    """Add to `out` each config path `fn` reads (path → first line), following calls into core_algos' functions."""
    stamp = (fn.name, tuple(sorted(env.items())))
    if stamp in seen:
        return
    seen.add(stamp)
    env = dict(env)
    for node in ast.walk(fn):  # local names bound to a part of the config
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            got = _chain(node.value, env)
            if got is not None and got[0]:
                env[node.targets[0].id] = got[0]
    for node in ast.walk(fn):
        got = None
        if isinstance(node, (ast.Attribute, ast.Call)):
            got = _chain(node, env)
        if got is not None and got[0]:
            path = got[0]
            out[path] = min(out.get(path, got[1]), got[1])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
            callee = functions[node.func.id]
            params = [a.arg for a in callee.args.args]
            sub: dict[str, str] = {}
            for i, arg in enumerate(node.args):
                if i < len(params) and isinstance(arg, ast.Name) and arg.id in env:
                    sub[params[i]] = env[arg.id]
            for kw in node.keywords:
                if kw.arg in params and isinstance(kw.value, ast.Name) and kw.value.id in env:
                    sub[kw.arg] = env[kw.value.id]
            if sub:
                _reads(callee, sub, functions, out, seen)


def _registered(fn: ast.FunctionDef) -> str | None:
    for dec in fn.decorator_list:
        if (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Name) and dec.func.id == "register_policy_loss"
                and dec.args and isinstance(dec.args[0], ast.Constant)):
            return str(dec.args[0].value)
    return None


def _yaml_keys(path: Path) -> set[str]:
    import yaml

    def walk(node: Any, prefix: str) -> set[str]:
        keys: set[str] = set()
        if isinstance(node, dict):
            for k, v in node.items():
                if str(k).startswith("_"):
                    continue
                keys.add(prefix + str(k))
                keys |= walk(v, prefix + str(k) + ".")
        return keys

    return walk(yaml.safe_load(path.read_text(encoding="utf-8")), "")


def build() -> dict:
    verl = _verl_dir()
    tree = ast.parse((verl / "trainer" / "ppo" / "core_algos.py").read_text(encoding="utf-8"))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    yaml_keys = _yaml_keys(verl / "trainer" / "config" / "actor" / "actor.yaml")
    modes: dict[str, Any] = {}
    for fn in functions.values():
        mode = _registered(fn)
        if mode is None:
            continue
        params = [a.arg for a in fn.args.args]
        assert "config" in params, (mode, params)
        raw: dict[str, int] = {}
        _reads(fn, {"config": ""}, functions, raw, set())
        nodes = {p.rsplit(".", 1)[0] for p in raw if "." in p}  # `policy_loss` on the way to `policy_loss.x`
        reads = {p: f"{SOURCE}:{line}" for p, line in sorted(raw.items()) if p in yaml_keys and p not in nodes}
        runtime = sorted(p for p in raw if p not in yaml_keys and p not in nodes)
        modes[mode] = {"function": f"{SOURCE}:{fn.lineno} {fn.name}",
                       "end": f"{SOURCE}:{fn.end_lineno}", "reads": reads, "runtime": runtime}
    keys = sorted({k for m in modes.values() for k in m["reads"]})
    return {"source": SOURCE, "yaml": YAML, "modes": modes, "keys": keys}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
