"""VI976: nsys whole-step profiling with capture-range-end left null (real case verl#4920, open PR#7330).

The oracles are verl's own code: its worker group turns a null capture-range-end into repeat-shutdown:6×len(steps)
(single_controller/ray/base.py:466-467), its Nsight profiler opens one cudaProfilerStart/Stop range per start/stop in
whole-step mode and none in discrete mode (utils/profiler/nvtx_profile.py:147-153), and its YAML states the count
of a whole-step run (n = len(profile_steps); one database per run of consecutive steps with
profile_continuous_steps). nsys finalises a report after the n-th range only, so 6×len(steps) never comes.
"""

from __future__ import annotations

import pytest

from wizard.check.lint import check
from wizard.check.rules.profiling import END, profiled_ranges

BASE = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "trainer.nnodes=1", "trainer.n_gpus_per_node=1",
        "global_profiler.tool=nsys", "actor_rollout_ref.actor.profiler.enable=True"]


def _hit(*extra: str):
    return [f for f in check(None, [*BASE, *extra]).findings if f.problem.rule == "VI976"]


@pytest.mark.verl
def test_verl_waits_for_six_ranges_a_step_and_opens_one(monkeypatch):
    from verl.single_controller.ray.base import RayWorkerGroup
    from verl.utils.profiler import nvtx_profile
    from verl.utils.profiler.config import NsightToolConfig, ProfilerConfig

    options = {"capture-range-end": None}
    RayWorkerGroup(resource_pool=None, ray_cls_with_init=None, profile_steps=[1, 2], worker_nsight_options=options,
                   worker_handles=[object()])
    assert options["capture-range-end"] == "repeat-shutdown:12"

    calls: list[str] = []

    class Platform:
        def profiler_start(self):
            calls.append("start")

        def profiler_stop(self):
            calls.append("stop")

    monkeypatch.setattr(nvtx_profile, "get_platform", lambda: Platform())
    for discrete, opened in ((False, 2), (True, 0)):
        calls.clear()
        prof = nvtx_profile.NsightSystemsProfiler(0, ProfilerConfig(ranks=[0]), NsightToolConfig(discrete=discrete))
        for _step in (1, 2):  # the trainer's start_profile / stop_profile around each profiled step
            prof.start()
            prof.stop()
        assert calls.count("start") == opened == profiled_ranges([1, 2], False) * (not discrete)


@pytest.mark.verl
def test_verls_yaml_states_the_whole_step_count():
    from pathlib import Path

    import verl

    text = (Path(verl.__file__).parent / "trainer/config/ppo_trainer.yaml").read_text(encoding="utf-8")
    assert "For normal whole step profiling, n = len(profile_steps)" in text
    assert "[1,2] in one, [5] in another" in text  # profile_continuous_steps
    assert profiled_ranges([1, 2, 5], True) == 2 and profiled_ranges([1, 2, 5], False) == 3


def test_check_warns_on_the_default_end_and_names_the_count():
    [hit] = _hit("global_profiler.steps=[1,2]")
    assert hit.problem.severity == "warning" and "repeat-shutdown:12" in hit.problem.message
    assert hit.fix.set == {END: "repeat-shutdown:2"}
    [merged] = _hit("global_profiler.steps=[1,2,5]", "global_profiler.profile_continuous_steps=True")
    assert merged.fix.set == {END: "repeat-shutdown:2"}


@pytest.mark.parametrize("extra", [
    (f"{END}=repeat-shutdown:2",),  # the end set by the user
    ("global_profiler.global_tool_config.nsys.discrete=True",),  # one range per task: verl's 6 a step is its guess
    ("global_profiler.tool=torch",),
    (),  # no steps: nothing is profiled, no options are handed on
])
def test_check_is_silent_where_verl_ends_the_capture(extra):
    steps = () if extra == () else ("global_profiler.steps=[1,2]",)
    assert not _hit(*steps, *extra)
