"""The child of `verl-init smoke BUNDLE --engine verl-workers` (wizard.smoketest.engine_workers): one rank of verl
0.9.1's own engine workers, run as `python -m wizard.smoketest.workers_child SPEC.json`.

What runs is what `python -m verl.trainer.main_ppo` runs by default in verl 0.9.1 (trainer.use_v1=true: the engine
workers of verl/workers/engine_workers.py), without Ray and without a rollout engine:

- the config is the bundle's verl_config.yaml composed with verl's Hydra tree plus the smoke's overrides (model
  folder, one node, the measured batch as one mini-batch), checked by verl.utils.config.validate_config and resolved,
  as main_ppo's TaskRunner does;
- the workers are verl's classes, built in the trainer's order (trainer/ppo/v1/trainer_base.py): the critic
  (TrainingWorker, model_type value_model) when the bundle has one, ActorRolloutRefWorker(role="ref") when it has a
  reference, ActorRolloutRefWorker(role="actor"); each .init_model();
- each step calls the workers' methods in the trainer's order (ray_trainer._compute_old_log_prob ... _update_actor):
  compute_log_prob, compute_ref_log_prob, critic infer_batch, critic train_mini_batch, update_actor, on a synthetic
  batch of full-length sequences (every prompt max_prompt_length tokens, every response max_response_length);
- one process per GPU with that GPU alone visible and RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set, as verl's Ray
  worker group starts its workers (verl/utils/distributed.py initialize_global_process_group_ray); each rank takes its
  share of the batch, as verl's dispatch splits it.

Per phase: torch.cuda.reset_peak_memory_stats() before, max_memory_allocated / max_memory_reserved after (GiB), and
the metrics verl's worker returns. Results are written to OUT/rank<R>.json after every phase, so a timeout keeps what
was measured.

CPU (spec device "cpu"): verl 0.9.1 has no CPU platform (verl/plugin/platform/platform_manager.py:117 falls back to
"nvidia") and registers its FSDP engines for cuda and npu only (verl/workers/engine/fsdp/transformer_impl.py:1143,
1594); wizard.smoketest.workers_cpu registers one through verl's own plugin registry. Nothing of it is active on a
GPU.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

GIB = float(1 << 30)
PHASES = ("old_log_prob", "ref_log_prob", "values", "update_critic", "update_actor")


class Meter:
    """Peak memory per phase on this rank's device: torch's counters reset before, read after."""

    def __init__(self, cuda: bool):
        import torch

        self.torch, self.cuda = torch, cuda

    def phase(self, fn: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
        torch = self.torch
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        value = fn()
        rec: dict[str, Any] = {}
        if self.cuda:
            torch.cuda.synchronize()
            rec["max_memory_allocated_gb"] = round(torch.cuda.max_memory_allocated() / GIB, 3)
            rec["max_memory_reserved_gb"] = round(torch.cuda.max_memory_reserved() / GIB, 3)
        rec["seconds"] = round(time.perf_counter() - t0, 2)
        return value, rec


def verl_metrics(output: Any) -> dict[str, float]:
    """The metrics verl's worker returned (its TensorDict's "metrics"): every numeric one, the last value of a list
    (the maximum for perf/max_memory_*)."""
    from verl.utils import tensordict_utils as tu

    if output is None:
        return {}
    try:
        metrics = tu.get(output, "metrics") or {}
    except Exception:  # noqa: BLE001 - a worker output without metrics
        return {}
    keep: dict[str, float] = {}
    for k, v in metrics.items():
        nums = []
        for x in v if isinstance(v, list) else [v]:
            try:
                nums.append(float(getattr(x, "value", x)))
            except (TypeError, ValueError):
                pass
        if nums:
            keep[str(k)] = float(f"{(max(nums) if k.startswith('perf/max_memory') else nums[-1]):.6g}")
    return keep


def compose(spec: dict[str, Any]) -> Any:
    """The bundle's config as main_ppo builds it, with the smoke's overrides; verl's checks; resolved."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    with initialize_config_dir(config_dir=spec["bundle"], version_base=None):
        config = hydra_compose(config_name="verl_config", overrides=spec["overrides"])
    auto_set_device(config)
    use_ref, use_critic = need_reference_policy(config), need_critic(config)
    validate_config(config=config, use_reference_policy=use_ref, use_critic=use_critic)
    OmegaConf.resolve(config)
    with open_dict(config):  # the trainer sets it from the dataloader's length (trainer_base._init_dataloader)
        config.actor_rollout_ref.actor.optim.total_training_steps = 100
        config.critic.optim.total_training_steps = 100
    return config, use_ref, use_critic


