#!/usr/bin/env python3
"""How verl's FSDP engine puts LoRA on the critic: writes wizard/check/data/verl_critic_lora.json, read by check's
VI422.

    python scripts/verl_critic_lora.py           # regenerate the table with the installed verl
    python scripts/verl_critic_lora.py --check   # exit 1 when the committed table differs

Read from verl's source (no import of verl, so no GPU stack is needed):
- "gate": where FSDPEngine turns LoRA on (`self._is_lora = self.model_config.lora_rank > 0`) and where
  _build_model_optimizer applies _build_lora_module when it is on (workers/engine/fsdp/transformer_impl.py). Neither
  looks at the model type, so the value model (the critic) gets the same LoRA wrapper as the actor.
- "task_type": the peft TaskType _build_lora_module gives a fresh adapter (the "task_type" entry of its LoraConfig
  dict), and "adapter_task_type_fallback": the one it forces on a loaded adapter whose task_type is a string.
- "value_model": the backends the same file registers its value-model engine for
  (`@EngineRegistry.register(model_type="value_model", backend=[...])`), i.e. the critic.strategy values that reach
  this LoRA code; "value_model_backends_all": the backends any engine module under workers/engine/ registers a
  value-model engine for — the only critic.strategy values TrainingWorker can build (EngineRegistry.get_engine_cls
  asserts the backend, workers/engine/base.py), read by check's VI809 list of critic strategies.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_critic_lora.json"
FSDP_ENGINE = "workers/engine/fsdp/transformer_impl.py"


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _task_type(node: ast.AST) -> str | None:
    """`TaskType.X` -> "X"."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "TaskType":
        return node.attr
    return None


def _gate(engine: ast.ClassDef, at: str) -> dict[str, str]:
    init = _method(engine, "__init__")
    gate = next(n for n in ast.walk(init) if isinstance(n, ast.Assign)
                and ast.unparse(n.targets[0]) == "self._is_lora")
    build = _method(engine, "_build_model_optimizer")
    apply = next(n for n in ast.walk(build) if isinstance(n, ast.If) and ast.unparse(n.test) == "self._is_lora"
                 and "_build_lora_module" in ast.unparse(n))
    return {"is_lora": ast.unparse(gate.value), "is_lora_at": f"{at}:{gate.lineno}",
            "applied_at": f"{at}:{apply.lineno}-{apply.end_lineno}"}


def _task_types(engine: ast.ClassDef, at: str) -> dict[str, str]:
    fn = _method(engine, "_build_lora_module")
    fresh = fallback = None
    for node in ast.walk(fn):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "task_type" and _task_type(value):
                    fresh = (_task_type(value), node.lineno)
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]).endswith(".task_type") \
                and _task_type(node.value):
            fallback = (_task_type(node.value), node.lineno)
    if fresh is None or fallback is None:
        raise LookupError("no TaskType for the LoRA config in FSDPEngine._build_lora_module")
    return {"task_type": fresh[0], "task_type_at": f"{at}:{fresh[1]}",
            "adapter_task_type_fallback": fallback[0], "adapter_task_type_fallback_at": f"{at}:{fallback[1]}",
            "build_lora_module": f"{at}:{fn.lineno}-{fn.end_lineno}"}


def _value_backends(tree: ast.Module, at: str) -> dict[str, Any]:
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for dec in cls.decorator_list:
            if not (isinstance(dec, ast.Call) and ast.unparse(dec.func).endswith("EngineRegistry.register")):
                continue
            kw = {k.arg: k.value for k in dec.keywords}
            if isinstance(kw.get("model_type"), ast.Constant) and kw["model_type"].value == "value_model":
                backend = ast.literal_eval(kw["backend"])
                return {"backends": sorted([backend] if isinstance(backend, str) else backend),
                        "engine_class": cls.name, "registered_at": f"{at}:{dec.lineno}"}
    raise LookupError("no value_model engine registered in the FSDP engine module")


def _all_value_backends(root: Path) -> dict[str, list[str]]:
    """backend -> [file:line, ...] of every value_model registration under workers/engine/."""
    found: dict[str, list[str]] = {}
    for path in sorted((root / "workers" / "engine").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for dec in cls.decorator_list:
                if not (isinstance(dec, ast.Call) and ast.unparse(dec.func).endswith("EngineRegistry.register")):
                    continue
                kw = {k.arg: k.value for k in dec.keywords}
                if not (isinstance(kw.get("model_type"), ast.Constant) and kw["model_type"].value == "value_model"):
                    continue
                backend = ast.literal_eval(kw["backend"])
                for b in [backend] if isinstance(backend, str) else backend:
                    found.setdefault(b, []).append(f"verl/{path.relative_to(root).as_posix()}:{dec.lineno}")
    return found


def build_from(root: Path) -> dict[str, Any]:
    path = root / FSDP_ENGINE
    at = "verl/" + FSDP_ENGINE
    tree = ast.parse(path.read_text(encoding="utf-8"))
    engine = _class(tree, "FSDPEngine")
    return {"generated_by": "scripts/verl_critic_lora.py", "gate": _gate(engine, at),
            **_task_types(engine, at), "value_model": _value_backends(tree, at),
            "value_model_backends_all": _all_value_backends(root)}


def build() -> dict[str, Any]:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
