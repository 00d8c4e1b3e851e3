"""Rule stage and helpers of the parallel layout: sequence parallel (VI302, VI306, VI307), rollout TP / DP / EP
(VI304, VI305, VI318, VI319, VI321), the Megatron grid (VI309, VI310, VI312-VI317) and the GPUs' link levels; `suggestions`
confirms the values the layout refusals offer.
"""

from __future__ import annotations

from typing import Optional, Sequence

from wizard.intent.answers import Answers
from wizard.intent.errors import Findings
from wizard.planner.shapes import ModelShape
from wizard.planner.state import Build, either, nearest_hint, refuse
from wizard.verlspec import arithmetic as rc
from wizard.verlspec.arithmetic import divisors, nearest, pow2_divisors


def suggestions(b: "Build") -> None:
    """The layout refusals raised inside the memory-fit stage (VI304/VI321 rollout_tp, VI309 megatron_tp, VI310 megatron_pp)
    get their values confirmed like every other suggestion."""
    a, gpn = b.a, b.a.gpus_per_node
    if b.trial:
        return
    for index, p in enumerate(b.f.items):
        if p.severity != "error":
            continue
        if p.rule in ("VI304", "VI321") and a.rollout_tp:
            heads = _heads(b.shape)
            valid = tiling_rollout_tp(a.nnodes, gpn) if p.rule == "VI304" else divisors(gpn)
            valid = rc.attention_tp_sizes(*heads, valid) if heads else valid
            render = nearest_hint("rollout_tp", valid, a.rollout_tp,
                                  "a rollout replica must fill a node or whole nodes" if p.rule == "VI304" else
                                  "the rollout engine splits the attention heads over rollout_tp")
        elif p.rule == "VI309" and a.megatron_tp:
            render = nearest_hint("megatron_tp", divisors(gpn), a.megatron_tp, f"megatron_tp must divide {gpn}")
        elif p.rule in _LAYOUT_HINTS:
            key = next((k for k in _LAYOUT_HINTS[p.rule] if getattr(a, k) is not None), _LAYOUT_HINTS[p.rule][-1])
            render = nearest_hint(key, megatron_values(b, key), getattr(a, key) or 1,
                                  f"{key} must pass megatron-core's layout checks with your other megatron_* answers")
        else:
            continue
        b.pending.append((index, p.rule, render))


# The Megatron layout refusals' hints: the given answer each suggests values for, in this order of preference.
_LAYOUT_HINTS = {
    "VI310": ("megatron_pp", "megatron_cp", "megatron_tp"),
    "VI312": ("megatron_tp",),
    "VI313": ("megatron_ep",),
    "VI314": ("megatron_ep", "megatron_etp", "megatron_pp"),
    "VI315": ("megatron_ep", "megatron_etp"),
    "VI316": ("megatron_vpp", "megatron_pp"),
    "VI317": ("megatron_pp",),
}


def parallelism(b: Build) -> None:
    a, f = b.a, b.f
    b.sp = sp = a.sequence_parallel
    b.megatron = megatron = a.train_backend == "megatron"
    if megatron and sp > 1:
        f.error("VI306", ("sequence_parallel", "train_backend"),
                f"sequence_parallel={sp} is Ulysses sequence parallel, an FSDP option (train_backend=megatron)",
                "with megatron use megatron_tp / megatron_pp; or set sequence_parallel=1")
    if sp > 1 and (a.gpus_per_node % sp or sp > a.gpus_per_node):
        refuse(b, "VI302", ("sequence_parallel", "gpus_per_node"),
               f"sequence_parallel={sp} must divide gpus_per_node={a.gpus_per_node} so each group stays in one node",
               nearest_hint("sequence_parallel", divisors(a.gpus_per_node), sp,
                            f"sequence_parallel must divide gpus_per_node ({a.gpus_per_node})"))
    given_mp = [k for k in MEGATRON_ANSWERS if getattr(a, k) is not None]
    if not megatron and given_mp:
        f.error("VI307", (*given_mp, "train_backend"),
                f"{'/'.join(given_mp)} only apply to train_backend=megatron (got {a.train_backend})",
                "remove them, or set train_backend=megatron")


