"""What an advantage estimator needs beyond rewards, against what the chosen trainer hands it (verl 0.9.1, paths under
site-packages/verl). The table is verl's own answer: scripts/verl_estimator_inputs.py runs verl's compute_advantage
(trainer/ppo/ray_trainer.py:187, compiled from its source) on the fields V1's _compute_advantage fetches
(trainer/ppo/v1/trainer_base.py:1745) and on the legacy trainer's full batch with one input dropped at a time
(wizard/check/data/verl_estimator_inputs.json).

- VI623 (error): an estimator that raises on V1's batch, on the V1 trainer (trainer.use_v1=true, the default,
  ppo_trainer.yaml:232). V1's _compute_advantage fetches only uid, response_mask, rm_scores, rollout_log_probs,
  old_log_probs, ref_log_prob and values (trainer_base.py:1745-1750) and hands them to compute_advantage
  (v1/utils.py:167-176). optimal_token_baseline / tir_optimal_token_baseline assert sum_pi_squared is in the batch
  (ray_trainer.py:265-270), which only the legacy trainer's _compute_old_log_prob asks the actor for
  (ray_trainer.py:1297-1322; nothing in trainer/ppo/v1/ names it), so calculate_sum_pi_squared=True does not help
  (verl's own examples/otb_trainer/run_qwen3_8b_fsdp.sh; verl#6153). gdpo reads batch["prompts"] and the reward
  component columns (core_algos.py:419-428), which V1 does not carry (verl#6159, closed unmerged; verl's own
  examples/gdpo_trainer/run_qwen3_8b_fsdp.sh). ReMax is VI980's (algorithm.py). Either way the job books its GPUs,
  generates the first batch and stops in the advantage step.
- VI624 (error): the optimal-token-baseline estimators on the legacy trainer without what sum_pi_squared needs. The
  actor computes Σπ² only with actor_rollout_ref.actor.calculate_sum_pi_squared=True (default False,
  workers/config/actor.py:170; ray_trainer.py:1297-1309), else the assert at ray_trainer.py:265-270 stops step 1;
  and with actor_rollout_ref.model.use_fused_kernels=True (read at workers/engine_workers.py:115) the FSDP and
  Megatron engines raise NotImplementedError on the first log-prob pass (workers/engine/fsdp/transformer_impl.py:
  1343-1347, workers/engine/megatron/transformer_impl.py:1272-1276): fused kernels never materialise the logits.
- VI625 (error): gdpo without algorithm.gdpo_reward_keys. AlgoConfig leaves it None (trainer/config/algorithm.py:
  672, not in ppo_trainer.yaml, so it needs `+`), and compute_gdpo_outcome_advantage asserts it is set
  (core_algos.py:413-417) at the first advantage computation, after the GPUs are booked (verl#4862's resolution).
- VI955: algorithm.gdpo_reward_weights (AlgoConfig, trainer/config/algorithm.py:673, default None = equal weights)
  is paired with gdpo_reward_keys by position and never checked against it: compute_gdpo_outcome_advantage builds
  one score per key (core_algos.py:423-433), takes the weights as given (:435-446) and multiplies score i by
  weights[i] (:450-462). Fewer weights than keys (error): IndexError at the first advantage step, after the GPUs are
  booked; more (warning): the extra weights are silently dropped (verl PR#7965). Both are what verl's own function
  does on the CPU in tests/test_check_estimator_inputs.py. Any estimator that reads the two keys (the table's
  "config:gdpo_reward_keys" need).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

ADV = "algorithm.adv_estimator"
PISQ = "actor_rollout_ref.actor.calculate_sum_pi_squared"
FUSED = "actor_rollout_ref.model.use_fused_kernels"
KEYS = "algorithm.gdpo_reward_keys"
WEIGHTS = "algorithm.gdpo_reward_weights"


@cache
def estimator_inputs() -> dict:
    """scripts/verl_estimator_inputs.py's table: per estimator, "v1" (ok / raises: <verl's message>) and "needs"."""
    text = resources.files("wizard.check").joinpath("data/verl_estimator_inputs.json").read_text(encoding="utf-8")
    return json.loads(text)


def _row(c: Ctx) -> tuple[str, dict] | None:
    if c.src.entry != "ppo" or c.src.recipe or c.unknown(ADV):
        return None
    adv = c.v(ADV)
    row = estimator_inputs()["estimators"].get(adv) if isinstance(adv, str) else None
    return (adv, row) if row else None


def _on_v1(c: Ctx) -> bool | None:
    if c.unknown("trainer.use_v1"):
        return None
    return c.v("trainer.use_v1") is not False


def rule_v1_inputs(c: Ctx, f: Facts) -> None:
    got = _row(c)
    if not got or _on_v1(c) is not True:
        return
    adv, row = got
    if adv == "remax" or not row["v1"].startswith("raises"):
        return  # ReMax: VI980
    table = estimator_inputs()
    missing = [n for n in row["needs"] if not n.startswith("config:") and n not in table["v1_fields"]]
    c.add("VI623", "error", (ADV, "trainer.use_v1"),
          f"{ADV}={adv} on verl 0.9.1's V1 trainer (trainer.use_v1=true, the default): V1's advantage step fetches "
          f"only {', '.join(table['v1_fields'])} ({table['v1_fields_at'].removeprefix('verl/')}), and {adv} needs "
          f"{', '.join(missing)}: verl's compute_advantage on that batch raises {row['v1'].removeprefix('raises: ')[:110]} "
          "at the first step, after the GPUs are booked",
          f"set trainer.use_v1=False (the legacy trainer supplies {', '.join(missing)}; verl marks it deprecated), "
          "or choose an estimator V1 runs (grpo, rloo, reinforce_plus_plus_baseline, gpg)")


def rule_pi_squared(c: Ctx, f: Facts) -> None:
    got = _row(c)
    if not got or "sum_pi_squared" not in got[1]["needs"] or _on_v1(c) is not False:
        return
    adv = got[0]
    if c.unknown(PISQ):
        return
    if c.v(PISQ) is not True:
        c.add("VI624", "error", (ADV, PISQ),
              f"{ADV}={adv} with {PISQ}={c.v(PISQ)}: the actor returns sum_pi_squared only with it "
              "(workers/config/actor.py:170, ray_trainer.py:1297-1309), and compute_advantage asserts it is there "
              "(ray_trainer.py:265-270): the first step stops with AssertionError",
              f"set {PISQ}=True", fix=Fix(set={PISQ: True}))
    elif not c.unknown(FUSED) and c.v(FUSED) is True:
        c.add("VI624", "error", (ADV, PISQ, FUSED),
              f"{ADV}={adv} needs {PISQ}=True, and with {FUSED}=True the actor's first log-prob pass raises "
              "NotImplementedError: fused kernels never materialise the logits Σπ² is computed from "
              "(workers/engine/fsdp/transformer_impl.py:1343-1347, megatron/transformer_impl.py:1272-1276)",
              f"set {FUSED}=False", fix=Fix(set={FUSED: False}))


def rule_gdpo_keys(c: Ctx, f: Facts) -> None:
    got = _row(c)
    if not got or "config:gdpo_reward_keys" not in got[1]["needs"] or c.unknown(KEYS):
        return
    if c.v(KEYS):
        return
    c.add("VI625", "error", (ADV, KEYS),
          f"{ADV}={got[0]} without {KEYS}: AlgoConfig leaves it None (trainer/config/algorithm.py:672) and "
          "compute_gdpo_outcome_advantage asserts it names the reward components (core_algos.py:413-417), so the "
          "first advantage computation stops with AssertionError after the GPUs are booked",
          f"add +{KEYS}='[\"accuracy_reward\", \"format_reward\"]' naming the keys your compute_score returns in "
          "its dict (with reward.reward_manager.name=gdpo)")


def rule_gdpo_weights(c: Ctx, f: Facts) -> None:
    got = _row(c)
    if not got or "config:gdpo_reward_keys" not in got[1]["needs"] or c.unknown(KEYS) or c.unknown(WEIGHTS):
        return
    keys, weights = c.v(KEYS), c.v(WEIGHTS)
    if not isinstance(keys, (list, tuple)) or not keys or not isinstance(weights, (list, tuple)):
        return
    if len(weights) == len(keys):
        return
    short = len(weights) < len(keys)
    c.add("VI955", "error" if short else "warning", (KEYS, WEIGHTS),
          f"{WEIGHTS}={list(weights)} has {len(weights)} weight(s) for the {len(keys)} key(s) of {KEYS}="
          f"{list(keys)}: verl pairs them by position without a check (core_algos.py:435-462), so "
          + ("the first advantage step stops with IndexError after the GPUs are booked" if short else
             f"the last {len(weights) - len(keys)} weight(s) are silently ignored (verl PR#7965)"),
          f"give one weight per key, in the order of {KEYS} (or drop {WEIGHTS} for equal weights)")
