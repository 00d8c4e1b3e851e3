"""GPU layout rules: rollout tiling (VI810-VI811), rollout TP against the attention heads (VI838), rollout data parallel across nodes for a dense model (VI905), Ulysses SP (VI812, VI816), Megatron (VI813, VI818, VI819), the
config against the given hardware (VI814; with the standalone rollout pools of one_step_off, fully_async and V1
separate_async, rules/modes.py), rollout parallelism verl cannot run (VI815) and a rollout engine
without a build for the device (VI817).
"""

from __future__ import annotations

import re
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import A, M, R, Ctx, Facts, divisors, join_or, nearest
from wizard.check.rules.modes import separate_pool
from wizard.verlspec import arithmetic as rc
from wizard.verlspec.hardware import ACCELERATORS, accelerator_of_gpu_type
from wizard.verlspec.keys import ROLLOUT_NAMES


def _rollout_pool(c: Ctx, f: Facts) -> tuple[int, Any, int, int, tuple[str, str]] | None:
    """(GPUs, nodes, GPUs per node, GPUs per node the replicas are laid out on, pool keys) of the GPUs verl builds the
    rollout replicas on. The one-step-off and fully async entry points run the rollout on its own pool: their main()
    copies the top-level rollout.nnodes / n_gpus_per_node over actor_rollout_ref.rollout's
    (experimental/one_step_off_policy/main_ppo.py:121-122, experimental/fully_async_policy/fully_async_main.py:235-236);
    every other run lays the replicas over the trainer's GPUs."""
    if c.src.entry in ("one_step_off", "fully_async"):
        keys = ("rollout.n_gpus_per_node", "rollout.nnodes")
        nodes, gpn = c.int(keys[1]), c.int(keys[0])
        if c.unknown(*keys) or not nodes or not gpn or nodes < 1 or gpn < 1:
            return None  # an empty or unreadable pool: VI814 / VI995
        return nodes * gpn, nodes, gpn, gpn, keys
    if f.n_gpus is None or f.gpn is None:
        return None
    return f.n_gpus, f.nnodes, f.gpn, c.int(f"{R}.n_gpus_per_node") or f.gpn, ("trainer.n_gpus_per_node", "trainer.nnodes")


def rule_layout(c: Ctx, f: Facts) -> None:
    pool = _rollout_pool(c, f)
    keys = (f"{R}.tensor_model_parallel_size", f"{R}.data_parallel_size", f"{R}.pipeline_model_parallel_size")
    if pool is None or c.unknown(*keys):
        return
    tp, rdp, pp = (c.int(k) or 1 for k in keys)
    n_gpus, nodes, gpn, rgpn, pool_keys = pool
    # the DP asserts are the vLLM server's (SGLang's has none: VI913 is its DP rule); an unset name keeps them
    problems = rc.rollout_layout(n_gpus, rgpn, tp, rdp, pp, engine="sglang" if c.v(f"{R}.name") == "sglang" else "vllm")
    if problems:
        valid = rc.valid_rollout_tp(n_gpus, gpn)
        fix = Fix(set={keys[0]: valid[0]}) if len(valid) == 1 and rdp == 1 and pp == 1 else None
        c.add("VI810", "error", (keys[0], *pool_keys),
              "; ".join(problems) + f" ({nodes}×{gpn} GPUs"
              + (" of the rollout's own pool" if pool_keys[0].startswith("rollout.") else "")
              + "): the Ray workers fail at start-up",
              f"nearest valid {keys[0]}: {join_or(nearest(valid, tp))}", fix=fix)
        return
    w = rc.rollout_world(tp, rdp, pp)
    # (a replica of data-parallel engines on several nodes, a MoE's expert parallel, keeps each TP group in a node)
    if w > gpn and tp * pp > gpn:
        c.add("VI811", "warning", (keys[0], pool_keys[0]),
              f"a rollout replica of {w} GPUs spans {w // gpn} nodes: tensor-parallel traffic crosses the network",
              f"prefer tensor_model_parallel_size ≤ {gpn} (one node) when the model fits")
    elif w <= gpn and gpn % w:
        c.add("VI811", "warning", (keys[0], pool_keys[0]),
              f"rollout replicas of {w} GPUs do not divide the {gpn} GPUs of a node: some replicas straddle two nodes",
              f"nearest valid: {join_or(nearest(divisors(gpn), w))}")


