"""Variables a launch script exports before `ray job submit` (VI829): they stay in the submitting shell.

Ray's job submission starts the entrypoint on the cluster, from the job supervisor, with the cluster's environment and
the job's runtime env (`--runtime-env FILE`, `--runtime-env-json JSON`: its `env_vars`), not the environment of the
`ray job submit` process (Ray's job_manager / job_supervisor; the test holds a real Ray cluster to it). So
`export VLLM_...=...` before the submit changes nothing in the job, and `export CUDA_VISIBLE_DEVICES=2,5,6,7`
does not pick GPUs: verl's workers get the GPUs of the Ray nodes (real case verl#1472).

Only bash's own run of the script sees what it exported (wizard.check.bashtrace records the names, never the
values); the static reader alone says nothing here. Only variables a verl job reads are named: those verl's own code
reads (wizard/check/data/verl_env_reads.json, generated from verl's source by scripts/verl_env_reads.py; verl#1853:
TENSORBOARD_DIR) and the families its engines and libraries read (JOB_VARS; torch's Gloo and TensorPipe read
GLOO_SOCKET_IFNAME and TP_SOCKET_IFNAME).

VI772 (warning): the same variables exported before a direct `python3 -m verl.trainer.main_ppo` that joins a running
cluster (RAY_ADDRESS, ray_kwargs.ray_init.address, or trainer.nnodes > 1 with no `ray start` in the script: a
multi-node run needs a cluster started beforehand). main_ppo passes ray.init only the runtime env verl builds
(trainer/main_ppo.py:57-74): get_ppo_ray_runtime_env (trainer/constants_ppo.py:105-153) forwards from the launching
shell only FORWARDED (and drops its own defaults the shell sets, :125-127), plus ray_kwargs.ray_init.runtime_env; Ray
workers get the raylet's environment and that runtime env, not the driver's (verl#967: GLOO_SOCKET_IFNAME).
"""

from __future__ import annotations

import re

from wizard.check.envreads import verl_env_reads
from wizard.check.rules.cluster import OWN_CLUSTER, job_runtime_env, joins_cluster, script_commands
from wizard.check.rules.context import Ctx, Facts, submit_words

# Read by the job's processes (verl, vLLM/SGLang, NCCL, torch, transformers/hub, loggers, Python's import path); the
# submit command's own variables (RAY_ADDRESS, RAY_JOB_HEADERS, ...) are not among them
JOB_VARS = re.compile(r"CUDA_VISIBLE_DEVICES|(VLLM|SGLANG|NCCL|TORCH|PYTORCH|CUDA|HF|HUGGINGFACE|TRANSFORMERS|WANDB|"
                      r"SWANLAB|MLFLOW|VERL|HCCL|ASCEND|GLOO|TP)_[A-Z0-9_]+|TOKENIZERS_PARALLELISM|HYDRA_FULL_ERROR|PYTHONPATH")
# what get_ppo_ray_runtime_env copies from the launching shell (trainer/constants_ppo.py:141-152; the test holds it to
# verl's function)
FORWARDED = ("VERL_FULL_DETERMINISM", "VLLM_BATCH_INVARIANT", "VERL_RL_INSIGHT_ENABLE", "PYTHONHASHSEED",
             "CUBLAS_WORKSPACE_CONFIG", "FLASH_ATTENTION_DETERMINISTIC", "NCCL_DETERMINISTIC", "NCCL_ALGO")
ENV_VARS = "ray_kwargs.ray_init.runtime_env.env_vars"


def job_var(name: str) -> bool:
    return bool(JOB_VARS.fullmatch(name)) or name in verl_env_reads()


def _forwarded(c: Ctx, words: list[str]) -> tuple[set[str], str]:
    """(env_vars names the job's runtime env sets, why that set may be incomplete: "" when it is known)."""
    env, why = job_runtime_env(c, words)
    given = env.get("env_vars")
    return (set(given) if isinstance(given, dict) else set()), why


def rule_launch_env(c: Ctx, f: Facts) -> None:
    ex = c.src.extraction
    via = submit_words(c)
    if ex is None or via is None:
        _joined_cluster(c, f)
        return
    exported = {n for n in ex.env_names if job_var(n)} - set(c.env)
    forwarded, unsure = _forwarded(c, via)
    missing = sorted(exported - forwarded)
    if not missing:
        return
    unless = f" ({unsure}: unless it sets them)" if unsure else ""
    gpus = "CUDA_VISIBLE_DEVICES" in missing
    others = [n for n in missing if n != "CUDA_VISIBLE_DEVICES"]
    fixes = (["pin the GPUs where the cluster starts (CUDA_VISIBLE_DEVICES=... ray start ...), not in the runtime env, "
              "where Ray replaces it per worker"] if gpus else []) + (
        [f"put {', '.join(others)} in the runtime env's env_vars (--runtime-env-json '{{\"env_vars\": {{...}}}}' or "
         "the --runtime-env YAML)"] if others else [])
    c.add("VI829", "warning", ("target",),
          f"the script exports {', '.join(missing)} before `ray job submit`, and the job's runtime env does not "
          f"set {'it' if len(missing) == 1 else 'them'}{unless}: Ray starts the job on the cluster with the cluster's "
          "environment and the runtime env's env_vars only, so the job never sees "
          f"{'it' if len(missing) == 1 else 'them'}"
          + ("; CUDA_VISIBLE_DEVICES there picks no GPUs: verl's workers take the GPUs of the Ray nodes" if gpus else ""),
          "; ".join(fixes))


def _joined_cluster(c: Ctx, f: Facts) -> None:
    """VI772: a direct launch that attaches to a running cluster."""
    ex = c.src.extraction
    if ex is None or getattr(c.src, "entry", "ppo") not in ("ppo", "fully_async"):
        return
    why = joins_cluster(c)
    nnodes = f.nnodes or 1
    if not why and nnodes > 1 and not OWN_CLUSTER.search(script_commands(c)) and not c.res.flat.get("ray_kwargs.ray_init.address"):
        why = f"trainer.nnodes={nnodes} (a multi-node run joins a cluster started beforehand with `ray start`)"
    if not why:
        return
    given = c.res.flat.get(ENV_VARS)
    forwarded = set(FORWARDED) | (set(given) if isinstance(given, dict) else set()) | \
        {k.rsplit(".", 1)[-1] for k in c.res.flat if k.startswith(ENV_VARS + ".")}
    missing = sorted({n for n in ex.env_names if job_var(n)} - set(c.env) - forwarded)
    if not missing:
        return
    them = "it" if len(missing) == 1 else "them"
    c.add("VI772", "warning", ("target", ENV_VARS),
          f"the script exports {', '.join(missing)} and main_ppo joins a running Ray cluster ({why}): verl's workers "
          "get the environment the cluster was started with plus the runtime env verl builds "
          f"(get_ppo_ray_runtime_env, trainer/constants_ppo.py:105-153, forwards only {', '.join(FORWARDED[:3])}, ... "
          f"from the shell), so no worker sees {them}"
          + ("; CUDA_VISIBLE_DEVICES picks no GPUs there" if "CUDA_VISIBLE_DEVICES" in missing else ""),
          f"export {them} before `ray start` on every node, or pass {them} as +{ENV_VARS}.NAME=value")
