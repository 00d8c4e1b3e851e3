#!/usr/bin/env python3
"""Where each policy-loss mode of verl takes its clip bounds from: writes wizard/check/data/verl_clip_bounds.json,
read by check's VI667 and VI670.

    python scripts/verl_clip_bounds.py           # regenerate the table from the installed verl's source
    python scripts/verl_clip_bounds.py --check   # exit 1 when the committed table differs

Walks verl/trainer/ppo/core_algos.py with `ast` (nothing is imported). For every function decorated
`@register_policy_loss("<mode>")`, and every core_algos function it hands the config to (bypass_mode calls
compute_policy_loss_vanilla), it records:

- "bounds": each assignment `x = config.clip_ratio_low if config.clip_ratio_low is not None else <fallback>` (and the
  same for clip_ratio_high), with the key the fallback reads (`clip_ratio`, directly or through a local name bound to
  `config.clip_ratio`) and its line. Such a mode reads clip_ratio only when the side's own key is null.
- "detached_weight": the line of a `w = torch.clamp(ratio, 1 - <low>, 1 + <high>)` whose `w` is later `.detach()`ed,
  i.e. the clip bounds cap a stop-gradient importance weight (CISPO) rather than the PPO surrogate.

It also records verl's actor YAML defaults for clip_ratio, clip_ratio_low and clip_ratio_high
(trainer/config/actor/actor.yaml): a non-null default for a side means a fallback to clip_ratio never happens unless
the user sets that side to null.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main, verl_root  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_clip_bounds.json"
SOURCE = "verl/trainer/ppo/core_algos.py"
YAML = "verl/trainer/config/actor/actor.yaml"
SIDES = ("clip_ratio_low", "clip_ratio_high")


def _config_attr(node: ast.AST, cfg: str) -> str | None:
    """`config.clip_ratio` → "clip_ratio" (only one level, on the tracked config name)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == cfg:
        return node.attr
    return None


def _fallback(node: ast.AST, cfg: str, aliases: dict[str, str]) -> str | None:
    got = _config_attr(node, cfg)
    if got is not None:
        return got
    return aliases.get(node.id) if isinstance(node, ast.Name) else None


def _bound_assign(node: ast.Assign, cfg: str, aliases: dict[str, str]) -> tuple[str, str, str] | None:
    """(variable, side, fallback key) for `v = config.<side> if config.<side> is not None else <fallback>`."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name) or not isinstance(node.value, ast.IfExp):
        return None
    exp = node.value
    side = _config_attr(exp.body, cfg)
    test = exp.test
    if side not in SIDES or not (isinstance(test, ast.Compare) and _config_attr(test.left, cfg) == side
                                 and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot)):
        return None
    fallback = _fallback(exp.orelse, cfg, aliases)
    return (node.targets[0].id, side, fallback) if fallback else None


def _is_clamp(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "clamp"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch")


def _uses(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _detached_weight(fn: ast.FunctionDef, bound_vars: set[str]) -> int | None:
    clamped: dict[str, int] = {}
    for node in ast.walk(fn):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and _is_clamp(node.value) and _uses(node.value, bound_vars)):
            clamped[node.targets[0].id] = node.lineno
    for node in ast.walk(fn):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "detach"
                and isinstance(node.func.value, ast.Name) and node.func.value.id in clamped):
            return clamped[node.func.value.id]
    return None


def _scan(fn: ast.FunctionDef, cfg: str, functions: dict[str, ast.FunctionDef], seen: set[str]) -> dict:
    """The bounds and detached weight of `fn` and of what it calls with the config."""
    seen.add(fn.name)
    aliases: dict[str, str] = {}
    bounds: dict[str, dict[str, str]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            attr = _config_attr(node.value, cfg)
            if attr is not None:
                aliases[node.targets[0].id] = attr
    bound_vars: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            got = _bound_assign(node, cfg, aliases)
            if got:
                var, side, fallback = got
                bound_vars.add(var)
                bounds[side] = {"fallback": fallback, "at": f"{SOURCE}:{node.lineno}"}
    # names derived from a bound (`cliprange_low = clip_ratio_low`) count as the bound
    for node in ast.walk(fn):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Name) and node.value.id in bound_vars):
            bound_vars.add(node.targets[0].id)
    line = _detached_weight(fn, bound_vars) if bound_vars else None
    out = {"bounds": bounds, "detached_weight": f"{SOURCE}:{line}" if line else None}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
            callee = functions[node.func.id]
            if callee.name in seen:
                continue
            params = [a.arg for a in callee.args.args]
            passed = [params[i] for i, a in enumerate(node.args) if i < len(params) and isinstance(a, ast.Name)
                      and a.id == cfg]
            passed += [kw.arg for kw in node.keywords if kw.arg in params and isinstance(kw.value, ast.Name)
                       and kw.value.id == cfg]
            if passed:
                sub = _scan(callee, passed[0], functions, seen)
                for side, entry in sub["bounds"].items():
                    out["bounds"].setdefault(side, entry)
                out["detached_weight"] = out["detached_weight"] or sub["detached_weight"]
    return out


def _registered(fn: ast.FunctionDef) -> str | None:
    for dec in fn.decorator_list:
        if (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Name) and dec.func.id == "register_policy_loss"
                and dec.args and isinstance(dec.args[0], ast.Constant)):
            return str(dec.args[0].value)
    return None


def _yaml_defaults(path: Path) -> dict[str, object]:
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    lines = path.read_text(encoding="utf-8").splitlines()
    out: dict[str, object] = {}
    for key in ("clip_ratio", *SIDES):
        line = next(i for i, text in enumerate(lines, 1) if text.startswith(f"{key}:"))
        out[key] = {"default": data[key], "at": f"{YAML}:{line}"}
    return out


def build() -> dict:
    verl = verl_root()
    tree = ast.parse((verl / "trainer" / "ppo" / "core_algos.py").read_text(encoding="utf-8"))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    modes: dict[str, dict] = {}
    for fn in functions.values():
        mode = _registered(fn)
        if mode is None:
            continue
        got = _scan(fn, "config", functions, set())
        if got["bounds"] or got["detached_weight"]:
            modes[mode] = {"function": f"{SOURCE}:{fn.lineno} {fn.name}", **got}
    defaults = _yaml_defaults(verl / "trainer" / "config" / "actor" / "actor.yaml")
    return {"source": SOURCE, "yaml": YAML, "defaults": defaults, "modes": modes}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