def build_workers(config: Any, use_ref: bool, use_critic: bool, meter: Meter, result: dict, save: Callable) -> tuple:
    """verl's workers in the trainer's order (trainer/ppo/v1/trainer_base.py): critic, reference, actor."""
    import copy
    from functools import partial

    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker, TrainingWorkerConfig
    from verl.workers.utils.losses import value_loss

    built: dict[str, Any] = {}

    def critic() -> None:
        cfg = omega_conf_to_dataclass(config.critic)
        cfg.engine.infer_max_token_len_per_gpu = cfg.ppo_infer_max_token_len_per_gpu
        cfg.engine.max_token_len_per_gpu = cfg.ppo_infer_max_token_len_per_gpu
        prof = config.critic.get("profiler", {})
        worker = TrainingWorker(config=TrainingWorkerConfig(
            model_type="value_model", model_config=cfg.model, engine_config=cfg.engine, optimizer_config=cfg.optim,
            checkpoint_config=cfg.checkpoint, profiler_config=omega_conf_to_dataclass(prof) if prof else None))
        worker.reset()
        worker.set_loss_fn(partial(value_loss, config=cfg))
        built["critic"] = worker

    def ref() -> None:
        built["ref"] = ActorRolloutRefWorker(config=copy.deepcopy(config.actor_rollout_ref), role="ref")
        built["ref"].init_model()

    def actor() -> None:
        built["actor"] = ActorRolloutRefWorker(config=copy.deepcopy(config.actor_rollout_ref),
                                               distillation_config=config.get("distillation"), role="actor")
        built["actor"].init_model()

    for name, fn, wanted in (("critic", critic, use_critic), ("ref", ref, use_ref), ("actor", actor, True)):
        if wanted:
            result["phase"] = f"init {name}"
            save()
            _, result["init"][name] = meter.phase(fn)
    return built.get("actor"), built.get("ref"), built.get("critic")


def synthetic_batch(spec: dict[str, Any], vocab: int, rank: int) -> Any:
    """This rank's share of a batch as the rollout leaves it: every prompt left-padded to max_prompt_length and
    full, every response max_response_length tokens; random ids."""
    import numpy as np
    import torch

    from verl import DataProto
    from verl.utils.model import compute_position_id_with_mask

    b = spec["batch"]
    B, P, R = b["sequences_per_rank"], b["prompt_length"], b["response_length"]
    g = torch.Generator().manual_seed(1234 + rank)
    ids = torch.randint(10, max(11, vocab - 1), (B, P + R), generator=g)
    mask = torch.ones(B, P + R, dtype=torch.long)
    pos = compute_position_id_with_mask(mask)
    batch = {"prompts": ids[:, :P].clone(), "responses": ids[:, P:].clone(), "input_ids": ids, "attention_mask": mask,
             "position_ids": pos, "response_mask": mask[:, P:].clone()}
    n = max(1, int(b["n"]))
    uid = np.array([f"r{rank}u{i // n}" for i in range(B)], dtype=object)
    return DataProto.from_dict(tensors=batch, non_tensors={"uid": uid},
                               meta_info={"temperature": 1.0, "global_token_num": torch.sum(mask, dim=-1).tolist()})


