"""What each algorithm verl-init offers means in verl 0.9.1's keys, with where each value comes from.

Sources (tests/test_algorithms.py compares the planner's output with them):
- verl's own example scripts (tests/data/reference/verl-examples.json, verl v0.9.0 examples/):
  grpo_trainer/*.sh (KL as a loss term, low_var_kl), gspo_trainer/*.sh (loss_mode=gspo, clip 3e-4/4e-4,
  seq-mean-token-mean, no KL), reinforce_plus_plus_trainer/run_qwen3_8b_fsdp.sh, rloo_trainer/*.sh and
  remax_trainer/*.sh (KL folded into the reward with verl's default estimator `kl`), ppo_trainer/*.sh (gae).
- DAPO (arXiv:2503.14476, verl-recipe's dapo/): decoupled clip 0.2/0.28, token-mean, dynamic sampling
  (filter_groups), no KL, its own reward manager.
Only the standard library is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional


@dataclass(frozen=True)
class Algo:
    adv_estimator: str
    kl: Literal["loss", "reward", "none"]
    default_n: int
    group: bool  # advantage is relative within a prompt's group: needs n >= 2
    critic: bool = False
    loss_mode: str = "vanilla"
    loss_agg_mode: Optional[str] = None
    kl_loss_type: str = "low_var_kl"  # actor.kl_loss_type when kl == "loss"
    kl_penalty: str = "kl"  # algorithm.kl_penalty when kl == "reward" (verl's default estimator)
    clip_low: Optional[float] = None
    clip_high: Optional[float] = None
    filter_groups: bool = False
    reward_manager: str = "naive"
    # DAPO's overlong reward shaping: a penalty growing over the last stretch before max_response_length
    # (Yu et al. 2025, "DAPO", §3.4), which verl's DAPO reward manager applies from reward.reward_kwargs
    # (experimental/reward_loop/reward_manager/dapo.py:33-49, 106-113)
    overlong_buffer: bool = False
    summary: str = ""


ALGORITHMS: dict[str, Algo] = {
    "grpo": Algo("grpo", "loss", 5, True, loss_agg_mode="token-mean",
                 summary="group-relative advantages, KL to the reference as a loss term"),
    "ppo": Algo("gae", "reward", 1, False, critic=True,
                summary="a critic (value model) with GAE advantages, KL as a reward penalty"),
    "dapo": Algo("grpo", "none", 16, True, loss_agg_mode="token-mean", clip_low=0.2, clip_high=0.28,
                 filter_groups=True, reward_manager="dapo", overlong_buffer=True,
                 summary="GRPO advantages, decoupled clip (0.2/0.28), groups with identical rewards filtered, overlong "
                         "responses penalised softly, no KL"),
    "rloo": Algo("rloo", "reward", 5, True,
                 summary="leave-one-out baseline within each group, KL as a reward penalty"),
    "reinforce_plus_plus": Algo("reinforce_plus_plus", "reward", 8, False,
                                summary="REINFORCE++: per-token KL folded into the reward, batch-normalised returns"),
    "remax": Algo("remax", "reward", 4, False,
                  summary="greedy-rollout baseline (ReMax), KL as a reward penalty"),
    "gspo": Algo("grpo", "none", 8, True, loss_mode="gspo", loss_agg_mode="seq-mean-token-mean",
                 clip_low=3e-4, clip_high=4e-4,
                 summary="GRPO advantages with sequence-level importance ratios (GSPO), no KL"),
}

# LoRA ranks vLLM serves (verl's fallback list when vllm itself is absent).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
