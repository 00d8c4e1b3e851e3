"""VI937: validation that repeats each prompt n times at temperature 0 (paths under site-packages/verl 0.9.1).

verl generates `actor_rollout_ref.rollout.val_kwargs.n` answers per validation prompt (trainer/ppo/v1/trainer_base.py:
1055-1057 and v1/agent_loop_tq.py:115-128, one agent loop per answer; ray_trainer.py:617-619 with trainer.use_v1=False)
and builds every validation request from val_kwargs.temperature / top_p / top_k alone (v1/agent_loop_tq.py:73-76,
experimental/agent_loop/agent_loop.py:604-607): val_kwargs.do_sample never reaches the sampling parameters (VI989).
val_kwargs.temperature defaults to 0 in the YAML main_ppo composes (trainer/config/rollout/rollout.yaml:164; the
SamplingConfig dataclass's own 1.0, workers/config/rollout.py:40, is overridden by it), which is verl's own greedy
setting (`apply_greedy_sampling_params`: temperature 0, top_p 1, top_k -1, v1/agent_loop_tq.py:41-44,
agent_loop.py:598-601). So val_kwargs.n > 1 with the temperature left at 0 asks for n copies of one greedy
answer: n times the validation generation, and mean@n, best@n, worst@n and maj@n of process_validation_metrics
(trainer/ppo/metric_utils.py:896) all equal the greedy score (real case verl#1352: sampled validation wanted, greedy
answers measured). validate_config checks only rollout.temperature, and only under val_kwargs.do_sample
(utils/config.py:200-203); with do_sample=True VI852 already reports the zero temperature.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import R, Ctx, Facts

N, TEMP, SAMPLE = f"{R}.val_kwargs.n", f"{R}.val_kwargs.temperature", f"{R}.val_kwargs.do_sample"
ENTRIES = ("ppo", "one_step_off", "fully_async")


def rule_val_repeats(c: Ctx, f: Facts) -> None:
    n, t = c.int(N), c.num(TEMP)
    if getattr(c.src, "entry", "ppo") not in ENTRIES or c.unknown(N, TEMP) or n is None or t is None:
        return
    if n <= 1 or t > 0 or c.v(SAMPLE) is True:  # do_sample=True with temperature ≤ 0: VI852
        return
    c.add("VI937", "warning", (N, TEMP),
          f"{N}={n} with {TEMP}={t:g}: verl samples validation from val_kwargs.temperature alone "
          "(v1/agent_loop_tq.py:73-76, agent_loop.py:604-607) and temperature 0 is its greedy setting "
          f"(apply_greedy_sampling_params, v1/agent_loop_tq.py:41-44), so each prompt gets {n} copies of one greedy answer: {n}x the validation "
          f"generation, and mean@{n}/best@{n}/maj@{n} all equal the greedy score (verl#1352)",
          f"set {TEMP} > 0 (e.g. the training temperature) to sample {n} answers, or {N}=1 for greedy validation",
          fix=Fix(set={N: 1}))
