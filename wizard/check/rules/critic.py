"""Critic and return rules of verl 0.9.1 (paths under site-packages/verl): the per-token discount (VI783) and the
critic's vocabulary against the actor's token ids (VI784).

- VI783 (warning): algorithm.gamma / algorithm.lam below 1 with an outcome reward on long responses. verl discounts
  per token: GAE runs `delta = r_t + gamma*V_{t+1} - V_t; A_t = delta + gamma*lam*A_{t+1}` over the response
  (trainer/ppo/core_algos.py:250-256) and the critic's target is `returns = A + V` (:261), with gamma and lam from
  the config (trainer/ppo/v1/trainer_base.py:1779-1780; ray_trainer.py:1670-1671); REINFORCE++ runs
  `G_t = r_t + gamma*G_{t+1}` (core_algos.py:715-724). The reward verl's reward loop gives is one score on the
  last response token, so at the first token of an L-token answer it arrives scaled by (gamma*lam)^(L-1) in GAE's
  advantage (and in the value target while the critic still predicts 0) and by gamma^(L-1) in a converged critic's
  target and in REINFORCE++'s return. verl's defaults are gamma = lam = 1.0 (trainer/config/ppo_trainer.yaml:72,75),
  as in all of its examples (real case: the classic-RL gamma=0.99, lam=0.95 on 4096-token CoT, verl#479).
  Threshold: FADED = 1e-3, the first token gets under a thousandth of the outcome (a reward of 1 counts less
  than a 0.001 error of the critic): the early tokens learn only from the critic's estimates.
- VI784 (error / warning): critic.model.path a different model whose vocabulary does not cover the actor's ids.
  verl never re-tokenises for the critic: the V1 trainer hands the rollout batch to critic_wg.infer_batch as it is
  (trainer_base.py:1721-1731; legacy ray_trainer.py:1252-1258), whose engine embeds micro_batch["input_ids"]
  (workers/engine/fsdp/transformer_impl.py:1169) in the model AutoModelForTokenClassification loads from
  critic.model.path (utils/model.py:641-656; num_labels forced to 1, transformer_impl.py:293-297); no vocab check
  exists. An id ≥ the critic's config.json vocab_size indexes past its embedding (IndexError on CPU, a device-side
  assert on GPU) at the first values pass (real case verl#1778, a Llama reward model as critic of a Qwen actor).
  Error when the actor's tokenizer (tokenizer_path, else path: len(tokenizer), added tokens included) holds more
  ids than that; warning when both tokenizers are on this machine, the critic's covers the ids, and some id names
  a different token in the two (the critic reads other words). The reward model is not concerned: the reward loop
  decodes the response and re-encodes it with the reward model's tokenizer (experimental/reward_loop/
  reward_loop.py:211-229).
"""

from __future__ import annotations

from typing import Any

from wizard.check.rules.context import M, Ctx, Facts, model_folder, model_shape
from wizard.check.shellargs import PLACEHOLDER

FADED = 1e-3  # the first token's share of the outcome reward below which it is lost (module docstring)
DISCOUNTED = ("gae", "reinforce_plus_plus")  # the estimators that read algorithm.gamma (core_algos.py:250-256, 715)
SHOWN = 3  # differing ids named in VI784's warning


def first_token_factors(gamma: float, lam: float, length: int) -> tuple[float, float]:
    """(gamma^(L-1), (gamma*lam)^(L-1)): what reaches the first of L response tokens of a reward on the last one,
    by verl's recursions (core_algos.py:250-256, 719-724)."""
    steps = max(length - 1, 0)
    return gamma ** steps, (gamma * lam) ** steps


