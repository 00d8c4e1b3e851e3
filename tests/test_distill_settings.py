"""On-policy distillation settings verl refuses inside the Ray job or silently replaces: check's VI617 (loss mode ×
update, policy loss), VI620 (teacher top-k log-probs), VI621 (teacher temperature, verl#7769) and VI622 (teacher
tokenizer, verl-omni#382). The oracle is verl's own code: its DistillationConfig built from verl's Hydra tree with
the same overrides (omega_conf_to_dataclass, as trainer/ppo/v1/trainer_base.py:360 builds it), the teacher manager's
sampling parameters, and the teacher manager's source for what it sends the teacher."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest

from helpers_verl import distillation_error
from wizard.check.lint import check

pytestmark = pytest.mark.verl  # verl's config classes are the oracle

ROOT = Path(__file__).resolve().parent.parent
A = "actor_rollout_ref.actor"
T = "distillation.teacher_models.teacher_model"
L = "distillation.distillation_loss"
BASE = ["algorithm.adv_estimator=grpo", "data.train_files=/d/train.parquet", "data.val_files=/d/val.parquet",
        "actor_rollout_ref.model.path=Qwen/Qwen3-8B", "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=4", f"{A}.ppo_mini_batch_size=8", f"{A}.use_dynamic_bsz=True",
        "data.train_batch_size=16", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
        "distillation.enabled=True", "distillation.n_gpus_per_node=4", "distillation.nnodes=1",
        f"{T}.model_path=Qwen/Qwen3-32B", f"{T}.inference.tensor_model_parallel_size=2",
        f"{L}.use_task_rewards=False"]
# verl's own example (examples/on_policy_distillation_trainer/run_qwen3_8b_fsdp.sh): k1 as a reward, top-k 64
EXAMPLE = [f"{L}.loss_mode=k1", f"{L}.use_policy_gradient=True", f"{L}.topk=64"]


def _verl_says(overrides: tuple[str, ...]) -> str:
    """'ok', or 'Type: message' of what verl's DistillationConfig raises for ppo_trainer with these overrides."""
    cause = distillation_error(overrides)
    return "ok" if cause is None else f"{type(cause).__name__}: {cause}"


def _hits(rule: str, overrides: list[str]):
    report = check(None, overrides, defaults="snapshot", env={"HOME": "/nonexistent-home"})
    return [f for f in report.findings if f.problem.rule == rule]


# ---- VI617: the loss settings -----------------------------------------------------------------------------------

