"""`ray_kwargs.ray_init` keys that Ray's `ray.init` refuses (VI657, VI658, VI659).

verl's run_ppo (main_ppo, and the fully_async / one_step_off entry points that call it) passes every key of
`ray_kwargs.ray_init` to `ray.init(**...)` when the driver has not started Ray yet, after merging its own runtime env
(`get_ppo_ray_runtime_env`) under `ray_kwargs.ray_init.runtime_env` (verl 0.9.1 trainer/main_ppo.py:58-74). What
`ray.init` takes is read from the installed Ray's source by scripts/ray_init_kwargs.py into
wizard/check/data/ray_init_kwargs.json (Ray 2.60.0, the one verl 0.9.1 runs here); tests/test_check_ray_init.py
regenerates it and holds each rule to Ray's own `ray.init` / `RuntimeEnv` on CPU.

VI657 (error): a key under `ray_kwargs.ray_init` that is neither a parameter of `ray.init` nor one of the private
`_x` keys it pops: `ray.init` raises RuntimeError "Unknown keyword argument(s): ..." (ray/_private/worker.py:1752,
unless the address is a Ray Client `ray://` one). The real case: verl PR#1768 and docs/faq/faq.rst:156 call the
timeline option `ray_init.timeline_json_file`; verl 0.9.1 reads it at `ray_kwargs.timeline_json_file`
(trainer/main_ppo.py:96-98), so `+ray_kwargs.ray_init.timeline_json_file=...` stops ray.init.

VI658 (error): a `ray_kwargs.ray_init.runtime_env.env_vars` value that is not a string. Hydra types an override's
value (`...env_vars.TRANSFER_QUEUE_ENABLE=1` is the int 1), OmegaConf.merge and to_container keep it
(main_ppo.py:71-74), and Ray validates the runtime env inside ray.init: TypeError "runtime_env['env_vars'] must be of
type Dict[str, str]" (ray/_private/runtime_env/validation.py:446, via job_config.py `_validate_runtime_env`). The
real case: verl's own examples/remax_trainer/run_qwen2.5_math_7b_sync_fsdp.sh:102 (PR#6340).

VI659 (error): a key Ray refuses when ray.init connects to an existing cluster (num_cpus, num_gpus, resources,
labels, object_store_memory, _system_config, ...: the `else:` of `if bootstrap_address is None`,
ray/_private/worker.py:1936-1966) set on a launch whose ray.init joins one: `ray job submit`, RAY_ADDRESS,
`ray_kwargs.ray_init.address`, or a `ray start` earlier in the script (ray.init with no address joins the cluster
`ray start` recorded on the node, services.get_ray_address_from_environment). ValueError "When connecting to an
existing cluster, num_cpus and num_gpus must not be provided." The real case: verl's FAQ / PR#1009 advice to set
`ray_init.num_cpus` on Slurm, applied to a script that starts Ray with `ray start` as
examples/tutorial/slurm/ray_on_slurm.slurm does.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from wizard.check.report import Fix
from wizard.check.rules.cluster import joins_cluster, script_commands
from wizard.check.rules.context import Ctx, Facts
from wizard.check.rules.scriptcluster import ray_starts

TABLE = Path(__file__).resolve().parent.parent / "data" / "ray_init_kwargs.json"
PREFIX = "ray_kwargs.ray_init."
ENV_VARS = PREFIX + "runtime_env.env_vars."
ADDRESS = PREFIX + "address"
TIMELINE = "ray_kwargs.timeline_json_file"
ENTRIES = ("ppo", "fully_async", "one_step_off")  # the entry points whose driver runs run_ppo's ray.init
# values Ray treats as "not given" for these keys (`_system_config = _system_config or {}` and `len(...) != 0`;
# `if _enable_object_reconstruction:`); every other cluster-only key is refused when it is not None
EMPTY_OK = ("_system_config", "_enable_object_reconstruction")


@cache
def ray_init_table() -> dict[str, Any]:
    return json.loads(TABLE.read_text(encoding="utf-8"))


def _given(c: Ctx) -> dict[str, list[str]]:
    """ray.init keyword → the flat keys under it that the config sets (`resources.a` → resources)."""
    found: dict[str, list[str]] = {}
    for key in c.res.flat:
        if key.startswith(PREFIX):
            found.setdefault(key[len(PREFIX):].split(".", 1)[0], []).append(key)
    return found


def _applies(c: Ctx) -> bool:
    return getattr(c.src, "entry", "ppo") in ENTRIES


def _client(c: Ctx) -> bool:
    address = c.res.flat.get(ADDRESS)
    return isinstance(address, str) and address.startswith("ray://")


def rule_ray_init_kwargs(c: Ctx, f: Facts) -> None:
    """VI657: keys ray.init does not take."""
    if not _applies(c) or _client(c):
        return
    table = ray_init_table()
    known = set(table["params"]) | set(table["private"])
    where = f"ray/_private/worker.py:{table['lines']['unknown_kwargs']}"
    for name, keys in sorted(_given(c).items()):
        if name in known or all(c.v(k) is None for k in keys):
            continue
        key = PREFIX + name
        value = c.v(key) if key in c.res.flat else "{...}"
        if name == TIMELINE.rsplit(".", 1)[-1]:
            c.add("VI657", "error", (key, TIMELINE),
                  f"{key}={value}: verl passes every ray_kwargs.ray_init key to ray.init, which raises "
                  f"'Unknown keyword argument(s): {name}' ({where}); verl reads the timeline file at {TIMELINE} "
                  "(trainer/main_ppo.py:96-98)",
                  f"set {TIMELINE}={value} instead", fix=Fix(set={TIMELINE: value}, delete=[key]))
            continue
        c.add("VI657", "error", (key,),
              f"{key}={value}: verl passes every ray_kwargs.ray_init key to ray.init (trainer/main_ppo.py:72-74), "
              f"and Ray {table['ray_version']}'s ray.init takes no '{name}': RuntimeError 'Unknown keyword "
              f"argument(s): {name}' ({where}) before any worker starts",
              f"remove {key}; ray.init takes {', '.join(sorted(table['params'])[:6])}, ... "
              "(docs.ray.io ray.init)")


def rule_ray_env_vars_strings(c: Ctx, f: Facts) -> None:
    """VI658: runtime_env env_vars values that are not strings."""
    if not _applies(c):
        return
    line = ray_init_table()["lines"]["env_vars_not_str"]
    for key in sorted(k for k in c.res.flat if k.startswith(ENV_VARS)):
        value = c.v(key)
        if isinstance(value, str):
            continue
        text = "null" if value is None else json.dumps(value)
        fixed = None if value is None or isinstance(value, (dict, list)) else \
            ("true" if value is True else "false" if value is False else str(value))
        c.add("VI658", "error", (key,),
              f"{key}={text} is of type {type(value).__name__}, not a string: Hydra types the value, verl merges it "
              "into ray.init's runtime_env unchanged (trainer/main_ppo.py:71-74), and Ray rejects it: TypeError "
              f"\"runtime_env['env_vars'] must be of type Dict[str, str]\" (ray/_private/runtime_env/validation.py:"
              f"{line})",
              f"quote the value: +{key}='{fixed}'" if fixed is not None else f"give {key} a string value or drop it",
              fix=Fix(set={key: fixed}, plus=[key]) if fixed is not None else None)


def _joins(c: Ctx) -> str:
    if c.res.flat.get(ADDRESS) == "local":  # canonicalize_bootstrap_address: "local" starts a new cluster
        return ""
    why = joins_cluster(c)
    if why:
        return why
    return "`ray start` earlier in the script" if ray_starts(script_commands(c)) else ""


def _refused(name: str, value: Any) -> bool:
    if name in EMPTY_OK:
        return bool(value)
    return value is not None


def rule_ray_init_existing_cluster(c: Ctx, f: Facts) -> None:
    """VI659: resource keys ray.init refuses when it connects to a running cluster."""
    if not _applies(c) or _client(c):
        return
    table = ray_init_table()
    given = _given(c)
    refused = []
    for name in sorted(set(table["cluster_only"]) & set(given)):
        keys = given[name]
        value = c.v(PREFIX + name) if PREFIX + name in keys else {k.rsplit(".", 1)[-1]: c.v(k) for k in keys}
        if _refused(name, value):
            refused.append((name, value))
    if not refused:
        return
    why = _joins(c)
    if not why:
        return
    lines = sorted({table["cluster_only"][n] for n, _ in refused})
    shown = ", ".join(f"{PREFIX}{n}={json.dumps(v)}" for n, v in refused)
    c.add("VI659", "error", tuple(PREFIX + n for n, _ in refused),
          f"{shown} on a run whose ray.init joins a running Ray cluster ({why}): Ray refuses these when it connects, "
          f"ValueError 'When connecting to an existing cluster, ... must not be provided' (ray/_private/worker.py:"
          f"{lines[0]}{'-' + str(lines[-1]) if len(lines) > 1 else ''}), so main_ppo stops at ray.init",
          "drop them from ray_kwargs.ray_init and give the resources where the cluster starts (`ray start "
          "--num-cpus/--num-gpus/--object-store-memory/--resources`), as verl's examples/tutorial/slurm/"
          "ray_on_slurm.slurm does")


RAY_INIT_RULES = (rule_ray_init_kwargs, rule_ray_env_vars_strings, rule_ray_init_existing_cluster)  # lint's ppo_rules
