"""Trainer → rollout weight sync of verl 0.9.1: what the sender can carry and what it sends (paths under
site-packages/verl).

- VI651: checkpoint_engine.update_weights_bucket_megabytes (default 2048, workers/config/rollout.py:135) below the
  largest tensor the trainer sends, on a sync path that cannot split one tensor. The FSDP engines build the training
  actor in fsdp_config.model_dtype, fp32 by default (workers/engine/fsdp/transformer_impl.py:258-262), and send its
  state_dict tensors as they are (:1010-1030; the vLLM sender keeps their dtype on purpose,
  vllm_rollout/bucketed_weight_transfer.py:120-125); the Megatron engine exports bf16. The largest tensor is then
  embed_tokens / lm_head, vocab × hidden × that width (Qwen3-8B in fp32: 151936 × 4096 × 4 B = 2374 MiB). Paths that
  assert instead of splitting it (NO_SPLIT; tests/test_check_weightsync.py finds each statement in verl's source):
  * TensorRT-LLM rollout, text models (partial loading): `assert cur_available_bytes >= size_in_bytes`
    (trtllm_rollout/trtllm_rollout.py:512-521) at the first sync — error.
  * checkpoint_engine.backend=mooncake where that backend runs (fully-async, one-step-off, separate_async): the
    sender casts to the rollout dtype (bf16) and asserts "too large to fit in the bucket"
    (checkpoint_engine/mooncake_checkpoint_engine.py:181, 205-207) — error.
  * vLLM on Ascend NPUs in the colocated (naive) sync: without IPC (Ascend HDK < 25.3.rc1 or CANN < 8.3.RC1, not A5;
    plugin/platform/platform_npu.py:164-178) verl falls back to shared memory (vllm_rollout.py:143) and asserts
    "too large to fit in the bucket" (bucketed_weight_transfer.py:140-144); with IPC it sends the tensor on its own
    (:145-146) — warning (verl#5952, Qwen3-VL-8B). On CUDA vLLM, SGLang (sglang_rollout/utils.py: a tensor gets a
    bucket of its own) and the nccl / nixl / hccl engines (split_weight_chunks / merge_weight_chunks, checkpoint_engine/base.py:565-625)
    a large tensor passes.
- VI652 (error): LoRA served as adapters (FSDP model.lora_rank / Megatron model.lora.rank > 0, model.lora.merge False,
  verl's default) with a rollout synced through a checkpoint engine other than naive: fully_async_main and the
  one-step-off main (their YAMLs set backend nccl: fully_async_ppo_trainer.yaml:82-83,
  one_step_off_ppo_trainer.yaml:24-25) and trainer.v1 separate_async's standalone replicas. That branch of
  ActorRolloutRefWorker.update_weights calls get_per_tensor_param() with its defaults and drops the peft config
  (workers/engine_workers.py:757-766); base_sync_done=False makes the FSDP engine's collect_lora_params skip every
  `lora_` tensor and send the frozen base (utils/fsdp_utils.py:751-787), and the Megatron engine export the base
  without adapters (megatron/transformer_impl.py:1033-1055). Every sync re-sends the initial weights: the rollout
  samples from the starting policy for the whole run and nothing fails (verl#7495; fix PR #7496 not in 0.9.1).
  model.lora.merge=True sends merged weights on that path (fsdp/transformer_impl.py:996, 1013-1014).
"""

from __future__ import annotations

from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.context import A, M, R, Ctx, Facts
from wizard.check.rules.lora import _model
from wizard.check.rules.modes import v1_mode
from wizard.check.rules.npu import on_ascend
from wizard.verlspec import lora as verl_lora