def test_the_loss_table_is_what_verls_constructor_says_today():
    spec = importlib.util.spec_from_file_location("verl_distill_losses", ROOT / "scripts" / "verl_distill_losses.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    committed = json.loads((ROOT / "wizard" / "check" / "data" / "verl_distill_losses.json").read_text())
    assert module.build() == committed, "run python scripts/verl_distill_losses.py"
    assert committed["loss_modes"]["k1"]["supervised"].startswith("raises: ValueError: Directly backpropagating k1")
    assert committed["loss_modes"]["forward_kl_topk"]["use_topk"] is True


def test_k1_backpropagated_is_an_error_and_the_fix_is_what_verls_example_runs():
    bad = [*BASE, f"{L}.loss_mode=k1", f"{L}.use_policy_gradient=False"]
    assert _verl_says(tuple(bad)).startswith("ValueError: Directly backpropagating k1 loss is incorrect")
    [hit] = _hits("VI617", bad)
    assert hit.problem.severity == "error" and "distillation.py:100-124" in hit.problem.message
    assert hit.fix is not None and hit.fix.set == {f"{L}.use_policy_gradient": True}
    good = [*BASE, *EXAMPLE]
    assert _verl_says(tuple(good)) == "ok" and _hits("VI617", good) == []


@pytest.mark.parametrize("mode", ["k3", "forward_kl_topk", "low_var_kl"])
def test_losses_verl_backpropagates_stay_clean(mode):
    good = [*BASE, f"{L}.loss_mode={mode}", f"{L}.use_policy_gradient=False"]
    assert _verl_says(tuple(good)) == "ok"
    assert _hits("VI617", good) == []


def test_a_policy_loss_other_than_vanilla_is_an_error():
    bad = [*BASE, *EXAMPLE, f"{L}.policy_loss_mode=gspo"]
    assert _verl_says(tuple(bad)).startswith("NotImplementedError: Only vanilla policy loss")
    [hit] = _hits("VI617", bad)
    assert hit.problem.keys == (f"{L}.policy_loss_mode",) and hit.fix.set == {f"{L}.policy_loss_mode": "vanilla"}


def test_distillation_off_is_not_checked():
    off = [o for o in BASE if o != "distillation.enabled=True"] + [f"{L}.loss_mode=k1", f"{L}.use_policy_gradient=False"]
    # verl's trainers build DistillationConfig only when need_teacher_policy (trainer_base.py:125, 354-360)
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from verl.trainer.ppo.utils import need_teacher_policy
    from wizard.check.entrypoints import verl_config_dir

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        assert need_teacher_policy(compose(config_name="ppo_trainer", overrides=off)) is False
    assert _hits("VI617", off) == []


# ---- VI620: top-k log-probs -------------------------------------------------------------------------------------

TOPK = [f"{L}.loss_mode=forward_kl_topk", f"{L}.use_policy_gradient=False", f"{L}.topk=64"]
CAP = f"{T}.inference.engine_kwargs.vllm.max_logprobs"


def test_vllm_max_logprobs_below_topk_is_an_error_fixed_by_topk():
    bad = [*BASE, *TOPK, f"+{CAP}=20"]
    assert _verl_says(tuple(bad)) == ("ValueError: VLLM max_logprobs (20) must be >= distillation_loss topk (64) to "
                                      "enable distillation loss computation.")
    [hit] = _hits("VI620", bad)
    assert hit.problem.keys[0] == CAP and "distillation.py:203-207" in hit.problem.message
    assert hit.fix is not None and hit.fix.set == {CAP: 64}
    for good in ([*BASE, *TOPK, f"+{CAP}=64"], [*BASE, *TOPK]):  # the fix, and verl filling it in itself
        assert _verl_says(tuple(good)) == "ok" and _hits("VI620", good) == []


def test_max_logprobs_only_matters_for_a_top_k_loss():
    estimator = [*BASE, *EXAMPLE, f"+{CAP}=20"]  # k1 asks the teacher for the sampled token's log-prob only
    assert _verl_says(tuple(estimator)) == "ok" and _hits("VI620", estimator) == []


def test_a_null_topk_with_a_top_k_loss_is_an_error():
    bad = [*BASE, f"{L}.loss_mode=forward_kl_topk", f"{L}.use_policy_gradient=False", f"{L}.topk=null"]
    assert _verl_says(tuple(bad)) == "ValueError: topk must be specified when use_topk is True."
    [hit] = _hits("VI620", bad)
    assert "distillation.py:191-192" in hit.problem.message


def test_of_several_teachers_only_those_verl_keeps_are_read():
    """With more entries verl pops the default `teacher_model` (distillation.py:308-310): its cap is never read."""
    two = [f"+distillation.teacher_models.{n}.{k}" for n in ("math", "geo") for k in
           (f"key={n}", "model_path=Qwen/Qwen3-32B", "inference.name=vllm", "num_replicas=1",
            "inference.tensor_model_parallel_size=2")]
    dropped = [*BASE, *TOPK, f"+{CAP}=20", *two]
    assert _verl_says(tuple(dropped)) == "ok" and _hits("VI620", dropped) == []
    kept = [*BASE, *TOPK, *two, "+distillation.teacher_models.geo.inference.engine_kwargs.vllm.max_logprobs=8"]
    assert _verl_says(tuple(kept)).startswith("ValueError: VLLM max_logprobs (8)")
    [hit] = _hits("VI620", kept)
    assert "teacher geo" in hit.problem.message


# ---- VI621: the teacher's temperature (verl#7769) ---------------------------------------------------------------

def _teacher_sampling_temperature(temperature: float) -> float:
    """verl's _get_teacher_sampling_params, compiled from teacher_manager.py's source (importing the module needs the
    rollout router's packages), on verl's own config classes."""
    import logging
    from typing import Any

    import verl
    from verl.workers.config import DistillationLossConfig, DistillationTeacherModelConfig, RolloutConfig

    src = Path(verl.__file__).parent / "experimental" / "teacher_loop" / "teacher_manager.py"
    fn = next(n for n in ast.parse(src.read_text()).body
              if isinstance(n, ast.FunctionDef) and n.name == "_get_teacher_sampling_params")
    namespace = {"Any": Any, "logger": logging.getLogger("teacher_manager"), "DistillationLossConfig":
                 DistillationLossConfig, "DistillationTeacherModelConfig": DistillationTeacherModelConfig}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(src), "exec"), namespace)  # noqa: S102 - verl's code
    _get_teacher_sampling_params = namespace["_get_teacher_sampling_params"]

    teacher = DistillationTeacherModelConfig(model_path="t", inference=RolloutConfig(name="vllm",
                                                                                      temperature=temperature))
    return _get_teacher_sampling_params(teacher, DistillationLossConfig(loss_mode="k1"))["temperature"]


