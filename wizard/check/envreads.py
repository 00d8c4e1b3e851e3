"""The environment variables verl's own code reads (scripts/verl_env_reads.py → wizard/check/data/verl_env_reads.json):
VI829 names them when a script exports them before `ray job submit`, VI801/VI802 when a config key of that name
is added instead (verl#1853: TENSORBOARD_DIR)."""

from __future__ import annotations

import functools
import json


@functools.lru_cache(maxsize=1)
def verl_env_reads() -> frozenset[str]:
    from importlib import resources

    text = resources.files("wizard.check").joinpath("data/verl_env_reads.json").read_text(encoding="utf-8")
    return frozenset(json.loads(text)["reads"])


def env_hint(key: str, hint: str) -> str:
    """`hint`, led by the environment variable verl reads for this key's name (trainer.tensorboard_dir →
    TENSORBOARD_DIR, verl/utils/tracking.py) where there is one."""
    name = key.rsplit(".", 1)[-1].upper()
    if "_" not in name or name not in verl_env_reads():
        return hint
    return f"verl reads it from the environment variable {name}: set {name} where the job runs" + (
        f"; {hint}" if hint else "")
