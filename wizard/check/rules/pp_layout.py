"""Megatron pipeline_model_parallel_layout (VI629, VI635).

verl 0.9.1 takes a custom pipeline split as `<role>.megatron.override_transformer_config.pipeline_model_parallel_layout`
and checks nothing about it: McoreEngineConfig.__post_init__ (workers/config/engine.py:214-236) leaves
override_transformer_config alone, and the Megatron engine copies every key onto the Megatron-Bridge provider
unchanged (workers/engine/megatron/transformer_impl.py:371-372), next to the engine's own pipeline and virtual
pipeline sizes (:356, :359; the process groups get the same sizes at :271-274). megatron-core reads the layout when
the provider's TransformerConfig is finalised inside the Ray worker, after the GPUs are booked
(megatron-core 0.15.0, megatron/core/transformer/transformer_config.py:1031-1081):

- a layout together with num_layers_in_first/last_pipeline_stage or account_for_*_in_pipeline_split: ValueError
  (:1034-1048);
- the layout string is parsed (pipeline_parallel_layer_layout.py:267-305: ',' dropped, `(...)*n` then `x*n`
  unrolled, stages split at '|', characters E embedding, t decoder, m MTP, L loss; any other character asserts);
- the number of stages must divide by pipeline_model_parallel_size (:37-40); stages / PP is the virtual pipeline
  size the layout implies: an engine virtual_pipeline_model_parallel_size that differs asserts ("conflicts with
  pipeline_model_parallel_layout", transformer_config.py:1068-1074, Megatron-Bridge#1502); an unset one is taken from
  the layout (:1075-1077) while verl initialised the process groups without a virtual pipeline (VI635);
- validate_layer_layout (pipeline_parallel_layer_layout.py:85-120): the first layer is E and the last L, each exactly
  once, and the 't' count equals the model's num_layers (NVIDIA/Megatron-LM#1852).

The grammar below is megatron-core's parse_str_to_list written out; tests/test_pp_layout.py compares it with
megatron-core's own parser when megatron-core is importable and with verl's McoreEngineConfig (which accepts every
layout) always.
"""

from __future__ import annotations

import re
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import A, Ctx, Facts

# megatron-core 0.15.0 pipeline_parallel_layer_layout.py:275-292
_UNROLL = (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)")
LAYER_CHARS = {"E": "embedding", "L": "loss", "t": "decoder", "m": "mtp"}
# transformer_config.py:1034-1039: the arguments a layout may not be combined with
CONFLICTS = ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
             "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")


def parse_layout(layout: Any) -> list[list[str]]:
    """megatron-core's PipelineParallelLayerLayout.parse_str_to_list (a list of lists passes through as
    characters); ValueError for a character megatron-core asserts on."""
    if isinstance(layout, (list, tuple)):
        stages = [[str(x).strip() for x in row] for row in layout]
        names = {v: k for k, v in LAYER_CHARS.items()}
        out = []
        for row in stages:
            bad = [x for x in row if x.lower() not in names]
            if bad:
                raise ValueError(f"{bad[0]!r} is not a layer type megatron-core knows ({', '.join(names)})")
            out.append([names[x.lower()] for x in row])
        return out
    text = str(layout).replace(",", "")
    for pattern in _UNROLL:
        text = re.sub(pattern, lambda m: m.group(1) * int(m.group(2)), text)
    stages = []
    for stage in text.split("|"):
        bad = [ch for ch in stage if ch not in LAYER_CHARS]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a layer character megatron-core knows ({', '.join(LAYER_CHARS)})")
        stages.append(list(stage))
    return stages


