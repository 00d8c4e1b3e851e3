"""Per-role profiler settings verl 0.9.1 never acts on (paths under site-packages/verl).

verl profiles a step in two halves. The trainer picks the steps: on each step in global_profiler.steps it calls
start_profile/stop_profile on every worker group (trainer/ppo/v1/trainer_base.py:457-461, 1400-1464;
trainer/ppo/ray_trainer.py:1457-1476, 1119-1160). Each worker then decides for itself from its role's
`<role>.profiler` block (actor_rollout_ref.actor / .ref / .rollout, critic): it builds a DistProfiler from that block
(workers/engine_workers.py:487-525; the rollout servers from rollout.profiler, workers/rollout/vllm_rollout/
vllm_async_server.py:182-200) whose tool is `<role>.profiler.tool` (by default global_profiler.tool,
trainer/config/_generated_ppo_trainer.yaml:124-134).

- VI678 (warning): a role's profiler.enable left False while profiling is asked for. DistProfiler keeps
  `_enable = config.enable` (utils/profiler/profile.py:123) and start/stop act only when it is True (profile.py:202,
  217); all_ranks/ranks only choose the ranks of an enabled profiler (profile.py:127-134). So with
  global_profiler.tool and global_profiler.steps set but no role enabled, the trainer calls start/stop on the
  profiled steps and no worker writes anything (verl#6181: torch_memory with actor.profiler.all_ranks=True and no
  enable); and a role whose ranks are chosen (all_ranks=True or ranks set) without enable is never profiled.
- VI679 (warning): settings under `<role>.profiler.tool_config.<other>` for a tool that does not run. The worker
  reads only `tool_config[<role>.profiler.tool]` (engine_workers.py:488-491, and :119 for the inner
  TrainingWorker; the rollout servers vllm_async_server.py:186-187), so e.g. the NPU example's
  tool_config.npu.discrete/contents kept after switching global_profiler.tool to torch are ignored and the torch
  profiler runs with its own defaults (utils/profiler/config.py:97-124: contents=[] = everything, discrete=False;
  verl#6329).

The roles and each role's tool_config names are read from the resolved config (verl's own YAML); the tools a worker
builds a profiler for are verl's list at engine_workers.py:488 (PROFILER_TOOLS; tests/test_check_profiler_roles.py
compares it with verl's source).
"""

from __future__ import annotations

from wizard.check.report import Fix
from wizard.check.rules.context import Ctx, Facts

ROLES = ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "actor_rollout_ref.rollout", "critic")
# workers/engine_workers.py:488: the tools a worker builds a tool_config (and a real profiler) for
PROFILER_TOOLS = ("npu", "nsys", "torch", "torch_memory", "precision_debugger")


def _roles(c: Ctx, f: Facts) -> list[str]:
    """Roles whose profiler block exists in the resolved config (the critic only when the run has one)."""
    return [r for r in ROLES if f"{r}.profiler.enable" in c.res.flat and (r != "critic" or f.use_critic)]


def _steps(c: Ctx) -> list | None:
    steps = c.v("global_profiler.steps")
    return steps if isinstance(steps, list) and steps else None


def _chosen_ranks(c: Ctx, role: str) -> list[str]:
    """The rank-selection keys the user set on a role (all_ranks=True, a non-empty ranks list)."""
    keys = []
    if c.v(f"{role}.profiler.all_ranks") is True and c.set_by_user(f"{role}.profiler.all_ranks"):
        keys.append(f"{role}.profiler.all_ranks")
    ranks = c.v(f"{role}.profiler.ranks")
    if isinstance(ranks, list) and ranks and c.set_by_user(f"{role}.profiler.ranks"):
        keys.append(f"{role}.profiler.ranks")
    return keys


def rule_profiler_enable(c: Ctx, f: Facts) -> None:
    steps = _steps(c)
    if steps is None:
        return
    roles = _roles(c, f)
    enabled = [r for r in roles if c.v(f"{r}.profiler.enable") is True]
    tools = {r: c.v(f"{r}.profiler.tool") for r in roles}
    if not enabled:
        if c.v("global_profiler.tool") not in PROFILER_TOOLS:
            return
        chosen = [r for r in roles if _chosen_ranks(c, r)] or ["actor_rollout_ref.actor"]
        keys = tuple(f"{r}.profiler.enable" for r in chosen)
        c.add("VI678", "warning", (*keys, "global_profiler.tool", "global_profiler.steps"),
              f"global_profiler.tool={c.v('global_profiler.tool')} with global_profiler.steps={steps}, but no role "
              f"sets profiler.enable=True ({', '.join(f'{r}.profiler.enable' for r in roles)} are all False): each "
              "worker's DistProfiler is disabled (utils/profiler/profile.py:123, 202, 217), so the profiled steps "
              "write no trace or snapshot",
              f"set {' and '.join(f'{k}=True' for k in keys)} (all_ranks/ranks only choose the ranks of an enabled "
              "profiler)", fix=Fix(set={k: True for k in keys}))
        return
    for role in roles:
        chosen = _chosen_ranks(c, role)
        if role in enabled or not chosen or tools.get(role) not in PROFILER_TOOLS:
            continue
        c.add("VI678", "warning", (f"{role}.profiler.enable", *chosen),
              f"{role}.profiler.enable=False with {', '.join(f'{k}={c.v(k)}' for k in chosen)}: the rank choice "
              f"applies only to an enabled profiler (utils/profiler/profile.py:123-134), so {role} is never profiled "
              f"on steps {steps}",
              f"set {role}.profiler.enable=True, or drop the rank settings",
              fix=Fix(set={f"{role}.profiler.enable": True}))


def _user_tool_keys(c: Ctx, role: str) -> dict[str, list[str]]:
    """User-set keys under <role>.profiler.tool_config.<tool>., by tool."""
    prefix = f"{role}.profiler.tool_config."
    out: dict[str, list[str]] = {}
    for key in c.res.user:
        if key.startswith(prefix) and "." in key[len(prefix):]:
            out.setdefault(key[len(prefix):].split(".", 1)[0], []).append(key)
    return out


def rule_profiler_tool_config(c: Ctx, f: Facts) -> None:
    if _steps(c) is None:
        return
    for role in _roles(c, f):
        tool = c.v(f"{role}.profiler.tool")
        if c.v(f"{role}.profiler.enable") is not True or tool not in PROFILER_TOOLS:
            continue
        for other, keys in sorted(_user_tool_keys(c, role).items()):
            if other == tool:
                continue
            names = sorted(k.rsplit(".", 1)[1] for k in keys)
            here = [n for n in names if f"{role}.profiler.tool_config.{tool}.{n}" in c.res.flat]
            move = (f"; set them under {role}.profiler.tool_config.{tool} ({', '.join(here)} exist there)"
                    if here else "")
            c.add("VI679", "warning", (*sorted(keys), f"{role}.profiler.tool"),
                  f"{role}.profiler.tool_config.{other}.{{{','.join(names)}}} set: {role} profiles with tool={tool} "
                  "and verl reads only "
                  f"{role}.profiler.tool_config.{tool} (workers/engine_workers.py:488-491), so the {other} settings "
                  f"are ignored and {tool} runs with its own values",
                  f"drop them, or set {role}.profiler.tool (or global_profiler.tool) to {other} if that tool was "
                  f"meant{move}")
