"""The cpu smoke's model roles, each a Ray actor process as verl's workers are: actor + rollout, reference,
critic (wizard.smoketest.cpu); GradientLedger measures which micro-batches' gradients reached the weights.

Imported by the Ray worker processes; heavy imports stay inside functions.
"""

from __future__ import annotations

import hashlib
import math
import os
from typing import Any, Optional



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


class ActorRolloutRole(_TrainedRole):
    """The policy: rollout (sampling), old log-probs and the actor update."""

    def __init__(self, config: dict[str, Any], seed: int) -> None:
        _worker_setup()
        from omegaconf import OmegaConf

        # imported now, while the driver prepares the data and the tiny model
        import verl.trainer.ppo.core_algos  # noqa: F401

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
