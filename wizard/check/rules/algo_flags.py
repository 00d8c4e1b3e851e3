"""Advantage-estimator settings verl 0.9.1 accepts and then does not apply (paths under site-packages/verl). Both
tables are verl's own answer: scripts/verl_algo_estimator_flags.py runs verl's compute_advantage
(trainer/ppo/ray_trainer.py:187, compiled from its source) the way the trainers call it
(trainer/ppo/v1/trainer_base.py:1775-1783 via v1/utils.py:167-176; legacy ray_trainer.py:1667) and writes
wizard/check/data/verl_algo_estimator_flags.json.

- VI426 (warning): algorithm.norm_adv_by_std_in_grpo=False (the Dr.GRPO setting, default True in
  trainer/config/algorithm.py) with an estimator that never reads it and still divides by a spread. compute_advantage
  passes the flag only to grpo (ray_trainer.py:235-245); every other estimator gets config=... alone
  (ray_trainer.py:249-279), and e.g. compute_grpo_vectorized_outcome_advantage keeps its own default True
  (core_algos.py:334-357, verl PR#7893), gdpo hands its own default True to the grpo function and whitens
  (core_algos.py:450-466), reinforce_plus_plus(_baseline) whiten over the batch. The run trains, but with
  std-normalised advantages the user switched off. Estimators that ignore the flag but never scale (rloo, opo, gpg)
  are left alone: False is what they do anyway.
- VI427 (warning): algorithm.rollout_correction.rollout_rs (rejection sampling) with an estimator whose group
  baseline still counts the responses rejection drops. Outside bypass mode both trainers run
  compute_rollout_correction_and_add_to_batch before compute_advantage (v1/trainer_base.py:1764-1775; legacy
  ray_trainer.py:1650-1667); rejection only zeroes the rejected response's response_mask
  (trainer/ppo/rollout_corr_helper.py:412), and e.g. compute_grpo_outcome_advantage builds each group's mean and std
  from token_level_rewards.sum(-1) of every row (core_algos.py:304-329). So the rejected response is not trained on
  but its reward still moves its accepted siblings' advantages (verl PR#6452, open). In bypass mode rejection runs
  in the actor's loss instead and the advantages are computed without it. Only the options that reject whole
  responses count (SUPPORTED_ROLLOUT_RS_OPTIONS less TOKEN_LEVEL_ROLLOUT_RS_OPTIONS, rollout_corr_helper.py:77-90);
  token_* options mask single tokens and the response is still trained on with its advantage.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

ADV = "algorithm.adv_estimator"
NORM = "algorithm.norm_adv_by_std_in_grpo"
RS = "algorithm.rollout_correction.rollout_rs"
BYPASS = "algorithm.rollout_correction.bypass_mode"


@cache
def _table() -> dict:
    text = resources.files("wizard.check").joinpath("data/verl_algo_estimator_flags.json").read_text(encoding="utf-8")
    return json.loads(text)


def estimator_flags() -> dict[str, dict[str, str]]:
    """scripts/verl_algo_estimator_flags.py's table: per estimator, "norm_flag" and "rejected_rows"."""
    return _table()["estimators"]


def sequence_rs_options() -> list[str]:
    """The rollout_rs options that reject whole responses (verl's SUPPORTED less TOKEN_LEVEL options)."""
    return _table()["sequence_rs_options"]


def _row(c: Ctx) -> tuple[str, dict[str, str]] | None:
    if c.src.entry != "ppo" or c.src.recipe or c.unknown(ADV):
        return None
    adv = c.v(ADV)
    row = estimator_flags().get(adv) if isinstance(adv, str) else None
    return (adv, row) if row else None


def rule_norm_flag_ignored(c: Ctx, f: Facts) -> None:
    """VI426: norm_adv_by_std_in_grpo=False that the chosen estimator never reads (and it still divides by a spread)."""
    got = _row(c)
    if not got or c.unknown(NORM) or c.v(NORM) is not False or got[1]["norm_flag"] != "ignored, scaled":
        return
    adv = got[0]
    readers = sorted(k for k, r in estimator_flags().items() if r["norm_flag"] == "reads")
    c.add("VI426", "warning", (NORM, ADV),
          f"{NORM}=False with {ADV}={adv}: verl 0.9.1 passes the flag only to grpo (ray_trainer.py:235-279) and "
          f"{adv} never reads it, so its advantages are still divided by a standard deviation (verl's own "
          "compute_advantage gives the same advantages for True and False, scripts/verl_algo_estimator_flags.py; "
          "verl PR#7893): the Dr.GRPO setting is silently lost",
          f"use {ADV}={' or '.join(readers)} (which read{'s' if len(readers) == 1 else ''} the flag) to train "
          f"without the std division, or drop {NORM}=False",
          fix=Fix(set={ADV: "grpo"}) if adv == "grpo_vectorized" else None)


def rule_rejected_rows_leak(c: Ctx, f: Facts) -> None:
    """VI427: rollout rejection sampling with a group baseline that still counts the rejected responses."""
    got = _row(c)
    if not got or got[1]["rejected_rows"] != "leak" or c.unknown(RS) or c.unknown(BYPASS):
        return
    rs = c.v(RS)
    opts = [str(o) for o in rs] if isinstance(rs, (list, tuple)) else str(rs).split(",")
    whole = [o.strip() for o in opts if o.strip() in sequence_rs_options()]
    if rs is None or not whole or c.v(BYPASS) is True:
        return  # token_* options mask single tokens: the response stays in training
    adv = got[0]
    clean = sorted(k for k, r in estimator_flags().items() if r["rejected_rows"] == "excluded")
    c.add("VI427", "warning", (RS, ADV),
          f"{RS}={rs} with {ADV}={adv}: {'/'.join(whole)} rejects whole responses by zeroing their response_mask "
          "(rollout_corr_helper.py:412) before compute_advantage runs (v1/trainer_base.py:1764-1775), and "
          f"{adv} still puts that response's reward into its group's baseline (verl's own compute_advantage gives "
          "the accepted samples different advantages with and without the rejected row, "
          "scripts/verl_algo_estimator_flags.py; verl PR#6452): the rejected response is not trained on but "
          "still shifts its siblings' advantages",
          f"accept the bias knowingly, use {BYPASS}=True (rejection then runs in the actor's loss, after the "
          f"advantages), or choose an estimator that excludes masked rows ({', '.join(clean)})")
