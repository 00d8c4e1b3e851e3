"""A plan's step time: its settings as a steptime Workload (`of_plan`, the `time` object of plan --json), the run's
steps, and PLAN.md's lines for it. The model itself is wizard.planner.steptime."""

from __future__ import annotations

from typing import Optional

from wizard.planner.steptime import StepTime, predict
from wizard.planner.steptime_config import _int, fully_async_cycle_prompts, workload_from_config


def run_hours(st: StepTime, steps: int, n_gpus: int) -> tuple[float, float]:
    """(wall-clock hours, GPU-hours) of `steps` steps: the training GPUs and the rollout's own, if any."""
    hours = st.step_s * steps / 3600
    return hours, hours * (n_gpus + st.rollout_gpus)


def as_json(st: StepTime, steps: int, n_gpus: int, steps_basis: str) -> dict[str, object]:
    """The `time` object of plan --json and check --json."""
    hours, gpu_hours = run_hours(st, steps, n_gpus)
    out = {"step_s": round(st.step_s, 1), "phases": st.grouped(),
           "phases_detail": {k: round(v, 1) for k, v in st.phases.items()},
           "run_steps": steps, "run_hours": round(hours, 2), "run_gpu_hours": round(gpu_hours, 1),
           "assumptions": {**st.assumptions, "run_steps_basis": steps_basis}}
    if st.overlap:  # verl's timing_s/gen is the trainer's wait there, not the rollout (StepTime.gen_timer_s)
        out["gen_timer_s"], out["batch_receive_s"] = round(st.gen_timer_s, 1), round(st.receive_s, 1)
    return out


# train split rows of the datasets verl-init prepares itself (their hub cards): the run's steps per epoch
KNOWN_TRAIN_ROWS = {"gsm8k": 7473, "math": 7500}
DEFAULT_RUN_STEPS = 100


def run_steps(get, dataset: Optional[str] = None, rows: Optional[int] = None) -> tuple[int, str]:
    """(steps, how they were found): trainer.total_training_steps, else epochs × ⌈rows / train_batch_size⌉ when the
    training rows are known, else DEFAULT_RUN_STEPS (named)."""
    total = get("trainer.total_training_steps")
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        return total, "trainer.total_training_steps"
    epochs = _int(get("trainer.total_epochs"), 1)
    fully_async = get("async_training.require_batches") is not None
    tbs = fully_async_cycle_prompts(get) if fully_async else max(_int(get("data.train_batch_size"), 1), 1)
    rows = rows or KNOWN_TRAIN_ROWS.get(str(dataset or "").lower())
    prompts = get("rollout.total_rollout_steps") if fully_async else None
    if isinstance(prompts, int) and not isinstance(prompts, bool) and prompts > 0:
        # the fully async rollouter generates min(rollout.total_rollout_steps, epochs × rows) prompts
        # (experimental/fully_async_policy/fully_async_rollouter.py:405-407)
        if rows and epochs * rows < prompts:
            prompts = epochs * rows
        return max(prompts // tbs, 1), (f"{prompts} prompts (rollout.total_rollout_steps, at most epochs × rows) // "
                                        f"{tbs} a step (require_batches × ppo_mini_batch_size × "
                                        "trigger_parameter_sync_step)")
    if rows:
        return epochs * max(rows // tbs, 1), (f"{epochs} epochs × {rows} training rows // "
                                              + (f"{tbs} prompts a fully async step" if fully_async
                                                 else f"train_batch_size {tbs}"))
    return DEFAULT_RUN_STEPS, (f"{DEFAULT_RUN_STEPS} steps assumed (training rows unknown; set "
                               "trainer.total_training_steps for the whole run)")


# What PLAN.md says of the calibration: the steps within ±30 % of the reports of tests/data/reference/step-times.json
# with the shipped efficiencies, and with each half predicted from the other half's fit (benchmarks/step_times.md's
# hold-out sections). tests/test_steptime_calibration.py recomputes the first and reads the second from the benchmark.
CALIBRATION = {"reports": 17, "steps_within": 16, "steps_within_held_out": 16}


