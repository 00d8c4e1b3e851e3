"""VI647 / VI653: a custom reward function verl cannot call, or whose answer it cannot read (verl#3374, PR#2954,
verl#2279). Each fault is planted in a tiny reward file, seen by `verl-init check`, and proved against verl's own code
on CPU: verl's get_custom_reward_fn (trainer/ppo/reward.py) called with the keywords verl's naive manager passes,
verl's naive manager reading the answer, and verl's process_validation_metrics on the reward_extra_info it builds.
Valid controls (verl's documented signature, a flat dict with 'score', **kwargs) stay clean."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from wizard.check.lint import check
from wizard.check.rules.reward_signature import call_keywords

FN = "reward.custom_reward_function"
HW = {"nnodes": 1, "gpus_per_node": 8, "gpu_memory_gb": 80}


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    for name in ("train.parquet", "val.parquet"):
        (tmp_path / name).write_bytes(b"PAR1")
    return tmp_path


def run(data: Path, changes: list[str]):
    """test_check_rules.py's clean GRPO base (one node of 8 x 80 GB, verl-init's snapshot of verl's defaults)."""
    base = ["algorithm.adv_estimator=grpo", "algorithm.use_kl_in_reward=False",
            f"data.train_files={data / 'train.parquet'}", f"data.val_files={data / 'val.parquet'}",
            "data.train_batch_size=64", "data.max_prompt_length=512", "data.max_response_length=1024",
            "actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "actor_rollout_ref.actor.use_kl_loss=True",
            "actor_rollout_ref.actor.kl_loss_coef=0.001", "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
            "actor_rollout_ref.rollout.gpu_memory_utilization=0.5",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8", "trainer.logger=[console]",
            "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]
    keys = {c.split("=", 1)[0].lstrip("+~") for c in changes}
    items = [b for b in base if b.split("=", 1)[0] not in keys] + changes
    return check(None, items, defaults="snapshot", env={"HOME": "/nonexistent-home"}, **HW)

# prompt_str: verl never passes it (verl PR#2954); gsm8k: verl's own per-source scorer (utils/reward_score/gsm8k.py:52)
MISSING = ("def custom_compute_score(data_source, prompt_str, solution_str, ground_truth, extra_info=None):\n"
           "    return 0.0\n")
SCORER = ("def compute_score(solution_str, ground_truth, method='strict', format_score=0.0, score=1.0):\n"
          "    return 1.0\n")
DOCUMENTED = "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.1\n"
OPEN = "def compute_score(solution_str, ground_truth, **kwargs):\n    return 1.0\n"
TAKES_ALPHA = ("def compute_score(data_source, solution_str, ground_truth, extra_info=None, alpha=1.0):\n"
               "    return alpha\n")
NESTED = ("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
          "    r1, r2 = 1.0, 0.0\n"
          "    return {'score': r1 + r2, 'reward_extra_info': {'reward_1': r1, 'reward_2': r2}}\n")
FLAT = ("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    r1, r2 = 1.0, 0.0\n"
        "    return {'score': r1 + r2, 'reward_1': r1, 'reward_2': r2, 'pred': 'x'}\n")
NO_SCORE = ("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
            "    return {'reward': 1.0, 'acc': True}\n")

KWARGS = {"data_source": "openai/gsm8k", "solution_str": "#### 5", "ground_truth": "5", "extra_info": {}}


def _file(tmp_path: Path, text: str, name: str = "rf.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _verl_fn(path: Path, name: str, reward_kwargs: dict | None = None):
    """verl's own loader: the callable its reward managers get."""
    omegaconf = pytest.importorskip("omegaconf")
    reward = pytest.importorskip("verl.trainer.ppo.reward")
    cfg = omegaconf.OmegaConf.create(
        {"reward": {"custom_reward_function": {"path": str(path), "name": name, "reward_kwargs": reward_kwargs or {}}}})
    return reward.get_custom_reward_fn(cfg)


def _verl_calls(path: Path, name: str, reward_kwargs: dict | None = None) -> bool:
    """Whether verl's loaded function accepts the call verl's naive manager makes (naive.py:75-84)."""
    fn = _verl_fn(path, name, reward_kwargs)
    try:
        fn(**KWARGS)
    except TypeError:
        return False
    return True


def _ids(data: Path, path: Path, name: str = "compute_score", extra: tuple[str, ...] = ()):
    return run(data, [f"{FN}.path={path}", f"{FN}.name={name}", *extra])


def test_the_keywords_are_read_from_verls_managers():
    pytest.importorskip("verl")
    table = call_keywords()
    for manager in ("naive", "dapo", "gdpo", "remote", "rate_limited"):
        assert {"data_source", "solution_str", "ground_truth", "extra_info"} <= table[manager][0], manager


@pytest.mark.parametrize("text, name, fragment", [
    (MISSING, "custom_compute_score", "requires prompt_str"),
    (SCORER, "compute_score", "does not take data_source, extra_info"),
])
def test_vi647_signature_verl_cannot_call(data, tmp_path, text, name, fragment):
    path = _file(tmp_path, text)
    assert not _verl_calls(path, name)  # verl's own loader + the naive manager's keywords: TypeError
    report = _ids(data, path, name)
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI647"]
    assert hit.severity == "error" and fragment in hit.message and "**kwargs" in hit.hint


def test_vi647_reward_kwargs_the_function_does_not_take(data, tmp_path):
    path = _file(tmp_path, DOCUMENTED)
    assert not _verl_calls(path, "compute_score", {"alpha": 0.5})
    report = _ids(data, path, extra=(f"+{FN}.reward_kwargs.alpha=0.5",))
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI647"]
    assert "does not take alpha" in hit.message
    taking = _file(tmp_path, TAKES_ALPHA, "alpha.py")
    assert _verl_calls(taking, "compute_score", {"alpha": 0.5})
    assert "VI647" not in _ids(data, taking, extra=(f"+{FN}.reward_kwargs.alpha=0.5",)).ids()


@pytest.mark.parametrize("text", [DOCUMENTED, OPEN, FLAT])
def test_vi647_vi653_valid_functions_stay_clean(data, tmp_path, text):
    path = _file(tmp_path, text)
    assert _verl_calls(path, "compute_score")
    report = _ids(data, path)
    assert not report.errors and not report.warnings, [f.problem.line() for f in report.findings]


def test_vi647_silent_for_an_importlib_manager(data, tmp_path):
    path = _file(tmp_path, SCORER)
    mgr = _file(tmp_path, "class MyManager:\n    pass\n", "mgr.py")
    report = _ids(data, path, extra=("reward.reward_manager.source=importlib", "reward.reward_manager.name=MyManager",
                                     f"+reward.reward_manager.module.path={mgr}"))
    assert "VI647" not in report.ids()


class _Tokenizer:
    def decode(self, ids, skip_special_tokens=True):
        return KWARGS["solution_str"]


def _naive_reads(path: Path, name: str = "compute_score") -> dict:
    """verl's own NaiveRewardManager.run_single (reward_manager/naive.py) on one sample, with verl's loaded function."""
    torch = pytest.importorskip("torch")
    naive = pytest.importorskip("verl.experimental.reward_loop.reward_manager.naive")
    from verl import DataProto

    fn = _verl_fn(path, name)
    data = DataProto.from_dict(
        tensors={"prompts": torch.ones(1, 2, dtype=torch.long), "responses": torch.ones(1, 3, dtype=torch.long),
                 "attention_mask": torch.ones(1, 5, dtype=torch.long)},
        non_tensors={"data_source": np.array([KWARGS["data_source"]], dtype=object),
                     "reward_model": np.array([{"ground_truth": KWARGS["ground_truth"]}], dtype=object),
                     "extra_info": np.array([{}], dtype=object)})

    async def score() -> dict:
        return await naive.NaiveRewardManager(None, _Tokenizer(), fn).run_single(data)

    return asyncio.run(score())


def test_vi653_nested_dict_breaks_verls_validation_metrics(data, tmp_path):
    metric_utils = pytest.importorskip("verl.trainer.ppo.metric_utils")
    path = _file(tmp_path, NESTED)
    info = _naive_reads(path)["reward_extra_info"]
    infos = {k: [v, v] for k, v in info.items()}
    with pytest.raises(TypeError):
        metric_utils.process_validation_metrics(["s", "s"], ["u", "u"], infos)
    flat = {k: [v, v] for k, v in _naive_reads(_file(tmp_path, FLAT, "flat.py"))["reward_extra_info"].items()}
    metric_utils.process_validation_metrics(["s", "s"], ["u", "u"], flat)  # the control: no error
    report = _ids(data, path)
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI653"]
    assert hit.severity == "error" and "'reward_extra_info'" in hit.message and "flat dict" in hit.hint
    quiet = _ids(data, path, extra=("trainer.val_before_train=False", "trainer.test_freq=-1"))
    assert [f.problem.severity for f in quiet.findings if f.problem.rule == "VI653"] == ["warning"]


def test_vi653_dict_without_score(data, tmp_path):
    path = _file(tmp_path, NO_SCORE)
    with pytest.raises(KeyError):
        _naive_reads(path)
    report = _ids(data, path)
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI653"]
    assert hit.severity == "error" and "'score'" in hit.message


def test_vi647_cases_fail_inside_verls_manager(tmp_path):
    """The TypeError VI647 predicts is raised by verl's own manager, not only by a bare call."""
    with pytest.raises(TypeError):
        _naive_reads(_file(tmp_path, MISSING), "custom_compute_score")
    assert _naive_reads(_file(tmp_path, DOCUMENTED, "ok.py"))["reward_score"] == 0.1


def test_vi647_any_registered_manager_and_async_functions(data, tmp_path):
    """The class, not one issue: an async function under the dapo manager (dapo.py calls it with the same keywords);
    a decorated function is not read (its wrapper may take other arguments)."""
    path = _file(tmp_path, "async def compute_score(solution_str, ground_truth):\n    return 1.0\n")
    report = _ids(data, path, extra=("reward.reward_manager.name=dapo",))
    (hit,) = [f.problem for f in report.findings if f.problem.rule == "VI647"]
    assert "'dapo' reward manager" in hit.message and "does not take data_source, extra_info" in hit.message
    wrapped = _file(tmp_path, "import functools\n\n@functools.cache\n" + SCORER, "wrapped.py")
    assert "VI647" not in _ids(data, wrapped).ids()


# VI653's third form (verl PR#6545): returns whose reward_extra_info key sets differ. The oracle is verl's own code,
# taken from its source: the naive manager's answer-to-extra-info block (run_single's `if isinstance(result, dict)`)
# and the reward loop's column assembly (RewardLoopManager.compute_rm_score, `reward_extra_keys = ...` and its loop).
VARYING = '''import re


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    m = re.search(r"####\\s*(\\S+)", solution_str)
    if m is None:
        return 0.0
    if m.group(1) == ground_truth:
        return {"score": 1.0, "pred": m.group(1), "correct": True}
    return {"score": 0.0, "pred": m.group(1)}
'''
UNIFORM = VARYING.replace("return 0.0", "return {'score': 0.0, 'pred': ''}").replace(', "correct": True', "")


def _verls_blocks():
    import ast as _ast

    from helpers_verl import class_method, verl_tree

    naive = class_method(verl_tree("experimental/reward_loop/reward_manager/naive.py"), "NaiveRewardManager",
                         "run_single")
    [to_info] = [n for n in _ast.walk(naive)
                 if isinstance(n, _ast.If) and "isinstance(result, dict)" in _ast.unparse(n.test)]
    rm = class_method(verl_tree("experimental/reward_loop/reward_loop.py"), "RewardLoopManager", "compute_rm_score")
    body = rm.body
    start = next(i for i, s in enumerate(body) if "reward_extra_keys = " in _ast.unparse(s))
    assemble = body[start:start + 3]
    assert isinstance(assemble[-1], _ast.For) and "info[key]" in _ast.unparse(assemble[-1])
    return (compile(_ast.Module(body=[to_info], type_ignores=[]), "naive.py", "exec"),
            compile(_ast.Module(body=assemble, type_ignores=[]), "reward_loop.py", "exec"))


def _verl_assembles(source: str, answers: list[str]) -> dict:
    import numpy as np

    to_info, assemble = _verls_blocks()
    ns: dict = {}
    exec(source, ns)  # noqa: S102 - the planted reward function
    infos = []
    for text in answers:
        local = {"result": ns["compute_score"]("openai/gsm8k", text, "4"), "reward_extra_info": {}}
        exec(to_info, local)  # noqa: S102 - verl's own block
        infos.append(local["reward_extra_info"])
    local = {"reward_extra_infos": infos, "outputs_flat": infos, "np": np}
    exec(assemble, local)  # noqa: S102 - verl's own block
    return local["non_tensor_batch"]


@pytest.mark.verl
def test_verls_reward_loop_on_varying_key_sets():
    answers = ["#### 4", "no answer", "#### 5"]
    with pytest.raises(KeyError):
        _verl_assembles(VARYING, answers)
    assert set(_verl_assembles(VARYING, ["#### 5", "#### 4"])) == {"score", "pred"}  # 'correct' silently dropped
    assert set(_verl_assembles(UNIFORM, answers)) == {"score", "pred"}  # the control assembles


def test_check_flags_varying_key_sets(tmp_path):
    bad, good = tmp_path / "varying.py", tmp_path / "uniform.py"
    bad.write_text(VARYING)
    good.write_text(UNIFORM)
    base = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct", "actor_rollout_ref.rollout.name=vllm",
            "trainer.logger=[console]", "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]

    def hits(path):
        found = check(None, [*base, f"reward.custom_reward_function.path={path}"], defaults="snapshot").findings
        return [f for f in found if f.problem.rule == "VI653"]

    [e] = hits(bad)
    assert e.problem.severity == "error" and "{acc}" in e.problem.message and "PR#6545" in e.problem.message
    assert not hits(good)
