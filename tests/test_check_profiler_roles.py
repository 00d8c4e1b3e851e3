"""VI678 / VI679 / VI688: profiler settings verl never acts on (real cases verl#6181, verl#6329, verl#2438).

The oracles are verl's own code: its DistProfiler (utils/profiler/profile.py) does nothing while enable is False,
whatever all_ranks/ranks say; its workers read only tool_config[<tool>] (workers/engine_workers.py:488-491), whose
tool list PROFILER_TOOLS copies; its worker group hands the same nsight options to every worker actor
(single_controller/ray/base.py:658-662).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.profiler_roles import PROFILER_TOOLS
from wizard.check.rules.profiling import GPU_METRICS_SWITCHES, WORKER_OPTIONS

A, REF = "actor_rollout_ref.actor", "actor_rollout_ref.ref"
BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]


def _hits(rule: str, *extra: str):
    return [f for f in check(None, [*BASE, *extra]).findings if f.problem.rule == rule]


def _verl_src(rel: str) -> str:
    import verl

    return (Path(verl.__file__).parent / rel).read_text(encoding="utf-8")


# ---- verl's own code ----

@pytest.mark.verl
def test_verl_profiler_does_nothing_unless_enabled(monkeypatch):
    from verl.utils.profiler.config import NsightToolConfig, ProfilerConfig
    from verl.utils.profiler.profile import DistProfiler

    for enable, acts in ((False, False), (True, True)):
        prof = DistProfiler(rank=0, config=ProfilerConfig(tool="nsys", enable=enable, all_ranks=True, save_path="/tmp"),
                            tool_config=NsightToolConfig(discrete=False))
        started: list[int] = []
        monkeypatch.setattr(prof._impl, "start", lambda **kw: started.append(1))
        prof.start(profile_step=1)
        assert prof.check_enable() is enable and bool(started) is acts  # all_ranks=True alone profiles nothing


@pytest.mark.verl
def test_verl_workers_read_only_the_running_tools_config():
    src = _verl_src("workers/engine_workers.py")
    listed = re.search(r'omega_profiler_config\.get\("tool", None\) in (\[[^\]]*\])', src)
    assert listed and tuple(eval(listed.group(1))) == PROFILER_TOOLS  # noqa: S307 - a literal list from verl's source
    assert '.get("tool_config", {}).get(omega_profiler_config.get("tool"))' in src
    from verl.utils.profiler.config import TorchProfilerToolConfig

    default = TorchProfilerToolConfig()  # what tool=torch runs with when only tool_config.npu was set
    assert default.discrete is False and default.contents == []


@pytest.mark.verl
def test_verl_gives_every_worker_the_same_nsight_options():
    src = _verl_src("single_controller/ray/base.py")
    assert re.search(r'"nsight": self\.worker_nsight_options', src)
    trainer = _verl_src("trainer/ppo/v1/trainer_base.py")
    assert 'wg_kwargs["worker_nsight_options"] = OmegaConf.to_container(' in trainer


# ---- VI678 ----

def test_vi678_tool_and_steps_without_any_enable():
    [hit] = _hits("VI678", "global_profiler.tool=torch_memory", "global_profiler.steps=[1,5,10]",
                  f"{A}.profiler.all_ranks=True")
    assert hit.problem.severity == "warning" and hit.problem.keys[0] == f"{A}.profiler.enable"
    assert hit.fix.set == {f"{A}.profiler.enable": True}


def test_vi678_ranks_chosen_on_a_role_left_disabled():
    [hit] = _hits("VI678", "global_profiler.tool=torch", "global_profiler.steps=[2]", f"{A}.profiler.enable=True",
                  f"{REF}.profiler.ranks=[0,1]")
    assert hit.problem.keys[0] == f"{REF}.profiler.enable" and hit.fix.set == {f"{REF}.profiler.enable": True}


@pytest.mark.parametrize("extra", [
    ("global_profiler.tool=torch", "global_profiler.steps=[1]", f"{A}.profiler.enable=True",
     f"{A}.profiler.all_ranks=True"),  # verl's own torch example
    ("global_profiler.tool=torch", f"{A}.profiler.all_ranks=True"),  # no steps: nothing asked for
    ("global_profiler.steps=[1]",),  # no tool
])
def test_vi678_silent_when_enabled_or_not_asked(extra):
    assert not _hits("VI678", *extra)


# ---- VI679 ----

NPU_BLOCK = (f"{A}.profiler.tool_config.npu.discrete=True", f"{A}.profiler.tool_config.npu.contents=[npu,cpu]")


def test_vi679_npu_settings_under_torch():
    [hit] = _hits("VI679", "global_profiler.tool=torch", "global_profiler.steps=[2,4]", f"{A}.profiler.enable=True",
                  *NPU_BLOCK)
    assert f"{A}.profiler.tool_config.npu.discrete" in hit.problem.keys and "discrete" in hit.problem.hint


@pytest.mark.parametrize("extra", [
    ("global_profiler.tool=npu", "global_profiler.steps=[2,4]", f"{A}.profiler.enable=True", *NPU_BLOCK),
    ("global_profiler.tool=torch", "global_profiler.steps=[2,4]", *NPU_BLOCK),  # actor not profiled: VI678's job
])
def test_vi679_silent_for_the_running_tool(extra):
    assert not _hits("VI679", *extra)


# ---- VI688 ----

def test_vi688_gpu_metrics_in_every_worker():
    key = f"{WORKER_OPTIONS}.{GPU_METRICS_SWITCHES[0]}"
    [hit] = _hits("VI688", "global_profiler.tool=nsys", "global_profiler.steps=[1,2]", f"{A}.profiler.enable=True",
                  f"+{key}=all")
    assert hit.problem.keys[0] == key and hit.fix.delete == [key]


@pytest.mark.parametrize("extra", [
    ("trainer.n_gpus_per_node=1",),  # one nsys a node
    ("global_profiler.tool=torch",),  # no nsys
])
def test_vi688_silent_with_one_session_a_node(extra):
    key = f"{WORKER_OPTIONS}.{GPU_METRICS_SWITCHES[0]}"
    assert not _hits("VI688", "global_profiler.tool=nsys", "global_profiler.steps=[1]", f"{A}.profiler.enable=True",
                     f"+{key}=all", *extra)
