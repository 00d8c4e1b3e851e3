"""The training passes' memory on one GPU for verl 0.9.1's FSDP engine (workers/engine/fsdp/transformer_impl.py,
workers/engine_workers.py): what verl itself logs per pass as perf/max_memory_allocated_gb and
perf/max_memory_reserved_gb (torch.cuda.max_memory_allocated / max_memory_reserved, GiB).

Passes of one step, in the trainer's order (trainer/ppo/ray_trainer.py): old_log_prob (the actor's forward),
ref_log_prob (the reference's forward), values (the critic's forward), update_critic, update_actor.

Per parameter (verl's dtypes; FSDP shards them over every GPU, fsdp_size -1):
- the actor and the critic keep fp32 weights (engine model_dtype fp32 for training, transformer_impl.py:262) and
  AdamW's fp32 m and v (8 B) between passes unless offloaded; the update adds fp32 gradients (FSDP's reduce dtype,
  transformer_impl.py:396), and AdamW(foreach)'s step a temporary per parameter (traced: memtrace);
- the reference is always CPU-offloaded: verl forces CPUOffload(offload_params=True) (FSDP) or CPUOffloadPolicy
  (FSDP2) for a forward-only engine whatever param_offload says (transformer_impl.py:422-463): only the FSDP unit
  being computed is on the GPU, its fp32 copy and its bf16 cast;
- offloaded actor / critic state is loaded back for its own passes (engine_workers.py; workers/engine/base.py).
Per token of a micro-batch: the traced activations + logits (memtrace) or, without coefficients, the analytic
per-token bytes the caller passes.

Reserved: the caching allocator keeps the blocks a pass freed; a pass allocating other sizes cannot reuse them.
Measured (tests/data/reference/gpu-memory: verl's own workers on an H200), each pass's reserved peak is its
allocated peak plus the largest working set (peak above the resident state) of the step's other passes; without a
rollout between steps (nothing empties the cache) the log-prob passes also keep the update's reservation."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

GIB = float(1 << 30)
FP32, ADAM, GRAD = 4, 8, 4
BF16 = 2


@dataclass(frozen=True)
class PerToken:
    """Bytes of one pass's working set: constant + tokens × (rest + layers × per_layer)."""

    per_layer: float
    rest: float
    constant: float = 0.0
    embedding_backward: float = 0.0  # the peak at the input embedding's backward (parameter-sized temporaries)

    def bytes(self, tokens: float, layers: int) -> float:
        if tokens <= 0:
            return 0.0
        return max(self.constant + tokens * (self.rest + layers * self.per_layer), self.embedding_backward)


@dataclass(frozen=True)
class Coeffs:
    forward: PerToken
    train: PerToken
    value_forward: PerToken
    value_train: PerToken
    opt_temp_per_param: float
    entropy_per_token: float  # the update's entropy (entropy_coeff != 0), analytic: not traced
    source: str


def from_traced(data: dict[str, Any], *, checkpointing: bool, entropy_bytes_per_vocab: float, vocab: int,
                source: str, frozen_embedding: bool = False, fused: bool = False) -> Coeffs:
    """`frozen_embedding`: LoRA freezes the base weights (peft get_peft_model; verl builds the adapters in
    workers/engine/fsdp/transformer_impl.py:339-383 and FSDP-wraps them apart, utils/fsdp_utils.py:115): no weight
    gradient of the vocabulary tables, so no parameter-sized temporaries of their backward. `fused`: the policy's
    passes with model.use_fused_kernels (memtrace.FUSED_VARIANTS, the entropy's backward included); data traced
    before them keeps the full logits, an overestimate that the source names."""
    def pt(key: str) -> PerToken:
        d = data[key]
        return PerToken(d["per_layer_per_token"], d["rest_per_token"], d.get("constant", 0),
                        0 if frozen_embedding else d.get("embedding_backward", 0))

    gc = "gc" if checkpointing else "nogc"
    fused = fused and f"train_{gc}_fused" in data and "forward_fused" in data
    policy = "_fused" if fused else ""
    return Coeffs(pt(f"forward{policy}"), pt(f"train_{gc}{policy}"), pt("value_forward"), pt(f"value_train_{gc}"),
                  data["optimizer_step_temp_bytes_per_param"], 0.0 if fused else entropy_bytes_per_vocab * vocab,
                  source + (", fused-kernel passes" if fused else ""))


@dataclass
class Pass:
    name: str
    allocated: float  # bytes
    working: float  # bytes above the resident state
    terms: list[tuple[str, str, float]] = field(default_factory=list)
    reserved: float = 0.0
    loads: dict[str, float] = field(default_factory=dict)  # offloaded state loaded back for the pass, per role

    def metrics(self) -> dict[str, float]:
        return {"max_memory_allocated_gb": round(self.allocated / GIB, 2),
                "max_memory_reserved_gb": round(self.reserved / GIB, 2)}


