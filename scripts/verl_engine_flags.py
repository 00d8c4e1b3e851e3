#!/usr/bin/env python3
"""Performance switches verl's training engines set aside without a word: writes wizard/check/data/verl_engine_flags.json,
read by check's VI689 and VI690.

    python scripts/verl_engine_flags.py           # regenerate the table with the installed verl
    python scripts/verl_engine_flags.py --check   # exit 1 when the committed table differs

"unfed_role_keys" (VI689): fields the FSDP actor/ref config (FSDPActorConfig, workers/config/actor.py) declares under
the same name as a field of its engine config (FSDPEngineConfig, workers/config/engine.py) that the FSDP engine reads
(`self.engine_config.<name>` in workers/engine/fsdp/transformer_impl.py), where nothing carries the role-level value
into the engine's: the generated trainer YAML does not interpolate the role key into <role>.fsdp_config.<name>,
FSDPActorConfig.__post_init__ does not copy it, and the engine worker does not set engine_config.<name> from elsewhere
(workers/engine_workers.py). The engine is FSDPActorConfig.engine = fsdp_config (actor.py __post_init__), so setting
such a key at the role level changes nothing the engine runs.

"megatron_fused_off" (VI690): the conditions under which the Megatron engine turns model.use_fused_kernels off again
(MegatronEngine._maybe_enable_fused_kernels, workers/engine/megatron/transformer_impl.py), read from the `if` that
guards its `self.engine_config.use_fused_kernels = False`.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_engine_flags.json"
ROLES = ("actor", "ref")
FSDP_ENGINE = "workers/engine/fsdp/transformer_impl.py"
MEGATRON_ENGINE = "workers/engine/megatron/transformer_impl.py"


def _verl_root() -> Path:
    import verl

    return Path(verl.__file__).resolve().parent


def _rel(path: Path) -> str:
    return "verl/" + path.relative_to(_verl_root()).as_posix()


def _engine_reads(text: str, name: str) -> int | None:
    """First line of the FSDP engine that reads self.engine_config.<name> (not an assignment to it)."""
    pattern = re.compile(rf"self\.engine_config\.{name}\b(?!\s*=[^=])")
    for i, line in enumerate(text.splitlines(), 1):
        if pattern.search(line):
            return i
    return None


def _assigned(text: str, target: str) -> bool:
    """Whether the source assigns `<target>` (a dotted attribute) or sets it by object.__setattr__."""
    head, _, name = target.rpartition(".")
    return bool(re.search(rf"{re.escape(target)}\s*=[^=]", text)
                or re.search(rf"__setattr__\(\s*{re.escape(head)}\s*,\s*[\"']{name}[\"']", text))


def _yaml_line(lines: list[str], role: str, name: str) -> tuple[int, str] | None:
    """(line, raw value) of actor_rollout_ref.<role>.fsdp_config.<name> in the generated trainer YAML."""
    depth_keys: list[tuple[int, str]] = []
    for i, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or ":" not in stripped:
            continue
        indent = len(line) - len(line.lstrip())
        key, _, value = stripped.partition(":")
        while depth_keys and depth_keys[-1][0] >= indent:
            depth_keys.pop()
        path = [k for _, k in depth_keys] + [key]
        if path == ["actor_rollout_ref", role, "fsdp_config", name]:
            return i, value.strip()
        if not value.strip():
            depth_keys.append((indent, key))
    return None


def unfed_role_keys() -> list[dict[str, Any]]:
    from verl.workers.config.actor import FSDPActorConfig
    from verl.workers.config.engine import FSDPEngineConfig

    root = _verl_root()
    engine_text = (root / FSDP_ENGINE).read_text(encoding="utf-8")
    actor_path = root / "workers/config/actor.py"
    actor_text = actor_path.read_text(encoding="utf-8")
    post_init = _post_init_source(actor_text, "FSDPActorConfig")
    workers_text = (root / "workers/engine_workers.py").read_text(encoding="utf-8")
    yaml_path = root / "trainer/config/_generated_ppo_trainer.yaml"
    yaml_lines = yaml_path.read_text(encoding="utf-8").splitlines()
    engine_fields = {f.name: f for f in dataclasses.fields(FSDPEngineConfig)}
    rows = []
    for field in dataclasses.fields(FSDPActorConfig):
        name = field.name
        if name.startswith("_") or name not in engine_fields:
            continue
        read_at = _engine_reads(engine_text, name)
        if read_at is None:
            continue  # the engine never reads it: nothing to lose
        if _assigned(post_init, f"self.fsdp_config.{name}") or _assigned(post_init, f"self.engine.{name}") or \
                f'"{name}"' in post_init:
            continue  # __post_init__ carries the role value over
        if _assigned(workers_text, f"self.engine_config.{name}"):
            continue  # the worker sets it from another config (the model's)
        roles = {}
        for role in ROLES:
            found = _yaml_line(yaml_lines, role, name)
            if found is None or f"actor_rollout_ref.{role}.{name}" in found[1]:
                continue  # not in the tree, or interpolated from the role key
            roles[role] = {"engine_default": found[1], "at": f"{_rel(yaml_path)}:{found[0]}"}
        if not roles:
            continue
        rows.append({"name": name, "roles": roles,
                     "declared": f"{_rel(actor_path)}:{_field_line(actor_text, 'ActorConfig', name)}",
                     "read": f"{_rel(root / FSDP_ENGINE)}:{read_at}"})
    return rows


def _class_node(text: str, cls: str) -> ast.ClassDef:
    return next(n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == cls)


def _post_init_source(text: str, cls: str) -> str:
    node = _class_node(text, cls)
    fn = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__post_init__")
    return ast.get_source_segment(text, fn) or ""


def _field_line(text: str, cls: str, name: str) -> int:
    for node in _class_node(text, cls).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node.lineno
    raise LookupError(f"{cls}.{name} not declared")


def _condition_names(test: ast.expr) -> list[str]:
    """The operands of the `or` that guards the switch-off, as dotted names with `not` kept: `not use_remove_padding`,
    `is_value_model`, `mtp.enable`."""
    names = []
    for part in test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]:
        negated = isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not)
        node = part.operand if negated else part
        dotted = ast.unparse(node)
        for prefix in ("self.engine_config.", "self.model_config.", "self."):
            dotted = dotted.removeprefix(prefix)
        names.append(("not " if negated else "") + dotted)
    return names


def megatron_fused_off() -> dict[str, Any]:
    path = _verl_root() / MEGATRON_ENGINE
    text = path.read_text(encoding="utf-8")
    cls = _class_node(text, "MegatronEngine")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_maybe_enable_fused_kernels")
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and any(
                isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == "self.engine_config.use_fused_kernels"
                and isinstance(s.value, ast.Constant) and s.value.value is False for s in node.body):
            return {"conditions": _condition_names(node.test), "at": f"{_rel(path)}:{node.lineno}",
                    "function": f"{_rel(path)}:{fn.lineno}-{fn.end_lineno}"}
    raise LookupError("no switch-off of use_fused_kernels in MegatronEngine._maybe_enable_fused_kernels")


def build() -> dict[str, Any]:
    import verl

    return {"generated_by": "scripts/verl_engine_flags.py", "verl_version": verl.__version__,
            "unfed_role_keys": unfed_role_keys(), "megatron_fused_off": megatron_fused_off()}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
