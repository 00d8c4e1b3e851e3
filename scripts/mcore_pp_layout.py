#!/usr/bin/env python3
"""megatron-core's verdicts on pipeline_model_parallel_layout strings: writes wizard/check/data/mcore_pp_layout.json,
the oracle tests/test_pp_layout.py holds check's VI629/VI635 grammar (wizard/check/rules/pp_layout.py) to.

    python scripts/mcore_pp_layout.py           # regenerate with the importable megatron-core
    python scripts/mcore_pp_layout.py --check   # exit 1 when the committed table differs

verl 0.9.1 passes override_transformer_config.pipeline_model_parallel_layout to the Megatron-Bridge provider unchanged
(workers/engine/megatron/transformer_impl.py:371-372); megatron-core parses and validates it when the provider's
TransformerConfig is finalised (transformer_config.py:1031-1081). For each case below the table records what
megatron-core's own PipelineParallelLayerLayout(layout, pp) and validate_layer_layout(num_layers, None) do, the
virtual pipeline size the layout implies, its parsed stages, and the megatron-core version that answered.
megatron-core is verl's [megatron] extra (not pinned by verl 0.9.1); it is not needed to run check.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import table_main  # noqa: E402 - this folder, for a run as a file or a load by path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "wizard" / "check" / "data" / "mcore_pp_layout.json"

# (layout, pipeline_model_parallel_size, virtual_pipeline_model_parallel_size or None, num_layers)
CASES = [("E|(t*2|)*14L", 4, 1, 28), ("Et|(tt|)*13L|", 4, None, 28), ("E,t*7|t*7|t*7|t*7,L", 4, None, 28),
         ("Et*7|t*7|t*7|t*7L", 2, 2, 28), ("Et*3|(t*4|)*5t*5L", 7, None, 28), ("Et*9|t*9|t*10L", 4, None, 28),
         ("t*14|t*14", 2, None, 28), ("EEt*28L", 1, None, 28), ("Et*28LL", 1, None, 28), ("Et*14|t*14x", 2, None, 28),
         ("Et|(tt|)*29L|", 16, None, 61), ("Et|(tt|)*30L", 16, 2, 61), ("E(t|)*3tL", 2, 2, 4),
         ("Et*3|(t*4|)*5,t*5,L", 7, 1, 28), ("(t|)*4", 2, None, 4), ("Et*20|t*20|t*20|t*20L", 2, 2, 80)]

CHARS = {"embedding": "E", "loss": "L", "decoder": "t", "mtp": "m"}


def build() -> dict:
    import megatron.core
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout as P

    rows = []
    for layout, pp, vpp, layers in CASES:
        row = {"layout": layout, "pp": pp, "vpp": vpp, "num_layers": layers}
        try:
            row["stages"] = ["".join(CHARS[t.name] for t in stage) for stage in P.parse_str_to_list(layout)]
        except AssertionError:
            row["stages"] = None
        try:
            parsed = P(layout, pp)
            row["implied_vpp"] = parsed.virtual_pipeline_model_parallel_size
            # transformer_config.py:1068-1074: a set VPP must equal the layout's
            assert vpp is None or vpp == parsed.virtual_pipeline_model_parallel_size
            parsed.validate_layer_layout(num_layers=layers, mtp_num_layers=None)
            row["accepted"] = True
        except AssertionError:
            row.setdefault("implied_vpp", None)
            row["accepted"] = False
        rows.append(row)
    return {"megatron_core": megatron.core.__version__, "cases": rows}


if __name__ == "__main__":
    sys.exit(table_main(__doc__, build, OUT))
