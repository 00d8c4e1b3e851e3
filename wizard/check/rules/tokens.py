"""Sequence-length rules: dynamic token budgets (VI830, VI834), context parallel under a token budget (VI904), the
rollout engine's limits (VI831, VI833, VI906) and the model's context (VI833); vision-language settings (VI836) and
a vision tower's patch embedding on the torch installed here (VI837).
"""

from __future__ import annotations

from typing import Any

from wizard.check.rules.context import REF, A, M, R, Ctx, Facts
from wizard.planner import patch_embed
from wizard.verlspec import arithmetic as rc


def rule_tokens(c: Ctx, f: Facts) -> None:
    if f.seq is None or c.unknown("data.max_prompt_length", "data.max_response_length"):
        return
    seq = f.seq
    actor_sp, ref_sp, critic_sp = f.token_sp
    checks = [("actor", f.dynamic, f"{A}.ppo_max_token_len_per_gpu", actor_sp),
              ("rollout log-prob", bool(c.v(f"{R}.log_prob_use_dynamic_bsz")), f"{R}.log_prob_max_token_len_per_gpu", actor_sp),
              ("reference", f.use_ref and bool(c.v(f"{REF}.log_prob_use_dynamic_bsz")), f"{REF}.log_prob_max_token_len_per_gpu", ref_sp),
              ("critic", f.use_critic and bool(c.v("critic.use_dynamic_bsz")), "critic.ppo_max_token_len_per_gpu", critic_sp)]
    if f.use_critic and bool(c.v("critic.use_dynamic_bsz")):
        checks.append(("critic forward", True, "critic.forward_max_token_len_per_gpu", critic_sp))
    for role, dyn, key, sp in checks:
        if not dyn or c.unknown(key):
            continue
        budget = c.int(key)
        if budget is None:
            c.add("VI830", "error", (key,), f"dynamic batching needs {key} (engine/utils.py:109)",
                  f"set {key} ≥ {rc.min_token_budget(seq, sp)} (2-3 × prompt + response is usual)")
            continue
        if budget < rc.min_token_budget(seq, sp):
            c.add("VI830", "error", (key, "data.max_prompt_length", "data.max_response_length"),
                  f"{role} token budget {key}={budget}" + (f" × SP {sp}" if sp > 1 else "") +
                  f" cannot hold one sequence of prompt + response = {seq} tokens (seqlen_balancing.py:384, inside the workers)",
                  f"set {key} ≥ {rc.min_token_budget(seq, sp)}; 2-3 × that is usual")
        elif budget * sp < 2 * seq:
            c.add("VI834", "info", (key,), f"{role} token budget {budget * sp} holds only one full sequence of {seq} tokens "
                  "per micro-batch", f"verl's perf guide suggests ≥ 2 × (prompt + response) = {2 * seq}")
    # rollout engine limits
    name = c.v(f"{R}.name")
    mnbt = c.int(f"{R}.max_num_batched_tokens")
    if name == "vllm" and mnbt and c.v(f"{R}.enable_chunked_prefill") is False and mnbt < seq:
        c.add("VI831", "warning", (f"{R}.max_num_batched_tokens", f"{R}.enable_chunked_prefill"),
              f"max_num_batched_tokens={mnbt} is below prompt + response = {seq} with chunked prefill off: verl raises it "
              "to max_model_len with a warning, so this value has no effect", f"set it ≥ {max(8192, seq)}, or enable chunked prefill")
    mml = c.int(f"{R}.max_model_len")
    if name == "vllm" and mnbt and mml and c.v(f"{R}.enable_chunked_prefill") is True and mnbt < mml:
        # verl passes the three to vLLM as they are (vllm_async_server.py:332-335); its own rollout config asks
        # "When activated, Please increase max_num_batched_tokens or decrease max_model_len" (rollout.yaml:86), and
        # with chunked prefill off it raises max_num_batched_tokens to max_model_len itself (vllm_async_server.py:1113-1119)
        c.add("VI906", "warning", (f"{R}.max_num_batched_tokens", f"{R}.max_model_len", f"{R}.enable_chunked_prefill"),
              f"rollout.max_model_len={mml} is above max_num_batched_tokens={mnbt}: vLLM admits a sequence longer than one "
              f"scheduler step only through chunked prefill (a prompt over {mnbt} tokens is prefilled over several steps); "
              "verl's rollout config asks to raise max_num_batched_tokens or lower max_model_len when chunked prefill is "
              "on (trainer/config/rollout/rollout.yaml:86), and turning it off makes verl raise max_num_batched_tokens to "
              f"{mml} (vllm_async_server.py:1113)", f"set {R}.max_num_batched_tokens ≥ {mml}, or max_model_len ≤ {mnbt}")
    if mml and mml < seq:
        c.add("VI833", "warning", (f"{R}.max_model_len", "data.max_prompt_length", "data.max_response_length"),
              f"rollout.max_model_len={mml} is below prompt + response = {seq}: long responses are cut short",
              f"set it ≥ {seq}, or null to use the model's context")


