#!/usr/bin/env python3
"""What verl's model merger (`python -m verl.model_merger merge`) accepts and reads: writes
wizard/check/data/verl_merger.json, read by check's VI655 and VI684-VI687 (wizard/check/rules/merger.py).

    python scripts/verl_merger.py           # regenerate the table from the installed verl's source
    python scripts/verl_merger.py --check   # exit 1 when the committed table differs

Read with ast, nothing imported (the Megatron merger imports megatron.core at module level). verl 0.9.1:
- model_merger/base_model_merger.py parse_args (:34-80): the --backend choices and every option of `merge`;
  save_lora_adapter (:311-408): the folder the LoRA adapter goes to, os.path.join(target_dir, "lora_adapter");
- model_merger/megatron_model_merger.py: the name table of __init__ (params_mapping, :175-214), whether
  _merge_state_dicts skips output_layer under config.tie_word_embedding (:373-375), and what merge_and_save reads
  (get_model_dist_checkpoint_path, :498);
- model_merger/fsdp_model_merger.py _calculate_shard_configuration (:134-138): the device-mesh dimension names its
  assert accepts (a VeOmni checkpoint's ('dp_shard',) is not among them in 0.9.1);
- utils/megatron_utils.py: the model/ and dist_ckpt/ / huggingface/ folder names (:1030-1033);
- trainer/config/_generated_ppo_megatron_trainer.yaml: actor.megatron.use_dist_checkpointing's default (:57).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main, verl_root  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_merger.json"
BASE = "model_merger/base_model_merger.py"
MEGATRON = "model_merger/megatron_model_merger.py"
UTILS = "utils/megatron_utils.py"
FSDP = "model_merger/fsdp_model_merger.py"
MEGATRON_YAML = "trainer/config/_generated_ppo_megatron_trainer.yaml"


def _tree(rel: str) -> ast.Module:
    return ast.parse((verl_root() / rel).read_text(encoding="utf-8"))


def _function(tree: ast.AST, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _options(tree: ast.Module) -> tuple[list[str], list[str]]:
    """parse_args: the --backend choices and the option strings `merge` takes (its own and the shared parser's)."""
    backends: list[str] = []
    flags: list[str] = []
    for call in ast.walk(_function(tree, "parse_args")):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
            continue
        owner = ast.unparse(call.func.value)
        if owner not in ("base_op_parser", "merge_parser"):
            continue
        names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        flags += names
        if "--backend" in names:
            choices = next(kw.value for kw in call.keywords if kw.arg == "choices")
            backends = [ast.literal_eval(e) for e in choices.elts]  # type: ignore[attr-defined]
    return sorted(backends), sorted(flags)


def _params_mapping(tree: ast.Module) -> dict[str, str]:
    for node in ast.walk(_function(tree, "__init__")):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and ast.unparse(node.targets[0]) == "self.params_mapping"):
            return ast.literal_eval(node.value)
    raise AssertionError("params_mapping not found in MegatronModelMerger.__init__")


def _skips_output_with_tie_flag(tree: ast.Module) -> bool:
    """_merge_state_dicts has `if self.config.tie_word_embedding and ("output_layer" in key): continue`."""
    for node in ast.walk(_function(tree, "_merge_state_dicts")):
        if isinstance(node, ast.If):
            test = ast.unparse(node.test)
            if "self.config.tie_word_embedding" in test and "'output_layer' in key" in test and any(
                    isinstance(s, ast.Continue) for s in node.body):
                return True
    return False


def _reads(tree: ast.Module) -> str:
    """The helper merge_and_save gets the checkpoint path from."""
    for call in ast.walk(_function(tree, "merge_and_save")):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id.startswith("get_model_"):
            return call.func.id
    raise AssertionError("merge_and_save reads no get_model_* path")


def _adapter_dir(tree: ast.Module) -> str:
    for call in ast.walk(_function(tree, "save_lora_adapter")):
        if isinstance(call, ast.Call) and ast.unparse(call.func) == "os.path.join" and len(call.args) == 2:
            if ast.unparse(call.args[0]) == "self.config.target_dir" and isinstance(call.args[1], ast.Constant):
                return str(call.args[1].value)
    raise AssertionError("save_lora_adapter's folder not found")


def _fsdp_mesh_names(tree: ast.Module) -> list[list[str]]:
    """The tuple of mesh_dim_names `assert mesh_dim_names in (...)` accepts in _calculate_shard_configuration."""
    for node in ast.walk(_function(tree, "_calculate_shard_configuration")):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) \
                and ast.unparse(node.test.left) == "mesh_dim_names" and isinstance(node.test.ops[0], ast.In):
            return [list(t) for t in ast.literal_eval(node.test.comparators[0])]
    raise AssertionError("the mesh_dim_names assert is not in _calculate_shard_configuration")


def _subdirs(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            name = ast.unparse(node.targets[0])
            if name in ("_MODEL_SUBDIR", "_DIST_CKPT_SUBDIR", "_HUGGINGFACE_SUBDIR"):
                out[name.strip("_").lower()] = node.value.value
    return out


def build() -> dict[str, Any]:
    base, megatron = _tree(BASE), _tree(MEGATRON)
    backends, flags = _options(base)
    mapping = _params_mapping(megatron)
    subdirs = _subdirs(_tree(UTILS))
    conf = yaml.safe_load((verl_root() / MEGATRON_YAML).read_text(encoding="utf-8"))
    return {
        "backends": backends,
        "merge_flags": flags,
        "lora_adapter_dir": _adapter_dir(base),
        "megatron_params_mapping": mapping,
        "megatron_maps_vision": any("vision" in k or "visual" in k for k in list(mapping) + list(mapping.values())),
        "megatron_tie_flag_drops_output_layer": _skips_output_with_tie_flag(megatron),
        "megatron_reads": _reads(megatron),
        "megatron_dist_ckpt": f"{subdirs['model_subdir']}/{subdirs['dist_ckpt_subdir']}",
        "megatron_hf": f"{subdirs['model_subdir']}/{subdirs['huggingface_subdir']}",
        "fsdp_mesh_dim_names": _fsdp_mesh_names(_tree(FSDP)),
        "use_dist_checkpointing_default": conf["actor_rollout_ref"]["actor"]["megatron"]["use_dist_checkpointing"],
    }


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    raise SystemExit(main())