@dataclass(frozen=True)
class Role:
    """One trained model on one GPU: parameters (all, trained), layers, shards, offload, its unit sizes."""

    params: float
    trained: float
    layers: int
    shards: int
    offload_params: bool
    offload_optimizer: bool
    largest_unit: float  # parameters of the largest FSDP unit (a decoder layer or the embedding/LM head)
    # FSDP2's CPUOffloadPolicy (fsdp_config.offload_policy): shards, gradients and Adam on the host, the optimizer
    # stepping there; only the gathered units reach the GPU (memory.Layout.fsdp_cpu_policy)
    on_host: bool = False

    @property
    def weights(self) -> float:
        return 0.0 if self.on_host else FP32 * self.params / self.shards

    @property
    def adam(self) -> float:
        return 0.0 if self.on_host else ADAM * self.trained / self.shards

    @property
    def grads(self) -> float:
        return 0.0 if self.on_host else GRAD * self.trained / self.shards

    @property
    def resident(self) -> float:
        return (0.0 if self.offload_params else self.weights) + (0.0 if self.offload_optimizer else self.adam)

    @property
    def loaded(self) -> float:
        """What verl loads back for the role's own passes."""
        return self.weights + self.adam - self.resident

    def gathered(self, train: bool) -> float:
        """bf16 parameters FSDP's mixed precision holds: sharded, the unit being computed and the prefetched one
        (each unit is resharded after its forward and backward); unsharded (one GPU, NO_SHARD), every unit's bf16
        copy is kept from its forward to its backward, so a training pass holds the whole model in bf16 (a
        forward-only pass frees each unit after it)."""
        if self.shards > 1:
            return 2 * BF16 * self.largest_unit
        return BF16 * self.params if train else BF16 * self.largest_unit


def passes(actor: Role, c: Coeffs, *, train_tokens: float, logprob_tokens: float, critic: Optional[Role] = None,
           critic_c: Optional[Coeffs] = None, ref: Optional[Role] = None, entropy: bool = False,
           rollout_between_steps: bool = True, ref_in_actor: bool = False,
           critic_tokens: Optional[float] = None) -> dict[str, Pass]:
    """Every pass of one step with its allocated and reserved peak (bytes). `ref_in_actor`: LoRA's reference is
    the actor with its adapters disabled (trainer/ppo/ray_trainer.py:360 ref_in_actor; the actor's engine runs it
    under engine.disable_adapter(), workers/engine_workers.py:403-425): no weights of its own. `critic_tokens`: the
    critic's micro-batch tokens in both its passes (verl 0.9.1 sizes its engine from one budget); None: the actor's."""
    resident = actor.resident + (critic.resident if critic else 0.0)
    out: dict[str, Pass] = {}

    def add(name: str, terms: list[tuple[str, str, float]], loads: Optional[dict[str, float]] = None) -> None:
        terms = [t for t in terms if t[2] > 0]
        working = sum(b for _, _, b in terms)
        out[name] = Pass(name, resident + working, working, terms, loads={k: v for k, v in (loads or {}).items() if v})

    fwd = c.forward.bytes(logprob_tokens, actor.layers)
    a_load = actor.weights if actor.offload_params else 0.0
    actor_fwd = [("actor", "weights loaded for its pass (offloaded)", a_load),
                 ("actor", "gathered layers", actor.gathered(False)),
                 ("actor", "activations + logits (forward, traced)" if "analytic" not in c.source
                  else "activations + logits (forward)", fwd)]
    add("old_log_prob", actor_fwd, {"actor": a_load})
    if ref_in_actor:
        add("ref_log_prob", [("actor", what.replace("(forward", "(the reference: LoRA adapters disabled; forward"), b)
                             for _, what, b in actor_fwd], {"actor": a_load})
    elif ref is not None:
        add("ref_log_prob", [("reference", "one FSDP unit on the GPU (CPU-offloaded, as verl forces)",
                              (FP32 + BF16) * ref.largest_unit),
                             ("reference", "activations + logits (forward, traced)" if "analytic" not in c.source
                              else "activations + logits (forward)", fwd)])
    train_acts = c.train.bytes(train_tokens, actor.layers) + (c.entropy_per_token * train_tokens if entropy else 0.0)
    if critic is not None and critic_c is not None:
        c_load = critic.weights if critic.offload_params else 0.0
        add("values", [("critic", "weights loaded for its pass (offloaded)", c_load),
                       ("critic", "gathered layers", critic.gathered(False)),
                       ("critic", "activations (forward, value head)",
                        critic_c.value_forward.bytes(critic_tokens or logprob_tokens, critic.layers))],
            {"critic": c_load})
        c_acts = critic_c.value_train.bytes(critic_tokens or train_tokens, critic.layers)
        c_opt = critic_c.opt_temp_per_param * critic.trained / critic.shards
        c_step = c_opt > c_acts + critic.gathered(True)
        add("update_critic", [("critic", "weights + Adam loaded for its update (offloaded)", critic.loaded),
                              ("critic", "gradients", critic.grads),
                              *([("critic", "AdamW step temporaries (traced)", c_opt)] if c_step else
                                [("critic", "gathered layers", critic.gathered(True)),
                                 ("critic", "activations (training micro-batch)", c_acts)])], {"critic": critic.loaded})
    a_opt = 0.0 if actor.on_host else c.opt_temp_per_param * actor.trained / actor.shards
    step_is_peak = a_opt > train_acts + actor.gathered(True)
    add("update_actor", [("actor", "weights + Adam loaded for its update (offloaded)", actor.loaded),
                         ("actor", "gradients", actor.grads),
                         *([("actor", "AdamW step temporaries (traced)", a_opt)] if step_is_peak else
                           [("actor", "gathered layers", actor.gathered(True)),
                            ("actor", "activations + logits", train_acts)])], {"actor": actor.loaded})
    # reserved: own peak + the largest working set of the step's other passes (the allocator's cached blocks);
    # offloaded state a pass loads back reuses the blocks another pass freed when it offloaded the same state
    # (same tensors, same sizes), so that part of the other pass's working set is not kept twice. verl empties the
    # cache around the rollout (workers/engine_workers.py:769, 814 update_weights): with a rollout between steps a
    # pass keeps only the blocks of the passes before it in the step (the trainer's order, as `out` is built)
    order = list(out.values())
    for i, p in enumerate(order):
        before = order[:i] if rollout_between_steps else [q for q in order if q is not p]
        others = [q.working - min(sum(q.loads.values()), sum(p.loads.values())) for q in before]
        p.reserved = p.allocated + max(others, default=0.0)
    if not rollout_between_steps:  # nothing empties the cache: the log-prob passes keep the updates' reservation
        kept = max(p.reserved for k, p in out.items() if k.startswith("update"))
        for k, p in out.items():
            if not k.startswith("update"):
                p.reserved = max(p.reserved, kept)
    return out


