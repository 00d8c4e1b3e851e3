"""How verl 0.9.1's SFT trainers (verl.trainer.sft_trainer under torchrun, verl.trainer.sft_trainer_ray; config
trainer/config/sft_trainer_engine.yaml) lay the FSDP engine's Ulysses groups over the world and batch the validation
set (paths under site-packages/verl):

- VI812 (the PPO rule, extended to SFT): engine.ulysses_sequence_parallel_size of the FSDP engine. The engine
  raises ValueError for SP > 1 without model.use_remove_padding (workers/engine/fsdp/transformer_impl.py:148-152),
  builds a (world // SP, SP) device mesh (:246-250, :651-652; torch's init_device_mesh refuses a world SP does not
  divide) and hands SP to apply_monkey_patch (:324-330), which asserts num_attention_heads % SP == 0 and
  num_key_value_heads % SP == 0 or SP % num_key_value_heads == 0 (models/transformers/monkey_patch.py:343-350):
  every rank dies after loading the model (real case R27-06: Qwen2.5-7B, 28 heads, SP 8 on one 8-GPU node).
- VI907 (the PPO rule, extended to SFT): the same engine.ulysses_sequence_parallel_size on a Gated DeltaNet model
  (Qwen3.5, Qwen3-Next): the FSDP engine's apply_monkey_patch (transformer_impl.py:324-330; monkey_patch.py:270,
  500) splits those layers with flash-linear-attention's context-parallel kernels, and verl raises
  NotImplementedError inside the workers without them (models/transformers/qwen3_5.py:92-108, 168-172; real case
  R47-02, verl#6486: Qwen3.5 SFT with SP 8). verl's FSDP engine config takes the value without a word.
  The heads come from the model's config.json where it is local, else verl-init's catalogue
  (wizard.planner.shapes); the world is torchrun's (wizard.check.torchrun) for sft_trainer, trainer.nnodes ×
  n_gpus_per_node for sft_trainer_ray (wizard.check.hardware).
- VI788 (warning): a validation set that makes no batch. Both trainers build the val DataLoader with
  DistributedSampler(num_replicas=dp, drop_last=True) and batch_size = data.train_batch_size // dp, drop_last=True
  (trainer/sft_trainer.py:240-241, 255-267; sft_trainer_ray.py:182-215 with dp = 1), dp = world // SP for the FSDP
  engine (fsdp/transformer_impl.py:651-652). A rank with fewer val rows than that batch gets no batch, the mean of
  the empty loss list is NaN (sft_trainer.py:419-429, sft_trainer_ray.py:359-369) and val/loss is logged as nan at
  every validation (real case R27-02, verl#7464: a 50-row val split beside the default train_batch_size=256). Read
  only where every val file is local and countable (parquet footer, JSONL lines: an upper bound on the dataset's
  rows, data.val_max_samples caps it, sft_trainer.py:212-218) and verl's own dataset reads it (no data.custom_cls).
"""

from __future__ import annotations

from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts, divisors, join_or, local_path, nearest
from wizard.check.rules.layout import gdn_layers, gdn_ulysses
from wizard.check.shellargs import PLACEHOLDER

SP, STRATEGY, RMPAD = "engine.ulysses_sequence_parallel_size", "engine.strategy", "model.use_remove_padding"
VAL, TBS, VAL_MAX, CUSTOM = "data.val_files", "data.train_batch_size", "data.val_max_samples", "data.custom_cls.path"
FSDP = ("fsdp", "fsdp2")  # the engines that read engine.ulysses_sequence_parallel_size (fsdp/transformer_impl.py)
RAY_ENTRY = "verl.trainer.sft_trainer_ray"  # its dataloaders use dp = 1 (sft_trainer_ray.py:182)


def _module(c: Ctx) -> str | None:
    ex = getattr(c.src, "extraction", None)
    launch = getattr(ex, "launch", None)
    return getattr(launch, "module", None)


def sft_world(c: Ctx) -> int | None:
    """The ranks the SFT engine spans: torchrun's world (or --nnodes/--gpus-per-node, a bundle) for sft_trainer,
    whose process group comes from torchrun's WORLD_SIZE and never from trainer.* (utils/distributed.py); the
    config's trainer.nnodes × n_gpus_per_node for sft_trainer_ray (sft_trainer_ray.py sizes its Ray pool from them).
    None where unknown."""
    hw = c.hw
    if hw.per_node:
        return None
    if hw.source == "config" and _module(c) != RAY_ENTRY:
        return None  # sft_trainer without a torchrun we can read: trainer.* says nothing about its world
    if not isinstance(hw.nnodes, int) or not isinstance(hw.gpus_per_node, int):
        return None
    return hw.nnodes * hw.gpus_per_node


def sft_sp(c: Ctx) -> int | None:
    """The FSDP engine's Ulysses size; None for the other engines or an unresolved value."""
    if c.unknown(SP, STRATEGY) or c.v(STRATEGY) not in FSDP:
        return None
    return c.int(SP)


