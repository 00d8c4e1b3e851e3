#!/usr/bin/env python3
"""Regenerate wizard/check/data/ray_init_kwargs.json: what the installed Ray's `ray.init` accepts.

    python scripts/ray_init_kwargs.py            # from the installed Ray's source (the one verl 0.9.1 runs on)
    python scripts/ray_init_kwargs.py --check    # exit 1 if the shipped table is stale

verl's run_ppo passes every key of `ray_kwargs.ray_init` to `ray.init(**...)` (verl/trainer/main_ppo.py:63-74), so
the keys a user may put there are exactly ray.init's. Walks ray/_private/worker.py with `ast` (nothing imported):

- `params`: the named parameters of `def init`, and `private`: the `_x` keys it pops from `**kwargs`; any other key
  reaches `if kwargs: raise RuntimeError("Unknown keyword argument(s): ...")` (line in `lines.unknown_kwargs`).
- `cluster_only`: the parameters whose `if ...: raise ValueError(...)` sits in the `else:` of
  `if bootstrap_address is None:` (connecting to an existing cluster: "When connecting to an existing cluster,
  num_cpus and num_gpus must not be provided."), with their lines.
- `lines.env_vars_not_str`: where ray/_private/runtime_env/validation.py raises TypeError for an env_vars value that
  is not a str (ray.init validates the runtime env through JobConfig, job_config.py `_validate_runtime_env`).

VI657, VI658 and VI659 (wizard.check.rules.ray_init) read this table.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "ray_init_kwargs.json"


def _ray_root() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("ray")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("ray is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def _init(tree: ast.Module) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "init":
            return node
    raise SystemExit("ray/_private/worker.py has no def init")


def _raises(body: list[ast.stmt], exc: str) -> bool:
    return any(isinstance(s, ast.Raise) and isinstance(s.exc, ast.Call) and ast.unparse(s.exc.func) == exc
               for s in body)


def _cluster_only(init: ast.FunctionDef, names: set[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for node in ast.walk(init):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "bootstrap_address is None":
            for inner in node.orelse:
                if isinstance(inner, ast.If) and _raises(inner.body, "ValueError"):
                    for name in ast.walk(inner.test):
                        if isinstance(name, ast.Name) and name.id in names:
                            found.setdefault(name.id, inner.lineno)
    return found


def _unknown_line(init: ast.FunctionDef) -> int:
    for node in ast.walk(init):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "kwargs" and _raises(node.body, "RuntimeError"):
            return node.lineno
    raise SystemExit("ray.init no longer refuses unknown keyword arguments")


def _env_vars_line(root: Path) -> int:
    tree = ast.parse((root / "_private" / "runtime_env" / "validation.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "parse_and_validate_env_vars":
            for inner in ast.walk(node):
                if isinstance(inner, ast.If) and "isinstance(val, str)" in ast.unparse(inner.test):
                    return inner.lineno
    raise SystemExit("ray's parse_and_validate_env_vars no longer checks the values' type")


def build() -> dict[str, object]:
    import importlib.metadata

    root = _ray_root()
    init = _init(ast.parse((root / "_private" / "worker.py").read_text(encoding="utf-8")))
    params = [a.arg for a in (*init.args.args, *init.args.kwonlyargs)]
    private = sorted({n.args[0].value for n in ast.walk(init)
                      if isinstance(n, ast.Call) and ast.unparse(n.func) == "kwargs.pop" and n.args
                      and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)})
    return {"ray_version": importlib.metadata.version("ray"),
            "params": sorted(params), "private": private,
            "cluster_only": _cluster_only(init, set(params) | set(private)),
            "lines": {"init": init.lineno, "unknown_kwargs": _unknown_line(init),
                      "env_vars_not_str": _env_vars_line(root)}}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