def phase_of(name: str) -> str:
    return "update" if name.startswith("update") else "log-prob"


def verl_metrics(ps: dict[str, Pass]) -> dict[str, dict[str, Any]]:
    """Per estimate phase ("log-prob", "update"): the largest pass's metrics, and every pass's."""
    out: dict[str, dict[str, Any]] = {}
    for name, p in ps.items():
        ph = out.setdefault(phase_of(name), {"max_memory_allocated_gb": 0.0, "max_memory_reserved_gb": 0.0,
                                             "passes": {}})
        m = p.metrics()
        ph["passes"][name] = m
        ph["max_memory_allocated_gb"] = max(ph["max_memory_allocated_gb"], m["max_memory_allocated_gb"])
        ph["max_memory_reserved_gb"] = max(ph["max_memory_reserved_gb"], m["max_memory_reserved_gb"])
    return out


def explain(est: Any) -> list[str]:
    """PLAN.md's lines under the memory table: where the training terms came from and what each one is (per GPU,
    from which pass)."""
    ps = getattr(est, "passes", None) or {}
    if not ps:
        if not getattr(est, "phases", None):
            return []
        return [f"Training passes (log-prob, update): basis analytic, {getattr(est, 'coefficients', '') or 'not traced'}: "
                "the per-token bytes of wizard/planner/memory.py, each constant with its source."]
    src = getattr(est, "coefficients", "")
    if getattr(est, "basis", "") == "traced":
        basis = ("basis traced: these passes decide the log-prob and update totals (each phase's largest pass's "
                 "reserved peak, plus the runtime and the sleeping engine outside torch's allocator)")
    else:
        basis = ("basis analytic: the log-prob and update totals above come from the analytic per-token model "
                 "(wizard/planner/memory.py); these passes give verl's metrics beside them")
    lines = [f"Training passes (log-prob, update) from the model's own architecture: coefficients {src}; {basis}. "
             "verl's perf/max_memory_allocated_gb and perf/max_memory_reserved_gb are what verl logs for the same "
             "pass, with full-length sequences. Per GPU, per pass:"]
    for name, p in ps.items():
        parts = "; ".join(f"{role} {what} {b / GIB:.1f} GiB" for role, what, b in p.terms)
        lines.append(f"{name}: resident state plus {parts or 'nothing'} → allocated "
                     f"{p.allocated / GIB:.1f} GiB, reserved {p.reserved / GIB:.1f} GiB (the allocator keeps the "
                     "blocks of the largest pass before it in the step, less offloaded state loaded back into them)")
    lines.append("Not traced, analytic and named in the table: the rollout engine's reservation and KV cache, the "
                 "CUDA context and NCCL buffers, the sleeping engine, sharding over the data-parallel group.")
    return lines


