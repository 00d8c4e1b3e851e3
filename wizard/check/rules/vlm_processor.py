"""VI665 (error): training rows with images, videos or audio, and a model verl 0.9.1 builds no processor for.

verl builds the processor once, with hf_processor(model.tokenizer_path or model.path) (workers/config/model.py:162;
site-packages/verl): AutoProcessor.from_pretrained (utils/tokenizer/tokenizer.py:196), None when that gives a
tokenizer (:200-201: a model with no processor files), then a `match` on the processor's class name that keeps only
the classes in wizard/check/data/verl_processor_cases.json (:208-236, generated from that match by
scripts/verl_processor_cases.py) and raises ValueError for any other (:235-236). hf_processor's own
`except Exception` (:242-246) turns that error, and any processor that fails to load (a folder without
preprocessor_config.json), into `processor = None` with a warning only. The trainer hands that None to RLHFDataset
(trainer/ppo/v1/trainer_base.py:706), and RLHFDataset asserts a processor for every row that has media
(`assert self.processor is not None, "processor is needed to process multimodal data"`, utils/dataset/rl_dataset.py:323),
at the first batch, after the workers are up; verl's SFT trainer builds the same processor (trainer/sft_trainer.py:203)
and MultiTurnSFTDataset asserts it likewise (utils/dataset/multiturn_sft_dataset.py:265-269). Real cases: a Gemma 3 run (verl#6341: Gemma3Processor), Kimi-VL from
PR #1639's example (verl#1428: KimiVLProcessor, remote code), a saved Qwen2.5-VL checkpoint folder with the tokenizer
but no preprocessor_config.json (hiyouga/EasyR1#48, a verl fork).

The processor class is read as AutoProcessor finds it: the processor_class of the folder's processor_config.json,
preprocessor_config.json, video_preprocessor_config.json or tokenizer_config.json, else transformers'
PROCESSOR_MAPPING_NAMES for config.json's model_type; for a hub id not on this machine, the model type of verl-init's
catalogue. A model this cannot place (not local, not cached, not catalogued) is left alone. Media rows are read from the
first rows of the local training and validation files (data.image_key / video_key / audio_key, verl's defaults
images / videos / audios, rl_dataset.py:109-111).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from wizard.check.rules.context import Ctx, Facts, local_data_files, model_folder, model_shape
from wizard.check.shellargs import PLACEHOLDER

M = "actor_rollout_ref.model"
TABLE = Path(__file__).resolve().parent.parent / "data" / "verl_processor_cases.json"
ROWS = 64  # rows read per data file for a media cell
# the files AutoProcessor reads a processor_class from, in its order (transformers' processing_auto)
CLASS_FILES = ("processor_config.json", "preprocessor_config.json", "video_preprocessor_config.json",
               "tokenizer_config.json")
PROCESSOR_FILES = CLASS_FILES[:3]  # without one of these the folder has no image/video processor at all


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(TABLE.read_text(encoding="utf-8"))


def _mapped(model_type: str) -> str | None:
    """transformers' processor class for a model type (None: none, a text model's tokenizer)."""
    try:
        from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES
    except Exception:  # noqa: BLE001 - no transformers here: nothing to say
        return None
    found = PROCESSOR_MAPPING_NAMES.get(model_type)
    return found if isinstance(found, str) else None


def _read(path: Path) -> dict[str, Any]:
    """A model folder's small JSON file (config.json, preprocessor_config.json), read bounded: {} when it is missing,
    too large, too deep or not JSON."""
    from wizard._io import UnsafeInput, read_user_file, safe_json

    try:
        data = safe_json(read_user_file(str(path), 4 << 20))
    except (OSError, ValueError, UnsafeInput):
        return {}
    return data if isinstance(data, dict) else {}


def folder_verdict(folder: Path) -> str | None:
    """Why verl's hf_processor gives None for this model folder, or None when it keeps a processor (or cannot tell)."""
    kept = table()["kept"]
    for name in CLASS_FILES:
        cls = _read(folder / name).get("processor_class")
        if isinstance(cls, str) and cls:
            if cls in kept:
                return None
            return f"its processor is {cls} ({name}), a class verl's hf_processor has no case for"
    if not any((folder / name).is_file() for name in PROCESSOR_FILES):
        return (f"{folder} has no processor files ({', '.join(PROCESSOR_FILES)}), so AutoProcessor builds only the "
                "tokenizer or fails, and hf_processor gives None (tokenizer.py:200-201, :242-246)")
    model_type = _read(folder / "config.json").get("model_type")
    if not isinstance(model_type, str):
        return None
    return type_verdict(model_type, "config.json")