def rule_context_parallel_budget(c: Ctx, f: Facts) -> None:
    """Megatron context parallel under dynamic batching. verl packs `*_max_token_len_per_gpu × sp_size` tokens into a
    micro-batch (workers/engine/utils.py:104-111) with sp_size = context_parallel_size (megatron/transformer_impl.py:836)
    and Megatron then gives each CP rank 1/CP of them (models/mcore/util.py:107): a GPU holds the budget's tokens with or
    without CP. When that budget already holds a whole sequence, CP splits nothing that needed splitting: it does not
    lower the tokens (the activation memory) per GPU, it only multiplies the micro-batch by CP and adds the CP traffic."""
    if not f.megatron or not f.dynamic or f.seq is None or bool(c.v(f"{A}.megatron.dynamic_context_parallel")):
        return
    cp_key, key = f"{A}.megatron.context_parallel_size", f"{A}.ppo_max_token_len_per_gpu"
    if c.unknown(cp_key, key, "data.max_prompt_length", "data.max_response_length"):
        return
    cp, budget = c.int(cp_key) or 1, c.int(key)
    if cp <= 1 or budget is None or budget < f.seq:
        return
    c.add("VI904", "warning", (key, cp_key),
          f"actor Megatron context_parallel_size={cp} with dynamic batching: verl packs {key.rsplit('.', 1)[-1]} × CP = "
          f"{budget * cp} tokens into each micro-batch before splitting them over the {cp} CP ranks "
          "(workers/engine/utils.py:111, sp_size = context_parallel_size at megatron/transformer_impl.py:836), so each "
          f"GPU still holds {budget} tokens, as without CP; and {budget} already holds a whole sequence of prompt + "
          f"response = {f.seq} tokens, so CP does not lower the memory per GPU",
          f"to lower memory per GPU lower {key} (≥ {rc.min_token_budget(f.seq, cp)} holds one sequence with CP {cp}); "
          f"or set {cp_key}=1 and let the GPUs do data parallel")


def rule_context(c: Ctx, f: Facts, shape: Any) -> None:
    # a shape scaled from the size in the model's name carries a placeholder context, not the model's: no verdict
    if shape is None or not shape.max_pos or f.seq is None or shape.source not in ("catalogue", "local"):
        return
    # a longer context through override_config (YaRN's rope_scaling, max_position_embeddings: verl's docs/advance/
    # rope.rst): verl's training engines see it (HFModelConfig applies it, workers/config/model.py:215-219), its
    # vLLM server does not (it sends only quantization hf_overrides, vllm_async_server.py:305-346) and reads the
    # model's config.json, where its own check also looks (:1101-1111 through HFModelConfig; vLLM's derived length)
    scaled = [k for k in ("rope_scaling", "rope_parameters", "max_position_embeddings")
              if any(key == f"{M}.override_config.{k}" or key.startswith(f"{M}.override_config.{k}.")
                     for key in c.res.flat)]
    rope = (f"; {M}.override_config sets {', '.join(scaled)}, which verl's training engines apply "
            "(workers/config/model.py:215-219) but its vLLM server never receives (only quantization overrides, "
            "vllm_async_server.py:305-346): the rollout reads the model's config.json" if scaled else "")
    if f.seq > shape.max_pos:
        c.add("VI833", "error", ("data.max_prompt_length", "data.max_response_length"),
              f"prompt + response = {f.seq} tokens exceeds {shape.name}'s context of {shape.max_pos}{rope}",
              (f"put {' and '.join(scaled)} in the model's own config.json (a copy of the model folder), so the "
               "rollout and training use the same context; or " if scaled else "")
              + f"keep max_prompt_length + max_response_length ≤ {shape.max_pos}")
    mml = c.int(f"{R}.max_model_len")
    if mml and mml > shape.max_pos:
        c.add("VI833", "error", (f"{R}.max_model_len",), f"rollout.max_model_len={mml} is above {shape.name}'s "
              f"max_position_embeddings={shape.max_pos} (vllm_async_server.py:1101 raises)", f"set it ≤ {shape.max_pos} or null")


