"""The step-time reports of tests/data/reference/step-times.json as wizard.planner.steptime Workloads, and the
comparison of each prediction with what the report measured (tests/test_steptime_calibration.py,
benchmarks/step_times.py).

The inputs come from each report only: its hardware, configuration and, for the mean response length, the first
of: the measured `response_length/mean`; the mean sequence implied by its measured throughput or MFU (less the
default prompt share); the same recipe's sibling report in the same source table; else the model's default (a
share of max_response_length, what `check` assumes when not told). Nothing is fitted per report.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Any, Optional

from wizard.planner.reasoning import thinks_by_default
from wizard.planner.shapes import from_moe_params, resolve_shape
from wizard.planner import steptime as st
from wizard.planner.steptime_config import fully_async_cycle_prompts as cycle_prompts
from wizard.planner.steptime_lora import lora_fields
from wizard.verlspec import lora as verl_lora
from wizard.verlspec.keys import load_snapshot

DATA = Path(__file__).resolve().parent / "data" / "reference" / "step-times.json"
TOLERANCE = 0.30

# measured verl metric → predicted phase
PHASE_METRIC = {"rollout": "timing_s/gen", "weight sync": "timing_s/update_weights",
                "old log-prob": "timing_s/old_log_prob", "ref log-prob": "timing_s/ref", "values": "timing_s/values",
                "update actor": "timing_s/update_actor", "update critic": "timing_s/update_critic"}


def cases() -> list[dict[str, Any]]:
    return json.loads(DATA.read_text(encoding="utf-8"))["cases"]


# a report's setting left unknown (null) is verl's default (verl 0.9.1 ppo_trainer.yaml, from verl-init's snapshot)
VERL_KEY = {"train_batch_size": "data.train_batch_size", "rollout_n": "actor_rollout_ref.rollout.n",
            "max_prompt_length": "data.max_prompt_length", "max_response_length": "data.max_response_length",
            "ppo_mini_batch_size": "actor_rollout_ref.actor.ppo_mini_batch_size",
            "ppo_max_token_len_per_gpu": "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
            "gpu_memory_utilization": "actor_rollout_ref.rollout.gpu_memory_utilization",
            "rollout_tp": "actor_rollout_ref.rollout.tensor_model_parallel_size"}


def setting(c: dict[str, Any], name: str) -> Any:
    """The report's value of a config field (rollout_tp: a top-level field), else verl's default for it."""
    value = c.get(name) if name == "rollout_tp" else (c.get("config") or {}).get(name)
    if value is not None:
        return value
    node: Any = load_snapshot()["engines"]["dp"]
    for part in VERL_KEY[name].split("."):
        node = node[part]
    return node


def shape_of(c: dict[str, Any]):
    """The report's model: verl-init's catalogue or the size in its name; a MoE the catalogue does not know with the
    report's active parameters (model_active_params_b) when it gives them."""
    name = c["model"].split(" ")[0]
    shape = resolve_shape(name, c.get("model_params_b"))
    active = c.get("model_active_params_b")
    if shape is not None and active and shape.source in ("answer", "name") and active < 0.8 * shape.params_b:
        shape = from_moe_params(shape.params_b, float(active), shape.source, name)
    return shape


def _seq_from_report(c: dict[str, Any]) -> Optional[float]:
    """The mean tokens per trained sequence the report implies: its derived block's, else computed from its raw
    metrics as that block is (the `fields` note of step-times.json): verl's perf/total_num_tokens, or
    perf/throughput × step × GPUs (verl's throughput is tokens ÷ (step time × GPUs)), ÷ the sequences trained; else
    the mean at which verl's FLOP counter gives the reported MFU (_seq_from_mfu). The derived block's own MFU
    estimate (6 × active parameters, no attention) is not used."""
    d = c.get("derived") or {}
    if d.get("mean_tokens_per_sequence"):
        return d["mean_tokens_per_sequence"]
    m, hw = c.get("measured") or {}, c.get("hardware") or {}
    cfg = c.get("config") or {}
    seqs = d.get("responses_trained_per_step") or (cfg.get("train_batch_size") or 0) * (cfg.get("rollout_n") or 0)
    gpus = hw.get("n_gpus_total") or (hw.get("nnodes") or 1) * (hw.get("n_gpus_per_node") or 0)
    if not seqs:
        return None
    if m.get("perf/total_num_tokens"):
        return float(m["perf/total_num_tokens"]) / seqs
    if m.get("perf/throughput") and m.get("timing_s/step") and gpus:
        return float(m["perf/throughput"]) * float(m["timing_s/step"]) * gpus / seqs
    return _seq_from_mfu(c, seqs, gpus)


