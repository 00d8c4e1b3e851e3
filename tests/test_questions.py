"""The questionnaire as data: coverage of `Answers`, `when` conditions, parsing and planner/probe defaults."""

from __future__ import annotations

from typing import get_args

import pytest

from wizard.cli.interactive import questions as qs
from wizard.intent.answers import Answers
from wizard.intent.errors import Problem, WizardError
from wizard.env.probe import GpuReport, HostReport, Probes, RayReport
from wizard.cli.interactive.questions import (
    BY_FIELD,
    NOT_ASKED,
    QUESTIONS,
    RELATED,
    Context,
    applicable,
    choices_for,
    default_for,
    parse,
)


def asked(**answers) -> list[str]:
    return [q.field for q in applicable(Context(answers=answers, base_dir="/r"))]


# --- every field is asked or deliberately not asked -----------------------------------------------------------


def test_every_answers_field_is_asked_or_listed_as_not_asked():
    fields = set(Answers.model_fields)
    in_questions = [q.field for q in QUESTIONS]
    assert len(in_questions) == len(set(in_questions)), "a field is asked twice"
    assert not set(in_questions) & set(NOT_ASKED), sorted(set(in_questions) & set(NOT_ASKED))
    assert set(in_questions) | set(NOT_ASKED) == fields, {
        "neither asked nor listed": sorted(fields - set(in_questions) - set(NOT_ASKED)),
        "not a field": sorted((set(in_questions) | set(NOT_ASKED)) - fields)}
    assert all(reason.strip() for reason in NOT_ASKED.values())


def test_related_questions_exist():
    for rule, fields in RELATED.items():
        assert rule.startswith("VI") and set(fields) <= set(BY_FIELD), rule


def test_prompts_reuse_the_field_descriptions():
    for q in QUESTIONS:
        desc = Answers.model_fields[q.field].description
        assert desc and q.message() == f"{q.field} — {desc}"


@pytest.mark.parametrize("name", ["cluster", "algorithm", "reward", "rollout_engine", "train_backend", "answer_format"])
def test_select_choices_are_exactly_the_allowed_values(name):
    values = [v for v, _ in choices_for(BY_FIELD[name], Context())]
    ann = Answers.model_fields[name].annotation
    allowed = [a for a in get_args(ann) if a is not type(None)]
    allowed = list(get_args(allowed[0])) if len(allowed) == 1 and get_args(allowed[0]) else allowed
    assert sorted(values) == sorted(allowed)
    assert BY_FIELD[name].kind == "select"


def test_logger_choices_are_the_trackers():
    assert [v for v, _ in choices_for(BY_FIELD["logger"], Context())] == list(get_args(get_args(
        Answers.model_fields["logger"].annotation)[0]))


# --- when ------------------------------------------------------------------------------------------------------


def test_local_grpo_asks_no_cluster_critic_or_reward_model_questions():
    fields = asked()
    for never in ("nnodes", "critic_model", "reward_model", "reward_function", "image", "k8s_namespace", "k8s_secret",
                  "shared_pvc", "shm_size_gb", "slurm_partition", "slurm_account", "slurm_time", "question_field",
                  "model_params_b"):
        assert never not in fields
    assert {"cluster", "gpus_per_node", "algorithm", "model", "rollout_engine", "train_backend", "lora_rank",
            "dataset", "max_prompt_length", "prompts_per_step", "samples_per_prompt", "updates_per_step"} <= set(fields)


def test_kuberay_only_questions():
    fields = set(asked(cluster="kuberay"))
    assert {"nnodes", "image", "k8s_namespace", "k8s_secret", "shared_pvc", "shm_size_gb"} <= fields
    assert not {"slurm_partition", "slurm_account", "slurm_time"} & fields


def test_slurm_only_questions():
    fields = set(asked(cluster="slurm"))
    assert {"nnodes", "image", "slurm_partition", "slurm_account", "slurm_time"} <= fields
    assert not {"k8s_namespace", "k8s_secret", "shared_pvc", "shm_size_gb"} & fields
    assert not {"image", "k8s_namespace", "slurm_partition"} & set(asked(cluster="ray")) and "nnodes" in asked(cluster="ray")


def test_critic_only_for_algorithms_that_train_one():
    from wizard.verlspec.algorithms import ALGORITHMS

    for name, algo in ALGORITHMS.items():
        assert ("critic_model" in asked(algorithm=name)) == algo.critic, name


def test_reward_model_and_function_only_when_chosen():
    assert "reward_model" in asked(reward="model") and "reward_function" not in asked(reward="model")
    assert "reward_function" in asked(reward="function") and "reward_model" not in asked(reward="function")


def test_lora_not_asked_with_megatron():
    assert "lora_rank" not in asked(train_backend="megatron") and "lora_rank" in asked(train_backend="fsdp2")


def test_model_size_asked_only_when_unknown(tmp_path):
    assert "model_params_b" not in asked(model="Qwen/Qwen2.5-7B-Instruct")
    assert "model_params_b" not in asked(model="someone/my-3b-chat")  # size in the name
    assert "model_params_b" in asked(model="someone/policy")
    local = tmp_path / "m"
    local.mkdir()
    (local / "config.json").write_text('{"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, '
                                       '"num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100}')
    assert "model_params_b" not in asked(model=str(local))


def test_local_data_file_questions():
    assert {"question_field", "answer_field", "answer_format"} <= set(asked(dataset="data/qa.csv"))
    assert not {"question_field", "answer_field", "answer_format"} & set(asked(dataset="math"))


# --- parse ----------------------------------------------------------------------------------------------------


