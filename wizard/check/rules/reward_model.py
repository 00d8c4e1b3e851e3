"""Reward-model rules: a reward model served by verl's reward loop (a classifier, or a generative judge with a custom
reward function) that verl would refuse only once Ray is up (VI887-VI889).

verl 0.9.1 (paths under verl/):
- With `reward.reward_model.enable`, the reward manager calls the custom reward function with two more keywords,
  `reward_router_address` and `reward_model_tokenizer` (experimental/reward_loop/reward_manager/naive.py:56-63, as
  dapo.py, gdpo.py, remote.py); without a reward model it passes neither. A function that does not take them (or
  **kwargs) fails with TypeError at the first reward; one that needs them without a reward model, too.
- The reward model's replicas have TP×DP×PP GPUs each; its GPUs are its own pool (`enable_resource_pool`:
  n_gpus_per_node × nnodes) or the trainer's (trainer/ppo/v1/trainer_base.py:823-835). Fewer GPUs than one replica:
  `Not enough GPUs to run the reward model` (experimental/reward_loop/reward_model.py:60-64), after the cluster and
  the policy's workers have started.
"""

from __future__ import annotations

import ast
from pathlib import Path

from wizard.check.rules.context import Ctx, Facts, local_path

RM = "reward.reward_model"
FN = "reward.custom_reward_function"
ROUTER_KWARGS = ("reward_router_address", "reward_model_tokenizer")


def rule_reward_model(c: Ctx, f: Facts) -> None:
    enabled = bool(c.v(f"{RM}.enable"))
    _rule_function_kwargs(c, enabled)
    if enabled:
        _rule_pool(c, f)


def _signature(path: Path, name: str) -> tuple[set[str], set[str], bool] | None:
    """(parameters, parameters without a default, takes **kwargs) of a top-level function `name` in a Python file; None
    when the file cannot be read or parsed (VI870 / VI871 say why) or defines no such function."""
    try:
        if path.stat().st_size > 4 << 20:  # a reward function file, not a data file: bounded
            return None
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            a = node.args
            positional = a.posonlyargs + a.args
            with_default = {p.arg for p in positional[len(positional) - len(a.defaults):]} if a.defaults else set()
            with_default |= {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
            params = {p.arg for p in positional + a.kwonlyargs}
            return params, params - with_default, a.kwarg is not None
    return None


def _rule_function_kwargs(c: Ctx, enabled: bool) -> None:
    path, name = c.v(f"{FN}.path"), c.v(f"{FN}.name") or "compute_score"
    if not isinstance(path, str) or not path or c.unknown(f"{FN}.path", f"{FN}.name"):
        return
    local = local_path(c, path)
    sig = _signature(local, str(name)) if local is not None and local.is_file() else None
    if sig is None:
        return
    params, required, var_kw = sig
    keys = (f"{FN}.path", f"{FN}.name", f"{RM}.enable")
    if enabled and not var_kw and not set(ROUTER_KWARGS) <= params:
        lacking = ", ".join(k for k in ROUTER_KWARGS if k not in params)
        c.add("VI887", "error", keys,
              f"{Path(path).name}:{name} does not take {lacking}, which verl's reward manager passes to the custom reward "
              f"function when {RM}.enable is true (naive.py:56-63): TypeError at the first reward",
              f"add `{', '.join(f'{k}=None' for k in ROUTER_KWARGS)}` (or **kwargs) to {name}'s parameters; a judge "
              "posts its request to http://{reward_router_address}/v1/chat/completions")
    needs = [k for k in ROUTER_KWARGS if k in required]
    if not enabled and needs:
        c.add("VI888", "error", keys,
              f"{Path(path).name}:{name} requires {', '.join(needs)} (a generative reward model's router), but "
              f"{RM}.enable is false: verl passes no router, so every reward call fails with TypeError",
              f"set {RM}.enable=true with {RM}.model_path (the judge) and {RM}.rollout.name, or give the parameters "
              "defaults")


def _rule_pool(c: Ctx, f: Facts) -> None:
    keys = (f"{RM}.rollout.tensor_model_parallel_size", f"{RM}.rollout.data_parallel_size",
            f"{RM}.rollout.pipeline_model_parallel_size")
    if c.unknown(*keys, f"{RM}.enable_resource_pool", f"{RM}.n_gpus_per_node", f"{RM}.nnodes"):
        return
    replica = 1
    for k in keys:
        replica *= c.int(k) or 1
    if bool(c.v(f"{RM}.enable_resource_pool")):
        gpn, nnodes = c.int(f"{RM}.n_gpus_per_node") or 0, c.int(f"{RM}.nnodes") or 0
        if gpn <= 0 or nnodes <= 0:  # verl raises its own ValueError (trainer_base.py:824-827)
            c.add("VI889", "error", (f"{RM}.n_gpus_per_node", f"{RM}.nnodes", f"{RM}.enable_resource_pool"),
                  f"{RM}.enable_resource_pool with n_gpus_per_node={gpn} × nnodes={nnodes}: verl raises "
                  f"`config.reward.reward_model.{'n_gpus_per_node' if gpn <= 0 else 'nnodes'} must be greater than 0`",
                  f"set {RM}.nnodes and {RM}.n_gpus_per_node to the reward model's own GPUs (nnodes=1 for one node)")
            return
        pool, where = gpn * nnodes, f"its own pool of {gpn} × {nnodes}"
        pool_keys: tuple[str, ...] = (f"{RM}.n_gpus_per_node", f"{RM}.nnodes")
    elif f.n_gpus is not None:
        pool, where = f.n_gpus, "the trainer's GPUs (colocated)"
        pool_keys = ("trainer.n_gpus_per_node", "trainer.nnodes")
    else:
        return
    if replica > pool:
        c.add("VI889", "error", (keys[0], *pool_keys),
              f"a reward-model replica needs TP×DP×PP={replica} GPUs but it has {pool} ({where}): verl stops with "
              f"`Not enough GPUs to run the reward model. world_size ({pool}) < rollout_world_size ({replica})` "
              "(reward_model.py:60) once the cluster is up",
              f"set {keys[0]} ≤ {pool}, or give the reward model more GPUs")
