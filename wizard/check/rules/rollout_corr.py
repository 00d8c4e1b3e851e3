"""algorithm.rollout_correction settings verl 0.9.1 ignores or rejects late (paths under site-packages/verl).

- VI941 (warning): bypass_mode=True on the default V1 trainer with settings only verl's bypass loss reads. Bypass
  mode is meant to run compute_policy_loss_bypass_mode (trainer/ppo/core_algos.py:2413-2500), which reads rollout_is,
  rollout_rs, rollout_rs_threshold, rollout_is_batch_normalize and loss_type from policy_loss.rollout_correction. The
  only code that switches actor.policy_loss.loss_mode to "bypass_mode" and copies algorithm.rollout_correction there is
  rollout_corr_helper.apply_bypass_mode (trainer/ppo/rollout_corr_helper.py:1109-1144), called by the legacy trainer
  (trainer/ppo/ray_trainer.py:1575-1579, main_ppo with trainer.use_v1=False) and the separation trainer only. The V1
  trainer (trainer.use_v1=true, verl's default, ppo_trainer.yaml:232, main_ppo.py:183) just copies rollout_log_probs
  into old_log_probs (trainer/ppo/v1/trainer_base.py:1640-1648) and skips the decoupled correction because bypass is on
  (:1765-1771); the actor then runs the loss_mode of its YAML, vanilla (workers/utils/losses.py:101-104). So the run is
  plain PPO-clip against the rollout's log-probs: no rejection sampling, no REINFORCE loss for loss_type=reinforce, no
  IS weights or rollout_corr/ metrics, without a message (verl#4912; verl's own examples/rollout_correction/*.sh set
  bypass_mode with loss_type=reinforce or rollout_rs and hit it too). The callers are generated from verl's source by
  scripts/verl_rollout_corr.py (wizard/check/data/verl_rollout_corr.json).
- VI943 (error): a rollout_rs option, rollout_rs_threshold or rollout_is_threshold verl's parser rejects. verl 0.9.1
  declares RolloutCorrectionConfig without validation (trainer/config/algorithm.py:178-185) and parses these values
  only when it first applies the correction, inside the first training step after the first rollout:
  compute_rollout_rejection_mask raises ValueError for a name outside SUPPORTED_ROLLOUT_RS_OPTIONS
  (rollout_corr_helper.py:77-89, 250-255: e.g. `geometric`, `token`, `sequence`, the names of verl before the 0.9
  rollout-correction rework, verl PR#3984), compute_rollout_correction_and_rejection_mask raises for rollout_rs without
  rollout_rs_threshold (:866-871), _parse_rollout_rs_thresholds (:132-194) for a threshold that is not one positive
  number per option, `lower_upper` with lower <= upper for *_k1 options and no `_` for k2/k3 options, and
  _parse_rollout_is_threshold (:93-129) likewise for rollout_is_threshold. Not reported where VI941 says verl never
  reads them (bypass mode on V1) or VI979 says no correction runs (calculate_log_probs=False).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from wizard.check.rules.context import A, R, Ctx, Facts

RC = "algorithm.rollout_correction"
HELPER = "trainer/ppo/rollout_corr_helper.py"


@functools.lru_cache(maxsize=1)
def rollout_corr_table() -> dict[str, Any]:
    """scripts/verl_rollout_corr.py's table: the rollout_rs options verl accepts, who runs the bypass loss."""
    text = resources.files("wizard.check").joinpath("data/verl_rollout_corr.json").read_text(encoding="utf-8")
    return json.loads(text)


def _v1_bypass(c: Ctx) -> bool:
    """bypass_mode on the V1 trainer, where nothing selects the bypass loss."""
    return (c.src.entry == "ppo" and c.v(f"{RC}.bypass_mode") is True and c.v("trainer.use_v1") is not False
            and not rollout_corr_table()["v1_runs_bypass_loss"])


def rule_v1_bypass_ignored(c: Ctx, f: Facts) -> None:
    """VI941: bypass-mode settings the V1 trainer never reads."""
    if c.src.recipe or c.unknown(f"{RC}.bypass_mode", "trainer.use_v1", f"{A}.policy_loss.loss_mode"):
        return
    if not _v1_bypass(c) or c.v(f"{A}.policy_loss.loss_mode") == "bypass_mode":
        return
    lost: list[tuple[str, str]] = []
    if c.v(f"{RC}.rollout_rs") not in (None, ""):
        lost.append((f"{RC}.rollout_rs", f"rollout_rs={c.v(f'{RC}.rollout_rs')} (no rejection sampling)"))
    if c.v(f"{RC}.loss_type") == "reinforce":
        lost.append((f"{RC}.loss_type", "loss_type=reinforce (the loss stays PPO-clip)"))
    if c.v(f"{RC}.rollout_is") not in (None, ""):
        lost.append((f"{RC}.rollout_is", f"rollout_is={c.v(f'{RC}.rollout_is')} (no IS weights or rollout_corr/ "
                                         "metrics)"))
    if c.v(f"{RC}.rollout_is_batch_normalize") is True:
        lost.append((f"{RC}.rollout_is_batch_normalize", "rollout_is_batch_normalize=True"))
    if not lost:
        return
    callers = ", ".join(rollout_corr_table()["bypass_loss_callers"])
    c.add("VI941", "warning", (f"{RC}.bypass_mode", "trainer.use_v1", *(k for k, _ in lost)),
          f"{RC}.bypass_mode=True on the V1 trainer (trainer.use_v1=true, verl's default) ignores "
          f"{'; '.join(w for _, w in lost)}: V1 only copies rollout_log_probs into old_log_probs "
          "(trainer/ppo/v1/trainer_base.py:1640-1648) and skips the correction in bypass mode (:1765-1771), and "
          f"the actor keeps policy_loss.loss_mode={c.v(f'{A}.policy_loss.loss_mode')} "
          "(workers/utils/losses.py:101-104): only apply_bypass_mode switches it to the bypass loss that reads "
          f"these keys ({HELPER}:1109-1144), called from {callers} (verl#4912)",
          "set trainer.use_v1=False (the legacy trainer runs the bypass loss), or bypass_mode=False (decoupled mode, "
          "which V1 applies: IS weights and rejection against a recomputed old log-prob), or drop the ignored keys")


