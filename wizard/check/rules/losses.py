"""The actor's loss terms: what verl 0.9.1 computes from the keys that set them (paths under site-packages/verl).

- VI776 (warning): an actor key that some policy-loss mode reads, set by the user, that the chosen
  actor.policy_loss.loss_mode never reads. workers/utils/losses.py:99-109 calls the function registered for the mode
  (core_algos.py:53-85, register_policy_loss / get_policy_loss_fn) and nothing else reads the clip keys, the SAPO
  temperatures or policy_loss.* (the walk behind wizard/check/data/verl_policy_loss_reads.json). E.g.
  compute_policy_loss_kl_cov (trainer/ppo/core_algos.py:1849-1925) reads only policy_loss.kl_cov_ratio and
  ppo_kl_coef (:1884-1885): its -A·ratio (:1893) has no clamp, so clip_ratio_low/high/c set with it bound nothing
  (verl#2216). The table is generated from verl's source by scripts/verl_policy_loss_reads.py.
- VI777 (warning): use_kl_loss=True with a kl_loss_type whose expected gradient is zero. The actor adds
  kl_loss_coef × kl_penalty(log_prob, ref_log_prob, kl_loss_type) to its loss (workers/utils/losses.py:132-140);
  kl_penalty (core_algos.py:2188-2213) gives 'kl'/'k1' as logprob - ref_logprob (:2228-2229), whose gradient on
  tokens the policy sampled is E_pi[grad log pi] = 0: it regularises nothing in expectation and only adds noise,
  while actor/kl_loss is logged as if it did (verl PR#2953 added the '+' straight-through variants for this).
  scripts/verl_kl_gradients.py classes every type with verl's own kl_penalty under autograd
  (wizard/check/data/verl_kl_gradients.json). 'low_var_kl' (k3), verl's default and its examples' choice, and 'abs'
  are biased but do pull towards the reference: no finding.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from wizard.check.rules.context import A, Ctx, Facts
from wizard.check.rules.minibatches import mini_batches

LOSS = f"{A}.policy_loss.loss_mode"
SOURCE = "verl/trainer/ppo/core_algos.py"


@functools.lru_cache(maxsize=1)
def policy_loss_reads() -> dict[str, Any]:
    """scripts/verl_policy_loss_reads.py's table: mode → the actor keys (relative to actor) it reads, file:line."""
    text = resources.files("wizard.check").joinpath("data/verl_policy_loss_reads.json").read_text(encoding="utf-8")
    return json.loads(text)


@functools.lru_cache(maxsize=1)
def kl_gradients() -> dict[str, str]:
    """scripts/verl_kl_gradients.py's table: kl_loss_type → zero gradient / unbiased / biased / raises: ..."""
    text = resources.files("wizard.check").joinpath("data/verl_kl_gradients.json").read_text(encoding="utf-8")
    return json.loads(text)["types"]


def mode_reads(mode: Any) -> set[str] | None:
    """The actor keys (`clip_ratio_low`, `policy_loss.kl_cov_ratio`) loss mode `mode` reads; None for a mode verl
    does not register (a recipe's own, a placeholder)."""
    entry = policy_loss_reads()["modes"].get(mode) if isinstance(mode, str) else None
    return None if entry is None else set(entry["reads"])


def _span(mode: str) -> str:
    entry = policy_loss_reads()["modes"][mode]
    start, name = entry["function"].split(" ", 1)
    return f"{name} ({start}-{entry['end'].rsplit(':', 1)[1]})"