# verl's FLOP counter counted attention as 12 × Σ seqlen² × head_dim × heads × layers (forward and backward, the
# full square) until verl PR #4959 (commit 54582f1f0, 2026-01-18, first in v0.7.1) halved it to the causal 6
# (utils/flops_counter.py _estimate_qwen2_flops: v0.5.0 line 131, v0.9.0 line 116)
CAUSAL_MFU_FROM = "2026-01-18"


def _seq_from_mfu(c: dict[str, Any], seqs: int, gpus: int) -> Optional[float]:
    """The mean sequence at which verl's own FLOP counter gives the reported perf/mfu/actor over the update's
    seconds: MFU × the GPU's promised peak × seconds × GPUs = Σ over the step's sequences of 6 × N × L + k × L² ×
    head_dim × heads × layers (N: verl's count, the active layer weights and the embedding and LM head, both; k: 12
    or 6 by date), the lengths L following the model's law (steptime.sequence_moments: the default prompt share, the
    response exponential clipped at max_response_length). None without an MFU, a shape, a known GPU, or where no
    length up to the cap reaches it."""
    m, hw, cfg = c.get("measured") or {}, c.get("hardware") or {}, c.get("config") or {}
    shape = shape_of(c)
    if not (m.get("perf/mfu/actor") and m.get("timing_s/update_actor") and gpus and hw.get("gpu") and shape):
        return None
    _, pk, assumed = st.peak(str(hw["gpu"]))
    if assumed:
        return None
    flops = float(m["perf/mfu/actor"]) * pk.bf16_tflops * 1e12 * float(m["timing_s/update_actor"]) * gpus
    date = str(c.get("date") or "")
    release = re.search(r"0\.(\d+)(?:\.(\d+))?", str(c.get("verl_version", "")))
    # first released in v0.7.1; a report with neither date nor version is taken as today's verl
    causal = (date >= CAUSAL_MFU_FROM if date else
              not release or (int(release.group(1)), int(release.group(2) or 0)) >= (7, 1))
    k = 6 if causal else 12
    prompt = st.DEFAULT_PROMPT_SHARE * setting(c, "max_prompt_length")
    cap = float(setting(c, "max_response_length"))
    if verl_counted_flops(shape, seqs, prompt, cap, cap, k) < flops:
        return None
    lo, hi = 0.0, cap
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if verl_counted_flops(shape, seqs, prompt, mid, cap, k) < flops else (lo, mid)
    return prompt + (lo + hi) / 2


def verl_counted_flops(shape, seqs: float, prompt: float, resp: float, cap: float, attention: int = 6) -> float:
    """What verl's FLOP counter counts for a training pass over `seqs` sequences of the model's length law (prompt
    + response exponential clipped at `cap`, mean `resp`): 6 × N × Σ L + attention × Σ L² × head_dim × heads ×
    layers, N the active layer weights with the embedding and the LM head both counted (_estimate_qwen2_flops and
    _estimate_qwen2_moe_flops: emd_and_lm_head_N = vocab × hidden × 2), a vision tower's only over images (not
    counted here). A hybrid (_estimate_qwen3_5_flops, verl PR #6389): the L² term over its full-attention layers
    only, and 15 × key dim × value dim × value heads per token and GDN layer for the recurrence."""
    n_verl = shape.active_params - shape.vision_params() - shape.embed_params() + 2 * shape.vocab * shape.hidden
    mean, square = st.sequence_moments(prompt, resp, cap)
    recurrence = 15 * shape.linear_k_dim * shape.linear_v_dim * shape.linear_v_heads * shape.linear_layers
    return seqs * ((6 * n_verl + recurrence) * mean + attention * shape.head_dim * shape.heads * shape.attn_layers * square)


