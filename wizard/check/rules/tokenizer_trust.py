"""The tokenizer's remote code and the flag verl loads it with (VI693).

verl 0.9.1 builds the trainer's tokenizer and processor in HFModelConfig from actor_rollout_ref.model.tokenizer_path
(else .path) with actor_rollout_ref.model.trust_remote_code (workers/config/model.py:153-162,
`hf_tokenizer(self.local_tokenizer_path, trust_remote_code=self.trust_remote_code)`); main_ppo's V1 trainer takes its
dataset tokenizer from there (trainer/ppo/v1/trainer_base.py:701-706), and so does the legacy trainer
(trainer/main_ppo_v0.py:190). data.trust_remote_code, documented as the remote-tokenizer switch
(trainer/config/data/legacy_data.yaml:103-104, added by verl PR#865 for Moonlight's TikTokenTokenizer), is read only
by the experimental fully_async and one_step_off entry points for their dataset tokenizer
(fully_async_policy/fully_async_main.py:62, one_step_off_policy/main_ppo.py:67); which entry points read it is
wizard/check/data/verl_readers.json, generated from verl's source by scripts/verl_readers.py. So data.trust_remote_code
=True with the model's flag false trusts nothing under main_ppo, and under the experimental entry points the dataset
tokenizer and the workers' tokenizer are loaded differently.

Whether a tokenizer folder needs its own code is decided the way transformers' AutoTokenizer decides it
(models/auto/tokenization_auto.py:726-835 in transformers 5): tokenizer_config.json's auto_map (AutoTokenizer entry,
or the legacy list form) is remote code; transformers' own class for it is `type(config) in TOKENIZER_MAPPING` or a
tokenizer_class it can name (tokenizer_class_from_name); a model_type in MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS has
its remote class ignored without trust_remote_code. With remote code, no local class and trust_remote_code false,
transformers raises "contains custom code which must be executed" (error); with a local class it silently loads that
class instead of the folder's (warning). Only a local folder or a Hugging Face cache snapshot is read (tokenizer_config
.json / config.json, at most 1 MiB each); nothing is fetched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wizard.check.rules.context import M, Ctx, Facts, local_path, model_folder
from wizard.check.shellargs import PLACEHOLDER

MAX_JSON_BYTES = 1 << 20
DATA_FLAG = "data.trust_remote_code"
MODEL_FLAG = f"{M}.trust_remote_code"
LOADER = "workers/config/model.py:153-162"


def _json(path: Path) -> dict | None:
    from wizard._io import UnsafeInput, read_user_file, safe_json

    try:
        doc = safe_json(read_user_file(str(path), MAX_JSON_BYTES))
    except (OSError, ValueError, UnsafeInput):
        return None
    return doc if isinstance(doc, dict) else None


def _auto_tokenizer(doc: dict) -> str | None:
    """The class reference of tokenizer_config.json's AutoTokenizer auto_map (fast first, as transformers 5), else
    None."""
    auto = doc.get("auto_map")
    entry: Any = auto if isinstance(auto, (list, tuple)) else None
    if isinstance(auto, dict):
        entry = auto.get("AutoTokenizer")
    if isinstance(entry, str):
        return entry
    if isinstance(entry, (list, tuple)):
        refs = [r for r in entry if isinstance(r, str)]
        return refs[-1] if refs else None
    return None


def remote_tokenizer(folder: Path) -> tuple[str, bool] | None:
    """(class reference, whether transformers has a class of its own to fall back on) when the folder's tokenizer is
    the folder's own code that transformers runs only with trust_remote_code; None when it is not, or transformers
    ignores that code anyway."""
    doc = _json(folder / "tokenizer_config.json")
    ref = _auto_tokenizer(doc) if doc else None
    if ref is None:
        return None
    from transformers.models.auto import tokenization_auto as ta
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config = _json(folder / "config.json") or {}
    model_type = config.get("model_type") if isinstance(config.get("model_type"), str) else None
    if model_type in getattr(ta, "MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS", ()):
        return None
    local = False
    if model_type and model_type in CONFIG_MAPPING:
        try:
            local = CONFIG_MAPPING[model_type] in ta.TOKENIZER_MAPPING
        except Exception:  # noqa: BLE001 - a config class transformers cannot import here: no local class
            local = False
    name = doc.get("tokenizer_class")
    if not local and isinstance(name, str) and name:
        base = name.removesuffix("Fast")
        local = bool(ta.tokenizer_class_from_name(base) or ta.tokenizer_class_from_name(base + "Fast"))
    return ref, local


def _data_flag_readers(entry: str) -> list[str]:
    """verl's readers of data.trust_remote_code under this entry point (verl_readers.json, from verl's source)."""
    from wizard.check.rules.readers import readers_table

    scopes = readers_table().get("keys", {}).get(DATA_FLAG, {})
    return list(scopes.get(f"entry:{entry}", []))


def _all_data_flag_readers() -> list[str]:
    from wizard.check.rules.readers import readers_table

    scopes = readers_table().get("keys", {}).get(DATA_FLAG, {})
    return [ref.removeprefix("verl/") for scope, refs in scopes.items() if scope.startswith("entry:") for ref in refs]


def _tokenizer_folder(c: Ctx) -> tuple[str, str, Path] | None:
    key = f"{M}.tokenizer_path" if isinstance(c.v(f"{M}.tokenizer_path"), str) else f"{M}.path"
    path = c.v(key)
    if not isinstance(path, str) or c.unknown(key) or PLACEHOLDER in path:
        return None
    folder = model_folder(c, path)
    if folder is None:
        local = local_path(c, path)
        folder = local if local is not None and (local / "tokenizer_config.json").is_file() else None
    return (key, path, folder) if folder is not None else None


def rule_tokenizer_trust(c: Ctx, f: Facts) -> None:
    if c.unknown(MODEL_FLAG) or bool(c.v(MODEL_FLAG)):
        return
    data_flag = not c.unknown(DATA_FLAG) and bool(c.v(DATA_FLAG))
    found = _tokenizer_folder(c)
    remote = remote_tokenizer(found[2]) if found else None
    if not data_flag and remote is None:
        return
    entry = getattr(c.src, "entry", "ppo")
    parts, keys = [], [MODEL_FLAG]
    if data_flag:
        keys.append(DATA_FLAG)
        readers = _data_flag_readers(entry)
        if readers:
            parts.append(f"{DATA_FLAG}=True loads only the dataset tokenizer here ({', '.join(readers)}); the workers "
                         f"load theirs with {MODEL_FLAG}=false ({LOADER})")
        else:
            others = ", ".join(_all_data_flag_readers()) or "no entry point"
            parts.append(f"{DATA_FLAG}=True is read by nothing this entry point runs (only {others}): verl loads the "
                         f"tokenizer and processor with {MODEL_FLAG}, which is false ({LOADER})")
    severity = "warning"
    if remote is not None:
        key, path, _ = found
        keys.append(key)
        ref, local = remote
        if local:
            parts.append(f"{path}'s tokenizer is its own code ({ref}, tokenizer_config.json auto_map) and without the "
                         f"flag transformers silently loads its built-in class for the model instead")
        else:
            severity = "error"
            parts.append(f"{path}'s tokenizer is its own code ({ref}, tokenizer_config.json auto_map), which "
                         f"transformers refuses to load without trust_remote_code")
    c.add("VI693", severity, tuple(dict.fromkeys(keys)), "; ".join(parts),
          f"set {MODEL_FLAG}=true (the folder's tokenizer code then runs in the trainer and every worker: read it "
          f"first)")
