#!/usr/bin/env python3
"""What a Megatron checkpoint pins about the parallel layout that resumes it: writes
wizard/check/data/verl_mcore_resume.json, read by check's VI610 (wizard/check/rules/mcore_resume.py).

    python scripts/verl_mcore_resume.py           # regenerate the table from the installed verl's source
    python scripts/verl_mcore_resume.py --check   # exit 1 when the committed table differs

Read with ast, nothing imported (the checkpoint manager imports megatron.core at module level). verl 0.9.1:
- utils/checkpoint/megatron_checkpoint_manager.py get_rng_state (:295-305): the RNG state ('extra') is one
  ShardedObject of global shape (pp_size, tp_size), each a parallel_state world size;
- the same file's _build_sharded_state_dict_metadata (:441-454): with the distributed optimizer the optimizer is saved
  'fully_reshardable' only under megatron.dist_ckpt_optim_fully_reshardable, else 'dp_reshardable'; and
  _build_model_sharded_state_dict (:372): the data-parallel group it reshards over is the one with context parallel;
- workers/config/engine.py McoreEngineConfig: the *_parallel_size fields a role sets;
- trainer/config/engine/megatron.yaml: the defaults of use_distributed_optimizer and the reshardable flag;
- utils/megatron_utils.py get_transformer_config_checkpoint_path (:1094-1097): the file the layout is saved in;
- trainer/config/_generated_ppo_megatron_trainer.yaml: the actor's checkpoint.save_contents (load_contents follows it);
- for VI611: utils/megatron_utils.py get_checkpoint_contents_manifest_path (:1100-1113), the manifest's name, and the
  checkpoint manager's _build_checkpoint_manifest (:475-607), the 'format' it records for the 'model' slot saved as
  Hugging Face weights (backend mbridge) and as Megatron shards (backend dist_checkpointing).
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
OUT = ROOT / "wizard" / "check" / "data" / "verl_mcore_resume.json"
MANAGER = "utils/checkpoint/megatron_checkpoint_manager.py"
ENGINE = "workers/config/engine.py"
ENGINE_YAML = "trainer/config/engine/megatron.yaml"
UTILS = "utils/megatron_utils.py"
PPO_YAML = "trainer/config/_generated_ppo_megatron_trainer.yaml"
# Megatron's parallel_state world-size getters and the McoreEngineConfig field each one reports
GETTER_KEY = {"get_tensor_model_parallel_world_size": "tensor_model_parallel_size",
              "get_pipeline_model_parallel_world_size": "pipeline_model_parallel_size",
              "get_virtual_pipeline_model_parallel_world_size": "virtual_pipeline_model_parallel_size",
              "get_expert_model_parallel_world_size": "expert_model_parallel_size",
              "get_expert_tensor_parallel_world_size": "expert_tensor_parallel_size",
              "get_context_parallel_world_size": "context_parallel_size"}


def _tree(rel: str) -> ast.Module:
    return ast.parse((verl_root() / rel).read_text(encoding="utf-8"))


def _function(tree: ast.AST, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _rng_keys(tree: ast.Module) -> list[str]:
    """get_rng_state: the names in ShardedObject's global shape, each traced to the parallel_state getter it holds."""
    fn = _function(tree, "get_rng_state")
    getters = {ast.unparse(a.targets[0]): a.value.func.attr for a in ast.walk(fn)
               if isinstance(a, ast.Assign) and isinstance(a.value, ast.Call)
               and isinstance(a.value.func, ast.Attribute) and ast.unparse(a.value.func.value) == "mpu"}
    call = next(n for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) == "ShardedObject")
    shape = call.args[2]
    assert isinstance(shape, ast.Tuple)
    return [GETTER_KEY[getters[ast.unparse(e)]] for e in shape.elts]