def rule_discount(c: Ctx, f: Facts) -> None:
    adv = f.adv
    if adv not in DISCOUNTED or c.unknown("algorithm.adv_estimator", "algorithm.gamma", "algorithm.lam",
                                          "data.max_response_length"):
        return
    gamma, length = c.num("algorithm.gamma"), c.int("data.max_response_length")
    lam = c.num("algorithm.lam") if adv == "gae" else 1.0
    if gamma is None or lam is None or length is None or not (0 <= gamma <= 1 and 0 <= lam <= 1):
        return
    ret, gae = first_token_factors(gamma, lam, length)
    half_ret, half_gae = first_token_factors(gamma, lam, max(length // 2, 1))
    factor, half = (gae, half_gae) if adv == "gae" else (ret, half_ret)
    if factor >= FADED:
        return
    if adv == "gae":
        what = (f"(gamma·lam)^(L-1) = ({gamma:g}·{lam:g})^{length - 1} = {gae:.2g} in GAE's advantage and the critic's "
                f"first targets ({half_gae:.2g} at L={max(length // 2, 1)}), gamma^(L-1) = {ret:.2g} in a trained "
                "critic's target (core_algos.py:250-256, 261)")
        keys: tuple[str, ...] = ("algorithm.gamma", "algorithm.lam", "data.max_response_length")
        lam_min = FADED ** (1 / max(length - 1, 1)) / gamma if gamma > 0 else 2.0  # (gamma·lam)^(L-1) ≥ FADED
        keep = (f"lam ≥ {lam_min:.4f} keeps {FADED:g} at {length} tokens with gamma={gamma:g}" if lam_min <= 1 else
                f"no lam keeps {FADED:g} at {length} tokens with gamma={gamma:g}: raise gamma too")
        hint = ("set algorithm.gamma=1.0 and algorithm.lam=1.0 (verl's defaults, as in its PPO examples), or lam close "
                f"to 1 ({keep})")
    else:
        what = f"gamma^(L-1) = {gamma:g}^{length - 1} = {ret:.2g} in REINFORCE++'s return ({half_ret:.2g} at " \
               f"L={max(length // 2, 1)}; core_algos.py:715-724)"
        keys = ("algorithm.gamma", "data.max_response_length")
        hint = "set algorithm.gamma=1.0 (verl's default)"
    c.add("VI783", "warning", keys,
          f"adv_estimator={adv} discounts per token: an outcome reward on the last of L={length} response tokens "
          f"reaches the first one scaled by {what}, under {FADED:g}: the early tokens of long answers learn from "
          f"{'the critic' if adv == 'gae' else 'nothing'}, not from the reward",
          hint + "; keep gamma/lam < 1 only with token-level (process) rewards, where it is meant")


def _tokenizer_folder(c: Ctx, *keys: str) -> tuple[str, str] | None:
    """(key, local tokenizer folder) for the first of keys that is set, else None when it is not on this machine."""
    from wizard.planner import overlong

    for key in keys:
        value = c.v(key)
        if isinstance(value, str) and value and not c.unknown(key) and PLACEHOLDER not in value:
            local = model_folder(c, value)
            folder = overlong.local_tokenizer(str(local)) if local is not None else None
            return (key, folder) if folder is not None else None
    return None


def _vocab(tok: Any) -> dict[int, str]:
    return {i: t for t, i in tok.get_vocab().items()}


def rule_critic_vocab(c: Ctx, f: Facts) -> None:
    if not f.use_critic:
        return
    critic_key = "critic.model.hf_config_path" if c.v("critic.model.hf_config_path") else "critic.model.path"
    actor, critic = c.v(f"{M}.path"), c.v("critic.model.path")
    if c.unknown(f"{M}.path", "critic.model.path") or not isinstance(critic, str) or critic == actor \
            and critic_key == "critic.model.path":
        return
    shape, _ = model_shape(c, critic_key)
    found = _tokenizer_folder(c, f"{M}.tokenizer_path", f"{M}.path")
    if shape is None or found is None:
        return
    from wizard.planner import overlong

    tok_key, folder = found
    tok = overlong.load_tokenizer(folder)[0]
    if tok is None:
        return
    size, vocab = len(tok), shape.vocab
    if size > vocab:
        over = sorted(i for i in _vocab(tok) if i >= vocab)
        named = ", ".join(f"{tok.convert_ids_to_tokens(i)}={i}" for i in over[-SHOWN:])
        c.add("VI784", "error", ("critic.model.path", tok_key),
              f"the critic {critic} has a vocabulary of {vocab} (its config.json vocab_size) but the actor's tokenizer "
              f"({c.v(tok_key)}) has {size} ids: verl feeds the actor's token ids to the critic unchanged "
              "(trainer_base.py:1721-1731 → transformer_impl.py:1169), so every id ≥ "
              f"{vocab} ({len(over)} of them, e.g. {named}) indexes past the critic's embedding: a device-side assert "
              "at the first values pass",
              f"initialise the critic from the actor's model (critic.model.path={actor}) or one with its tokenizer")
        return
    theirs = _tokenizer_folder(c, "critic.model.tokenizer_path", "critic.model.path")
    other = overlong.load_tokenizer(theirs[1])[0] if theirs is not None and theirs[1] != folder else None
    if other is None:
        return
    mine, their = _vocab(tok), _vocab(other)
    differ = sorted(i for i, t in mine.items() if their.get(i) != t)
    if differ:
        named = ", ".join(f"{i}: {mine[i]!r} vs {their.get(i)!r}" for i in differ[:SHOWN])
        c.add("VI784", "warning", ("critic.model.path", tok_key),
              f"the critic {critic} reads the actor's token ids (verl does not re-tokenise, trainer_base.py:1721-1731) "
              f"with another vocabulary: {len(differ)} of the actor's {size} ids name a different token in the "
              f"critic's tokenizer ({named}), so it values other text than the actor wrote",
              f"initialise the critic from the actor's model (critic.model.path={actor}) or one with its tokenizer")