def response_mean(c: dict[str, Any], all_cases: list[dict[str, Any]]) -> tuple[Optional[float], str]:
    m = c.get("measured") or {}
    if m.get("response_length/mean"):
        return float(m["response_length/mean"]), "measured response_length/mean"
    prompt = st.DEFAULT_PROMPT_SHARE * setting(c, "max_prompt_length")  # the same default predict() assumes
    seq = _seq_from_report(c)
    if seq:
        return max(seq - prompt, 1.0), "mean sequence from the report's throughput/MFU, less the default prompt share"
    for o in all_cases:  # the same recipe in the same source table
        if o is not c and o.get("source_group") == c.get("source_group") and _seq_from_report(o) \
                and setting(o, "max_response_length") == setting(c, "max_response_length") \
                and o.get("task") == c.get("task"):
            return max(_seq_from_report(o) - prompt, 1.0), f"sibling report {o.get('id')} (same recipe and table)"
    return None, "default (not reported)"


def _override(c: dict[str, Any], key: str) -> Optional[str]:
    for o in c.get("overrides") or []:
        if o.split("=", 1)[0].lstrip("+") == key:
            return o.split("=", 1)[1]
    return None


# verl's rollout.enforce_eager default turned False with verl PR #2956 (commit ff6978c14, 2025-08-08, first
# released in v0.6.0); True before it (ppo_trainer.yaml of v0.3.0 to v0.4.1, rollout/rollout.yaml:35 of v0.5.0)
EAGER_UNTIL = "2025-08-08"
# verl before v0.4.0 (released 2025-06-06) pins vllm<=0.8.2 (setup.py of v0.3.0.post1; its requirements name
# 0.6.3): vLLM's V0 engine; from v0.4.0 vllm 0.8.4-0.8.5, whose default engine is V1
V1_FROM = "2025-06-06"
# verl's images and CI moved to transformers 5 (5.3.0) with verl PR #5724 (2026-04-03); before, transformers 4.x,
# whose MoE models run their experts one by one in training (steptime.EXPERT_LOOP_S); verl 0.9 requires >=5.5.3
TRANSFORMERS5_FROM = "2026-04-03"


# verl's rollout.calculate_log_probs default turned True with verl PR #6616 (commit 614ffc04c, 2026-06-05; v0.9.0
# rollout/rollout.yaml:233); False before it (rollout.yaml:197 of v0.6.0)
LOGPROBS_FROM = "2026-06-05"
SCRIPTS = Path(__file__).resolve().parent / "data" / "reference" / "verl-async-scripts"


def _script_sets(c: dict[str, Any], key: str) -> Optional[str]:
    """The value a report's config_source launch script gives `key`, when that script is one of verl's copied under
    tests/data/reference/verl-async-scripts (named by its path from the policy folder on), read as `check` reads a
    script (wizard.check.shellargs: its variables expanded, nothing run)."""
    found = re.search(r"((?:fully_async|one_step_off)_policy/shell/[\w.-]+\.sh)", str(c.get("config_source") or ""))
    path = SCRIPTS / found.group(1) if found else None
    if path is None or not path.is_file():
        return None
    values = [o.split("=", 1)[1] for o in _script_overrides(path) if o.split("=", 1)[0].lstrip("+") == key]
    return values[-1] if values else None


@functools.lru_cache(maxsize=None)
def _script_overrides(path: Path) -> tuple[str, ...]:
    from wizard.check.shellargs import extract_file

    return tuple(extract_file(path).overrides)


