"""verl's FSDP training passes on one GPU from the model's traced coefficients (wizard.planner.memtrace,
wizard.planner.phasemem), wired into the memory estimate (wizard.planner.memory)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from wizard.planner.shapes import ModelShape

# -- FSDP's training passes, from the model's traced coefficients ---------------------------------------------


def training_coeffs(s: ModelShape, L: Any, *, critic: bool = False) -> Any:
    """The per-token coefficients of the model's passes: traced (catalogue data, or a local config traced now), else
    the analytic per-token bytes above, named as such."""
    from wizard.planner import memtrace, phasemem
    from wizard.planner.memory import (ENTROPY_SOFTMAX_BYTES, _critic_bytes_per_token, forward_bytes_per_token,
                                       train_bytes_per_token)

    data, source = memtrace.coefficients(s)
    if data is not None:
        return phasemem.from_traced(data, checkpointing=L.checkpointing, vocab=s.vocab, source=source,
                                    entropy_bytes_per_vocab=ENTROPY_SOFTMAX_BYTES)
    fwd = phasemem.PerToken(0.0, forward_bytes_per_token(s, L))
    train = phasemem.PerToken(0.0, train_bytes_per_token(s, replace(L, update_entropy=False)))
    value = phasemem.PerToken(0.0, _critic_bytes_per_token(s, L))
    # AdamW(foreach)'s step keeps one fp32 temporary per parameter (torch/optim/adamw.py _multi_tensor_adamw:
    # exp_avg_sq_sqrt), as the traced architectures show
    return phasemem.Coeffs(fwd, train, value, value, 4.0, ENTROPY_SOFTMAX_BYTES * s.vocab, source)


def _role(s: ModelShape, L: Any, *, offload_params: bool, offload_optimizer: bool) -> Any:
    from wizard.planner import phasemem

    trained = s.lora_params(L.lora_rank) if L.lora_rank else s.params
    return phasemem.Role(params=s.params, trained=trained, layers=s.layers, shards=L.n_gpus,
                         offload_params=offload_params, offload_optimizer=offload_optimizer,
                         largest_unit=max(s.layer_params(), s.vocab * s.hidden))


def fsdp_training_phases(e: Any, s: ModelShape, L: Any, st: Any, terms: Callable, t_train: float,
                          t_fwd: float, asleep_term: tuple, set_phases: bool = True) -> None:
    """log-prob and update of verl's FSDP engine: every pass (phasemem.passes) from the model's coefficients; the
    phase's total is its largest pass's reserved peak (allocated + the allocator's cached blocks), plus what lies
    outside torch's allocator (the sleeping engine, the CUDA context)."""
    from wizard.planner import phasemem

    c = training_coeffs(s, L)
    actor = _role(s, L, offload_params=L.offload_params, offload_optimizer=L.offload_optimizer)
    ref = replace(actor, offload_params=True, offload_optimizer=True) if st.has_ref else None
    critic = critic_c = None
    if L.critic is not None:
        critic_c = training_coeffs(L.critic, L, critic=True)
        critic = _role(L.critic, replace(L, lora_rank=0), offload_params=st.critic_off, offload_optimizer=st.critic_off)
    ps = phasemem.passes(actor, c, train_tokens=t_train, logprob_tokens=t_fwd, critic=critic, critic_c=critic_c,
                         ref=ref, entropy=L.update_entropy, rollout_between_steps=L.rollout_between_steps)
    for phase in ("log-prob", "update") if set_phases else ():
        mine = [p for k, p in ps.items() if phasemem.phase_of(k) == phase]
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
    e.verl_metrics = phasemem.verl_metrics(ps)
    e.coefficients = c.source
