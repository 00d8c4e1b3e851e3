#!/usr/bin/env python3
"""What verl's DistillationLossConfig accepts: writes wizard/check/data/verl_distill_losses.json, read by check's
VI617 (distillation loss settings verl rejects) and VI620 (teacher top-k log-probs above vLLM's max_logprobs).

    python scripts/verl_distill_losses.py           # regenerate the table from the installed verl
    python scripts/verl_distill_losses.py --check   # exit 1 when the committed table differs

verl's own code decides every entry: for each loss mode in trainer/distillation/losses.py's
DISTILLATION_SETTINGS_REGISTRY (filled by @register_distillation_loss, losses.py:75-85), the table builds
workers/config/distillation.py's DistillationLossConfig (its __post_init__, :100-124) with use_policy_gradient True
and False and records "ok" or what it raises; `use_topk` is the registered setting that makes the teacher return
top-k log-probs (distillation.py:195-198, experimental/teacher_loop/teacher_manager.py:51). The policy-gradient
loss modes are those of core_algos' POLICY_LOSS_REGISTRY that the same constructor accepts as policy_loss_mode.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_distill_losses.json"


def _outcome(**kwargs) -> str:
    from verl.workers.config import DistillationLossConfig

    try:
        DistillationLossConfig(**kwargs)
    except Exception as exc:  # noqa: BLE001 - what verl raises is the answer
        return "raises: " + " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    return "ok"


def build() -> dict:
    import contextlib
    import io

    from verl.trainer.distillation.losses import DISTILLATION_SETTINGS_REGISTRY
    from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY

    modes = {}
    with contextlib.redirect_stdout(io.StringIO()):  # verl prints a WARNING for forward_kl_topk with policy gradient
        for name in sorted(DISTILLATION_SETTINGS_REGISTRY):
            settings = DISTILLATION_SETTINGS_REGISTRY[name]
            modes[name] = {"use_topk": bool(settings.use_topk),
                           "policy_gradient": _outcome(loss_mode=name, use_policy_gradient=True),
                           "supervised": _outcome(loss_mode=name, use_policy_gradient=False)}
        accepted = sorted(p for p in POLICY_LOSS_REGISTRY if _outcome(policy_loss_mode=p) == "ok")
    return {"loss_modes": modes, "policy_loss_modes": accepted,
            "source": "verl/trainer/distillation/losses.py DISTILLATION_SETTINGS_REGISTRY; "
                      "verl/workers/config/distillation.py DistillationLossConfig.__post_init__"}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