def rule_sft_sequence_parallel(c: Ctx, f: Facts, shape: Any) -> None:
    sp = sft_sp(c)
    if sp is None or sp <= 1:
        return
    world = sft_world(c)
    heads_ok = [d for d in divisors(shape.heads) if shape.kv_heads % d == 0 or d % shape.kv_heads == 0] \
        if shape is not None else None
    if world is not None and world % sp:
        fits = [d for d in divisors(world) if heads_ok is None or d in heads_ok]
        c.add("VI812", "error", (SP,),
              f"{SP}={sp} does not divide the {world} ranks of this SFT launch: verl's FSDP engine builds a "
              f"({world} // {sp}, {sp}) (dp, sp) device mesh over the world (workers/engine/fsdp/"
              "transformer_impl.py:246-250, 651-652), which torch refuses at start-up",
              f"nearest valid: {join_or(nearest(fits, sp))}" + ("" if heads_ok is None else
                                                                  f" (it divides {shape.name}'s heads too)"))
    if shape is not None and (shape.heads % sp or (shape.kv_heads % sp and sp % shape.kv_heads)):
        ok = list(heads_ok or [1])
        if world is not None:
            ok = [d for d in ok if world % d == 0] or ok
        c.add("VI812", "error", (SP, "model.path"),
              f"{SP}={sp}: Ulysses splits attention heads, and {shape.name} has {shape.heads} heads "
              f"({shape.kv_heads} KV heads), which {sp} ranks cannot share: verl's apply_monkey_patch asserts "
              "num_attention_heads % ulysses_sp_size == 0 and num_key_value_heads % ulysses_sp_size == 0 or the "
              "reverse (models/transformers/monkey_patch.py:343-350, called by workers/engine/fsdp/"
              "transformer_impl.py:324-330): every rank stops after loading the model",
              f"nearest valid: {join_or(nearest(ok, sp))}")
    if shape is not None and gdn_layers(shape):
        gdn_ulysses(c, SP, sp, shape)
    if not c.unknown(RMPAD) and c.v(RMPAD) is False:
        c.add("VI812", "error", (RMPAD, SP),
              f"{SP}={sp} with {RMPAD}=false: verl's FSDP engine raises ValueError('When using sequence parallelism "
              "... you must enable `use_remove_padding`') before building the model (workers/engine/fsdp/"
              "transformer_impl.py:148-152)", f"set {RMPAD}=true", fix=Fix(set={RMPAD: True}))


def _val_rows(c: Ctx, value: Any, enough: int) -> int | None:
    """Rows in the local val file(s), or None when any of them cannot be counted here."""
    from wizard.check.rules.files import _count_rows

    total = 0
    for path in ([value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else []):
        local = local_path(c, path) if isinstance(path, str) and PLACEHOLDER not in path else None
        rows = _count_rows(local, enough) if local is not None and local.is_file() else None
        if rows is None:
            return None
        total += rows
    return total if value else None


def val_batches(rows: int, batch: int, dp: int) -> int:
    """Batches each rank's val DataLoader yields: DistributedSampler(drop_last=True) gives every rank rows // dp
    rows, the DataLoader (drop_last=True) batches of train_batch_size // dp (sft_trainer.py:241, 255-267)."""
    per_dp = batch // dp
    return (rows // dp) // per_dp if per_dp > 0 else 0


def rule_sft_val_batches(c: Ctx, f: Facts) -> None:
    if c.unknown(VAL, TBS, CUSTOM) or not c.v(VAL) or c.v(CUSTOM):
        return
    batch = c.int(TBS)
    if not batch or batch < 1:
        return
    if _module(c) == RAY_ENTRY:
        dp, how = 1, "sft_trainer_ray builds its dataloaders with dp = 1 (sft_trainer_ray.py:182-215)"
    else:
        world = sft_world(c)
        sp = sft_sp(c)
        if world is None or sp is None or sp < 1 or world % sp:
            return  # an unknown world or a non-FSDP engine: its dp is not ours to state (VI812 names a bad SP)
        dp = world // sp
        how = f"dp = {world} ranks" + (f" // Ulysses {sp}" if sp > 1 else "") + \
            ", workers/engine/fsdp/transformer_impl.py:651-652"
    rows = _val_rows(c, c.v(VAL), batch + 1)
    if rows is None:
        return
    cap = c.int(VAL_MAX)
    if cap is not None and 0 < cap < rows:
        rows = cap
    if batch // dp < 1 or val_batches(rows, batch, dp) > 0:
        return  # a per-rank batch of 0 is the training loader's problem, not the val set's
    per_dp = batch // dp
    c.add("VI788", "warning", (VAL, TBS),
          f"{VAL} holds {rows} row(s)" + (f" ({VAL_MAX}={cap})" if cap is not None and 0 < cap == rows else "")
          + f" but verl's SFT trainer batches validation like training: {TBS}={batch} // dp={dp} = {per_dp} rows a "
          f"rank, with drop_last=True ({how}; trainer/sft_trainer.py:240-241, 255-267), so each rank gets "
          f"{rows // dp} row(s) and no batch: the val loss is the mean of an empty list and val/loss is nan at every "
          "validation (sft_trainer.py:419-429)",
          f"give the val set at least {per_dp * dp} rows"
          + (f", or lower {TBS} to at most {rows // dp * dp} (it is the training batch too)" if rows >= dp else ""))