def rule_policy_loss_keys(c: Ctx, f: Facts) -> None:
    """VI776: keys of the policy loss that the chosen mode never reads."""
    if c.src.recipe or c.unknown(LOSS):
        return  # a recipe's own code may register or read anything
    mode = c.v(LOSS, "vanilla")
    reads = mode_reads(mode)
    if reads is None:
        return
    unread = [k for k in policy_loss_reads()["keys"] if k not in reads and c.set_by_user(f"{A}.{k}")]
    if not unread:
        return
    read = ", ".join(sorted(reads)) or "none of them"
    clip = [k for k in unread if k.startswith("clip_ratio")]
    consequence = ""
    if clip and not reads & {"clip_ratio", "clip_ratio_low", "clip_ratio_high"}:
        epochs = c.int(f"{A}.ppo_epochs")
        steps = f.tbs // f.mini * epochs if f.tbs and f.mini and epochs else None
        consequence = (" Its update is unclipped: " + (
            f"this run takes {steps} optimizer steps a batch ({f.tbs} prompts in mini-batches of {f.mini}, "
            f"ppo_epochs={epochs}), and every one after the first is off-policy with no trust region."
            if steps and steps > 1 else "every optimizer step after the first of a batch (several mini-batches or "
            "ppo_epochs > 1) is off-policy with no trust region."))
    c.add("VI776", "warning", (LOSS, *(f"{A}.{k}" for k in unread)),
          f"policy_loss.loss_mode={mode} never reads {', '.join(unread)}: verl runs {_span(mode)} for it, which reads "
          f"only {read} of the policy-loss keys (workers/utils/losses.py:101-104 picks the function by loss_mode), so "
          f"the value set has no effect.{consequence}",
          f"remove {', '.join(unread)}, or choose a loss_mode that reads them (vanilla reads "
          f"{', '.join(sorted(mode_reads('vanilla') or ()))})")


def rule_kl_loss_gradient(c: Ctx, f: Facts) -> None:
    """VI777: a KL loss whose estimator has zero expected gradient."""
    key = f"{A}.kl_loss_type"
    if c.v(f"{A}.use_kl_loss") is not True or c.unknown(key):
        return
    kind = c.v(key)
    if not isinstance(kind, str) or kl_gradients().get(kind) != "zero gradient":
        return
    coef = c.num(f"{A}.kl_loss_coef")
    if coef == 0:
        return  # no KL term at all: nothing to mislead
    c.add("VI777", "warning", (f"{A}.use_kl_loss", key),
          f"kl_loss_type={kind} with use_kl_loss=True: verl's kl_penalty gives logprob - ref_logprob for it "
          f"({SOURCE}:2228-2229), whose gradient on tokens the policy sampled is E[grad log pi] = 0, so the KL loss "
          f"(workers/utils/losses.py:132-140, kl_loss_coef={coef if coef is not None else 'unset'}) pulls the policy "
          "towards the reference by nothing in expectation and only adds gradient noise, while actor/kl_loss is "
          "logged as if it did (verl PR#2953)",
          f"set {key}={kind}+ (the same logged value, the straight-through k2 gradient: the true KL gradient), "
          "k2, or low_var_kl as verl's examples use")


def rule_kl_cov_on_policy(c: Ctx, f: Facts) -> None:
    """VI793: KL-Cov with one optimizer step a batch, where its |log_prob - old_log_prob| penalty is 0."""
    bypass = "algorithm.rollout_correction.bypass_mode"
    if c.src.recipe or c.unknown(LOSS, f"{A}.ppo_epochs", bypass) or c.v(LOSS) != "kl_cov" or c.v(bypass) is True:
        return
    epochs, count = c.int(f"{A}.ppo_epochs"), mini_batches(f.tbs, f.mini)
    if epochs != 1 or count != 1:
        return
    coef = c.num(f"{A}.policy_loss.ppo_kl_coef")
    c.add("VI793", "warning", (LOSS, f"{A}.ppo_epochs", f"{A}.ppo_mini_batch_size"),
          f"policy_loss.loss_mode=kl_cov with ppo_epochs=1 and ppo_mini_batch_size={f.mini} = data.train_batch_size "
          "takes one optimizer step a batch, strictly on-policy: old_log_prob is the same weights' log-prob "
          "(trainer_base.py:1634-1667), so KL-Cov's penalty ppo_kl_coef·|log_prob - old_log_prob| "
          f"(ppo_kl_coef={coef if coef is not None else 'unset'}, {SOURCE}:1889-1894) is 0 with zero gradient and the "
          "update is plain unclipped -A·ratio policy gradient, not KL-Cov",
          f"take several optimizer steps a batch (ppo_mini_batch_size below {f.tbs}, or ppo_epochs > 1) so that "
          "old_log_prob differs from log_prob and the penalty acts; strictly on-policy, kl_cov adds nothing to "
          "unclipped policy gradient")