BUCKET = f"{R}.checkpoint_engine.update_weights_bucket_megabytes"
BACKEND = f"{R}.checkpoint_engine.backend"
FSDP_LINEAGE = ("fsdp", "fsdp2", "fsdp_turbo")
WIDTH = {"fp32": 4, "float32": 4, "32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "16": 2}
# the statements that refuse a tensor over the bucket, by verl 0.9.1 file and line (held against verl's source by
# tests/test_check_weightsync.py)
NO_SPLIT = {
    "trtllm": ("workers/rollout/trtllm_rollout/trtllm_rollout.py", 519, "assert cur_available_bytes >= size_in_bytes"),
    "mooncake": ("checkpoint_engine/mooncake_checkpoint_engine.py", 205, "assert offset + weight.nbytes <= self.bucket_size"),
    "vllm_shm": ("workers/rollout/vllm_rollout/bucketed_weight_transfer.py", 141, "assert not self.use_shm"),
}


def _sync_backend_runs(c: Ctx) -> bool:
    """Whether the configured (non-naive) checkpoint engine carries the sync: not where verl swaps in naive (V1
    sync / colocate_async, trainer_base.py:380-383)."""
    return c.src.entry in ("fully_async", "one_step_off") or v1_mode(c) == "separate_async"


def _sent_width(c: Ctx) -> tuple[int, str] | None:
    """(bytes per element, why) of the tensors the training engine sends, None for engines not modelled."""
    strategy = c.v(f"{A}.strategy")
    if strategy in FSDP_LINEAGE:
        dtype = str(c.v(f"{A}.fsdp_config.model_dtype") or "fp32").lower()
        width = WIDTH.get(dtype)
        return (width, f"the FSDP actor's {dtype} weights ({A}.fsdp_config.model_dtype)") if width else None
    if strategy == "megatron":
        return 2, "the Megatron engine's bf16 export"
    return None


def rule_sync_bucket(c: Ctx, f: Facts, shape: Any) -> None:
    if shape is None or shape.source not in ("catalogue", "local") or not shape.vocab or not shape.hidden or \
            c.unknown(BUCKET, f"{R}.name", BACKEND, f"{A}.strategy", f"{A}.fsdp_config.model_dtype", f"{R}.load_format"):
        return
    bucket_mb = c.int(BUCKET)
    sent = _sent_width(c)
    if bucket_mb is None or bucket_mb <= 0 or sent is None:
        return
    name, backend = c.v(f"{R}.name"), c.v(BACKEND)
    width, why = sent
    path = None
    if name == "trtllm" and not shape.vision and c.v(f"{R}.quantization") is None:
        path, severity = "trtllm", "error"
        what = "the TensorRT-LLM rollout packs whole tensors into the bucket and asserts each fits"
    elif backend == "mooncake" and _sync_backend_runs(c):
        width, why = 2, "the mooncake sender's cast to the rollout's bf16 (mooncake_checkpoint_engine.py:181)"
        path, severity = "mooncake", "error"
        what = "the mooncake checkpoint engine packs whole tensors into the bucket and asserts each fits"
    elif name == "vllm" and on_ascend(c) and (backend == "naive" or v1_mode(c) in ("sync", "colocate_async")):
        path, severity = "vllm_shm", "warning"
        what = (f"on Ascend ({on_ascend(c)}) without IPC support (HDK < 25.3.rc1 or CANN < 8.3.RC1, "
                "plugin/platform/platform_npu.py:164-178) verl's vLLM sync falls back to shared memory "
                "(vllm_rollout.py:143), where a tensor over the bucket is refused instead of sent on its own")
    if path is None:
        return
    model = _model(c, M)
    if not f.megatron and verl_lora.fsdp_rank(model) > 0 and not verl_lora.merged(model) and \
            "dummy" not in str(c.v(f"{R}.load_format")):
        return  # FSDP adapters over a base the engine loaded itself: only lora_ tensors are sent (engine_workers.py:673)
    largest = shape.vocab * shape.hidden * width
    if largest <= bucket_mb << 20:
        return
    need = -(-largest // (1 << 20))
    at = "{}:{}".format(*NO_SPLIT[path][:2])
    c.add("VI651", severity, (BUCKET, f"{R}.name") if path != "mooncake" else (BUCKET, BACKEND),
          f"{BUCKET}={bucket_mb}{'' if c.set_by_user(BUCKET) else ' (verl default)'} is below {shape.name}'s "
          f"embed_tokens / lm_head, {shape.vocab} × {shape.hidden} × {width} B = {need} MiB ({why}): {what}, and "
          f"the first weight sync stops with an AssertionError ({at}; verl#5952)",
          f"set {BUCKET}={-(-need // 1024) * 1024} (at least {need})",
          fix=Fix(set={BUCKET: -(-need // 1024) * 1024}))


def rule_lora_disaggregated_sync(c: Ctx, f: Facts) -> None:
    if not _sync_backend_runs(c) or c.unknown(BACKEND, f"{M}.lora_rank", f"{M}.lora.rank", f"{M}.lora.merge"):
        return
    backend = c.v(BACKEND)
    if not isinstance(backend, str) or backend in ("naive", "delta_sharded"):
        return  # naive: VI993 for separate_async; delta_sharded drives the engine itself (VI882 for Megatron LoRA)
    model = _model(c, M)
    rank = verl_lora.engine_rank(model, megatron=f.megatron)
    if rank <= 0 or verl_lora.merged(model):
        return
    where = {"fully_async": "fully_async_main", "one_step_off": "the one-step-off main"}.get(
        c.src.entry, "trainer.v1.trainer_mode=separate_async's standalone rollout")
    reads = ("collect_lora_params(base_sync_done=False) skips every lora_ tensor and sends the frozen base "
             "(utils/fsdp_utils.py:751-787)" if not f.megatron else
             "the Megatron engine exports the base without its adapters (megatron/transformer_impl.py:1033-1055)")
    key = f"{M}.lora.rank" if f.megatron else f"{M}.lora_rank"
    c.add("VI652", "error", (key, f"{M}.lora.merge", BACKEND),
          f"LoRA adapters ({key}={rank}, {M}.lora.merge=False) with {where} syncing through "
          f"{BACKEND}={backend}: that sync calls get_per_tensor_param() with its defaults and drops the adapter "
          f"config (workers/engine_workers.py:757-766), so {reads}. Every sync re-sends the initial weights and the "
          "rollout samples from the starting policy for the whole run; nothing fails (verl#7495)",
          f"set {M}.lora.merge=True: the engine then sends base + adapters merged on this path",
          fix=Fix(set={f"{M}.lora.merge": True}))
