"""VI610 and VI611: resuming a Megatron checkpoint in another tensor/pipeline/expert parallel layout than it was saved in
(verl PR#5154, which made the reshardable optimizer format the default for such reports, and PR#5705, which set it
back to off for memory).

What verl 0.9.1 writes and reads (site-packages/verl, utils/checkpoint/megatron_checkpoint_manager.py):

- The parallel layout of a save: rank 0 writes the Megatron TransformerConfig, with its tensor/pipeline/virtual
  pipeline/expert/expert-tensor/context parallel sizes, to <checkpoint>/<role>/transformer_config.json when 'extra' is
  saved (:1286-1287, _save_transformer_config :1042-1056; utils/megatron_utils.py:1094-1097).
- 'extra' (the RNG state) is one ShardedObject of global shape (pp_size, tp_size) at (pp_rank, tp_rank)
  (get_rng_state :295-305). Megatron's dist_checkpointing keys a ShardedObject by that shape, so a run whose
  pipeline or tensor parallel size differs asks for keys the checkpoint does not hold and the load (:968-978) stops.
- 'optimizer': with the distributed optimizer (megatron.use_distributed_optimizer, default True) the optimizer is
  saved 'dp_reshardable' unless megatron.dist_ckpt_optim_fully_reshardable=True (default False;
  _build_sharded_state_dict_metadata :441-454, trainer/config/engine/megatron.yaml:51), and the load builds its
  template from the metadata saved with the checkpoint (:897-901, :944-963). dp_reshardable takes a new
  data-parallel size only (verl docs/advance/checkpoint.rst, "Megatron provides multiple optimizer checkpoint
  formats"); the data-parallel group includes context parallel (:372), so a new CP size alone is a new DP split.
- Which checkpoint is resumed: resume_mode=auto takes the global_step_N that default_local_dir's
  latest_checkpointed_iteration.txt names, resume_path takes trainer.resume_from_path (rules/checkpoints.py); the
  role's checkpoint.load_contents defaults to its save_contents, [model, optimizer, extra].

VI611, the same resume with megatron.use_dist_checkpointing turned the other way than the save: the checkpoint
manager takes the flag from the role's engine config (workers/engine/megatron/transformer_impl.py:643). With it on,
'model' in load_contents is read from <role>/model/dist_ckpt (should_load_dist_ckpt_model :264-266, load :916-937);
with it off, 'model' (or 'hf_model') is read as Hugging Face weights from <role>/model/huggingface through the bridge
(should_load_hf_model :257-262, :938-940). What the save wrote is in the folder's ckpt_contents.json
(_build_checkpoint_manifest :475-607; utils/megatron_utils.py:1100-1113): contents.model.format 'huggingface' or
'megatron_dist_checkpoint', and contents.hf_model when Hugging Face weights were written too. A save whose manifest
lacks the format the run reads leaves that folder empty: the load stops. PEFT checkpoints keep their own layout
(:916, adapter shards) and are left out.

Every failure happens in the worker's load_checkpoint, after Ray has booked the GPUs and built the models. The rule
reads the checkpoint only where it is on this machine (as VI926 does). The pinned keys, the optimizer switch and its
default, the manifest's name and formats come from wizard/check/data/verl_mcore_resume.json, written from verl's source by
scripts/verl_mcore_resume.py.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from wizard.check.rules.checkpoints import MODE, PATH, resumed_folder
from wizard.check.rules.context import A, Ctx, Facts

MAX_LAYOUT_BYTES = 1 << 20


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(resources.files("wizard.check").joinpath("data/verl_mcore_resume.json")
                      .read_text(encoding="utf-8"))


def _saved_json(path: Path) -> dict[str, Any] | None:
    """A JSON object verl wrote into a checkpoint folder, read bounded; None if absent or unreadable."""
    from wizard._io import read_user_file, safe_json

    if not path.is_file():
        return None
    try:
        doc = safe_json(read_user_file(str(path), MAX_LAYOUT_BYTES))
    except Exception:  # noqa: BLE001 - an unreadable file is not this rule's finding
        return None
    return doc if isinstance(doc, dict) else None


def saved_layout(folder: Path) -> dict[str, Any] | None:
    """The parallel sizes a role's checkpoint folder was saved with (its transformer_config.json); None if absent."""
    return _saved_json(folder / table()["layout_file"])


def _size(layout: dict[str, Any], key: str) -> int | None:
    """A parallel size as Megatron runs it: expert_tensor_parallel_size None is the tensor parallel size; virtual
    pipeline None is 1 chunk."""
    value = layout.get(key)
    if value is None and key == "expert_tensor_parallel_size":
        value = layout.get("tensor_model_parallel_size")
    if value is None and key == "virtual_pipeline_model_parallel_size":
        value = 1
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _roles(c: Ctx, f: Facts) -> list[tuple[str, str]]:
    """The Megatron roles a resume loads; Megatron-FSDP ones keep one DTensor checkpoint of their own (:884-886)."""
    roles = [(A, "actor")] if f.megatron else []
    if f.use_critic and c.v("critic.strategy") == "megatron":
        roles.append(("critic", "critic"))
    return [(p, r) for p, r in roles if c.v(f"{p}.megatron.use_megatron_fsdp") is not True]


def _changed(saved: dict[str, Any], now: dict[str, Any], keys: list[str]) -> list[str]:
    return [k for k in keys if _size(saved, k) is not None and _size(now, k) is not None
            and _size(saved, k) != _size(now, k)]