def test_a_teacher_temperature_is_replaced_by_one_in_verl_and_reported():
    assert _teacher_sampling_temperature(0.6) == 1.0  # what verl sends whatever is set
    bad = [*BASE, *EXAMPLE, f"{T}.inference.temperature=0.6"]
    assert _verl_says(tuple(bad)) == "ok"  # accepted: nothing stops the run
    [hit] = _hits("VI621", bad)
    assert hit.problem.severity == "warning" and "teacher_manager.py:45-56" in hit.problem.message
    assert hit.fix is not None and hit.fix.delete == [f"{T}.inference.temperature"]


def test_the_inherited_student_temperature_and_one_stay_clean():
    inherited = [*BASE, *EXAMPLE, "actor_rollout_ref.rollout.temperature=0.7"]  # distillation.yaml's ${oc.select:}
    assert _hits("VI621", inherited) == []
    assert _hits("VI621", [*BASE, *EXAMPLE, f"{T}.inference.temperature=1.0"]) == []


# ---- VI622: the teacher's tokenizer (verl-omni#382) -------------------------------------------------------------

def test_verl_sends_the_students_ids_to_the_teacher_unchanged():
    """The oracle for VI622: compute_teacher_logprobs_single hands its `sequence_ids` (the student's) to the teacher
    server as prompt_ids, and the teacher server skips its tokenizer (distillation.yaml)."""
    import verl

    root = Path(verl.__file__).parent
    tree = ast.parse((root / "experimental" / "teacher_loop" / "teacher_manager.py").read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef)
              and n.name == "compute_teacher_logprobs_single")
    sent = [kw.value.id for n in ast.walk(fn) if isinstance(n, ast.Call) for kw in n.keywords
            if kw.arg == "prompt_ids" and isinstance(kw.value, ast.Name)]
    assert sent == ["sequence_ids"]
    yaml = (root / "trainer" / "config" / "distillation" / "distillation.yaml").read_text()
    assert "skip_tokenizer_init: true" in yaml


def _model(folder: Path, model_type: str, vocab_size: int, vocab: dict[str, int]) -> Path:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    folder.mkdir()
    tok = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(json.dumps({"model_type": model_type, "vocab_size": vocab_size}))
    return folder


WORDS = {"<unk>": 0, "the": 1, "answer": 2, "is": 3, "four": 4}


def test_a_teacher_with_another_tokenizer_is_reported_and_one_tokenizer_is_clean(tmp_path):
    from tokenizers import Tokenizer

    student = _model(tmp_path / "student", "qwen3", 151936, WORDS)
    other = _model(tmp_path / "teacher", "llama", 128256, {"<unk>": 0, "four": 1, "is": 2, "answer": 3, "the": 4})
    ids = Tokenizer.from_file(str(student / "tokenizer.json")).encode("the answer is four").ids
    # what the teacher scores when verl hands it the student's ids: another text
    assert Tokenizer.from_file(str(other / "tokenizer.json")).decode(ids) != "the answer is four"
    run = [*BASE, *EXAMPLE, f"actor_rollout_ref.model.path={student}"]
    [hit] = _hits("VI622", [*run, f"{T}.model_path={other}"])
    assert hit.problem.severity == "warning" and "4 of the student's 5 tokens" in hit.problem.message
    # the control: a bigger teacher of the same tokenizer (Qwen2.5-7B's 152064 rows against 0.5B's 151936)
    same = _model(tmp_path / "same", "qwen2", 152064, WORDS)
    assert _hits("VI622", [*run, f"{T}.model_path={same}"]) == []
    # a hub id with nothing on this machine is not compared
    assert _hits("VI622", [*run, f"{T}.model_path=meta-llama/Llama-3.1-70B-Instruct"]) == []


def test_a_loss_mode_verl_does_not_register_is_an_error():
    bad = [*BASE, f"{L}.loss_mode=reverse_kl", f"{L}.use_policy_gradient=False"]
    assert _verl_says(tuple(bad)).startswith("ValueError: Unsupported loss mode: reverse_kl")
    [hit] = _hits("VI617", bad)
    assert hit.problem.keys == (f"{L}.loss_mode",) and "losses.py:100-106" in hit.problem.message
