#!/usr/bin/env python3
"""Where verl 0.9.1 syncs MoE weights into vLLM and where it reads the rollout's routed experts for its MoE
load-balance metrics: writes wizard/check/data/verl_moe_rollout.json, read by check's VI430/VI431
(wizard/check/rules/moe_rollout.py).

    python scripts/verl_moe_rollout.py           # regenerate the table from the installed verl
    python scripts/verl_moe_rollout.py --check   # exit 1 when the committed table differs

The table records, each with the line it stands on in the installed verl:

- the vLLM release verl's `vllm` extra pins (the dist-info METADATA `Requires-Dist: vllm==...; extra == "vllm"`);
- the standard (bf16) weight sync: checkpoint-format tensors go straight into the live parameters through
  `model.load_weights` and `process_weights_after_loading` runs once at the end (workers/rollout/vllm_rollout/utils.py);
- verl's own guard on the delta_sharded path, which forces vLLM's MoE backend to triton for a MoE model
  (vllm_async_server.py) - the backend whose expert layout is the checkpoint's;
- the rollout MoE load-balance metrics: the interval key and its default (trainer/config/rollout/rollout.yaml), the
  trainer's read of it (trainer/ppo/v1/trainer_base.py), the skip when the batch has no routed_experts
  (trainer/ppo/metric_utils.py), and the servers' capture switch that alone makes the rollout return them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import from_installed_verl, marker_lines, table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_moe_rollout.json"
ROLLOUT_YAML = "trainer/config/rollout/rollout.yaml"
# name -> {file: the source text whose line the table records (each must occur in that file)}
MARKERS = {
    "sync_load_weights": {"workers/rollout/vllm_rollout/utils.py": "model.load_weights(param_updates)"},
    "sync_process_after_loading": {
        "workers/rollout/vllm_rollout/utils.py": "process_weights_after_loading(model, model_config, self.device)"},
    "delta_sharded_branch": {
        "workers/rollout/vllm_rollout/vllm_async_server.py":
            'if getattr(checkpoint_config, "backend", None) == "delta_sharded":'},
    "delta_sharded_forces_triton": {
        "workers/rollout/vllm_rollout/vllm_async_server.py": 'engine_kwargs["moe_backend"] = "triton"'},
    "metrics_interval_read": {"trainer/ppo/v1/trainer_base.py": "moe_load_balance_metrics_interval"},
    "metrics_skip_without_routes": {"trainer/ppo/metric_utils.py": 'warn_skip_once("missing_routed_experts"'},
    "rollout_capture": {
        "workers/rollout/vllm_rollout/vllm_async_server.py": 'args.update({"enable_return_routed_experts": True})',
        "workers/rollout/sglang_rollout/async_sglang_server.py": 'args.update({"enable_return_routed_experts": True})'},
}
ROLLOUT_KEYS = ("moe_load_balance_metrics_interval", "enable_rollout_routing_replay", "quantization")


def vllm_pin(root: Path) -> dict[str, Any] | None:
    """The `vllm` extra's pin in the installed verl's METADATA: {"spec": "vllm==0.24.0", "version": "0.24.0"}."""
    for meta in sorted(root.parent.glob("verl-*.dist-info/METADATA")):
        for line in meta.read_text(encoding="utf-8").splitlines():
            m = re.match(r"Requires-Dist: (vllm\s*==\s*([0-9][^;\s]*))\s*;\s*extra == \"vllm\"", line)
            if m:
                return {"spec": m.group(1).replace(" ", ""), "version": m.group(2)}
    return None


def rollout_defaults(root: Path) -> dict[str, Any]:
    text = (root / ROLLOUT_YAML).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    lines = text.splitlines()
    return {k: {"default": data[k], "line": next(i for i, line in enumerate(lines, 1) if line.startswith(f"{k}:"))}
            for k in ROLLOUT_KEYS}


def build_from(root: Path) -> dict[str, Any]:
    return {"vllm_pin": vllm_pin(root), "rollout_defaults": rollout_defaults(root), "rollout_yaml": ROLLOUT_YAML,
            "lines": marker_lines(root, MARKERS)}


def build() -> dict[str, Any]:
    return from_installed_verl(build_from)


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
