"""wizard/check/data/verl_multinode.json (written by scripts/verl_multinode.py from verl 0.9.1's source): what
verl does on every node of a multi-node run, read by VI948 (socket_ifname), VI953 (remote_paths) and VI954
(ckpt_prune_ranks)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=1)
def multinode_table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_multinode.json").read_text(encoding="utf-8")
    return json.loads(text)
