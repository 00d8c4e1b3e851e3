"""Agent-loop worker split of verl 0.9.1's legacy PPO trainer (paths under site-packages/verl):

- VI780 (error): the legacy trainer (main_ppo with trainer.use_v1=False, trainer/main_ppo.py:183-192) hands each
  step's whole generation batch to AgentLoopManager.generate_sequences (trainer/ppo/ray_trainer.py:1513), which
  splits it over its rollout.agent.num_workers workers (experimental/agent_loop/agent_loop.py:1210-1213, :1247) with
  DataProto.chunk, and chunk asserts an equal split (protocol.py:870-873, "only support equal chunk"). The batch is
  the dataloader's gen_batch_size or train_batch_size prompts (ray_trainer.py:407-409, drop_last=True) repeated
  rollout.n times (:1491), plus one greedy baseline per prompt for ReMax (:1493-1505); nothing pads it, so a size
  that num_workers does not divide stops the first step, after every model has loaded (real case verl#6801: 12 × 5 =
  60 sequences over the default 8 workers). Validation pads its batch to num_workers first (ray_trainer.py:638-639)
  and does not fail. The V1 trainer (the default) splits a TensorDict unevenly (trainer/ppo/v1/agent_loop_tq.py:251)
  and runs.
"""

from __future__ import annotations

from wizard.check.rules.context import R, Ctx, Facts

WORKERS = f"{R}.agent.num_workers"


def step_sequences(batch: int, n: int, remax: bool) -> int:
    """The rows the legacy trainer sends to the agent loop manager each step (ray_trainer.py:1491-1505)."""
    return batch * n + (batch if remax else 0)


def rule_agent_workers(c: Ctx, f: Facts) -> None:
    if c.src.entry != "ppo" or c.src.recipe or c.v("trainer.use_v1") is not False:
        return
    keys = ("data.train_batch_size", "data.gen_batch_size", f"{R}.n", WORKERS, "algorithm.adv_estimator")
    if c.unknown(*keys):
        return
    gen = c.int("data.gen_batch_size")
    batch_key = "data.gen_batch_size" if gen else "data.train_batch_size"
    batch, n, workers = gen or c.int("data.train_batch_size"), c.int(f"{R}.n"), c.int(WORKERS)
    if not batch or not n or not workers or batch <= 0 or n <= 0 or workers <= 0:
        return
    remax = str(c.v("algorithm.adv_estimator")) == "remax"
    rows = step_sequences(batch, n, remax)
    if rows % workers == 0:
        return
    fit = max(d for d in range(1, workers + 1) if rows % d == 0)
    how = f"{batch} prompts ({batch_key}) × rollout.n={n}" + (f" + {batch} ReMax greedy baselines" if remax else "")
    c.add("VI780", "error", (batch_key, f"{R}.n", WORKERS, "trainer.use_v1"),
          f"the legacy trainer (trainer.use_v1=False) splits each step's {rows} sequences ({how}) into "
          f"{WORKERS}={workers} equal chunks: {rows} is not a multiple of {workers}, so DataProto.chunk stops the "
          "first training step with 'only support equal chunk' (experimental/agent_loop/agent_loop.py:1247, "
          "protocol.py:870-873), after every model has loaded",
          f"set {WORKERS}={fit} (the largest divisor of {rows} not above {workers}; fewer agent-loop workers share "
          f"the requests), or a {batch_key} that makes the sequences a multiple of {workers}, or drop "
          "trainer.use_v1=False (the V1 trainer splits unevenly, trainer/ppo/v1/agent_loop_tq.py:251)")
