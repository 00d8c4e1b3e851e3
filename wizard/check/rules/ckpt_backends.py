"""VI705: a checkpoint-engine backend name that no verl 0.9.1 engine registers (paths under site-packages/verl).

actor_rollout_ref.rollout.checkpoint_engine.backend is a free string: CheckpointEngineConfig validates nothing
(workers/config/rollout.py:124-141; its comment at :132 lists "naive, nccl, nixl, hccl"). The name is resolved only
by CheckpointEngineRegistry.get (checkpoint_engine/base.py:84-99), which raises "Checkpoint engine X not registered":
in every actor worker's init_model (`CheckpointEngineRegistry.new(backend, ...)`, workers/engine_workers.py:686 —
every run with an actor, whichever trainer) and in CheckpointEngineManager (base.py:418; fully_async_trainer.py:221,
ray_trainer.py:974, trainer_separate_async.py:166): after Ray has started and the GPUs are booked. The names verl
registers are read from its engines' `@CheckpointEngineRegistry.register("NAME")` decorators
(wizard/check/data/verl_ckpt_backends.json, written by scripts/verl_ckpt_backends.py): naive, nccl (the NCCL engine,
and on Ascend the HCCL engine, hccl_checkpoint_engine.py:103), nixl, kimi_ckpt_engine, mooncake, delta_sharded.
"hccl", "kimi" and "delta" — the engines' file names — are not registered (verl#6425 asks why HCCL registers as
"nccl"). With checkpoint_engine.custom_backend_module set, verl imports that module first so it can register more
names (base.py:334-336, engine_workers.py:683-685): nothing is said then.
"""

from __future__ import annotations

import difflib
import functools
import json
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import R, Ctx, Facts

BACKEND = f"{R}.checkpoint_engine.backend"
CUSTOM = f"{R}.checkpoint_engine.custom_backend_module"


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    text = resources.files("wizard.check").joinpath("data/verl_ckpt_backends.json").read_text(encoding="utf-8")
    return json.loads(text)


def rule_ckpt_backend_name(c: Ctx, f: Facts) -> None:
    backend = c.v(BACKEND)
    if not isinstance(backend, str) or c.unknown(BACKEND, CUSTOM) or c.v(CUSTOM):
        return
    t = table()
    registered = t["registered"]
    if backend in registered:
        return
    right = t["module_names"].get(backend.lower()) or (backend.lower() if backend.lower() in registered else None)
    close = right or next(iter(difflib.get_close_matches(backend, list(registered), n=1, cutoff=0.6)), None)
    at = [w for w in registered.get(right or "", []) if f"/{backend.lower()}_checkpoint_engine.py:" in w]
    why = (f" ({backend!r} is the engine's file name; it registers as {right!r}, {', '.join(at or registered[right])})"
           if right and right != backend.lower() else "")
    c.add("VI705", "error", (BACKEND,),
          f"{BACKEND}={backend!r} is not a checkpoint engine verl registers{why}: every actor worker stops with "
          f"'Checkpoint engine {backend} not registered' at init ({t['worker_new'][0]}, {t['get']}), after the GPUs "
          "are booked",
          f"set {BACKEND} to one of {', '.join(sorted(registered))}" + (f" (here {close})" if close else "")
          + f", or name the module that registers it in {CUSTOM}",
          fix=Fix(set={BACKEND: right}) if right else None)