def _resume_folder(c: Ctx) -> Path | None:
    """The checkpoint folder a PPO run (not a recipe's) resumes from, when it is known and on this machine."""
    if c.src.entry != "ppo" or c.src.recipe or c.unknown(MODE, PATH, "trainer.default_local_dir"):
        return None
    folder = resumed_folder(c)
    return folder if folder is not None and folder.is_dir() else None


def rule_mcore_resume(c: Ctx, f: Facts) -> None:
    folder = _resume_folder(c)
    if folder is None:
        return
    t = table()
    for prefix, role in _roles(c, f):
        saved = saved_layout(folder / role)
        keys = [f"{prefix}.megatron.{k}" for k in t["optimizer_pinned"] + t["rng_pinned"]]
        load_key = f"{prefix}.checkpoint.load_contents"
        if saved is None or c.unknown(load_key, *keys):
            continue
        now = {k: c.v(f"{prefix}.megatron.{k}") for k in set(t["optimizer_pinned"] + t["rng_pinned"])}
        experts = saved.get("num_moe_experts")
        dense = not (isinstance(experts, int) and experts > 0)  # a dense model has no expert grid to reshard
        optim_keys = [k for k in t["optimizer_pinned"] if not (dense and k.startswith("expert_"))]
        load = c.v(load_key)
        load = load if isinstance(load, list) else t["load_contents_default"]
        rng = _changed(saved, now, t["rng_pinned"]) if "extra" in load else []
        flag, switch = f"{prefix}.megatron.{t['optimizer_flag']}", f"{prefix}.megatron.{t['optimizer_switch']}"
        pinned_optimizer = (c.v(switch, t["optimizer_switch_default"]) is True
                            and c.v(flag, t["optimizer_flag_default"]) is not True)
        optim = _changed(saved, now, optim_keys) if "optimizer" in load and pinned_optimizer else []
        if not rng and not optim:
            continue
        changed = sorted(set(rng) | set(optim))
        was = ", ".join(f"{k}={_size(saved, k)}" for k in changed)
        is_ = ", ".join(f"{k}={_size(now, k)}" for k in changed)
        parts = []
        if optim:
            parts.append(f"the optimizer was saved {t['optimizer_default_format']} ({t['optimizer_flag']} is off), "
                         "which takes a new data-parallel size only (megatron_checkpoint_manager.py:441-454, :944-963)")
        if rng:
            parts.append("the RNG state ('extra') is sharded by (pipeline, tensor) parallel size "
                         "(megatron_checkpoint_manager.py:295-305, :968-978)")
        c.add("VI610", "error", (*(f"{prefix}.megatron.{k}" for k in changed), MODE),
              f"{MODE} resumes {folder / role}, saved with {was} ({t['layout_file']}), and this run sets the {role}'s "
              f"{is_}: " + "; ".join(parts) + ". verl's checkpoint load stops in the worker, after the GPUs are booked",
              f"resume with the saved {was}; or keep the new layout and load the weights only: "
              f"{load_key}=[model] (a fresh optimizer and RNG; {flag}=True makes later saves reshardable)")


def saved_manifest(folder: Path) -> dict[str, Any] | None:
    """A role folder's ckpt_contents.json (verl >= the v2 layout); None if absent or unreadable."""
    return _saved_json(folder / table()["manifest_file"])


def _saved_formats(manifest: dict[str, Any]) -> set[str] | None:
    """The formats the 'model' weights were saved in ('huggingface', 'megatron_dist_checkpoint'); None if unknown."""
    contents = manifest.get("contents")
    if not isinstance(contents, dict) or not isinstance(contents.get("model"), dict):
        return None
    formats = {contents["model"].get("format")}
    if isinstance(contents.get("hf_model"), dict):
        formats.add(contents["hf_model"].get("format"))
    return {x for x in formats if isinstance(x, str)}


def rule_mcore_resume_weights(c: Ctx, f: Facts) -> None:
    folder = _resume_folder(c)
    if folder is None:
        return
    t = table()
    hf, dist = t["model_formats"]["mbridge"], t["model_formats"]["dist_checkpointing"]
    for prefix, role in _roles(c, f):
        manifest = saved_manifest(folder / role)
        key, load_key = f"{prefix}.megatron.use_dist_checkpointing", f"{prefix}.checkpoint.load_contents"
        if manifest is None or c.unknown(key, load_key) or (manifest.get("backend") or {}).get("peft"):
            continue
        saved = _saved_formats(manifest)
        load = c.v(load_key)
        load = load if isinstance(load, list) else t["load_contents_default"]
        now = c.v(key) is True
        wants = dist if now and "model" in load else hf if ("model" in load or "hf_model" in load) else None
        if saved is None or wants is None or wants in saved:
            continue
        folder_name = "model/dist_ckpt" if wants == dist else "model/huggingface"
        c.add("VI611", "error", (key, MODE),
              f"{MODE} resumes {folder / role}, whose weights were saved as {', '.join(sorted(saved))} "
              f"({t['manifest_file']}), and this run sets {key}={now}: verl loads the model from {folder_name} "
              f"({'should_load_dist_ckpt_model' if now else 'should_load_hf_model'}, megatron_checkpoint_manager.py:"
              f"{'916-937' if now else '938-940'}), which that save did not write; the load stops in the worker, "
              "after the GPUs are booked",
              f"set {key}={not now} as when the checkpoint was saved, or start a new run with {MODE}=disable")
