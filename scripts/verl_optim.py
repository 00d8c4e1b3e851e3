#!/usr/bin/env python3
"""What verl's Megatron optimizer and its FSDP engine actually receive of the optimizer/engine keys: writes
wizard/check/data/verl_optim.json, read by check's VI981 and VI982.

    python scripts/verl_optim.py           # regenerate the table from the installed verl
    python scripts/verl_optim.py --check   # exit 1 when the committed table differs

- "megatron": verl's own init_megatron_optim_config and get_megatron_optimizer_param_scheduler
  (utils/megatron/optimizer.py) are run with Megatron-Core stubbed at the library boundary: OptimizerConfig and
  OptimizerParamScheduler record the arguments verl hands them. Each field of McoreOptimizerConfig is set away from
  its default (one at a time, in every context of the branches verl's function takes: optimizer Adam or Muon, the
  engine's param dtype, use_precision_aware_optimizer, muon_match_adamw_update_rms); a field whose change leaves
  what Megatron receives unchanged is one Megatron never receives in that context.
- "engine_reads": for each field of FSDPEngineConfig, the places under verl/workers/engine/ that read
  `engine_config.<field>` (ast, nothing imported), so check can tell which engine acts on a key.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import itertools
import sys
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "verl_optim.json"
# the context axes: values of the keys (or the engine dtype) verl's function branches on
PRECISIONS = ("bf16", "fp16", "fp32")  # engine param dtype -> init_megatron_optim_config(fp16=, bf16=) (megatron/transformer_impl.py:542-547)
TRAINING_STEPS = 1000  # the trainer sets optim.total_training_steps before the engines start (trainer_base.py:776-784)
NOT_PERTURBED = {"optimizer", "use_precision_aware_optimizer", "muon_match_adamw_update_rms",  # the context axes
                 "override_optimizer_config"}  # verl copies it verbatim (the way to reach Megatron's own fields)


def _stub_megatron() -> dict[str, Any]:
    """megatron.core.optimizer / optimizer_param_scheduler replaced by recorders. OptimizerConfig is a dataclass
    declaring the Muon fields verl forwards (a Megatron-Core with emerging_optimizers)."""
    seen: dict[str, Any] = {}
    for name in ("megatron", "megatron.core", "megatron.core.optimizer", "megatron.core.optimizer_param_scheduler"):
        sys.modules.setdefault(name, types.ModuleType(name))
    passthrough = ("use_layer_wise_distributed_optimizer", "use_layer_wise_param_layout", "muon_momentum",
                   "muon_nesterov", "muon_split_qkv", "muon_scale_mode", "muon_coefficient_type", "muon_num_ns_steps",
                   "muon_tp_mode", "muon_fp32_matmul_prec", "muon_extra_scale_factor", "muon_scalar_optimizer")
    fields = {f: Any for f in passthrough}

    def record_config(self, **kw):
        seen["optimizer_config"] = kw

    config_cls = dataclasses.make_dataclass("OptimizerConfig", [(f, t, None) for f, t in fields.items()], init=False)
    config_cls.__init__ = record_config

    class OptimizerParamScheduler:
        def __init__(self, optimizer, **kw):
            seen["scheduler"] = kw

    for attr, value in (("OptimizerConfig", config_cls), ("get_megatron_optimizer", lambda **kw: None),
                        ("OptimizerParamScheduler", OptimizerParamScheduler)):
        for mod in ("megatron.core.optimizer", "megatron.core.optimizer_param_scheduler"):
            if not hasattr(sys.modules[mod], attr):  # no Megatron-Core installed: what verl imports
                setattr(sys.modules[mod], attr, value)
    import verl.utils.megatron.optimizer as mo

    mo.OptimizerConfig, mo.OptimizerParamScheduler = config_cls, OptimizerParamScheduler  # the boundary verl calls
    return seen


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (tuple, list)):
        return type(value)(round(v * 0.99, 6) for v in value)
    if isinstance(value, int):
        return value + 7 if value > 0 else 7
    if isinstance(value, float):
        return round(value * 0.5 + 0.0123, 6)
    if isinstance(value, str):
        return "bf16" if value in ("fp32", "float32") else value + "_x"
    return 123  # None: an Optional count (lr_decay_steps, lr_wsd_decay_steps)


def _received(init, sched, seen, cfg_cls, values: dict[str, Any], precision: str) -> str:
    seen.clear()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # verl's print_rank_0 of the kwargs
            cfg = cfg_cls(**values)
            init(cfg, use_distributed_optimizer=True, fp16=precision == "fp16", bf16=precision == "bf16")
            sched(None, cfg)
    except Exception as exc:  # noqa: BLE001 - verl stopping on it is an effect
        return f"raises {type(exc).__name__}"
    return repr(sorted((k, repr(v)) for part in seen.values() for k, v in part.items()))


def megatron_table() -> dict[str, Any]:
    seen = _stub_megatron()
    import verl.utils.megatron.optimizer as mo
    from verl.workers.config.optimizer import McoreOptimizerConfig

    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(McoreOptimizerConfig) if not f.name.startswith("_")}
    keys = sorted(k for k in defaults if k not in NOT_PERTURBED)
    contexts, effective = [], {k: [] for k in keys}
    for optimizer, precision, aware, match in itertools.product(("adam", *mo._MUON_ALGORITHMS), PRECISIONS,
                                                                (False, True), (False, True)):
        if match and optimizer not in mo._MUON_ALGORITHMS:
            continue  # verl reads muon_match_adamw_update_rms only on the Muon branch
        ctx = {"optimizer": optimizer, "precision": precision, "use_precision_aware_optimizer": aware,
               "muon_match_adamw_update_rms": match}
        base = {**ctx, "lr": 1e-6, "total_training_steps": TRAINING_STEPS}
        base.pop("precision")
        ref = _received(mo.init_megatron_optim_config, mo.get_megatron_optimizer_param_scheduler, seen,
                        McoreOptimizerConfig, base, precision)
        for k in keys:
            got = _received(mo.init_megatron_optim_config, mo.get_megatron_optimizer_param_scheduler, seen,
                            McoreOptimizerConfig, {**base, k: _changed(defaults[k] if k != "lr" else 1e-6)}, precision)
            if got != ref:
                effective[k].append(len(contexts))
        contexts.append(ctx)
    return {"computed_by": "verl/utils/megatron/optimizer.py init_megatron_optim_config + "
                           "get_megatron_optimizer_param_scheduler",
            "muon_algorithms": list(mo._MUON_ALGORITHMS), "contexts": contexts, "effective": effective,
            "defaults": {k: list(v) if isinstance(v, tuple) else v for k, v in defaults.items()}}


def engine_reads() -> dict[str, list[str]]:
    """FSDPEngineConfig field -> the `engine_config.<field>` reads under verl/workers/engine/ (file:line)."""
    import verl
    from verl.workers.config.engine import FSDPEngineConfig

    root = Path(verl.__file__).parent
    fields = {f.name for f in dataclasses.fields(FSDPEngineConfig) if not f.name.startswith("_")}
    reads: dict[str, set[str]] = {f: set() for f in fields}
    for path in sorted((root / "workers" / "engine").rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = None
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                owner = node.value
                owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
                name = node.attr if owner_name == "engine_config" else None
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and len(node.args) >= 2:
                owner, attr = node.args[0], node.args[1]
                owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
                if owner_name == "engine_config" and isinstance(attr, ast.Constant):
                    name = attr.value
            if name in reads:
                reads[name].add(f"{rel}:{node.lineno}")
    return {f: sorted(v, key=lambda s: (s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1]))) for f, v in sorted(reads.items())}


def build() -> dict:
    import warnings

    warnings.simplefilter("ignore")
    import verl

    return {"verl_version": verl.__version__, "megatron": megatron_table(), "engine_reads": engine_reads()}


def main(argv: list[str] | None = None) -> int:
    return table_main(__doc__, build, OUT, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