def rule_sglang_dp(c: Ctx, f: Facts) -> None:
    """VI913: SGLang rollout data parallel without DP attention. verl starts each replica as one SGLang server with
    tp_size = TP × DP and dp_size = DP (sglang_rollout/async_sglang_server.py:313-323; engine_kwargs.sglang goes to
    the server as is, :276, :340). Without enable_dp_attention, SGLang's DataParallelController launches dp_size
    scheduler groups of tp_size GPUs each, the next group's base_gpu_id tp_size GPUs further
    (sglang/srt/managers/data_parallel_controller.py: launch_dp_schedulers), so a replica of TP × DP GPUs asks for
    DP × TP × DP of them; with DP attention it launches one group of tp_size GPUs (launch_dp_attention_schedulers)."""
    keys = (f"{R}.data_parallel_size", f"{R}.engine_kwargs.sglang.enable_dp_attention")
    if c.v(f"{R}.name") != "sglang" or c.unknown(keys[0]):
        return
    rdp, tp = c.int(keys[0]) or 1, c.int(f"{R}.tensor_model_parallel_size") or 1
    if rdp <= 1 or c.v(keys[1]) is True:
        return
    c.add("VI913", "error", keys,
          f"rollout data_parallel_size={rdp} on SGLang without DP attention: verl starts a replica of {tp * rdp} GPUs as "
          f"one SGLang server with tp_size={tp * rdp} and dp_size={rdp} (async_sglang_server.py:313-323), and SGLang "
          f"then launches {rdp} groups of {tp * rdp} GPUs each ({tp * rdp * rdp} GPUs; data_parallel_controller.py "
          "launch_dp_schedulers): the server fails on GPUs the replica does not have",
          f"set +{keys[1]}=true (SGLang's DP attention splits the {tp * rdp} GPUs into {rdp} groups), or "
          f"{keys[0]}=1 (verl then builds a replica per {tp} GPUs)", fix=Fix(set={keys[1]: True}, plus=[] if keys[1] in c.res.defaults_flat else [keys[1]]))


def rule_rollout_dp_nodes(c: Ctx, f: Facts, shape: Any) -> None:
    """Rollout data parallel that makes one replica span nodes, for a model without experts. verl sizes a replica as
    TP×DP×PP GPUs and builds world // that many of them (rollout/llm_server.py:434-460); a replica larger than a node
    becomes one vLLM server over nnodes = world_size // gpus_per_node nodes (rollout/replica.py:108-118) whose DP engines
    are started as data_parallel_size with gpus_per_node // TP of them local, plus nnodes/node_rank/master_addr for one
    multi-node engine (vllm_rollout/vllm_async_server.py:384-414). Each DP engine holds a whole TP copy of the weights,
    as a separate replica does; DP inside a replica serves MoE expert parallel (EP = TP×DP, RolloutConfig,
    workers/config/rollout.py:295; rollout.yaml's comment on expert_parallel_size). For a dense model it only binds
    independent engines into one server across the network."""
    if f.gpn is None or shape is None or shape.source not in ("catalogue", "local") or shape.experts:
        return
    keys = (f"{R}.data_parallel_size", f"{R}.tensor_model_parallel_size", f"{R}.pipeline_model_parallel_size")
    if c.unknown(*keys) or c.v(f"{R}.name") != "vllm":
        return
    rdp, tp, pp = (c.int(k) or 1 for k in keys)
    gpn = c.int(f"{R}.n_gpus_per_node") or f.gpn
    w = tp * rdp * pp
    if rdp <= 1 or w <= gpn or tp * pp > gpn or w % gpn:
        return  # in a node; TP crossing nodes is VI811; a replica that does not tile is VI810
    c.add("VI905", "warning", (keys[0], keys[1], "trainer.n_gpus_per_node"),
          f"rollout data_parallel_size={rdp} × tensor_model_parallel_size={tp} = {w} GPUs per replica spans {w // gpn} "
          f"nodes of {gpn}: verl starts it as one vLLM server over {w // gpn} nodes (replica.py:113-118, "
          f"vllm_async_server.py:384-414), although {shape.name} has no experts and each of its {rdp} DP engines holds "
          "a whole TP copy of the weights, as a separate replica would",
          f"set {keys[0]}=1: verl then builds one replica per {tp * pp} GPUs (llm_server.py:460), each inside a node")


