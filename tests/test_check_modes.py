"""VI993-VI995 and VI814's separate_async pool (real cases R19-01..R19-08: verl-omni#374, verl#7795, rllm#672,
verl#2971, verl PR#6974, PR#2231, PR#7884 and the docs' separate_async example).

The oracle is verl 0.9.1's own code, run in one child process on the CPU (ORACLE): Hydra composes verl's own tree
with each case's overrides; then
- PPOTrainerSeparateAsync.__init__ runs up to its super().__init__ (which needs a cluster): the first assert that
  fails, by line; and every assert of that __init__, taken from verl's source with ast, is evaluated on the config
  with the locals the constructor assigns before it (one VI993 per failed assert);
- _init_resource_pool_mgr and _get_n_gpus_for_throughput of the separate_async trainer give the GPUs verl books;
- the one-step-off main() runs with run_ppo captured (its config after main_ppo.py:121-122), and
  OneStepOffRayTrainer.__init__ runs on that config.
The child inserts placeholders for transfer_queue, cachetools, uvicorn and fastapi when they are not installed: the
trainer modules import them, none of the code run here uses them.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.modes import SEPARATE_ASYNC_ASSERTS

PPO = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
       "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4", "actor_rollout_ref.rollout.n=4",
       "trainer.logger=[console]", "data.max_prompt_length=512", "data.max_response_length=512"]
SEP = ["trainer.use_v1=True", "trainer.v1.trainer_mode=separate_async", "trainer.nnodes=1", "trainer.n_gpus_per_node=4"]
POOL = ["actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.n_gpus_per_node=4"]
NCCL = ["actor_rollout_ref.rollout.checkpoint_engine.backend=nccl"]
BATCH = ["data.train_batch_size=64", "actor_rollout_ref.actor.ppo_mini_batch_size=16"]  # 64 = 4 (default) × 16
GOOD = [*PPO, *SEP, *POOL, *NCCL, *BATCH]
SEP_CASES = {  # name → overrides (on PPO)
    "R19-01 one mini-batch a step, parameter_sync_step default": [*SEP, *POOL, *NCCL, "data.train_batch_size=64",
                                                                  "actor_rollout_ref.actor.ppo_mini_batch_size=64"],
    "R19-02 no standalone pool": [*SEP, *NCCL, *BATCH],
    "R19-03 naive backend": [*SEP, *POOL, *BATCH],
    "zero GPUs a node": [*SEP, *NCCL, *BATCH, "actor_rollout_ref.rollout.nnodes=1",
                         "actor_rollout_ref.rollout.n_gpus_per_node=0"],
    "colocated reward model": [*SEP, *POOL, *NCCL, *BATCH, "reward.reward_model.enable=True",
                               "reward.reward_model.model_path=Qwen/Qwen2.5-0.5B-Instruct"],
    "all at once": [*SEP, "data.train_batch_size=60", "actor_rollout_ref.actor.ppo_mini_batch_size=16"],
    # controls
    "valid": [*SEP, *POOL, *NCCL, *BATCH],
    "R19-08 docs example": ["trainer.use_v1=True", "trainer.v1.trainer_mode=separate_async", "trainer.nnodes=2",
                            "trainer.n_gpus_per_node=8", "actor_rollout_ref.rollout.nnodes=2",
                            "actor_rollout_ref.rollout.n_gpus_per_node=8", *NCCL, *BATCH,
                            "trainer.v1.separate_async.parameter_sync_step=4"],
    "hybrid_engine=False": [*SEP, *POOL, *NCCL, *BATCH, "actor_rollout_ref.hybrid_engine=False"],
    "standalone reward model": [*SEP, *POOL, *NCCL, *BATCH, "reward.reward_model.enable=True",
                                "reward.reward_model.model_path=Qwen/Qwen2.5-0.5B-Instruct",
                                "reward.reward_model.enable_resource_pool=True", "reward.reward_model.nnodes=1",
                                "reward.reward_model.n_gpus_per_node=4"],
}
CONTROLS = ("valid", "R19-08 docs example", "hybrid_engine=False", "standalone reward model")
OSP = [*PPO, "data.train_batch_size=64", "actor_rollout_ref.actor.ppo_mini_batch_size=16", "trainer.nnodes=1",
       "trainer.n_gpus_per_node=6"]
OSP_CASES = {
    "R19-04 V1 pool keys": ["actor_rollout_ref.hybrid_engine=False", "actor_rollout_ref.rollout.nnodes=1",
                            "actor_rollout_ref.rollout.n_gpus_per_node=2"],
    "R19-06 hybrid engine left on": ["rollout.nnodes=1", "rollout.n_gpus_per_node=2"],
    # controls
    "shipped layout": ["actor_rollout_ref.hybrid_engine=False", "rollout.nnodes=1", "rollout.n_gpus_per_node=2"],
    "both trees agree": ["actor_rollout_ref.hybrid_engine=False", "rollout.nnodes=1", "rollout.n_gpus_per_node=2",
                         "actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.n_gpus_per_node=2"],
}

ORACLE = r'''
import ast, importlib, inspect, json, os, sys, textwrap, traceback
from unittest import mock
for name in ("transfer_queue", "cachetools", "uvicorn", "fastapi"):  # imported by the trainer modules, unused here
    try:
        importlib.import_module(name)
    except ImportError:
        stub = mock.MagicMock(); stub.__path__ = []; stub.__spec__ = None; stub.KVBatchMeta = object
        sys.modules[name] = stub
import ray
import verl
from hydra import compose, initialize_config_dir
from verl.trainer.ppo.v1 import get_trainer_cls
from verl.trainer.ppo.v1 import trainer_base
from verl.trainer.ppo.utils import need_reward_model

VERL = os.path.dirname(verl.__file__)
Sep = get_trainer_cls("separate_async")
src = inspect.getsource(Sep.__init__)
first = Sep.__init__.__code__.co_firstlineno
tree = ast.parse(textwrap.dedent(src))
init = tree.body[0]

def compose_in(folder, name, overrides):
    with initialize_config_dir(config_dir=os.path.join(VERL, folder), version_base=None):
        return compose(name, overrides=overrides)

def failed_asserts(cfg):
    """Every assert of the constructor, its expression evaluated as verl wrote it (an `if` guard included)."""
    env = {"config": cfg, "need_reward_model": need_reward_model}
    out = []
    def walk(stmts, guard=True):
        for st in stmts:
            if isinstance(st, ast.Assign) and guard and all(isinstance(t, ast.Name) for t in st.targets):
                exec(compile(ast.Module([st], []), "init", "exec"), env)
            elif isinstance(st, ast.Assert):
                if guard and not eval(compile(ast.Expression(st.test), "init", "eval"), env):
                    out.append(first + st.lineno - 1)
            elif isinstance(st, ast.If):
                walk(st.body, guard and bool(eval(compile(ast.Expression(st.test), "init", "eval"), env)))
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and "super" in ast.unparse(st):
                return True
        return False
    walk(init.body)
    return out

class Stop(Exception):
    pass

def first_failure(cfg):
    obj = object.__new__(Sep)
    def stop(self, config):
        raise Stop
    with mock.patch.object(trainer_base.PPOTrainer, "__init__", stop):
        try:
            Sep.__init__(obj, cfg)
        except Stop:
            return None
        except AssertionError as e:
            return traceback.extract_tb(e.__traceback__)[-1].lineno

def booked(cfg):
    obj = object.__new__(Sep); obj.config = cfg
    with mock.patch.object(ray, "remote", lambda cls: cls):
        Sep._init_resource_pool_mgr(obj)
    return obj._get_n_gpus_for_throughput(), obj.resource_pool_manager.resource_pool_spec

jobs = json.loads(sys.argv[1])
out = {"asserts": sorted(first + n.lineno - 1 for n in ast.walk(init) if isinstance(n, ast.Assert)), "sep": {}, "osp": {}}
for name, overrides in jobs["sep"].items():
    cfg = compose_in("trainer/config", "ppo_trainer", overrides)
    out["sep"][name] = {"failed": failed_asserts(cfg), "first": first_failure(cfg), "gpus": booked(cfg)}

os.chdir(os.path.dirname(VERL))  # the one-step-off tree's searchpath file://verl/trainer/config is cwd-relative
from verl.experimental.one_step_off_policy import main_ppo as osp_main
from verl.experimental.one_step_off_policy.ray_trainer import OneStepOffRayTrainer
import verl.trainer.main_ppo as main_ppo
for name, overrides in jobs["osp"].items():
    cfg = compose_in("experimental/one_step_off_policy/config", "one_step_off_ppo_trainer", overrides)
    seen = {}
    with mock.patch.object(main_ppo, "run_ppo", lambda config, task_runner_class: seen.update(config=config)):
        osp_main.main.__wrapped__(cfg)
    run = seen["config"]
    r = run.actor_rollout_ref.rollout
    try:
        OneStepOffRayTrainer(config=run, tokenizer=None, role_worker_mapping={}, resource_pool_manager=None)
        at = None
    except AssertionError as e:
        at = traceback.extract_tb(e.__traceback__)[-1].lineno
    except Exception:  # past the assert: the rest needs a cluster
        at = None
    out["osp"][name] = {"pool": [r.nnodes, r.n_gpus_per_node], "assert": at}
print("RESULTS " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def verl_runs():
    jobs = {"sep": {k: [*PPO, *v] for k, v in SEP_CASES.items()}, "osp": {k: [*OSP, *v] for k, v in OSP_CASES.items()}}
    run = subprocess.run([sys.executable, "-c", ORACLE, json.dumps(jobs)], capture_output=True, text=True, timeout=600)
    line = next((x for x in run.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line is not None, run.stderr[-4000:]
    return json.loads(line[len("RESULTS "):])


def _script(tmp_path: Path, launch: str, overrides: list[str]) -> Path:
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\nset -x\n" + launch + " \\\n" + " \\\n".join(f"    '{o}'" for o in overrides) + "\n",
                    encoding="utf-8")
    return path


def _sep(tmp_path, overrides, **hw):
    return check(str(_script(tmp_path, "python3 -m verl.trainer.main_ppo", [*PPO, *overrides])),
                 env={"HOME": str(tmp_path)}, **hw)


def _osp(tmp_path, overrides, **hw):
    return check(str(_script(tmp_path, "python3 -m verl.experimental.one_step_off_policy.main_ppo", [*OSP, *overrides])),
                 env={"HOME": str(tmp_path)}, **hw)


def _lines(report, rule="VI993"):
    out = []
    for f in report.findings:
        if f.problem.rule == rule:
            out += [int(x) for x in __import__("re").findall(r"trainer_separate_async\.py:(\d+) \(", f.problem.message)]
    return out


@pytest.mark.slow
@pytest.mark.verl
def test_the_rule_knows_every_assert_of_verls_constructor(verl_runs):
    assert verl_runs["asserts"] == sorted(SEPARATE_ASYNC_ASSERTS)


@pytest.mark.verl
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SEP_CASES))
def test_one_vi993_per_assert_verl_fails(verl_runs, tmp_path, name):
    verl_case = verl_runs["sep"][name]
    report = _sep(tmp_path, SEP_CASES[name])
    assert _lines(report) == verl_case["failed"], (name, verl_case, [f.problem.message for f in report.findings])
    # verl raises at the first of them; a valid config reaches super().__init__
    assert verl_case["first"] == (verl_case["failed"][0] if verl_case["failed"] else None)
    if name in CONTROLS:
        assert verl_case["failed"] == [] and "VI993" not in report.ids()


@pytest.mark.verl
@pytest.mark.slow
@pytest.mark.parametrize("name", CONTROLS)
def test_vi814_counts_the_pool_verl_books(verl_runs, tmp_path, name):
    """VI814 is silent on exactly the GPUs verl books (trainer pool + standalone rollout [+ reward pool]), warns with
    more and errs with fewer."""
    throughput, spec = verl_runs["sep"][name]["gpus"]
    # _get_n_gpus_for_throughput: every pool of the resource pool manager (the trainer's, a reward model's) plus the
    # standalone rollout's (trainer_separate_async.py:395-401)
    total = throughput
    assert total > sum(sum(v) for v in spec.values())
    gpn = 8 if "docs" in name else 4
    for severity, step in ((None, 0), ("warning", 1), ("error", -1)):
        nodes = total // gpn + step
        hits = [f for f in _sep(tmp_path, SEP_CASES[name], nnodes=nodes, gpus_per_node=gpn).findings
                if f.problem.rule == "VI814"]
        assert [f.problem.severity for f in hits] == ([severity] if severity else []), (name, nodes, total, hits)


@pytest.mark.verl
@pytest.mark.slow
def test_one_step_off_pool_and_hybrid_engine(verl_runs, tmp_path):
    runs = verl_runs["osp"]
    # main() replaces the V1 keys with the top-level ones (yaml default 1 × 8): R19-04 asks for 6 + 8 GPUs
    assert runs["R19-04 V1 pool keys"]["pool"] == [1, 8] and runs["both trees agree"]["pool"] == [1, 2]
    assert runs["R19-06 hybrid engine left on"]["assert"] == 88
    assert runs["shipped layout"]["assert"] is None and runs["R19-04 V1 pool keys"]["assert"] is None
    r04 = [f for f in _osp(tmp_path, OSP_CASES["R19-04 V1 pool keys"]).findings if f.problem.rule == "VI995"]
    assert len(r04) == 1 and r04[0].problem.keys == ("actor_rollout_ref.rollout.n_gpus_per_node",
                                                     "rollout.n_gpus_per_node")
    assert "rollout.n_gpus_per_node=2" in r04[0].problem.hint and "main_ppo.py:121-122" in r04[0].problem.message
    r06 = [f for f in _osp(tmp_path, OSP_CASES["R19-06 hybrid engine left on"]).findings if f.problem.rule == "VI995"]
    assert len(r06) == 1 and "ray_trainer.py:87-88" in r06[0].problem.message
    for control in ("shipped layout", "both trees agree"):
        assert "VI995" not in _osp(tmp_path, OSP_CASES[control], nnodes=1, gpus_per_node=8).ids()


@pytest.mark.verl
def test_verl_forces_naive_outside_separate_async():
    """Read with ast: the base trainer's only CheckpointEngineManager gets backend 'naive' right before it is built,
    and among the V1 trainer modules only trainer_separate_async builds another (with the configured backend)."""
    import verl

    v1 = Path(verl.__file__).parent / "trainer/ppo/v1"
    builders = {}
    for path in sorted(v1.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and
                 ast.unparse(n.func).endswith("CheckpointEngineManager")]
        naive = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assign) and
                 ast.unparse(n.targets[0]).endswith(".backend") and ast.unparse(n.value) == "'naive'"]
        if calls:
            builders[path.name] = (calls, naive)
    assert set(builders) == {"trainer_base.py", "trainer_separate_async.py"}
    (base_calls, base_naive), (sep_calls, sep_naive) = builders["trainer_base.py"], builders["trainer_separate_async.py"]
    assert base_naive == [382] and base_calls == [383] and sep_naive == []


@pytest.mark.parametrize("mode,fires", [("sync", True), ("colocate_async", True), ("separate_async", False)])
def test_vi994_on_a_backend_verl_replaces(tmp_path, mode, fires):
    extra = [*POOL, *BATCH] if mode == "separate_async" else ["data.train_batch_size=64",
                                                              "actor_rollout_ref.actor.ppo_mini_batch_size=16"]
    report = _sep(tmp_path, [f"trainer.v1.trainer_mode={mode}", "actor_rollout_ref.rollout.checkpoint_engine."
                             "backend=delta_sharded", *extra])
    assert ("VI994" in report.ids()) is fires
    # the default (naive) and the legacy trainer, which keeps the backend (ray_trainer.py:967-978): silent
    assert "VI994" not in _sep(tmp_path, [f"trainer.v1.trainer_mode={mode}", *extra]).ids()
    assert "VI994" not in _sep(tmp_path, ["trainer.use_v1=False", "actor_rollout_ref.rollout.checkpoint_engine."
                                          "backend=nccl", *extra]).ids()


@pytest.mark.verl
@pytest.mark.parametrize("extra, fires", [
    # R102-02's shape: 6 trainer GPUs, a 2-GPU rollout pool, vLLM TP 1 × DP 2: the replica fills the rollout's node
    (["actor_rollout_ref.rollout.tensor_model_parallel_size=1", "actor_rollout_ref.rollout.data_parallel_size=2"], False),
    (["actor_rollout_ref.rollout.tensor_model_parallel_size=2"], False),
    # TP 4 cannot divide the 2 GPUs of the rollout's own pool (engine_workers.py:659), though it divides no trainer node either way
    (["actor_rollout_ref.rollout.tensor_model_parallel_size=4"], True),
])
def test_vi810_lays_the_rollout_on_its_own_pool(tmp_path, extra, fires):
    """VI810 judges the one-step-off rollout on the pool main() gives it (rollout.nnodes × rollout.n_gpus_per_node,
    copied over actor_rollout_ref.rollout's at one_step_off_policy/main_ppo.py:121-122, which
    test_one_step_off_pool_and_hybrid_engine runs), not on the trainer's 6 GPUs: TP 1 × DP 2 on the trainer's node
    would be 'a replica of 2 GPUs must fill its 6-GPU node'."""
    pool = ["actor_rollout_ref.hybrid_engine=False", "rollout.nnodes=1", "rollout.n_gpus_per_node=2"]
    hits = [f for f in _osp(tmp_path, [*pool, *extra], nnodes=1, gpus_per_node=8).findings if f.problem.rule == "VI810"]
    assert bool(hits) == fires, [f.problem.message for f in hits]
    if fires:
        assert hits[0].problem.keys[1:] == ("rollout.n_gpus_per_node", "rollout.nnodes")
        assert "1×2 GPUs of the rollout's own pool" in hits[0].problem.message