def _stated(c: dict[str, Any], key: str) -> Optional[str]:
    """A key's value as the report's overrides or its copied launch script set it, quotes stripped (None for one the
    script leaves to its environment)."""
    stated = _override(c, key) or _script_sets(c, key)
    return stated.strip("'\"") if stated and "$" not in stated and "UNSET_" not in stated else None


# verl's fully async trainer's defaults (experimental/fully_async_policy/config/fully_async_ppo_trainer.yaml:16-23
# at verl main 1dda039b): trigger_parameter_sync_step 4, require_batches 1, partial_rollout True
FULLY_ASYNC_DEFAULTS = {"require_batches": 1, "trigger_parameter_sync_step": 4, "partial_rollout": True}


def fully_async(c: dict[str, Any]) -> Optional[dict[str, Any]]:
    """A fully async report's async_training settings (its config's, else its overrides' or script's, else verl's
    defaults; "stated": whether any was given); None for any other report: one whose rollout has no GPUs of its own, or a one-step-off run (its
    mode names one-step-off and nothing sets async_training)."""
    if not rollout_gpus(c):
        return None
    cfg = c.get("config") or {}
    stated = {k: cfg.get(k) if cfg.get(k) is not None else _stated(c, f"async_training.{k}")
              for k in FULLY_ASYNC_DEFAULTS}
    mode = str(c.get("rollout_mode") or "").lower()
    if not re.search(r"fully[ _-]?async", mode) and all(v is None for v in stated.values()):
        return None
    out = {k: FULLY_ASYNC_DEFAULTS[k] if v is None else v for k, v in stated.items()}
    out["stated"] = any(v is not None for v in stated.values())
    out["require_batches"], out["trigger_parameter_sync_step"] = (int(out["require_batches"]),
                                                                  int(out["trigger_parameter_sync_step"]))
    out["partial_rollout"] = str(out["partial_rollout"]).lower() != "false"
    return out


def rollout_logprobs(c: dict[str, Any]) -> bool:
    """rollout.calculate_log_probs as the report's overrides or its copied launch script set it, else its verl's
    default: True from LOGPROBS_FROM (undated: verl 0.9), False before."""
    stated = _stated(c, "actor_rollout_ref.rollout.calculate_log_probs")
    if stated:
        return stated.lower() == "true"
    dated = str(c.get("date") or "")
    return dated >= LOGPROBS_FROM if dated else _verl_minor(c) >= 9


def driver_entropy(c: dict[str, Any]) -> bool:
    """verl's driver aggregates the old log-prob pass's entropy inside its timer from verl 0.4 on (ray_trainer.py
    :1064-1067 of v0.4.0, absent in v0.3.0): a run dated from V1_FROM (v0.4.0's release), undated a verl 0.4+."""
    dated = str(c.get("date") or "")
    return dated >= V1_FROM if dated else _verl_minor(c) >= 4


def _verl_minor(c: dict[str, Any]) -> int:
    """The report's verl minor version (0.X), 9 when it states none."""
    found = re.search(r"0\.(\d+)", str(c.get("verl_version", "")))
    return int(found.group(1)) if found else 9


def expert_loop(c: dict[str, Any], megatron: bool, experts: int) -> bool:
    """An FSDP MoE run on transformers 4 (its experts one by one, steptime.EXPERT_LOOP_S): dated before
    TRANSFORMERS5_FROM; undated, a verl before 0.9 (0.9 requires transformers>=5.5.3, setup.py)."""
    if megatron or not experts:
        return False
    dated = str(c.get("date") or "")
    return dated < TRANSFORMERS5_FROM if dated else _verl_minor(c) < 9