def _positive(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 else None


def is_threshold_error(spec: Any) -> str | None:
    """Why verl's _parse_rollout_is_threshold (rollout_corr_helper.py:93-129) rejects `spec`; None when it accepts."""
    if isinstance(spec, bool) or not isinstance(spec, (int, float, str)):
        return "is not a number or a `lower_upper` string"
    if isinstance(spec, str) and "_" in spec.strip():
        lower, upper = (_positive(p) for p in spec.strip().split("_", 1))
        if lower is None or upper is None:
            return "needs two positive numbers as `lower_upper`"
        return "has its lower bound above its upper bound" if lower > upper else None
    return None if _positive(str(spec).strip()) is not None else "is not a positive number"


def rs_errors(options: Any, spec: Any) -> list[str]:
    """Why verl's compute_rollout_rejection_mask / _parse_rollout_rs_thresholds (rollout_corr_helper.py:132-260)
    reject rollout_rs=`options` with rollout_rs_threshold=`spec`; [] when they accept them."""
    if not isinstance(options, str) or not [o for o in options.split(",") if o.strip()]:
        return [f"rollout_rs={options!r} is not a comma-separated list of options"]
    names = list(dict.fromkeys(o.strip() for o in options.split(",") if o.strip()))
    bad = [o for o in names if o not in rollout_corr_table()["rs_options"]]
    if bad:
        return [f"rollout_rs option {', '.join(bad)} is not one of {', '.join(rollout_corr_table()['rs_options'])}"]
    if spec is None:
        return ["rollout_rs_threshold is not set"]
    if isinstance(spec, bool) or not isinstance(spec, (int, float, str)):
        return ["rollout_rs_threshold is not a number or a string"]
    specs = [str(spec)] if not isinstance(spec, str) else [p.strip() for p in spec.split(",") if p.strip()]
    if len(specs) not in (1, len(names)):
        return [f"rollout_rs_threshold gives {len(specs)} thresholds for {len(names)} options (one, or one each)"]
    out = []
    for name, one in zip(names, specs * len(names) if len(specs) == 1 else specs, strict=False):
        if name.endswith("k1"):
            lower, upper = (one.split("_", 1) if "_" in one else (None, one))
            up = _positive(upper)
            low = _positive(lower) if lower is not None else (1 / up if up else None)
            if up is None or low is None:
                out.append(f"{name} needs positive ratio bounds `lower_upper` (or one upper bound), got {one!r}")
            elif low > up:
                out.append(f"{name}'s lower bound {low:g} is above its upper bound {up:g}")
        elif "_" in one or _positive(one) is None:
            out.append(f"{name} needs one positive upper bound without `_`, got {one!r}")
    return out


def rule_rollout_corr_values(c: Ctx, f: Facts) -> None:
    """VI943: rollout-correction values verl's parser raises on, in the first training step."""
    keys = (f"{RC}.rollout_is", f"{RC}.rollout_is_threshold", f"{RC}.rollout_rs", f"{RC}.rollout_rs_threshold",
            f"{RC}.bypass_mode", "trainer.use_v1", f"{R}.calculate_log_probs")
    if c.src.recipe or c.src.entry not in ("ppo", "one_step_off") or c.unknown(*keys):
        return
    if _v1_bypass(c) or c.v(f"{R}.calculate_log_probs") is False:
        return  # VI941: verl never reads them; VI979: no correction runs at all
    problems: list[tuple[str, str]] = []
    if c.v(f"{RC}.rollout_is") not in (None, ""):
        why = is_threshold_error(c.v(f"{RC}.rollout_is_threshold"))
        if why:
            problems.append((f"{RC}.rollout_is_threshold",
                             f"rollout_is_threshold={c.v(f'{RC}.rollout_is_threshold')!r} {why} "
                             f"(_parse_rollout_is_threshold, {HELPER}:93-129)"))
    if c.v(f"{RC}.rollout_rs") not in (None, ""):
        problems += [(f"{RC}.rollout_rs", f"{why} ({HELPER}:250-255, 132-194, 866-871)")
                     for why in rs_errors(c.v(f"{RC}.rollout_rs"), c.v(f"{RC}.rollout_rs_threshold"))]
    if not problems:
        return
    options = ", ".join(rollout_corr_table()["rs_options"])
    c.add("VI943", "error", tuple(dict.fromkeys(k for k, _ in problems)),
          f"{'; '.join(p for _, p in problems)}: verl 0.9.1 accepts the config and raises ValueError when it first "
          "applies the rollout correction, inside the first training step after the first rollout",
          f"rollout_rs takes one or more of {options} (comma-separated; `geometric` is seq_mean_k1 now); "
          "rollout_rs_threshold one value per option: `lower_upper` ratio bounds (or one upper bound) for *_k1, one "
          "positive upper bound for k2/k3; rollout_is_threshold a positive upper bound or `lower_upper`")