def rule_rollout_heads(c: Ctx, f: Facts, shape: Any) -> None:
    """Rollout TP against the model's attention heads: vLLM and SGLang split every attention layer's heads over the
    engine's tensor-parallel ranks (arithmetic.attention_tp_problem) and refuse a size that does not divide them when
    the engine starts, after the GPUs are booked. verl passes tensor_model_parallel_size to the engine as is
    (vllm_rollout/vllm_async_server.py:342). Only a shape with the model's own head counts is judged."""
    key = f"{R}.tensor_model_parallel_size"
    if shape is None or shape.source not in ("catalogue", "local") or c.unknown(key) or \
            c.v(f"{R}.name") not in ("vllm", "sglang"):
        return
    tp = c.int(key) or 1
    kv = None if shape.kv_lora_rank else shape.kv_heads
    problem = rc.attention_tp_problem(tp, shape.heads, kv)
    if problem is None:
        return
    inside = divisors(f.gpn) if f.gpn else rc.pow2_divisors(1 << tp.bit_length())
    valid = rc.attention_tp_sizes(shape.heads, kv, inside) or [1]
    c.add("VI838", "error", (key,),
          f"{c.v(f'{R}.name')} cannot split {shape.name}'s attention over rollout {key.rsplit('.', 1)[1]}={tp}: "
          f"{problem} (the engine refuses it at start-up)",
          f"nearest valid: {join_or(nearest(valid, tp))}" + (f" (of those inside a node of {f.gpn})" if f.gpn else ""))


def rule_hardware(c: Ctx, f: Facts) -> None:
    hw = c.hw
    if not hw.given or f.n_gpus is None or f.gpn is None:
        return
    have = (hw.nnodes or 0) * (hw.gpus_per_node or 0)
    want = f.n_gpus
    extra = []
    if bool(c.v("reward.reward_model.enable")) and bool(c.v("reward.reward_model.enable_resource_pool")):
        k = (c.int("reward.reward_model.n_gpus_per_node") or 0) * (c.int("reward.reward_model.nnodes") or 0)
        want += k
        extra.append(f"{k} for the reward model")
    if c.src.entry in ("fully_async", "one_step_off"):
        # the rollout on GPUs of its own beside the trainer's pool (fully_async_main.py:235-236, one_step_off_policy/
        # main_ppo.py:121-122): each standalone replica creates its own resource pool when it starts
        # (workers/rollout/replica.py:189-207), after the trainer's pool took its GPUs (separation/utils.py:33-59)
        k = (c.int("rollout.n_gpus_per_node") or 0) * (c.int("rollout.nnodes") or 0)
        want += k
        extra.append(f"{k} for the rollout's own replicas, whose pools verl checks only as they start")
    pool = separate_pool(c)
    if pool is not None:
        # V1 separate_async: a standalone LLMServerManager on rollout.nnodes × n_gpus_per_node GPUs of its own
        # (trainer/ppo/v1/trainer_separate_async.py:154-156, rollout/llm_server.py:455-460; counted beside the
        # trainer's pool at trainer_separate_async.py:395-401); VI993 reports an empty one
        want += pool
        extra.append(f"{pool} for the standalone rollout of trainer_mode=separate_async")
    if bool(c.v("distillation.enabled")):
        k = (c.int("distillation.n_gpus_per_node") or 0) * (c.int("distillation.nnodes") or 0)
        want += k
        extra.append(f"{k} for teacher models")
    if hw.per_node:
        have = sum(hw.per_node)
    label = f"{hw.label} ({'--nnodes/--gpus-per-node' if hw.source == 'flags' else 'the bundle'})"
    keys = ("trainer.nnodes", "trainer.n_gpus_per_node")
    held = rc.placement_groups(hw.per_node, f.gpn) if hw.per_node else None
    if hw.per_node and f.nnodes and f.gpn <= max(hw.per_node) and held < f.nnodes:
        best = max(range(1, max(hw.per_node) + 1), key=lambda g: (g * rc.placement_groups(hw.per_node, g), g))
        groups = rc.placement_groups(hw.per_node, best)
        c.add("VI814", "error", keys, f"verl asks Ray for trainer.nnodes={f.nnodes} placement groups of "
              f"n_gpus_per_node={f.gpn} GPUs, each packed on one node (STRICT_PACK, single_controller/ray/base.py:"
              f"131-160); {label} hold {held} such group(s), so Ray waits forever (verl's own check compares only "
              "the total GPUs, base.py:227-242)",
              f"set trainer.nnodes={groups} trainer.n_gpus_per_node={best} (Ray places {best * groups} of the {have} "
              "GPUs that way; re-check the batch sizes), or run on nodes of equal size")
    elif f.gpn > (hw.gpus_per_node or 0):
        c.add("VI814", "error", keys, f"trainer.n_gpus_per_node={f.gpn} but a node has {hw.gpus_per_node} GPUs: verl's "
              "placement groups never fit (Ray waits forever)", f"set trainer.n_gpus_per_node ≤ {hw.gpus_per_node}")
    elif want > have:
        c.add("VI814", "error", keys, f"the config needs {want} GPUs" + (f" ({', '.join(extra)} included)" if extra else "")
              + f" but the hardware has {label}: `Total available GPUs {have} is less than total desired GPUs {want}`",
              "lower trainer.nnodes / n_gpus_per_node or give more nodes")
    elif want < have:
        c.add("VI814", "warning", keys, f"the config uses {want} of the {have} GPUs of {label}",
              (f"set trainer.nnodes={hw.nnodes} trainer.n_gpus_per_node={hw.gpus_per_node} to use them all " if not
               hw.per_node else "nodes of unequal size: verl gives every node n_gpus_per_node GPUs; ") +
              "(re-check the batch sizes)")


