"""VI657, VI658, VI659: `ray_kwargs.ray_init` keys Ray's ray.init refuses (wizard.check.rules.ray_init).

Real cases (held-out round 54): verl PR#1768 / docs/faq/faq.rst:156 call the timeline key
`ray_init.timeline_json_file` (VI657); verl's own examples/remax_trainer/run_qwen2.5_math_7b_sync_fsdp.sh:102 passes
`+ray_kwargs.ray_init.runtime_env.env_vars.TRANSFER_QUEUE_ENABLE=1`, an int (VI658); PR#1009's "set
ray_init.num_cpus" on a Slurm script that starts Ray with `ray start` (VI659).

The oracle is Ray's own code on CPU: ray.init in a child process (it raises before it starts or joins anything),
RuntimeEnv's validation on the runtime env verl's run_ppo builds, and the table regenerated from Ray's source.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from wizard.check.lint import check
from wizard.check.rules.ray_init import ray_init_table

TABLE = ROOT / "wizard" / "check" / "data" / "ray_init_kwargs.json"
LAUNCH = ("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm trainer.n_gpus_per_node=8 "
          "trainer.nnodes=1 {extra}")


def _ray_init(kwargs: str) -> str:
    """What `ray.init(<kwargs>)` raises in a fresh process with no RAY_ADDRESS ("" when it raises nothing)."""
    code = ("import ray\ntry:\n    ray.init(" + kwargs + ")\nexcept Exception as e:\n"
            "    print(type(e).__name__ + ': ' + str(e))\nelse:\n    ray.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd="/")
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def _ids(overrides: list[str], path: str | None = None, **kw) -> dict[str, list]:
    report = check(path, overrides, defaults="snapshot", **kw)
    found: dict[str, list] = {}
    for f in report.findings:
        found.setdefault(f.problem.rule, []).append(f.problem)
    return found


# --- the table is Ray's -------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_regenerating_gives_the_committed_table():
    from helpers_scripts import regenerated

    assert regenerated("ray_init_kwargs") == TABLE.read_text(encoding="utf-8")


def test_the_table_matches_ray_inits_signature():
    import inspect

    import ray

    table = ray_init_table()
    params = {n for n, p in inspect.signature(ray.init).parameters.items() if p.kind != p.VAR_KEYWORD}
    assert set(table["params"]) == params
    assert {"num_cpus", "num_gpus", "object_store_memory", "resources"} <= set(table["cluster_only"])
    assert "runtime_env" not in table["cluster_only"] and "include_dashboard" not in table["cluster_only"]


# --- Ray's own behaviour (the oracle) -----------------------------------------------------------------------------

@pytest.mark.slow
def test_ray_init_refuses_an_unknown_keyword_and_the_timeline_key():
    said = _ray_init("timeline_json_file='/tmp/t.json'")
    assert said == "RuntimeError: Unknown keyword argument(s): timeline_json_file"


@pytest.mark.slow
def test_ray_init_refuses_resources_when_it_joins_a_cluster():
    # an address makes ray.init connect; the check comes before any connection attempt
    said = _ray_init("address='127.0.0.1:1', num_cpus=4")
    assert said.startswith("ValueError: When connecting to an existing cluster, num_cpus and num_gpus")
    assert _ray_init("address='127.0.0.1:1', object_store_memory=10**9").startswith("ValueError: When connecting")


def test_verls_runtime_env_with_an_int_env_var_fails_rays_validation():
    """verl's own merge (main_ppo.py:63-74) keeps Hydra's int, and Ray's RuntimeEnv rejects it; a string passes."""
    from omegaconf import OmegaConf
    from ray.runtime_env import RuntimeEnv

    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    def built(override: str) -> dict:
        user = OmegaConf.from_dotlist([override])  # Hydra/OmegaConf type the value the same way
        merged = OmegaConf.merge(get_ppo_ray_runtime_env(None), user.runtime_env)
        return OmegaConf.to_container(merged)

    with pytest.raises(TypeError, match="must be of type Dict"):
        RuntimeEnv(**built("runtime_env.env_vars.TRANSFER_QUEUE_ENABLE=1"))
    RuntimeEnv(**built("runtime_env.env_vars.TRANSFER_QUEUE_ENABLE='1'"))  # the fix: no error


# --- the rules -----------------------------------------------------------------------------------------------------

