"""A model folder whose config.json needs its own code (VI886): an `auto_map` naming the folder's classes, for a
model_type the installed transformers does not know. transformers then loads it only with trust_remote_code=True,
and verl passes actor_rollout_ref.model.trust_remote_code (default false) to every load of the model, its tokenizer
and its processor (workers/config/model.py:160-200): the workers stop with transformers' "requires you to execute the
configuration file" error. Only a local folder or a hub id's snapshot in this machine's Hugging Face cache is read
(config.json, at most 1 MiB); nothing is fetched.
"""

from __future__ import annotations

from wizard.check.rules.context import M, Ctx, Facts, model_folder
from wizard.check.shellargs import PLACEHOLDER

MAX_CONFIG_BYTES = 1 << 20


def custom_model_type(folder) -> str | None:
    """The folder's model_type when its config.json maps classes to the folder's own code (auto_map) and the
    installed transformers has no such model_type; else None."""
    from wizard._io import UnsafeInput, read_user_file, safe_json

    try:
        doc = safe_json(read_user_file(str(folder / "config.json"), MAX_CONFIG_BYTES))
    except (OSError, ValueError, UnsafeInput):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("auto_map"), dict) or not doc["auto_map"]:
        return None
    model_type = doc.get("model_type")
    if not isinstance(model_type, str):
        return None
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return None if model_type in CONFIG_MAPPING_NAMES else model_type


def rule_remote_code(c: Ctx, f: Facts) -> None:
    path, flag = c.v(f"{M}.path"), f"{M}.trust_remote_code"
    if not isinstance(path, str) or c.unknown(f"{M}.path", flag) or PLACEHOLDER in path or bool(c.v(flag)):
        return
    folder = model_folder(c, path)
    if folder is None:
        return
    model_type = custom_model_type(folder)
    if model_type is not None:
        c.add("VI886", "error", (flag, f"{M}.path"),
              f"{path} is model_type {model_type!r}, which the installed transformers does not know: its config.json "
              f"maps it to the folder's own code (auto_map), which transformers runs only with trust_remote_code, and "
              f"{flag} is false (verl passes it to every load of the model, workers/config/model.py:160-200)",
              f"set {flag}=true (the model's code then runs on every worker: read it first)")