def rule_rollout_parallel(c: Ctx, f: Facts) -> None:
    pp, name = c.int(f"{R}.pipeline_model_parallel_size"), c.v(f"{R}.name")
    if pp and pp > 1 and name in ROLLOUT_NAMES:
        c.add("VI815", "error", (f"{R}.pipeline_model_parallel_size",), f"{name} rollout with pipeline_model_parallel_size="
              f"{pp}: verl raises NotImplementedError", f"set {R}.pipeline_model_parallel_size=1 and raise tensor_model_parallel_size")
    ep, tp, rdp = c.int(f"{R}.expert_parallel_size"), c.int(f"{R}.tensor_model_parallel_size"), c.int(f"{R}.data_parallel_size")
    if ep and ep > 1 and name != "trtllm" and tp and rdp and ep != tp * rdp:
        c.add("VI815", "error", (f"{R}.expert_parallel_size", f"{R}.tensor_model_parallel_size", f"{R}.data_parallel_size"),
              f"expert_parallel_size={ep} must equal tensor_model_parallel_size × data_parallel_size = {tp * rdp} (RolloutConfig)",
              f"set {R}.expert_parallel_size={tp * rdp}")


def rule_sequence_parallel(c: Ctx, f: Facts, shape: Any) -> None:
    if f.megatron:
        return
    old_critic_sp = c.int("critic.ulysses_sequence_parallel_size") or 1
    if f.use_critic and old_critic_sp > 1 and old_critic_sp != f.critic_sp:
        c.add("VI816", "warning", ("critic.ulysses_sequence_parallel_size", "critic.fsdp.ulysses_sequence_parallel_size"),
              f"critic.ulysses_sequence_parallel_size={old_critic_sp} is deprecated and verl 0.9's critic engine ignores it: "
              f"the critic runs with sequence parallel {f.critic_sp}",
              f"set critic.fsdp.ulysses_sequence_parallel_size={old_critic_sp}")
    for role, sp, keys in (("actor", f.sp, (f"{A}.ulysses_sequence_parallel_size", f"{A}.fsdp_config.ulysses_sequence_parallel_size")),
                           ("critic", f.critic_sp if f.use_critic else 1, ("critic.fsdp.ulysses_sequence_parallel_size",))):
        if sp <= 1:
            continue
        if f.n_gpus is not None and f.n_gpus % sp:
            c.add("VI812", "error", keys[:1] + ("trainer.n_gpus_per_node",),
                  f"{role} Ulysses sequence parallel size {sp} does not divide the {f.n_gpus} GPUs",
                  f"nearest valid: {join_or(nearest(divisors(f.n_gpus), sp))}")
        elif f.gpn is not None and f.gpn % sp:
            # verl builds the (dp, sp) device mesh over the whole world (torch's init_device_mesh needs only
            # world % sp); a group across nodes runs, its all-to-all crosses the network
            c.add("VI812", "warning", keys[:1] + ("trainer.n_gpus_per_node",),
                  f"{role} Ulysses sequence parallel size {sp} does not divide the {f.gpn} GPUs of a node: groups "
                  "span or straddle nodes, so their all-to-all crosses the network",
                  f"nearest within a node: {join_or(nearest(divisors(f.gpn), sp))}")
        if shape is not None and role == "actor" and (shape.heads % sp or (shape.kv_heads % sp and sp % shape.kv_heads)):
            ok = [d for d in divisors(shape.heads) if shape.kv_heads % d == 0 or d % shape.kv_heads == 0]
            c.add("VI812", "error", keys[:1], f"Ulysses splits attention heads: {shape.name} has {shape.heads} heads "
                  f"({shape.kv_heads} KV heads), which {sp} GPUs cannot share", f"nearest valid: {join_or(nearest(ok, sp))}")
        if shape is not None and role == "actor" and gdn_layers(shape):
            gdn_ulysses(c, keys[0], sp, shape)
        model_key = f"{M}.use_remove_padding" if role == "actor" else "critic.model.use_remove_padding"
        if not bool(c.v(model_key)):
            c.add("VI812", "error", (model_key, keys[0]), f"{role} sequence parallelism needs {model_key}=true (validate_config)",
                  f"set {model_key}=true", fix=Fix(set={model_key: True}))


