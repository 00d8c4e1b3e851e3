"""Model ids checked offline (issue 27 item 5): a hub id that is neither in the catalogue (wizard/planner/catalog.yaml,
aliases included) nor in the local Hugging Face cache is a warning (VI548) that says where verl-init looked; a near
miss of a known id names it (did you mean). Nothing here reaches the network.

The local cache is the folder huggingface_hub uses: $HF_HUB_CACHE, else $HF_HOME/hub, else
~/.cache/huggingface/hub; a model there is a folder `models--<org>--<name>`.
"""

from __future__ import annotations

import difflib
import os
from typing import Any, Optional

CUTOFF = 0.85  # difflib ratio for a near miss (one or two letters off in a 20-letter id)


def hub_cache() -> str:
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.path.join(os.path.expanduser(home), "hub")


def cached_ids(cache: str) -> list[str]:
    try:
        names = os.listdir(cache)
    except OSError:
        return []
    return [n[len("models--"):].replace("--", "/", 1) for n in names if n.startswith("models--")]


def _looks_like_hub_id(model: str) -> bool:
    return (model.count("/") == 1 and not model.startswith(("/", ".", "~", "$")) and "://" not in model
            and not os.path.exists(os.path.expanduser(model)))


def problem(model: str) -> Optional[tuple[str, str]]:
    """(message, hint) when `model` is a hub id known nowhere here; None when known (or a local folder)."""
    from wizard.planner.shapes import catalogue

    if not _looks_like_hub_id(model):
        return None
    known = {k: k for k in catalogue()}  # lower-cased ids (the catalogue is keyed lower-case)
    cache = hub_cache()
    cached = cached_ids(cache)
    for c in cached:
        known.setdefault(c.lower(), c)
    if model.lower() in known:
        return None
    names = _proper_names()
    close = difflib.get_close_matches(model.lower(), list(known), n=1, cutoff=CUTOFF)
    where = f"neither the catalogue (wizard/planner/catalog.yaml) nor the local Hugging Face cache ({cache})"
    if close:
        name = names.get(close[0], known[close[0]])
        return (f"{model!r} is in {where}", f"did you mean {name}? (verl downloads the id as written)")
    return (f"{model!r} is in {where}; verl downloads it at start-up, so a misspelt id fails only then",
            "check the id on the hub, or give a local model folder")


def _proper_names() -> dict[str, str]:
    """lower-cased id -> the id as the catalogue spells it."""
    from pathlib import Path

    import yaml

    raw = yaml.safe_load((Path(__file__).parent / "catalog.yaml").read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for name, entry in raw.items():
        for key in [name, *dict(entry).get("aliases", [])]:
            out[key.lower()] = key
    return out


def check(b: Any) -> None:
    """The planner's hook: the policy model (and a critic / reward model id) known somewhere here."""
    a = b.a
    for key in ("model", "critic_model", "reward_model"):
        value = getattr(a, key, None)
        if not isinstance(value, str) or not value:
            continue
        found = problem(value)
        if found is not None:
            b.f.warning("VI548", (key,), f"{key} {found[0]}", found[1])
    _chat_template(b)


TEMPLATE_KEYS = ("actor_rollout_ref.model.custom_chat_template", "data.apply_chat_template_kwargs.chat_template")


def _chat_template(b: Any) -> None:
    """VI549: a local model folder with no chat template (a base model's), none given in the overrides. verl applies
    one to every prompt: the plan's overlong filter would drop every row (check's VI908 has the sources)."""
    import os

    from wizard.planner.overlong import has_chat_template
    from wizard.verlspec.hydra_overrides import parse_override

    model = b.a.model
    if not (isinstance(model, str) and os.path.isdir(model)) or has_chat_template(model) is not False:
        return
    given = {ov.key for ov in map(parse_override, b.a.overrides) if ov is not None}
    if given & set(TEMPLATE_KEYS):
        return
    b.f.error("VI549", ("model", "overrides"),
              f"model {model} has no chat template (tokenizer_config.json has none, nor chat_template.jinja/.json): "
              "verl applies one to every prompt, and the plan's overlong filter would drop every row as if too long",
              "give one: --override actor_rollout_ref.model.custom_chat_template='<Jinja template>' (the base "
              "model's own format), or use the model's instruct variant")
