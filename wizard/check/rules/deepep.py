"""DeepEP expert dispatch on a card below Hopper (VI946).

VI946 (warning): an engine asks for DeepEP's all-to-all kernels, i.e. a Megatron role's
`override_transformer_config.moe_enable_deepep=True` or `moe_token_dispatcher_type=flex` (verl 0.9.1 hands
override_transformer_config to Megatron's provider/bridge unchecked: workers/engine/megatron/transformer_impl.py:295,
332, 371-372), or the automodel engine's `backend_config.dispatcher=deepep` (trainer/config/engine/automodel.yaml:46),
and --gpu-type names an NVIDIA card below compute capability 9.0 (A100, A800, L40S, RTX 4090, ...;
wizard.verlspec.hardware.GPU_COMPUTE_CAPABILITY). verl's docs say its images build DeepEP for Hopper only: "The image
is build in Hopper GPUs with DeepEP. It does not support None-Hopper GPUs, such as A100. You may need to reinstall
DeepEP to work with A100." (docs/perf/dpsk.md:29, v0.9.0 and main). verl's own MoE scripts turn it on
(examples/grpo_trainer/run_qwen3_vl_30b_a3b_megatron.sh:107-108, run_deepseek_v3_671b_megatron.sh:115). On an A800
with that image the run stops at the first MoE dispatch inside DeepEP ("named symbol not found",
csrc/kernels/layout.cu), after the GPUs are booked (verl#4479). A warning: a DeepEP rebuilt for the card runs.
"""

from __future__ import annotations

from wizard.check.rules.context import Ctx, Facts
from wizard.verlspec.hardware import compute_capability_of_gpu_type

HOPPER = (9, 0)


def deepep_keys(flat: dict) -> list[str]:
    """The keys that ask for DeepEP's dispatch kernels."""
    hits = []
    for key, value in flat.items():
        if key.endswith(".override_transformer_config.moe_enable_deepep") and value is True:
            hits.append(key)
        elif key.endswith(".override_transformer_config.moe_token_dispatcher_type") and value == "flex":
            hits.append(key)
        elif key.endswith(".backend_config.dispatcher") and value == "deepep":
            hits.append(key)
    return hits


def rule_deepep_card(c: Ctx, f: Facts) -> None:
    """VI946."""
    found = compute_capability_of_gpu_type(c.hw.gpu_type)
    if found is None or found[1] >= HOPPER:
        return
    keys = deepep_keys(c.res.flat)
    keys = [k for k in keys if c.set_by_user(k)] or keys  # the ref's copies follow the actor's by interpolation
    if not keys:
        return
    name, (major, minor) = found
    for k in keys:
        c.v(k)
    c.add("VI946", "warning", tuple(keys),
          f"{', '.join(f'{k}={c.res.flat[k]}' for k in keys)} asks for DeepEP's expert dispatch on {c.hw.gpu_type} "
          f"({name}: compute capability {major}.{minor}, below Hopper's 9.0): verl's images build DeepEP for Hopper "
          "only (docs/perf/dpsk.md:29), and the run stops at the first MoE dispatch inside DeepEP, after the GPUs are "
          "booked (\"named symbol not found\", verl#4479)",
          "drop moe_enable_deepep and set moe_token_dispatcher_type=alltoall (verl's default, "
          "megatron/transformer_impl.py:368; automodel: backend_config.dispatcher=torch), or rebuild DeepEP for "
          "the card")