# verl 0.9.1 patches the Gated DeltaNet layers of these model types for Ulysses (models/transformers/monkey_patch.py:
# 500, ["qwen3_5", "qwen3_5_moe"]); a hub name of that family ("Qwen/Qwen3.5-27B") the catalogue lacks is known by name
GDN_MODEL_TYPES = ("qwen3_5", "qwen3_5_moe")
GDN_NAME = re.compile(r"(?i)qwen3[._]5(?![0-9])")


def gdn_layers(shape: Any) -> int:
    """Gated DeltaNet layers of `shape`: counted from its config.json or catalogue entry; -1 (some, not counted) for
    a shape scaled from the size in a Qwen3.5-family name the catalogue lacks; 0 for none."""
    if getattr(shape, "linear_layers", 0):
        return int(shape.linear_layers)
    if getattr(shape, "source", "") not in ("catalogue", "local") and GDN_NAME.search(str(getattr(shape, "name", ""))):
        return -1
    return 0


def gdn_ulysses(c: Ctx, key: str, sp: int, shape: Any) -> None:
    """VI907: Ulysses sequence parallel on a Gated DeltaNet (hybrid linear-attention) model, for PPO's actor and for
    verl's SFT trainers alike: both build the FSDP engine, which hands SP to apply_monkey_patch (workers/engine/fsdp/
    transformer_impl.py:324-330; models/transformers/monkey_patch.py:270, 500 patch qwen3_5 / qwen3_5_moe). verl
    0.9.1 splits a Gated DeltaNet layer over Ulysses ranks with flash-linear-attention's context-parallel kernels
    (models/transformers/qwen3_5.py:92-108 imports fla.ops.cp.context; :168-172 raises NotImplementedError inside
    the workers when chunk_gated_delta_rule takes no cp_context; verl PR #6660 validated FLA 0.5.1)."""
    n = gdn_layers(shape)
    layers = f"{n} Gated DeltaNet layers" if n > 0 else "Gated DeltaNet layers (a Qwen3.5-family model)"
    c.add("VI907", "warning", (key,),
          f"{key}={sp}: Ulysses sequence parallel on {shape.name}, whose {layers} "
          "verl splits with flash-linear-attention's context-parallel kernels: without them (fla.ops.cp, a "
          "chunk_gated_delta_rule that takes cp_context) the workers raise NotImplementedError at the first pass "
          "(models/transformers/qwen3_5.py:168-172)",
          "install a flash-linear-attention with context-parallel support where the job runs (verl PR #6660 "
          f"validated 0.5.1; `verl-init doctor` shows the version), or set {key}=1")

UNEVEN_PIPELINE = ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage", "pipeline_model_parallel_layout",
                   "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")


