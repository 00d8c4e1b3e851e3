"""The cpu smoke's advantage and update phases: verl's estimators, one update of the actor (and critic), and the
checks measured on it (every sample used once, weights moved or frozen as each role must, finite numbers).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional

from wizard.smoketest.context import SmokeFailure


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


@dataclass
class _Updated:
    """What one update step returned, as the checks read it."""

    result: dict[str, Any]
    critic_result: Optional[dict[str, Any]]
    after: dict[str, str]  # the weights' digests after the step, per role
    split_after: Optional[dict[str, str]]  # LoRA: the actor's base and adapter digests after the step
    size: int  # samples in the batch
    width: int  # padded sequence width
    spec: dict[str, Any]  # the actor update's split (ranks, micro-batches or token budget)

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self.result["steps"]

    @property
    def epochs(self) -> int:
        return int(self.result["epochs"])


class UpdatePhase:
    """CpuRun's advantage and update phases."""

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

    def update(self, ph: Any) -> None:
        """One update of the actor (and the critic), then the checks measured on it, in the order of the pitfalls."""
        roles = self.roles
        assert roles is not None
        u = self._update_roles()
        steps, size, result, critic_result = u.steps, u.size, u.result, u.critic_result
        kl_losses = [s["kl_loss"] for s in steps if s["kl_loss"] is not None]
        used = self._check_sample_use(u)
        self._check_actor(u)
        who = self.report.placement
        if getattr(self, "ref_who", None):
            who["reference"] = dict(self.ref_who, model_object=who.get("reference", {}).get("model_object"))
        if roles.ref is not None:
            self._check_reference(u, who)
        else:
            self.report.reference_unchanged = None
            self.ctx.check(1, "reference_unchanged", None, "no reference model: this algorithm uses no KL term (read from "
                           "the config)", {}, kind="static")
        if roles.critic is not None:
            self._check_critic(u, who)
        self.role_placement(who)
        self._check_finite(steps)
        ph.detail = (f"{len(steps)} actor step(s) ({result['loss_mode']} loss, {result['loss_agg_mode']}, "
                     f"policy loss {self.report.policy_loss:.4g}"
                     + (f", KL loss {_mean(kl_losses):.3g}" if kl_losses else "") + ")"
                     + (f", {len(critic_result['steps'])} critic step(s)" if critic_result else "")
                     + f"; {used}/{size} samples used")

    def _update_roles(self) -> _Updated:
        """The update itself: the actor's (and the critic's) step on the batch, and the weights' digests after it."""
        ctx, sg, batch = self.ctx, self.sg, self.batch
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
        return _Updated(result, critic_result, after, split_after, size, width, spec)

    def _check_sample_use(self, u: _Updated) -> int:
        """Pitfall 2: every sample once per epoch, one optimizer step per mini-batch; returns the samples used."""
        ctx, sg, spec, size, epochs, steps, result, critic_result = (self.ctx, self.sg, u.spec, u.size, u.epochs, u.steps,
                                                                      u.result, u.critic_result)
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
        return used

    def _check_actor(self, u: _Updated) -> None:
        """Pitfall 1, the actor: its weights moved by a real gradient (under LoRA: the adapters only)."""
        ctx, sg, steps, result, after, split_after = self.ctx, self.sg, u.steps, u.result, u.after, u.split_after
        _, lost = _gradient_use(result)
        added = [e["added"] for e in result["micro"]]
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

    def _check_reference(self, u: _Updated, who: dict[str, Any]) -> None:
        """Pitfall 1, the reference: frozen, its own instance (or, under LoRA, the actor's base), and KL moves."""
        from verl.trainer.ppo import core_algos
        from verl.utils.torch_functional import masked_mean

        ctx, cfg, sg, batch, width, after = self.ctx, self.cfg, self.sg, self.batch, u.width, u.after
        roles = self.roles
        assert roles is not None and roles.ref is not None
        before = self.digests
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

    def _check_critic(self, u: _Updated, who: dict[str, Any]) -> None:
        """Pitfall 1, the critic: its weights moved by a real gradient, in its own process."""
        ctx, critic_result, before, after = self.ctx, u.critic_result, self.digests, u.after
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

    def _check_finite(self, steps: list[dict[str, Any]]) -> None:
        """The run itself: finite losses and gradient norms."""
        ctx = self.ctx
        grad = [s["grad_norm"] for s in steps]
        finite = all(math.isfinite(x) for x in [*grad, self.report.policy_loss or 0.0, self.report.entropy or 0.0,
                                                 self.report.kl or 0.0])
        ctx.check(None, "finite_losses", finite,
                  f"policy loss {self.report.policy_loss:.4g}, entropy {self.report.entropy:.4g}"
                  + (f", KL {self.report.kl:.3g}" if self.report.kl is not None else "")
                  + f", grad norms {', '.join(f'{g:.3g}' for g in grad)}",
                  {"policy_loss": self.report.policy_loss, "entropy": self.report.entropy, "kl": self.report.kl,
                   "grad_norms": grad})
