"""What verl 0.9.1's validation hands a custom reward and what it does with the answer (VI442, VI443; paths under
site-packages/verl).

- VI442 (warning): a custom reward manager (reward.reward_manager.source=importlib: the class
  reward.reward_manager.name in reward.reward_manager.module.path, loaded by `resolve_reward_manager_cls`,
  trainer/ppo/reward.py:96-106) whose code branches on the batch's `meta_info["validate"]` (`.get("validate")`,
  `["validate"]` or `"validate" in ...meta_info`), while the reward is computed on the agent-loop path. That path
  is on unless a reward model shares the rollout's GPUs: the reward-loop manager hands its workers to the agent
  loop when `not reward.reward_model.enable or reward.reward_model.enable_resource_pool`
  (experimental/reward_loop/reward_loop.py:313-321, the V1 trainer's get_reward_handles, trainer/ppo/v1/
  trainer_base.py:408-410; the legacy trainer's own copy, trainer/ppo/ray_trainer.py:949, :959). There the agent
  loop builds the reward DataProto from the sequences alone, `DataProto(batch=..., non_tensor_batch=...)` with no
  meta_info (experimental/agent_loop/agent_loop.py:1021-1026; the V1 AgentLoopWorkerTQ inherits it,
  trainer/ppo/v1/agent_loop_tq.py:53, :160), so `meta_info.get("validate")` is always empty: validation is scored
  with the training branch, silently (verl#7121). The validate flag exists only on the trainer's batch
  (trainer/ppo/v1/trainer_base.py:1066, ray_trainer.py:663). The test runs verl's own `_compute_score` on the CPU.
- VI443 (warning; error on the legacy trainer, trainer.use_v1=False): a custom reward function whose returned dict
  holds a key verl's validation fills itself. The registered managers copy every key of the dict into
  reward_extra_info (experimental/reward_loop/reward_manager/naive.py:86-92). `_validate` first extends
  reward_extra_infos_dict["reward"] with the rm_scores sums, then appends each reward_extra_info key to the same
  dict (trainer/ppo/v1/trainer_base.py:1124, :1136-1139), so a "reward" key doubles that list; process_validation_
  metrics reads it by sample index over the data sources (trainer/ppo/metric_utils.py:896-945), so val-core's
  reward mean@/best@ are taken from a misaligned list, silently (awslabs/agentcore-rl-toolkit PR#136, a verl
  integration). The legacy trainer extends the same list (ray_trainer.py:678-686) and asserts equal lengths
  (:707-708): AssertionError at the first validation. The reserved keys are derived from verl's two `_validate`
  sources (`reserved_keys`: the constant subscripts of reward_extra_infos_dict), not tabulated.
Files are read as text (bounded) and parsed with `ast`, never imported.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

from wizard._pysource import own_returns, parse_reward_file, top_level_function
from wizard.check.rules.context import Ctx, Facts, local_path

MANAGER, FN, RM = "reward.reward_manager", "reward.custom_reward_function", "reward.reward_model"
VALIDATE_SOURCES = ("trainer/ppo/v1/trainer_base.py", "trainer/ppo/ray_trainer.py")
FALLBACK_RESERVED = frozenset({"reward"})  # trainer_base.py:1124, ray_trainer.py:678 (no verl here)


def _verl_file(rel: str) -> Path | None:
    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / rel
    return p if p.is_file() else None


@functools.lru_cache(maxsize=1)
def reserved_keys() -> frozenset[str]:
    """The reward_extra_infos_dict keys verl's `_validate` (V1 and legacy) fills itself: constant subscripts of
    that dict whose `.extend(...)` / `.append(...)` is called with verl's own scores, read from verl's source."""
    keys: set[str] = set()
    for rel in VALIDATE_SOURCES:
        path = _verl_file(rel)
        tree = parse_reward_file(path) if path is not None else None
        for node in ast.walk(tree) if tree is not None else ():
            if not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "_validate"):
                continue
            for call in ast.walk(node):
                f = call.func if isinstance(call, ast.Call) else None
                if (isinstance(f, ast.Attribute) and f.attr == "extend" and isinstance(f.value, ast.Subscript)
                        and isinstance(f.value.value, ast.Name) and f.value.value.id == "reward_extra_infos_dict"
                        and isinstance(f.value.slice, ast.Constant) and isinstance(f.value.slice.value, str)):
                    keys.add(f.value.slice.value)
    return frozenset(keys) or FALLBACK_RESERVED


def _is_meta_info(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "meta_info") or \
        (isinstance(node, ast.Name) and node.id == "meta_info")


def _validate_reads(cls: ast.ClassDef) -> list[int]:
    """Lines where the class reads meta_info's "validate" (get, subscript or `in`)."""
    lines = []
    for n in ast.walk(cls):
        hit = False
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" \
                and _is_meta_info(n.func.value) and n.args and isinstance(n.args[0], ast.Constant):
            hit = n.args[0].value == "validate"
        elif isinstance(n, ast.Subscript) and _is_meta_info(n.value) and isinstance(n.slice, ast.Constant):
            hit = n.slice.value == "validate"
        elif isinstance(n, ast.Compare) and isinstance(n.left, ast.Constant) and n.left.value == "validate" \
                and len(n.ops) == 1 and isinstance(n.ops[0], (ast.In, ast.NotIn)) and _is_meta_info(n.comparators[0]):
            hit = True
        if hit:
            lines.append(n.lineno)
    return sorted(set(lines))