def rule_megatron(c: Ctx, f: Facts, shape: Any = None) -> None:
    """Megatron's own layout asserts (wizard.verlspec.arithmetic.megatron_layout): dense TP·PP·CP and expert ETP·EP·PP
    grids over the world, VPP, layers over PP·VPP and experts over EP; TP inside a node."""
    for role, prefix, used in (("actor", f"{A}.megatron", f.megatron),
                               ("critic", "critic.megatron", f.use_critic and c.v("critic.strategy") == "megatron")):
        if not used or f.n_gpus is None or f.gpn is None:
            continue
        keys = [f"{prefix}.tensor_model_parallel_size", f"{prefix}.pipeline_model_parallel_size", f"{prefix}.context_parallel_size"]
        moe_keys = [f"{prefix}.expert_model_parallel_size", f"{prefix}.expert_tensor_parallel_size",
                    f"{prefix}.virtual_pipeline_model_parallel_size"]
        if c.unknown(*keys, *moe_keys):
            continue
        tp, pp, cp = (c.int(k) or 1 for k in keys)
        ep = c.int(moe_keys[0]) or 1
        etp, vpp = c.int(moe_keys[1]), c.int(moe_keys[2])
        if tp * pp * cp and f.n_gpus % (tp * pp * cp):
            valid = [p for p in range(1, f.n_gpus + 1) if f.n_gpus % (tp * p * cp) == 0]
            c.add("VI813", "error", keys[:2] + ["trainer.nnodes", "trainer.n_gpus_per_node"],
                  f"{role} Megatron TP×PP×CP = {tp}×{pp}×{cp} = {tp * pp * cp} does not divide the {f.n_gpus} GPUs (validate_config)",
                  f"nearest valid pipeline_model_parallel_size: {join_or(nearest(valid, pp))}")
        # shapes read from a catalogue entry or a local config.json only: a name's estimate has no layer/expert count
        exact = shape is not None and shape.source in ("catalogue", "local") and role == "actor"
        uneven = any(k.startswith(f"{prefix}.override_transformer_config.") and k.rsplit(".", 1)[-1] in UNEVEN_PIPELINE
                     for k in c.res.flat)
        problems = rc.megatron_layout(f.n_gpus, tp, pp, cp, ep, etp, vpp,
                                      layers=shape.layers if exact and not uneven else None,
                                      experts=shape.experts if exact else None)
        if exact and uneven:
            _uneven_split(c, role, prefix, pp, vpp, shape.layers)
        for problem in problems[1:] if problems and problems[0].startswith("TP×PP×CP") else problems:
            if "expert grid" in problem:
                ok = [e for e in divisors(f.n_gpus // max(1, (etp or tp) * pp)) if f.n_gpus % ((etp or tp) * e * pp) == 0]
                hint = f"nearest valid expert_model_parallel_size: {join_or(nearest(ok, ep))}"
                # megatron-core: `if expert_tensor_parallel_size is None: expert_tensor_parallel_size =
                # tensor_model_parallel_size` (megatron/core/parallel_state.py:743-744 at tag core_v0.15.0, the same in
                # core_v0.13.0 … core_v0.17.0); verl 0.9.1 passes its engine config's null through unchanged
                # (workers/engine/megatron/transformer_impl.py:278) and its engine yaml documents it ("null to be same as TP")
                if etp is None:
                    problem += f" (expert_tensor_parallel_size unset: Megatron uses ETP = TP = {tp})"
                    hint = f"set {moe_keys[1]}=1 (experts without tensor parallel), or {hint}"
                named = [moe_keys[0], moe_keys[1], keys[1]]
            elif "virtual_pipeline" in problem:
                hint, named = f"set {moe_keys[2]}=null or raise {keys[1]}", [moe_keys[2], keys[1]]
            elif "layers" in problem:
                hint = (f"choose PP×VPP dividing {shape.layers}, or set {prefix}.override_transformer_config."
                        "num_layers_in_first_pipeline_stage / num_layers_in_last_pipeline_stage")
                named = [keys[1], moe_keys[2]]
            else:
                hint = f"nearest valid expert_model_parallel_size: {join_or(nearest(divisors(shape.experts), ep))}"
                named = [moe_keys[0]]
            c.add("VI813", "error", named, f"{role} Megatron: {problem} (Megatron-core raises at start-up)", hint)
        if f.gpn % tp:
            c.add("VI813", "error", keys[:1] + ["trainer.n_gpus_per_node"],
                  f"{role} Megatron tensor_model_parallel_size={tp} must divide the {f.gpn} GPUs of a node "
                  "(tensor parallel stays inside a node)", f"nearest valid: {join_or(nearest(divisors(f.gpn), tp))}")
        grid = rc.MegatronGrid(tp, pp, cp, ep, etp, vpp)
        found = rc.megatron_checks(f.n_gpus, grid, heads=shape.heads, kv_heads=shape.kv_heads) if exact else {}
        heads = {k: v for k, v in found.items() if k in ("heads", "kv_heads")}
        if heads:
            ok = [t for t in divisors(f.gpn) if not {"heads", "kv_heads"} & set(
                rc.megatron_checks(f.n_gpus, rc.MegatronGrid(t), heads=shape.heads, kv_heads=shape.kv_heads))]
            c.add("VI818", "error", [keys[0], M + ".path"],
                  f"{role} Megatron: {heads.get('heads') or heads['kv_heads']} of {shape.name} "
                  "(megatron-core's TransformerConfig raises at start-up)",
                  f"nearest valid {keys[0]}: {join_or(nearest(ok, tp))}")
        node = rc.megatron_checks(f.n_gpus, grid, gpus_per_node=f.gpn).get("expert_node")
        if node and not problems:
            c.add("VI819", "warning", [moe_keys[0], moe_keys[1], "trainer.n_gpus_per_node"],
                  f"{role} Megatron: {node}: the experts' token all-to-all crosses the network every layer",
                  f"keep expert_tensor_parallel_size × expert_model_parallel_size ≤ {f.gpn} and dividing it "
                  f"(e.g. {moe_keys[1]}=1)")


def _uneven_split(c: Ctx, role: str, prefix: str, pp: int, vpp: int | None, layers: int) -> None:
    """VI813 for an uneven pipeline split given as override_transformer_config.num_layers_in_first/last_pipeline_stage
    (verl 0.9.1 copies override_transformer_config onto the provider unchecked, transformer_impl.py:371-372):
    the layers left after the first/last stages must split evenly over the stages left (megatron-core
    get_transformer_layer_offset / get_num_layers_to_build: rc.MEGATRON_CHECKS["layers"]); older megatron-core builds
    only what the integer division gives and drops the rest silently (NVIDIA/Megatron-LM#2718: Qwen3-30B, PP=2,
    11 + 13 of 48 layers). A custom pipeline_model_parallel_layout, account_for_* or VPP is left unjudged."""
    otc = f"{prefix}.override_transformer_config"
    names = [f"{otc}.{k}" for k in UNEVEN_PIPELINE]
    if vpp is not None or any(k in c.res.flat for k in names[2:]) or c.unknown(*names[:2]):
        return
    first, last = (c.int(k) if k in c.res.flat and c.v(k) is not None else None for k in names[:2])
    if first is None and last is None:
        return
    found = rc.megatron_checks(pp * 10**6, rc.MegatronGrid(pp=pp, first=first, last=last), layers=layers).get("layers")
    if not found:
        return
    found = found.replace("first None + ", "").replace(" + last None", "")
    left = pp - (first is not None) - (last is not None)
    if pp < 2:
        hint = f"remove {names[0]} / {names[1]} (they need pipeline_model_parallel_size > 1)"
    else:
        a = first if first is not None else (layers - (last or 0)) // (left + 1)
        b = layers - a - max(left, 0) * ((layers - a) // (max(left, 0) + 1))
        hint = f"make first + last + {max(left, 0)} × middle = {layers}, e.g. {names[0]}={a} {names[1]}={b}"
    c.add("VI813", "error", [k for k in names[:2] if k in c.res.flat] + [f"{prefix}.pipeline_model_parallel_size"],
          f"{role} Megatron: {found} over pipeline_model_parallel_size={pp} (megatron-core builds only the layers its "
          "split gives and asserts in newer releases, inside the worker)", hint)


def rule_device(c: Ctx, f: Facts) -> None:
    """trainer.device (verl's platform sets it at start-up from the detected device, utils/device.py:151
    auto_set_device; `--gpu-type` naming an Ascend NPU says the same) against the rollout engine: engines verl
    0.9.1 has no build for on that device (wizard.verlspec.hardware.ACCELERATORS)."""
    dev, name = c.v("trainer.device"), c.v(f"{R}.name")
    vendor = accelerator_of_gpu_type(c.hw.gpu_type) if c.hw.gpu_type else None
    acc = ACCELERATORS["ascend"] if dev == "npu" or vendor == "ascend" else None
    if acc is None or name not in ROLLOUT_NAMES or name in acc.rollout_engines:
        return
    where = "trainer.device=npu" if dev == "npu" else f"--gpu-type {c.hw.gpu_type}"
    c.add("VI817", "warning", (f"{R}.name", "trainer.device"),
          f"{R}.name={name} on {acc.label} ({where}): {acc.why}",
          f"set {R}.name={' or '.join(acc.rollout_engines)}")
