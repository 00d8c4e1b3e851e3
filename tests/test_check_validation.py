"""VI985 (trainer.val_only=True with val_before_train=False, real case verl#5483) and VI986 (verl's SFT loop stopping at
a step: test_freq > 0 without data.val_files, verl#7545; test_freq or save_freq 0).

The oracles are verl's own code:

- VI986: verl 0.9.1's SFT trainers themselves, `SFTTrainer._build_dataset`, `_build_dataloader`, `_init_engine` and
  `fit` of trainer/sft_trainer.py and trainer/sft_trainer_ray.py, run on the CPU on a stand-in `self` whose engine and
  training client answer as one data-parallel rank does (a step trains nothing) and whose dataset is a few token
  rows. They run in a child process, which gives the rollout server's HTTP modules (uvicorn, fastapi: imported by
  verl.workers, never used by SFT) stand-ins when they are not installed. Whatever verl raises on, check calls an
  error, naming the step verl stopped at; a loop verl runs to its end gets none.
- VI985: verl's PPO-family trainers cannot run here (they need Ray's worker groups and GPUs; main_ppo's V1 trainer
  also the transfer_queue package), so the oracle is their source, read with ast: in each trainer's `fit` the only
  test of val_only sits inside the `if self.config.trainer.get("val_before_train", True):` block and returns from
  there; no other code of verl reads val_only; the fully async trainer has a `fit` of its own without it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.report import fixed_overrides

PPO = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
       "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8", "actor_rollout_ref.rollout.n=4",
       "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", "trainer.logger=[console]",
       "trainer.nnodes=1", "trainer.n_gpus_per_node=4", "data.val_files=/data/test.parquet"]
ASYNC = ["rollout.nnodes=1", "rollout.n_gpus_per_node=4"]
LAUNCH = {"ppo": "python3 -m verl.trainer.main_ppo",
          "one_step_off": "python3 -m verl.experimental.one_step_off_policy.main_ppo",
          "fully_async": "python3 -m verl.experimental.fully_async_policy.fully_async_main"}


def _script(tmp_path: Path, launch: str, overrides: list[str], head: str = "") -> Path:
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\nset -x\n" + head + launch + " \\\n" + " \\\n".join(f"    '{o}'" for o in overrides)
                    + "\n", encoding="utf-8")
    return path


def _hits(report, rule: str):
    return [f for f in report.findings if f.problem.rule == rule]


# --- VI985: the trainers' fit, read with ast -------------------------------------------------------------------

VERL_TRAINERS = {  # file under verl/ → the class whose fit the entry point runs
    "trainer/ppo/v1/trainer_base.py": "PPOTrainer",  # main_ppo (trainer.use_v1=True, the default)
    "trainer/ppo/ray_trainer.py": "RayPPOTrainer",  # main_ppo with trainer.use_v1=False
    "experimental/separation/ray_trainer.py": "SeparateRayPPOTrainer",
    "experimental/one_step_off_policy/ray_trainer.py": "OneStepOffRayTrainer",  # the one-step-off main_ppo
}


def _verl_root() -> Path:
    import importlib.util

    return Path(importlib.util.find_spec("verl").origin).parent


def _fit(path: Path, cls: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next((n for n in klass.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "fit"),
                None)


def _val_only_tests(fit) -> list[tuple[ast.If, list[ast.If]]]:
    """Each `if` whose test reads val_only, with the `if`s it sits in (outermost first)."""
    found = []

    def walk(node, outer):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "val_only" in ast.unparse(child.test):
                found.append((child, outer))
            walk(child, [*outer, child] if isinstance(child, ast.If) else outer)
    walk(fit, [])
    return found


@pytest.mark.verl
@pytest.mark.parametrize("file", sorted(VERL_TRAINERS))
def test_verl_reads_val_only_only_inside_the_val_before_train_block(file):
    fit = _fit(_verl_root() / file, VERL_TRAINERS[file])
    [(test, outer)] = _val_only_tests(fit)
    assert ast.unparse(test.test) == "self.config.trainer.get('val_only', False)"
    assert isinstance(test.body[-1], ast.Return)  # val_only's one effect: return before the training loop
    assert [ast.unparse(o.test) for o in outer] == ["self.config.trainer.get('val_before_train', True)"]
    block = outer[0]
    after = fit.body[fit.body.index(block) + 1:]  # the training loop follows the block, unguarded
    assert any(isinstance(n, (ast.While, ast.For)) for stmt in after for n in ast.walk(stmt))


@pytest.mark.verl
def test_no_other_verl_code_reads_val_only_and_fully_async_never_does():
    root = _verl_root()
    readers = {str(p.relative_to(root)) for p in root.rglob("*.py")
               if "tests" not in p.relative_to(root).parts and "val_only" in p.read_text(encoding="utf-8")}
    assert readers == set(VERL_TRAINERS)
    fully_async = root / "experimental/fully_async_policy"
    assert not [p for p in fully_async.rglob("*.py") if "val_only" in p.read_text(encoding="utf-8")]
    assert _fit(fully_async / "fully_async_trainer.py", "FullyAsyncTrainer") is not None  # its own fit, not the base's


@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.parametrize("entry", ["ppo", "one_step_off", "fully_async"])
def test_check_errs_on_val_only_without_val_before_train(entry, tmp_path):
    extra = ASYNC if entry != "ppo" else []
    report = check(str(_script(tmp_path, LAUNCH[entry], [*PPO, *extra, "trainer.val_before_train=False",
                                                          "trainer.val_only=True"])), env={"HOME": str(tmp_path)})
    assert report.source.entry == entry
    [hit] = _hits(report, "VI985")
    assert hit.problem.severity == "error" and "trainer.val_only" in hit.problem.keys
    if entry == "fully_async":  # nothing makes it validate only: no single fix
        assert hit.fix is None and "reads val_only" in hit.problem.message
        return
    assert hit.fix.set == {"trainer.val_before_train": True}
    fixed, _ = fixed_overrides(report)
    again = check(str(_script(tmp_path, LAUNCH[entry], fixed)), env={"HOME": str(tmp_path)})
    assert not _hits(again, "VI985")


@pytest.mark.verl
@pytest.mark.parametrize("extra", [
    ("trainer.val_before_train=True", "trainer.val_only=True"),  # verl validates, then returns
    ("trainer.val_before_train=False",),  # val_only False: training, as asked
    ("trainer.val_only=True",),  # val_before_train left at its default, True
])
def test_check_is_silent_where_val_only_does_what_it_says(extra, tmp_path):
    report = check(str(_script(tmp_path, LAUNCH["ppo"], [*PPO, *extra])), env={"HOME": str(tmp_path)})
    assert not _hits(report, "VI985")


@pytest.mark.verl
def test_check_is_silent_on_the_real_valid_control(tmp_path):
    """R15-07 (verl#6202's sampled-validation settings, validation before training): no VI985/VI986/VI987."""
    overrides = [*PPO, "actor_rollout_ref.rollout.val_kwargs.do_sample=True", "trainer.val_before_train=True",
                 "trainer.test_freq=10", "trainer.save_freq=10", "trainer.logger=[console,tensorboard]"]
    report = check(str(_script(tmp_path, LAUNCH["ppo"], overrides, head="export TENSORBOARD_DIR=/tmp/tb\n")),
                   env={"HOME": str(tmp_path)})
    assert not {"VI985", "VI986", "VI987"} & set(report.ids())


# --- VI986: verl's SFT loop, run ---------------------------------------------------------------------------------

# verl.workers imports the rollout server's HTTP modules; an SFT child process stubs them where absent
HTTP_STUBS = r'''
import sys
from unittest import mock
for name in ("uvicorn", "fastapi"):  # the rollout server's HTTP modules: imported by verl.workers, unused by SFT
    try:
        __import__(name)
    except ImportError:
        sys.modules[name] = mock.MagicMock()
'''

ORACLE = HTTP_STUBS + r'''
import json, os, sys, tempfile, types
from unittest import mock
import torch
import verl
from hydra import compose, initialize_config_dir
from verl.trainer import sft_trainer, sft_trainer_ray
from verl.utils import tensordict_utils as tu

torch.distributed.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
cfg_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
results = []
for module_name, overrides, n_train, n_val in json.loads(sys.argv[1]):
    st = {"sft_trainer": sft_trainer, "sft_trainer_ray": sft_trainer_ray}[module_name]
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        cfg = compose(config_name="sft_trainer_engine", overrides=overrides)

    def row(i):
        n = 4 + i % 3
        return {"input_ids": torch.arange(n), "attention_mask": torch.ones(n, dtype=torch.long),
                "position_ids": torch.arange(n), "loss_mask": torch.ones(n, dtype=torch.long)}

    def create_sft_dataset(paths, data_config, tokenizer, processor=None, max_samples=-1):
        return [row(i) for i in range(n_train if paths == cfg.data.train_files else n_val)]

    def _out(m):  # what the training client's output holds: the step's metrics
        return tu.get_tensordict({"loss": torch.zeros(1)}, non_tensor_dict={"metrics": m})

    events = []
    metrics = {"loss": 1.0, "grad_norm": 0.0, "lr": 0.0, "mfu": 0.0}

    def train_batch(data):
        events.append("train")
        return types.SimpleNamespace(get=lambda: _out(dict(metrics)))

    def infer_batch(data):
        events.append("val")
        return types.SimpleNamespace(get=lambda: _out({"loss": 1.0}))

    engine = types.SimpleNamespace(is_mp_src_rank_with_outputs=lambda: False, get_data_parallel_rank=lambda: 0,
                                   get_data_parallel_size=lambda: 1, get_data_parallel_group=lambda: None)
    client = types.SimpleNamespace(reset=lambda: None, train_batch=train_batch, infer_batch=infer_batch,
                                   step_profile=lambda: None, _query_dispatch_info=lambda kind: [0])
    me = types.SimpleNamespace(
        config=cfg, engine=engine, training_client=client, device_name="cpu", rank=0, resume_global_step=0,
        start_profile_step=None, end_profile_step=None, optimizer_config=types.SimpleNamespace(),
        model_config=types.SimpleNamespace(tokenizer=types.SimpleNamespace(pad_token_id=0), processor=None),
        ckpt_handler=types.SimpleNamespace(save_checkpoint=lambda step: events.append(f"save {step}")))
    for name in ("_build_dataset", "_build_dataloader", "_init_engine", "_get_batch_seqlens", "fit"):
        if hasattr(st.SFTTrainer, name):
            setattr(me, name, types.MethodType(getattr(st.SFTTrainer, name), me))
    loader = st.StatefulDataLoader
    with mock.patch.object(st, "create_sft_dataset", create_sft_dataset), \
            mock.patch.object(st, "StatefulDataLoader", lambda **kw: loader(**{**kw, "num_workers": 0})), \
            mock.patch.object(st, "log_gpu_memory_usage", lambda *a, **k: None, create=True):  # reads CUDA memory
        me._build_dataset()
        me._build_dataloader()
        if hasattr(me, "_init_engine"):
            me._init_engine()
        out = {"steps_per_epoch": me.steps_per_epoch, "total": me.total_training_steps, "error": None}
        try:
            me.fit()
        except Exception as exc:
            import traceback
            last = traceback.extract_tb(exc.__traceback__)[-1]
            out.update(error=type(exc).__name__, at=f"{os.path.basename(last.filename)}:{last.lineno}", msg=str(exc))
    out.update(steps=events.count("train"), validations=events.count("val"),
               saves=[e for e in events if e.startswith("save")])
    results.append(out)
print("RESULTS " + json.dumps(results))
'''

SFT = ["data.train_files=/data/sft/train.parquet", "data.messages_key=messages", "data.train_batch_size=2",
       "data.micro_batch_size_per_gpu=1", "data.num_workers=0", "trainer.total_epochs=3", "trainer.logger=[console]",
       "model.path=Qwen/Qwen2.5-0.5B-Instruct", "trainer.n_gpus_per_node=1"]
N_TRAIN = 30  # 15 steps an epoch at batch 2, 45 in all
SFT_CASES = {  # name → (overrides, validation rows)
    "periodic validation, no val set (verl#7545)": (["data.val_files=null", "trainer.test_freq=10",
                                                     "trainer.save_freq=50"], 0),
    "after each epoch, no val set": (["data.val_files=null", "trainer.test_freq=after_each_epoch"], 0),
    "test_freq 0": (["data.val_files=/data/sft/val.parquet", "trainer.test_freq=0"], 4),
    "save_freq 0": (["data.val_files=/data/sft/val.parquet", "trainer.save_freq=0"], 4),
    # controls
    "no periodic validation, no val set": (["data.val_files=null", "trainer.test_freq=-1", "trainer.save_freq=50"], 0),
    "periodic validation with a val set": (["data.val_files=/data/sft/val.parquet", "trainer.test_freq=10"], 4),
    "test_freq past the run's last step": (["data.val_files=null", "trainer.test_freq=100",
                                            "trainer.total_training_steps=45"], 0),
}
MODULES = ("sft_trainer", "sft_trainer_ray")


@pytest.fixture(scope="module")
def verl_sft_runs():
    """{(module, case): what verl's SFT loop did}, from one child process."""
    jobs = [(m, [*SFT, *SFT_CASES[name][0]], N_TRAIN, SFT_CASES[name][1])
            for m in MODULES for name in sorted(SFT_CASES)]
    run = subprocess.run([sys.executable, "-c", ORACLE, json.dumps(jobs)], capture_output=True, text=True, timeout=600)
    line = next((x for x in run.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line is not None, run.stderr[-3000:]
    results = json.loads(line[len("RESULTS "):])
    return {(m, name): r for (m, *_), name, r in zip(jobs, [n for _ in MODULES for n in sorted(SFT_CASES)], results)}


@pytest.mark.verl
@pytest.mark.slow
def test_verls_sft_loop_stops_where_the_issue_says(verl_sft_runs):
    for module in MODULES:
        line = {"sft_trainer": (413, 414, 420), "sft_trainer_ray": (353, 354, 360)}[module]
        issue = verl_sft_runs[module, "periodic validation, no val set (verl#7545)"]
        assert (issue["error"], issue["at"], issue["steps"], issue["saves"]) == (
            "TypeError", f"{module}.py:{line[2]}", 10, []), issue  # 10 paid steps, no checkpoint
        assert "'NoneType' object is not iterable" in issue["msg"]
        epoch = verl_sft_runs[module, "after each epoch, no val set"]
        assert (epoch["error"], epoch["steps"]) == ("TypeError", epoch["steps_per_epoch"]) == ("TypeError", 15)
        for name, at in (("test_freq 0", line[0]), ("save_freq 0", line[1])):
            run = verl_sft_runs[module, name]
            assert (run["error"], run["at"], run["steps"]) == ("ZeroDivisionError", f"{module}.py:{at}", 1), run
        for name in ("no periodic validation, no val set", "periodic validation with a val set",
                     "test_freq past the run's last step"):
            run = verl_sft_runs[module, name]
            assert run["error"] is None and run["steps"] == 45 and run["saves"][-1] == "save 45", run
        assert verl_sft_runs[module, "periodic validation with a val set"]["validations"] > 0


def _sft_check(tmp_path: Path, overrides: list[str], module: str = "sft_trainer"):
    script = _script(tmp_path, f"torchrun --standalone --nnodes=1 --nproc_per_node=1 -m verl.trainer.{module}",
                     overrides)
    return check(str(script), env={"HOME": str(tmp_path)})


@pytest.mark.verl
@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("name", sorted(SFT_CASES))
def test_check_errs_exactly_where_verls_sft_loop_stops(verl_sft_runs, module, name, tmp_path):
    run = verl_sft_runs[module, name]
    report = _sft_check(tmp_path, [*SFT, *SFT_CASES[name][0]], module)
    assert report.source.entry == "sft"
    hits = _hits(report, "VI986")
    if run["error"] is None:
        assert not hits, [h.problem.line() for h in hits]
        return
    [hit] = hits
    assert hit.problem.severity == "error"
    if run["error"] == "ZeroDivisionError":
        assert "ZeroDivisionError at step 1" in hit.problem.message
    elif "after_each_epoch" in hit.problem.message:
        assert run["steps"] == run["steps_per_epoch"]
    else:
        assert f"at step {run['steps']}" in hit.problem.message
    # the fix, applied, gives a config verl's loop runs to its end (the control cases above: test_freq/save_freq -1)
    fixed, _ = fixed_overrides(report)
    assert not _hits(_sft_check(tmp_path, fixed, module), "VI986")


@pytest.mark.verl
def test_check_catches_the_real_case_script(tmp_path):
    """R15-02, verl#7545: an 8-GPU SFT launch with data.val_files=null and test_freq=10 kept from a template."""
    report = _sft_check(tmp_path, ["data.train_files=/data/sft_train.parquet", "data.val_files=null",
                                   "data.messages_key=messages", "data.micro_batch_size_per_gpu=4",
                                   "model.path=Qwen/Qwen2.5-7B-Instruct", "engine.strategy=fsdp2",
                                   "trainer.total_epochs=3", "trainer.save_freq=50", "trainer.test_freq=10",
                                   "trainer.logger=[console]", "trainer.n_gpus_per_node=8"])
    [hit] = _hits(report, "VI986")
    assert "at step 10" in hit.problem.message and hit.fix.set == {"trainer.test_freq": -1}
