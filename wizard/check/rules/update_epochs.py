"""VI438 (error): an update epoch count below 1, so the role trains on nothing (paths under site-packages/verl 0.9.1).

verl's PPO trainers hand `actor_rollout_ref.actor.ppo_epochs` and `critic.ppo_epochs` to the training worker as the
update's `epochs` (trainer/ppo/ray_trainer.py:1354, 1364 and 1384, 1391; trainer/ppo/v1/trainer_base.py:1811, 1853;
the table wizard/check/data/update_epochs.json is written from that source by scripts/update_epochs_table.py).
TrainingWorker.train_mini_batch pops it (workers/engine_workers.py:257) and iterates
tu.make_iterator(data, mini_batch_size, epochs) (:273-279), whose generator is `for _ in range(epochs)`
(utils/tensordict_utils.py:608): at 0 or below it yields no mini-batch, so the loop at engine_workers.py:289 never
runs: no forward, no backward, no optimizer or lr-scheduler step, empty metrics, and no error. Neither ActorConfig
nor CriticConfig checks the value (workers/config/actor.py:177, critic.py:90, no check in their __post_init__), and
validate_config (utils/config.py) does not read it. The run rolls out, scores and saves every step while the policy
(or the critic, whose values then stay at their initial head) never changes.

This is the class of verl PR #7924 (real case R98-02..04: zero counts that verl's config validation accepts and the
run trips over later; VI808 and VI851 cover the counts verl divides by and rollout.n); ppo_epochs is the member that
does not crash but silently does nothing. The critic's count is checked only when the run trains a critic.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

DATA = Path(__file__).resolve().parent.parent / "data" / "update_epochs.json"
ENTRIES = ("ppo", "one_step_off")


@cache
def table() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def rule_update_epochs(c: Ctx, f: Facts) -> None:
    if getattr(c.src, "entry", "ppo") not in ENTRIES:
        return
    data = table()
    for key, sources in data["keys"].items():
        if key.startswith("critic.") and not f.use_critic:
            continue
        value = c.v(key)
        if c.unknown(key) or isinstance(value, bool) or not isinstance(value, int) or value >= 1:
            continue  # a non-integer is VI808's
        where = ", ".join(sources)
        c.add("VI438", "error", (key,),
              f"{key}={value}: verl passes it as the update's epochs ({where}) and make_iterator loops "
              f"`for _ in range(epochs)` ({data['consumer']}), so no mini-batch is ever trained: no gradient step, "
              "no error, the weights never change",
              f"set {key} ≥ 1 (verl's default is 1)", fix=Fix(set={key: 1}))
