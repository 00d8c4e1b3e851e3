"""What verl 0.9.1's reward managers read of the config and of a data row, and what a DAPO run asks of them
(paths under site-packages/verl).

"Which manager reads what" is derived, not tabulated: `manager_reads` parses verl's own reward-manager modules
(experimental/reward_loop/reward_manager/*.py, located with importlib.util.find_spec, parsed with ast, never
imported) and, for each class `@register("name")` names, collects the reward.reward_kwargs keys it reads
(`config.reward.get("reward_kwargs", {}).get(KEY)`, inherited from its bases), whether it reads the row's
`data_source` column, and whether it names `reward_fn_key`. Where verl is not installed nothing is said.

- VI996 (warning): a reward.reward_kwargs key that the configured registered manager never reads (the legacy
  reward_model.reward_kwargs is VI805's). In 0.9.1 only
  DAPORewardManager reads it (dapo.py:33-35: overlong_buffer_cfg, max_resp_len); the manager comes from
  reward.reward_manager.name (trainer/ppo/reward.py:88-95, default naive), whose run_single returns the raw score
  (naive.py:86-99): the overlong penalty is never applied, silently (verl#4268). A function's own keywords go under
  reward.custom_reward_function.reward_kwargs (trainer/ppo/reward.py:82), not here.
- VI997 (warning): data.reward_fn_key other than data_source. Nothing on 0.9.1's reward path reads it: every
  reward-loop manager takes the row's `data_source` column unconditionally (naive.py:42, dapo.py:60, gdpo.py:43,
  limited.py:407, remote.py:83; limited.py:350 takes a `reward_fn_key` argument and leaves it unused), and only the
  legacy workers/reward_manager classes, which main_ppo no longer builds, honour it. The custom function (or
  default_compute_score) gets the data_source value, not the column the key names (verl PR#975).
- VI998 (warning): data.gen_batch_size ≠ 1 where the V1 trainer overrides it to 1: DAPO dynamic sampling
  (algorithm.filter_groups.enable), trainer.v1.sampler.sync_refill_failed_groups or an async trainer mode
  (trainer/ppo/v1/trainer_base.py:727-739, a log line only). With DAPO the built-in ReplayBuffer bounds generation by
  filter_groups.max_inflight_gen_batches train batches (:172-184, replay_buffer.py:442-485) and ignores
  max_num_gen_batches (trainer_base.py:205-211): a recipe's `gen_batch_size = 3 × train_batch_size` oversampling
  never happens (verl#876).
- VI999 (error): algorithm.filter_groups.metric (not "reward", the canonical rm_scores) names a key the custom reward
  function never returns. The managers put a dict's keys into reward_extra_info as they are and add `acc` only for a
  plain-number return (naive.py:89-95, dapo.py:98-104, gdpo.py, limited.py, remote.py; dapo adds overlong_reward /
  overlong with overlong_buffer_cfg.log, dapo.py:117-119); the ReplayBuffer then stops with `Finished groups are
  missing DAPO metric` once the first groups finish (trainer/ppo/v1/replay_buffer.py:296-307; trainer_base.py:187-211
  checks only that the metric is non-empty) — after model load and a full rollout (verl#2318). Said only when every
  `return` of the function (read with wizard._pysource, never imported) is a dict literal with constant string
  keys, none of them the metric.
"""

from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass
from pathlib import Path

from wizard._pysource import returned_keys
from wizard.check.rules.context import Ctx, Facts, local_path, parse_module

MANAGER = "reward.reward_manager"
FN = "reward.custom_reward_function"
FG = "algorithm.filter_groups"
KWARGS = ("reward.reward_kwargs",)  # the legacy reward_model.reward_kwargs: VI805
WHERE = "experimental/reward_loop/reward_manager/"
REWARD_METRIC = "reward"  # trainer/ppo/v1/replay_buffer.py:32 FILTER_GROUPS_REWARD_METRIC
OVERLONG_LOG_KEYS = ("overlong_reward", "overlong")  # dapo.py:117-119, with overlong_buffer_cfg.log


@dataclass(frozen=True)
class Reads:
    """What one registered reward manager reads: reward_kwargs keys (None: the whole dict, any key), where it reads
    them and the data_source column (file:line under experimental/reward_loop/reward_manager/), and whether it names
    reward_fn_key at all."""

    kwargs: frozenset[str] | None
    kwargs_at: str
    data_source_at: str
    fn_key: bool


