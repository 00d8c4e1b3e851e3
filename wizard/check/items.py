"""The user's settings in the order Hydra applies them: YAML leaves, then overrides (`Item`), and the
model_engine they choose; and the same settings written back as a verl-init-style primary config.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from wizard.check.overrides import parse_override
from wizard.check.source import Source
from wizard.check.tree import flatten, set_key
from wizard.intent.errors import Problem


@dataclass
class Item:
    """One user setting (a YAML leaf or an override) after key validation."""

    key: str
    value: Any
    op: str
    origin: str
    override: int | None  # index in Source.overrides, None for YAML leaves
    apply: bool = True  # False: Hydra would refuse it; resolution goes on without it
    plus_to_plain: bool = False


def user_items(src: Source) -> tuple[list[Item], str, list[Problem]]:
    """User settings in order (YAML leaves, then overrides), the model_engine, and input problems."""
    problems: list[Problem] = []
    items: list[Item] = []
    engine = "dp"
    for d in src.yaml_defaults:
        if d == "ppo_megatron_trainer":
            engine = "megatron"
        elif isinstance(d, dict):
            for k, v in d.items():
                if str(k).split()[-1] == "model_engine":
                    engine = str(v)
                elif str(k).split()[-1] not in ("_self_",):
                    problems.append(Problem("VI800", "info", (str(k),), f"defaults entry {k}: {v} is composed by Hydra only",
                                            "without verl, verl-init resolves against ppo_trainer's own defaults"))
        elif isinstance(d, str) and d not in ("ppo_trainer", "_self_", "ppo_megatron_trainer"):
            problems.append(Problem("VI800", "info", (d,), f"defaults entry {d} is composed by Hydra only",
                                    "without verl, verl-init resolves against ppo_trainer's own defaults"))
    if src.config_name == "ppo_megatron_trainer":
        engine = "megatron"
    for key, value in flatten(src.yaml_body).items():
        if key == "model_engine":  # a full config dump carries the group choice as a key
            engine = str(value)
            continue
        items.append(Item(key, value, "", "YAML", None))
    for i, (text, origin) in enumerate(zip(src.overrides, src.origins)):
        ov = parse_override(text, origin, i)
        if ov is None and re.fullmatch(r"UNSET_[A-Za-z0-9_]+", text):
            # the static reader could not expand an argument (an array set in a branch, a function): say so,
            # never report the placeholder as a key
            name = text[len("UNSET_"):]
            problems.append(Problem("VI800", "info", (text,), f"argument ${name} could not be expanded without running "
                                    "the script (assigned in a branch or function); its overrides are not checked",
                                    "install bubblewrap so check reads the script as bash runs it, or pass the "
                                    "overrides after --"))
            continue
        if ov is None:
            problems.append(Problem("VI801", "error", (text,), f"{text!r} is not a Hydra override (key=value)",
                                    "write key=value, +key=value to add a key, or ~key to remove one"))
            continue
        if ov.key == "model_engine":
            engine = str(ov.value)
            continue
        if ov.op == "~":  # a removal also takes back what the YAML or earlier overrides set under that key
            items = [it for it in items if not (it.key == ov.key or it.key.startswith(ov.key + "."))]
        items.append(Item(ov.key, ov.value, ov.op, origin, i))
    return items, engine, problems


# the command-line overrides `check --verl` / `--deep` hand to Hydra beside their bundle (verify.harness.compose_bundle)
OVERRIDES_FILE = "verl_overrides.json"


def hydra_overrides(src: Source, items: list[Item]) -> list[str]:
    """The overrides as the launch passes them, for Hydra's own compose to apply on top of the YAML leaves
    (bundle_doc with_overrides=False): Hydra refuses a new key without `+` only on the command line, never in a
    primary config's body (hydra/_internal/config_loader_impl.py _apply_overrides_to_config, struct mode)."""
    return [src.overrides[it.override] for it in items if it.override is not None and it.key.split(".")[0] != "hydra"]


def bundle_doc(src: Source, items: list[Item], *, only_valid: bool, with_overrides: bool,
               engine: str | None = None) -> dict[str, Any]:
    """A verl-init-style primary config holding the user's settings (for Hydra and for --verl), composed on verl's
    ppo_trainer; when the launch names an entry point's own tree (fully_async_ppo_trainer, one_step_off_ppo_trainer in
    verl/experimental/*/config: ppo_trainer and a body of their own), that body is the primary config's too."""
    from wizard.check.entrypoints import CONFIGS, verl_config_dir

    own = None  # the entry point's own YAML, which becomes the primary config (Hydra takes hydra.searchpath only there)
    if src.yaml_path is None and src.config_name in CONFIGS and CONFIGS[src.config_name][1].startswith("experimental/"):
        from wizard.check.source import read_yaml

        own = read_yaml(verl_config_dir().parent.parent / CONFIGS[src.config_name][1] / f"{src.config_name}.yaml")
    defaults: list[Any] = ["ppo_trainer"]
    eng = engine
    if eng is None:
        eng = "dp"
        for d in src.yaml_defaults:
            if d == "ppo_megatron_trainer":
                eng = "megatron"
            elif isinstance(d, dict):
                for k, v in d.items():
                    if str(k).split()[-1] == "model_engine":
                        eng = str(v)
    if eng != "dp":
        defaults.append({"override model_engine": eng})
    defaults.append("_self_")
    body: dict[str, Any] = {k: v for k, v in (own or {}).items() if k not in ("hydra", "defaults")}
    for it in items:
        if it.op == "~" or (only_valid and not it.apply) or (it.override is not None and not with_overrides):
            continue
        if it.key.split(".")[0] == "hydra":
            continue
        set_key(body, it.key, it.value)
    return {"hydra": {"searchpath": ["pkg://verl.trainer.config"]}, "defaults": defaults, **body}