def rollout_engine(c: dict[str, Any]) -> dict[str, Any]:
    """max_num_seqs, enforce_eager and vLLM's engine as the report's overrides or launch script set them, else its verl
    version's default: max_num_seqs 1024 before verl 0.9 (ppo_trainer.yaml of verl 0.3, volcengine/verl@008db456;
    the docs' config.rst listed 1024 until verl PR #7646, 2026-09), 256 in 0.9 (rollout.yaml:84); enforce_eager
    True for a run dated before EAGER_UNTIL (undated: verl up to 0.5), else False (T08 and T15 set True); vLLM's
    V0 engine before V1_FROM (undated: verl up to 0.3)."""
    seqs = _stated(c, "actor_rollout_ref.rollout.max_num_seqs")
    eager = _stated(c, "actor_rollout_ref.rollout.enforce_eager")
    minor, dated = _verl_minor(c), str(c.get("date") or "")
    default_eager = dated < EAGER_UNTIL if dated else minor <= 5
    return {"max_num_seqs": int(seqs) if seqs else (1024 if minor < 9 else 256),
            "enforce_eager": str(eager).lower() == "true" if eager else default_eager,
            "vllm_v0": dated < V1_FROM if dated else minor <= 3,
            "gpus_per_node": (c.get("hardware") or {}).get("n_gpus_per_node") or 8}


def rollout_gpus(c: dict[str, Any]) -> int:
    """GPUs of the rollout's own in a one-step-off or fully async report (0: colocated): a `rollout_gpus` field, else
    "N rollout GPUs" / "generation: N GPUs" in its rollout mode, layout or notes, when the mode is not colocated."""
    hw, cfg = c.get("hardware") or {}, c.get("config") or {}
    given = c.get("rollout_gpus") or hw.get("rollout_gpus") or cfg.get("rollout_gpus")
    if given:
        return int(given)
    mode = str(c.get("rollout_mode") or "").lower()
    if "coloc" in mode or not re.search(r"async|one[- ]step|overlap|separate|disaggregat", mode):
        return 0
    text = " ".join(str(c.get(k) or "") for k in ("rollout_mode", "train_parallel", "notes")).lower()
    found = re.search(r"(\d+)\s*(?:rollout|generation|inference)\s*gpus?|(?:rollout|generation|inference)\s*[:=(]?\s*"
                      r"(\d+)\s*gpus?", text)
    if found:
        return int(found.group(1) or found.group(2))
    # verl's async docs write the split rollout:trainer ("fully_async_policy 16:16", "96:32"; fully_async.md)
    found = re.search(r"(?<![\d.:])(\d+)\s*:\s*(\d+)(?![\d.:])", text)
    return int(found.group(1)) if found else 0


