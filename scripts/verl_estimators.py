#!/usr/bin/env python3
"""What each advantage estimator verl registers gives one sample per prompt: writes
wizard/check/data/verl_estimators.json, read by check's VI847.

    python scripts/verl_estimators.py           # regenerate the table from the installed verl
    python scripts/verl_estimators.py --check   # exit 1 when the committed table differs

verl's own code computes it: trainer/ppo/ray_trainer.py's compute_advantage (compiled from its source, as
importing ray_trainer needs the rollout stack) dispatches to core_algos.ADV_ESTIMATOR_REGISTRY, on a synthetic batch
of prompts whose samples score differently. With `rollout.n` samples per prompt (each prompt's samples share a
`uid`, as the trainer sets it) the outcome is classed:
- "zero": every advantage is 0, nothing is learned;
- "raw": each sample's advantage is its own score, no baseline;
- "relative": anything else (a baseline from the batch, a normalisation);
- "raises: <verl's message>": verl stops on it (the same batch with a group of 4 passes);
- "needs": the estimator needs inputs beyond rewards (values, baselines, actor statistics): no verdict.
The table is written for n = 1 and n = 4, so a test can see that the class at n = 1 is not what the estimator does
with a group.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_estimators.json"
SCORES = (0.2, 0.9, 0.5, 0.0, 0.7, 0.3)  # one score per prompt; a group's samples add 0.1 × their index
LENGTH = 3  # response tokens; the score sits on the last one, as verl's reward managers put it


def verls_compute_advantage():
    """trainer/ppo/ray_trainer.py:compute_advantage, compiled from verl's source with the names it uses."""
    import verl
    from verl import DataProto
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.core_algos import AdvantageEstimator

    src = Path(verl.__file__).parent / "trainer" / "ppo" / "ray_trainer.py"
    tree = ast.parse(src.read_text(encoding="utf-8"))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "compute_advantage")
    namespace = {"DataProto": DataProto, "core_algos": core_algos, "AdvantageEstimator": AdvantageEstimator,
                 "compute_response_mask": None, "Optional": object, "Any": object}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(src), "exec"), namespace)  # noqa: S102 - verl's code
    return namespace["compute_advantage"], f"verl/trainer/ppo/ray_trainer.py:{fn.lineno}"


def outcome(compute, name: str, n: int) -> str:
    import numpy as np
    import torch
    from verl import DataProto
    from verl.trainer.config.algorithm import AlgoConfig

    rows = len(SCORES) * n
    rewards = torch.zeros(rows, LENGTH)
    for i in range(rows):
        rewards[i, -1] = SCORES[i // n] + 0.1 * (i % n)
    data = DataProto.from_dict(tensors={"token_level_rewards": rewards, "response_mask": torch.ones(rows, LENGTH)},
                               non_tensors={"uid": np.array([str(i // n) for i in range(rows)], dtype=object)})
    try:
        adv = compute(data, adv_estimator=name, config=AlgoConfig()).batch["advantages"]
    except Exception as exc:  # noqa: BLE001 - what verl raises is the answer
        return "raises: " + " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
    if torch.allclose(adv, torch.zeros_like(adv)):
        return "zero"
    if torch.allclose(adv, rewards.sum(-1, keepdim=True).expand_as(adv)):
        return "raw"
    return "relative"


def build() -> dict:
    import warnings

    warnings.simplefilter("ignore")
    from verl.trainer.ppo import core_algos

    compute, where = verls_compute_advantage()
    table = {}
    for name in sorted(core_algos.ADV_ESTIMATOR_REGISTRY):
        got = {str(n): outcome(compute, name, n) for n in (1, 4)}
        if got["4"].startswith("raises"):  # it needs inputs a rewards-only batch lacks: no verdict at any n
            got = {n: "needs" for n in got}
        table[name] = got
    return {"computed_by": where, "scores": list(SCORES), "estimators": table}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