def _optimizer_format(tree: ast.Module) -> dict[str, Any]:
    """_build_sharded_state_dict_metadata: the flag that picks the format, the two names, the optimizer switch."""
    fn = _function(tree, "_build_sharded_state_dict_metadata")
    flag = next(a.value.attr for a in ast.walk(fn) if isinstance(a, ast.Assign)
                and ast.unparse(a.value).startswith("megatron_config.") and "fully_reshardable" in a.value.attr
                and "mem_efficient" not in a.value.attr)
    branch = next(n for n in ast.walk(fn) if isinstance(n, ast.If) and ast.unparse(n.test) == flag)

    def sharding(body: list[ast.stmt]) -> str:
        return next(s.value.value for s in body if isinstance(s, ast.Assign)
                    and ast.unparse(s.targets[0]) == "metadata['distrib_optim_sharding_type']")

    switch = next(n.test.attr for n in ast.walk(fn) if isinstance(n, ast.If) and isinstance(n.test, ast.Attribute)
                  and n.test.attr == "use_distributed_optimizer")
    model = _function(tree, "_build_model_sharded_state_dict")
    group = next(n for n in ast.walk(model) if isinstance(n, ast.Call) and ast.unparse(n.func) ==
                 "mpu.get_data_parallel_group")
    with_cp = any(kw.arg == "with_context_parallel" and ast.literal_eval(kw.value) for kw in group.keywords)
    return {"flag": flag, "reshardable": sharding(branch.body), "pinned": sharding(branch.orelse),
            "switch": switch, "dp_group_with_context_parallel": with_cp}


def _parallel_fields(tree: ast.Module) -> list[str]:
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "McoreEngineConfig")
    return sorted(s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                  and s.target.id.endswith("_parallel_size"))


def _layout_file(tree: ast.Module) -> str:
    fn = _function(tree, "get_transformer_config_checkpoint_path")
    ret = next(n for n in ast.walk(fn) if isinstance(n, ast.Return))
    return next(a.value for a in ret.value.args if isinstance(a, ast.Constant))  # type: ignore[union-attr]


def _manifest_formats(tree: ast.Module) -> dict[str, str]:
    """_build_checkpoint_manifest: the 'format' of each dict literal naming a 'backend' (mbridge / dist_checkpointing)."""
    fn = _function(tree, "_build_checkpoint_manifest")
    found: dict[str, str] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Dict):
            doc = {ast.literal_eval(k): v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)}
            if isinstance(doc.get("backend"), ast.Constant) and isinstance(doc.get("format"), ast.Constant):
                found[doc["backend"].value] = doc["format"].value
    return found


def _manifest_file(tree: ast.Module) -> str:
    fn = _function(tree, "get_checkpoint_contents_manifest_path")
    ret = next(n for n in ast.walk(fn) if isinstance(n, ast.Return))
    return next(a.value for a in ret.value.args if isinstance(a, ast.Constant))  # type: ignore[union-attr]


def build() -> dict[str, Any]:
    manager = _tree(MANAGER)
    fmt = _optimizer_format(manager)
    engine_yaml = yaml.safe_load((verl_root() / ENGINE_YAML).read_text(encoding="utf-8"))
    ppo = yaml.safe_load((verl_root() / PPO_YAML).read_text(encoding="utf-8"))
    fields = _parallel_fields(_tree(ENGINE))
    # the optimizer is resharded over the data-parallel group; with context parallel folded into it, a new CP size
    # is a new data-parallel split, which dp_reshardable takes
    pinned = [k for k in fields if not (fmt["dp_group_with_context_parallel"] and k == "context_parallel_size")]
    return {
        "rng_pinned": _rng_keys(manager),
        "optimizer_flag": fmt["flag"],
        "optimizer_flag_default": engine_yaml[fmt["flag"]],
        "optimizer_switch": fmt["switch"],
        "optimizer_switch_default": engine_yaml[fmt["switch"]],
        "optimizer_reshardable_format": fmt["reshardable"],
        "optimizer_default_format": fmt["pinned"],
        "optimizer_pinned": pinned,
        "layout_file": _layout_file(_tree(UTILS)),
        "manifest_file": _manifest_file(_tree(UTILS)),
        "model_formats": _manifest_formats(manager),
        "load_contents_default": ppo["actor_rollout_ref"]["actor"]["checkpoint"]["save_contents"],
    }


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    raise SystemExit(main())