def test_parse_types_ranges_and_optional_blanks():
    assert parse(BY_FIELD["gpus_per_node"], " 4 ") == (4, None)
    assert parse(BY_FIELD["gpus_per_node"], "four")[1].startswith("a whole number")
    value, error = parse(BY_FIELD["gpus_per_node"], "17")
    assert value is None and "[VI102]" in error and "≤ 16" in error
    assert parse(BY_FIELD["gpu_memory_gb"], "24.5") == (24.5, None)
    assert parse(BY_FIELD["gpu_memory_gb"], "lots")[1].startswith("a number")
    assert parse(BY_FIELD["samples_per_prompt"], "") == (None, None)  # optional: verl-init chooses
    assert parse(BY_FIELD["model"], "")[1] == "an answer is needed"
    assert "[VI102]" in parse(BY_FIELD["k8s_namespace"], "Not_DNS")[1]
    assert "[VI102]" in parse(BY_FIELD["reward_function"], "score.py")[1]
    assert "[VI510]" in parse(BY_FIELD["dataset"], "squad")[1] and parse(BY_FIELD["dataset"], "x.parquet") == ("x.parquet", None)


# --- defaults ----------------------------------------------------------------------------------------------------


def _probes(gpus: GpuReport | None = None, ray: RayReport | None = None) -> Probes:
    return Probes(gpus or GpuReport(False, "no NVIDIA GPU found"),
                  ray or RayReport("http://127.0.0.1:8265", "default", False), HostReport(memory_gb=256.0))


def test_defaults_without_probes_are_the_field_defaults():
    ctx = Context()
    for q in QUESTIONS:
        if q.field in ("prompts_per_step", "lora_rank"):
            continue  # planner-derived
        d = default_for(q, ctx)
        if q.optional:
            assert d is None, q.field
        elif q.field == "nnodes":
            assert d == 1
        else:
            assert d == Answers.model_fields[q.field].get_default(call_default_factory=True), q.field
    assert default_for(BY_FIELD["nnodes"], Context(answers={"cluster": "kuberay"})) == 2


def test_a_given_answer_is_the_default_when_asked_again():
    assert default_for(BY_FIELD["gpus_per_node"], Context(answers={"gpus_per_node": 3})) == 3


def test_ray_probe_defaults(monkeypatch):
    from wizard.env.cluster import Node, Observed

    obs = Observed("http://h:8265", "2.60.0", [Node("a", "10.0.0.1", True, True, 0, 8),
                                               Node("b", "10.0.0.2", True, False, 8, 64),
                                               Node("c", "10.0.0.3", True, False, 4, 64)])
    ray = RayReport("http://h:8265", "RAY_ADDRESS", True, observed=obs)
    ctx = Context(probes=_probes(ray=ray))
    assert qs.default_cluster(ctx) == "ray"
    ctx.answers["cluster"] = "ray"
    assert qs.default_nnodes(ctx) == 2 and qs.default_gpus_per_node(ctx) == 4
    assert "VI747" in [p.rule for p in ray.findings()]
    not_explicit = RayReport("http://127.0.0.1:8265", "default", False, observed=Observed(
        "http://127.0.0.1:8265", "2.60.0", [Node("a", "127.0.0.1", True, True, 2, 8)]))
    assert qs.default_cluster(Context(probes=_probes(ray=not_explicit))) == "local"  # a one-node local head


def test_probe_fills_only_for_local_runs():
    from wizard.env.probe import Gpu

    g = GpuReport(True, gpus=[Gpu(0, "NVIDIA L40S", 48.3, 48.0)])
    ctx = Context(probes=_probes(gpus=g))
    assert qs.probed_gpu_type(ctx) == "L40S" and qs.probed_host_memory(ctx) == 256.0
    ctx.answers["cluster"] = "slurm"
    assert qs.probed_gpu_type(ctx) is None and qs.probed_host_memory(ctx) is None
    assert default_for(BY_FIELD["gpu_type"], ctx) == "L40S" and default_for(BY_FIELD["gpu_memory_gb"], ctx) == 48.3


def test_prompts_per_step_default_divides_for_any_gpu_count():
    from wizard.planner.pipeline import plan

    for gpus in (1, 2, 3, 5, 6, 7, 8, 12):
        ctx = Context(answers={"gpus_per_node": gpus, "gpu_memory_gb": 80}, base_dir="/r")
        p = qs.default_prompts_per_step(ctx)
        plan(Answers(gpus_per_node=gpus, gpu_memory_gb=80, prompts_per_step=p), base_dir="/r")  # does not raise
        assert abs(p - 256) <= qs._batch_step(ctx), (gpus, p)


def test_lora_default_follows_the_planner(monkeypatch):
    """32 when only LoRA fits (VI602 without it, none with it); 0 otherwise."""
    from wizard.planner import pipeline as planner

    def fake_plan(a, base_dir=None, topology=None, hints=True):
        if a.lora_rank == 0:
            raise WizardError([Problem("VI602", "error", ("model",), "does not fit", "or LoRA rank 32")])

    ctx = Context(answers={"gpus_per_node": 1, "gpu_memory_gb": 24, "model": "Qwen/Qwen2.5-7B-Instruct"}, base_dir="/r")
    assert qs.default_lora_rank(ctx) == 0  # the real planner: nothing fits, LoRA does not help
    monkeypatch.setattr(planner, "plan", fake_plan)
    assert qs.default_lora_rank(ctx) == 32 and "LoRA rank 32 does" in qs.lora_note(ctx)
    ctx.answers["lora_rank"] = 8
    assert default_for(BY_FIELD["lora_rank"], ctx) == 8


def test_a_broken_default_falls_back_to_the_field_default(monkeypatch):
    def boom(ctx):
        raise RuntimeError("probe bug")

    q = qs.Question("gpus_per_node", "int", "hardware", default=boom)
    assert default_for(q, Context()) == 8