def type_verdict(model_type: str, where: str) -> str | None:
    cls = _mapped(model_type)
    if cls is None:
        return (f"model type {model_type} ({where}) has no processor in transformers, so AutoProcessor gives the "
                "tokenizer and hf_processor returns None (tokenizer.py:200-201)")
    if cls in table()["kept"]:
        return None
    return f"its processor is {cls} (model type {model_type}, {where}), a class verl's hf_processor has no case for"


def _has_media(cell: Any) -> bool:
    """A media cell verl's _build_messages treats as media: any non-empty value (`... or []`, rl_dataset.py:315-317)."""
    if cell is None or isinstance(cell, float):  # None, or pandas' NaN for a row without media
        return False
    try:
        return len(cell) > 0
    except TypeError:
        return True


def media_row(c: Ctx, kinds: tuple[str, ...] = ("image", "video", "audio")) -> tuple[str, int, str, str] | None:
    """(file, row, kind, column) of the first row of a local training/validation file with a non-empty media cell."""
    from wizard.check.rules.datacontent import file_rows

    columns = {kind: col for kind in kinds
               if isinstance(col := c.v(f"data.{kind}_key", f"{kind}s"), str) and col}
    for _, path, local in local_data_files(c, (".parquet", ".jsonl")):
        try:
            for n, row in enumerate(file_rows(local)):
                if n >= ROWS:
                    break
                for kind, col in columns.items():
                    if _has_media(row.get(col)):
                        return path, n, kind, col
        except Exception:  # noqa: BLE001 - VI878 reports an unreadable file
            continue
    return None


def _report(c: Ctx, model: str, kinds: tuple[str, ...], stops: str) -> None:
    media = media_row(c, kinds)
    if media is None:
        return
    tok = c.v(f"{model}.tokenizer_path")
    key = f"{model}.tokenizer_path" if isinstance(tok, str) and tok else f"{model}.path"
    name = c.v(key)
    if c.unknown(key) or not isinstance(name, str) or PLACEHOLDER in name:
        return
    folder = model_folder(c, name)
    if folder is not None:
        why = folder_verdict(folder)
    else:
        shape, _ = model_shape(c, key) if key.endswith(".path") else (None, "")
        arch = shape.arch if shape is not None and shape.source == "catalogue" else None
        why = type_verdict(arch, "verl-init's model catalogue") if isinstance(arch, str) and arch else None
    if why is None:
        return
    path, row, kind, col = media
    kept = ", ".join(sorted(table()["kept"]))
    c.add("VI665", "error", (key, f"data.{kind}_key"),
          f"{path} row {row} holds {kind}s (data.{kind}_key={col}) but verl 0.9.1 builds no processor for {key}={name}: "
          f"{why}; hf_processor returns None with only a warning (utils/tokenizer/tokenizer.py:208-246) and {stops}",
          f"train a model whose processor verl handles ({kept}) from a folder that has its processor files "
          "(copy preprocessor_config.json and the chat template from the base model), or drop the media columns")


def rule_vlm_processor(c: Ctx, f: Facts) -> None:
    """PPO: HFModelConfig's processor (workers/config/model.py:162) -> RLHFDataset (trainer_base.py:706)."""
    _report(c, M, ("image", "video", "audio"),
            "RLHFDataset stops at the first batch: AssertionError 'processor is needed to process multimodal data' "
            "(utils/dataset/rl_dataset.py:323)")


def rule_sft_vlm_processor(c: Ctx, f: Facts) -> None:
    """SFT: the same HFModelConfig processor (trainer/sft_trainer.py:203) -> MultiTurnSFTDataset, which asserts it for
    every row holding the image or video column (utils/dataset/multiturn_sft_dataset.py:265-269)."""
    _report(c, "model", ("image", "video"),
            "MultiTurnSFTDataset stops at the first batch: AssertionError 'processor is needed to process image and "
            "video' (utils/dataset/multiturn_sft_dataset.py:269)")