def _sustained(a: dict) -> str:
    s = a.get("bf16_tflops_sustained")
    return f", {s:g} sustained under dense load" if s else ""


def _driver_check(a: dict) -> str:
    s = a.get("driver_metrics_s")
    return (f"; the driver computes {a['driver_metrics']} over the padded responses in {s:g} s of the old log-prob "
            f"pass, {a['driver_metrics_s_per_slot'] * 1e9:.0f} ns per slot on one CPU thread") if s is not None else ""


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "es")


def lines(doc: dict) -> list[str]:
    """PLAN.md's and `plan`'s lines for a `time` object (as_json)."""
    a = doc["assumptions"]
    phases = ", ".join(f"{k} {v:.0f} s" for k, v in doc["phases_detail"].items())
    return [
        f"Predicted step: {doc['step_s']:.0f} s ({phases}).",
        f"Whole run: {doc['run_steps']} steps ({a['run_steps_basis']}) ≈ {doc['run_hours']:.1f} h, "
        f"{doc['run_gpu_hours']:.0f} GPU-hours.",
        f"Assumed: GPU {a['gpu']} ({a['bf16_tflops']:g} dense bf16 TFLOPS{_sustained(a)}, {a['hbm_tb_s']:g} TB/s); "
        f"mean response "
        f"{a['response_length_mean']} tokens ({a['response_length_mean_basis']}); mean prompt {a['prompt_length_mean']} "
        f"tokens ({a['prompt_length_mean_basis']}); {a['rollout_concurrency_per_replica']} sequences decoding at once per "
        f"rollout replica (KV cache {a['kv_cache_tokens_per_replica']} tokens); "
        f"{_count(a['train_micro_batches_per_rank'], 'training micro-batch')} of {a['train_micro_batch_tokens']} "
        f"tokens per data-parallel rank, {_count(a['logprob_micro_batches_per_rank'], 'log-prob micro-batch')} of "
        f"{a['logprob_micro_batch_tokens']}{_driver_check(a)}.",
        *([_lora_line(a)] if "lora_trained_params" in a else []),
        *([f"Fastest layout that fits: {doc['layout_choice']['key']}={doc['layout_choice']['chosen']} "
           f"({doc['layout_choice']['why']}); runner-up {doc['layout_choice']['runner_up']}, "
           f"{_slower(doc['layout_choice']['runner_up_slower_s'])} per step (more micro-batches, each with its fixed "
           "cost)."]
          if doc.get("layout_choice") and doc["layout_choice"]["runner_up"] else []),
        *([f"Fastest layout that fits, by predicted step: {doc['layout_ranking']['chosen']}; runner-up "
           f"{doc['layout_ranking']['runner_up']}, about {doc['layout_ranking']['runner_up_slower_s']:g} s slower per "
           f"step ({doc['layout_ranking']['runner_up_slower_in']})."]
          if doc.get("layout_ranking") and doc["layout_ranking"]["runner_up"] else []),
        (f"Efficiencies calibrated on {CALIBRATION['reports']} real verl runs (benchmarks/step_times.md): a prediction, "
         f"not a measurement; {CALIBRATION['steps_within']} of those {CALIBRATION['reports']} steps land within ±30 % "
         f"({CALIBRATION['steps_within_held_out']} of {CALIBRATION['reports']} when each half is predicted from the "
         "other half's fit)."),
    ]