def test_vi657_names_a_key_ray_init_does_not_take():
    [hit] = _ids(["+ray_kwargs.ray_init.timeline_json_file=/tmp/t.json"])["VI657"]
    assert hit.severity == "error" and "Unknown keyword argument(s): timeline_json_file" in hit.message
    assert "ray_kwargs.timeline_json_file=/tmp/t.json" in hit.hint
    [typo] = _ids(["+ray_kwargs.ray_init.num_cpu=8"])["VI657"]
    assert typo.keys == ("ray_kwargs.ray_init.num_cpu",) and "no 'num_cpu'" in typo.message


def test_vi657_stays_quiet_for_ray_inits_own_keys_and_ray_client():
    ok = _ids(["+ray_kwargs.ray_init.num_gpus=8", "+ray_kwargs.ray_init.include_dashboard=false",
               "+ray_kwargs.ray_init._temp_dir=/tmp/r", "ray_kwargs.timeline_json_file=/tmp/t.json",
               "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_DEBUG=INFO"])
    assert not {"VI657", "VI658", "VI659"} & set(ok)
    client = _ids(["+ray_kwargs.ray_init.address=ray://head:10001", "+ray_kwargs.ray_init.allow_multiple=true"])
    assert "VI657" not in client  # Ray Client passes extra keywords on to the server


@pytest.mark.parametrize("value, kind", [("1", "int"), ("true", "bool"), ("0.5", "float"), ("null", "NoneType")])
def test_vi658_names_env_vars_that_are_not_strings(value, kind):
    [hit] = _ids([f"+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_IB_DISABLE={value}"])["VI658"]
    assert hit.severity == "error" and f"of type {kind}" in hit.message and "Dict[str, str]" in hit.message


def test_vi658_stays_quiet_for_strings():
    found = _ids(["+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_IB_DISABLE='1'",
                  "+ray_kwargs.ray_init.runtime_env.env_vars.VLLM_USE_V1=yes"])
    assert "VI658" not in found


def test_vi659_num_cpus_after_ray_start_in_the_script(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\nray start --head --num-cpus 64 --num-gpus 8\n"
                      + LAUNCH.format(extra="ray_kwargs.ray_init.num_cpus=64") + "\n", encoding="utf-8")
    [hit] = _ids([], str(script))["VI659"]
    assert hit.severity == "error" and "`ray start`" in hit.message and "num_cpus=64" in hit.message
    control = tmp_path / "control.sh"  # the same run where verl starts Ray itself: num_cpus is what Ray needs
    control.write_text("#!/bin/bash\n" + LAUNCH.format(extra="ray_kwargs.ray_init.num_cpus=64") + "\n", encoding="utf-8")
    assert "VI659" not in _ids([], str(control))


def test_vi659_joins_through_an_address_or_ray_address():
    [hit] = _ids(["+ray_kwargs.ray_init.address=10.0.0.1:6379",
                  "+ray_kwargs.ray_init.object_store_memory=1000000000"])["VI659"]
    assert "ray_kwargs.ray_init.address" in hit.message and "object_store_memory" in hit.message
    assert "VI659" in _ids(["+ray_kwargs.ray_init.num_gpus=8"], env={"RAY_ADDRESS": "10.0.0.1:6379"})
    assert "VI659" not in _ids(["+ray_kwargs.ray_init.address=local", "ray_kwargs.ray_init.num_cpus=8"])
    assert "VI659" not in _ids(["+ray_kwargs.ray_init.address=10.0.0.1:6379", "+ray_kwargs.ray_init._system_config={}"])


def test_the_real_cases_are_caught_and_verls_pattern_is_not(tmp_path):
    """R54-01/03/04 as rebuilt; the control is verl's run_qwen3_8b_fsdp.sh:83 pattern where verl starts Ray."""
    remax = _ids(["+ray_kwargs.ray_init.runtime_env.env_vars.TRANSFER_QUEUE_ENABLE=1"])
    assert [p.keys for p in remax["VI658"]] == [("ray_kwargs.ray_init.runtime_env.env_vars.TRANSFER_QUEUE_ENABLE",)]
    control = _ids(["+ray_kwargs.ray_init.num_gpus=8", "ray_kwargs.ray_init.num_cpus=64",
                    "ray_kwargs.ray_init.runtime_env.py_executable=null"])
    assert not {"VI657", "VI658", "VI659"} & set(control)
    assert json.loads(TABLE.read_text(encoding="utf-8"))["ray_version"]