LINK_LEVELS = {0: "same GPU", 1: "NVLink/NVSwitch", 2: "PCIe switch", 3: "PCIe host bridge", 4: "NUMA boundary"}


def group_level(topology: Sequence[Sequence[int]], tp: int) -> int:
    """Worst link level inside any group of `tp` consecutive GPUs (verl's TP groups are consecutive ranks)."""
    n = len(topology)
    worst = 0
    for start in range(0, n - n % tp if tp <= n else 0, tp):
        for i in range(start, start + tp):
            for j in range(start, start + tp):
                worst = max(worst, int(topology[i][j]))
    return worst


def rollout_tp_options(a: Answers, n_gpus: int, f: Findings, shape: Optional[ModelShape] = None) -> list[int]:
    """Rollout TP candidates, smallest first: powers of two inside one node that split the model's attention heads
    as the rollout engine must (arithmetic.attention_tp_problem); an explicit answer is validated (a replica must
    fill a node or whole nodes, the heads must split over it) and then the only candidate."""
    gpn = a.gpus_per_node
    heads = _heads(shape)
    if a.rollout_tp is None:
        return rc.attention_tp_sizes(*heads, pow2_divisors(gpn)) if heads else pow2_divisors(gpn)
    tp = a.rollout_tp
    split = (lambda t: rc.attention_tp_problem(t, *heads) is None) if heads else (lambda t: True)
    if tp <= gpn and gpn % tp == 0 or tp > gpn and tp % gpn == 0 and n_gpus % tp == 0:
        if heads and (problem := rc.attention_tp_problem(tp, *heads)):
            f.error("VI321", ("rollout_tp",),
                    f"rollout_tp={tp} for {shape.name}: {problem} (the rollout engine refuses it when it starts)",
                    f"nearest valid: {either(nearest([t for t in divisors(gpn) if split(t)], tp))}")
            return []
        if tp > gpn:
            f.warning("VI305", ("rollout_tp", "gpus_per_node"),
                      f"rollout_tp={tp} spans {tp // gpn} nodes: tensor-parallel traffic crosses the network",
                      f"prefer rollout_tp ≤ {gpn} (one node) when the model fits")
        return [tp]
    valid = [t for t in tiling_rollout_tp(a.nnodes, gpn) if split(t)]
    f.error("VI304", ("rollout_tp", "gpus_per_node", "nnodes"),
            f"rollout_tp={tp} does not tile {a.nnodes} node(s) × {gpn} GPUs (a replica must fill a node or whole nodes)",
            f"nearest valid: {either(nearest(valid, tp))}")
    return []


def tiling_rollout_tp(nnodes: int, gpn: int) -> list[int]:
    """Rollout TP values whose replicas fill a node or whole nodes."""
    return divisors(gpn) + [gpn * k for k in range(2, nnodes + 1) if nnodes * gpn % (gpn * k) == 0]


def _heads(shape: Optional[ModelShape]) -> Optional[tuple[int, Optional[int]]]:
    """(attention heads, KV heads or None for latent attention) of a shape with the model's own counts."""
    return (shape.heads, None if shape.kv_lora_rank else shape.kv_heads) if exact_shape(shape) else None


# The Megatron layout answers, each with the MegatronGrid field it sets.
MEGATRON_ANSWERS = {"megatron_tp": "tp", "megatron_pp": "pp", "megatron_cp": "cp", "megatron_ep": "ep",
                    "megatron_etp": "etp", "megatron_vpp": "vpp"}


def exact_shape(shape: Optional[ModelShape]) -> bool:
    """A shape whose layer, head and expert counts are the model's own (a catalogue entry or a local config.json);
    a shape scaled from a size has estimated counts, which no given layout is refused for."""
    return shape is not None and shape.source in ("catalogue", "local")


def _model_counts(shape: Optional[ModelShape]) -> dict[str, Optional[int]]:
    """The counts megatron-core checks a layout against (None: unknown, not checked)."""
    if not exact_shape(shape):
        return dict(layers=None, heads=None, kv_heads=None, experts=None)
    assert shape is not None
    return dict(layers=shape.layers, heads=shape.heads, kv_heads=shape.kv_heads, experts=shape.experts)