def _lora_line(a: dict) -> str:
    """PLAN.md's line on a LoRA run's step time (steptime_lora.lora_assumptions)."""
    decode = (f"the engine's LoRA kernels make the per-layer decode costs {a['lora_decode_layer_factor']:g} × the "
              "base model's" if a["lora_decode_layer_factor"] > 1 else "the engine decodes the merged weights")
    return (f"LoRA: {a['lora_trained_params']:,} adapter parameters trained, the frozen base without weight "
            f"gradients (the adapters' activation traffic adds {a['lora_adapter_s']['update']:g} s to the update); "
            f"the weight sync ships {a['lora_weight_sync']}; {decode}.")


def _flat(tree: dict, prefix: str = "") -> dict:
    out: dict = {}
    for k, v in tree.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(_flat(v, key))
        else:
            out[key] = v
    return out


def not_predicted(plan) -> Optional[str]:
    """Why a plan has no `time` object (of_plan returns None), in one sentence; None when it has one."""
    from wizard.planner.shapes import resolve_shape

    a = plan.answers
    if a.gpu_type == "cpu":
        return ("not predicted for a CPU run: the step-time model times GPUs from their datasheet peaks "
                "(wizard/verlspec/hardware.py GPU_PEAK)")
    if resolve_shape(a.model, plan.facts.get("model_params_b")) is None:
        return (f"not predicted: the size of {a.model} is unknown (no config.json read and no parameter count in "
                "its name); answer model_params_b or point model at a local folder")
    return None


def _slower(seconds: float) -> str:
    """'about 0.4 s slower', or 'under 0.1 s slower' where the rounding would say 0."""
    return f"about {seconds:g} s slower" if seconds >= 0.1 else "under 0.1 s slower"


def of_plan(plan) -> Optional[dict]:
    """The `time` object (as_json) of a resolved plan: its settings over verl's defaults, the memory plan's KV
    cache, the answers' GPU type and response_length_mean; None when the model cannot be sized."""
    from wizard.planner.shapes import resolve_shape
    from wizard.verlspec.keys import load_snapshot

    a = plan.answers
    shape = resolve_shape(a.model, plan.facts.get("model_params_b"))
    if shape is None or a.gpu_type == "cpu":
        return None
    engine = "megatron" if plan.base_config == "megatron" else "dp"
    defaults = _flat(load_snapshot()["engines"][engine])

    def get(key: str):
        return plan.settings[key].value if key in plan.settings else defaults.get(key)

    seq = _int(get("data.max_prompt_length"), 512) + _int(get("data.max_response_length"), 512)
    kv = plan.memory.kv_seqs * seq if plan.memory is not None and plan.memory.kv_seqs else None
    w = workload_from_config(get, shape, n_gpus=plan.n_gpus, gpu_type=a.gpu_type, gpu_memory_gb=a.gpu_memory_gb,
                             response_mean=a.response_length_mean, kv_tokens=kv,
                             response_mean_basis="given: the response_length_mean answer")
    steps, basis = run_steps(get, a.dataset)
    doc = as_json(predict(w), steps, plan.n_gpus, basis)
    for fact, key in (("logprob_micro_ranking", "log_prob_micro_batch_size_per_gpu"),
                      ("token_budget_ranking", "ppo_max_token_len_per_gpu")):
        ranked = plan.facts.get(fact)  # wizard.planner.layouts: the choice time decided
        if ranked is not None:
            doc["layout_choice"] = {"key": key, "chosen": ranked.chosen, "runner_up": ranked.runner_up,
                                    "runner_up_slower_s": round(ranked.seconds_lost, 1), "why": ranked.why}
    lr = plan.facts.get("layout_ranking")  # wizard.planner.layouts.rank_layouts
    if lr is not None:
        doc["layout_ranking"] = {"chosen": lr.chosen, "runner_up": lr.runner_up,
                                 "runner_up_slower_s": round(lr.seconds_lost, 1), "runner_up_slower_in": lr.why,
                                 "candidates": [{"layout": k, "step_s": v} for k, v in lr.table]}
    return doc


__all__ = ["of_plan", "not_predicted", "lines", "run_steps", "run_hours", "as_json", "CALIBRATION"]
