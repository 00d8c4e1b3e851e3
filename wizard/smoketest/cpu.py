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

This module is imported by the Ray worker processes; heavy imports stay inside functions.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from wizard.smoketest.context import SmokeContext, SmokeFailure

# verl colocates up to this many worker processes on one GPU (RayResourcePool's max_colocate_count).
MAX_COLOCATE = 3
FIRST_ROWS = 256  # rows of the prepared data the smoke reads (and verl's loader sees)


# =============================================================================================
# helpers run inside the role processes


def _worker_setup() -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    import torch

    torch.set_num_threads(1)


def _digest(model: Any) -> str:
    """sha256 over every tensor of the state dict (names and bytes): any weight change shows."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().to("cpu").contiguous().view(-1).view(dtype=__import__("torch").uint8).numpy().tobytes())
    return h.hexdigest()


def _whoami(role: str, model: Any = None) -> dict[str, Any]:
    import ray

    ctx = ray.get_runtime_context()
    info: dict[str, Any] = {"role": role, "pid": os.getpid(), "node": ctx.get_node_id()[:12],
                            "ray_resources": {k: round(v, 4) for k, v in ctx.get_assigned_resources().items()}}
    pg = ctx.get_placement_group_id()
    info["placement_group"] = pg[:12] if pg else None
    if model is not None:
        info["model_object"] = f"{type(model).__name__}@{id(model):x}"
    return info


def _forward_logprobs(model: Any, batch: dict[str, Any], temperature: float, with_entropy: bool) -> tuple[Any, Any]:
    """Response-token log-probs (and entropy) of `model`, exactly where verl reads them."""
    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

    responses = batch["responses"]
    r = responses.shape[1]
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                position_ids=batch["position_ids"], use_cache=False)
    logits = out.logits[:, -r - 1:-1, :].float() / temperature
    logp = logprobs_from_logits(logits, responses)
    ent = entropy_from_logits(logits) if with_entropy else None
    return logp, ent


def _logprob_pass(model: Any, batch: dict[str, Any], temperature: float, with_entropy: bool,
                  spec: dict[str, Any], value_fn: Any = None) -> tuple[Any, Any, list[int]]:
    """One inference pass as verl's workers run it: the step's batch dispatched over the data-parallel ranks in
    equal contiguous parts, each rank's part cut by verl's own splitter into micro-batches of the bundle's
    log-prob size (or packed into its token budget), outputs put back in sample order (dynamic batching
    reorders). Returns (log-probs or values, entropy, micro-batches per rank)."""
    import torch
    from tensordict import TensorDict

    fields = ["input_ids", "attention_mask", "position_ids", "responses", "response_mask"]
    size = batch["input_ids"].shape[0]
    td = TensorDict({k: batch[k] for k in fields}, batch_size=[size])
    td["sample_id"] = torch.arange(size)
    out: Any = None
    ent_out: Any = None
    counts = []
    with torch.no_grad():
        for shard in td.chunk(int(spec["dp"])):
            micro_batches, _ = _micro_batches(shard, spec["dynamic"], spec.get("micro"), spec.get("token_budget"))
            counts.append(len(micro_batches))
            for micro in micro_batches:
                ids = micro["sample_id"]
                mb = {k: micro[k] for k in fields}
                if value_fn is not None:
                    lp, ent = value_fn(mb), None
                else:
                    lp, ent = _forward_logprobs(model, mb, temperature, with_entropy)
                if out is None:
                    out = torch.zeros((size, *lp.shape[1:]), dtype=lp.dtype)
                out[ids] = lp
                if ent is not None:
                    if ent_out is None:
                        ent_out = torch.zeros((size, *ent.shape[1:]), dtype=ent.dtype)
                    ent_out[ids] = ent
    return out, ent_out, counts


# Megatron's fused module names (model.lora.target_modules) → the Hugging Face modules they fuse
MEGATRON_TO_HF = {"linear_qkv": ["q_proj", "k_proj", "v_proj"], "linear_proj": ["o_proj"],
                  "linear_fc1": ["gate_proj", "up_proj"], "linear_fc2": ["down_proj"],
                  "linear_q": ["q_proj"], "linear_k": ["k_proj"], "linear_v": ["v_proj"],
                  "linear_fc1_gate": ["gate_proj"], "linear_fc1_up": ["up_proj"]}


def _lora_config(model_cfg: Any, megatron: bool = False) -> Any:
    """peft's LoraConfig as verl's FSDP engine builds it (workers/engine/fsdp/transformer_impl.py:359-368); for a
    Megatron bundle, the same adapters from model.lora (rank, alpha, target_modules: Megatron-Bridge's LoRA is the
    same low-rank update on the same linear layers, under Megatron's fused names; workers/config/megatron_peft.py)."""
    from omegaconf import OmegaConf
    from peft import LoraConfig, TaskType

    from wizard.verlspec.lora import MEGATRON_TARGET_MODULES, engine_rank

    def plain(v: Any) -> Any:
        return OmegaConf.to_container(v) if OmegaConf.is_config(v) else v

    if megatron:
        block = model_cfg.get("lora", {}) or {}
        names = plain(block.get("target_modules", list(MEGATRON_TARGET_MODULES))) or list(MEGATRON_TARGET_MODULES)
        unknown = [n for n in names if n not in MEGATRON_TO_HF]
        if unknown:
            raise ValueError(f"model.lora.target_modules {unknown} have no Hugging Face counterpart the cpu smoke knows "
                             f"(it knows {', '.join(MEGATRON_TO_HF)})")
        target: Any = ("all-linear" if sorted(names) == sorted(MEGATRON_TARGET_MODULES) else
                       sorted({hf for n in names for hf in MEGATRON_TO_HF[n]}))
        return LoraConfig(task_type=TaskType.CAUSAL_LM, r=engine_rank(model_cfg, megatron=True),
                          lora_alpha=int(block.get("alpha", 32) or 32), target_modules=target,
                          lora_dropout=float(block.get("dropout", 0.0) or 0.0), bias="none")
    kwargs: dict[str, Any] = {"task_type": TaskType.CAUSAL_LM, "r": int(model_cfg.lora_rank),
                              "lora_alpha": int(model_cfg.get("lora_alpha", 16) or 16),
                              "target_modules": plain(model_cfg.get("target_modules", "all-linear")),
                              "exclude_modules": plain(model_cfg.get("exclude_modules", None)), "bias": "none"}
    return LoraConfig(**kwargs)


def _split_digests(model: Any) -> dict[str, str]:
    """sha256 of the base weights and of the LoRA adapters separately (peft names adapter tensors lora_*)."""
    import torch

    hashes = {"base": hashlib.sha256(), "adapters": hashlib.sha256()}
    for name, tensor in sorted(model.state_dict().items()):
        h = hashes["adapters" if ".lora_" in name else "base"]
        h.update(name.replace(".base_layer", "").encode())
        h.update(tensor.detach().to("cpu").contiguous().view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return {k: v.hexdigest() for k, v in hashes.items()}


def _micro_batches(mb: Any, dynamic: bool, micro: Optional[int], budget: Optional[int]) -> tuple[list[Any], Any]:
    """verl's own split of one rank's mini-batch into micro-batches (fixed size or token budget)."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches

    if dynamic:
        tu.assign_non_tensor(mb, use_dynamic_bsz=True, max_token_len_per_gpu=int(budget or 0))
    else:
        tu.assign_non_tensor(mb, use_dynamic_bsz=False, micro_batch_size_per_gpu=int(micro or 0))
    return prepare_micro_batches(mb)


class GradientLedger:
    """What each micro-batch's backward pass put into the accumulated gradients, measured on the
    gradients themselves (never taken from the loop's own bookkeeping).

    Per micro-batch: `backprop` (the backward pass reached its model output: a tensor hook fired),
    `carried` (norm of the loss's gradient at that output) and `added` (norm of what the parameters'
    .grad gained). Its samples reached the weights when the backward ran and whatever gradient it
    carried arrived (`reached`): a skipped backward, or a gradient dropped on the way, shows."""

    def __init__(self, params: list[Any]) -> None:
        self.params = params
        self.entries: list[dict[str, Any]] = []
        self._before: list[Any] = []

    def watch(self, output: Any, samples: list[int], **where: int) -> dict[str, Any]:
        """Call after the forward pass, before the backward pass, with a tensor on the loss's path."""
        entry: dict[str, Any] = {**where, "samples": samples, "backprop": False, "carried": 0.0, "added": 0.0}

        def seen(grad: Any) -> None:
            entry["backprop"] = True
            entry["carried"] = float(grad.detach().float().norm())

        output.register_hook(seen)
        self._before = [None if q.grad is None else q.grad.detach().clone() for q in self.params]
        self.entries.append(entry)
        return entry

    def settle(self, entry: dict[str, Any]) -> None:
        """Call after the backward pass: the norm of what it added to the gradients."""
        total = 0.0
        for q, before in zip(self.params, self._before, strict=True):
            if q.grad is not None:
                delta = q.grad.detach() if before is None else q.grad.detach() - before
                total += float(delta.float().pow(2).sum())
        self._before = []
        entry["added"] = math.sqrt(total)
        entry["reached"] = bool(entry["backprop"] and (entry["added"] > 0 or entry["carried"] == 0))

    def step_summary(self, step: int) -> dict[str, Any]:
        mine = [e for e in self.entries if e["step"] == step]
        return {"loss_grad_norm": math.sqrt(sum(e["carried"] ** 2 for e in mine)),
                "micro_grad_added": [round(e["added"], 6) for e in mine]}


class _TrainedRole:
    """What the actor and the critic share: gradient accumulation over micro-batches, then the
    data-parallel mean, each a method so that a test can plant a fault in it."""

    def _backward(self, loss: Any, micro: int) -> None:
        """Back-propagate one micro-batch's loss (`micro`: its index in the rank's mini-batch)."""
        loss.backward()

    def _all_reduce(self, params: list[Any], dp: int) -> None:
        """The data-parallel all-reduce: the mean of the emulated ranks' gradients."""
        for q in params:
            if q.grad is not None:
                q.grad.div_(dp)

    def _dispatch(self, td: Any, dp: int) -> list[Any]:
        """verl dispatches a batch to the data-parallel ranks in equal contiguous parts."""
        return list(td.chunk(dp))

    def _split(self, mb: Any, spec: dict[str, Any]) -> list[Any]:
        """One rank's mini-batch cut into micro-batches by verl's own splitter."""
        return _micro_batches(mb, spec["dynamic"], spec.get("micro"), spec.get("token_budget"))[0]

    def _accumulate(self, ledger: GradientLedger, loss: Any, output: Any, samples: list[int], *, step: int,
                    rank: int, micro: int) -> None:
        entry = ledger.watch(output, samples, step=step, rank=rank, micro=micro)
        self._backward(loss, micro)
        ledger.settle(entry)


# =============================================================================================
# the roles (each one a Ray actor process)


class ActorRolloutRole(_TrainedRole):
    """The policy: rollout (sampling), old log-probs and the actor update."""

    def __init__(self, config: dict[str, Any], seed: int) -> None:
        _worker_setup()
        from omegaconf import OmegaConf

        # imported now, while the driver prepares the data and the tiny model
        import verl.trainer.ppo.core_algos  # noqa: F401
        import verl.workers.engine.utils  # noqa: F401

        self.cfg = OmegaConf.create(config)
        self.seed = seed
        self.model: Any = None
        self.tokenizer: Any = None
        self.optimizer: Any = None

    def load(self, model_dir: str) -> dict[str, Any]:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        from wizard.verlspec.lora import engine_rank

        self.megatron = str(self.cfg.actor_rollout_ref.actor.get("strategy", "fsdp")) == "megatron"
        self.lora = engine_rank(self.cfg.actor_rollout_ref.model, megatron=self.megatron) > 0
        if self.lora:
            self.model = self._apply_lora(self.model)
        self.model.train()
        optim = self.cfg.actor_rollout_ref.actor.optim
        # verl's optimizer takes the module's parameters; under LoRA only the adapters require gradients
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=float(optim.lr),
                                           betas=tuple(optim.get("betas", (0.9, 0.999))),
                                           weight_decay=float(optim.get("weight_decay", 0.01)))
        return {"digest": _digest(self.model), "who": _whoami("actor+rollout", self.model),
                "trainable": sum(p.numel() for p in self.model.parameters() if p.requires_grad),
                "parameters": sum(p.numel() for p in self.model.parameters()),
                "split": _split_digests(self.model) if self.lora else None}

    def _apply_lora(self, model: Any) -> Any:
        """LoRA adapters as verl's FSDP engine adds them: peft's get_peft_model, base weights frozen."""
        from peft import get_peft_model

        return get_peft_model(model, _lora_config(self.cfg.actor_rollout_ref.model, self.megatron))

    def _reference_context(self) -> Any:
        """The reference inside the actor: verl computes it with the adapters disabled
        (trainer_base.py:1703-1707 sets no_lora_adapter; engine_workers.py:425 enters engine.disable_adapter())."""
        import contextlib

        return self.model.disable_adapter() if self.lora else contextlib.nullcontext()

    def digest(self) -> str:
        return _digest(self.model)

    def split_digests(self) -> Optional[dict[str, str]]:
        return _split_digests(self.model) if self.lora else None

    def who(self) -> dict[str, Any]:
        return _whoami("actor+rollout", self.model)

    def generate(self, prompts: list[list[int]], n: int, max_new_tokens: int, temperature: float,
                 do_sample: bool, seed: int, width: int) -> dict[str, Any]:
        """n samples per prompt (interleaved, as verl repeats a batch); prompts left-padded to `width`,
        responses right-padded to `max_new_tokens`; response_mask ends after the first EOS."""
        import torch

        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        eos = tok.eos_token_id
        rows = [p for p in prompts for _ in range(n)]
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        att = torch.zeros((len(rows), width), dtype=torch.long)
        for i, p in enumerate(rows):
            ids[i, width - len(p):] = torch.tensor(p)
            att[i, width - len(p):] = 1
        rollout = self.cfg.actor_rollout_ref.rollout
        top_k = int(rollout.get("top_k", -1) or -1)
        torch.manual_seed(seed)
        self.model.eval()
        with torch.no_grad():
            kwargs: dict[str, Any] = dict(max_new_tokens=max_new_tokens, pad_token_id=pad, eos_token_id=eos,
                                          do_sample=do_sample)
            if do_sample:
                kwargs.update(temperature=temperature, top_k=top_k if top_k > 0 else 0,
                              top_p=float(rollout.get("top_p", 1.0)))
            out = self.model.generate(input_ids=ids, attention_mask=att, **kwargs)
        self.model.train()
        gen = out[:, width:]
        responses = torch.full((len(rows), max_new_tokens), pad, dtype=torch.long)
        responses[:, : gen.shape[1]] = gen
        mask = torch.zeros_like(responses)
        truncated = 0
        for i in range(len(rows)):
            row = responses[i].tolist()
            if eos in row:
                end = row.index(eos) + 1
            else:
                end, truncated = max_new_tokens, truncated + 1
            mask[i, :end] = 1
            responses[i, end:] = pad
        attention = torch.cat([att, mask], dim=1)
        return {
            "prompts": ids, "responses": responses, "input_ids": torch.cat([ids, responses], dim=1),
            "attention_mask": attention, "position_ids": (attention.cumsum(-1) - 1).clamp(min=0),
            "response_mask": mask, "truncated": truncated,
        }

    def compute_log_prob(self, batch: dict[str, Any], spec: dict[str, Any], with_entropy: bool = True) -> dict[str, Any]:
        """Old log-probs (and entropy) with the bundle's rollout.log_prob_* micro-batching, per rank."""
        temp = float(self.cfg.actor_rollout_ref.rollout.temperature)
        lp, ent, counts = _logprob_pass(self.model, batch, temp, with_entropy, spec)
        return {"old_log_probs": lp, "entropy": ent, "micro_batches_per_rank": counts}

    def compute_ref_log_prob(self, batch: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
        """Reference log-probs from the actor's own process: LoRA (the base with the adapters disabled, as verl
        does), or the fault-injection test's reference that shares the actor's weights."""
        temp = float(self.cfg.actor_rollout_ref.rollout.temperature)
        with self._reference_context():
            lp, _, counts = _logprob_pass(self.model, batch, temp, False, spec)
        return {"ref_log_prob": lp, "micro_batches_per_rank": counts, "who": _whoami("reference")}

    def update(self, batch: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
        """verl's actor update: mini-batches from verl's iterator, micro-batches from verl's splitter,
        the loss assembled as verl's `ppo_loss` does, one optimizer step per mini-batch."""
        import torch
        from tensordict import TensorDict

        from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn, kl_penalty
        from verl.utils import tensordict_utils as tu
        from verl.utils.config import omega_conf_to_dataclass

        acfg = omega_conf_to_dataclass(self.cfg.actor_rollout_ref.actor)
        loss_fn = get_policy_loss_fn(acfg.policy_loss.get("loss_mode", "vanilla"))
        temp = float(self.cfg.actor_rollout_ref.rollout.temperature)
        dp, mini = int(spec["dp"]), int(spec["mini_samples"])
        use_kl_loss = bool(acfg.use_kl_loss)
        calc_entropy = bool(acfg.get("calculate_entropy", False)) or float(acfg.entropy_coeff) != 0.0
        fields = ["input_ids", "attention_mask", "position_ids", "responses", "response_mask", "old_log_probs",
                  "advantages"] + (["ref_log_prob"] if use_kl_loss else [])
        size = batch["input_ids"].shape[0]
        td = TensorDict({k: batch[k] for k in fields}, batch_size=[size])
        td["sample_id"] = torch.arange(size)
        shards = self._dispatch(td, dp)
        iters = [tu.make_iterator(shard, mini_batch_size=mini // dp, epochs=int(acfg.ppo_epochs),
                                  seed=int(acfg.data_loader_seed) + rank,
                                  dataloader_kwargs={"shuffle": bool(acfg.shuffle)})
                 for rank, shard in enumerate(shards)]
        params = [p for p in self.model.parameters() if p.requires_grad]
        ledger = GradientLedger(params)
        steps: list[dict[str, Any]] = []
        consumed: list[list[int]] = []
        for step, minis in enumerate(zip(*iters, strict=True)):
            tokens = int(sum(int(m["response_mask"].sum()) for m in minis))
            self.optimizer.zero_grad()
            totals: dict[str, float] = {"pg_loss": 0.0, "kl_loss": 0.0, "entropy_loss": 0.0}
            clipfrac: list[float] = []
            ppo_kl: list[float] = []
            micro_counts, micro_tokens = [], []
            for rank, mb in enumerate(minis):
                micro_batches = self._split(mb, spec)
                micro_counts.append(len(micro_batches))
                for index, micro in enumerate(micro_batches):
                    ids = [int(i) for i in micro["sample_id"].tolist()]
                    consumed.append(ids)
                    micro_tokens.append(int(micro["attention_mask"].sum()))  # what verl's token budget bounds
                    mbatch = {k: micro[k] for k in fields}
                    logp, ent = _forward_logprobs(self.model, mbatch, temp, calc_entropy)
                    mask = mbatch["response_mask"].to(bool)
                    acfg.global_batch_info.update(dp_size=dp, batch_num_tokens=tokens, global_batch_size=mini,
                                                  loss_scale_factor=acfg.loss_scale_factor)
                    gbi = acfg.global_batch_info
                    pg_loss, pg_metrics = loss_fn(old_log_prob=mbatch["old_log_probs"], log_prob=logp,
                                                  advantages=mbatch["advantages"], response_mask=mask,
                                                  loss_agg_mode=acfg.loss_agg_mode, config=acfg,
                                                  rollout_is_weights=None)
                    loss = pg_loss
                    totals["pg_loss"] += float(pg_loss.detach()) / dp
                    clipfrac.append(float(pg_metrics.get("actor/pg_clipfrac", 0.0)))
                    ppo_kl.append(float(pg_metrics.get("actor/ppo_kl", 0.0)))
                    if ent is not None:
                        ent_loss = agg_loss(loss_mat=ent, loss_mask=mask, loss_agg_mode=acfg.loss_agg_mode, **gbi)
                        loss = loss - float(acfg.entropy_coeff) * ent_loss
                        totals["entropy_loss"] += float(ent_loss.detach()) / dp
                    if use_kl_loss:
                        kld = kl_penalty(logprob=logp, ref_logprob=mbatch["ref_log_prob"], kl_penalty=acfg.kl_loss_type)
                        kl_loss = agg_loss(loss_mat=kld, loss_mask=mask, loss_agg_mode=acfg.loss_agg_mode, **gbi)
                        loss = loss + kl_loss * float(acfg.kl_loss_coef)
                        totals["kl_loss"] += float(kl_loss.detach()) / dp
                    self._accumulate(ledger, loss, logp, ids, step=step, rank=rank, micro=index)
            self._all_reduce(params, dp)
            clip = float(acfg.optim.get("clip_grad", 1.0) or 1.0)
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
            stepped = math.isfinite(grad_norm)
            if stepped:
                self.optimizer.step()
            steps.append({"step": step, "samples": int(sum(m.batch_size[0] for m in minis)), "tokens": tokens,
                          "micro_batches_per_rank": micro_counts, "micro_tokens_max": max(micro_tokens, default=0),
                          "grad_norm": grad_norm, "stepped": stepped,
                          **ledger.step_summary(step),
                          "pg_loss": totals["pg_loss"], "kl_loss": totals["kl_loss"] if use_kl_loss else None,
                          "entropy_loss": totals["entropy_loss"] if ent is not None else None,
                          "pg_clipfrac": sum(clipfrac) / max(1, len(clipfrac)),
                          "ppo_kl": sum(ppo_kl) / max(1, len(ppo_kl))})
        return {"steps": steps, "consumed": consumed, "micro": ledger.entries, "epochs": int(acfg.ppo_epochs),
                "loss_mode": acfg.policy_loss.get("loss_mode", "vanilla"), "loss_agg_mode": acfg.loss_agg_mode}


class ReferenceRole:
    """A frozen copy of the initial policy, in its own process."""

    def __init__(self, config: dict[str, Any], seed: int) -> None:
        _worker_setup()
        from omegaconf import OmegaConf

        import verl.utils.torch_functional  # noqa: F401

        self.cfg = OmegaConf.create(config)
        self.model: Any = None

    def load(self, model_dir: str) -> dict[str, Any]:
        import torch
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        self.model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        return {"digest": _digest(self.model), "who": _whoami("reference", self.model)}

    def digest(self) -> str:
        return _digest(self.model)

    def who(self) -> dict[str, Any]:
        return _whoami("reference", self.model)

    def compute_ref_log_prob(self, batch: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
        """Reference log-probs with the bundle's ref.log_prob_* micro-batching, per rank."""
        temp = float(self.cfg.actor_rollout_ref.rollout.temperature)
        lp, _, counts = _logprob_pass(self.model, batch, temp, False, spec)
        return {"ref_log_prob": lp, "micro_batches_per_rank": counts, "who": _whoami("reference")}


class CriticRole(_TrainedRole):
    """The value model: a token-classification head on the policy's architecture, its own optimizer."""

    def __init__(self, config: dict[str, Any], seed: int) -> None:
        _worker_setup()
        from omegaconf import OmegaConf

        import verl.trainer.ppo.core_algos  # noqa: F401

        self.cfg = OmegaConf.create(config)
        self.seed = seed
        self.model: Any = None
        self.optimizer: Any = None

    def load(self, model_dir: str) -> dict[str, Any]:
        import torch
        from transformers import AutoModelForTokenClassification

        torch.manual_seed(self.seed + 1)
        self.model = AutoModelForTokenClassification.from_pretrained(model_dir, num_labels=1, dtype=torch.float32)
        self.model.train()
        optim = self.cfg.critic.optim
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=float(optim.lr),
                                           betas=tuple(optim.get("betas", (0.9, 0.999))),
                                           weight_decay=float(optim.get("weight_decay", 0.01)))
        return {"digest": _digest(self.model), "who": _whoami("critic", self.model)}

    def digest(self) -> str:
        return _digest(self.model)

    def who(self) -> dict[str, Any]:
        return _whoami("critic", self.model)

    def _values(self, batch: dict[str, Any]) -> Any:
        r = batch["responses"].shape[1]
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         position_ids=batch["position_ids"], use_cache=False)
        values = out.logits.squeeze(-1)[:, -r - 1:-1]  # verl: the value before each response token
        return values * batch["response_mask"]

    def compute_values(self, batch: dict[str, Any], spec: dict[str, Any]) -> Any:
        """Values with the critic's micro-batching, per rank."""
        return _logprob_pass(self.model, batch, 1.0, False, spec, value_fn=self._values)[0]

    def update(self, batch: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
        import torch
        from tensordict import TensorDict

        from verl.trainer.ppo.core_algos import compute_value_loss
        from verl.utils import tensordict_utils as tu

        ccfg = self.cfg.critic
        dp, mini = int(spec["dp"]), int(spec["mini_samples"])
        fields = ["input_ids", "attention_mask", "position_ids", "responses", "response_mask", "values", "returns"]
        size = batch["input_ids"].shape[0]
        td = TensorDict({k: batch[k] for k in fields}, batch_size=[size])
        td["sample_id"] = torch.arange(size)
        iters = [tu.make_iterator(shard, mini_batch_size=mini // dp, epochs=int(ccfg.ppo_epochs),
                                  seed=int(ccfg.get("data_loader_seed", 42) or 42) + rank,
                                  dataloader_kwargs={"shuffle": bool(ccfg.get("shuffle", False))})
                 for rank, shard in enumerate(self._dispatch(td, dp))]
        params = [p for p in self.model.parameters() if p.requires_grad]
        ledger = GradientLedger(params)
        steps, consumed = [], []
        for step, minis in enumerate(zip(*iters, strict=True)):
            tokens = int(sum(int(m["response_mask"].sum()) for m in minis))
            self.optimizer.zero_grad()
            vf_total, micro_counts = 0.0, []
            for rank, mb in enumerate(minis):
                micro_batches = self._split(mb, spec)
                micro_counts.append(len(micro_batches))
                for index, micro in enumerate(micro_batches):
                    ids = [int(i) for i in micro["sample_id"].tolist()]
                    consumed.append(ids)
                    vpreds = self._values({k: micro[k] for k in fields})
                    vf_loss, _ = compute_value_loss(vpreds=vpreds, returns=micro["returns"], values=micro["values"],
                                                    response_mask=micro["response_mask"],
                                                    cliprange_value=float(ccfg.cliprange_value),
                                                    loss_agg_mode=str(ccfg.loss_agg_mode), dp_size=dp,
                                                    batch_num_tokens=tokens, global_batch_size=mini)
                    self._accumulate(ledger, vf_loss, vpreds, ids, step=step, rank=rank, micro=index)
                    vf_total += float(vf_loss.detach()) / dp
            self._all_reduce(params, dp)
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, float(ccfg.optim.get("clip_grad", 1.0) or 1.0)))
            if math.isfinite(grad_norm):
                self.optimizer.step()
            steps.append({"step": step, "vf_loss": vf_total, "grad_norm": grad_norm,
                          "micro_batches_per_rank": micro_counts, "stepped": math.isfinite(grad_norm),
                          **ledger.step_summary(step)})
        return {"steps": steps, "consumed": consumed, "micro": ledger.entries}


class JudgeStandIn:
    """A stand-in for the judge LLM behind verl's reward router (reward=genrm), on 127.0.0.1: an OpenAI
    chat-completions endpoint that grades the bundle's judge prompt with verl's rule scorer. It reads the reference and
    the response under the headings of the bundle's JUDGE_PROMPT ("Reference answer:", "Student's answer:") and
    answers "Score: 10" when verl's default_compute_score for the row's data_source gives the response full marks
    (for a data_source verl has no scorer for: when the reference is the response's last line or number), else
    "Score: 0". What is real around it: the bundle's judge function (its request over HTTP, its verdict parsing) and
    verl's reward manager. Requests are bounded (1 MiB) and the server is a daemon thread of the reward process."""

    LABEL = "a stand-in judge on CPU (grades with verl's rule scorer; the judge LLM needs vLLM or SGLang on a GPU)"
    MAX_BODY = 1 << 20
    _SECTIONS = re.compile(r"Reference answer:\s*(.*?)\s*Student's answer:\s*(.*?)\s*(?:\n\nJudge whether|$)", re.S)

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        judge = self
        self.data_source = ""

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                size = int(self.headers.get("Content-Length") or 0)
                if self.path.rstrip("/") != "/v1/chat/completions" or not 0 < size <= judge.MAX_BODY:
                    self.send_error(400 if size > judge.MAX_BODY else 404)
                    return
                try:
                    body = json.loads(self.rfile.read(size))
                    text = str(body["messages"][-1]["content"])
                except (ValueError, KeyError, IndexError, TypeError):
                    self.send_error(400)
                    return
                reply = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant",
                                                                         "content": judge.verdict(text)}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:  # quiet
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True, name="judge-stand-in").start()

    def verdict(self, prompt: str) -> str:
        m = self._SECTIONS.search(prompt)
        if m is None:
            return "The prompt has no 'Reference answer:' / 'Student's answer:' sections to grade."
        reference, response = m.group(1).strip(), m.group(2).strip()
        return f"Stand-in verdict.\nScore: {10 if self._right(response, reference) else 0}"

    def _right(self, response: str, reference: str) -> bool:
        from verl.utils.reward_score import default_compute_score

        try:
            res = default_compute_score(self.data_source, response, reference)
            return float(res["score"] if isinstance(res, dict) else res) >= 1.0
        except NotImplementedError:  # no verl scorer for this data_source
            tail = response.strip().splitlines()[-1] if response.strip() else ""
            numbers = re.findall(r"-?\d[\d,]*(?:\.\d+)?", response)
            return bool(reference) and (tail.strip() == reference or (bool(numbers) and
                                                                       numbers[-1].replace(",", "") == reference))


