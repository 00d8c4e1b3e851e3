"""The `cpu` smoke engine: one rollout → reward → advantage → update cycle as a miniature of verl.

It runs on a local Ray instance started for the run (a temporary folder, a small fixed number of
CPUs, stopped afterwards), with one Ray actor process per role, as verl does:

- actor + rollout: the tiny policy, which samples the responses, computes the old log-probs and
  takes one optimizer step per mini-batch; under LoRA (`model.lora_rank` > 0, or `model.lora.rank` > 0 for a
  Megatron bundle) peft adapters as verl's FSDP engine adds them (for Megatron: the same adapters on the same
  linear layers, in place of Megatron-Bridge's), only they train;
- reference (only when a KL term needs it): a separate, frozen copy of the initial weights in its own
  process; under LoRA no process at all — the actor computes it with its adapters disabled, as verl's
  ref_in_actor does;
- critic: a value model with its own optimizer (only when the advantage estimator needs one);
- reward: verl's own reward manager (`reward.reward_manager.name`) around the bundle's reward
  function, or verl's default scoring by data_source.

The batch geometry is the bundle's, scaled (wizard.smoketest.geometry): its data-parallel size (emulated
ranks), its update and log-prob micro-batch sizes or token budgets. What comes from verl itself (all of it
runs on CPU): the mini-batch iterator (`tensordict_utils.make_iterator`), micro-batching of the update and
of every log-prob pass (`workers.engine.utils.prepare_micro_batches`, token-budget packing included), every policy loss (`core_algos.get_policy_loss_fn`), `agg_loss`,
`kl_penalty`, the advantage estimators and `compute_value_loss`, the config dataclasses
(`omega_conf_to_dataclass`), RLHFDataset and the reward managers. What is the miniature's own:
sampling with transformers' `generate` (verl's rollout engines need a GPU), data parallelism
emulated inside one process (each rank's loss is scaled as verl scales it, gradients are averaged
over the ranks before the step), and the glue between the roles.

What the update reports is measured, not counted: GradientLedger records per micro-batch whether the
backward pass reached it and what it added to the parameters' gradients, so "samples used" counts the
samples whose gradient reached the weights, and "actor updated" needs a non-zero gradient at the
optimizer step (AdamW's weight decay alone also moves the weights).

The rooms: wizard.smoketest.cpu_roles (the actor, reference and critic processes, GradientLedger),
cpu_scoring (the reward manager's process), cpu_data (the data phase), cpu_rollout (rollout and reward, the
scorer's checks), cpu_update (advantage and update, the weight checks); this module starts Ray and the roles
and runs the phases in order (CpuRun).

These modules are imported by the Ray worker processes; heavy imports stay inside functions.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from wizard.smoketest.context import SmokeContext, SmokeFailure
from wizard.smoketest.cpu_data import DataPhase, warmup_examples
from wizard.smoketest.cpu_roles import ActorRolloutRole, CriticRole, ReferenceRole
from wizard.smoketest.cpu_rollout import RolloutPhase
from wizard.smoketest.cpu_scoring import RewardRole
from wizard.smoketest.cpu_update import UpdatePhase


# verl colocates up to this many worker processes on one GPU (RayResourcePool's max_colocate_count).
MAX_COLOCATE = 3


@dataclass
class _Roles:
    actor: Any
    reward: Any
    ref: Any = None
    critic: Any = None
    who: dict[str, Any] = field(default_factory=dict)


class CpuRun(DataPhase, RolloutPhase, UpdatePhase):
    """The driver of the miniature: it owns the roles and moves the batch between them."""

    def __init__(self, ctx: SmokeContext) -> None:
        self.ctx = ctx
        self.cfg = ctx.cfg
        self.report = ctx.report
        sg = ctx.smoke_geometry
        assert sg is not None
        self.sg = sg
        self.roles: Optional[_Roles] = None
        self.items: list[dict[str, Any]] = []
        self.prompt_ids: list[list[int]] = []
        self.tokenizer: Any = None
        self.model_dir = os.path.join(ctx.workdir, "tiny-model")
        self.arch = ("", "")
        self.digests: dict[str, str] = {}
        self.width = 0
        self.batch: dict[str, Any] = {}
        self.rows: list[dict[str, Any]] = []
        self.pool: Any = None
        self.drawn: list[dict[str, Any]] = []  # per generation batch: what reached the batch (rows_reach_batch)

    def run(self) -> None:
        """The phases after probe (run._run enters probe and calls self.probe inside it)."""
        ctx = self.ctx
        with ctx.phase("data") as ph:
            self.data(ph)
        self.rollout_and_reward()
        with ctx.phase("advantage") as ph:
            self.advantage(ph)
        with ctx.phase("update") as ph:
            self.update(ph)

    def close(self) -> None:
        cleanup(self.ctx)

    def probe(self, ph: Any) -> None:
        from wizard.smoketest import model as smoke_model

        ctx, g = self.ctx, self.ctx.geometry
        ctx.static_checks()
        ctx.env_checks()
        fn = self.cfg.reward.custom_reward_function
        if fn.get("path"):
            path = ctx.bundle_path(str(fn.path))
            if not os.path.isfile(path):
                raise SmokeFailure(f"reward.custom_reward_function.path {fn.path!r} does not exist ({path})",
                                   "paths in verl_config.yaml are relative to the bundle folder (run.sh starts verl there)")
        import logging

        import ray
        from ray.util.placement_group import placement_group

        gpn = g.gpus_per_node
        ctx.ray_dir = tempfile.mkdtemp(prefix="vi-ray-", dir="/tmp")  # short: Ray's socket paths have a length limit
        keep = ("OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RAY_ADDRESS",
                "RAY_ENABLE_UV_RUN_RUNTIME_ENV", "VERL_LOGGING_LEVEL", "RAY_DEDUP_LOGS")
        ctx.env_restore = {k: os.environ.get(k) for k in keep}
        os.environ.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
                          TRANSFORMERS_OFFLINE="1", RAY_ENABLE_UV_RUN_RUNTIME_ENV="0", VERL_LOGGING_LEVEL="ERROR")
        os.environ.pop("RAY_ADDRESS", None)  # always a fresh local instance, never someone's cluster
        started = time.perf_counter()
        ray.init(address="local", num_cpus=ctx.options.ray_cpus, num_gpus=gpn, include_dashboard=False,
                 _temp_dir=ctx.ray_dir, log_to_driver=False, logging_level=logging.ERROR, namespace="verl-init-smoke")
        ctx.ray_started = True
        seen = {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU")}
        # verl's RayResourcePool: one bundle per GPU of a node. The GPUs are Ray's logical stand-ins
        # (this machine has none): the placement is Ray's real scheduler, the compute is CPU.
        pg = placement_group([{"GPU": 1.0}] * gpn, strategy="STRICT_PACK", name="verl-init-smoke-pool")
        try:
            ray.get(pg.ready(), timeout=60)
        except Exception as exc:  # noqa: BLE001 - GetTimeoutError
            raise SmokeFailure(f"Ray could not place the resource pool of {gpn} GPU(s) within 60 s (Ray sees {seen}): "
                               f"{type(exc).__name__}",
                               "verl would hang here without a message; give Ray the GPUs the plan names") from None
        pool_s = round(time.perf_counter() - started, 2)
        config = ctx.config_for_roles()
        seed = ctx.options.seed
        self.pool = pg
        actor = ray.remote(ActorRolloutRole).options(**self._role_options("actor_rollout")).remote(config, seed)
        ref = self._reference_role(actor, config, seed) if ctx.need_ref else None
        critic = ray.remote(CriticRole).options(**self._role_options("critic")).remote(config, seed) \
            if ctx.need_critic else None
        reward = ray.remote(RewardRole).options(**self._role_options("reward")).remote(config, seed)
        self.roles = _Roles(actor=actor, reward=reward, ref=ref, critic=critic)
        avail = {k: round(v, 3) for k, v in ray.available_resources().items() if k in ("CPU", "GPU")}
        self.report.resources.update({
            "ray_cluster": seen, "ray_available_after_pool": avail, "ray_cpus": ctx.options.ray_cpus,
            "pool": f"{gpn} GPU bundle(s), STRICT_PACK: one node of trainer.n_gpus_per_node={gpn} "
                    f"(the plan: {g.nnodes} node(s) × {gpn} = {g.n_gpus} GPUs)",
            "pool_ready_s": pool_s,
            "verl_needs_per_node": f"{gpn} GPU(s) and ≥ {MAX_COLOCATE * gpn} CPUs for the GPU bundles "
                                   "(+ about 9 on the head node for TransferQueue and the TaskRunner)",
        })
        # No check here: this Ray instance was started with num_gpus = trainer.n_gpus_per_node, so "Ray sees the
        # plan's GPUs" would hold by construction. The cluster's own GPUs are `verl-init cluster check`'s business.
        self.arch = smoke_model.model_arch(ctx.model_path, ctx.answers_model, ctx.answers_params_b)
        ph.detail = (f"config composed by verl's Hydra tree; Ray up with {seen.get('GPU', 0):g} GPU / "
                     f"{seen.get('CPU', 0):g} CPU, pool placed in {pool_s} s; roles: {', '.join(ctx.role_names())}; "
                     f"model family {self.arch[0]}")

    def _role_options(self, name: str) -> dict[str, Any]:
        """Ray options of one role process: the GPU roles share the pool's bundle as verl's colocated hybrid-engine
        workers do (max_colocate_count); the reward manager is a CPU-only process, as verl's reward loop workers."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if name == "reward":
            return dict(name=name, num_cpus=1, max_restarts=0)
        return dict(name=name, num_cpus=0, num_gpus=1.0 / MAX_COLOCATE, max_restarts=0,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(self.pool, placement_group_bundle_index=0))

    def _reference_role(self, actor: Any, config: dict[str, Any], seed: int) -> Any:
        """The reference: inside the actor for LoRA (verl's ref_in_actor, trainer_base.py:237 — no reference
        worker; the base with the adapters off), else its own process with a frozen copy of the initial weights."""
        import ray

        if self.sg.lora:
            return actor
        return ray.remote(ReferenceRole).options(**self._role_options("reference")).remote(config, seed)

    def load_roles(self) -> str:
        """Build and fit the tiny policy, load it in every role process; returns what was done."""
        import torch

        from wizard.smoketest import model as smoke_model

        ctx, sg = self.ctx, self.sg
        examples = warmup_examples(self.items, self.prompt_ids, ctx.answer_format or "number")
        shape = ctx.model_shape()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the role processes are importing beside it: one thread avoids spin-wait contention
        try:
            info = smoke_model.build_tiny_policy(
                self.model_dir, arch=self.arch[0], arch_source=self.arch[1], tokenizer=self.tokenizer,
                tokenizer_source=self.report.data.get("tokenizer", ""), examples=examples,
                kv_heads=2 if shape is None or shape.kv_heads < shape.heads else 4,
                tied=bool(shape.tied) if shape is not None else True,
                max_positions=max(1024, self.width + sg.response_length + 8), seed=ctx.options.seed)
        finally:
            torch.set_num_threads(threads)
        self.report.model = info.as_dict()
        roles = self.roles
        assert roles is not None
        handles = {"actor": roles.actor, "reward": roles.reward}
        if roles.ref is not None and roles.ref is not roles.actor:
            handles["reference"] = roles.ref
        if roles.critic is not None:
            handles["critic"] = roles.critic
        waited = time.perf_counter()
        loaded = dict(zip(handles, ctx.get([h.load.remote(self.model_dir) for h in handles.values()]), strict=True))
        self.report.model["roles_ready_s"] = round(time.perf_counter() - waited, 2)
        split = loaded["actor"].get("split")
        self.split_before = split
        if roles.ref is roles.actor:  # LoRA: the reference is the actor's base weights (or the shared-weights fault)
            loaded["reference"] = {"who": dict(loaded["actor"]["who"], role="reference"),
                                   "digest": split["base"] if split else loaded["actor"]["digest"]}
        self.digests = {k: v["digest"] for k, v in loaded.items() if "digest" in v}
        self.report.placement = {k: v["who"] for k, v in loaded.items()}
        if sg.lora:
            self.report.model["lora"] = {"rank": int(ctx.geometry.lora_rank),
                                         "trainable": loaded["actor"]["trainable"],
                                         "parameters": loaded["actor"]["parameters"]}
        self.report.placement_note = (
            f"actor+rollout, reference and critic are colocated on the GPU pool as verl's hybrid-engine workers are, "
            f"each process holding 1/{MAX_COLOCATE} of a GPU bundle (verl's max_colocate_count); the reward manager "
            "runs in a CPU-only process, as verl's reward loop workers do"
            + ("; LoRA: no reference process — the actor computes the reference log-probs with its adapters "
               "disabled, as verl's ref_in_actor does" if sg.lora else ""))
        self.report.reward["manager"] = loaded["reward"]["manager"]
        self.report.reward["scorer"] = loaded["reward"]["scorer"]
        return (f"tiny {info.arch} ({info.parameters:,} parameters, fitted in {info.warmup.get('steps')} steps, "
                f"{info.warmup.get('seconds')} s) loaded by {', '.join(k for k in handles if k != 'reward')} "
                f"(ready after {self.report.model['roles_ready_s']} s more)")

    def role_placement(self, who: dict[str, Any]) -> None:
        """Pitfall 3, measured from inside each role process (Ray's runtime context, the OS pid): the GPU roles hold a
        share of the pool's GPU bundle, the reward manager none; one process per role, except the LoRA reference,
        which lives in the actor (verl starts no reference worker then)."""
        gpu_roles = [k for k in ("actor", "reference", "critic") if k in who]
        problems = []
        for k in gpu_roles:
            if not (who[k].get("placement_group") and who[k].get("ray_resources", {}).get("GPU")):
                problems.append(f"{k} is not on the GPU pool")
        if "reward" in who and who["reward"].get("ray_resources", {}).get("GPU"):
            problems.append("the reward manager holds a GPU share (verl runs it in CPU-only processes)")
        expect_own = [k for k in who if not (k == "reference" and self.sg.lora)]
        pids = [who[k].get("pid") for k in expect_own]
        if len(set(pids)) != len(pids):
            shared = sorted({k for k in expect_own for j in expect_own if j != k and who[j].get("pid") == who[k].get("pid")})
            problems.append(f"{' and '.join(shared)} share one process")
        self.ctx.check(3, "role_placement", not problems,
                       "; ".join(f"{k}: pid {v.get('pid')}, Ray {v.get('ray_resources')}" for k, v in who.items())
                       + ("" if not problems else " — " + "; ".join(problems)),
                       {"placement": who, "problems": problems},
                       hint="each role in its own process, the model roles on the GPU pool, the reward manager off it")


def cleanup(ctx: SmokeContext) -> None:
    """Stop Ray and remove the temporary folders (always called)."""
    try:
        import ray

        if ray.is_initialized():
            ray.shutdown()
    except Exception:  # noqa: BLE001
        pass
    if ctx.ray_dir:
        shutil.rmtree(ctx.ray_dir, ignore_errors=True)
    for k, v in (ctx.env_restore or {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    ctx.env_restore = {}
