"""Where the policy loss takes its clip bounds from, in verl 0.9.1 (paths under site-packages/verl).

- VI667 (warning): actor.clip_ratio set to change the clip range while clip_ratio_low / clip_ratio_high are left at
  verl's defaults. Every clipping loss mode reads `config.clip_ratio_low if config.clip_ratio_low is not None else
  clip_ratio` (and the same for the high side): compute_policy_loss_vanilla trainer/ppo/core_algos.py:1320-1322,
  gspo :1575-1576, geo_mean :1960-1961, clip_cov :1790-1791, dppo_tv :1415-1416, dppo_kl :1496-1497, cispo
  :2065-2066, bypass_mode through vanilla. verl's actor YAML sets both sides to 0.2, not null
  (trainer/config/actor/actor.yaml:39, :42), so clip_ratio is never read and the range stays 0.2 / 0.2 whatever it
  says (FlowRL#15, a verl fork reading the bounds the same way). The table is generated from verl's source by
  scripts/verl_clip_bounds.py (wizard/check/data/verl_clip_bounds.json).
- VI670 (warning): policy_loss.loss_mode=cispo with clip_ratio_low below 1. compute_policy_loss_cispo clamps the
  importance ratio to [1 - clip_ratio_low, 1 + clip_ratio_high] and uses it as a stop-gradient weight on log_prob
  (core_algos.py:2079-2084): a low side of 0.2 (verl's default, actor.yaml:39) floors the weight at 0.8, so tokens
  the policy already moved away from keep most of their weight instead of the IS attenuation, and off-policy drift
  is not damped (SkyRL PR#553 moved CISPO's default 0.2/0.2 to ScaleRL's lower bound 0; MiniMax-M1 has no lower
  bound). verl's own CISPO example sets clip_ratio_low=10 (examples/cispo_trainer/run_qwen3_8b_fsdp.sh). The
  table's "detached_weight" marks the modes whose bounds clamp such a weight.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import A, Ctx, Facts

LOSS = f"{A}.policy_loss.loss_mode"
CISPO_LOW = 10.0  # verl's own CISPO example (examples/cispo_trainer/run_qwen3_8b_fsdp.sh): no lower bound


@functools.lru_cache(maxsize=1)
def clip_bounds() -> dict[str, Any]:
    """scripts/verl_clip_bounds.py's table: mode → where its clip bounds come from; the actor YAML defaults."""
    text = resources.files("wizard.check").joinpath("data/verl_clip_bounds.json").read_text(encoding="utf-8")
    return json.loads(text)


def _mode(c: Ctx) -> Any:
    return c.v(LOSS, "vanilla")


def _num(value: Any) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)


def rule_clip_ratio_shadowed(c: Ctx, f: Facts) -> None:
    """VI667: clip_ratio set, but a side the loss mode reads first is left at a non-null default that differs."""
    key = f"{A}.clip_ratio"
    mode = _mode(c)
    entry = clip_bounds()["modes"].get(mode) if isinstance(mode, str) else None
    if entry is None or not c.set_by_user(key) or c.unknown(key, LOSS):
        return
    ratio = c.num(key)
    if ratio is None:
        return
    shadowed: dict[str, float] = {}
    for side, bound in sorted(entry["bounds"].items(), reverse=True):  # low, then high
        side_key = f"{A}.{side}"
        if bound["fallback"] != "clip_ratio" or c.set_by_user(side_key) or c.unknown(side_key):
            continue
        value = _num(c.v(side_key))
        if value is not None and value != ratio:
            shadowed[side] = value
    if not shadowed:
        return
    defaults = clip_bounds()["defaults"]
    sides = ", ".join(f"{s}={v:g} ({defaults[s]['at'].split('/', 1)[1]})" for s, v in shadowed.items())
    lines = ", ".join(sorted(entry["bounds"][s]["at"].rsplit(":", 1)[1] for s in shadowed))
    c.add("VI667", "warning", (key, *(f"{A}.{s}" for s in shadowed)),
          f"clip_ratio={ratio:g} is never read by loss_mode={mode}: it takes clip_ratio_low/high first and falls back "
          f"to clip_ratio only when they are null (core_algos.py:{lines}), and verl's actor config sets {sides}",
          f"set {' and '.join(f'{A}.{s}={ratio:g}' for s in shadowed)} (or drop clip_ratio)",
          fix=Fix(set={f"{A}.{s}": ratio for s in shadowed}))


def rule_cispo_weight_floor(c: Ctx, f: Facts) -> None:
    """VI670: a CISPO-style loss (bounds clamp a detached IS weight) with a lower bound 1 - clip_ratio_low above 0."""
    mode = _mode(c)
    entry = clip_bounds()["modes"].get(mode) if isinstance(mode, str) else None
    if entry is None or not entry.get("detached_weight") or c.unknown(LOSS, f"{A}.clip_ratio_low", f"{A}.clip_ratio"):
        return
    key = f"{A}.clip_ratio_low"
    low = _num(c.v(key))
    if low is None:
        low = c.num(f"{A}.clip_ratio")
    if low is None or low >= 1:
        return
    line = entry["detached_weight"].rsplit(":", 1)[1]
    c.add("VI670", "warning", (LOSS, key),
          f"loss_mode={mode} with clip_ratio_low={low:g}: the stop-gradient IS weight is clamped to at least "
          f"{1 - low:g} (core_algos.py:{line}), so tokens the policy moved away from keep that weight instead of their "
          "ratio and off-policy drift goes undamped (CISPO/ScaleRL use no lower bound)",
          f"set {key}={CISPO_LOW:g} as verl's CISPO example does (examples/cispo_trainer/run_qwen3_8b_fsdp.sh)",
          fix=Fix(set={key: CISPO_LOW}))