def layout_problems(layout: Any, pp: int, vpp: int | None, layers: int | None) -> tuple[list[str], int | None]:
    """(what megatron-core asserts on, the virtual pipeline size the layout implies or None when it cannot parse)."""
    try:
        stages = parse_layout(layout)
    except ValueError as exc:
        return [str(exc)], None
    if pp < 1 or len(stages) % pp:
        return [f"{len(stages)} stages do not divide by pipeline_model_parallel_size={pp}"], None
    implied = len(stages) // pp
    problems = []
    if vpp is not None and vpp != implied:
        problems.append(f"{len(stages)} stages over PP={pp} make a virtual pipeline of {implied}, not "
                        f"virtual_pipeline_model_parallel_size={vpp}")
    flat = [ch for row in stages for ch in row]
    if not flat or flat[0] != "E" or flat.count("E") != 1:
        problems.append("the first layer must be the embedding 'E', given exactly once")
    if not flat or flat[-1] != "L" or flat.count("L") != 1:
        problems.append("the last layer must be the loss 'L', given exactly once")
    if layers is not None and flat.count("t") != layers:
        problems.append(f"{flat.count('t')} decoder layers 't' where the model has {layers}")
    return problems, implied


def _roles(c: Ctx, f: Facts) -> list[tuple[str, str]]:
    roles = [("actor", f"{A}.megatron")] if f.megatron else []
    if f.use_critic and c.v("critic.strategy") == "megatron":
        roles.append(("critic", "critic.megatron"))
    return roles


def rule_pp_layout(c: Ctx, f: Facts, shape: Any = None) -> None:
    """VI629 / VI635 for each Megatron actor and critic given a pipeline_model_parallel_layout (module docstring).
    The decoder count is judged for the actor only, against a shape read from the catalogue or a local config.json."""
    for role, prefix in _roles(c, f):
        otc = f"{prefix}.override_transformer_config"
        key = f"{otc}.pipeline_model_parallel_layout"
        if key not in c.res.flat or c.unknown(key) or c.v(key) in (None, ""):
            continue
        pp_key, vpp_key = f"{prefix}.pipeline_model_parallel_size", f"{prefix}.virtual_pipeline_model_parallel_size"
        if c.unknown(pp_key, vpp_key):
            continue
        pp, vpp = c.int(pp_key) or 1, c.int(vpp_key)
        layout = c.v(key)
        conflicts = [f"{otc}.{k}" for k in CONFLICTS if f"{otc}.{k}" in c.res.flat and c.v(f"{otc}.{k}") not in
                     (None, False)]
        if conflicts:
            c.add("VI629", "error", [key, *conflicts],
                  f"{role} Megatron: {key} is set together with {', '.join(conflicts)}: megatron-core raises "
                  "ValueError when the worker builds the model (transformer_config.py:1034-1048)",
                  f"remove {' and '.join(conflicts)} (the layout already places every layer)")
            continue
        exact = shape is not None and getattr(shape, "source", None) in ("catalogue", "local") and role == "actor"
        problems, implied = layout_problems(layout, pp, vpp, shape.layers if exact else None)
        if problems:
            only_vpp = bool(implied) and len(problems) == 1 and "virtual pipeline" in problems[0]
            hint = (f"set {vpp_key}={implied}" if only_vpp else f"write {key} with PP × VPP stages ('|'), 'E' first, "
                    "'L' last" + (f" and {shape.layers} 't'" if exact else ""))
            c.add("VI629", "error", [key, pp_key, vpp_key],
                  f"{role} Megatron: {key}={layout!r}: {'; '.join(problems)} (megatron-core asserts when the worker "
                  "builds the model; verl passes the layout through unchecked, transformer_impl.py:371-372)", hint,
                  fix=Fix(set={vpp_key: implied}) if only_vpp else None)
        elif vpp is None and implied and implied > 1:
            c.add("VI635", "warning", [key, vpp_key],
                  f"{role} Megatron: {key}={layout!r} makes a virtual pipeline of {implied} over PP={pp} while "
                  f"{vpp_key} is unset: megatron-core takes VPP={implied} from the layout (transformer_config.py:"
                  "1075-1077) but verl initialises the process groups without a virtual pipeline "
                  "(transformer_impl.py:271-274)", f"set {vpp_key}={implied}", fix=Fix(set={vpp_key: implied}))