class RewardRole:
    """verl's reward manager (`reward.reward_manager.name`) around the bundle's scorer, on CPU."""

    def __init__(self, config: dict[str, Any], seed: int) -> None:
        _worker_setup()
        from omegaconf import OmegaConf

        from verl.trainer.ppo.reward import load_reward_manager  # noqa: F401

        self.cfg = OmegaConf.create(config)
        self.manager: Any = None
        self.judge_kwargs: dict[str, Any] = {}

    def load(self, model_dir: str) -> dict[str, Any]:
        from transformers import AutoTokenizer

        from verl.trainer.ppo.reward import load_reward_manager

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        fn = self.cfg.reward.custom_reward_function
        self.judge_kwargs: dict[str, Any] = {}
        if self.cfg.reward.reward_model.enable and fn.get("path"):
            # a judge (reward=genrm): verl's reward manager hands the function the router's address and the judge's
            # tokenizer (naive.py:56-63); the judge LLM needs vLLM/SGLang on a GPU, so a stand-in answers here
            self.judge = JudgeStandIn()
            self.judge_kwargs = {"reward_router_address": self.judge.address, "reward_model_tokenizer": tokenizer}
        self.manager = load_reward_manager(self.cfg, tokenizer, **self.judge_kwargs)
        scorer = (f"{fn.path}:{fn.name}" if fn.get("path") else "verl's default_compute_score (by data_source)")
        if self.judge_kwargs:
            scorer += f" asking {JudgeStandIn.LABEL}"
        return {"manager": type(self.manager).__name__, "scorer": scorer, "who": _whoami("reward")}

    def who(self) -> dict[str, Any]:
        return _whoami("reward")

    def score(self, tensors: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Score every sample exactly as verl's RewardLoopWorker does (one run_single per sample)."""
        import copy

        import numpy as np

        from verl import DataProto

        non_tensors = {
            "data_source": np.array([r["data_source"] for r in rows], dtype=object),
            "reward_model": np.array([copy.deepcopy(r["reward_model"]) for r in rows], dtype=object),
            "extra_info": np.array([copy.deepcopy(r.get("extra_info") or {}) for r in rows], dtype=object),
        }
        data = DataProto.from_dict(tensors={k: tensors[k] for k in ("prompts", "responses", "attention_mask")},
                                   non_tensors=non_tensors)
        if self.judge_kwargs and rows:
            self.judge.data_source = str(rows[0]["data_source"])
        loop = self.manager.loop

        async def run_all() -> list[dict[str, Any]]:
            import asyncio

            return list(await asyncio.gather(*(self.manager.run_single(data[i:i + 1]) for i in range(len(data)))))

        results = loop.run_until_complete(run_all())
        scores = [float(r["reward_score"]) for r in results]
        rm_scores = type(self.manager).assemble_rm_scores(data, scores)
        decoded = [self.manager.tokenizer.decode(tensors["responses"][i][: int(tensors["response_mask"][i].sum())],
                                                 skip_special_tokens=True) for i in range(min(len(rows), 4))]
        return {"scores": scores, "rm_scores": rm_scores, "examples": decoded}

    def probe(self, items: list[dict[str, Any]]) -> list[float]:
        """Scores of hand-written responses (diagnosis only: never used for training)."""
        import inspect

        out = []
        for it in items:
            if self.judge_kwargs:
                self.judge.data_source = str(it["data_source"])
            res = self.manager.compute_score(data_source=it["data_source"], solution_str=it["text"],
                                             ground_truth=it["ground_truth"], extra_info=dict(it.get("extra_info") or {}),
                                             **self.judge_kwargs)
            if inspect.isawaitable(res):
                res = self.manager.loop.run_until_complete(res)
            out.append(float(res["score"] if isinstance(res, dict) else res))
        return out


# =============================================================================================
# the driver


@dataclass
class _Roles:
    actor: Any
    reward: Any
    ref: Any = None
    critic: Any = None
    who: dict[str, Any] = field(default_factory=dict)


def _cause(exc: BaseException) -> BaseException:
    """The user's exception behind Ray's wrapper."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def _rows_file(ctx: SmokeContext) -> tuple[str, str]:
    """(path of the training rows, where they came from): the bundle's prepared data if it exists,
    else the bundle's own data/prepare_data.py run into a temporary folder."""
    cfg = ctx.cfg
    files = cfg.data.train_files
    first = str(files[0] if not isinstance(files, str) else files)
    path = first if os.path.isabs(first) else os.path.join(ctx.bundle, first)
    if os.path.isfile(path):
        return path, f"{first} (data.train_files)"
    script = os.path.join(ctx.bundle, "data", "prepare_data.py")
    if not os.path.isfile(script):
        raise SmokeFailure(f"data.train_files {first!r} does not exist and the bundle has no data/prepare_data.py",
                           "write the training file first, or re-render the bundle with verl-init")
    out = os.path.join(ctx.workdir, "prepared")
    cmd = [sys.executable, script, "--out", out]
    with open(script, encoding="utf-8") as fh:
        text = fh.read()
    hub = "SOURCE = 'file'" not in text  # gsm8k / math read the hub (or --local-dir); a file reads itself
    local = ctx.options.data_dir if hub else None
    if local:
        cmd += ["--local-dir", os.path.abspath(local)]
    elif "SOURCE = 'gsm8k'" in text and "--offline-dir" in text and "OFFLINE_DIR = None" in text:
        from wizard.resources import offline_data  # a GPU plan's bundle: the smoke may use the built-in rows

        cmd += ["--offline-dir", str(offline_data())]
    env = dict(os.environ)  # the user's own HF_HUB_OFFLINE (the probe set it to 1 for the model's sake)
    own = ctx.env_restore["HF_HUB_OFFLINE"] if "HF_HUB_OFFLINE" in ctx.env_restore else env.get("HF_HUB_OFFLINE")
    env.pop("HF_HUB_OFFLINE", None)
    env.update({"HF_HUB_OFFLINE": own} if own is not None else {})
    proc = subprocess.run(cmd, cwd=ctx.bundle, capture_output=True, text=True, timeout=600, env=env)
    ctx.log(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not os.path.isfile(os.path.join(out, "train.parquet")):
        last = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
        hint = "run it yourself first (python data/prepare_data.py), or pass --data-dir with a local copy of the dataset"
        raise SmokeFailure(f"the bundle's data/prepare_data.py failed: {last}", hint)
    how = "data/prepare_data.py" + (f" --local-dir {local}" if local else "")
    offline = [ln[len("prepare_data: "):] for ln in proc.stdout.splitlines()  # the fallback, said as the script says it
               if ln.startswith("prepare_data: hub unreachable: using ")]
    return (os.path.join(out, "train.parquet"),
            f"the bundle's {how} (run into a temporary folder: {first} is not written yet)"
            + (f"; {offline[0]}" if offline else ""))


def _first_rows(path: str, out_dir: str, limit: int) -> tuple[str, int]:
    """The first `limit` rows of a parquet/jsonl/json file, copied unchanged into `out_dir` (same format)."""
    lower = path.lower()
    os.makedirs(out_dir, exist_ok=True)
    if lower.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        dest = os.path.join(out_dir, "rows.parquet")
        pq.write_table(table.slice(0, limit), dest)
        return dest, table.num_rows
    if lower.endswith(".jsonl"):
        with open(path, encoding="utf-8") as fh:
            lines = [line for line in fh if line.strip()]
        dest = os.path.join(out_dir, "rows.jsonl")
        with open(dest, "w", encoding="utf-8") as fh:
            fh.writelines(lines[:limit])
        return dest, len(lines)
    if lower.endswith(".json"):
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        rows = doc if isinstance(doc, list) else next((v for v in doc.values() if isinstance(v, list)), [])
        dest = os.path.join(out_dir, "rows.jsonl")
        with open(dest, "w", encoding="utf-8") as fh:
            for row in rows[:limit]:
                fh.write(json.dumps(row) + "\n")
        return dest, len(rows)
    raise SmokeFailure(f"verl reads parquet, json and jsonl, not {os.path.basename(path)}",
                       "convert it with the bundle's data/prepare_data.py")


def _file_rows(path: str) -> list[dict[str, Any]]:
    """The rows of the prepared data file the smoke reads (parquet, else JSON lines); raises when unreadable."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _texts_for_tokenizer(path: str) -> list[str]:
    """Every prompt text and ground truth of the rows (for the data-trained tokenizer)."""
    texts: list[str] = []
    try:
        rows = _file_rows(path)
    except Exception:  # noqa: BLE001 - the data phase reports unreadable files
        return texts
    for row in rows:
        prompt = row.get("prompt")
        if isinstance(prompt, list):
            texts += [str(m.get("content", "")) for m in prompt if isinstance(m, dict)]
        elif prompt is not None:
            texts.append(str(prompt))
        rm = row.get("reward_model")
        if isinstance(rm, dict) and rm.get("ground_truth") is not None:
            texts.append(str(rm["ground_truth"]))
    return texts


def _cat(parts: list[dict[str, Any]]) -> dict[str, Any]:
    import torch

    keys = [k for k, v in parts[0].items() if hasattr(v, "shape")]
    return {k: torch.cat([p[k] for p in parts]) for k in keys}


class CpuRun:
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

    # -----------------------------------------------------------------------------------------
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

    # ------------------------------------------------------------------------------------ probe
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

    # ------------------------------------------------------------------------------ role wiring
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

    def _draw(self, cursor: int) -> tuple[list[list[int]], list[dict[str, Any]]]:
        """The prompts (token ids) and rows of one generation batch, in the order the data phase drew them."""
        end = cursor + self.sg.prompts
        return self.prompt_ids[cursor:end], self.items[cursor:end]

    def _spec(self, kind: str, width: int) -> dict[str, Any]:
        """How a pass splits its batch: `dp` ranks, then fixed micro-batches or a token budget (the bundle's full-length
        sequences per budget, times this run's padded width)."""
        sg = self.sg
        if kind == "update":
            micro, seqs = sg.micro, sg.seqs_per_budget
        elif kind == "critic":
            micro, seqs = sg.micro, sg.critic_seqs_per_budget
        elif kind == "ref":
            micro, seqs = sg.ref_logprob_micro, sg.ref_seqs_per_budget
        else:
            micro, seqs = sg.logprob_micro, sg.logprob_seqs_per_budget
        return {"dp": sg.dp, "mini_samples": sg.samples_per_update, "dynamic": sg.dynamic, "micro": micro,
                "token_budget": seqs * width}

    # ------------------------------------------------------------------------------------- data
    def data(self, ph: Any) -> None:
        from wizard.smoketest import model as smoke_model

        ctx, cfg, sg = self.ctx, self.cfg, self.sg
        src_path, src_how = _rows_file(ctx)
        rows_path, total = _first_rows(src_path, os.path.join(ctx.workdir, "rows"), FIRST_ROWS)
        read = min(total, FIRST_ROWS)
        tok, tok_source = smoke_model.find_local_tokenizer(ctx.model_path)
        if tok is None:
            why = tok_source
            tok = smoke_model.build_bpe_tokenizer(_texts_for_tokenizer(rows_path), self.model_dir)
            tok_source = f"a byte-level BPE tokenizer trained on the bundle's rows ({why})"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        if not getattr(tok, "chat_template", None):
            raise SmokeFailure(f"the tokenizer ({tok_source}) has no chat template: verl builds every prompt with "
                               "apply_chat_template", "use an instruct/chat model, or give its tokenizer a chat_template")
        _vision_rows(ctx, rows_path, self.arch[0], read, src_how)  # a vision-language bundle stops here, saying why
        _code_rows(ctx, rows_path, read, src_how)  # a reward=sandbox bundle stops here, saying why
        items, kept = _load_with_verl(ctx, rows_path, tok)
        findings = _validate_rows(ctx, rows_path, tok)
        errors = [f for f in findings if f["severity"] == "error" and f["id"] != "VI526"]
        no_scorer = [f for f in findings if f["id"] == "VI526"]
        if errors:
            first = errors[0]
            ex = "; ".join(f"row {e['row']}: {e['problem']}" for e in first["examples"][:2])
            raise SmokeFailure(f"rows not in verl's schema: {first['message']} [{first['id']}]" + (f" ({ex})" if ex else "")
                               + f"; verl's RLHFDataset kept {kept} of {read} rows",
                               first["hint"] or "fix data/prepare_data.py's settings and run it again")
        if not items:
            raise SmokeFailure(f"verl's RLHFDataset kept none of the {read} rows",
                               "check prompt lengths against data.max_prompt_length and the prompt column")
        max_prompt = int(cfg.data.max_prompt_length)
        truncated = 0
        for i in range(sg.prompts * ctx.max_gen_batches):
            item = items[i % len(items)]
            ids = smoke_model.prompt_ids(tok, list(item["raw_prompt"]))
            if len(ids) > max_prompt:  # verl's agent loop left-truncates an over-long prompt (with a warning)
                ids, truncated = ids[-max_prompt:], truncated + 1
            self.items.append(item)
            self.prompt_ids.append(ids)
        self.tokenizer = tok
        self.width = max(len(p) for p in self.prompt_ids)
        drawn = self.items[: sg.prompts]
        distinct = len({json.dumps(it["raw_prompt"], sort_keys=True, default=str) for it in drawn})
        self.report.data = {
            "source": src_how, "rows_in_file": total, "rows_read": read, "kept_by_verl_rlhfdataset": kept,
            "prompts": sg.prompts, "distinct_prompts": distinct, "reused_rows": len(items) < sg.prompts,
            "prompt_key": str(cfg.data.get("prompt_key", "prompt")), "max_prompt_length": max_prompt,
            "filter_overlong_prompts": bool(cfg.data.get("filter_overlong_prompts", False)),
            "left_truncated": truncated, "tokenizer": tok_source, "prompt_tokens_max": self.width,
            "data_sources": dict(Counter(str(it["data_source"]) for it in drawn)),
            "schema_findings": [f"{f['severity']} {f['id']}: {f['message']}" for f in findings if f["severity"] != "info"],
            "example_row": _example(drawn[0]),
        }
        # measured: verl's loader keeps every row read unless its own overlong filter is on (then the rows it
        # dropped must be the ones whose prompt is longer than max_prompt_length)
        filtering = bool(cfg.data.get("filter_overlong_prompts", True))
        overlong = _overlong_rows(rows_path, tok, str(cfg.data.get("prompt_key", "prompt")), max_prompt) if filtering else 0
        lost = read - overlong - kept
        all_kept = lost == 0
        ctx.check(4, "dataset_schema", all_kept,
                  f"{read} row(s) from {src_how}; verl's RLHFDataset kept {kept} (max_prompt_length={max_prompt}"
                  + (f", {overlong} overlong prompt(s) filtered as data.filter_overlong_prompts asks" if filtering else "")
                  + ")"
                  + ("" if all_kept else f" — {lost} row(s) lost between the file and verl's loader (not overlong)")
                  + "; prompts are chat lists and every row has data_source, reward_model.ground_truth (text) and "
                  "extra_info" + ("; multi-turn: agent_name and extra_info.tools_kwargs checked (validate-dataset "
                                  "--agent tool)" if _agent_options(ctx) else "")
                  + (f"; note: {no_scorer[0]['message']}" if no_scorer else ""),
                  {"rows_read": read, "kept_by_verl": kept, "filter_overlong_prompts": filtering, "overlong": overlong,
                   "findings": self.report.data["schema_findings"], "example_row": self.report.data["example_row"]},
                  hint="every row of the file must reach verl's loader: check data/prepare_data.py's output and the "
                       "prompt column")
        ph.detail = (f"{read} row(s) from {src_how}; verl's RLHFDataset kept {kept}; {sg.prompts} prompts drawn "
                     f"({distinct} distinct); tokenizer: {tok_source.split(' (')[0]}")

    # ------------------------------------------------------------------------------ model, roles
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

    # -------------------------------------------------------------------------- rollout + reward
    def rollout_and_reward(self) -> None:
        """Generate and score; with DAPO's group filtering, refill with new prompts as verl does."""
        import numpy as np
        import torch

        ctx, sg, cfg = self.ctx, self.sg, self.cfg
        n, temp = sg.n, float(cfg.actor_rollout_ref.rollout.temperature)
        kept: list[tuple[dict[str, Any], list[dict[str, Any]], list[float], str]] = []  # one entry per group
        all_scores: list[float] = []
        gen_batches, evicted, truncated, cursor, loaded = 0, 0, 0, 0, ""
        while True:
            prompts, rows = self._draw(cursor)
            with ctx.phase("rollout") as ph:
                if not loaded:
                    loaded = self.load_roles()
                roles = self.roles
                assert roles is not None
                out = ctx.get(roles.actor.generate.remote(prompts, n, sg.response_length, temp, True,
                                                          ctx.options.seed + gen_batches, self.width))
                truncated += int(out.pop("truncated"))
                self._record_drawn(cursor, out["prompts"], rows)
                lp_spec = self._spec("logprob", out["input_ids"].shape[1])
                lp = ctx.get(roles.actor.compute_log_prob.remote(out, lp_spec, True))  # verl: old log-probs from the actor
                out["old_log_probs"], out["entropy"] = lp["old_log_probs"], lp["entropy"]
                self.report.update["logprob_micro_batches_per_rank"] = lp["micro_batches_per_rank"]
                baseline = None
                if str(cfg.algorithm.adv_estimator) == "remax":  # ReMax: a greedy response per prompt is the baseline
                    baseline = ctx.get(roles.actor.generate.remote(prompts, 1, sg.response_length, temp, False,
                                                                   ctx.options.seed, self.width))
                    baseline.pop("truncated")
                generated = (gen_batches + 1) * sg.prompts * n
                ph.detail = (f"{loaded}; {generated} samples sampled (temperature {temp:g}, {n} per prompt, "
                             f"≤ {sg.response_length} tokens) in {gen_batches + 1} generation batch(es); "
                             "old log-probs from the actor")
            with ctx.phase("reward") as ph:
                sample_rows = [r for r in rows for _ in range(n)]
                scored = ctx.get(roles.reward.score.remote(out, sample_rows))
                base_scores = ctx.get(roles.reward.score.remote(baseline, rows))["scores"] if baseline is not None else None
                if gen_batches == 0:
                    self.report.reward["examples"] = scored["examples"]
                gen_batches += 1
                cursor += sg.prompts
                all_scores += scored["scores"]
                for j in range(len(prompts)):
                    sl = slice(j * n, (j + 1) * n)
                    group_scores = scored["scores"][sl]
                    if ctx.filter_groups and n > 1 and float(np.std(group_scores)) == 0.0:
                        evicted += 1  # verl's ReplayBuffer evicts groups whose rewards are identical
                        continue
                    group = {k: v[sl] for k, v in out.items() if hasattr(v, "shape")}
                    group["rm_scores"] = scored["rm_scores"][sl]
                    if base_scores is not None:
                        group["reward_baselines"] = torch.full((n,), float(base_scores[j]))
                    kept.append((group, [rows[j]] * n, group_scores, f"g{gen_batches}-{j}"))
                done = len(kept) >= sg.prompts or gen_batches >= ctx.max_gen_batches
                ph.detail = f"{len(all_scores)} samples scored"
                if done:
                    self.report.samples_generated = gen_batches * sg.prompts * n
                    self.rows_reach_batch()
                    self.reward_stats(all_scores, kept, gen_batches, evicted)
                    ph.detail = self.reward_detail
            if done:
                break
        kept = kept[: sg.prompts]
        batch = _cat([g for g, _, _, _ in kept])
        self.rows = [r for _, rows, _, _ in kept for r in rows]
        self.uids = np.array([uid for _, _, _, uid in kept for _ in range(n)], dtype=object)
        mask = batch["response_mask"].float()
        self.report.entropy = float((batch.pop("entropy") * mask).sum() / mask.sum())
        self.batch = batch
        lengths = batch["response_mask"].sum(-1).float()
        self.report.data["response_length_mean"] = round(float(lengths.mean()), 2)
        self.report.data["responses_cut_at_max_length"] = truncated

    def _record_drawn(self, cursor: int, prompts: Any, rows: list[dict[str, Any]]) -> None:
        """What reached one generation batch, read back from the batch's own tensors: each sample's prompt tokens
        (padding removed) and the ground truth of the row handed to the reward manager with it."""
        pad = self.tokenizer.pad_token_id
        n = self.sg.n
        got = []
        for i in range(prompts.shape[0]):
            ids = prompts[i].tolist()
            start = next((j for j, t in enumerate(ids) if t != pad), len(ids))
            got.append(ids[start:])
        truths = [str((r.get("reward_model") or {}).get("ground_truth", "")) for r in rows for _ in range(n)]
        self.drawn.append({"cursor": cursor, "prompts": got, "truths": truths})

    def rows_reach_batch(self) -> None:
        """Pitfall 4, measured: sample j·n … j·n+n-1 of every generation batch carries the prompt of the j-th row the
        data phase drew for it from verl's RLHFDataset (and that row's ground truth goes to the scorer)."""
        n, problems, rows_seen, expected_rows = self.sg.n, [], set(), 0
        for batch in self.drawn:
            cursor = batch["cursor"]
            for j in range(self.sg.prompts):
                expected_rows += 1
                want = self.prompt_ids[cursor + j] if cursor + j < len(self.prompt_ids) else None
                item = self.items[cursor + j] if cursor + j < len(self.items) else {}
                truth = str((item.get("reward_model") or {}).get("ground_truth", ""))
                samples = batch["prompts"][j * n:(j + 1) * n]
                truths = batch["truths"][j * n:(j + 1) * n]
                if len(samples) == n and all(p == want for p in samples) and all(t == truth for t in truths):
                    rows_seen.add(cursor + j)
                elif len(problems) < 4:
                    problems.append(f"row {cursor + j + 1} (of verl's loader) is not in samples {j * n + 1}-{j * n + n}"
                                    + ("" if all(t == truth for t in truths) else " (another row's ground truth)"))
        ok = len(rows_seen) == expected_rows and expected_rows > 0
        self.ctx.check(4, "rows_reach_batch", ok,
                       f"{len(rows_seen)} of {expected_rows} drawn row(s) reached the rollout batch, each as {n} "
                       "sample(s) with its own prompt tokens and ground truth"
                       + ("" if ok else " — " + "; ".join(problems)),
                       {"rows_expected": expected_rows, "rows_in_batch": len(rows_seen), "problems": problems},
                       hint="every row drawn from verl's loader must reach the rollout with its own ground truth "
                            "(a row lost or duplicated between the loader and the rollout)")

    def reward_stats(self, all_scores: list[float], kept: list[Any], gen_batches: int, evicted: int) -> None:
        import statistics

        ctx, sg = self.ctx, self.sg
        roles = self.roles
        assert roles is not None
        trained = [s for _, _, scores, _ in kept[: sg.prompts] for s in scores]
        mean = statistics.fmean(all_scores) if all_scores else 0.0
        std = statistics.pstdev(all_scores) if len(all_scores) > 1 else 0.0
        # diagnosis: how the scorer rates a right and a wrong answer written in the prompt's format
        from wizard.smoketest import model as smoke_model

        probes = []
        for _, item, truth, style in _distinct_prompts(self.items[: sg.prompts], ctx.answer_format or "number"):
            for kind, answer in (("right", truth), ("wrong", smoke_model.wrong_answer(truth, style))):
                probes.append({"kind": kind, "data_source": item["data_source"], "ground_truth": truth,
                               "extra_info": item.get("extra_info"), "text": smoke_model.response_text(style, answer)})
        probe_scores = ctx.get(roles.reward.probe.remote(probes))
        right = [s for p, s in zip(probes, probe_scores, strict=True) if p["kind"] == "right"]
        wrong = [s for p, s in zip(probes, probe_scores, strict=True) if p["kind"] == "wrong"]
        discriminates = bool(right) and all(r > w for r, w in zip(right, wrong, strict=True))
        self.report.reward.update({
            "mean": round(mean, 4), "std": round(std, 4), "min": min(all_scores, default=None),
            "max": max(all_scores, default=None), "scored": len(all_scores),
            "trained_mean": round(statistics.fmean(trained), 4) if trained else None,
            "generation_batches": gen_batches, "groups_evicted_identical_rewards": evicted if ctx.filter_groups else None,
            "probe": {"right_answer_scores": right, "wrong_answer_scores": wrong,
                      "note": "hand-written responses stating the ground truth / a wrong answer in the prompt's "
                              "format; diagnosis only, never trained on"},
        })
        self.report.reward_mean = round(statistics.fmean(trained), 4) if trained else round(mean, 4)
        self.report.reward_std = round(statistics.pstdev(trained), 4) if len(trained) > 1 else round(std, 4)
        scorer = self.report.reward.get("scorer", "")
        ctx.check(4, "scorer_discriminates", discriminates,
                  f"{scorer}: a response stating the ground truth scores {_fmt_list(right)}, a wrong one "
                  f"{_fmt_list(wrong)}" + ("" if discriminates else " — it cannot tell right from wrong"),
                  {"right": right, "wrong": wrong})
        constant = std == 0.0
        detail = (f"{len(all_scores)} samples scored by {self.report.reward.get('manager')} → {scorer}: mean {mean:.3f}, "
                  f"std {std:.3f}, min {min(all_scores, default=0):g}, max {max(all_scores, default=0):g}")
        if ctx.filter_groups:
            detail += f"; DAPO filter evicted {evicted} group(s) with identical rewards in {gen_batches} generation batch(es)"
        self.reward_detail = detail
        ctx.check(4, "rewards_vary", not constant, detail, {"mean": mean, "std": std, "n": len(all_scores)})
        if constant:
            value = all_scores[0] if all_scores else 0.0
            if not discriminates:
                cause = (f"the scorer gives {_fmt_list(right)} to responses that state the ground truth in the format "
                         f"the prompt asks for and {_fmt_list(wrong)} to wrong ones")
                hint = ("check data_source (it picks verl's scorer and its answer format), reward_model.ground_truth "
                        "(text, in the form the scorer compares) and the reward function")
            else:
                cause = "the scorer tells right from wrong, but every sampled response got the same score"
                hint = "raise --prompts so that more answers are sampled"
            raise SmokeFailure(f"every reward is {value:g} ({len(all_scores)} samples): {cause}", hint)
        if ctx.filter_groups and len(kept) < sg.prompts:
            raise SmokeFailure(f"DAPO group filtering kept {len(kept)} of {sg.prompts} groups after {gen_batches} "
                               "generation batches: rewards barely vary within a group",
                               ("check the reward function: verl 0.9.1 would keep sampling new prompts without limit "
                                "(it ignores algorithm.filter_groups.max_num_gen_batches)"))

    # -------------------------------------------------------------------------------- advantage
    def advantage(self, ph: Any) -> None:
        import torch

        from verl.trainer.ppo import core_algos
        from verl.utils.torch_functional import masked_mean

        ctx, cfg, batch = self.ctx, self.cfg, self.batch
        roles = self.roles
        assert roles is not None
        algo = cfg.algorithm
        mask = batch["response_mask"]
        parts = []
        width = batch["input_ids"].shape[1]
        if roles.ref is not None:
            ref = ctx.get(roles.ref.compute_ref_log_prob.remote(batch, self._spec("ref", width)))
            batch["ref_log_prob"] = ref["ref_log_prob"]
            self.report.update["ref_micro_batches_per_rank"] = ref["micro_batches_per_rank"]
            self.ref_who = ref["who"]  # the process that computed them (measured, not the handle's name)
            parts.append("reference log-probs" + (" (the actor with its LoRA adapters disabled)" if self.sg.lora else ""))
        if roles.critic is not None:
            batch["values"] = ctx.get(roles.critic.compute_values.remote(batch, self._spec("critic", width)))
            parts.append("critic values")
        scores = batch["rm_scores"]
        self.reward_kl = None
        if bool(algo.get("use_kl_in_reward", False)):  # verl's apply_kl_penalty
            kl_ctrl = core_algos.get_kl_controller(algo.kl_ctrl)
            kld = core_algos.kl_penalty(batch["old_log_probs"], batch["ref_log_prob"], kl_penalty=algo.kl_penalty) * mask
            batch["token_level_rewards"] = scores - kl_ctrl.value * kld
            self.reward_kl = float(torch.mean(masked_mean(kld, mask=mask, axis=-1)))
            parts.append(f"KL penalty in the reward (coef {kl_ctrl.value:g}, {algo.kl_penalty}: {self.reward_kl:.3g})")
        else:
            batch["token_level_rewards"] = scores
        adv = str(algo.adv_estimator)
        if adv == "gae":
            a, r = core_algos.compute_gae_advantage_return(token_level_rewards=batch["token_level_rewards"],
                                                           values=batch["values"], response_mask=mask,
                                                           gamma=algo.gamma, lam=algo.lam)
        elif adv == "grpo":
            a, r = core_algos.compute_grpo_outcome_advantage(
                token_level_rewards=batch["token_level_rewards"], response_mask=mask, index=self.uids,
                norm_adv_by_std_in_grpo=algo.get("norm_adv_by_std_in_grpo", True))
        else:
            fn = core_algos.get_adv_estimator_fn(adv)
            kwargs: dict[str, Any] = {"token_level_rewards": batch["token_level_rewards"], "response_mask": mask,
                                      "config": algo, "index": self.uids}
            if "reward_baselines" in batch:
                kwargs["reward_baselines"] = batch["reward_baselines"]
            a, r = fn(**kwargs)
        batch["advantages"], batch["returns"] = a, r
        finite = bool(torch.isfinite(a).all()) and bool(torch.isfinite(r).all())
        nonzero = int((a.abs() * mask).sum(-1).gt(0).sum())
        self.report.update["advantage"] = {"estimator": adv, "nonzero_samples": nonzero, "finite": finite,
                                           "mean": round(float(masked_mean(a, mask)), 4)}
        if not finite:
            raise SmokeFailure(f"{adv} advantages are not finite", "check the rewards for NaN/inf")
        if nonzero == 0:
            raise SmokeFailure(f"every {adv} advantage is 0: the update would not move the policy",
                               "rewards are identical within every group; check the reward function and samples_per_prompt")
        ph.detail = ", ".join(parts + [f"verl's {adv} estimator: {nonzero} of {a.shape[0]} samples with a non-zero advantage"])

    # ----------------------------------------------------------------------------------- update
    def update(self, ph: Any) -> None:
        from verl.trainer.ppo import core_algos
        from verl.utils.torch_functional import masked_mean

        ctx, cfg, sg, batch = self.ctx, self.cfg, self.sg, self.batch
        roles = self.roles
        assert roles is not None
        size = batch["input_ids"].shape[0]
        width = batch["input_ids"].shape[1]
        spec, cspec = self._spec("update", width), self._spec("critic", width)
        critic_ref = roles.critic.update.remote(batch, cspec) if roles.critic is not None else None
        result = ctx.get(roles.actor.update.remote(batch, spec))
        critic_result = ctx.get(critic_ref) if critic_ref is not None else None
        after: dict[str, str] = {"actor": ctx.get(roles.actor.digest.remote())}
        split_after = ctx.get(roles.actor.split_digests.remote()) if sg.lora else None
        if roles.ref is not None:
            after["reference"] = split_after["base"] if roles.ref is roles.actor and split_after else \
                ctx.get(roles.ref.digest.remote())
        if roles.critic is not None:
            after["critic"] = ctx.get(roles.critic.digest.remote())
        steps = result["steps"]
        epochs = int(result["epochs"])
        self.report.policy_loss = _mean([s["pg_loss"] for s in steps])
        kl_losses = [s["kl_loss"] for s in steps if s["kl_loss"] is not None]
        self.report.update.update({
            "actor_steps": steps, "critic_steps": critic_result["steps"] if critic_result else None,
            "loss_mode": result["loss_mode"], "loss_agg_mode": result["loss_agg_mode"], "ppo_epochs": epochs,
            "kl_loss_mean": _mean(kl_losses), "reward_kl_penalty": self.reward_kl,
            "digests": {"before": {k: v[:16] for k, v in self.digests.items()}, "after": {k: v[:16] for k, v in after.items()}},
        })
        # -- pitfall 2: every sample once per epoch, one optimizer step per mini-batch ------------------
        # "used" is measured on the gradients: a sample counts once per micro-batch backward pass that
        # reached the weights (GradientLedger), not once per micro-batch the loop merely visited
        counts, lost = _gradient_use(result)
        used = len(counts)
        once = used == size and all(c == epochs for c in counts.values()) and not lost
        self.report.samples_used = used
        expect_steps = sg.updates * epochs
        micro_ok = all(s["samples"] == sg.samples_per_update for s in steps) and len(steps) == expect_steps
        biggest = max((s["micro_tokens_max"] for s in steps), default=0)
        if not sg.dynamic:
            micro_ok = micro_ok and all(c == sg.micro_batches for s in steps for c in s["micro_batches_per_rank"])
        else:  # measured: no micro-batch holds more tokens than the budget
            micro_ok = micro_ok and biggest <= spec["token_budget"]
        per_rank = [c for s in steps for c in s["micro_batches_per_rank"]]
        added = [e["added"] for e in result["micro"]]
        visited = len({i for micro in result["consumed"] for i in micro})
        wrong = sum(1 for c in counts.values() if c != epochs)
        ctx.check(2, "every_sample_used_once", once,
                  (f"{used} of {size} samples back-propagated into the actor's gradients, each {epochs}× in {epochs} "
                   f"epoch(s)" if once else
                   f"only {used} of {size} samples back-propagated into the actor's gradients ({size - used} never "
                   f"reached them" + (f", {wrong} a wrong number of times" if wrong else "") + ")"
                   + _lost_detail(lost, len(result["micro"])))
                  + f"; measured per micro-batch: {len(added)} micro-batch(es) added gradient norms "
                    f"{min(added, default=0):.3g}-{max(added, default=0):.3g}",
                  {"samples": size, "used": used, "in_micro_batches": visited, "epochs": epochs,
                   "uses_per_sample": dict(Counter(counts.values())), "micro_batches_lost": _lost_brief(lost)},
                  hint="every micro-batch's loss must be back-propagated before the optimizer step (gradient "
                       "accumulation over the rank's micro-batches)" if lost else
                       "ppo_mini_batch_size must divide train_batch_size so that every sample lands in one mini-batch")
        how = (f"{sg.micro_batches} micro-batch(es) of {sg.micro} per rank" if not sg.dynamic else
               f"token-budget micro-batches (budget {spec['token_budget']} tokens = {sg.seqs_per_budget} full sequence(s), "
               f"as in the bundle): {min(per_rank)}-{max(per_rank)} per rank, the largest {biggest} tokens"
               + ("" if biggest <= spec["token_budget"] else " — OVER the budget"))
        ctx.check(2, "mini_and_micro_batches", micro_ok,
                  f"{len(steps)} optimizer step(s) = {sg.updates} mini-batch(es) × {epochs} epoch(s), each of "
                  f"{sg.samples_per_update} samples over {sg.dp} rank(s); {how}; verl's iterator and splitter asserted "
                  "every divisibility",
                  {"steps": len(steps), "expected_steps": expect_steps, "micro_batches_per_rank": per_rank,
                   "micro_tokens_max": biggest, "token_budget": spec["token_budget"] if sg.dynamic else None,
                   "smoke": sg.as_dict()}, hint="re-render the bundle with verl-init so that the batch sizes divide")
        if critic_result is not None:
            c_counts, c_lost = _gradient_use(critic_result)
            ctx.check(2, "critic_sample_use", len(c_counts) == size and len(set(c_counts.values())) == 1 and not c_lost,
                      f"{len(c_counts)} of {size} samples back-propagated into the critic's gradients in "
                      f"{len(critic_result['steps'])} step(s)" + _lost_detail(c_lost, len(critic_result["micro"])),
                      {"used": len(c_counts), "micro_batches_lost": _lost_brief(c_lost)})
        # -- pitfall 1: separate weights per role --------------------------------------------------------
        before = self.digests
        moved = before["actor"] != after["actor"]
        no_grad = _steps_without_gradient(steps)
        self.report.actor_updated = moved and not no_grad and not lost
        ctx.check(1, "actor_updated", bool(self.report.actor_updated),
                  f"actor weights sha256 {before['actor'][:12]} → {after['actor'][:12]}, gradient norm at the optimizer "
                  f"step(s) {_norms(steps)}; {len(added) - len(lost)} of {len(added)} micro-batch(es) added to it"
                  + ("" if moved else " (unchanged: no optimizer step took effect)")
                  + ("" if not no_grad else f" — no gradient reached the optimizer at step(s) "
                     f"{', '.join(str(i + 1) for i in no_grad)} although the loss had one: whatever moved the weights "
                     "(weight decay) was not training")
                  + ("" if not lost else " — micro-batches whose gradient never reached the weights"),
                  {"before": before["actor"][:16], "after": after["actor"][:16],
                   "grad_norms": [s_["grad_norm"] for s_ in steps], "loss_grad_norms": [s_["loss_grad_norm"] for s_ in steps],
                   "micro_grad_added": [round(a, 6) for a in added], "micro_batches_lost": len(lost)},
                  hint="the gradients were lost between the backward passes and the optimizer step" if no_grad else
                       "every micro-batch's loss must be back-propagated before the optimizer step" if lost else
                       "check actor_rollout_ref.actor.optim.lr and that advantages are not all zero")
        if sg.lora:
            sb, sa = self.split_before or {}, split_after or {}
            base_same = bool(sb) and sb.get("base") == sa.get("base")
            adapters_moved = bool(sb) and sb.get("adapters") != sa.get("adapters")
            lora = self.report.model.get("lora", {})
            ctx.check(1, "lora_adapters_only", base_same and adapters_moved,
                      f"LoRA rank {lora.get('rank')}: {lora.get('trainable', 0):,} of {lora.get('parameters', 0):,} "
                      f"parameters trainable; base weights sha256 {sb.get('base', '')[:12]} → {sa.get('base', '')[:12]} "
                      + ("(unchanged)" if base_same else "(MOVED: the update trained the base model)")
                      + f", adapters {sb.get('adapters', '')[:12]} → {sa.get('adapters', '')[:12]}"
                      + ("" if adapters_moved else " (unchanged: the adapters were not trained)"),
                      {"before": {k: v[:16] for k, v in sb.items()}, "after": {k: v[:16] for k, v in sa.items()},
                       **lora},
                      hint="under LoRA only the adapters train: the base weights must be frozen (requires_grad False), "
                           "as verl's get_peft_model leaves them")
        who = self.report.placement
        if getattr(self, "ref_who", None):
            who["reference"] = dict(self.ref_who, model_object=who.get("reference", {}).get("model_object"))
        if roles.ref is not None:
            unchanged = before["reference"] == after["reference"]
            same_init = sg.lora or before["reference"] == before["actor"]
            self.report.reference_unchanged = unchanged
            what = "base weights inside the actor" if sg.lora else "reference weights"
            ctx.check(1, "reference_unchanged", unchanged and same_init,
                      f"{what} sha256 {before['reference'][:12]} → {after['reference'][:12]} "
                      + ("(unchanged" if unchanged else "(MOVED with the actor")
                      + ("" if sg.lora else f"; loaded from the actor's initial weights: {'yes' if same_init else 'no'}")
                      + ")",
                      {"before": before["reference"][:16], "after": after["reference"][:16], "same_init": same_init},
                      hint="the reference must be its own frozen copy of the initial policy, never the actor's weights")
            rpid, apid = who.get("reference", {}).get("pid"), who.get("actor", {}).get("pid")
            if sg.lora:
                inside = rpid == apid
                ctx.check(1, "reference_inside_actor", inside,
                          f"LoRA: the reference log-probs came from process {rpid}, the actor's is {apid}"
                          + (": the actor with its adapters disabled, as verl's ref_in_actor (no reference worker)"
                             if inside else " — a separate reference process, which verl does not start for LoRA"),
                          {"reference": who.get("reference"), "actor": who.get("actor")},
                          hint="for LoRA verl computes the reference inside the actor with the adapters disabled")
            else:
                separate = rpid != apid
                ctx.check(1, "reference_is_own_instance", separate,
                          f"reference log-probs came from process {rpid}, the actor's is {apid}"
                          + ("" if separate else ": the SAME process and weights"),
                          {"reference": who.get("reference"), "actor": who.get("actor")},
                          hint="the reference must be its own frozen copy of the initial policy, never the actor's weights")
            # after the step, both roles score the same samples again: a reference that moved with the
            # actor gives exactly the actor's log-probs (KL stuck at 0), a frozen one its old ones
            lp_spec = self._spec("logprob", width)
            new_lp = ctx.get(roles.actor.compute_log_prob.remote(batch, lp_spec, False))["old_log_probs"]
            ref_lp = ctx.get(roles.ref.compute_ref_log_prob.remote(batch, self._spec("ref", width)))["ref_log_prob"]
            mask = batch["response_mask"]
            kind = str(cfg.actor_rollout_ref.actor.kl_loss_type) if cfg.actor_rollout_ref.actor.get("use_kl_loss") \
                else str(cfg.algorithm.get("kl_penalty", "kl"))
            kl_after = float(masked_mean(core_algos.kl_penalty(new_lp, ref_lp, kl_penalty=kind), mask))
            kl_abs = float(masked_mean((new_lp - ref_lp).abs(), mask))
            ref_drift = float(masked_mean((ref_lp - batch["ref_log_prob"]).abs(), mask))
            self.report.kl = kl_after
            ctx.check(1, "kl_moves", math.isfinite(kl_after) and kl_abs > 0 and ref_drift == 0.0,
                      f"after the update KL(actor‖reference) = {kl_after:.3g} ({kind}), mean |Δ log-prob| {kl_abs:.3g}; "
                      f"the reference's own log-probs moved by {ref_drift:.3g}: "
                      + ("it is a frozen " + ("base (adapters off)" if sg.lora else "separate copy")
                         if kl_abs > 0 and ref_drift == 0.0 else
                         "KL stuck at 0 — the reference moves with the actor" if kl_abs == 0 else
                         "the reference's outputs changed"),
                      {"kl": kl_after, "mean_abs_logprob_diff": kl_abs, "reference_drift": ref_drift, "estimator": kind},
                      hint="a KL stuck at 0 means the reference is updated with the actor or was never loaded"
                           + (" (LoRA: the adapters must be disabled for the reference pass)" if sg.lora else ""))
        else:
            self.report.reference_unchanged = None
            ctx.check(1, "reference_unchanged", None, "no reference model: this algorithm uses no KL term (read from the config)", {},
                      kind="static")
        if roles.critic is not None:
            c_steps = critic_result["steps"] if critic_result else []
            c_no_grad = _steps_without_gradient(c_steps)
            self.report.critic_updated = before["critic"] != after["critic"] and not c_no_grad
            ctx.check(1, "critic_updated", bool(self.report.critic_updated),
                      f"critic weights sha256 {before['critic'][:12]} → {after['critic'][:12]} in its own process "
                      f"{who.get('critic', {}).get('pid')}, gradient norm(s) {_norms(c_steps)}"
                      + ("" if not c_no_grad else " — no gradient reached the critic's optimizer at step(s) "
                         + ", ".join(str(i + 1) for i in c_no_grad)),
                      {"before": before["critic"][:16], "after": after["critic"][:16],
                       "grad_norms": [s_["grad_norm"] for s_ in c_steps]})
        self.role_placement(who)
        # -- the run itself: finite numbers ---------------------------------------------------------------
        grad = [s["grad_norm"] for s in steps]
        finite = all(math.isfinite(x) for x in [*grad, self.report.policy_loss or 0.0, self.report.entropy or 0.0,
                                                 self.report.kl or 0.0])
        ctx.check(None, "finite_losses", finite,
                  f"policy loss {self.report.policy_loss:.4g}, entropy {self.report.entropy:.4g}"
                  + (f", KL {self.report.kl:.3g}" if self.report.kl is not None else "")
                  + f", grad norms {', '.join(f'{g:.3g}' for g in grad)}",
                  {"policy_loss": self.report.policy_loss, "entropy": self.report.entropy, "kl": self.report.kl,
                   "grad_norms": grad})
        ph.detail = (f"{len(steps)} actor step(s) ({result['loss_mode']} loss, {result['loss_agg_mode']}, "
                     f"policy loss {self.report.policy_loss:.4g}"
                     + (f", KL loss {_mean(kl_losses):.3g}" if kl_losses else "") + ")"
                     + (f", {len(critic_result['steps'])} critic step(s)" if critic_result else "")
                     + f"; {used}/{size} samples used")


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


def _gradient_use(result: dict[str, Any]) -> tuple[Counter[int], list[dict[str, Any]]]:
    """Per sample, how many of its micro-batches' backward passes reached the weights (GradientLedger's
    measurement in the role); and the micro-batches whose did not."""
    counts: Counter[int] = Counter()
    lost = []
    for entry in result["micro"]:
        if entry.get("reached"):
            counts.update(entry["samples"])
        else:
            lost.append(entry)
    return counts, lost


def _lost_brief(lost: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: e[k] for k in ("step", "rank", "micro", "backprop", "carried", "added")} | {"samples": len(e["samples"])}
            for e in lost[:16]]


def _lost_detail(lost: list[dict[str, Any]], total: int) -> str:
    if not lost:
        return ""
    where = ", ".join(f"step {e['step'] + 1} rank {e['rank']} micro-batch {e['micro'] + 1}" for e in lost[:4])
    why = ("no backward pass reached them" if not any(e["backprop"] for e in lost) else
           "their gradient never arrived in the weights' .grad")
    return f"; {len(lost)} of {total} micro-batch(es) lost ({where}{', ...' if len(lost) > 4 else ''}: {why})"


def _steps_without_gradient(steps: list[dict[str, Any]]) -> list[int]:
    """Optimizer steps (0-based) at which the optimizer saw no gradient: a zero or non-finite gradient norm
    although the loss had a gradient; every step when none had one."""
    def live(s: dict[str, Any]) -> bool:
        return math.isfinite(s["grad_norm"]) and s["grad_norm"] > 0

    if not any(live(s) for s in steps):
        return [s["step"] for s in steps]
    return [s["step"] for s in steps if s["loss_grad_norm"] > 0 and not live(s)]


def _norms(steps: list[dict[str, Any]]) -> str:
    return ", ".join(f"{s['grad_norm']:.3g}" for s in steps)


def _mean(values: list[float]) -> Optional[float]:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _fmt_list(values: list[float]) -> str:
    uniq = sorted(set(values))
    return f"{uniq[0]:g}" if len(uniq) == 1 else "/".join(f"{v:g}" for v in values[:6])


def _last_user(messages: Any) -> str:
    msgs = list(messages or [])
    for m in reversed(msgs):
        if isinstance(m, dict) and m.get("role") == "user":
            return str(m.get("content", ""))
    return str(msgs[-1].get("content", "")) if msgs and isinstance(msgs[-1], dict) else ""


def _example(item: dict[str, Any]) -> dict[str, Any]:
    def short(v: Any) -> Any:
        text = json.dumps(v, default=str, ensure_ascii=False)
        return v if len(text) <= 200 else text[:197] + "..."

    return {k: short(item.get(k)) for k in ("data_source", "prompt", "ability", "reward_model", "extra_info")}


def _load_with_verl(ctx: SmokeContext, rows_path: str, tok: Any) -> tuple[list[dict[str, Any]], int]:
    """verl's RLHFDataset on the rows: its schema handling and overlong filter, with verl's data config."""
    from verl.utils.dataset.rl_dataset import RLHFDataset

    try:
        import datasets

        datasets.disable_progress_bars()
    except Exception:  # noqa: BLE001
        pass
    try:
        ds = RLHFDataset(data_files=[rows_path], tokenizer=tok, config=ctx.cfg.data, processor=None)
    except Exception as exc:  # noqa: BLE001 - verl's own message is the report
        cause = _cause(exc)
        findings = _validate_rows(ctx, rows_path, tok)
        errors = [f for f in findings if f["severity"] == "error"]
        hint = (f"{errors[0]['message']} [{errors[0]['id']}]: " + "; ".join(
            f"row {e['row']}: {e['problem']}" for e in errors[0]["examples"][:2])) if errors else \
            "`verl-init validate-dataset FILE --tokenizer MODEL` lists the problem rows"
        raise SmokeFailure(f"verl's RLHFDataset cannot load the rows: {type(cause).__name__}: "
                           f"{str(cause).strip().splitlines()[-1][:300] if str(cause).strip() else ''}", hint) from None
    items = [ds[i] for i in range(len(ds))]
    for it in items:
        if not isinstance(it.get("raw_prompt"), (list, tuple)) or not it.get("raw_prompt"):
            it["raw_prompt"] = it.get(ctx.cfg.data.get("prompt_key", "prompt"))
    return items, len(ds)


def warmup_examples(items: list[dict[str, Any]], prompt_ids: list[list[int]], fallback: str) -> list[tuple[list[int], str, str]]:
    """(prompt ids, a right response, a wrong response) per distinct prompt, in the format the prompt asks for:
    what the tiny policy is fitted on so that sampled rewards vary (wizard.smoketest.model.build_tiny_policy)."""
    from wizard.smoketest import model as smoke_model

    if len(items) != len(prompt_ids):
        raise ValueError(f"{len(items)} items but {len(prompt_ids)} tokenised prompts")
    return [(prompt_ids[i], smoke_model.response_text(style, truth),
             smoke_model.response_text(style, smoke_model.wrong_answer(truth, style)))
            for i, _, truth, style in _distinct_prompts(items, fallback)]


def _distinct_prompts(items: list[dict[str, Any]], fallback: str) -> Iterator[tuple[int, dict[str, Any], str, str]]:
    """Each distinct prompt once, in order: (its position, the item, its ground truth, the answer style its prompt
    asks for — `fallback` when it names none)."""
    from wizard.smoketest import model as smoke_model

    seen: set[str] = set()
    for i, item in enumerate(items):
        key = json.dumps(item["raw_prompt"], sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        truth = str((item.get("reward_model") or {}).get("ground_truth", ""))
        yield i, item, truth, smoke_model.answer_style(_last_user(item["raw_prompt"]), fallback)


def _overlong_rows(path: str, tok: Any, prompt_key: str, max_prompt: int) -> int:
    """Rows whose chat-templated prompt is longer than max_prompt_length: the ones verl's overlong filter drops
    (rl_dataset.py:248-270, the same apply_chat_template call), counted here from the file itself."""
    from wizard.smoketest import model as smoke_model

    try:
        rows = _file_rows(path)
    except Exception:  # noqa: BLE001 - the loader reports unreadable files
        return 0
    count = 0
    for row in rows:
        try:
            count += len(smoke_model.prompt_ids(tok, list(row.get(prompt_key) or []))) > max_prompt
        except Exception:  # noqa: BLE001 - verl counts a row it cannot template as overlong
            count += 1
    return count


def _vision_rows(ctx: SmokeContext, rows_path: str, arch: str, read: int, src_how: str) -> None:
    """A vision-language model: the rows' images are checked (validate-dataset's VI574-VI576: the image column,
    each image decodes, one image per <image> placeholder), then the smoke stops with what it does not cover: the
    CPU miniature builds no vision tower and no processor (verl's RLHFDataset asserts a processor for image rows;
    the processor needs torchvision and qwen_vl_utils), so no vision-language rollout or update runs here."""
    from wizard.env.datasets import Options, validate
    from wizard.planner.shapes import VISION_TYPES

    if arch not in VISION_TYPES:
        return
    image_key = str(ctx.cfg.data.get("image_key", "images"))
    findings = validate([rows_path], Options(kind="rl", prompt_key=str(ctx.cfg.data.get("prompt_key", "prompt")),
                                             image_key=image_key)).findings
    bad = [f for f in findings if f.rule in ("VI574", "VI575", "VI576") and f.severity == "error"]
    if bad:
        raise SmokeFailure(f"the rows' images are not what verl reads: {bad[0].message} [{bad[0].rule}]",
                           bad[0].hint or f"check them with `verl-init validate-dataset FILE --image-key {image_key}`")
    raise SmokeFailure(
        f"{arch} is a vision-language model: the {read} row(s) from {src_how} and their images are in verl's schema "
        f"({image_key!r}: each image decodes, one per <image> placeholder), but the CPU smoke builds no vision tower or "
        "processor, so it runs no vision-language rollout, reward or update",
        "check the config with `verl-init --verify` and the data with `verl-init validate-dataset data/train.parquet "
        f"--image-key {image_key}`; the first real step runs on the GPUs")


def _code_rows(ctx: SmokeContext, rows_path: str, read: int, src_how: str) -> None:
    """reward=sandbox (reward.sandbox_fusion.url): the rows' test cases are checked (validate-dataset's VI586: what
    verl's code scorer can run), then the smoke stops with what it does not cover: the miniature's tiny policy writes
    no programs, so every reward would be 0 and no code rollout or update is meaningful here. The reward path itself
    (verl's scorer, the configured service) was checked in the probe phase (wizard.smoketest.sandbox_stub)."""
    from wizard.env.datasets import Options, validate

    sf = ctx.cfg.reward.get("sandbox_fusion")
    if sf is None or not sf.get("url"):
        return
    findings = validate([rows_path], Options(kind="rl", prompt_key=str(ctx.cfg.data.get("prompt_key", "prompt")))).findings
    bad = [f for f in findings if f.rule == "VI586"]
    if bad:
        ex = "; ".join(f"row {r}: {why}" for r, why in bad[0].examples[:2])
        raise SmokeFailure(f"the rows' test cases are not what verl's code scorer runs: {bad[0].message} [VI586] ({ex})",
                           bad[0].hint)
    raise SmokeFailure(
        f"the {read} code row(s) from {src_how} hold test cases verl's sandbox scorer runs, and the reward path was "
        "checked in the probe phase; but the CPU miniature's tiny policy writes no programs, so it runs no code "
        "rollout, reward or update",
        "check the config with `verl-init --verify` and the data with `verl-init validate-dataset "
        "data/train.parquet`; the first real step runs on the GPUs")


def _agent_options(ctx: SmokeContext) -> dict[str, Any]:
    """Multi-turn bundles: validate-dataset's --agent tool (and --tool-name for verl-init's GSM8K tool)."""
    if not ctx.cfg.actor_rollout_ref.rollout.multi_turn.enable:
        return {}
    a = ctx.answers
    gsm8k = a is not None and a.agent == "tool" and (a.tool or "gsm8k") == "gsm8k"
    from wizard.planner.dataprep import GSM8K_TOOL_NAME

    return {"agent": "tool", "tool_name": GSM8K_TOOL_NAME if gsm8k else None}


def _validate_rows(ctx: SmokeContext, rows_path: str, tok: Any) -> list[dict[str, Any]]:
    """verl-init's validate-dataset on the same rows (precise row-level diagnosis)."""
    from wizard.env.datasets import Options, validate

    fn = ctx.cfg.reward.custom_reward_function
    opts = Options(kind="rl", prompt_key=str(ctx.cfg.data.get("prompt_key", "prompt")),
                   max_prompt_length=int(ctx.cfg.data.max_prompt_length), tokenizer=tok, tokenizer_name="smoke",
                   reward_function=str(fn.path) if fn.get("path") else None,
                   filter_overlong_prompts=bool(ctx.cfg.data.get("filter_overlong_prompts", False)),
                   **_agent_options(ctx))
    try:
        return [f.as_dict() for f in validate([rows_path], opts).findings]
    except Exception as exc:  # noqa: BLE001 - diagnosis only
        ctx.log(f"validate-dataset failed: {exc!r}")
        return []


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

