"""A model path that is verl's own training checkpoint, not a Hugging Face model (verl 0.9.1, paths under
site-packages/verl).

- VI737 (error; `--fix` when the checkpoint holds full Hugging Face weights): actor_rollout_ref.model.path (or
  critic.model.path) names a local folder with no config.json that verl's checkpoint managers wrote: an FSDP actor
  or critic folder (sharded model_world_size_*_rank_*.pt, fsdp_config.json, and a huggingface/ folder with the
  config and tokenizer only, utils/checkpoint/fsdp_checkpoint_manager.py:213, :373-392, :410, :422-462), a Megatron
  one (model/dist_ckpt, model/huggingface), or the global_step_N folder above them. verl loads a model path with
  Hugging Face loaders only: HFModelConfig copies it and calls AutoConfig.from_pretrained on it
  (workers/config/model.py:156, :187), in the rollout, actor or critic workers (the generation entry hands the
  model config to the rollout workers as is, workers/rollout/replica.py:97-105, :237), so the run dies there, after
  its GPUs are placed. The shards must first be merged (`python -m verl.model_merger merge`,
  model_merger/fsdp_model_merger.py); when save_contents had hf_model, the huggingface/ folder already holds the
  full weights. Real case verl#298 (evaluating a trained run with model_path = checkpoints/.../actor/global_step_400;
  verl#422 asks the same).

The file names come from wizard/check/data/verl_ckpt_layout.json (FSDP, scripts/verl_ckpt_layout.py) and
wizard/check/data/verl_merger.json (Megatron folders, scripts/verl_merger.py), both read from verl's source.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import M, Ctx, Facts, local_path
from wizard.check.shellargs import PLACEHOLDER

DATA = Path(__file__).resolve().parent.parent / "data"
KEYS = (f"{M}.path", "critic.model.path")
ROLES = ("actor", "critic")  # the folders a global_step_N checkpoint holds (trainer_base's save: actor/, critic/)
WEIGHTS = ("*.safetensors", "*.bin")


@lru_cache(maxsize=1)
def layout() -> dict[str, Any]:
    fsdp = json.loads((DATA / "verl_ckpt_layout.json").read_text(encoding="utf-8"))
    merger = json.loads((DATA / "verl_merger.json").read_text(encoding="utf-8"))
    return {**fsdp, "megatron_dist_ckpt": merger["megatron_dist_ckpt"], "megatron_hf": merger["megatron_hf"]}


def checkpoint_kind(folder: Path) -> tuple[str, Path] | None:
    """('FSDP' | 'Megatron', the Hugging Face folder verl writes beside the shards) for a folder verl's checkpoint
    manager wrote; None for anything else."""
    t = layout()
    if any(next(folder.glob(g), None) is not None for g in t["fsdp_model_shards"]) or (folder / t["fsdp_config"]).is_file():
        return "FSDP", folder / t["hf_subfolder"]
    if (folder / t["megatron_dist_ckpt"]).is_dir() or (folder / t["megatron_hf"]).is_dir():
        return "Megatron", folder / t["megatron_hf"]
    return None


def _has_weights(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any(next(folder.glob(g), None) is not None for g in WEIGHTS)


def _verdict(folder: Path) -> tuple[str, Path, Path] | None:
    """(kind, checkpoint folder, its Hugging Face folder) when `folder` is a verl checkpoint (or the global_step
    folder holding one) rather than a model."""
    if not folder.is_dir() or (folder / "config.json").is_file():
        return None
    found = checkpoint_kind(folder)
    if found is not None:
        return found[0], folder, found[1]
    for role in ROLES:
        found = checkpoint_kind(folder / role) if (folder / role).is_dir() else None
        if found is not None:
            return found[0], folder / role, found[1]
    return None


def rule_ckpt_model_path(c: Ctx, f: Facts) -> None:
    for key in KEYS:
        if key != f"{M}.path" and not c.set_by_user(key):
            continue
        path = c.v(key)
        if c.unknown(key) or not isinstance(path, str) or PLACEHOLDER in path:
            continue
        folder = local_path(c, path)
        verdict = _verdict(folder) if folder is not None else None
        if verdict is None:
            continue
        kind, ckpt, hf = verdict
        ready = _has_weights(hf)
        backend = kind.lower()
        c.add("VI737", "error", (key,),
              f"{key}={path} is a verl {kind} training checkpoint ({ckpt}: sharded weights, no config.json), not a "
              "Hugging Face model: verl loads the path with AutoConfig/from_pretrained (HFModelConfig, "
              "workers/config/model.py:156, :187) inside the workers, which fail there after the GPUs are placed",
              f"set {key}={hf} (it holds the full Hugging Face weights: save_contents had hf_model)" if ready else
              f"merge it first: python -m verl.model_merger merge --backend {backend} --local_dir {ckpt} "
              f"--target_dir {ckpt}_hf, then set {key} to that folder",
              fix=Fix(set={key: str(hf)}) if ready else None)