def rule_vision(c: Ctx, f: Facts, shape: Any) -> None:
    """actor.freeze_vision_tower: verl 0.9.1 declares it (workers/config/actor.py:161) and no worker reads it."""
    if c.v(f"{A}.freeze_vision_tower") is True:
        what = f"{shape.name}'s vision tower" if shape is not None and getattr(shape, "vision", "") else "the vision tower"
        c.add("VI836", "warning", (f"{A}.freeze_vision_tower",),
              f"freeze_vision_tower=True has no effect in verl 0.9.1 (no worker reads it): {what} is trained, and its "
              "gradients and optimizer states take memory", "plan memory for a trained vision tower, or remove the key")


# the image VI837 prices when the training data cannot be read here: 512 × 512 pixels
REFERENCE_SIDE = 512
IMAGE_ROWS = 200  # rows of a local training file whose images VI837 reads (their headers only)


def _images(c: Ctx, shape: Any) -> tuple[float, float, str]:
    """(patches per image, images per sequence, what they come from): the local training file's images, their
    patches as the model's image processor makes them; else one 512 × 512 image a sequence."""
    from wizard.check.rules.context import local_path, model_folder
    from wizard.check.rules.datacontent import file_rows

    model = c.v(f"{M}.path")
    folder = model_folder(c, model) if isinstance(model, str) and not c.unknown(f"{M}.path") else None
    bounds = patch_embed.pixel_bounds(shape, folder)
    key = c.v("data.image_key") if isinstance(c.v("data.image_key"), str) else "images"
    files = c.v("data.train_files")
    for path in ([files] if isinstance(files, str) else files if isinstance(files, list) else []):
        local = local_path(c, path) if isinstance(path, str) and not c.unknown("data.train_files") else None
        if local is None or not (local.is_file() and local.suffix in (".parquet", ".jsonl")):
            continue
        try:
            found = patch_embed.data_images(file_rows(local), key, IMAGE_ROWS)
        except Exception:  # noqa: BLE001 - a file that cannot be read: the data rules report it
            continue
        if found.sizes:
            patches = sum(patch_embed.image_patches(shape, w, h, bounds) for w, h in found.sizes) / len(found.sizes)
            return patches, found.per_row, (f"the {len(found.sizes)} images of {found.rows} rows of {path} "
                                            f"({patches:.0f} patches each on average)")
    patches = patch_embed.image_patches(shape, REFERENCE_SIDE, REFERENCE_SIDE, bounds)
    return float(patches), 1.0, f"one {REFERENCE_SIDE} × {REFERENCE_SIDE} image a sequence ({patches} patches)"


def rule_patch_embed(c: Ctx, f: Facts, shape: Any) -> None:
    """VI837: a vision tower whose patch embedding is a stride-equals-kernel Conv3d, trained with the torch installed
    here when that torch runs it through aten's slow loop (wizard.planner.patch_embed), priced on the training
    data's own images when the file is here."""
    if shape is None or not patch_embed.has_conv3d_patch_embed(shape):
        return
    from wizard.env.doctor import package_versions

    why = patch_embed.slow_conv3d(patch_embed.installed(package_versions(("torch", *patch_embed.CUDNN_DISTS))))
    if why is None:
        return
    patches, per_seq, basis = _images(c, shape)
    per_image = patch_embed.seconds_per_image(shape, patches)
    passes = ["update"] + (["reference log-prob"] if f.use_ref else []) + (
        ["old log-prob"] if c.v("algorithm.rollout_correction.bypass_mode") is not True else [])
    c.vision_fallback_s = per_seq * per_image  # the step time (VI895) adds it to each pass (wizard.check.rules.time)
    step = ""
    if f.tbs and f.n and f.dp:
        seqs = f.tbs * f.n / f.dp
        step = (f"; {seqs:g} sequences on each of {f.dp} data-parallel ranks add {seqs * per_seq * per_image:.0f} s "
                f"to each of the {len(passes)} passes ({', '.join(passes)}), as the predicted step time (VI895) "
                "counts them")
    c.add("VI837", "warning", (f"{M}.path",),
          f"{why}: {shape.name}'s vision tower embeds patches with a Conv3d, which that loop runs as "
          f"{shape.vision_hidden} single-channel fills per patch: about {per_image:.2f} s per image in every "
          f"training pass, for {basis} (recent vLLM and SGLang releases embed patches as a linear layer: the "
          f"rollout is not slowed){step}",
          patch_embed.FIX)
