#!/usr/bin/env python3
"""Two things each advantage estimator verl registers does, computed by verl's own code: writes
wizard/check/data/verl_algo_estimator_flags.json, read by check's VI426 and VI427 (wizard/check/rules/algo_flags.py).

    python scripts/verl_algo_estimator_flags.py           # regenerate the table from the installed verl
    python scripts/verl_algo_estimator_flags.py --check   # exit 1 when the committed table differs

verl's compute_advantage (trainer/ppo/ray_trainer.py:187, compiled from its source as scripts/verl_estimators.py
does) runs on a synthetic batch of prompts with 4 samples each (the samples of a prompt share a `uid`), called the
way the trainers call it: norm_adv_by_std_in_grpo=<flag> and config=AlgoConfig(norm_adv_by_std_in_grpo=<flag>)
(trainer/ppo/v1/trainer_base.py:1775-1783 via v1/utils.py:167-176; legacy ray_trainer.py:1667).

"norm_flag" - what algorithm.norm_adv_by_std_in_grpo=False does:
- "reads": the advantages with False differ from those with True;
- "ignored, scaled": False gives the same advantages as True, and they are still divided by a spread (multiplying
  every reward by 10 leaves them unchanged): the Dr.GRPO setting is lost;
- "ignored, unscaled": False gives the same advantages as True, and they scale with the rewards: nothing to lose;
- "needs": the estimator needs inputs beyond rewards (values, baselines, actor statistics): no verdict.

"rejected_rows" - what a response that rollout rejection sampling drops does to its group. Rejection only zeroes
the response's response_mask (trainer/ppo/rollout_corr_helper.py:412) before compute_advantage runs:
- "leak": the accepted samples' advantages differ from those of the same batch without the rejected row (its reward
  still enters its group's baseline or spread);
- "excluded": they are the same;
- "needs": as above.
"sequence_rs_options": the rollout_rs options that reject whole responses (SUPPORTED_ROLLOUT_RS_OPTIONS less
TOKEN_LEVEL_ROLLOUT_RS_OPTIONS, rollout_corr_helper.py:77-90); token_* options mask single tokens and leave the
response in training.
gdpo is given the fields it reads (prompts, attention_mask and one reward component named by gdpo_reward_keys).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path
from verl_estimators import verls_compute_advantage  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_algo_estimator_flags.json"
SCORES = ((0.0, 1.0, 1.0, 0.0), (0.2, 0.9, 0.4, 0.4), (1.0, 0.0, 0.0, 0.0))  # a group's 4 samples; spreads ≠ 1
LENGTH = 3  # response tokens; the score sits on the last one, as verl's reward managers put it
COMPONENT = "algo_component"  # gdpo's one reward component (gdpo_reward_keys)


def _batch(scores: list[float], groups: list[str], mask_zero: tuple[int, ...] = ()):
    import numpy as np
    import torch
    from verl import DataProto

    rows = len(scores)
    rewards = torch.zeros(rows, LENGTH)
    rewards[:, -1] = torch.tensor(scores)
    mask = torch.ones(rows, LENGTH)
    for i in mask_zero:
        mask[i] = 0.0
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask,
                 "prompts": torch.zeros(rows, 1, dtype=torch.long),
                 "attention_mask": torch.ones(rows, 1 + LENGTH, dtype=torch.long)},
        non_tensors={"uid": np.array(groups, dtype=object), COMPONENT: np.array(scores, dtype=np.float32)})


def _advantages(compute, name: str, scores: list[float], groups: list[str], flag: bool, mask_zero=()):
    from verl.trainer.config.algorithm import AlgoConfig

    config = AlgoConfig(norm_adv_by_std_in_grpo=flag, gdpo_reward_keys=[COMPONENT])
    data = _batch(scores, groups, mask_zero)
    return compute(data, adv_estimator=name, norm_adv_by_std_in_grpo=flag, config=config).batch["advantages"][:, -1]


def _rows() -> tuple[list[float], list[str]]:
    scores = [s for group in SCORES for s in group]
    groups = [str(g) for g, group in enumerate(SCORES) for _ in group]
    return scores, groups


def norm_flag(compute, name: str) -> str:
    import torch

    scores, groups = _rows()
    on = _advantages(compute, name, scores, groups, True)
    off = _advantages(compute, name, scores, groups, False)
    if not torch.allclose(on, off, atol=1e-5):
        return "reads"
    tenfold = _advantages(compute, name, [10 * s for s in scores], groups, False)
    return "ignored, scaled" if torch.allclose(off, tenfold, atol=1e-4) else "ignored, unscaled"


def rejected_rows(compute, name: str) -> str:
    import torch

    scores, groups = _rows()
    dropped = 1  # group 0's second sample (score 1.0) is rejected
    kept = [i for i in range(len(scores)) if i != dropped]
    with_row = _advantages(compute, name, scores, groups, True, mask_zero=(dropped,))[kept]
    without = _advantages(compute, name, [scores[i] for i in kept], [groups[i] for i in kept], True)
    return "excluded" if torch.allclose(with_row, without, atol=1e-5) else "leak"


def build() -> dict:
    import warnings

    warnings.simplefilter("ignore")
    from verl.trainer.ppo import core_algos

    compute, where = verls_compute_advantage()
    table = {}
    for name in sorted(core_algos.ADV_ESTIMATOR_REGISTRY):
        try:
            table[name] = {"norm_flag": norm_flag(compute, name), "rejected_rows": rejected_rows(compute, name)}
        except Exception:  # noqa: BLE001 - it needs inputs a rewards-only batch lacks: no verdict
            table[name] = {"norm_flag": "needs", "rejected_rows": "needs"}
    from verl.trainer.ppo import rollout_corr_helper as rch

    whole = sorted(rch.SUPPORTED_ROLLOUT_RS_OPTIONS - rch.TOKEN_LEVEL_ROLLOUT_RS_OPTIONS)
    return {"computed_by": where, "scores": [list(g) for g in SCORES], "estimators": table,
            "sequence_rs_options": whole, "sequence_rs_options_from": "verl/trainer/ppo/rollout_corr_helper.py:77-90"}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