def _lineage(classes: dict[str, ast.ClassDef], name: str) -> list[ast.ClassDef]:
    """The class `name` and the bases of it defined in the same file (a helper base that reads validate counts)."""
    out: list[ast.ClassDef] = []
    todo = [name]
    while todo:
        cls = classes.get(todo.pop())
        if cls is None or cls in out:
            continue
        out.append(cls)
        todo.extend(b.id for b in cls.bases if isinstance(b, ast.Name))
    return out


def _skip(c: Ctx) -> bool:
    return c.src.entry in ("sft", "generation", "eval") or bool(getattr(c.src, "recipe", None))


def rule_valid_reward_meta(c: Ctx, f: Facts) -> None:
    if _skip(c):
        return
    _rule_manager_validate(c)
    _rule_reserved_key(c)


def _agent_reward_loop(c: Ctx) -> bool | None:
    if c.unknown(f"{RM}.enable", f"{RM}.enable_resource_pool"):
        return None
    return c.v(f"{RM}.enable") is not True or c.v(f"{RM}.enable_resource_pool") is True


def _rule_manager_validate(c: Ctx) -> None:
    keys = (f"{MANAGER}.source", f"{MANAGER}.name", f"{MANAGER}.module.path")
    if c.unknown(*keys) or c.v(keys[0]) != "importlib" or not _agent_reward_loop(c):
        return
    name, path = c.v(keys[1]), c.v(keys[2])
    local = local_path(c, path) if isinstance(path, str) and path else None
    tree = parse_reward_file(local) if local is not None and local.is_file() else None
    classes = {n.name: n for n in (tree.body if tree is not None else ()) if isinstance(n, ast.ClassDef)}
    lines = sorted({x for cls in _lineage(classes, str(name)) for x in _validate_reads(cls)})
    if not lines:
        return
    at = ", ".join(str(x) for x in lines)
    c.add("VI442", "warning", (keys[0], keys[1], keys[2]),
          f"{MANAGER}.name={name} ({Path(path).name}:{at}) branches on meta_info['validate'], but with "
          f"{RM}.enable={c.v(f'{RM}.enable')} the reward runs on the agent-loop path (reward_loop.py:313-321), whose "
          "DataProto has no meta_info (agent_loop.py:1021-1026): validate is never set and validation is scored "
          "like training, silently (verl#7121)",
          "tell validation apart from what the sample carries (e.g. a data.val_files column such as "
          "extra_info.split='test', read from non_tensor_batch), not from meta_info")


def _rule_reserved_key(c: Ctx) -> None:
    p_key, n_key = f"{FN}.path", f"{FN}.name"
    path = c.v(p_key)
    if not isinstance(path, str) or not path or c.unknown(p_key, n_key, "data.val_files", "trainer.use_v1"):
        return
    if c.v("data.val_files") in (None, "", []) or (c.v(f"{MANAGER}.source") or "register") != "register":
        return
    local = local_path(c, path)
    fn = top_level_function(local, str(c.v(n_key) or "compute_score")) if local is not None and local.is_file() \
        else None
    reserved = reserved_keys()
    hits = sorted({(k.value, r.lineno) for r in (own_returns(fn) if fn is not None else ())
                   if isinstance(r.value, ast.Dict) for k in r.value.keys
                   if isinstance(k, ast.Constant) and k.value in reserved})
    if not hits:
        return
    legacy = c.v("trainer.use_v1") is False
    key, line = hits[0]
    effect = ("the legacy trainer's length assert fails at the first validation (ray_trainer.py:678-686, 707-708)"
              if legacy else "process_validation_metrics reads it by sample index (metric_utils.py:896-945), so "
              "val-core's reward mean@/best@ come from a misaligned list, silently")
    c.add("VI443", "error" if legacy else "warning", (p_key, n_key),
          f"{Path(path).name}:{line} returns a '{key}' key: verl's validation fills reward_extra_infos_dict['{key}'] "
          f"with the scores and then appends every reward_extra_info key to it (trainer_base.py:1124, 1136-1139), "
          f"so the list holds two values a sample and {effect} (agentcore-rl-toolkit PR#136)",
          f"rename the '{key}' key (e.g. 'raw_reward'); 'score' is the reward verl uses")