# -- wired into the memory estimate (wizard.planner.memory passes itself as `analytic`) ---------------------


def training_coeffs(s: Any, L: Any, analytic: Any) -> Coeffs:
    """The per-token coefficients of the model's passes: traced (catalogue data, or a local config traced now), else
    the analytic per-token bytes above, named as such."""
    from wizard.planner import memtrace

    a = analytic  # wizard.planner.memory, passed in (it imports this module, never the other way)
    data, source = memtrace.coefficients(s)
    if data is not None:
        return from_traced(data, checkpointing=L.checkpointing, vocab=s.vocab, source=source,
                           entropy_bytes_per_vocab=a.ENTROPY_SOFTMAX_BYTES, frozen_embedding=bool(L.lora_rank),
                           fused=L.fused_logits)
    fwd = PerToken(0.0, a.forward_bytes_per_token(s, L))
    train = PerToken(0.0, a.train_bytes_per_token(s, replace(L, update_entropy=False)))
    value = PerToken(0.0, a._critic_bytes_per_token(s, L))
    # AdamW(foreach)'s step keeps one fp32 temporary per parameter (torch/optim/adamw.py _multi_tensor_adamw:
    # exp_avg_sq_sqrt), as the traced architectures show
    return Coeffs(fwd, train, value, value, 4.0, a.ENTROPY_SOFTMAX_BYTES * s.vocab, source)


def _role(s: Any, L: Any, *, offload_params: bool, offload_optimizer: bool, shards: int = 0) -> Any:
    trained = s.lora_params(L.lora_rank) if L.lora_rank else s.params
    return Role(params=s.params, trained=trained, layers=s.layers, shards=shards or L.n_gpus,
                         offload_params=offload_params, offload_optimizer=offload_optimizer,
                         largest_unit=max(s.layer_params(), s.vocab * s.hidden))


def fsdp_training_phases(e: Any, s: Any, L: Any, st: Any, terms: Callable, t_train: float,
                         t_fwd: float, asleep_term: tuple, analytic: Any) -> None:
    """log-prob and update of verl's FSDP engine: every pass (passes) from the model's coefficients; the
    phase's total is its largest pass's reserved peak (allocated + the allocator's cached blocks), plus what lies
    outside torch's allocator (the sleeping engine, the CUDA context). With traced coefficients for every trained
    model these phases decide the verdict (basis "traced"); without, the analytic phases already in `e` stay
    (basis "analytic") and the passes only give verl_metrics."""
    c = training_coeffs(s, L, analytic)
    actor = replace(_role(s, L, offload_params=L.offload_params, offload_optimizer=L.offload_optimizer,
                          shards=analytic.fsdp_shards(L)), on_host=bool(getattr(L, "fsdp_cpu_policy", False)))
    ref = replace(actor, offload_params=True, offload_optimizer=True, on_host=False) if st.has_ref else None
    critic = critic_c = None
    if L.critic is not None:
        critic_c = training_coeffs(L.critic, analytic.critic_layout(L), analytic)
        critic = _role(L.critic, replace(L, lora_rank=0), offload_params=st.critic_off, offload_optimizer=st.critic_off)
    ps = passes(actor, c, train_tokens=t_train, logprob_tokens=t_fwd, critic=critic, critic_c=critic_c,
                critic_tokens=st.critic_tokens or None,
                ref=ref, entropy=L.update_entropy, rollout_between_steps=L.rollout_between_steps,
                ref_in_actor=bool(L.lora_rank and L.use_ref))
    traced = all("analytic" not in x.source for x in (c, critic_c) if x is not None)
    e.basis = "traced" if traced else "analytic"
    for phase in ("log-prob", "update") if traced else ():
        mine = [p for k, p in ps.items() if phase_of(k) == phase]
        top = max(mine, key=lambda p: p.reserved)
        resident, own = [], list(top.terms)
        for name, role in (("actor", actor), ("critic", critic)):
            if role is None:
                continue
            if top.name == f"update_{name}":  # its whole training state, loaded back when offloaded
                resident += [(name, "weights", role.weights), (name, "optimizer states", role.adam)]
                own = [t for t in own if "loaded" not in t[1]]
            else:
                resident.append((name, "resident (not offloaded)", role.resident))
        e.phases[phase] = terms(*resident, *own,
                                # the allocator's cache: blocks of the step's other passes it keeps (measured)
                                ("runtime", "allocator reserve", top.reserved - top.allocated), asleep_term)
    e.passes = ps
    e.verl_metrics = verl_metrics(ps)
    e.coefficients = c.source
