"""VI927: a MoE load-balancing (aux) loss coefficient the Megatron router never applies.

verl 0.9.1's Megatron engine builds the model through Megatron-Bridge (megatron.vanilla_mbridge=False, the default)
and sets moe_router_load_balancing_type="none" on the provider (workers/engine/megatron/transformer_impl.py:369,
"turn off aux_loss as it hurts perf in RL" in the legacy converter, models/mcore/config_converter.py:204/235/278)
before it copies the user's override_transformer_config over it key by key (transformer_impl.py:371-372). Megatron's
TopKRouter takes moe_aux_loss_coeff only for the load-balancing type it names (megatron/core/transformer/moe/router.py
TopKRouter.get_aux_loss_coeff: the coefficient when routing_type == "aux_loss" / "seq_aux_loss" / "global_aux_loss",
the i-th of a list for a list of types, else 0.0; is_aux_loss_enabled() then stays False and routing() attaches no
aux loss). So override_transformer_config.moe_aux_loss_coeff > 0 without a load-balancing type that names an aux loss
trains without it, silently (verl#5232; verl PR#4103 put moe_aux_loss_coeff=0.01 alone into
examples/grpo_trainer/run_qwen3_vl_30b_a3b_megatron.sh). moe_z_loss_coeff is not affected: apply_z_loss reads it on
its own. The forced value and its line are read from verl's source by scripts/verl_megatron_provider.py
(wizard/check/data/verl_megatron_provider.json). The legacy mbridge path (vanilla_mbridge=True) takes the bridge's own
config and is not judged here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wizard.check.rules.context import A, Ctx, Facts

TABLE = json.loads((Path(__file__).resolve().parent.parent / "data" / "verl_megatron_provider.json")
                   .read_text(encoding="utf-8"))
FORCED = TABLE["provider_overrides"]["moe_router_load_balancing_type"]
# Megatron's TopKRouter.is_aux_loss_enabled() loops over exactly these (router.py)
AUX_TYPES = ("aux_loss", "seq_aux_loss", "global_aux_loss")


def _coeffs(value: Any) -> list[float] | None:
    items = value if isinstance(value, (list, tuple)) else [value]
    try:
        return [float(v) for v in items if not isinstance(v, bool)]
    except (TypeError, ValueError):
        return None


def aux_loss_applied(routing_type: Any, coeff: Any) -> bool:
    """Megatron's TopKRouter.is_aux_loss_enabled() for this load-balancing type and coefficient."""
    coeffs = _coeffs(coeff) or []
    for aux in AUX_TYPES:
        if isinstance(routing_type, str) and routing_type == aux and coeffs and coeffs[0] > 0:
            return True
        if isinstance(routing_type, (list, tuple)) and aux in routing_type:
            i = list(routing_type).index(aux)
            if i < len(coeffs) and coeffs[i] > 0:
                return True
    return False


def rule_moe_aux_loss(c: Ctx, f: Facts) -> None:
    for prefix, used, role in ((A, f.megatron, "actor"),
                               ("critic", f.use_critic and c.v("critic.strategy") == "megatron", "critic")):
        otc = f"{prefix}.megatron.override_transformer_config"
        coeff_key, type_key = f"{otc}.moe_aux_loss_coeff", f"{otc}.moe_router_load_balancing_type"
        if not used or coeff_key not in c.res.flat or c.unknown(coeff_key, type_key, f"{prefix}.megatron.vanilla_mbridge"):
            continue
        coeffs = _coeffs(c.v(coeff_key))
        if c.v(f"{prefix}.megatron.vanilla_mbridge") is True or not coeffs or max(coeffs) <= 0:
            continue
        routing = c.v(type_key) if type_key in c.res.flat else None
        forced = routing is None
        if aux_loss_applied(FORCED["value"] if forced else routing, c.v(coeff_key)):
            continue
        why = (f"verl 0.9.1 sets moe_router_load_balancing_type={FORCED['value']!r} on the {role}'s Megatron provider "
               f"(workers/engine/megatron/transformer_impl.py:{FORCED['line']})" if forced else
               f"{type_key}={routing!r} names no aux loss type ({'/'.join(AUX_TYPES)}) for it")
        c.add("VI927", "warning", (coeff_key, type_key),
              f"{coeff_key}={c.v(coeff_key)} has no effect: {why}, and Megatron's router applies moe_aux_loss_coeff "
              "only for the load-balancing type it names (TopKRouter.get_aux_loss_coeff): the {role} trains with no "
              "aux load-balancing loss".replace("{role}", role),
              f"to turn the aux loss on set +{type_key}=aux_loss (or seq_aux_loss / global_aux_loss); "
              f"otherwise remove {coeff_key}")