def _const(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_kwargs_dict(node: ast.AST) -> bool:
    """`X.get("reward_kwargs", ...)` or `X["reward_kwargs"]` (X.reward_kwargs too)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and _const(node.args[0]) == "reward_kwargs"
    if isinstance(node, ast.Subscript):
        return _const(node.slice) == "reward_kwargs"
    return isinstance(node, ast.Attribute) and node.attr == "reward_kwargs" and not \
        (isinstance(node.value, ast.Name) and node.value.id == "self")


def _class_reads(cls: ast.ClassDef, file: str) -> tuple[set[str] | None, list[str], list[str]]:
    keys: set[str] | None = set()
    kw_at: list[str] = []
    ds_at: list[str] = []
    parent: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(cls):
        for child in ast.iter_child_nodes(node):
            parent[child] = node
    for node in ast.walk(cls):
        if isinstance(node, ast.Subscript) and _const(node.slice) == "data_source" and \
                isinstance(node.value, ast.Attribute) and node.value.attr == "non_tensor_batch":
            ds_at.append(f"{file}:{node.lineno}")
        if not _is_kwargs_dict(node):
            continue
        kw_at.append(f"{file}:{node.lineno}")
        up = parent.get(node)
        key = None
        if isinstance(up, ast.Attribute) and up.attr == "get" and isinstance(parent.get(up), ast.Call):
            call = parent[up]
            key = _const(call.args[0]) if call.args else None  # type: ignore[attr-defined]
        elif isinstance(up, ast.Subscript) and up.value is node:
            key = _const(up.slice)
        if key is None:
            keys = None
        elif keys is not None:
            keys.add(key)
    return keys, kw_at, ds_at


def _fn_key_read(cls: ast.ClassDef) -> bool:
    """Whether the class uses reward_fn_key beyond taking it as a parameter (self.reward_fn_key, config's key)."""
    return any((isinstance(n, ast.Attribute) and n.attr == "reward_fn_key") or
               _const(n) == "reward_fn_key" or
               (isinstance(n, ast.Name) and n.id == "reward_fn_key" and isinstance(n.ctx, ast.Load))
               for n in ast.walk(cls))


def register_names(tree: ast.Module) -> set[str]:
    """The names a module binds to the reward loop's `register` (limited.py imports it `as register_manager`; the
    legacy workers.reward_manager registry does not count)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("verl.experimental.reward_loop.reward_manager"):
            names |= {a.asname or a.name for a in node.names if a.name == "register"}
        elif isinstance(node, ast.ImportFrom) and node.level and (node.module or "") in ("", "registry"):
            names |= {a.asname or a.name for a in node.names if a.name == "register"}
    return names


def registered_name(cls: ast.ClassDef, register: set[str]) -> str | None:
    for d in cls.decorator_list:
        if isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id in register and d.args:
            return _const(d.args[0])
    return None


def manager_folder() -> Path | None:
    """verl's reward-manager folder on this machine (found, not imported); None without verl."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return None
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        folder = Path(root) / WHERE
        if folder.is_dir():
            return folder
    return None


def _lines(places: list[str]) -> str:
    """"dapo.py:33, 35" for ["dapo.py:33", "dapo.py:35"]."""
    by_file: dict[str, list[int]] = {}
    for place in places:
        file, line = place.rsplit(":", 1)
        by_file.setdefault(file, []).append(int(line))
    return "; ".join(f"{file}:{', '.join(map(str, sorted(set(lines))))}" for file, lines in by_file.items())


@functools.lru_cache(maxsize=1)
def manager_reads() -> dict[str, Reads]:
    """{registered name: Reads} for the reward managers of the installed verl (see the module's docstring)."""
    folder = manager_folder()
    if folder is None:
        return {}
    classes: dict[str, tuple[ast.ClassDef, str]] = {}
    register: dict[str, set[str]] = {}  # file -> its names for `register`
    for path in sorted(folder.glob("*.py")):
        try:
            tree = parse_module(path, 4 << 20)
        except SyntaxError:
            continue
        register[path.name] = register_names(tree) if tree is not None else set()
        for node in tree.body if tree is not None else []:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = (node, path.name)

    def gather(name: str, seen: frozenset[str]) -> tuple[set[str] | None, list[str], list[str], bool]:
        cls, file = classes[name]
        keys, kw_at, ds_at = _class_reads(cls, file)
        fn_key = _fn_key_read(cls)
        for base in cls.bases:
            bname = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
            if bname in classes and bname not in seen:
                bkeys, bkw, bds, bfn = gather(bname, seen | {bname})
                keys = None if keys is None or bkeys is None else keys | bkeys
                kw_at, ds_at, fn_key = kw_at + bkw, ds_at + bds, fn_key or bfn
        return keys, kw_at, ds_at, fn_key

    out: dict[str, Reads] = {}
    for name, (cls, file) in classes.items():
        registered = registered_name(cls, register[file])
        if registered is None:
            continue
        keys, kw_at, ds_at, fn_key = gather(name, frozenset({name}))
        out[registered] = Reads(None if keys is None else frozenset(keys), _lines(kw_at),
                                ds_at[0] if ds_at else "", fn_key)
    return out


def _manager(c: Ctx) -> tuple[str, Reads] | None:
    """(name, Reads) of the registered manager this config runs; None for importlib managers, an unresolved name,
    a recipe's own entry point (its code may read anything) or without verl."""
    if c.src.entry in ("sft", "generation", "eval") or getattr(c.src, "recipe", None):
        return None
    source, name = c.v(f"{MANAGER}.source") or "register", c.v(f"{MANAGER}.name") or "naive"
    if source != "register" or c.unknown(f"{MANAGER}.source", f"{MANAGER}.name"):
        return None
    reads = manager_reads().get(str(name))
    return (str(name), reads) if reads is not None else None


def rule_reward_managers(c: Ctx, f: Facts) -> None:
    found = _manager(c)
    if found is not None:
        _rule_kwargs(c, *found)
        _rule_fn_key(c, *found)
    _rule_gen_batch(c)
    _rule_filter_metric(c)


def _rule_kwargs(c: Ctx, name: str, reads: Reads) -> None:
    if reads.kwargs is None:
        return
    unread: dict[str, str] = {}  # top-level kwarg -> the prefix it was set under
    for prefix in KWARGS:
        for key in c.res.flat:
            if key.startswith(prefix + ".") and not c.unknown(key):
                top = key[len(prefix) + 1:].split(".", 1)[0]
                if top not in reads.kwargs:
                    unread.setdefault(top, prefix)
    if not unread:
        return
    readers = sorted(n for n, r in manager_reads().items() if r.kwargs is not None and set(unread) & r.kwargs)
    shown = ", ".join(f"{p}.{k}" for k, p in unread.items())
    how = (f"the {name!r} manager never reads reward_kwargs" if not reads.kwargs
           else f"the {name!r} manager reads only {', '.join(sorted(reads.kwargs))} of it ({WHERE}{reads.kwargs_at})")
    who = (f"; only {' and '.join(repr(r) for r in readers)} reads {'them' if len(unread) > 1 else 'it'} "
           f"({WHERE}{manager_reads()[readers[0]].kwargs_at})" if readers else "")
    hint = (f"set {MANAGER}.name={readers[0]} to run the manager that applies them, or remove them" if readers
            else "remove them")
    c.add("VI996", "warning", (*(f"{p}.{k}" for k, p in unread.items()), f"{MANAGER}.name"),
          f"{shown} {'are' if len(unread) > 1 else 'is'} set for nothing: verl runs the reward manager {MANAGER}.name={name!r} "
          f"(trainer/ppo/reward.py:88-95) and {how}{who}; {'they are' if len(unread) > 1 else 'it is'} silently ignored (verl#4268: the DAPO overlong "
          "penalty never applied)",
          hint + "; keywords for your reward function itself go under reward.custom_reward_function.reward_kwargs "
          "(trainer/ppo/reward.py:82)")


def _rule_fn_key(c: Ctx, name: str, reads: Reads) -> None:
    key = c.v("data.reward_fn_key")
    if not isinstance(key, str) or key in ("", "data_source") or c.unknown("data.reward_fn_key") or reads.fn_key \
            or not reads.data_source_at:
        return
    c.add("VI997", "warning", ("data.reward_fn_key", f"{MANAGER}.name"),
          f"data.reward_fn_key={key!r} is read by nothing on verl 0.9.1's reward path: the {name!r} reward manager "
          f"passes each row's data_source column to the reward function ({WHERE}{reads.data_source_at}), not the "
          f"{key!r} column; only the legacy workers/reward_manager classes, which main_ppo no longer builds, honour "
          "the key: rows are scored (or routed) by data_source, a wrong score or a scorer's error (verl PR#975)",
          "write the label your function routes on into the data_source column when you build the parquet (or into "
          "extra_info, which verl passes as extra_info=), and remove data.reward_fn_key")


def _v1_trainer(c: Ctx) -> bool:
    """main_ppo with the V1 trainer (trainer.use_v1, default true: trainer/main_ppo.py:183-191), no recipe."""
    return c.src.entry == "ppo" and not getattr(c.src, "recipe", None) and c.v("trainer.use_v1") is not False \
        and not c.unknown("trainer.use_v1")


def _dapo(c: Ctx) -> bool:
    return c.v(f"{FG}.enable") is True and not c.unknown(f"{FG}.enable")


def _rule_gen_batch(c: Ctx) -> None:
    gen = c.v("data.gen_batch_size")
    if not _v1_trainer(c) or gen in (None, 1) or isinstance(gen, bool) or not isinstance(gen, int) or \
            c.unknown("data.gen_batch_size", "trainer.v1.trainer_mode"):
        return
    mode = c.v("trainer.v1.trainer_mode") or "sync"
    refill = c.v("trainer.v1.sampler.sync_refill_failed_groups") is True
    why = [w for w, on in ((f"{FG}.enable=True (DAPO dynamic sampling)", _dapo(c)),
                           ("trainer.v1.sampler.sync_refill_failed_groups=True", refill),
                           (f"trainer.v1.trainer_mode={mode}", mode != "sync")) if on]
    if not why:
        return
    keys = ["data.gen_batch_size", *(k for k, on in ((f"{FG}.enable", _dapo(c)),
                                                        ("trainer.v1.sampler.sync_refill_failed_groups", refill),
                                                        ("trainer.v1.trainer_mode", mode != "sync")) if on)]
    capped = c.int(f"{FG}.max_num_gen_batches")
    also = ""
    if _dapo(c) and capped is not None and capped > 0:
        keys.append(f"{FG}.max_num_gen_batches")
        also = (f"; {FG}.max_num_gen_batches={capped} caps nothing either (only a log line says it is ignored, "
                "trainer_base.py:205-211)")
    tbs = c.int("data.train_batch_size")
    builtin = mode == "sync" and not c.v("trainer.v1.sampler.custom_sampler.path")
    if _dapo(c) and builtin:
        batches = max(1, math.ceil(gen / tbs)) if tbs else None
        hint = (f"remove data.gen_batch_size; to generate ahead as it meant, set {FG}.max_inflight_gen_batches"
                f"{f'={batches}' if batches else ''} (train batches of prompts in flight: trainer_base.py:172-184, "
                "replay_buffer.py:442-485)")
    else:
        hint = "remove data.gen_batch_size: verl fetches and refills one prompt at a time in this mode"
    c.add("VI998", "warning", tuple(keys),
          f"data.gen_batch_size={gen} has no effect: with {' and '.join(why)} verl 0.9.1's V1 trainer overrides it to 1 "
          "(trainer/ppo/v1/trainer_base.py:727-739, a log line only) and hands its replay buffer gen_batch_size=1 "
          f"(:172-184), so the oversampling it was set for never happens{also} (verl#876)",
          hint)


def _rule_filter_metric(c: Ctx) -> None:
    metric = c.v(f"{FG}.metric")
    if not _v1_trainer(c) or not _dapo(c) or not isinstance(metric, str) or not metric or metric == REWARD_METRIC \
            or c.unknown(f"{FG}.metric", f"{FN}.path", f"{FN}.name", f"{MANAGER}.source") \
            or (c.v(f"{MANAGER}.source") or "register") != "register" or c.v("trainer.v1.sampler.custom_sampler.path"):
        return
    path, name = c.v(f"{FN}.path"), str(c.v(f"{FN}.name") or "compute_score")
    local = local_path(c, path) if isinstance(path, str) and path else None
    got = returned_keys(local, name) if local is not None and local.is_file() else None
    if got is None:
        return
    keys, lines = got
    overlong_log = c.v("reward.reward_kwargs.overlong_buffer_cfg.log") is True and c.v(f"{MANAGER}.name") == "dapo"
    if metric in keys or (overlong_log and metric in OVERLONG_LOG_KEYS):
        return
    where = ", ".join(map(str, sorted(set(lines))[:4]))
    c.add("VI999", "error", (f"{FG}.metric", f"{FG}.enable", f"{FN}.path", f"{FN}.name"),
          f"{FG}.metric={metric!r}, but {Path(path).name}:{name} returns a dict with only "
          f"{', '.join(map(repr, sorted(keys)))} (line {where}): verl's reward manager stores a dict's keys as they "
          f"are and adds 'acc' only for a plain-number return ({WHERE}naive.py:89-95), so every finished group lacks "
          f"{metric!r} and the replay buffer stops with `Finished groups are missing DAPO metric {metric!r}` "
          "(trainer/ppo/v1/replay_buffer.py:296-307) after model load and the first rollout (verl#2318)",
          f"add {metric!r} to the dict {name} returns (e.g. the accuracy), or set {FG}.metric to one of its keys "
          f"({', '.join(sorted(keys))}) or to 'reward' (the summed reward score)")