def megatron_grids(a: Answers, shape: Optional[ModelShape], n_gpus: int, gpus_per_node: Optional[int] = None,
                   free: Sequence[str] = ()) -> list[rc.MegatronGrid]:
    """Every Megatron layout that passes megatron-core's checks with the given megatron_* answers held (but those in
    `free`), least model parallelism first (wizard.verlspec.arithmetic.megatron_grids)."""
    held = {field: getattr(a, key) for key, field in MEGATRON_ANSWERS.items() if key not in free}
    return rc.megatron_grids(n_gpus, gpus_per_node or a.gpus_per_node, **_model_counts(shape), **held)


def megatron_values(b: "Build", key: str) -> list[int]:
    """The values of one megatron_* answer that some valid layout takes with the other answers held."""
    field_name = MEGATRON_ANSWERS[key]
    return sorted({v for g in megatron_grids(b.a, b.shape, b.n_gpus, free=(key,))
                   if (v := getattr(g, field_name)) is not None})


def megatron_options(a: Answers, shape: Optional[ModelShape], n_gpus: int, f: Findings) -> list[rc.MegatronGrid]:
    """Megatron layouts (TP, PP, CP, EP, ETP, VPP) that megatron-core accepts, least model parallelism first; TP and
    the expert groups stay inside a node. Given values that break a check are refused, each under its own rule."""
    gpn = a.gpus_per_node
    counts = _model_counts(shape)
    tp, pp, cp, ep, etp, vpp = (getattr(a, k) for k in MEGATRON_ANSWERS)
    moe = bool(counts["experts"])
    if tp is not None and (gpn % tp or tp > gpn):
        f.error("VI309", ("megatron_tp", "gpus_per_node"),
                f"megatron_tp={tp} must divide gpus_per_node={gpn} (tensor parallel stays inside a node)",
                f"nearest valid: {either(nearest(divisors(gpn), tp))}")
        return []
    # each given value against the check it alone can break (megatron-core's asserts: arithmetic.MEGATRON_CHECKS)
    ends = rc.uneven_split(counts["layers"], pp) if counts["layers"] and pp and vpp is None else None
    given = rc.MegatronGrid(tp or 1, pp or 1, cp or 1, ep or 1, etp if etp is not None else (1 if moe else None), vpp,
                            *(ends or (None, None)))
    found = rc.megatron_checks(n_gpus, given, gpus_per_node=gpn, **counts)
    refusals = []
    if tp is not None and ("heads" in found or "kv_heads" in found):
        refusals.append(("VI312", ("megatron_tp", "model"),
                         f"megatron_tp={tp}: {found.get('heads') or found['kv_heads']} (megatron-core's TransformerConfig "
                         "raises)"))
    if ep is not None and ("dense_ep" in found or "experts" in found):
        refusals.append(("VI313", ("megatron_ep", "model"),
                         f"megatron_ep={ep}: {found.get('dense_ep') or found['experts']} (megatron-core raises)"))
    if (ep is not None or etp is not None) and "expert_node" in found:
        refusals.append(("VI315", ("megatron_ep", "megatron_etp", "gpus_per_node"),
                         f"{found['expert_node']}: expert all-to-all would cross the network"))
    elif (ep is not None or etp is not None) and "expert_grid" in found:
        refusals.append(("VI314", ("megatron_ep", "megatron_etp", "megatron_pp", "nnodes", "gpus_per_node"),
                         f"{found['expert_grid']} (megatron-core's initialize_model_parallel raises)"))
    # without megatron_pp the planner chooses a PP that VPP and the layers allow: only a given PP is refused here
    if vpp is not None and pp is not None and "interleaved" in found:
        refusals.append(("VI317", ("megatron_vpp", "megatron_pp"), f"megatron_vpp={vpp}: {found['interleaved']}"))
    elif pp is not None and "layers" in found:
        refusals.append(("VI316", ("megatron_pp", "megatron_vpp", "model"),
                         f"{found['layers']} (megatron-core: num_layers % PP, then % VPP; an uneven split, equal first and "
                         "last stages, only without VPP)"))
    if "dense_grid" in found and any(v is not None for v in (tp, pp, cp)):
        refusals.append(("VI310", ("megatron_tp", "megatron_pp", "megatron_cp", "nnodes", "gpus_per_node"),
                         f"megatron_tp×megatron_pp×megatron_cp={given.dense} does not divide the {n_gpus} GPUs"))
    for rule, keys, message in refusals:
        f.error(rule, keys, message, "")  # the hint is written once every stage has run (suggestions)
    if refusals:
        return []
    out = megatron_grids(a, shape, n_gpus)
    if not out:
        named = [k for k in MEGATRON_ANSWERS if getattr(a, k) is not None]
        f.error("VI310", tuple(named) + ("nnodes", "gpus_per_node"),
                f"no Megatron layout of {n_gpus} GPUs passes megatron-core's checks with "
                f"{', '.join(f'{k}={getattr(a, k)}' for k in named) or 'any TP/PP'}",
                "remove one of them and verl-init chooses it")
    return out


