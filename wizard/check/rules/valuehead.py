"""The critic's value model (VI894): verl's FSDP engine builds a value model with transformers'
AutoModelForTokenClassification (verl/workers/engine/fsdp/transformer_impl.py:291-300 → verl/utils/model.py:641-657,
load_valuehead_model) and, when transformers has no token-classification class for the model type, falls back to
trl's AutoModelForCausalLMWithValueHead — a RuntimeError when trl is not installed where the job runs.
Which model types have that class is read from the installed transformers (its auto mapping), not listed here.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

from wizard.check.rules.context import Ctx, Facts, model_shape
from wizard.check.rules.readers import readers_table


@functools.lru_cache(maxsize=1)
def _token_classification_types() -> frozenset[str] | None:
    """The model types of transformers' MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES, read from its source file
    (importing transformers would import torch); None without transformers or when the table is not found."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "models" / "auto" / "modeling_auto.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id ==
                                                "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES" for t in node.targets):
            pairs = node.value.args[0] if isinstance(node.value, ast.Call) and node.value.args else None
            if isinstance(pairs, (ast.List, ast.Tuple)):
                return frozenset(e.elts[0].value for e in pairs.elts if isinstance(e, ast.Tuple) and e.elts
                                 and isinstance(e.elts[0], ast.Constant))
    return None


def rule_value_model(c: Ctx, f: Facts) -> None:
    if not f.use_critic or c.unknown("critic.model.path"):
        return
    # the strategies that run the FSDP engine's model loading (its scope in who-reads-what)
    scope = readers_table()["scopes"].get("engine:fsdp/transformer_impl")
    strategies = set(scope["any"][0]["in"]) - {"veomni"} if scope else {"fsdp", "fsdp2"}
    if c.v("critic.strategy") not in strategies:
        return
    shape, _ = model_shape(c, "critic.model.path")
    types = _token_classification_types()
    if shape is None or types is None or not shape.arch or shape.arch in types:
        return
    c.add("VI894", "warning", ("critic.model.path", "critic.strategy"),
          f"the critic {shape.name} (model type {shape.arch}) has no token-classification class in transformers: verl's "
          "FSDP engine then builds it with trl's AutoModelForCausalLMWithValueHead (utils/model.py:653-680), and fails "
          "with RuntimeError where trl is not installed",
          "install trl where the job runs (verl[fsdp] brings it), or give the critic a text model that has a "
          "...ForTokenClassification class")
