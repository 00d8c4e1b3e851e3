"""VI989: `do_sample=False` that verl's agent loop never reads, so the rollout samples anyway.

In verl 0.9.1 every vLLM / SGLang / TensorRT-LLM rollout goes through the agent loop, which builds its sampling
parameters from temperature, top_p and top_k alone: rollout.* for training, val_kwargs.* for validation
(experimental/agent_loop/agent_loop.py:588-606). `val_kwargs.do_sample` only reaches the batch's meta_info
(trainer/ppo/ray_trainer.py:631) and `rollout.do_sample` no server reads; greedy decoding comes from temperature 0
(the engines' own greedy rule), which the loop sets only for ReMax's internal baseline (agent_loop.py:598-601,
639-648). Only the hf / naive rollouts read do_sample (workers/rollout/hf_rollout.py:56, naive/naive_rollout.py:85).
So `val_kwargs.do_sample=False` with `val_kwargs.temperature=0.6` validates with sampled answers (verl#6202), not
greedy ones. The training rollout cannot be greedy this way either: the actor divides the logits by
rollout.temperature (so 0 is no fix there), hence no fix for it.
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import R, Ctx, Facts
from wizard.check.rules.engine_kwargs import engine_names


def rule_ignored_do_sample(c: Ctx, f: Facts) -> None:
    if c.v(f"{R}.name") not in engine_names(c):  # the server engines (vllm, sglang, trtllm): all run the agent loop
        return
    for prefix, where in ((f"{R}.val_kwargs", "validation"), (R, "the training rollout")):
        key, temp_key = f"{prefix}.do_sample", f"{prefix}.temperature"
        t = c.num(temp_key)
        if c.v(key) is not False or t is None or t <= 0:
            continue
        greedy = where == "validation"
        c.add("VI989", "warning", (key, temp_key),
              f"{key}=False with {temp_key}={t:g}: verl's agent loop never reads do_sample and builds the sampling "
              f"parameters from temperature/top_p/top_k (experimental/agent_loop/agent_loop.py:588-606), so "
              f"{where} samples at temperature {t:g}, not greedily",
              f"set {temp_key}=0 for greedy validation (then do_sample may stay False)" if greedy else
              f"remove {key}: the training rollout samples at {temp_key} (the actor divides the logits by it, so it "
              "must stay > 0)",
              fix=Fix(set={temp_key: 0}) if greedy else None)