def workload(c: dict[str, Any], all_cases: list[dict[str, Any]]) -> st.Workload:
    cfg, hw = c.get("config") or {}, c.get("hardware") or {}
    shape = shape_of(c)
    assert shape is not None, c["id"]
    n_gpus = hw.get("n_gpus_total") or (hw.get("nnodes") or 1) * (hw.get("n_gpus_per_node") or 8)
    own = rollout_gpus(c)
    own = own if 0 < own < n_gpus else 0  # the training keeps the rest
    n_gpus -= own
    megatron = str(c.get("backend") or "").startswith("megatron")
    tp = setting(c, "rollout_tp")
    resp, _ = response_mean(c, all_cases)
    ep = etp = cp = 1
    if megatron:
        mp = (cfg.get("megatron_tp") or 1) * (cfg.get("megatron_cp") or 1)
        cp, ep = cfg.get("megatron_cp") or 1, cfg.get("megatron_ep") or 1
        etp = _expert_tp(c, n_gpus)
        rec = cfg.get("recompute")
        # Megatron recomputes only with override_transformer_config.recompute_* (its gradient_checkpointing flag is
        # FSDP's enable_gradient_checkpointing, which the Megatron engine does not read)
        recompute = rec is not None and rec != "none"
    else:
        mp = cfg.get("ulysses_sp") or 1
        recompute = cfg.get("gradient_checkpointing") is not False
    dyn = bool(cfg.get("use_dynamic_bsz"))
    tbs = setting(c, "train_batch_size")
    streamed = fully_async(c)
    # a logged step: trigger_parameter_sync_step local steps of require_batches mini-batches each; a report that states
    # none of them but its prompts per step (train_batch_size) is taken at its word
    if streamed and (streamed["stated"] or not cfg.get("train_batch_size")):
        tbs = cycle_prompts(lambda key: streamed.get(key.rsplit(".", 1)[-1]) if key.startswith("async_training.")
                            else setting(c, "ppo_mini_batch_size"))
    return st.Workload(
        **st.shape_fields(shape, tp), n_gpus=n_gpus,
        prompts=tbs if streamed else cfg.get("gen_batch_size") or tbs, train_prompts=tbs, n=setting(c, "rollout_n"),
        filter_groups=bool(cfg.get("filter_groups_dynamic_sampling")), max_prompt=setting(c, "max_prompt_length"),
        max_response=setting(c, "max_response_length"), response_mean=resp, prompt_mean=None,
        thinking=thinks_by_default(c["model"].split(" ")[0]) or "",
        gpu_type=hw.get("gpu"), gpu_memory_gb=hw.get("gpu_memory_gb"), rollout_tp=tp,
        gmu=setting(c, "gpu_memory_utilization"), backend="megatron" if megatron else "fsdp",
        moe=c.get("model_kind") == "moe" or bool(shape.experts), dynamic_bsz=dyn,
        train_tokens=setting(c, "ppo_max_token_len_per_gpu") if dyn else 0,
        logprob_tokens=(cfg.get("log_prob_max_token_len_per_gpu") or setting(c, "ppo_max_token_len_per_gpu"))
        if dyn else 0,
        train_micro=cfg.get("ppo_micro_batch_size_per_gpu") or 4,
        logprob_micro=cfg.get("log_prob_micro_batch_size_per_gpu") or cfg.get("ppo_micro_batch_size_per_gpu") or 4,
        mini_batches=max(1, tbs // min(setting(c, "ppo_mini_batch_size"), tbs)), recompute=recompute,
        model_parallel=mp, pipeline=cfg.get("megatron_pp") or 1, virtual_pipeline=_vpp(c), context_parallel=cp, expert_parallel=ep,
        expert_tp=etp, moe_layers=st.moe_layers(shape), top_k=shape.active_experts, routed_params=shape.routed_expert_params,
        weight_tensors=shape.checkpoint_tensors(), experts=shape.experts,
        expert_loop=expert_loop(c, megatron, shape.experts),
        offload_params=bool(cfg.get("param_offload")), offload_optimizer=bool(cfg.get("optimizer_offload")),
        fsdp_size=int(cfg.get("fsdp_size") or 0) if not megatron else 0,
        # verl times a reference or critic pass only when it runs: a measured one says the run had it
        has_ref=bool(cfg.get("has_ref") or c["measured"].get("timing_s/ref")),
        has_critic=bool(cfg.get("has_critic") or c["measured"].get("timing_s/values")
                        or c["measured"].get("timing_s/update_critic")),
        multi_turn=bool(cfg.get("multi_turn")), assistant_turns=cfg.get("multi_turn_max_assistant_turns") or 0,
        tool_response_chars=cfg.get("multi_turn_max_tool_response_length") or st.TOOL_RESPONSE_CHARS,
        remove_padding=cfg.get("use_remove_padding") is not False, rollout_gpus=own, overlap=own > 0,
        streaming=bool(streamed and streamed["partial_rollout"]),
        # verl's async trainers default to the rollout's own log-probs (bypass_mode: True in both configs); a
        # measured old_log_prob says the run computed them
        old_logprob=not own or bool(c["measured"].get("timing_s/old_log_prob")),
        rollout_logprobs=rollout_logprobs(c), driver_entropy=driver_entropy(c),
        loss_agg_mode=_stated(c, "actor_rollout_ref.actor.loss_agg_mode") or "token-mean",
        **rollout_engine(c), **lora(c, shape, megatron))


def lora(c: dict[str, Any], shape, megatron: bool) -> dict[str, Any]:
    """A LoRA report's Workload fields: its config's lora_rank, else the rank its overrides or script give the key its
    engine reads (wizard.verlspec.lora.engine_rank), unmerged unless model.lora.merge is true."""
    M = "actor_rollout_ref.model"
    model = {"lora_rank": _stated(c, f"{M}.lora_rank"),
             "lora": {"rank": _stated(c, f"{M}.lora.rank"), "merge": _stated(c, f"{M}.lora.merge") in ("True", "true")}}
    rank = int((c.get("config") or {}).get("lora_rank") or 0) or verl_lora.engine_rank(model, megatron=megatron)
    return lora_fields(shape, rank, megatron, merge=verl_lora.merged(model))


def _vpp(c: dict[str, Any]) -> int:
    """The report's virtual pipeline stages: its megatron_vpp, else "vpp N" in its training layout, else 1."""
    found = re.search(r"vpp\s*(\d+)", str(c.get("train_parallel") or "").lower())
    return int((c.get("config") or {}).get("megatron_vpp") or (found.group(1) if found else 1))


def _expert_tp(c: dict[str, Any], n_gpus: int) -> int:
    """The report's expert_tensor_parallel_size: as stated, else verl's default (null: as TP, engine/megatron.yaml:20)
    where that layout can run, else 1. Megatron-core needs ETP × EP × PP to divide the GPUs (parallel_state.py
    initialize_model_parallel: the expert groups' RankGenerator); a report of TP 4, EP 8 on 16 GPUs ran, so its
    experts were not split four ways (the source table's scripts set ETP=1)."""
    cfg = c.get("config") or {}
    stated = _stated(c, "actor_rollout_ref.actor.megatron.expert_tensor_parallel_size")
    if stated:
        return int(stated)
    tp, ep, pp = cfg.get("megatron_tp") or 1, cfg.get("megatron_ep") or 1, cfg.get("megatron_pp") or 1
    return tp if n_gpus % (tp * ep * pp) == 0 else 1


def predicted(c: dict[str, Any], all_cases: list[dict[str, Any]]) -> Optional[st.StepTime]:
    """The model's prediction for a report, None when the report cannot be turned into a workload (a model neither
    the catalogue nor its name sizes, a field missing): such a report counts as missed, it does not stop the rest."""
    try:
        return st.predict(workload(c, all_cases))
    except (AssertionError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def compare(c: dict[str, Any], all_cases: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """{"step" / phase: (predicted, measured)} for what the report measured; predicted is NaN (outside any
    tolerance) for what the model does not predict."""
    pred = predicted(c, all_cases)
    m = c.get("measured") or {}
    out: dict[str, tuple[float, float]] = {}
    if m.get("timing_s/step"):
        out["step"] = (pred.step_s if pred else math.nan, float(m["timing_s/step"]))
    for phase, metric in PHASE_METRIC.items():
        if m.get(metric):
            value = pred.gen_timer_s if pred and phase == "rollout" else pred.phases.get(phase, math.nan) if pred \
                else math.nan
            out[phase] = (value, float(m[metric]))
    # a rollout of its own: verl's timing_s/gen is the trainer's wait (StepTime.gen_timer_s), the generation itself
    # is the rollout side's generate_sequences
    if pred and pred.overlap and m.get("timing_s/generate_sequences"):
        out["generation"] = (pred.phases["rollout"], float(m["timing_s/generate_sequences"]))
    return out


def log_error(pairs: dict[str, tuple[float, float]]) -> float:
    """A robust loss: about (log error / 0.3)² near zero, growing only logarithmically for far-off reports, so that
    one unusual run (a missing kernel, a tool-latency-bound rollout) does not pull every efficiency its way; the
    step counts three times as much as a phase."""
    return sum((3 if k == "step" else 1) * math.log1p((math.log(p / m) / 0.3) ** 2) for k, (p, m) in pairs.items()
               if p == p and p > 0)  # NaN: not predicted, nothing to fit


def within(p: float, m: float, tol: float = TOLERANCE) -> bool:
    return p == p and abs(p / m - 1) <= tol  # a NaN prediction (not predicted) is never within