def run_step(step: int, config: Any, workers: tuple, batch: Any, meter: Meter, result: dict, save: Callable) -> None:
    """One training step without the rollout, in the trainer's order, with the fields ray_trainer sends."""
    import torch

    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

    actor, ref, critic = workers
    rec: dict[str, Any] = {}
    result["steps"].append({"step": step, "phases": rec})

    def phase(name: str, fn: Callable[[], Any]) -> Any:
        result["phase"] = name
        save()
        out, ph = meter.phase(fn)
        ph["verl"] = verl_metrics(out)
        rec[name] = ph
        save()
        return out

    def td_of(**meta: Any) -> Any:
        td = left_right_2_no_padding(batch.to_tensordict())
        tu.assign_non_tensor(td, **meta)
        return td

    td = td_of(calculate_entropy=True, calculate_sum_pi_squared=False, compute_loss=False)
    out = phase("old_log_prob", lambda: actor.compute_log_prob(td))
    batch.batch["old_log_probs"] = no_padding_2_padding(tu.get(out, "log_probs"), td).float()
    if ref is not None:
        td = td_of(calculate_entropy=False, compute_loss=False)
        out = phase("ref_log_prob", lambda: ref.compute_ref_log_prob(td))
        batch.batch["ref_log_prob"] = no_padding_2_padding(tu.get(out, "log_probs"), td).float()
    if critic is not None:
        td = td_of(compute_loss=False)
        out = phase("values", lambda: critic.infer_batch(td))
        batch.batch["values"] = no_padding_2_padding(tu.get(out, "values"), td).float()
    # the advantage (the driver's CPU work, not measured): random, masked; returns for the critic
    rmask = batch.batch["response_mask"].float()
    adv = torch.randn(rmask.shape, generator=torch.Generator().manual_seed(100 + step)) * rmask
    batch.batch["advantages"] = adv
    n = config.actor_rollout_ref.rollout.n
    if critic is not None:
        batch.batch["returns"] = (batch.batch["values"] + adv) * rmask
        c = config.critic
        td = td_of(global_batch_size=c.ppo_mini_batch_size * n, mini_batch_size=c.ppo_mini_batch_size * n,
                   epochs=c.ppo_epochs, seed=c.data_loader_seed, dataloader_kwargs={"shuffle": c.shuffle})
        phase("update_critic", lambda: critic.train_mini_batch(td))
    a = config.actor_rollout_ref.actor
    td = td_of(calculate_entropy=bool(a.calculate_entropy or a.entropy_coeff != 0.0), distillation_use_topk=False,
               distillation_only=False, global_batch_size=a.ppo_mini_batch_size * n,
               mini_batch_size=a.ppo_mini_batch_size * n, epochs=a.ppo_epochs, seed=a.data_loader_seed,
               dataloader_kwargs={"shuffle": a.shuffle}, compute_loss=True)
    phase("update_actor", lambda: actor.update_actor(td))


def run(spec: dict[str, Any], result: dict[str, Any], save: Callable) -> None:
    from wizard.smoketest.workers_cpu import absent_server_modules, critic_attention_patch, install_cpu_platform

    cuda = spec["device"] == "cuda"
    if not cuda:
        result["shims"] += install_cpu_platform()
    result["shims"] += absent_server_modules()
    result["phase"] = "setup"
    save()
    config, use_ref, use_critic = compose(spec)
    result["use_ref"], result["use_critic"] = use_ref, use_critic
    if use_critic:
        result["shims"] += critic_attention_patch()
    meter = Meter(cuda)
    rank = int(os.environ.get("RANK", "0"))
    workers = build_workers(config, use_ref, use_critic, meter, result, save)
    if spec.get("expandable_segments", True):  # what verl's update_weights leaves before every step
        from verl.utils.device import get_torch_device, set_expandable_segments

        get_torch_device().empty_cache()
        set_expandable_segments(True)
    vocab = workers[0].actor.engine.model_config.hf_config.vocab_size
    for step in range(1, int(spec["steps"]) + 1):
        run_step(step, config, workers, synthetic_batch(spec, vocab, rank), meter, result, save)
    result["phase"] = "done"


def _peaks_at_error(spec: dict[str, Any]) -> dict[str, float]:
    """The device's peaks when a phase failed (an out-of-memory error: how far it got)."""
    if spec.get("device") != "cuda":
        return {}
    try:
        import torch

        return {"max_memory_allocated_gb": round(torch.cuda.max_memory_allocated() / GIB, 3),
                "max_memory_reserved_gb": round(torch.cuda.max_memory_reserved() / GIB, 3)}
    except Exception:  # noqa: BLE001 - a broken CUDA context: nothing to add
        return {}


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    rank = int(os.environ.get("RANK", "0"))
    out = Path(spec["out"]) / f"rank{rank}.json"
    result: dict[str, Any] = {"rank": rank, "status": "error", "phase": "start", "init": {}, "steps": [], "shims": []}

    def save() -> None:
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result), encoding="utf-8")
        os.replace(tmp, out)

    try:
        run(spec, result, save)
        result["status"] = "ok"
    except BaseException as exc:  # noqa: BLE001 - recorded for the parent, which reports the phase and verl's message
        result["error"] = f"{type(exc).__name__}: {exc}"[-3000:]
        result["traceback"] = traceback.format_exc()[-8000:]
        oom = "OutOfMemory" in type(exc).__name__ or "out of memory" in str(exc).lower()
        result["status"] = "oom" if oom else "error"
        traceback.print_exc()
        result["at_error"] = _peaks_at_error(spec)
    save()
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
