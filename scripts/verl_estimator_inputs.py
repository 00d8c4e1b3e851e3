#!/usr/bin/env python3
"""What each advantage estimator verl registers needs beyond rewards, and whether the V1 trainer supplies it:
writes wizard/check/data/verl_estimator_inputs.json, read by check's VI623-VI625.

    python scripts/verl_estimator_inputs.py           # regenerate the table from the installed verl
    python scripts/verl_estimator_inputs.py --check   # exit 1 when the committed table differs

verl's own code computes it. The dispatcher is trainer/ppo/ray_trainer.py's compute_advantage (compiled from its
source, as scripts/verl_estimators.py does), which V1 calls through trainer/ppo/v1/utils.py's
compute_advantage_for_multi_trajectories. The fields V1 hands it are read from V1's own _compute_advantage
(trainer/ppo/v1/trainer_base.py: the `fields = [...]` it fetches from TransferQueue, rm_scores becoming the
rewards and uid the group index, nothing else: no prompts, attention_mask, reward_baselines, sum_pi_squared nor
reward-component columns). For each estimator:
- "v1": "ok", or "raises: <verl's message>" on a batch of exactly V1's fields (groups of 4, config with every
  AlgoConfig option an estimator asks for set);
- "needs": the optional inputs without which it raises on the full batch the legacy trainer can build
  (one dropped at a time; reward_baselines only where the estimator takes it, as the legacy trainer adds it for
  ReMax alone): batch fields, `reward_components` (GDPO's per-reward columns) and `config:<name>` for an
  AlgoConfig option left at its default.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path
from verl_estimators import verls_compute_advantage  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_estimator_inputs.json"
PROMPTS, N, PROMPT_LEN, LENGTH = 3, 4, 2, 3
GDPO_KEYS = ["accuracy_reward", "format_reward"]  # reward-component columns a GDPO reward function returns
# optional inputs the legacy trainer can put in the batch (ray_trainer.py fit: prompts/attention_mask from the
# rollout, values with a critic, reward_baselines for ReMax, sum_pi_squared with calculate_sum_pi_squared)
OPTIONAL = ("prompts", "attention_mask", "values", "reward_baselines", "sum_pi_squared", "old_log_probs",
            "ref_log_prob", "rollout_log_probs")


def v1_fields() -> tuple[list[str], str]:
    """The fields V1's _compute_advantage fetches (trainer/ppo/v1/trainer_base.py), from its source."""
    import verl

    src = Path(verl.__file__).parent / "trainer" / "ppo" / "v1" / "trainer_base.py"
    tree = ast.parse(src.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_compute_advantage":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "fields"
                                                       for t in sub.targets) and isinstance(sub.value, ast.List):
                    return [ast.literal_eval(e) for e in sub.value.elts], f"verl/trainer/ppo/v1/trainer_base.py:{sub.lineno}"
    raise SystemExit("V1's _compute_advantage no longer lists its fields: read trainer_base.py again")


def _batch(fields: set[str], components: bool):
    import numpy as np
    import torch
    from verl import DataProto

    rows = PROMPTS * N
    rewards = torch.zeros(rows, LENGTH)
    for i in range(rows):
        rewards[i, -1] = 0.2 * (i // N) + 0.1 * (i % N)
    full = {"token_level_rewards": rewards, "response_mask": torch.ones(rows, LENGTH),
            "prompts": torch.ones(rows, PROMPT_LEN, dtype=torch.long),
            "attention_mask": torch.ones(rows, PROMPT_LEN + LENGTH, dtype=torch.long),
            "values": torch.full((rows, LENGTH), 0.1), "reward_baselines": torch.full((rows,), 0.3),
            "sum_pi_squared": torch.full((rows, LENGTH), 0.5), "old_log_probs": torch.full((rows, LENGTH), -0.7),
            "ref_log_prob": torch.full((rows, LENGTH), -0.7), "rollout_log_probs": torch.full((rows, LENGTH), -0.7)}
    tensors = {k: v for k, v in full.items() if k in fields or k in ("token_level_rewards", "response_mask")}
    non_tensors = {"uid": np.array([str(i // N) for i in range(rows)], dtype=object)}
    if components:
        for j, key in enumerate(GDPO_KEYS):
            non_tensors[key] = np.array([float((i + j) % 2) for i in range(rows)], dtype=object)
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def _run(compute, name: str, fields: set[str], components: bool, with_keys: bool) -> str:
    from verl.trainer.config.algorithm import AlgoConfig

    config = AlgoConfig(gdpo_reward_keys=list(GDPO_KEYS) if with_keys else None)
    try:
        compute(_batch(fields, components), adv_estimator=name, config=config, num_repeat=N)
    except Exception as exc:  # noqa: BLE001 - what verl raises is the answer
        return "raises: " + " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
    return "ok"


def build() -> dict:
    import warnings

    warnings.simplefilter("ignore")
    from verl.trainer.ppo import core_algos

    compute, where = verls_compute_advantage()
    fields, fields_at = v1_fields()
    supplied = {f for f in fields if f in OPTIONAL}
    table = {}
    for name in sorted(core_algos.ADV_ESTIMATOR_REGISTRY):
        # the legacy trainer adds reward_baselines only for ReMax (ray_trainer.py fit), and an estimator that does
        # not take it refuses the keyword: try without it first
        full = set(OPTIONAL) - {"reward_baselines"}
        if _run(compute, name, full, True, True) != "ok":
            full = set(OPTIONAL)
        if _run(compute, name, full, True, True) != "ok":
            table[name] = {"v1": "unknown", "needs": []}  # fails even with everything: no verdict
            continue
        needs = [f for f in OPTIONAL if f in full and _run(compute, name, full - {f}, True, True) != "ok"]
        if _run(compute, name, full, False, True) != "ok":
            needs.append("reward_components")
        if _run(compute, name, full, True, False) != "ok":
            needs.append("config:gdpo_reward_keys")
        table[name] = {"v1": _run(compute, name, supplied, False, True), "needs": needs}
    return {"computed_by": where, "v1_fields": fields, "v1_fields_at": fields_at, "estimators": table}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
