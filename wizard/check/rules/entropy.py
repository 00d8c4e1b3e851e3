"""VI778 (warning): entropy_from_logits_with_chunking on a path of verl 0.9.1's FSDP engine that never reads it
(paths under site-packages/verl; real case verl PR#7582, open).

The FSDP engine (workers/engine/fsdp/transformer_impl.py, strategy fsdp / fsdp2) picks its entropy function from the
flag at start-up (:178-186), but calls it, with entropy_from_logits_chunk_size, only in prepare_model_outputs' remove-
padding branch without fused kernels (:1358, :1397-1405). With model.use_remove_padding=False the padded branch calls
verl_F.entropy_from_logits on the whole [batch, seqlen, vocab] logits (:1455, :1489-1491); with
model.use_fused_kernels=True the entropy is the fused kernel's output on either branch (:1362-1367, :1456-1471).
The engine takes both flags from the model config (workers/engine_workers.py:114-115, :353-357). The actor's
log-prob pass always asks for the entropy (trainer/ppo/v1/trainer_base.py:1653), so the full-vocabulary fp32 entropy
the flag was meant to chunk is materialised anyway.

Not VI890's: its reader table counts the key read wherever the FSDP engine runs (a read at :178, and
trainer/ppo/prefix_grouper_utils.py:179, which nothing in verl calls), and its scopes are file-level; which branch of
one function runs is this rule's. Megatron reads the flag on every path (workers/engine/megatron/transformer_impl.py:
1223-1229), so only fsdp / fsdp2 are checked; torchtitan / automodel have the same branch shape per PR#7582 but are not
checked here.
"""

from __future__ import annotations

from wizard.check.rules.context import A, M, REF, Ctx, Facts

ENGINE = "workers/engine/fsdp/transformer_impl.py"


def rule_entropy_chunking(c: Ctx, f: Facts) -> None:
    rmpad, fused = f"{M}.use_remove_padding", f"{M}.use_fused_kernels"
    if c.unknown(rmpad, fused):
        return
    if c.v(fused) is True:
        why, deciding = (f"model.use_fused_kernels=True: the entropy is the fused kernel's output on every path "
                         f"({ENGINE}:1362-1367, :1456-1471)"), fused
        hint = "remove it (the fused kernel does not materialise the logits), or turn model.use_fused_kernels off"
    elif c.v(rmpad) is False:
        why, deciding = (f"model.use_remove_padding=False: the padded branch calls verl_F.entropy_from_logits on the "
                         f"whole [batch, seqlen, vocab] logits ({ENGINE}:1455, :1489-1491); only the remove-padding "
                         f"branch uses the chunked function (:1397-1405)"), rmpad
        hint = f"set {rmpad}=True (packed sequences, the chunked entropy), or remove the flag"
    else:
        return
    for role, used in ((A, True), (REF, f.use_ref)):
        key = f"{role}.entropy_from_logits_with_chunking"
        if not used or not c.set_by_user(key) or c.v(key) is not True or c.v(f"{role}.strategy") not in ("fsdp", "fsdp2"):
            continue
        size = f"{role}.entropy_from_logits_chunk_size"
        keys = (key, *((size,) if c.set_by_user(size) else ()), deciding)
        c.add("VI778", "warning", keys,
              f"{key}=True has no effect with {why}: the full-vocabulary entropy it was set to chunk is computed "
              f"whole, so its memory is not saved (verl PR#7582)", hint)