def rollout_ep(b: "Build") -> None:
    """The rollout engine's expert parallel size (rollout.expert_parallel_size): verl asserts EP = TP × DP when
    EP > 1 (workers/config/rollout.py:294; verl-init's replicas have DP = 1), and vLLM then spreads whole experts
    over the replica's GPUs (vllm_async_server.py:402, enable_expert_parallel) instead of splitting each one."""
    a, shape = b.a, b.shape
    moe = bool(shape is not None and shape.experts)
    if a.rollout_ep is None:
        b.rep = b.rtp * b.rdp if moe and b.rtp * b.rdp > 1 else 1
        return
    b.rep = a.rollout_ep
    if a.rollout_ep > 1 and shape is not None and exact_shape(shape) and not moe:
        b.f.error("VI318", ("rollout_ep", "model"), f"rollout_ep={a.rollout_ep} for {shape.name}, a dense model: "
                  "the engine has no experts to spread", "remove rollout_ep (or set it to 1)")
    elif a.rollout_ep > 1 and b.rtp and a.rollout_ep != b.rtp * b.rdp:
        b.f.error("VI318", ("rollout_ep", "rollout_tp", "rollout_dp"),
                  f"rollout_ep={a.rollout_ep} must equal rollout_tp × rollout_dp = {b.rtp} × {b.rdp} "
                  "(verl's RolloutConfig asserts it: workers/config/rollout.py:294)",
                  f"nearest valid: rollout_ep=1 or {b.rtp * b.rdp}" + (" (or set rollout_tp and rollout_dp to the EP you want)"
                                                             if "rollout_tp" not in b.given else ""))


def rollout_dp_options(a: Answers, shape: Optional[ModelShape], n_gpus: int, tp_options: list[int],
                       f: Findings) -> None:
    """A given rollout_dp (the rollout engine's data_parallel_size) must be 1 for a dense model and, for a MoE
    model, make a replica verl can build with one of the rollout TPs (rc.rollout_dp_options: TP × DP filling
    whole nodes, dividing the GPUs, TP dividing a node; vllm_async_server.py:384-392, replica.py:108-116)."""
    rdp = a.rollout_dp
    if rdp is None or rdp == 1 or shape is None or f.errors:
        return
    gpn = a.gpus_per_node
    if not shape.experts:
        if exact_shape(shape):
            f.error("VI319", ("rollout_dp", "model"), f"rollout_dp={rdp} for {shape.name}, a dense model: verl-init "
                    "serves a dense model with data_parallel_size 1 (more replicas do the same work)",
                    "remove rollout_dp (or set rollout_dp=1)")
        return
    if any(rdp in rc.rollout_dp_options(n_gpus, gpn, tp, shape.experts) for tp in tp_options):
        return
    valid = sorted({d for tp in tp_options for d in rc.rollout_dp_options(n_gpus, gpn, tp, shape.experts)})
    tps = ", ".join(str(t) for t in tp_options)
    f.error("VI319", ("rollout_dp", "rollout_tp", "nnodes", "gpus_per_node"),
            f"rollout_dp={rdp} makes no rollout replica verl can build with rollout_tp {tps} on {a.nnodes}×{gpn} GPUs "
            f"(TP × DP must fill whole nodes, divide the {n_gpus} GPUs and not exceed the {shape.experts} experts)",
            f"nearest valid: rollout_dp={' or '.join(str(v) for v in nearest(valid, rdp))}")
